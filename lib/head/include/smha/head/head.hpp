// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// Head: what one head is, on the seams its host gives it (doc/architecture.md,
// "A head and its hosts"). From a configuration and its plan (plan.hpp) it
// builds and runs:
//   - the agent (poll loop, engine, discovery, census) over a
//     RecordingTransport of the host's port, and the watchers that consume
//     its rounds (fabric::Watchers: drift, link health, error counters, the
//     takeover report);
//   - OpenSM's supervision (agent::SupervisedOpensmControl) and its watch
//     (OpensmWatch: the opensm_failed alarm, the opensm_restart hooks), or the
//     observe-only control;
//   - the event log (LogEventSink) with its journal, state_dir/events.jsonl;
//   - OpenSM's log follower (opensm_state events);
//   - the maintenance hold, the `handover` call and the drill, with the
//     mastership window they are judged by;
//   - LID continuity (state_dir's guid2lid while our OpenSM is STANDBY);
//   - its typed status (HeadStatus).
// Every timer waits through the host's Scheduler, every time is the host's
// Clock, every file goes through its FileSystem, every process through its
// ProcessRunner, every MAD through its MadTransport: smhad hosts a Head on
// asio, libibumad and POSIX (lib/service); a test can host one on a manual
// clock and in-memory files. Single-threaded (the Scheduler's loop).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "smha/agent/agent.hpp"
#include "smha/agent/supervised_opensm_control.hpp"
#include "smha/config/config.hpp"
#include "smha/config/keys.hpp"
#include "smha/control/protocol.hpp"
#include "smha/core/clock.hpp"
#include "smha/core/result.hpp"
#include "smha/core/scheduler.hpp"
#include "smha/fabric/lid_continuity.hpp"
#include "smha/fabric/watchers.hpp"
#include "smha/head/drill.hpp"
#include "smha/head/event_journal.hpp"
#include "smha/head/event_log.hpp"
#include "smha/head/failover_stats.hpp"
#include "smha/head/handover.hpp"
#include "smha/head/head_events.hpp"
#include "smha/head/head_status.hpp"
#include "smha/head/mastership_window.hpp"
#include "smha/head/plan.hpp"
#include "smha/head/recording_transport.hpp"
#include "smha/opensm/log_follower.hpp"
#include "smha/opensm/probe.hpp"
#include "smha/os/file_system.hpp"
#include "smha/os/process_runner.hpp"

namespace smha::head {

// What a head runs on; every reference must outlive the Head.
struct HeadSeams {
  Scheduler& sched;
  const Clock& clock;
  os::FileSystem& fs;
  mad::MadTransport& port;            // the head's IB port
  std::uint8_t local_port = 1;        // its port number (its own SMA answers PortInfo)
  os::ProcessRunner* opensm = nullptr;  // OpenSM's processes; nullptr when observing
  Hooks& hooks;
  // The kernel shows OpenSM's process `pid` stopped (SIGSTOP): a hung OpenSM.
  std::function<bool(int pid)> process_stopped = [](int) { return false; };
  // Something status shows changed (an engine event, an alarm, OpenSM's state).
  std::function<void()> changed = [] {};
  // For a host that checks the head from outside (the simulation): every
  // engine output, before the event log's flood guard; a decorator of the
  // OpenSM control the engine drives; every OpenSM supervision status, after
  // the head's own watch has seen it.
  agent::EventSink* tap = nullptr;
  std::function<std::unique_ptr<agent::OpensmControl>(agent::OpensmControl& inner)> wrap_control;
  std::function<void(const opensm::SupervisorStatus&)> opensm_changed;
};

struct HeadOptions {
  Guid own_guid;
  bool observe = false;          // poll and report only: never start, stop, signal or Set anything
  opensm::Capabilities caps;     // the OpenSM binary's (unused when observing)
  std::string version;           // smhad's, for status
  // Publish and compare our configuration digests (doc/drift.md); off only
  // where a host keeps the SA out of its MAD sequence (the seeded simulation).
  bool drift = true;
};

class Head final : public DrillHost {
 public:
  // `plan` is make_plan's for `config` with these options. Nothing runs until start().
  Head(config::Config config, Plan plan, HeadOptions options, HeadSeams seams);
  ~Head() override;
  Head(const Head&) = delete;
  Head& operator=(const Head&) = delete;

  // The event history from state_dir/events.jsonl (restored, then appended
  // to), the directories OpenSM needs, the agent with its watchers and
  // OpenSM's log follower.
  void start();
  // The SA copy our OpenSM holds, for the takeover report (the daemon's
  // continuity; unset: none).
  void set_sa_copy_source(std::function<std::optional<fabric::SaCopyInfo>()> fn) { sa_copy_source_ = std::move(fn); }
  // Polling stops and the head's timers are cancelled; OpenSM keeps running.
  void stop();

  // Start-up as smhad's READY=1 waits for it: the first round that polled
  // every peer (a GUID-only one once discovery found it or gave up), then our
  // SM answering (OpenSM past its initialisation), an adopted OpenSM, or
  // `grace` since the Head was made. OpensmFailed: supervision gave up on
  // OpenSM before that (opensm()->reason says why).
  enum class Readiness : std::uint8_t { NotYet, Ready, OpensmFailed };
  Readiness readiness(Duration grace);

  // The maintenance hold (doc/control-protocol.md, hold/release): the engine
  // keeps observing but carries out none of its actions; it expires after `d`.
  void hold(Duration d, std::string reason, uid_t by_uid);
  bool release();  // false: no hold was active
  const HoldState& hold_state() const { return hold_; }

  // The `handover` call: to the peer named `to`, else the best standby.
  // `reply` gets the verdict once (refusals at once, nothing sent).
  void handover(const std::optional<std::string>& to, uid_t by_uid, std::function<void(control::Reply)> reply);
  DrillRunner& drill() { return *drill_; }

  // A reloaded configuration, already checked: `plan` is make_plan's for it
  // (opensm.conf rendered there, once), `changes` config::changed_keys(config(),
  // next) with no key that needs a smhad restart. The plan's opensm.conf, at
  // the priority OpenSM runs at, is applied (a key that needs OpenSM's
  // restart restarts it; nothing is rendered again), and the engine (the
  // agent and its watchers) is re-created when a changed key is the engine's
  // (KeyInfo::engine). The error leaves everything as it was.
  struct Reloaded {
    // opensm_action, opensm_change, changed_keys (opensm.conf's), warnings,
    // engine_restarted, config_keys (the YAML's, as written) ...
    nlohmann::json data;
    std::string text;     // the reply's and the RELOAD event's text
  };
  Result<Reloaded> reload(config::Config next, Plan plan, const std::vector<config::KeyChange>& changes);

  // `fabric` false: without the census, OpenSM, LID continuity and drift
  // parts only the metrics use.
  HeadStatus status(bool fabric) const;

  // A line of OpenSM's log its host read itself (the simulated OpenSM writes
  // no file): taken as the log follower takes each line it reads.
  void opensm_logged(const opensm::LoggedEvent& e);

  // What its host shows and exports.
  const config::Config& config() const { return config_; }
  agent::Agent& agent() { return *agent_; }
  const agent::Agent& agent() const { return *agent_; }
  // Drift, link health, error counters and the takeover report (made with
  // the agent, by start() and by a reload that restarts the engine).
  fabric::Watchers& watchers() { return *watchers_; }
  const fabric::Watchers& watchers() const { return *watchers_; }
  // The SM census and its walks, as the agent keeps them.
  const fabric::CensusDriver& census() const { return agent_->census_driver(); }
  const RecordingTransport& mad() const { return *mad_; }
  const opensm::Capabilities& caps() const { return options_.caps; }
  // OpenSM's supervision; nullptr when observing.
  const opensm::SupervisorStatus* opensm() const;
  const fabric::LidContinuity* lid_continuity() const { return lid_continuity_.get(); }
  LogEventSink& log() { return sink_; }
  // Where an alarm raised beside the agent goes (status, events, hooks, metrics), as the agent's own.
  AlarmSink& alarm_sink();
  const LogEventSink& log() const { return sink_; }
  const FailoverStats& failovers() const { return failovers_; }
  std::uint64_t suppressed_events() const { return events_->suppressed_total(); }
  TimePoint started_at() const { return started_at_; }
  // A head's configured name ("" for an SM that is not one).
  std::string head_name(Guid guid) const;
  // The local state and rendered priority for the hooks, and the peer they name.
  HeadEventSink::Snapshot snapshot() const;

  // DrillHost
  HeadStatus status() override { return status(false); }
  sm::EngineStatus engine() const override { return agent_->status(); }
  Guid own_guid() const override { return options_.own_guid; }
  void request_handover(std::optional<Guid> target, HandoverDone done) override {
    agent_->request_handover(target, std::move(done));
  }
  bool handover_running() const override { return handover_ != nullptr; }
  const LogEventSink& events() const override { return sink_; }
  std::shared_ptr<MastershipWindow> open_window() override;
  void close_window() override;

 private:
  void start_agent(agent::AgentConfig cfg);
  void start_lid_continuity();
  void update_drift_digests();
  void follow_opensm_log();
  void read_opensm_log();
  void expire_hold();
  EventNode event_node(Guid guid) const;

  config::Config config_;
  Plan plan_;
  HeadOptions options_;
  HeadSeams seams_;
  std::unique_ptr<RecordingTransport> mad_;
  LogEventSink sink_;
  std::unique_ptr<HeadEventSink> events_;
  std::unique_ptr<agent::EventSink> tee_;  // events_ and the host's tap
  std::unique_ptr<OpensmWatch> osm_watch_;
  std::unique_ptr<agent::SupervisedOpensmControl> supervised_;
  ObserveOnlyOpensmControl observe_control_;
  std::unique_ptr<agent::OpensmControl> wrapped_;  // the host's decorator of *control_
  agent::OpensmControl* control_ = nullptr;
  std::unique_ptr<fabric::LidContinuity> lid_continuity_;  // before agent_: its walks feed it
  unsigned lid_lmc_ = 0;
  std::unique_ptr<agent::Agent> agent_;
  std::unique_ptr<fabric::Watchers> watchers_;  // agent_'s listener: its walks start through agent_
  std::function<std::optional<fabric::SaCopyInfo>()> sa_copy_source_;
  HoldState hold_;
  std::optional<Scheduler::TimerId> hold_timer_;
  TimePoint started_at_{};
  WallTime started_wall_{};
  WallTime config_loaded_wall_{};  // start, then each successful reload
  // The round count when every GUID-only peer was first resolved (or not found).
  std::optional<std::uint64_t> routes_settled_round_;
  std::shared_ptr<HandoverCall> handover_;  // at most one; never at once with a drill
  std::unique_ptr<EventJournal> journal_;
  std::string journal_error_;
  FailoverStats failovers_;
  std::unique_ptr<DrillRunner> drill_;
  // OpenSM's log file, read each poll interval: every SM state change OpenSM
  // logged becomes an "opensm_state" event, however short it was.
  std::unique_ptr<opensm::OpensmLogFollower> osm_log_;
  std::optional<Scheduler::TimerId> osm_log_timer_;
  std::string osm_log_state_ = "UNKNOWN";  // the last state the log showed
  // The handover's or drill's window, fed with every SMInfo and local PortInfo
  // answer while one runs (they never run at once).
  std::shared_ptr<MastershipWindow> window_;
  ActCountRates rates_;  // every SM's ActCount rate as STANDBY, for each window's start
  bool stopped_ = false;
};

}  // namespace smha::head
