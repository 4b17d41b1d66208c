// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// A virtual clock with an event queue: the simulated fabric's only notion of time.
// Events at the same instant run in the order they were scheduled.
//
// A binary heap of (time, sequence) keys over a slab of callbacks: scheduling and
// running an event allocate nothing once the slab has grown (a seeded property run
// schedules millions). A timer's id names its slot and the scheduling that owns it,
// so a cancel finds the slot at once and a stale id (already run, or cancelled)
// finds it owned by someone else. A cancelled event's callback is destroyed at
// once; its key stays in the heap and is skipped when it surfaces.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "smha/core/clock.hpp"
#include "smha/core/scheduler.hpp"

namespace smha::sim {

class EventQueue final : public Scheduler {
 public:
  TimePoint now() const override { return clock_.now(); }
  TimerId schedule_at(TimePoint when, std::function<void()> fn) override;
  void cancel(TimerId id) override;

  // Runs events up to and including `until`, then sets the clock to `until`.
  void run_until(TimePoint until);
  // Runs until `pred()` holds (checked after each event) or `until`; true if it held.
  bool run_until(TimePoint until, const std::function<bool()>& pred);
  std::size_t pending() const { return live_; }
  std::uint64_t executed() const { return executed_; }
  const ManualClock& clock() const { return clock_; }

 private:
  struct Key {
    TimePoint when;
    std::uint64_t seq;  // scheduling order: ties at one instant run in it
    TimerId id;
  };
  static bool later(const Key& a, const Key& b) {
    return a.when != b.when ? a.when > b.when : a.seq > b.seq;
  }
  struct Slot {
    std::function<void()> fn;
    TimerId owner = 0;  // the id scheduled here now; 0 when free
  };
  static std::uint32_t slot_index(TimerId id) { return static_cast<std::uint32_t>(id); }
  bool scheduled(TimerId id) const {
    const auto i = slot_index(id);
    return i < slots_.size() && slots_[i].owner == id;
  }
  void release(std::uint32_t slot);
  // Drops the keys of cancelled events from the top of the heap.
  void skip_cancelled();

  ManualClock clock_;
  std::vector<Key> heap_;
  std::vector<Slot> slots_;
  std::vector<std::uint32_t> free_;
  std::uint64_t next_seq_ = 1;
  std::size_t live_ = 0;
  std::uint64_t executed_ = 0;
};

}  // namespace smha::sim
