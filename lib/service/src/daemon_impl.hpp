// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// smhad's Daemon: the object run_daemon() builds and runs (daemon.hpp), the
// host of one head::Head. Private to lib/service; its members live by concern
// in daemon.cpp (start-up, signals, the control methods, systemd),
// daemon_status.cpp (the `status` reply) and daemon_reload.cpp (SIGHUP and
// `smctl reload`).
#pragma once

#include "smha/service/daemon.hpp"

#include <algorithm>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ostream>

#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <spdlog/spdlog.h>

#include "smha/agent/agent.hpp"
#include "smha/head/head.hpp"
#include "smha/head/plan.hpp"
#include "smha/config/config.hpp"
#include "smha/control/server.hpp"
#include "smha/core/state_dir.hpp"
#include "smha/core/text.hpp"
#include "smha/opensm/probe.hpp"
#include "smha/os/posix_file_system.hpp"
#include "smha/peer/continuity.hpp"
#include "smha/service/continuity_plan.hpp"
#include "smha/service/continuity_thread.hpp"
#include "smha/platform/logging.hpp"
#include "smha/platform/notify.hpp"
#include "smha/service/events_method.hpp"
#include "smha/service/metrics_service.hpp"
#include "smha/service/check_config.hpp"
#include "smha/service/hook_dispatcher.hpp"
#include "smha/service/systemd_reporter.hpp"
#include "smha/service/service.hpp"

namespace smha::service {

using nlohmann::json;
using control::Reply;

inline double seconds_since(TimePoint then, TimePoint now) {
  return std::chrono::duration<double>(now - then).count();
}

class Daemon final {
 public:
  Daemon(DaemonOptions options, config::Config config, std::ostream& err, DaemonAdapters adapters)
      : options_(std::move(options)), config_(std::move(config)), err_(err), adapters_(std::move(adapters)) {}

  ~Daemon() {
    if (metrics_) metrics_->stop();
    if (server_) server_->stop();
    head_.reset();
    lock_.reset();  // last: a new smhad may start once we are done
  }

  bool init();
  int run();

 private:
  bool init_head();
  bool init_methods();
  bool init_continuity();
  void register_methods();
  json status_json();
  void add_smp_port_state(json& local, TimePoint now) const;
  void arm_signals();
  void wait_hup();
  void shutdown(const char* why);
  bool lock_state_dir();
  // do_reload(), with any exception turned into an `error` reply (old configuration kept).
  Reply reload_guarded(const char* via);
  Reply do_reload();
  Reply do_hold(const control::Call& call);
  void start_systemd();
  bool startup_ready();

  DaemonOptions options_;
  // The file as loaded at start: what takes effect only at a restart (port,
  // socket, state_dir, metrics). The head holds the current one (head_->config()).
  config::Config config_;
  std::ostream& err_;
  DaemonAdapters adapters_;
  boost::asio::io_context io_;
  SteadyClock clock_;
  os::PosixFileSystem fs_;
  std::unique_ptr<os::ProcessRunner> runner_;
  std::unique_ptr<DaemonAdapters::Port> port_;
  std::unique_ptr<os::AsioScheduler> sched_;
  std::unique_ptr<HookDispatcher> hooks_;
  std::unique_ptr<head::Head> head_;  // after what it runs on, before what reads it
  std::unique_ptr<ContinuityThread> continuity_;  // the peer channel, on its own thread (off: null)
  std::unique_ptr<SystemdReporter> systemd_;
  std::unique_ptr<control::ControlServer> server_;
  std::unique_ptr<boost::asio::signal_set> stop_signals_;
  std::unique_ptr<boost::asio::signal_set> hup_signal_;
  int exit_code_ = 0;
  std::unique_ptr<EventsMethod> events_method_;
  std::unique_ptr<MetricsService> metrics_;
  std::unique_ptr<os::FileSystem::Lock> lock_;  // state_dir/smhad.lock, held for our lifetime
};

}  // namespace smha::service
