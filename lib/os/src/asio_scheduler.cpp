// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/os/asio_scheduler.hpp"

#include <boost/asio/post.hpp>

namespace smha::os {

AsioScheduler::~AsioScheduler() {
  for (auto& [id, t] : timers_) t->cancel();
}

Scheduler::TimerId AsioScheduler::schedule_at(TimePoint when, std::function<void()> fn) {
  const TimerId id = next_++;
  auto timer = std::make_unique<boost::asio::steady_timer>(io_);
  // Map `when` onto the steady clock the timer runs on, without clamping a past
  // time to "now": a timer already due stays earlier than a later one armed
  // before it, so timers fire in the order of their times even when the loop
  // was slow to arm them (a clamp once fired {3, 1, 0} under load).
  timer->expires_at(std::chrono::steady_clock::now() + (when - clock_.now()));
  timer->async_wait([this, id, fn = std::move(fn)](const boost::system::error_code& ec) {
    if (ec) return;  // cancelled; the entry is already gone
    auto it = timers_.find(id);
    if (it == timers_.end()) return;
    auto keep = std::move(it->second);  // the handler runs inside this timer's wait
    timers_.erase(it);
    fn();
  });
  timers_.emplace(id, std::move(timer));
  return id;
}

void AsioScheduler::cancel(TimerId id) {
  auto it = timers_.find(id);
  if (it == timers_.end()) return;
  it->second->cancel();
  // The cancelled handler still runs (operation_aborted); keep the timer object
  // alive until then by handing it to the io_context.
  auto t = std::shared_ptr<boost::asio::steady_timer>(std::move(it->second));
  timers_.erase(it);
  boost::asio::post(io_, [t] {});
}

}  // namespace smha::os
