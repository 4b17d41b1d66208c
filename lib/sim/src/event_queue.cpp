// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/sim/event_queue.hpp"

namespace smha::sim {

EventQueue::TimerId EventQueue::schedule_at(TimePoint when, std::function<void()> fn) {
  if (when < now()) when = now();
  const TimerId id = next_++;
  queue_.emplace(std::make_pair(when, id), std::move(fn));
  index_.emplace(id, when);
  return id;
}

void EventQueue::cancel(TimerId id) {
  auto it = index_.find(id);
  if (it == index_.end()) return;
  queue_.erase({it->second, id});
  index_.erase(it);
}

void EventQueue::run_until(TimePoint until) {
  run_until(until, [] { return false; });
}

bool EventQueue::run_until(TimePoint until, const std::function<bool()>& pred) {
  if (pred()) return true;
  while (!queue_.empty() && queue_.begin()->first.first <= until) {
    auto node = queue_.extract(queue_.begin());
    index_.erase(node.key().second);
    clock_.set(node.key().first);
    ++executed_;
    node.mapped()();
    if (pred()) return true;
  }
  if (clock_.now() < until) clock_.set(until);
  return false;
}

}  // namespace smha::sim
