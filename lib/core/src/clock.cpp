// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/core/clock.hpp"

namespace smha {

TimePoint SteadyClock::now() const {
  return std::chrono::time_point_cast<Duration>(std::chrono::steady_clock::now());
}

const Clock& system_clock() {
  static const SteadyClock clock;
  return clock;
}

WallTime SteadyClock::wall_now() const {
  return std::chrono::system_clock::now();
}

}  // namespace smha
