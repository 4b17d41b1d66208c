// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// One `handover` control call from the request to its reply
// (doc/control-protocol.md, method handover). It ends at the first of:
//   - the engine's outcome of the request (agent::Agent::request_handover's
//     callback): handover_done, handover_rolled_back or handover_rejected;
//   - a break of the plan in its MastershipWindow (fed with every SMInfo and
//     local PortInfo answer and every event while the call runs);
//   - the deadline (handover_bound + 2 s in smhad): outcome "timeout".
// The reply is sent once, from the Scheduler after the step that ended the
// call, so the rest of that engine step's events are judged too. The window's
// verdict wins over the engine's "done". Single-threaded (the Scheduler's loop).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "smha/control/protocol.hpp"
#include "smha/core/clock.hpp"
#include "smha/core/scheduler.hpp"
#include "smha/head/mastership_window.hpp"
#include "smha/head/event_log.hpp"
#include "smha/sm/ha_machine.hpp"

namespace smha::head {

class HandoverCall : public std::enable_shared_from_this<HandoverCall> {
 public:
  // Who the engine sees as MASTER when the reply is made (data.master).
  using Master = std::function<std::optional<Guid>()>;
  // Called once with the reply.
  using Finish = std::function<void(control::Reply)>;

  // The call's time counts from here, on `sched`'s clock; `sched` must
  // outlive it. Make it with std::make_shared.
  HandoverCall(Scheduler& sched, std::shared_ptr<MastershipWindow> window, Master master, Finish finish);
  ~HandoverCall();
  HandoverCall(const HandoverCall&) = delete;
  HandoverCall& operator=(const HandoverCall&) = delete;

  // Arms the deadline, `limit` from when the call was made.
  void start(Duration limit);
  // The engine's outcome of the request (an sm::RecordEvent of kind
  // HandoverDone, HandoverRolledBack or HandoverRejected).
  void outcome(const sm::RecordEvent& e);
  // An event recorded while the call runs: fed to the window.
  void event(const EventRecord& e);
  // The window was fed (an SMInfo or PortInfo answer): a violation ends the call.
  void check();
  bool finished() const { return finished_; }
  const std::shared_ptr<MastershipWindow>& window() const { return window_; }

 private:
  void end_soon();
  void end();

  Scheduler& sched_;
  std::shared_ptr<MastershipWindow> window_;
  Master master_;
  Finish finish_;
  TimePoint t0_;
  std::optional<Scheduler::TimerId> deadline_;
  std::string outcome_;  // "done", "<kind>: <reason>" of a failed handover, or empty
  bool end_posted_ = false;
  bool finished_ = false;
};

}  // namespace smha::head
