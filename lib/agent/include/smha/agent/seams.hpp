// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// The narrow seams the agent acts through, besides the core Scheduler. The
// daemon implements them on asio, systemd and the OpenSM supervisor; the
// simulated fabric on its virtual clock.
#pragma once

#include <cstdint>
#include <functional>

#include "smha/core/alarm.hpp"
#include "smha/core/clock.hpp"
#include "smha/core/result.hpp"
#include "smha/core/scheduler.hpp"
#include "smha/sm/ha_machine.hpp"

namespace smha::fabric {
struct TakeoverReport;  // smha/fabric/takeover_report.hpp
}  // namespace smha::fabric

namespace smha::agent {


// Timers: smha::Scheduler (smha/core/scheduler.hpp), found here unqualified.

// The local OpenSM process. Every call returns at once; the effect shows in
// state() and in SMInfo polls. On failure nothing changed and Error says why.
class OpensmControl {
 public:
  using ExitHandler = std::function<void()>;
  virtual ~OpensmControl() = default;
  // Renders the config with `priority` and spawns OpenSM. Error "running" if it runs.
  virtual Status start(std::uint8_t priority) = 0;
  // SIGTERM (escalating to SIGKILL) or, with force, SIGKILL at once.
  virtual Status stop(bool force) = 0;
  // stop(force) then start(priority) once the old process is gone.
  virtual Status restart(std::uint8_t priority, bool force) = 0;
  // Renders the config with `priority` and SIGHUPs a running OpenSM.
  virtual Status set_priority(std::uint8_t priority) = 0;
  // Running from spawn until exit; Stopped after stop(); Exited after an exit
  // nobody asked for.
  virtual sm::ProcessState state() const = 0;
  // Called (on the event loop) when OpenSM ends without stop()/restart()
  // (state() Exited or Failed), and when the process a stop() ended is gone
  // (state() Stopped). Not for the old process of a restart().
  virtual void set_exit_handler(ExitHandler on_exit) = 0;
  // At smhad start, before the engine's first step: takes over an OpenSM left
  // running on our port (as start() would), keeping the priority it runs
  // with; true if one was (state() is then Running). The engine sets the
  // priority once OpenSM answers.
  virtual bool adopt_running() { return false; }
  // After every poll round: whether some SM answered MASTER anywhere on the
  // fabric (sm::EngineStatus::fabric_master). Supervision retries a crash loop
  // sooner while none does.
  virtual void fabric_master(bool answers) { (void)answers; }
};

// Where events, alarms and hooks go (journal, metrics, hook runner).
class EventSink : public AlarmSink {
 public:
  // A StateChanged event's evidence is its cause: the first other engine
  // event of the same step ("<kind>: <reason>"; not a priority_changed, which
  // follows the role), empty when that step had none.
  virtual void event(const sm::RecordEvent& e, TimePoint at) = 0;
  // alarm() and clear(): AlarmSink.
  virtual void hook(const sm::RunHook& h, TimePoint at) = 0;
  // Adapter failures (an action that could not be carried out).
  virtual void error(const Error& e, TimePoint at) = 0;
  // How a takeover or handover that made our SM the MASTER went.
  virtual void takeover_report(const fabric::TakeoverReport& report, TimePoint at) = 0;
  // The engine's role changed (sm::Decision::role_changes, in order).
  virtual void role_changed(const sm::RoleChange& change, TimePoint at) = 0;
};

}  // namespace smha::agent
