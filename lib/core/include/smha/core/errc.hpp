// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// The closed set of error codes an Error carries (result.hpp). Code branches on
// the enum; to_string gives the stable token that logs, events, JSON replies and
// `smctl` output show ("not_found", "mad_status", ...). A new failure gets an
// existing code where one fits; a new code is added here, with its token.
#pragma once

#include <iosfwd>
#include <string>
#include <string_view>

namespace smha {

enum class Errc {
  // Generic.
  Failed,           // "failed": an operation failed for a reason its message gives
  Invalid,          // "invalid": a value that cannot be used (e.g. a MAD field)
  InvalidArgument,  // "invalid_argument": a caller's argument out of its domain
  Range,            // "range": a number outside what is possible
  Type,             // "type": a value of the wrong type (JSON)
  TooLarge,         // "too_large": input over its size cap
  TooDeep,          // "too_deep": input nested deeper than allowed
  Unsupported,      // "unsupported": not available in this build or on this system
  Busy,             // "busy": another operation of the kind is running
  Conflict,         // "conflict": already exists
  Timeout,          // "timeout": no answer in time
  NotFound,         // "not_found": no such file, entry or object
  Io,               // "io": a read or write failed
  ReadOnly,         // "read_only": a write refused by a read-only file system
  NotRegular,       // "not_regular": a path that must be a regular file is not
  NotFile,          // "not_file": a path names something other than a file
  Permission,       // "permission": not allowed
  Parse,            // "parse": text that does not parse
  Json,             // "json": JSON that does not parse
  Config,           // "config": a configuration error
  Policy,           // "policy": an HA policy that does not validate
  Insecure,         // "insecure": a file others could change (hooks, keys)
  // Processes, files and sockets (lib/os, lib/opensm, lib/control).
  Spawn,            // "spawn": a process could not be started
  Exec,             // "exec": the child could not exec its program
  Resources,        // "resources": out of fds, processes or memory (transient: retried)
  Kill,             // "kill": a signal could not be sent
  Signal,           // "signal": a signal the caller cannot handle
  Esrch,            // "esrch": no such process
  NotRunning,       // "not_running": the process is not running
  Foreign,          // "foreign": the port or file belongs to a process that is not ours
  Probe,            // "probe": the OpenSM binary could not be probed
  Dir,              // "dir": an unusable directory
  Socket,           // "socket": a socket call failed
  Group,            // "group": an unknown or unusable group
  Bind,             // "bind": a listening socket could not be bound
  Open,             // "open": a device or port could not be opened
  BadAddress,       // "bad_address": an address that is not allowed (not loopback)
  // MADs (lib/mad, lib/agent).
  MadStatus,        // "mad_status": answered with a non-zero MAD status
  Send,             // "send": a MAD could not be sent
  Decode,           // "decode": an answer that does not decode
  Cancelled,        // "cancelled": the request was cancelled
  NoPort,           // "no_port": no such CA, port or port GUID
  NoRoute,          // "no_route": no LID or path known for the target
  RouteMismatch,    // "route_mismatch": the target answers with another identity
  NotSent,          // "not_sent": deliberately not sent (rule of the engine)
  BadDigest,        // "bad_digest": a configuration digest that does not parse
  Hold,             // "hold": refused by a maintenance hold
  Observe,          // "observe": refused in observe mode
  // The control socket (lib/control, lib/client).
  Unreachable,      // "unreachable": no daemon at the socket
  Closed,           // "closed": the peer closed the connection
  Protocol,         // "protocol": a frame or reply that breaks the protocol
  Interrupted,      // "interrupted": stopped by a signal
  FrameTooLarge,    // "frame_too_large": a message over the frame cap
  BadRequest,       // "bad_request": a request that does not validate
  BadDuration,      // "bad_duration": a duration that does not parse
};
// The last code (a new one goes before it, or moves this).
inline constexpr Errc kLastErrc = Errc::BadDuration;

std::string_view to_string(Errc code);
std::ostream& operator<<(std::ostream& out, Errc code);  // its token

// nlohmann::json (found by ADL) stores an Errc as its token, never as a number:
// `j["code"] = e.code` gives "timeout" as it did when codes were strings.
template <typename Json>
void to_json(Json& j, Errc code) {
  j = std::string(to_string(code));
}

}  // namespace smha
