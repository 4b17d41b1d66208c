// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// smhad's run path: load the YAML, probe OpenSM, open the umad port, start (or
// adopt) OpenSM under the supervisor, run the agent, serve the control socket,
// handle SIGHUP (reload) and SIGTERM/SIGINT (stop polling, leave OpenSM running,
// return 0). doc/architecture.md, "Daemon wiring".
#pragma once

#include <iosfwd>
#include <string>

namespace smha::service {

struct DaemonOptions {
  std::string config_path;
  // Poll and report only: never start, stop, signal or Set anything.
  bool observe = false;
};

// Runs until SIGTERM/SIGINT. Returns the process exit code: 0 after a signal,
// 1 if start-up failed (every error printed to `err`).
int run_daemon(const DaemonOptions& options, std::ostream& err);

}  // namespace smha::service
