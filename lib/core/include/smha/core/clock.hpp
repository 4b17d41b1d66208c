// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// All time comes from an injected Clock. Only src/clock.cpp reads the system
// clocks: now() is monotonic (timers, durations), wall_now() is the calendar
// time people read (event times, "since").
#pragma once

#include <chrono>

namespace smha {

using Duration = std::chrono::nanoseconds;
using TimePoint = std::chrono::time_point<std::chrono::steady_clock, Duration>;
using std::chrono::milliseconds;
using std::chrono::seconds;
using std::chrono::microseconds;
using WallTime = std::chrono::system_clock::time_point;

class Clock {
 public:
  virtual ~Clock() = default;
  virtual TimePoint now() const = 0;
  virtual WallTime wall_now() const = 0;
};

// CLOCK_MONOTONIC via std::chrono::steady_clock; CLOCK_REALTIME via system_clock.
class SteadyClock final : public Clock {
 public:
  TimePoint now() const override;
  WallTime wall_now() const override;
};

// The machine's clocks, for a default argument where a caller need not inject one.
const Clock& system_clock();

// The wall time a virtual clock's zero stands for: 2026-01-01T00:00:00Z.
inline constexpr WallTime kVirtualEpoch{std::chrono::seconds(1767225600)};

// A clock that moves only when told to (tests and the simulated fabric). Its
// wall time moves with it, from `wall_start` at `start`.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(TimePoint start = TimePoint{}, WallTime wall_start = kVirtualEpoch)
      : now_(start), wall_at_zero_(wall_start - std::chrono::duration_cast<WallTime::duration>(start.time_since_epoch())) {}
  TimePoint now() const override { return now_; }
  WallTime wall_now() const override {
    return wall_at_zero_ + std::chrono::duration_cast<WallTime::duration>(now_.time_since_epoch());
  }
  void advance(Duration d) { now_ += d; }
  void set(TimePoint t) { now_ = t; }

 private:
  TimePoint now_;
  WallTime wall_at_zero_;
};

// Milliseconds as a double, for logs and reports.
inline double to_ms(Duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

}  // namespace smha
