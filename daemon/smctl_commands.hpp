// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// Each smctl subcommand registers itself on the CLI11 app and stores its
// exit code in `exit_code` when it runs. Exit codes: doc/smctl.md.
#pragma once

#include <CLI/CLI.hpp>

#include "smha/control/cli.hpp"

namespace smha::smctl {

// Stable exit codes shared by every subcommand (doc/smctl.md).
enum ExitCode : int {
  kExitOk = 0,
  kExitFailure = 1,        // the operation ran and failed
  kExitUsage = 2,          // bad arguments
  kExitTimeout = 3,        // no answer within the timeout
  kExitMadStatus = 4,      // answered with a non-zero MAD status
  kExitNoPort = 5,         // no such CA / port / port GUID
  kExitNoDaemon = 6,       // cannot reach smhad (or it went away during events --follow)
  kExitUnauthorized = 7,   // smhad refused: not allowed (or no permission on its socket)
  kExitUnsupported = 8,    // smhad does not know the method, or speaks an incompatible protocol
  kExitDiffers = 9,        // render-config --diff: the file at opensm.conf_path differs
};

// One table of exit codes: the control-socket commands return lib/control's.
static_assert(int{kExitOk} == int{smha::control::kCliOk} && int{kExitFailure} == int{smha::control::kCliFailure} &&
              int{kExitUsage} == int{smha::control::kCliUsage} &&
              int{kExitTimeout} == int{smha::control::kCliTimeout} &&
              int{kExitNoDaemon} == int{smha::control::kCliNoDaemon} &&
              int{kExitUnauthorized} == int{smha::control::kCliUnauthorized} &&
              int{kExitUnsupported} == int{smha::control::kCliUnsupported});

inline constexpr const char* kSminfoDescription =
    "query SMInfo of a subnet manager (default: the local port's own SM, directed route 0)";
// `smctl sminfo` runs the helper smctl-sminfo (the one beside smctl's own
// executable, else SMHA_LIBEXEC_DIR/smctl-sminfo) with its arguments, so that
// smctl does not link libibumad.
void register_sminfo(CLI::App& app, int& exit_code);

// Parses argv into `app` and runs the chosen command: its exit code (stored in
// `exit_code` by the command's callback), 0 after --help/--version, kExitUsage
// for bad arguments (CLI11 prints why).
inline int parse_and_run(CLI::App& app, int argc, char** argv, const int& exit_code) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return (rc == 0) ? 0 : kExitUsage;
  }
  return exit_code;
}
// smctl-sminfo's options and action on `cmd`.
void configure_sminfo(CLI::App& cmd, int& exit_code);
void register_render_config(CLI::App& app, int& exit_code);
// status, events, metrics, handover, drill, hold, release, reload (smctl_ops.cpp).
void register_daemon_ops(CLI::App& app, int& exit_code);

}  // namespace smha::smctl
