// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/head/failover_stats.hpp"

#include "smha/sm/ha_machine.hpp"

namespace smha::head {

void FailoverStats::observe(const EventRecord& e) {
  using sm::EventKind;
  const auto k = e.type == EventType::Engine ? e.engine_kind : std::nullopt;
  if (k == EventKind::TakeoverStarted || k == EventKind::HandoverStarted) {
    started_ = e.at;
    episode_ = k == EventKind::TakeoverStarted ? "takeover" : e.preempt ? "preempt" : "handover";
    change_ = MastershipChange{episode_, e.evidence.empty() ? e.reason : e.reason + ": " + e.evidence, "running",
                               e.wall, std::nullopt};
    change_at_ = e.at;
    return;
  }
  const bool ended = k == EventKind::TakeoverDone || k == EventKind::HandoverDone;
  const bool failed = k == EventKind::TakeoverAborted || k == EventKind::HandoverRolledBack;
  if ((ended || failed) && change_ && change_->outcome == "running") {
    change_->outcome = ended ? "done" : k == EventKind::TakeoverAborted ? "aborted" : "rolled_back";
    if (e.at >= change_at_) change_->duration_s = std::chrono::duration<double>(e.at - change_at_).count();
  }
  if (failed) {
    started_.reset();
    episode_.clear();
    return;
  }
  if (e.type != EventType::Transition) return;
  if (e.to == SmState::Master) {
    ++by_reason_[episode_.empty() ? "start" : episode_];
    if (started_ && e.at >= *started_) last_ = std::chrono::duration<double>(e.at - *started_).count();
  }
  started_.reset();
  episode_.clear();
}

}  // namespace smha::head
