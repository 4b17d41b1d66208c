// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// FailoverStats: this head's masterships by cause and its last takeover or
// handover, from its event stream.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "smha/core/clock.hpp"
#include "smha/head/event_log.hpp"

namespace smha::head {

// Counts the times the local SM became MASTER, by cause, and how long the last
// takeover took, from the event stream (LogEventSink listener). The cause is the
// engine decision the transition ended:
//   "takeover"  takeover_started (the master was lost),
//   "handover"  handover_started by request (smctl handover / drill pulling here),
//   "preempt"   handover_started by the preempt failback policy,
//   "start"     no decision: OpenSM won the election on its own (start-up).
// Duration: from that decision to the transition to MASTER.
//
// Also keeps the last takeover or handover this head's engine ran, whichever
// way it went (smctl status "Last change"): started by takeover_started or
// handover_started, ended by takeover_done / takeover_aborted /
// handover_done / handover_rolled_back.
struct MastershipChange {
  std::string kind;      // "takeover", "handover", "preempt"
  std::string reason;    // the decision's reason and evidence
  std::string outcome;   // "running", "done", "aborted", "rolled_back"
  std::chrono::system_clock::time_point started{};
  std::optional<double> duration_s;  // once ended
};

class FailoverStats {
 public:
  void observe(const EventRecord& e);
  const std::map<std::string, std::uint64_t>& by_reason() const { return by_reason_; }
  std::optional<double> last_takeover_seconds() const { return last_; }
  const std::optional<MastershipChange>& last_change() const { return change_; }

 private:
  std::map<std::string, std::uint64_t> by_reason_;
  std::optional<TimePoint> started_;
  std::string episode_;  // the cause of the decision in progress
  std::optional<double> last_;
  std::optional<MastershipChange> change_;
  TimePoint change_at_{};
};

}  // namespace smha::head
