// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// The timer seam. Everything in smha that waits (the agent's polls, OpenSM
// supervision's backoff and stop timeouts, the hook runner's timeouts) waits
// through a Scheduler. smhad's is os::AsioScheduler (asio steady_timers on its
// io_context); the simulated fabric's is sim::EventQueue on a virtual clock;
// unit tests bring their own.
#pragma once

#include <cstdint>
#include <functional>
#include <utility>

#include "smha/core/clock.hpp"

namespace smha {

// Timers on the owner's single event loop. now() is the time timers are
// scheduled against. Callbacks run on that loop, never from inside
// schedule_at(), so schedule_at(now(), fn) defers `fn` (asio's post).
// cancel() of an unknown or fired id is a no-op.
class Scheduler {
 public:
  using TimerId = std::uint64_t;
  virtual ~Scheduler() = default;
  virtual TimePoint now() const = 0;
  virtual TimerId schedule_at(TimePoint when, std::function<void()> fn) = 0;
  virtual void cancel(TimerId id) = 0;
  // Sugar over schedule_at().
  TimerId schedule_in(Duration d, std::function<void()> fn) { return schedule_at(now() + d, std::move(fn)); }
  TimerId post(std::function<void()> fn) { return schedule_at(now(), std::move(fn)); }
};

}  // namespace smha
