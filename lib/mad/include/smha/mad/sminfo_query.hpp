// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// One SubnGet(SMInfo) for an operator: the logic behind `smctl sminfo`
// (doc/smctl.md). The binary only parses argv and maps SminfoOutcome to its
// exit codes.
#pragma once

#include <optional>
#include <string>

#include <boost/asio/io_context.hpp>

#include "smha/core/clock.hpp"
#include "smha/core/result.hpp"
#include "smha/mad/transport.hpp"
#include "smha/mad/umad_transport.hpp"

namespace smha::mad {

struct SminfoQuery {
  // Neither set: the local port's own SM (directed route, hop count 0).
  std::optional<Lid> lid;
  std::optional<DrPath> dr;
  PortSelector port;
  RequestOptions request{std::chrono::milliseconds(1000), 0, 0};
};

// The target the query addresses: the LID, the path, or the empty path.
Target query_target(const SminfoQuery& query);

enum class SminfoOutcome { Ok, Timeout, MadStatus, NoPort, Failure };

// Sorts a transport or open error by its code (kErrTimeout -> Timeout,
// kErrMadStatus -> MadStatus, kErrNoPort -> NoPort, anything else -> Failure).
SminfoOutcome classify(const Error& error);

struct SminfoReport {
  Target target;
  LocalPortInfo local_port;
  SmInfoReply reply;
};

// Human output: one "field: value" line each for the target, GUID, SM_Key
// ("hidden" unless `show_key`), ActCount, priority, state, the local port used,
// RTT and attempts.
std::string format_sminfo_text(const SminfoReport& report, bool show_key);
// The same as one JSON object (sm_key is null unless `show_key`), newline-terminated.
std::string format_sminfo_json(const SminfoReport& report, bool show_key);
// An error as JSON: {"error":{"code":...,"message":...}}, newline-terminated.
std::string format_error_json(const Error& error);

// Sends one SubnGet(SMInfo) through `transport` and runs `io` until it is
// answered or fails (the transport's deadline bounds this). `io` must not be
// running elsewhere.
Result<SmInfoReply> run_sminfo_get(boost::asio::io_context& io, MadTransport& transport,
                                   const Target& target, const RequestOptions& opts);

struct SminfoCommandResult {
  SminfoOutcome outcome = SminfoOutcome::Failure;
  std::string out;  // for stdout
  std::string err;  // for stderr
};

// The whole command: opens the selected port with UmadTransport, asks, formats.
SminfoCommandResult run_sminfo_command(const SminfoQuery& query, bool json, bool show_key,
                                       const Clock& clock);

}  // namespace smha::mad
