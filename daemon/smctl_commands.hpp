// Each smctl subcommand registers itself on the CLI11 app and stores its
// exit code in `exit_code` when it runs. Exit codes: doc/smctl.md.
#pragma once

#include <CLI/CLI.hpp>

namespace smha::smctl {

// Stable exit codes shared by every subcommand (doc/smctl.md).
enum ExitCode : int {
  kExitOk = 0,
  kExitFailure = 1,        // the operation ran and failed
  kExitUsage = 2,          // bad arguments
  kExitTimeout = 3,        // no answer within the timeout
  kExitMadStatus = 4,      // answered with a non-zero MAD status
  kExitNoPort = 5,         // no such CA / port / port GUID
  kExitNoDaemon = 6,       // cannot reach smhad
};

void register_sminfo(CLI::App& app, int& exit_code);
void register_render_config(CLI::App& app, int& exit_code);
// status, events, handover, hold, release, reload (smctl_ops.cpp).
void register_daemon_ops(CLI::App& app, int& exit_code);

}  // namespace smha::smctl
