// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// Watchers: what a head watches on the fabric besides its polls, fed by the
// poll loop through PollListener (the loop's inputs -- discovery, the census
// -- stay with the loop): config drift (DriftMonitor, doc/drift.md), degraded
// links (LinkHealth) and the PMA error counters (PortErrors, doc/health.md),
// and the takeover report (TakeoverReporter, doc/takeover-report.md) with its
// MADs: the walk it asks for, the SA probe from MASTER on, the group check of
// the SA copy.
//
// What they send goes through the MadTransport and the census walk they are
// handed (WatchersSeams), never through the loop; their alarms through the
// AlarmSink, the reports to `report`. Error counters are read only while the
// engine says our SM is MASTER and has been for errors.start_after.
// Single-threaded on the Scheduler's loop.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "smha/core/scheduler.hpp"
#include "smha/core/alarm.hpp"
#include "smha/fabric/drift.hpp"
#include "smha/fabric/health.hpp"
#include "smha/fabric/poll_listener.hpp"
#include "smha/fabric/port_errors.hpp"
#include "smha/fabric/takeover_report.hpp"
#include "smha/mad/transport.hpp"
#include "smha/opensm/log_follower.hpp"

namespace smha::fabric {

struct WatchersConfig {
  // Whether census walks run (the agent's census.enabled): link health, the
  // error counters and the report's LID and MasterSMLID figures ride on
  // them, and are off without.
  bool walks = true;
  // Config drift between heads (doc/drift.md): inert until drift().set_own().
  DriftConfig drift;
  // Fabric health from the census walks (doc/health.md).
  HealthConfig health;
  // Error counters (doc/health.md): read while this head's OpenSM is MASTER.
  ErrorsConfig errors;
  // The takeover report (doc/takeover-report.md): opensm.routing_engine split
  // at commas (empty: OpenSM's default), whether OpenSM's log reaches
  // opensm_logged(), and the longest wait from MASTER to the report.
  std::vector<std::string> routing_engines;
  bool opensm_log = false;
  Duration report_deadline = seconds(30);
  // Whether the report asks our SA from MASTER on until it answers (off
  // where no SA runs), and the SA copy our OpenSM holds (the daemon's
  // continuity; unset: none).
  bool report_sa_probe = true;
  std::function<std::optional<SaCopyInfo>()> sa_copy;
};

// What the watchers run on; every reference must outlive them.
struct WatchersSeams {
  Scheduler& sched;
  mad::MadTransport& mad;
  AlarmSink& alarms;                 // config_drift, drift_unknown, link_degraded, link_errors
  // Each takeover report, once made.
  std::function<void(const TakeoverReport&, TimePoint at)> report;
  // Starts a census walk now (fabric::CensusDriver::start_walk): the report's
  // walk at SUBNET UP. Its result comes back through census_walked().
  std::function<void()> start_walk;
};

class Watchers final : public PollListener {
 public:
  // `own`: our port GUID; `peers`: name and port GUID of every polled peer.
  Watchers(WatchersConfig cfg, WatchersSeams seams, Guid own, std::vector<std::pair<std::string, Guid>> peers);
  ~Watchers() override;
  Watchers(const Watchers&) = delete;
  Watchers& operator=(const Watchers&) = delete;

  // Arms the drift check. Before start() rounds and engine steps are taken
  // in (the report's bookkeeping), but the report is not served (no walk, SA
  // probe or timer) and the error counters are not switched on.
  void start();
  // Cancels timers and the report's MADs (answers in flight are dropped),
  // stops drift (its record deleted), health and the error counters (their
  // alarms cleared).
  void stop();

  // PollListener
  void round_polled(const sm::PollRound& round, const std::optional<mad::PortInfo>& local_pi) override;
  void engine_stepped(std::span<const sm::RecordEvent> events, const sm::EngineStatus& status) override;
  void census_walked(const DiscoveryResult& walk) override;

  // A line of the local OpenSM's log that the takeover report reads.
  void opensm_logged(const opensm::LoggedEvent& e);

  const WatchersConfig& config() const { return cfg_; }
  DriftMonitor& drift() { return drift_; }
  const DriftMonitor& drift() const { return drift_; }
  const LinkHealth& health() const { return health_; }
  const PortErrors& errors() const { return errors_; }
  // The last takeover report (`report` got it too).
  const std::optional<TakeoverReport>& last_takeover() const { return reporter_.last(); }

 private:
  void serve_report();
  void probe_sa();
  void check_groups(std::vector<SaCopyInfo::Group> groups);
  void update_error_reading(const sm::EngineStatus& st);

  WatchersConfig cfg_;
  WatchersSeams seams_;
  bool running_ = false;
  std::shared_ptr<int> alive_;  // callbacks hold a weak_ptr: dropped after stop()/destruction
  Lid own_lid_;                 // our port's LID, from the last round that read its PortInfo
  DriftMonitor drift_;
  LinkHealth health_;
  PortErrors errors_;
  std::optional<TimePoint> master_since_;  // our OpenSM MASTER and the engine Master since
  TakeoverReporter reporter_;
  std::optional<Scheduler::TimerId> report_timer_;
  std::optional<Scheduler::TimerId> sa_probe_timer_;
  int sa_probes_in_flight_ = 0;
};

}  // namespace smha::fabric
