// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// AsioScheduler: the Scheduler (smha/core/scheduler.hpp) on a
// boost::asio::io_context, one steady_timer per timer. now() reads the
// injected Clock; a time is mapped onto the steady clock the timers run on.
// One thread: use it from the io_context's thread.
#pragma once

#include <map>
#include <memory>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "smha/core/clock.hpp"
#include "smha/core/scheduler.hpp"

namespace smha::os {

class AsioScheduler final : public Scheduler {
 public:
  AsioScheduler(boost::asio::io_context& io, const Clock& clock) : io_(io), clock_(clock) {}
  // Cancels every pending timer (their callbacks never run).
  ~AsioScheduler() override;
  AsioScheduler(const AsioScheduler&) = delete;
  AsioScheduler& operator=(const AsioScheduler&) = delete;

  TimePoint now() const override { return clock_.now(); }
  TimerId schedule_at(TimePoint when, std::function<void()> fn) override;
  void cancel(TimerId id) override;
  std::size_t pending() const { return timers_.size(); }

 private:
  boost::asio::io_context& io_;
  const Clock& clock_;
  TimerId next_ = 1;
  std::map<TimerId, std::unique_ptr<boost::asio::steady_timer>> timers_;
};

}  // namespace smha::os
