// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// smhad's Daemon: the object run_daemon() builds and runs (daemon.hpp). Private
// to lib/service; its members live by concern in daemon.cpp (start-up, the
// agent, signals, hold and handover), daemon_status.cpp (the `status` reply)
// and daemon_reload.cpp (SIGHUP and `smctl reload`).
#pragma once

#include "smha/service/daemon.hpp"

#include <algorithm>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <iomanip>
#include <ostream>
#include <sstream>

#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <spdlog/spdlog.h>

#include "smha/agent/agent.hpp"
#include "smha/fabric/lid_continuity.hpp"
#include "smha/head/plan.hpp"
#include "smha/config/config.hpp"
#include "smha/control/server.hpp"
#include "smha/core/state_dir.hpp"
#include "smha/core/text.hpp"
#include "smha/mad/smp.hpp"
#include "smha/opensm/check.hpp"
#include "smha/opensm/log_follower.hpp"
#include "smha/opensm/probe.hpp"
#include "smha/os/posix_file_system.hpp"
#include "smha/platform/logging.hpp"
#include "smha/platform/notify.hpp"
#include "smha/service/drill.hpp"
#include "smha/service/event_journal.hpp"
#include "smha/service/events_method.hpp"
#include "smha/service/handover.hpp"
#include "smha/service/metrics_service.hpp"
#include "smha/service/os_integration.hpp"
#include "smha/service/service.hpp"

namespace smha::service {

using nlohmann::json;
using control::Reply;

inline double seconds_since(TimePoint then, TimePoint now) {
  return std::chrono::duration<double>(now - then).count();
}

class Daemon final : public DrillHost {
 public:
  Daemon(DaemonOptions options, config::Config config, std::ostream& err, DaemonAdapters adapters)
      : options_(std::move(options)), config_(std::move(config)), err_(err), adapters_(std::move(adapters)) {}

  ~Daemon() override {
    if (metrics_) metrics_->stop();
    if (agent_) agent_->stop();
    if (server_) server_->stop();
    lock_.reset();  // last: a new smhad may start once we are done
  }

  bool init();
  int run();

  // DrillHost
  HeadStatus status() override { return head_status(false); }  // the drill checks roles, peers, alarms and the hold
  sm::EngineStatus engine() const override { return agent_->status(); }
  Guid own_guid() const override { return own_guid_; }
  void request_handover(std::optional<Guid> target, HandoverDone done) override {
    agent_->request_handover(target, std::move(done));
  }
  bool handover_running() const override { return handover_ != nullptr; }
  const LogEventSink& events() const override { return sink_; }
  // A window judges what happens from its start: what OpenSM logged before is
  // read now, so it is on record before the window's first event (the log is
  // otherwise read once per poll interval, and a line written just before the
  // start would count as inside the window: a false flip-back).
  std::shared_ptr<MastershipWindow> open_window() override {
    read_opensm_log();
    std::vector<MastershipWindow::Head> heads;
    for (const auto& p : config_.peers) {
      // The LID polled: a GUID-only peer's is the one discovery found, so that
      // its sweep (our port's MasterSMLID) is known as that head's.
      std::optional<Lid> lid = p.lid;
      if (agent_)
        for (const auto& r : agent_->routes())
          if (r.guid == p.port_guid && r.lid.value != 0) lid = r.lid;
      heads.push_back({p.port_guid, p.name, lid});
    }
    window_ =
        std::make_shared<MastershipWindow>(own_guid_, config_.node_name, std::move(heads), clock_.now(), rates_);
    return window_;
  }
  void close_window() override {
    if (window_) rates_ = window_->rates();
    window_.reset();
  }

 private:
  // What plan_render() warns about in `c` for this OpenSM (no_clients_rereg
  // TRUE, an AR/SHARP downgrade), each logged at warning level and returned
  // as text; at start and at each reload.
  std::vector<std::string> log_render_warnings(const config::Config& c) const {
    std::vector<std::string> out;
    for (const auto& w : opensm::plan_render(c, caps_, 0, std::nullopt).warnings) {
      out.push_back(w.to_string());
      spdlog::warn("{}", out.back());
    }
    return out;
  }
  void start_agent(agent::AgentConfig cfg);
  // Our configuration digests (doc/drift.md) for the drift check, from the
  // rendered opensm.conf, the failover section, OpenSM and the SM_Key.
  void update_drift_digests();
  json drift_json(TimePoint now) const;
  bool init_history_and_metrics();
  void follow_opensm_log();
  void read_opensm_log();  // what OpenSM appended to its log since the last read, as events
  bool start_metrics(Duration handover_bound);
  void register_methods();
  json status_json();
  // `fabric` false: without the census, OpenSM, LID continuity and drift parts
  // the metrics take from it (systemd's STATUS= line, checked every 100 ms,
  // shows none of them; the status reply makes its own, fuller JSON of them).
  HeadStatus head_status(bool fabric = true) const;
  json census_json(TimePoint now) const;  // "sms" and "census" (doc/census.md)
  json census_sa_json(TimePoint now) const;  // the master's SA table ("census_sa", census.sa)
  json lid_continuity_json(TimePoint now) const;  // doc/lid-continuity.md
  void start_lid_continuity();
  void add_smp_port_state(json& local, TimePoint now) const;
  void arm_signals();
  void wait_hup();
  void shutdown(const char* why);
  bool lock_state_dir();
  // do_reload(), with any exception turned into an `error` reply (old configuration kept).
  Reply reload_guarded(const char* via);
  Reply do_reload();
  Reply do_hold(const control::Call& call);
  Reply do_release();
  void handover(const control::Call& call, control::Responder respond);
  void expire_hold();
  // os_integration wiring (hooks, event sink, OpenSM watch, systemd notify).
  bool init_os();
  void start_systemd();
  DaemonEventSink::Snapshot snapshot() const;

  DaemonOptions options_;
  config::Config config_;
  std::ostream& err_;
  DaemonAdapters adapters_;
  boost::asio::io_context io_;
  SteadyClock clock_;
  os::PosixFileSystem fs_;
  opensm::Capabilities caps_;
  Guid own_guid_;
  HoldState hold_;
  std::unique_ptr<os::ProcessRunner> runner_;
  std::unique_ptr<DaemonAdapters::Port> port_;
  std::unique_ptr<RecordingTransport> mad_;
  std::unique_ptr<os::AsioScheduler> sched_;
  LogEventSink sink_{kEventHistory, clock_};
  std::unique_ptr<HookDispatcher> hooks_;
  std::unique_ptr<DaemonEventSink> events_;
  std::unique_ptr<OpensmWatch> osm_watch_;
  std::unique_ptr<SystemdReporter> systemd_;
  std::unique_ptr<agent::SupervisedOpensmControl> supervised_;
  ObserveOnlyOpensmControl observe_control_;
  agent::OpensmControl* control_ = nullptr;
  std::unique_ptr<fabric::LidContinuity> lid_continuity_;  // before agent_: its walks feed it
  unsigned lid_lmc_ = 0;
  std::unique_ptr<agent::Agent> agent_;
  head::Plan plan_;               // what the configuration maps to (make_plan), for the current config_
  agent::AgentConfig agent_cfg_;  // the file's mapping the agent was started with (reload compares it)
  std::unique_ptr<control::ControlServer> server_;
  std::unique_ptr<boost::asio::signal_set> stop_signals_;
  std::unique_ptr<boost::asio::signal_set> hup_signal_;
  std::optional<Scheduler::TimerId> hold_timer_;  // the hold's expiry
  TimePoint started_at_{};
  std::chrono::system_clock::time_point started_wall_{};
  std::chrono::system_clock::time_point config_loaded_wall_{};  // start, then each successful reload
  std::string head_name(Guid guid) const;
  EventNode event_node(Guid guid) const;
  int exit_code_ = 0;
  bool startup_ready();
  // The round count when every GUID-only peer was first resolved (or not found).
  std::optional<std::uint64_t> routes_settled_round_;
  // The `handover` call in progress (at most one; never at once with a drill).
  std::shared_ptr<HandoverCall> handover_;
  std::unique_ptr<EventJournal> journal_;
  std::string journal_error_;
  FailoverStats failovers_;
  std::unique_ptr<EventsMethod> events_method_;
  std::unique_ptr<MetricsService> metrics_;
  std::unique_ptr<DrillRunner> drill_;
  std::unique_ptr<os::FileSystem::Lock> lock_;  // state_dir/smhad.lock, held for our lifetime
  // The local OpenSM's log file, read each poll interval: every SM state change
  // OpenSM logged becomes an "opensm_state" event, however short it was.
  std::unique_ptr<opensm::OpensmLogFollower> osm_log_;
  std::optional<Scheduler::TimerId> osm_log_timer_;  // the next read of OpenSM's log
  Duration osm_log_interval_{};
  std::string osm_log_state_ = "UNKNOWN";  // the last state the log showed
  // The handover's or drill's window, fed with every SMInfo and local PortInfo
  // answer while one runs (they never run at once).
  std::shared_ptr<MastershipWindow> window_;
  ActCountRates rates_;  // every SM's ActCount rate as STANDBY, for each window's start
};

}  // namespace smha::service
