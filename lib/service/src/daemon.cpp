// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// smhad's run path (daemon.hpp): the Daemon's start-up, agent, signals, hold,
// handover and systemd wiring. Its status reply is in daemon_status.cpp, reload
// in daemon_reload.cpp; the class is declared in daemon_impl.hpp.
#include "daemon_impl.hpp"

#include <mutex>

#include "smha/mad/umad_transport.hpp"
#include "smha/os/posix_process_runner.hpp"
#include "smha/service/instances.hpp"

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
  // Signals first: a SIGTERM during start-up is handled (after init) by the
  // normal shutdown, never by the default action between spawning OpenSM and
  // recording its pidfile.
  arm_signals();
  sched_ = std::make_unique<os::AsioScheduler>(io_, clock_);
  // Another instance configured beside this one (smhad@NAME) must not share
  // our port, files, socket or metrics port: refused before anything is taken.
  if (const auto clashes = instance_conflicts(config_); !clashes.empty()) {
    for (const auto& m : clashes) err_ << "smhad: " << config_.source_path << ": " << m << '\n';
    return false;
  }
  if (!lock_state_dir()) return false;
  if (auto st = HookDispatcher::check(config_); !st.ok()) {
    err_ << "smhad: " << config_.source_path << ": " << st.error().message << '\n';
    return false;
  }
  for (const auto& w : config::key_warnings(config_)) spdlog::warn("{}", w.to_string());
  hooks_ = std::make_unique<HookDispatcher>(*sched_, [this] { return adapters_.hook_runner(io_); }, config_);
  if (!init_head()) return false;
  control::ServerOptions sopt;
  sopt.socket_path = config_.control.socket_path;
  sopt.group = config_.control.group;
  sopt.server_name = std::string("smhad ") + SMHA_SERVICE_VERSION;
  server_ = std::make_unique<control::ControlServer>(io_, sopt);
  register_methods();
  if (!init_methods()) return false;
  if (auto st = server_->start(); !st.ok()) {
    err_ << "smhad: control socket: " << st.error().message << '\n';
    return false;
  }
  if (!init_continuity()) return false;
  // Before the head starts: a metrics port that cannot be bound stops
  // start-up before OpenSM is touched.
  if (auto st = metrics_->start(); !st.ok()) {
    err_ << "smhad: " << config_.source_path << ": metrics.listen: " << st.error().message << '\n';
    return false;
  }
  head_->start();
  start_systemd();
  platform::log_event(*platform::module_logger("svc"), platform::kSmhadStarted,
                      {{"node", config_.node_name}, {"config", config_.source_path},
                       {"port_guid", to_string(head_->own_guid())}, {"mode", options_.observe ? "observe" : "managing"},
                       {"socket", config_.control.socket_path}});
  return true;
}

// The IB port, the policy, OpenSM's capabilities and the plan: the head, not started yet.
bool Daemon::init_head() {
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
  const Guid own_guid = config_.port.port_guid.value_or(port_->local_port().port_guid);
  // The policy's errors first, before OpenSM is probed.
  auto mapped = head::map_config(config_, own_guid);
  if (!mapped) {
    err_ << "smhad: " << mapped.error().message << '\n';
    return false;
  }
  for (const auto& peer : config_.peers)
    if (!peer.lid)
      spdlog::info("peer {} ({}) has no lid in {}: found by directed-route discovery", peer.name,
                   to_string(peer.port_guid), config_.source_path);
  opensm::Capabilities caps;
  if (!options_.observe) {
    auto probed = adapters_.probe_opensm(config_.opensm.binary);
    if (!probed) {
      err_ << "smhad: " << config_.opensm.binary << ": " << probed.error().message << '\n';
      return false;
    }
    caps = std::move(probed).value();
  }
  auto planned =
      head::make_plan(config_, std::move(mapped).value(),
                      head::PlanInputs{own_guid, options_.observe, caps, adapters_.prepare_opensm_conf}, fs_);
  if (!planned) {
    err_ << "smhad: " << planned.error().message << '\n';
    return false;
  }
  if (planned.value().opensm) runner_ = adapters_.process_runner(io_);
  head::HeadSeams seams{*sched_,
                        clock_,
                        fs_,
                        port_->transport(),
                        static_cast<std::uint8_t>(port_->local_port().port),
                        runner_.get(),
                        *hooks_,
                        process_stopped,
                        [this] {
                          if (systemd_) systemd_->refresh();
                        },
                        nullptr,
                        {},
                        {}};
  head_ = std::make_unique<head::Head>(config_, std::move(planned).value(),
                                       head::HeadOptions{own_guid, options_.observe, std::move(caps), SMHA_SERVICE_VERSION},
                                       std::move(seams));
  return true;
}

// The peer channel (doc/continuity.md), when configured: its TLS files and
// listening address are checked here, before OpenSM is touched.
bool Daemon::init_continuity() {
  const auto& k = config_.continuity;
  if (!k.enabled || options_.observe) return true;
  peer::ContinuityConfig cc = continuity_config(config_, head_->own_guid());
  continuity_ = std::make_unique<ContinuityThread>(
      std::move(cc), fs_, clock_, *sched_, io_,
      [this] {
        const auto st = head_->agent().status();
        return peer::InBandFacts{st.master, st.local_state};
      },
      head_->alarm_sink());
  if (auto st = continuity_->start(); !st.ok()) {
    err_ << "smhad: " << config_.source_path << ": " << st.error().message << '\n';
    return false;
  }
  head_->set_sa_copy_source([this] { return continuity_->sa_copy_info(); });
  spdlog::info("continuity: listening on {}:{} for copies from {} peer(s)", k.listen_address, k.listen_port,
               config_.peers.size());
  return true;
}

// The events long poll, the drill and the metrics on the control socket (doc/control-protocol.md).
bool Daemon::init_methods() {
  events_method_ = std::make_unique<EventsMethod>(io_, head_->log(), clock_);
  metrics_ = std::make_unique<MetricsService>(io_, config_.metrics, fs_, [this] {
    auto snap = metrics_snapshot(head_->status(true), head_->mad().poll_stats(), head_->failovers());
    if (continuity_) snap.continuity = continuity_->metrics();
    if (const auto& t = head_->log().last_takeover(); t && t->report) {
      const auto& r = *t->report;
      control::MetricsSnapshot::LastReport lr;
      if (r.sa_outage) lr.sa_outage_seconds = std::chrono::duration<double>(*r.sa_outage).count();
      if (r.lft_entries_compared) lr.lft_entries_changed = r.lft_entries_changed;
      lr.sa_restored = fabric::sa_restored(r);
      if (r.groups_checked) lr.groups_lost = *r.groups_checked - std::min(r.groups_kept, *r.groups_checked);
      // Groups the copy missed (a notice counted the master's unsent dump).
      if (r.sa_copy && r.sa_copy->lost) lr.groups_lost = lr.groups_lost.value_or(0) + r.sa_copy->lost->groups;
      snap.last_report = lr;
    }
    return control::render_prometheus(snap);
  });
  for (auto st : {events_method_->attach(*server_), head_->drill().attach(*server_), metrics_->attach(*server_)}) {
    if (!st.ok()) {
      err_ << "smhad: control methods: " << st.error().message << '\n';
      return false;
    }
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
  switch (head_->readiness(kStartupGrace)) {
    case head::Head::Readiness::Ready:
      return true;
    case head::Head::Readiness::NotYet:
      return false;
    case head::Head::Readiness::OpensmFailed:
      break;
  }
  if (exit_code_ == 0) {
    exit_code_ = kExitOpensmFailed;
    const std::string why = "OpenSM failed at start-up: " + head_->opensm()->reason;
    spdlog::error("{}; exiting with status {} (not restarted by the unit)", why, kExitOpensmFailed);
    boost::asio::post(io_, [this, why] {
      shutdown("OpenSM failed");
      systemd_->failed(EIO, why);
    });
  }
  return false;
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
  if (head_) head_->set_sa_copy_source({});  // continuity goes first
  if (continuity_) continuity_->stop();
  if (head_) head_->stop();
  if (server_) server_->stop();
  if (metrics_) metrics_->stop();
  if (hup_signal_) hup_signal_->cancel();
  io_.stop();
}

void Daemon::register_methods() {
  using control::Access;
  (void)server_->register_method(method::kStatus, Access::ReadOnly, [this](const control::Call&) {
    return Reply::ok(status_json());
  });
  (void)server_->register_method(method::kSms, Access::ReadOnly, [this](const control::Call&) {
    const TimePoint now = clock_.now();
    const auto& census = head_->census();
    return Reply::ok(json{
        {"node", config_.node_name},
        {"sms", head::census_json(census.census(), [this](Guid g) { return head_->head_name(g); }, now)},
        {"census", head::census_stats_json(census.census(), census.stats(), census.config(), now)}});
  });
  (void)server_->register_method(method::kHealth, Access::ReadOnly, [this](const control::Call&) {
    const auto& w = head_->watchers();
    return Reply::ok(json{{"node", config_.node_name},
                          {"health", head::health_json(w, clock_.now(), w.health().config().max_links,
                                                       w.errors().config().max_ports)}});
  });
  (void)server_->register_method(method::kReload, Access::Mutating, [this](const control::Call&) {
    return reload_guarded("smctl reload");
  });
  (void)server_->register_method(
      method::kHold, Access::Mutating, [this](const control::Call& call) { return do_hold(call); },
      control::method_params(method::kHold));
  (void)server_->register_method(method::kRelease, Access::Mutating,
                                 [this](const control::Call&) {
                                   if (!head_->release()) return Reply::ok(json{{"held", false}}, "no hold was active");
                                   return Reply::ok(json{{"held", false}}, "hold released");
                                 });
  (void)server_->register_async_method(
      method::kHandover, Access::Mutating,
      [this](const control::Call& call, control::Responder respond) {
        std::optional<std::string> to;
        if (call.params.contains(param::kTo)) {
          if (!call.params[param::kTo].is_string()) {
            respond(Reply::failure(ResultCode::BadRequest, "handover: to must be a peer name"));
            return;
          }
          to = call.params[param::kTo].get<std::string>();
        }
        auto r = std::make_shared<control::Responder>(std::move(respond));
        head_->handover(to, call.peer.uid, [r](Reply reply) { (*r)(std::move(reply)); });
      },
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
  head_->hold(std::chrono::duration_cast<Duration>(std::chrono::duration<double>(secs)),
              call.params.value(param::kReason, std::string("maintenance")), call.peer.uid);
  return Reply::ok(json{{"held", true}, {"expires_in_s", secs}}, "hold active for " + std::to_string(secs) + " s");
}

void Daemon::start_systemd() {
  systemd_ = std::make_unique<SystemdReporter>(
      io_, [this] { return startup_ready(); },
      [this] {
        return systemd_status_line(head_->status(false), head_->opensm());
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
  auto loaded = config::load_config(options.config_path, config::LoadOptions{options.fabric});
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
