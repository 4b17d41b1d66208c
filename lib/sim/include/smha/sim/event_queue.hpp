// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// A virtual clock with an event queue: the simulated fabric's only notion of time.
// Events at the same instant run in the order they were scheduled.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <utility>

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
  std::size_t pending() const { return queue_.size(); }
  std::uint64_t executed() const { return executed_; }
  const ManualClock& clock() const { return clock_; }

 private:
  ManualClock clock_;
  std::map<std::pair<TimePoint, TimerId>, std::function<void()>> queue_;
  std::map<TimerId, TimePoint> index_;
  TimerId next_ = 1;
  std::uint64_t executed_ = 0;
};

}  // namespace smha::sim
