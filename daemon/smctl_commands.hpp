// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// Each smctl subcommand registers itself on the CLI11 app and stores its
// exit code in `exit_code` when it runs. Exit codes: doc/smctl.md.
#pragma once

#include <CLI/CLI.hpp>

#include "smha/client/cli.hpp"

namespace smha::smctl {

// Stable exit codes shared by every subcommand (doc/smctl.md): lib/client's table.
using enum client::ExitCode;

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
// status, events, metrics, handover, drill, hold, release, reload (smctl_ops.cpp);
// `fabric` is smctl -f NAME (the instance they talk to), read when they run.
void register_daemon_ops(CLI::App& app, int& exit_code, const std::string& fabric);

}  // namespace smha::smctl
