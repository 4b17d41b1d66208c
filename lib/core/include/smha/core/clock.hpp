// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// All time comes from an injected Clock. Only src/clock.cpp reads the system clock.
#pragma once

#include <chrono>

namespace smha {

using Duration = std::chrono::nanoseconds;
using TimePoint = std::chrono::time_point<std::chrono::steady_clock, Duration>;
using std::chrono::milliseconds;
using std::chrono::seconds;
using std::chrono::microseconds;

class Clock {
 public:
  virtual ~Clock() = default;
  virtual TimePoint now() const = 0;
};

// CLOCK_MONOTONIC via std::chrono::steady_clock.
class SteadyClock final : public Clock {
 public:
  TimePoint now() const override;
};

// A clock that moves only when told to (tests and the simulated fabric).
class ManualClock final : public Clock {
 public:
  explicit ManualClock(TimePoint start = TimePoint{}) : now_(start) {}
  TimePoint now() const override { return now_; }
  void advance(Duration d) { now_ += d; }
  void set(TimePoint t) { now_ = t; }

 private:
  TimePoint now_;
};

// Milliseconds as a double, for logs and reports.
inline double to_ms(Duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

}  // namespace smha
