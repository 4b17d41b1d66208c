// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// smctl plumbing shared by every subcommand that talks to smhad: the common
// options (--socket, --json, --timeout) and one call that connects, sends,
// prints and maps the outcome to smctl's stable exit code.
#pragma once

#include <functional>
#include <iosfwd>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "smha/control/protocol.hpp"
#include "smha/core/result.hpp"

namespace smha::client {

using control::kDefaultSocketPath;
using control::Reply;
using control::ResultCode;

// smctl's stable exit codes (doc/smctl.md), one table for every subcommand:
// the control-socket calls return 0-3 and 6-8, `smctl sminfo` 4-5,
// `smctl render-config --diff` 9.
enum ExitCode : int {
  kExitOk = 0,
  kExitFailure = 1,       // the operation ran and failed (the daemon answered error / not_found / conflict)
  kExitUsage = 2,         // bad arguments (or the daemon answered bad_request)
  kExitTimeout = 3,       // no answer within the timeout
  kExitMadStatus = 4,     // answered with a non-zero MAD status
  kExitNoPort = 5,        // no such CA / port / port GUID
  kExitNoDaemon = 6,      // cannot reach smhad (no socket, refused, connect timeout; or it went away during events --follow)
  kExitUnauthorized = 7,  // smhad refused: not allowed (or no permission on its socket)
  kExitUnsupported = 8,   // smhad does not know the method, or speaks an incompatible protocol
  kExitDiffers = 9,       // render-config --diff: the file at opensm.conf_path differs
};

struct CliOptions {
  std::string socket_path = kDefaultSocketPath;
  bool json = false;
  double timeout_s = 10.0;
  // smctl -f NAME (outlives the call): instance NAME's socket instead.
  const std::string* fabric = nullptr;
  // The subcommand's --socket, to tell a given path from the default.
  const CLI::Option* socket_option = nullptr;
};

// The socket a call goes to: instance *fabric's (smctl -f), else socket_path.
// Error "invalid" for a bad instance name or -f together with --socket.
Result<std::string> socket_for(const CliOptions& options);

// Adds --socket PATH, --json and --timeout SECONDS to a subcommand, storing
// into `options` (which must outlive the app).
void add_cli_options(CLI::App& command, CliOptions& options);

// Prints an ok reply for humans. The default prints `text` if non-empty,
// otherwise `data` as indented JSON.
using HumanRenderer = std::function<void(const Reply& reply, std::ostream& out)>;

// Calls `method` with `params` on smhad and returns the exit code.
// With options.json: prints the reply envelope as one JSON document on `out`
// (for transport failures a synthetic {"result":"error","error":CODE,"text":...}),
// whatever the outcome. Without: on ok calls `render` with `out`; on any
// failure prints "smctl: METHOD: RESULT: TEXT" on `err`.
int run_cli_call(const CliOptions& options, const std::string& method, const nlohmann::json& params,
                 std::ostream& out, std::ostream& err, const HumanRenderer& render = nullptr);

// Exit code for a reply's result code.
int exit_code_for(ResultCode result);

// Parses a duration for smctl: a positive number of seconds ("90", "1.5"), or
// a number with one unit s, m, h or d ("30s", "90m", "2h", "1d"). Error code
// "invalid" naming the text, also for 0, negative, non-finite values and
// anything over `max_seconds`.
Result<double> parse_duration_seconds(const std::string& text, double max_seconds);

}  // namespace smha::client
