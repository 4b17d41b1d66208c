// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// smhad's run path: load the YAML, probe OpenSM, open the umad port, start (or
// adopt) OpenSM under the supervisor, run the agent, serve the control socket,
// handle SIGHUP (reload) and SIGTERM/SIGINT (stop polling, leave OpenSM running,
// return 0). doc/architecture.md, "Daemon wiring".
#pragma once

#include <functional>
#include <iosfwd>
#include <memory>
#include <string>

#include <boost/asio/io_context.hpp>

#include "smha/core/clock.hpp"
#include "smha/core/result.hpp"
#include "smha/head/plan.hpp"
#include "smha/mad/umad_transport.hpp"
#include "smha/opensm/probe.hpp"
#include "smha/os/process_runner.hpp"

namespace smha::service {

struct DaemonOptions {
  std::string config_path;
  // The instance name (smhad --fabric, given by the unit smhad@NAME).
  std::string fabric;
  // Poll and report only: never start, stop, signal or Set anything.
  bool observe = false;
};

// What the daemon needs from the machine beyond files and its control socket:
// the IB port, the OpenSM binary's capabilities and a way to start processes.
// smhad runs with system_adapters() (libibumad, `opensm --version`, fork/exec);
// the daemon's unit tests give fakes, so the whole daemon runs without a fabric.
struct DaemonAdapters {
  // An open IB port: the MADs it sends and what the port is.
  class Port {
   public:
    virtual ~Port() = default;
    virtual mad::MadTransport& transport() = 0;
    virtual const mad::LocalPortInfo& local_port() const = 0;
    // Reads the port's LID, SM LID and state again; on error the stored info stays.
    virtual Result<mad::LocalPortInfo> refresh_local_port() = 0;
  };
  std::function<Result<std::unique_ptr<Port>>(boost::asio::io_context&, const mad::PortSelector&, const Clock&)>
      open_port;
  std::function<Result<opensm::Capabilities>(const std::string& binary)> probe_opensm;
  // The runner OpenSM is started and adopted with (on the daemon's loop).
  std::function<std::unique_ptr<os::ProcessRunner>(boost::asio::io_context&)> process_runner;
  // The runner the notify hooks run through (on the daemon's loop).
  std::function<std::unique_ptr<os::ProcessRunner>(boost::asio::io_context&)> hook_runner;
  // How opensm.conf is rendered and checked (empty: opensm::prepare_opensm_conf):
  // once at start and once per reload (head::make_plan); tests count its calls.
  head::ConfPreparer prepare_opensm_conf;
  // Called once start-up is done and the loop runs, with a function that stops
  // the daemon as SIGTERM does; it may be called from any thread, also after
  // the daemon has ended (it then does nothing).
  std::function<void(std::function<void()> stop)> running;
};
DaemonAdapters system_adapters();

// Runs until SIGTERM/SIGINT. Returns the process exit code: 0 after a signal,
// 1 if start-up failed (every error printed to `err`).
int run_daemon(const DaemonOptions& options, std::ostream& err, DaemonAdapters adapters = system_adapters());

}  // namespace smha::service
