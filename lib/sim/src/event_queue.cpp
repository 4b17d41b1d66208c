// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/sim/event_queue.hpp"

#include <algorithm>

namespace smha::sim {

EventQueue::TimerId EventQueue::schedule_at(TimePoint when, std::function<void()> fn) {
  if (when < now()) when = now();
  std::uint32_t slot;
  if (!free_.empty()) {
    slot = free_.back();
    free_.pop_back();
  } else {
    slot = static_cast<std::uint32_t>(slots_.size());
    slots_.emplace_back();
  }
  const std::uint64_t seq = next_seq_++;
  // Never 0: the sequence starts at 1 and fills the high half.
  const TimerId id = (seq << 32) | slot;
  slots_[slot] = Slot{std::move(fn), id};
  heap_.push_back(Key{when, seq, id});
  std::push_heap(heap_.begin(), heap_.end(), later);
  ++live_;
  return id;
}

void EventQueue::release(std::uint32_t slot) {
  slots_[slot] = Slot{};
  free_.push_back(slot);
  --live_;
}

void EventQueue::cancel(TimerId id) {
  if (!scheduled(id)) return;
  release(slot_index(id));
  skip_cancelled();
}

void EventQueue::skip_cancelled() {
  while (!heap_.empty() && !scheduled(heap_.front().id)) {
    std::pop_heap(heap_.begin(), heap_.end(), later);
    heap_.pop_back();
  }
}

void EventQueue::run_until(TimePoint until) {
  run_until(until, [] { return false; });
}

bool EventQueue::run_until(TimePoint until, const std::function<bool()>& pred) {
  if (pred()) return true;
  skip_cancelled();
  while (!heap_.empty() && heap_.front().when <= until) {
    const Key key = heap_.front();
    std::pop_heap(heap_.begin(), heap_.end(), later);
    heap_.pop_back();
    auto fn = std::move(slots_[slot_index(key.id)].fn);
    release(slot_index(key.id));
    clock_.set(key.when);
    ++executed_;
    fn();
    if (pred()) return true;
    skip_cancelled();
  }
  if (clock_.now() < until) clock_.set(until);
  return false;
}

}  // namespace smha::sim
