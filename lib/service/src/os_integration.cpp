// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/service/os_integration.hpp"
#include "smha/service/instances.hpp"

#include <algorithm>
#include <ostream>
#include <sstream>
#include <utility>

#include "smha/fabric/discovery.hpp"
#include "smha/head/plan.hpp"
#include "smha/core/state_dir.hpp"
#include "smha/mad/umad_transport.hpp"
#include "smha/opensm/cli.hpp"
#include "smha/os/posix_process_runner.hpp"
#include "smha/peer/tls_files.hpp"
#include "smha/platform/logging.hpp"
#include "smha/service/service.hpp"

namespace smha::service {

namespace {

std::string upper_state(SmState s) { return std::string(to_string(s)); }

}  // namespace

// ---- SystemdReporter -------------------------------------------------------

SystemdReporter::SystemdReporter(boost::asio::io_context& io, std::function<bool()> is_ready,
                                 std::function<std::string()> status_line,
                                 std::chrono::milliseconds refresh)
    : is_ready_(std::move(is_ready)),
      status_line_(std::move(status_line)),
      refresh_(refresh),
      refresh_timer_(io),
      watchdog_timer_(io) {}

SystemdReporter::~SystemdReporter() {
  refresh_timer_.cancel();
  watchdog_timer_.cancel();
}

void SystemdReporter::start() {
  watchdog_ = platform::Notifier::watchdog_interval();
  if (watchdog_) {
    platform::module_logger("svc")->info("systemd watchdog: WATCHDOG=1 every {} ms",
                                         watchdog_->count() / 1000);
    notifier_.watchdog();
    arm_watchdog();
  }
  refresh();
  arm_refresh();
}

void SystemdReporter::arm_refresh() {
  refresh_timer_.expires_after(refresh_);
  refresh_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || stopped_) return;
    refresh();
    arm_refresh();
  });
}

void SystemdReporter::arm_watchdog() {
  watchdog_timer_.expires_after(*watchdog_);
  watchdog_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || stopped_) return;
    notifier_.watchdog();
    arm_watchdog();
  });
}

void SystemdReporter::refresh() {
  if (stopped_) return;
  if (!ready_sent_) {
    if (!is_ready_()) return;
    last_status_ = status_line_();
    ready_sent_ = true;
    notifier_.ready(last_status_);
    platform::module_logger("svc")->info("ready: {}", last_status_);
    return;
  }
  std::string line = status_line_();
  if (line == last_status_) return;
  last_status_ = std::move(line);
  notifier_.status(last_status_);
}

void SystemdReporter::reloading() {
  if (!stopped_) notifier_.reloading();
}

void SystemdReporter::reloaded() {
  if (stopped_) return;
  if (!ready_sent_) {  // not ready yet: the first READY=1 still comes from refresh()
    refresh();
    return;
  }
  last_status_ = status_line_();
  notifier_.ready(last_status_);
}

void SystemdReporter::stopping(const std::string& why) {
  if (stopped_) return;
  stopped_ = true;
  refresh_timer_.cancel();
  watchdog_timer_.cancel();
  notifier_.stopping();
  notifier_.status("stopping: " + why);
}

void SystemdReporter::failed(int error, const std::string& text) {
  notifier_.error_number(error, "failed: " + text);
}

// ---- HookDispatcher --------------------------------------------------------

HookDispatcher::HookDispatcher(Scheduler& sched, MakeProcesses processes, const config::Config& config,
                               std::function<void(const platform::HookResult&)> on_result)
    : make_processes_(std::move(processes)), sched_(sched), on_result_(std::move(on_result)) {
  configure(config);
}

Status HookDispatcher::check(const config::Config& config) {
  for (const auto& [event, paths] : config.hooks) {
    for (const auto& path : paths) {
      if (auto st = platform::check_hook_security(path, {}); !st.ok()) {
        return make_error(st.error().code, "hooks." + event + ": " + st.error().message);
      }
    }
  }
  return Status::Ok();
}

void HookDispatcher::configure(const config::Config& config) {
  node_ = config.node_name;
  fabric_ = config.fabric;
  hooks_ = config.hooks;
  const bool any = std::any_of(hooks_.begin(), hooks_.end(),
                               [](const auto& kv) { return !kv.second.empty(); });
  if (!any) return;  // the runner (and its process runner) is made on first need
  if (!runner_ || timeout_ != config.hook_timeout) {
    timeout_ = config.hook_timeout;
    // A runner with pending work keeps it: a new timeout applies to new runners
    // only when nothing is queued (HookRunner's timeout is fixed per instance).
    if (!runner_ || runner_->pending() == 0) make_runner();
  }
}

void HookDispatcher::make_runner() {
  if (!processes_) processes_ = make_processes_();
  platform::HookOptions o;
  o.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(timeout_);
  o.node = node_;
  o.fabric = fabric_;
  o.on_result = on_result_;
  runner_.reset();
  runner_ = std::make_unique<platform::HookRunner>(sched_, *processes_, std::move(o));
}

void HookDispatcher::run(const char* key, const platform::HookCall& call) {
  auto it = hooks_.find(key);
  if (it == hooks_.end() || it->second.empty()) return;
  if (!runner_) make_runner();
  runner_->run(call, it->second);
}

void HookDispatcher::transition(SmState old_state, SmState new_state, int priority,
                                const std::string& peer, const std::string& reason) {
  platform::HookCall call{platform::HookEvent::Transition, upper_state(new_state),
                          upper_state(old_state), priority, peer, reason};
  const char* key = new_state == SmState::Master    ? "master"
                    : new_state == SmState::Standby ? "standby"
                                                    : "fault";
  run(key, call);
}

void HookDispatcher::alarm(const std::string& state, int priority, const std::string& reason) {
  run("fault", platform::HookCall{platform::HookEvent::Alarm, state, state, priority, {}, reason});
}

void HookDispatcher::opensm_restart(const std::string& state, int priority,
                                    const std::string& reason) {
  run("opensm_restart",
      platform::HookCall{platform::HookEvent::OpensmRestart, state, state, priority, {}, reason});
}

void HookDispatcher::unknown_sm(const std::string& state, int priority, const std::string& reason) {
  run("unknown_sm", platform::HookCall{platform::HookEvent::Alarm, state, state, priority, {}, reason});
}

void HookDispatcher::reload(const std::string& state, int priority, const std::string& reason) {
  run("reload", platform::HookCall{platform::HookEvent::Reload, state, state, priority, {}, reason});
}

// ---- check-config ----------------------------------------------------------

std::optional<fabric::DiscoveryResult> probe_routes(const config::Config& cfg) {
  boost::asio::io_context io;
  SteadyClock clock;
  mad::PortSelector sel;
  sel.ca = cfg.port.ca;
  sel.port = cfg.port.port;
  sel.guid = cfg.port.port_guid;
  auto transport = mad::UmadTransport::open(io, sel, clock);
  if (!transport) return std::nullopt;
  os::AsioScheduler sched(io, clock);
  fabric::Discovery discovery(sched, **transport);
  std::vector<Guid> targets;
  std::vector<DrPath> hints;  // a configured dr_path that leads to its peer is found there first
  for (const auto& p : cfg.peers) {
    targets.push_back(p.port_guid);
    if (p.dr_path) hints.push_back(*p.dr_path);
  }
  std::optional<fabric::DiscoveryResult> out;
  discovery.start(targets, [&out](const fabric::DiscoveryResult& r) { out = r; }, hints);
  while (!out && io.run_one() > 0) {
  }
  return out;
}

std::vector<config::Diagnostic> route_warnings(const config::Config& cfg,
                                               const fabric::DiscoveryResult& found) {
  std::vector<config::Diagnostic> w;
  for (std::size_t i = 0; i < cfg.peers.size(); ++i) {
    const auto& p = cfg.peers[i];
    const std::string at = "peers[" + std::to_string(i) + "]";
    auto it = found.found.find(p.port_guid);
    if (it == found.found.end()) {
      w.push_back(config::Diagnostic{cfg.source_path, cfg.position_of(at + ".port_guid"), at + ".port_guid",
                                     "peer " + p.name + " (" + to_string(p.port_guid) +
                                         ") is on no port of the fabric: " + fabric::not_found_text(found)});
      continue;
    }
    const auto& r = it->second;
    if (p.lid && r.lid_known && r.lid.value != 0 && r.lid != *p.lid)  // 0: no LID assigned yet
      w.push_back(config::Diagnostic{cfg.source_path, cfg.position_of(at + ".lid"), at + ".lid",
                                     "peer " + p.name + " is at LID " + std::to_string(r.lid.value) +
                                         ", not " + std::to_string(p.lid->value) +
                                         " (directed-route discovery)"});
    if (p.dr_path && *p.dr_path != r.path)
      w.push_back(config::Diagnostic{cfg.source_path, cfg.position_of(at + ".dr_path"), at + ".dr_path",
                                     "peer " + p.name + " is at directed route " + to_string(r.path) +
                                         ", not " + to_string(*p.dr_path) + " (directed-route discovery)"});
  }
  return w;
}

int run_check_config(const std::string& path, opensm::OpensmRunner& runner, std::ostream& out,
                     std::ostream& err, const RouteProbe& probe, const config::LoadOptions& load) {
  auto loaded = config::load_config(path, load);
  if (!loaded.ok()) {  // nothing below can be checked without a Config
    for (const auto& e : loaded.errors()) err << "error: " << e.to_string() << '\n';
    err << path << ": " << loaded.errors().size() << " error(s)\n";
    return 1;
  }
  const config::Config& cfg = loaded.value();
  // Every check runs whatever the others found, so one run shows every problem.
  const opensm::CheckReport report = opensm::check_loaded_config(cfg, runner);
  std::vector<std::string> errors;
  for (const auto& e : report.errors) errors.push_back(e.to_string());
  if (auto st = HookDispatcher::check(cfg); !st.ok()) errors.push_back(path + ": " + st.error().message);
  // state_dir: what start-up creates and writes (nothing is created here).
  if (auto st = check_writable_dir(cfg.state_dir, false); !st.ok())
    errors.push_back(path + ": state_dir " + cfg.state_dir + " is not usable: " + st.error().message);
  for (const auto& m : instance_conflicts(cfg)) errors.push_back(path + ": " + m);
  // The peer channel's certificate, key and CA: the check start-up makes
  // before the channel listens (peer::load_tls_files), so a missing file or a
  // key others can read fails here too, not only at the next start.
  if (const auto& k = cfg.continuity; k.enabled)
    if (auto st = peer::check_tls_files({k.certificate, k.private_key, k.ca}); !st.ok())
      errors.push_back(path + ": " + st.error().message);
  // The HA policy start-up builds from the file (map_config, sm::validate).
  // Without node.port_guid start-up takes the GUID of the opened port; here a
  // stand-in that no peer uses.
  Guid own{1};
  for (const auto& peer : cfg.peers) own = Guid{std::max(own.value, peer.port_guid.value + 1)};
  if (auto mapped = head::map_config(cfg, cfg.port.port_guid.value_or(own)); !mapped)
    errors.push_back(mapped.error().message);
  for (const auto& w : report.warnings) err << "warning: " << w.to_string() << '\n';
  for (const auto& e : errors) err << "error: " << e << '\n';
  if (!errors.empty()) {
    err << path << ": " << errors.size() << " error(s)\n";
    return 1;
  }
  if (probe)
    if (auto found = probe(cfg))
      for (const auto& d : route_warnings(cfg, *found)) err << "warning: " << d.to_string() << '\n';
  out << path << ": OK for " << report.capabilities->describe() << '\n';
  return 0;
}

}  // namespace smha::service
