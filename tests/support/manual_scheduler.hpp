// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// A Scheduler on a manual clock for unit tests: timers run only inside
// run_until()/run_for(), in time order, the clock set to each timer's time.
#pragma once

#include <functional>
#include <map>
#include <utility>

#include "smha/core/clock.hpp"
#include "smha/core/scheduler.hpp"

namespace smha::test {

struct ManualScheduler : Scheduler {
  ManualClock clock;
  std::multimap<TimePoint, std::pair<TimerId, std::function<void()>>> q;
  TimerId next = 1;

  TimePoint now() const override { return clock.now(); }
  TimerId schedule_at(TimePoint t, std::function<void()> fn) override {
    q.emplace(t, std::make_pair(next, std::move(fn)));
    return next++;
  }
  void cancel(TimerId id) override {
    for (auto it = q.begin(); it != q.end(); ++it)
      if (it->second.first == id) {
        q.erase(it);
        return;
      }
  }
  // Runs every timer due by `t` (also those they schedule), then sets the clock to `t`.
  void run_until(TimePoint t) {
    while (!q.empty() && q.begin()->first <= t) {
      auto node = q.extract(q.begin());
      clock.set(node.key());
      node.mapped().second();
    }
    clock.set(t);
  }
  void run_for(Duration d) { run_until(clock.now() + d); }
};

}  // namespace smha::test
