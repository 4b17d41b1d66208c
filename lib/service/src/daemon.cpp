// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// smhad's run path (daemon.hpp): the Daemon's start-up, agent, signals, hold,
// handover and systemd wiring. Its status reply is in daemon_status.cpp, reload
// in daemon_reload.cpp; the class is declared in daemon_impl.hpp.
#include "daemon_impl.hpp"

#include <mutex>

#include "smha/mad/umad_transport.hpp"
#include "smha/os/posix_process_runner.hpp"

namespace smha::service {

namespace {

// smhad's exit status when OpenSM fails for good before smhad is ready (EX_CONFIG:
// systemd shows it as status=78/CONFIG); the unit does not restart on it.
constexpr int kExitOpensmFailed = 78;
// How long READY=1 waits for the local SM to answer before it is sent anyway.
constexpr auto kStartupGrace = std::chrono::seconds(30);

}  // namespace

using control::ResultCode;
namespace method = control::method;
namespace param = control::param;
using smha::SmState;

// One smhad per state_dir (and so per OpenSM): an exclusive flock on
// state_dir/smhad.lock, held until exit (the kernel drops it if we die). The
// file carries the holder's PID for the message a second instance prints.
bool Daemon::lock_state_dir() {
  // An unusable state_dir (below a regular file, read-only) fails here with the
  // call that failed, not later as OpenSM's "cannot execute" after READY.
  if (auto st = check_writable_dir(config_.state_dir, true); !st.ok()) {
    err_ << "smhad: state_dir " << config_.state_dir << " is not usable: " << st.error().message << '\n';
    return false;
  }
  const std::string path = config_.state_dir + "/smhad.lock";
  auto lock = fs_.lock(path);
  if (!lock) {
    if (lock.error().code == Errc::Busy) {
      auto held = fs_.read_tail(path, 0, 32);
      std::string holder = held ? held->text : std::string();
      while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
      err_ << "smhad: another smhad (pid " << (holder.empty() ? "unknown" : holder)
           << ") already runs with state_dir " << config_.state_dir << " (it holds " << path
           << "); stop it first, or give this one its own state_dir and port\n";
    } else {
      err_ << "smhad: cannot lock the state_dir: " << lock.error().message << '\n';
    }
    return false;
  }
  if (auto st = lock.value()->note(std::to_string(::getpid()) + "\n"); !st.ok())
    spdlog::warn("cannot record our pid in {}: {}", path, st.error().message);
  lock_ = std::move(lock).value();
  return true;
}

bool Daemon::init() {
  started_at_ = clock_.now();
  started_wall_ = config_loaded_wall_ = clock_.wall_now();
  // Signals first: a SIGTERM during start-up is handled (after init) by the
  // normal shutdown, never by the default action between spawning OpenSM and
  // recording its pidfile.
  arm_signals();
  sched_ = std::make_unique<os::AsioScheduler>(io_, clock_);
  if (!lock_state_dir()) return false;
  if (!init_os()) return false;
  mad::PortSelector sel;
  sel.ca = config_.port.ca;
  sel.port = config_.port.port;
  sel.guid = config_.port.port_guid;
  auto port = adapters_.open_port(io_, sel, clock_);
  if (!port) {
    err_ << "smhad: cannot open the IB port: " << port.error().message << '\n';
    return false;
  }
  port_ = std::move(port).value();
  own_guid_ = config_.port.port_guid.value_or(port_->local_port().port_guid);
  mad_ = std::make_unique<RecordingTransport>(port_->transport(), clock_, options_.observe);
  mad_->set_taps(
      [this](const SmInfo& info, TimePoint sent, TimePoint received, const std::string& via) {
        if (window_) window_->sminfo(info, sent, received, via);
        else rates_.record(info, received);
        if (handover_) handover_->check();
      },
      [this](const mad::PortInfo& pi, TimePoint sent, TimePoint received) {
        if (window_) window_->local_port(pi.lid, pi.sm_lid, sent, received);
        if (handover_) handover_->check();
      });

  // The policy's errors first, before OpenSM is probed.
  auto mapped = head::map_config(config_, own_guid_);
  if (!mapped) {
    err_ << "smhad: " << mapped.error().message << '\n';
    return false;
  }
  for (const auto& peer : config_.peers)
    if (!peer.lid)
      spdlog::info("peer {} ({}) has no lid in {}: found by directed-route discovery", peer.name,
                   to_string(peer.port_guid), config_.source_path);

  if (options_.observe) {
    control_ = &observe_control_;
  } else {
    auto caps = adapters_.probe_opensm(config_.opensm.binary);
    if (!caps) {
      err_ << "smhad: " << config_.opensm.binary << ": " << caps.error().message << '\n';
      return false;
    }
    caps_ = caps.value();
  }
  auto planned = head::make_plan(config_, std::move(mapped).value(), head::PlanInputs{own_guid_, options_.observe, caps_},
                                 fs_);
  if (!planned) {
    err_ << "smhad: " << planned.error().message << '\n';
    return false;
  }
  plan_ = std::move(planned).value();
  if (plan_.opensm) {
    log_render_warnings(config_);
    runner_ = adapters_.process_runner(io_);
    // Where OpenSM runs and keeps its cache; if they cannot be made, OpenSM's
    // start says why (the supervisor's error, event and alarm).
    for (const std::string& dir : plan_.opensm->dirs)
      if (auto st = fs_.make_dirs(dir); !st.ok()) spdlog::warn("{}", st.error().message);
    opensm::SupervisorOptions so = plan_.opensm->supervisor;
    so.on_change = [this](const opensm::SupervisorStatus& st) { osm_watch_->on_change(st); };
    supervised_ = std::make_unique<agent::SupervisedOpensmControl>(
        *sched_, *runner_, fs_, [spec = plan_.opensm->spec] { return spec; }, so, plan_.opensm->render);
    control_ = supervised_.get();
  }

  control::ServerOptions sopt;
  sopt.socket_path = config_.control.socket_path;
  sopt.group = config_.control.group;
  sopt.server_name = std::string("smhad ") + SMHA_SERVICE_VERSION;
  server_ = std::make_unique<control::ControlServer>(io_, sopt);
  register_methods();
  if (!init_history_and_metrics()) return false;
  if (auto st = server_->start(); !st.ok()) {
    err_ << "smhad: control socket: " << st.error().message << '\n';
    return false;
  }
  if (!start_metrics(plan_.agent.policy.handover_bound)) return false;
  osm_log_interval_ = plan_.agent.policy.poll_interval;
  start_agent(plan_.agent);
  follow_opensm_log();
  start_systemd();
  platform::log_event(*platform::module_logger("svc"), platform::kSmhadStarted,
                      {{"node", config_.node_name}, {"config", config_.source_path},
                       {"port_guid", to_string(own_guid_)}, {"mode", options_.observe ? "observe" : "managing"},
                       {"socket", config_.control.socket_path}});
  return true;
}

void Daemon::start_agent(agent::AgentConfig cfg) {
  if (agent_) {
    agent_->stop();
    agent_.reset();
  }
  // What the file mapped to, for the next reload to compare with: the agent's
  // own copy takes on the routes discovery finds (a GUID-only peer's LID).
  agent_cfg_ = cfg;
  // Our port's state comes from its own SMA every round (sysfs is static under umad2sim).
  cfg.local_port_num = static_cast<std::uint8_t>(port_->local_port().port);
  agent_ = std::make_unique<agent::Agent>(std::move(cfg), *sched_, *mad_, *control_, *events_);
  if (hold_.held) agent_->set_hold(true);  // a new engine keeps the hold
  if (supervised_) agent_->set_local_stopped([this] { return process_stopped(supervised_->supervisor_status().pid); });
  start_lid_continuity();
  sink_.set_node_namer(own_guid_, [this](Guid g) { return event_node(g); });
  agent_->start();
  update_drift_digests();
}

void Daemon::update_drift_digests() {
  if (!supervised_ || !agent_ || !plan_.opensm) return;  // observing: no OpenSM of ours to compare
  // Again from the files: the digests follow an edit of a policy file.
  auto in = head::drift_inputs(config_, caps_, own_guid_, fs_);
  if (!in) return;
  agent_->drift().set_own(fabric::compute_digests(in.value()));
}

// LID continuity (doc/lid-continuity.md): fed by the census walks, writes
// <cache_dir>/guid2lid while our OpenSM is STANDBY. Off in observe mode (no
// OpenSM of ours) and without the census (nothing feeds it). Kept across
// reloads while its file and LMC stay the same.
void Daemon::start_lid_continuity() {
  if (!supervised_ || !plan_.opensm || !plan_.opensm->lid_continuity) {
    lid_continuity_.reset();
    return;
  }
  const fabric::LidContinuityConfig& lc = *plan_.opensm->lid_continuity;
  if (!lid_continuity_ || lid_continuity_->status().path != lc.path || lid_lmc_ != lc.lmc) {
    lid_lmc_ = lc.lmc;
    lid_continuity_ = std::make_unique<fabric::LidContinuity>(lc, *sched_, fs_, [this]() -> std::optional<SmState> {
      // The engine's last answer from our SM, while OpenSM runs.
      if (!agent_ || !supervised_ || supervised_->state() != sm::ProcessState::Running) return std::nullopt;
      return agent_->status().local_state;
    }, [this](const fabric::LidConflict&, const std::string& text) {
      // Once per distinct claim: a node that keeps re-asserting a LID is one event.
      sink_.note("lid_conflict", text, "the file keeps the holder's LID; the claim is not written");
    });
  }
  agent_->set_walk_observer([this](const fabric::DiscoveryResult& r) {
    if (lid_continuity_) lid_continuity_->observe(r.probed, !r.request_bound && !r.hop_bound);
  });
}

// Each poll interval, what the local OpenSM appended to its log file (bounded,
// non-blocking: OpensmLogFollower). Each `Entering <STATE> state` line is
// recorded as an "opensm_state" event "<from>-><to>" with OpenSM's time stamp,
// so a mastership shorter than one poll round is on record too (doc/supervision.md).
void Daemon::read_opensm_log() {
  if (!osm_log_) return;
  for (const auto& e : osm_log_->poll()) {
    if (agent_) agent_->opensm_logged(e);
    if (e.kind != opensm::LoggedEvent::Kind::SmState) continue;
    sink_.opensm_state(osm_log_state_, e.text,
                       "OpenSM log " + osm_log_->path() + (e.stamp.empty() ? "" : " " + e.stamp) + ": Entering " +
                           e.text + " state");
    osm_log_state_ = e.text;
  }
}

void Daemon::follow_opensm_log() {
  const std::string& path = config_.opensm.log_file;
  if (path.empty()) {
    osm_log_.reset();
  } else if (!osm_log_ || osm_log_->path() != path) {
    osm_log_ = std::make_unique<opensm::OpensmLogFollower>(fs_, path);
    osm_log_->skip_existing();
    osm_log_state_ = "UNKNOWN";
  } else {
    read_opensm_log();
  }
  if (osm_log_timer_) sched_->cancel(*osm_log_timer_);
  osm_log_timer_ = sched_->schedule_in(osm_log_interval_, [this] {
    osm_log_timer_.reset();
    follow_opensm_log();
  });
}

// The event history (restored from state_dir/events.jsonl and appended to it),
// the events/metrics/drill methods. doc/control-protocol.md.
bool Daemon::init_history_and_metrics() {
  // state_dir passed lock_state_dir(); a failure here shows in the journal's own errors.
  (void)fs_.make_dirs(config_.state_dir);
  journal_ = std::make_unique<EventJournal>(fs_, config_.state_dir + "/events.jsonl");
  auto loaded = journal_->load();
  if (!loaded) {
    spdlog::warn("EVENTS_JOURNAL_UNREADABLE {}; starting with an empty history", loaded.error().message);
  } else {
    if (loaded.value().skipped > 0)
      spdlog::warn("EVENTS_JOURNAL_SKIPPED {} line(s) of {} that did not parse", loaded.value().skipped,
                   journal_->path());
    sink_.restore(loaded.value().events);
  }
  sink_.add_listener([this](const EventRecord& e) {
    auto st = journal_->append(e);
    const std::string err = st.ok() ? std::string() : st.error().message;
    if (err != journal_error_) {
      if (err.empty()) spdlog::info("EVENTS_JOURNAL_OK {} is written again", journal_->path());
      else spdlog::warn("EVENTS_JOURNAL_WRITE_FAILED {}", err);
      journal_error_ = err;
    }
  });
  sink_.add_listener([this](const EventRecord& e) { failovers_.observe(e); });
  sink_.add_listener([this](const EventRecord& e) {
    if (handover_) handover_->event(e);
  });
  events_method_ = std::make_unique<EventsMethod>(io_, sink_, clock_);
  drill_ = std::make_unique<DrillRunner>(*sched_, *this);
  metrics_ = std::make_unique<MetricsService>(io_, config_.metrics, fs_, [this] {
    return control::render_prometheus(metrics_snapshot(head_status(), mad_->poll_stats(), failovers_));
  });
  for (auto st : {events_method_->attach(*server_), drill_->attach(*server_), metrics_->attach(*server_)}) {
    if (!st.ok()) {
      err_ << "smhad: control methods: " << st.error().message << '\n';
      return false;
    }
  }
  return true;
}

// Before the agent starts: a metrics port that cannot be bound stops start-up
// before OpenSM is touched.
bool Daemon::start_metrics(Duration handover_bound) {
  DrillOptions d;
  d.leg_timeout = std::chrono::duration_cast<std::chrono::milliseconds>(handover_bound) + std::chrono::seconds(2);
  d.stable = std::chrono::duration_cast<std::chrono::milliseconds>(handover_bound) + std::chrono::seconds(1);
  drill_->set_options(d);
  if (auto st = metrics_->start(); !st.ok()) {
    err_ << "smhad: " << config_.source_path << ": metrics.listen: " << st.error().message << '\n';
    return false;
  }
  return true;
}

int Daemon::run() {
  // The stop function may be called from another thread at any time, also
  // after the loop has ended (the daemon stopped by a signal): then it does nothing.
  struct StopGate {
    std::mutex mu;
    boost::asio::io_context* io = nullptr;
  };
  auto gate = std::make_shared<StopGate>();
  gate->io = &io_;
  if (adapters_.running)
    adapters_.running([gate, this] {
      std::lock_guard<std::mutex> lock(gate->mu);
      if (gate->io != nullptr) boost::asio::post(*gate->io, [this] { shutdown("stop requested"); });
    });
  io_.run();
  std::lock_guard<std::mutex> lock(gate->mu);
  gate->io = nullptr;
  return exit_code_;
}

// READY=1 (and the end of `systemctl start`) waits for the first poll round
// that polled every peer (a GUID-only peer once discovery has found it, or
// given up: "not found") and for OpenSM's start: the local SM answers SMInfo (OpenSM is past its
// initialisation), OpenSM was adopted, or kStartupGrace passed (a port that is
// down: smhad runs and reports it). If OpenSM fails for good before that, smhad
// exits with kExitOpensmFailed, which the unit does not restart
// (RestartPreventExitStatus=), so the unit is "failed" with OpenSM's reason in
// STATUS= and the journal instead of "active" beside a dead OpenSM.
bool Daemon::startup_ready() {
  if (!agent_ || agent_->rounds() < 1) return false;
  // A peer found by discovery is polled only once found: READY waits for a
  // round after every peer's first resolution, so that STATUS= carries each
  // peer's first outcome ("unreachable", STANDBY ...), not "unknown".
  if (!routes_settled_round_) {
    bool any = false;
    for (const auto& r : agent_->routes()) {
      if (r.discover && !r.found && r.state == agent::RouteState::Resolving) return false;
      any = any || r.discover;
    }
    // The round running now may have begun before the last resolution.
    routes_settled_round_ = any ? agent_->rounds() + 1 : 0;
  }
  if (agent_->rounds() <= *routes_settled_round_) return false;
  if (!supervised_) return true;
  const auto& st = supervised_->supervisor_status();
  if (st.state == opensm::SupervisorState::Failed) {
    if (exit_code_ == 0) {
      exit_code_ = kExitOpensmFailed;
      const std::string why = "OpenSM failed at start-up: " + st.reason;
      spdlog::error("{}; exiting with status {} (not restarted by the unit)", why, kExitOpensmFailed);
      boost::asio::post(io_, [this, why] {
        shutdown("OpenSM failed");
        systemd_->failed(EIO, why);
      });
    }
    return false;
  }
  const auto local = agent_->status().local_state;
  return (local && *local != SmState::NotActive) || st.adopted || clock_.now() - started_at_ >= kStartupGrace;
}

void Daemon::arm_signals() {
  stop_signals_ = std::make_unique<boost::asio::signal_set>(io_, SIGTERM, SIGINT);
  stop_signals_->async_wait([this](const boost::system::error_code& ec, int sig) {
    if (ec) return;
    shutdown(sig == SIGINT ? "SIGINT" : "SIGTERM");
  });
  hup_signal_ = std::make_unique<boost::asio::signal_set>(io_, SIGHUP);
  wait_hup();
}

void Daemon::wait_hup() {
  hup_signal_->async_wait([this](const boost::system::error_code& ec, int) {
    if (ec) return;
    if (systemd_) systemd_->reloading();
    auto r = reload_guarded("SIGHUP");
    if (systemd_) systemd_->reloaded();
    if (r.is_ok()) spdlog::info("SIGHUP: reload: {}", r.text);
    else spdlog::error("SIGHUP: reload refused: {}", r.text);
    wait_hup();
  });
}

void Daemon::shutdown(const char* why) {
  platform::log_event(*platform::module_logger("svc"), platform::kSmhadStopping, {{"signal", why}});
  if (systemd_) systemd_->stopping(why);
  if (agent_) agent_->stop();
  if (server_) server_->stop();
  if (metrics_) metrics_->stop();
  for (auto* t : {&hold_timer_, &osm_log_timer_}) {
    if (*t && sched_) sched_->cancel(**t);
    t->reset();
  }
  if (hup_signal_) hup_signal_->cancel();
  io_.stop();
}

std::string Daemon::head_name(Guid guid) const {
  if (guid == own_guid_) return config_.node_name;
  for (const auto& peer : config_.peers)
    if (peer.port_guid == guid) return peer.name;
  return "";  // an SM that is not a configured head
}

// An SM as events name it: head name, GUID, and the NodeDescription the
// census (every SM, our own node included) or the peer's discovery found.
EventNode Daemon::event_node(Guid guid) const {
  EventNode n{head_name(guid), guid, {}};
  if (!agent_) return n;
  const auto& sms = agent_->census().entries();
  if (auto it = sms.find(guid); it != sms.end()) n.description = it->second.description;
  if (n.description.empty() && guid == own_guid_) n.description = agent_->own_description();
  if (n.description.empty())
    for (const auto& r : agent_->routes())
      if (r.guid == guid) n.description = r.description;
  return n;
}

void Daemon::register_methods() {
  using control::Access;
  (void)server_->register_method(method::kStatus, Access::ReadOnly, [this](const control::Call&) {
    return Reply::ok(status_json());
  });
  (void)server_->register_method(method::kSms, Access::ReadOnly, [this](const control::Call&) {
    const TimePoint now = clock_.now();
    const auto& st = agent_->census_stats();
    json c;
    c["enabled"] = agent_->config().census.enabled;
    c["walks"] = st.walks;
    c["walk_mads"] = st.walk_mads;
    c["query_mads"] = st.query_mads;
    c["dropped"] = agent_->census().dropped();
    c["sa"] = census_sa_json(now);
    c["last_walk_age_s"] = st.last_walk_at ? json(seconds_since(*st.last_walk_at, now)) : json(nullptr);
    c["next_walk_in_s"] = st.next_walk_at ? json(seconds_since(now, *st.next_walk_at)) : json(nullptr);
    if (st.last_walk) {
      const auto& w = *st.last_walk;
      c["last_walk"] = {{"nodes", w.nodes}, {"ports", w.ports}, {"requests", w.requests}, {"mads", w.mads},
                        {"timeouts", w.timeouts}, {"sm_ports", w.sm_ports.size()},
                        {"bounded", w.request_bound || w.hop_bound},
                        {"elapsed_ms", std::chrono::duration<double, std::milli>(w.elapsed).count()}};
    }
    return Reply::ok(json{{"node", config_.node_name}, {"sms", census_json(now)}, {"census", c}});
  });
  (void)server_->register_method(method::kReload, Access::Mutating, [this](const control::Call&) {
    return reload_guarded("smctl reload");
  });
  (void)server_->register_method(
      method::kHold, Access::Mutating, [this](const control::Call& call) { return do_hold(call); },
      control::method_params(method::kHold));
  (void)server_->register_method(method::kRelease, Access::Mutating,
                                 [this](const control::Call&) { return do_release(); });
  (void)server_->register_async_method(
      method::kHandover, Access::Mutating,
      [this](const control::Call& call, control::Responder r) { handover(call, std::move(r)); },
      control::method_params(method::kHandover));
}

Reply Daemon::do_hold(const control::Call& call) {
  double secs = 3600;
  if (call.params.contains(param::kDurationS)) {
    const auto& d = call.params[param::kDurationS];
    if (!d.is_number() || !std::isfinite(d.get<double>()) || d.get<double>() <= 0 ||
        d.get<double>() > control::kMaxHoldSeconds)
      return Reply::failure(ResultCode::BadRequest,
                            "hold: duration_s must be a number of seconds above 0 and at most 604800 (7 days)");
    secs = d.get<double>();
  }
  hold_.held = true;
  hold_.by_uid = call.peer.uid;
  hold_.reason = call.params.value(param::kReason, std::string("maintenance"));
  const auto d = std::chrono::duration_cast<Duration>(std::chrono::duration<double>(secs));
  hold_.until = clock_.now() + d;
  if (agent_) agent_->set_hold(true);
  if (hold_timer_) sched_->cancel(*hold_timer_);
  hold_timer_ = sched_->schedule_in(d, [this] {
    hold_timer_.reset();
    expire_hold();
  });
  sink_.note("HOLD", "automatic transitions frozen for " + std::to_string(secs) + " s: " + hold_.reason,
             "uid " + std::to_string(call.peer.uid));
  return Reply::ok(json{{"held", true}, {"expires_in_s", secs}}, "hold active for " + std::to_string(secs) + " s");
}

void Daemon::expire_hold() {
  if (!hold_.held) return;
  hold_ = HoldState{};
  if (agent_) agent_->set_hold(false);
  sink_.note("HOLD_EXPIRED", "maintenance hold expired; automatic transitions resume");
}

Reply Daemon::do_release() {
  if (!hold_.held) return Reply::ok(json{{"held", false}}, "no hold was active");
  hold_ = HoldState{};
  if (agent_) agent_->set_hold(false);
  if (hold_timer_) sched_->cancel(*hold_timer_);
  hold_timer_.reset();
  sink_.note("RELEASE", "maintenance hold released; automatic transitions resume");
  return Reply::ok(json{{"held", false}}, "hold released");
}

void Daemon::handover(const control::Call& call, control::Responder respond) {
  if (options_.observe) {
    respond(Reply::failure(ResultCode::Conflict, "handover: smhad runs in observe mode"));
    return;
  }
  if (hold_.held) {
    respond(Reply::failure(ResultCode::Conflict, "handover: a maintenance hold is active"));
    return;
  }
  if (handover_ || (drill_ && drill_->running())) {
    respond(Reply::failure(ResultCode::Conflict, "handover: one is already running (handover or drill)"));
    return;
  }
  std::optional<Guid> target;
  if (call.params.contains(param::kTo)) {
    if (!call.params[param::kTo].is_string()) {
      respond(Reply::failure(ResultCode::BadRequest, "handover: to must be a peer name"));
      return;
    }
    const std::string name = call.params[param::kTo].get<std::string>();
    for (const auto& p : config_.peers)
      if (p.name == name) target = p.port_guid;
    if (!target) {
      respond(Reply::failure(ResultCode::NotFound, "handover: no peer named " + name));
      return;
    }
  }
  const auto before = agent_->status();
  if (before.role != sm::Role::Master) {
    respond(Reply::failure(ResultCode::Conflict,
                           "handover: this head is not MASTER (role " + std::string(sm::to_string(before.role)) + ")"));
    return;
  }
  // The same verdict as the drill's (MastershipWindow): the plan is this head,
  // then the engine's target; anything else seen in the window fails the reply.
  // The window opens first: it records what OpenSM logged before the request.
  // Done only when the engine says so (the target answers MASTER at the master
  // value, so OpenSM's election cannot hand mastership back): HandoverCall.
  auto window = open_window();
  sink_.note("HANDOVER_REQUEST", target ? "to " + to_string(*target) : "to the best standby",
             "uid " + std::to_string(call.peer.uid));
  if (target) window->set_target(*target);
  auto responder = std::make_shared<control::Responder>(std::move(respond));
  handover_ = std::make_shared<HandoverCall>(
      *sched_, window, [this] { return agent_ ? agent_->status().master : std::nullopt; },
      [this, window, responder](Reply reply) {
        handover_.reset();
        if (window_ == window) close_window();
        (*responder)(std::move(reply));
      });
  std::weak_ptr<HandoverCall> pending = handover_;
  agent_->request_handover(target, [pending](const sm::RecordEvent& outcome) {
    if (auto c = pending.lock()) c->outcome(outcome);
  });
  if (const auto t = agent_->status().handover_target) window->set_target(*t);
  if (auto c = pending.lock()) c->start(agent_->config().policy.handover_bound + seconds(2));
}

bool Daemon::init_os() {
  if (auto st = HookDispatcher::check(config_); !st.ok()) {
    err_ << "smhad: " << config_.source_path << ": " << st.error().message << '\n';
    return false;
  }
  for (const auto& w : config::key_warnings(config_)) spdlog::warn("{}", w.to_string());
  hooks_ = std::make_unique<HookDispatcher>(*sched_, [this] { return adapters_.hook_runner(io_); }, config_);
  auto changed = [this] {
    if (systemd_) systemd_->refresh();
  };
  events_ = std::make_unique<DaemonEventSink>(sink_, *hooks_, [this] { return snapshot(); }, changed);
  osm_watch_ = std::make_unique<OpensmWatch>(sink_, *hooks_, [this] { return snapshot(); }, changed);
  return true;
}

DaemonEventSink::Snapshot Daemon::snapshot() const {
  DaemonEventSink::Snapshot s;
  s.state = "UNKNOWN";
  if (agent_) {
    const auto es = agent_->status();
    if (es.local_state) s.state = std::string(to_string(*es.local_state));
    s.priority = es.rendered_priority;
    if (es.master && *es.master != own_guid_)
      for (const auto& p : config_.peers)
        if (p.port_guid == *es.master) s.peer = p.name;
  }
  if (s.peer.empty() && !config_.peers.empty()) s.peer = config_.peers.front().name;
  return s;
}

void Daemon::start_systemd() {
  systemd_ = std::make_unique<SystemdReporter>(
      io_, [this] { return startup_ready(); },
      [this] {
        if (!agent_) return std::string("starting");  // between agents during a reload
        return systemd_status_line(head_status(false), supervised_ ? &supervised_->supervisor_status() : nullptr);
      });
  systemd_->start();
}


namespace {

// The port smhad runs on: libibumad.
class UmadPort final : public DaemonAdapters::Port {
 public:
  explicit UmadPort(std::unique_ptr<mad::UmadTransport> umad) : umad_(std::move(umad)) {}
  mad::MadTransport& transport() override { return *umad_; }
  const mad::LocalPortInfo& local_port() const override { return umad_->local_port(); }
  Result<mad::LocalPortInfo> refresh_local_port() override { return umad_->refresh_local_port(); }

 private:
  std::unique_ptr<mad::UmadTransport> umad_;
};

}  // namespace

DaemonAdapters system_adapters() {
  DaemonAdapters a;
  a.open_port = [](boost::asio::io_context& io, const mad::PortSelector& sel,
                   const Clock& clock) -> Result<std::unique_ptr<DaemonAdapters::Port>> {
    auto umad = mad::UmadTransport::open(io, sel, clock);
    if (!umad) return umad.error();
    return std::unique_ptr<DaemonAdapters::Port>(std::make_unique<UmadPort>(std::move(umad).value()));
  };
  a.probe_opensm = [](const std::string& binary) {
    opensm::ExecOpensmRunner runner;
    return opensm::probe_opensm(runner, binary);
  };
  a.process_runner = [](boost::asio::io_context& io) -> std::unique_ptr<os::ProcessRunner> {
    return std::make_unique<os::PosixProcessRunner>(io);
  };
  a.hook_runner = a.process_runner;
  return a;
}

int run_daemon(const DaemonOptions& options, std::ostream& err, DaemonAdapters adapters) {
  auto loaded = config::load_config(options.config_path);
  if (!loaded) {
    err << loaded.error_text();
    return 1;
  }
  Daemon d(options, std::move(loaded).value(), err, std::move(adapters));
  if (!d.init()) {
    platform::Notifier().error_number(EINVAL, "start-up failed (see the log)");
    return 1;
  }
  return d.run();
}

}  // namespace smha::service
