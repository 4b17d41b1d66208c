// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// smhad's operating-system side, kept out of daemon.cpp (doc/systemd.md,
// doc/hooks.md, doc/log-messages.md):
//   SystemdReporter   every sd_notify message smhad sends, through
//                     platform::Notifier: READY=1 once, STATUS= on change,
//                     WATCHDOG=1 from the event loop, RELOADING/STOPPING/ERRNO
//   HookDispatcher    the config's `hooks` -> platform::HookRunner executions
// Everything runs on the daemon's io_context thread.
#pragma once

#include <chrono>
#include <functional>
#include <iosfwd>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "smha/agent/agent.hpp"
#include "smha/agent/seams.hpp"
#include "smha/config/config.hpp"
#include "smha/opensm/probe.hpp"
#include "smha/opensm/supervisor.hpp"
#include "smha/os/process_runner.hpp"
#include "smha/platform/hooks.hpp"
#include "smha/platform/notify.hpp"
#include "smha/head/head_events.hpp"
#include "smha/service/service.hpp"

namespace smha::service {

// Sends smhad's notifications. Without $NOTIFY_SOCKET every call is a no-op.
// start() arms two timers on `io`:
//   - every `refresh`: if READY=1 was not sent and `is_ready()` is true, send
//     READY=1 with STATUS=status_line(); after that, send STATUS= whenever
//     status_line() differs from the last one sent;
//   - if the watchdog is enabled (WATCHDOG_USEC for this pid), WATCHDOG=1 every
//     Notifier::watchdog_interval() (half of WatchdogSec). Sent from the event
//     loop, so a stuck loop stops the pings and systemd restarts smhad.
class SystemdReporter {
 public:
  SystemdReporter(boost::asio::io_context& io, std::function<bool()> is_ready,
                  std::function<std::string()> status_line,
                  std::chrono::milliseconds refresh = std::chrono::milliseconds(100));
  ~SystemdReporter();
  SystemdReporter(const SystemdReporter&) = delete;
  SystemdReporter& operator=(const SystemdReporter&) = delete;

  void start();
  // Checks readiness and the status line now (e.g. after an engine event).
  void refresh();
  // RELOADING=1 before a reload; reloaded() sends READY=1 and the status after it.
  void reloading();
  void reloaded();
  // STOPPING=1 with STATUS=<why>; timers stop.
  void stopping(const std::string& why);
  // ERRNO=<error> with STATUS=<text>: start-up failed.
  void failed(int error, const std::string& text);

  bool ready_sent() const { return ready_sent_; }
  std::optional<std::chrono::microseconds> watchdog_interval() const { return watchdog_; }

 private:
  void arm_refresh();
  void arm_watchdog();

  platform::Notifier notifier_;
  std::function<bool()> is_ready_;
  std::function<std::string()> status_line_;
  std::chrono::milliseconds refresh_;
  std::optional<std::chrono::microseconds> watchdog_;
  bool ready_sent_ = false;
  bool stopped_ = false;
  std::string last_status_;
  boost::asio::steady_timer refresh_timer_;
  boost::asio::steady_timer watchdog_timer_;
};

// Runs the configured hooks (config `hooks`: master, standby, fault,
// opensm_restart, reload, unknown_sm) with the contract of doc/hooks.md:
//   TRANSITION to MASTER      -> hooks.master
//   TRANSITION to STANDBY     -> hooks.standby
//   TRANSITION to any other   -> hooks.fault
//   ALARM raised              -> hooks.fault
//   OPENSM_RESTART            -> hooks.opensm_restart (a crashed OpenSM was
//                                respawned, or supervision gave up)
//   RELOAD                    -> hooks.reload
// Never blocks: HookRunner queues and runs one at a time on the event loop.
class HookDispatcher final : public head::Hooks {
 public:
  // `processes` makes the runner the hooks' processes start through (once,
  // when a hook is first configured; smhad: DaemonAdapters::hook_runner),
  // `sched` times them out.
  using MakeProcesses = std::function<std::unique_ptr<os::ProcessRunner>()>;
  HookDispatcher(Scheduler& sched, MakeProcesses processes, const config::Config& config,
                 std::function<void(const platform::HookResult&)> on_result = {});

  // Security check of every configured hook (doc/hooks.md): the first error
  // names the YAML key, e.g. "hooks.master: hook '/x': writable by group ...".
  static Status check(const config::Config& config);

  // Takes the hooks and timeout of a reloaded configuration (check() it first).
  // A changed timeout applies to executions that start afterwards.
  void configure(const config::Config& config);

  // `priority`: this node's rendered SM priority.
  void transition(SmState old_state, SmState new_state, int priority, const std::string& peer,
                  const std::string& reason) override;
  void alarm(const std::string& state, int priority, const std::string& reason) override;
  void opensm_restart(const std::string& state, int priority, const std::string& reason) override;
  // hooks.unknown_sm, EVENT ALARM: an SM that is not a configured head was
  // found on the fabric (alarm unknown_sm raised; doc/census.md).
  void unknown_sm(const std::string& state, int priority, const std::string& reason) override;
  void reload(const std::string& state, int priority, const std::string& reason) override;

  std::size_t pending() const { return runner_ ? runner_->pending() : 0; }

 private:
  void run(const char* key, const platform::HookCall& call);
  void make_runner();

  MakeProcesses make_processes_;
  Scheduler& sched_;
  std::function<void(const platform::HookResult&)> on_result_;
  std::string node_;
  std::string fabric_;
  std::map<std::string, std::vector<std::string>> hooks_;
  std::chrono::seconds timeout_{10};
  std::unique_ptr<os::ProcessRunner> processes_;
  std::unique_ptr<platform::HookRunner> runner_;
};

// Directed-route discovery of every peer's port GUID from the configured port
// (doc/discovery.md), for --check-config. nullopt when the port cannot be
// opened (no fabric reachable from here): nothing is checked then.
using RouteProbe = std::function<std::optional<fabric::DiscoveryResult>(const config::Config&)>;
std::optional<fabric::DiscoveryResult> probe_routes(const config::Config& config);
// What --check-config warns about a reachable fabric: a peer port GUID on no
// port ("not found (searched N nodes, M ports)", at peers[i].port_guid), a
// configured lid or dr_path other than the one discovery finds (at
// peers[i].lid / peers[i].dr_path).
std::vector<config::Diagnostic> route_warnings(const config::Config& config,
                                               const fabric::DiscoveryResult& found);

// `smhad --check-config`: everything opensm::run_check_config checks, plus the
// security check of every configured hook (HookDispatcher::check), the
// state_dir, the HA policy (map_config) and the peer channel's TLS files
// (peer::check_tls_files), so a config smhad would refuse to
// start with fails here too. Every check runs and every problem is printed in
// one run (only a file that does not load stops at its own errors). Prints
// like opensm::run_check_config: warnings, then "error: <file>: ..." lines,
// then "<file>: N error(s)"; returns 0/1.
// When `probe` reaches the fabric, route_warnings() are printed as
// "warning: ..." (they do not fail the check).
// `load` carries the instance name (smhad --fabric). Another instance's file
// beside `path` that would share a port, file, socket or metrics port with it
// is an error naming that file (instance_conflicts).
int run_check_config(const std::string& path, opensm::OpensmRunner& runner, std::ostream& out,
                     std::ostream& err, const RouteProbe& probe = probe_routes,
                     const config::LoadOptions& load = {});


}  // namespace smha::service
