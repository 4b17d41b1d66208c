// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// The `drill` control method (doc/control-protocol.md): a planned failover and
// failback through the engine's own planned handover (sm::HandoverRequest), with
// the time of each leg and a pass/fail verdict.
//
//   leg 1 "failover": on the MASTER head, Agent::request_handover(peer) (push);
//                     done when another head answers MASTER and this head's
//                     engine is back in role standby with its SM STANDBY.
//   leg 2 "failback": Agent::request_handover(nullopt) on this now-standby head
//                     (pull); done when this head's SM answers MASTER again.
//   verdict "pass":   both legs done within their bound, no alarm raised during
//                     the drill, afterwards exactly one MASTER among the heads
//                     (this one) with the peer back in STANDBY, for all of
//                     DrillOptions::stable, and over the whole window no
//                     mastership outside the plan (this head, the target, this
//                     head) on any head: MastershipWindow's verdict, the one
//                     `smctl handover` replies with too.
//
// The drill refuses to start (nothing is sent) unless the fabric is healthy; see
// check_drill(). Single-threaded (the io_context's thread).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "smha/control/server.hpp"
#include "smha/core/scheduler.hpp"
#include "smha/head/head_status.hpp"
#include "smha/head/mastership_window.hpp"
#include "smha/head/event_log.hpp"
#include "smha/sm/ha_machine.hpp"

namespace smha::head {

// Why a drill was refused: `code` is the reply's result, `reason` a stable word
// for scripts (data.refused), `text` the message for humans.
struct DrillRefusal {
  control::ResultCode code = control::ResultCode::Conflict;
  std::string reason;  // observe, hold, busy, alarms, not_master, no_standby, not_found, bad_request
  std::string text;
};

// The preconditions, checked on this head's status: not in observe mode, no
// hold, no handover or drill running (`busy`), no active alarm, this head's
// role master with its SM MASTER, and a live standby (a peer whose last poll
// answered STANDBY) -- `to`, if given, must name one. Pure.
std::optional<DrillRefusal> check_drill(const HeadStatus& status, const std::optional<std::string>& to, bool busy);

// What the drill needs from the daemon.
class DrillHost {
 public:
  virtual ~DrillHost() = default;
  virtual HeadStatus status() = 0;             // what the status method's reply is made from
  virtual sm::EngineStatus engine() const = 0;  // the current engine's status
  virtual Guid own_guid() const = 0;
  // agent::Agent::request_handover: `done` gets the engine's outcome
  // (handover_done, handover_rolled_back or handover_rejected), if any.
  using HandoverDone = std::function<void(const sm::RecordEvent& outcome)>;
  virtual void request_handover(std::optional<Guid> target, HandoverDone done) = 0;
  virtual bool handover_running() const = 0;   // a `handover` call is in progress
  virtual const LogEventSink& events() const = 0;
  // A MastershipWindow opened now, which the host feeds with every SMInfo and
  // local PortInfo answer its poller gets until close_window().
  virtual std::shared_ptr<MastershipWindow> open_window() = 0;
  virtual void close_window() = 0;
};

struct DrillOptions {
  std::chrono::milliseconds leg_timeout{7000};     // per leg (handover_bound + 2 s in smhad)
  std::chrono::milliseconds settle_timeout{5000};  // for the roles to settle after a leg
  std::chrono::milliseconds check_interval{10};    // how often progress is checked
  // After the failback: this head must stay the one MASTER, the peer STANDBY and
  // no alarm raised for this long (handover_bound + 1 s in smhad), so a head that
  // takes mastership back a little later fails the drill.
  std::chrono::milliseconds stable{6000};
};

class DrillRunner {
 public:
  // `sched` (its timers and its clock) and `host` must outlive this object.
  DrillRunner(Scheduler& sched, DrillHost& host, DrillOptions options = {});
  ~DrillRunner();
  DrillRunner(const DrillRunner&) = delete;
  DrillRunner& operator=(const DrillRunner&) = delete;

  // Registers "drill" (mutating, async) on `server`.
  Status attach(control::ControlServer& server);
  // params {"to": PEER} optional. Replies when the drill has ended:
  // ok with data.verdict "pass", error with "fail" (data says which check failed),
  // or the refusal (nothing done).
  void handle(const control::Call& call, control::Responder respond);
  // The same with a plain callback (called once, on the io_context's thread).
  void start(const nlohmann::json& params, uid_t uid, std::function<void(control::Reply)> reply);
  bool running() const { return run_ != nullptr; }
  void set_options(DrillOptions options) { options_ = options; }

 private:
  struct Run;
  void step();
  void request_leg(std::optional<Guid> target);
  void finish(bool pass, const std::string& why);
  double ms_since(TimePoint t0) const;
  void step_in(Duration d);

  Scheduler& sched_;
  DrillHost& host_;
  DrillOptions options_;
  std::shared_ptr<Run> run_;
  std::optional<Scheduler::TimerId> timer_;
};

}  // namespace smha::head
