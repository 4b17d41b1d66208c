// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// The closed set of error codes an Error carries (result.hpp). Code branches on
// the enum; to_string gives the stable token that logs, events, JSON replies and
// `smctl` output show ("not_found", "mad_status", ...); the message says the
// rest. A code exists because a caller branches on it or an operator must tell
// it apart. A new failure gets an existing code where one fits; a new code is
// added here, with its token.
#pragma once

#include <iosfwd>
#include <string>
#include <string_view>

namespace smha {

enum class Errc {
  // Generic.
  Failed,         // "failed": an operation failed for a reason its message gives
  Invalid,        // "invalid": a value or argument that cannot be used (out of range, wrong type)
  TooLarge,       // "too_large": input over its size or nesting cap
  Unsupported,    // "unsupported": not available in this build, on this system or in the simulator
  Busy,           // "busy": held by another process or operation (a lock, a listening server)
  Conflict,       // "conflict": clashes with what exists or with the current state
  Timeout,        // "timeout": no answer in time
  NotFound,       // "not_found": no such file, entry, process, route or object
  Io,             // "io": a system call on a file, directory, device or socket failed
  NotRegular,     // "not_regular": a path that must be a regular file is not
  Permission,     // "permission": not allowed (access denied, a read-only file system)
  Parse,          // "parse": text, JSON or bytes that do not parse (a malformed MAD)
  Config,         // "config": a configuration error
  Policy,         // "policy": an HA policy that does not validate
  Insecure,       // "insecure": a file or directory others could change, or not the kind required
  // Processes (lib/os, lib/opensm).
  Exec,           // "exec": the child could not exec its program
  Resources,      // "resources": out of fds, processes or memory (transient: retried)
  Foreign,        // "foreign": the port or file belongs to a process that is not ours
  // MADs (lib/mad, lib/agent).
  MadStatus,      // "mad_status": answered with a non-zero MAD status
  NoPort,         // "no_port": no such CA, port or port GUID
  RouteMismatch,  // "route_mismatch": the target answers with another identity
  Observe,        // "observe": refused in observe mode
  // The control socket (lib/control, lib/client).
  Unreachable,    // "unreachable": no daemon at the socket
  Closed,         // "closed": the peer closed the connection, or the transport was closed
  Protocol,       // "protocol": a frame or reply that breaks the protocol
  Interrupted,    // "interrupted": stopped by a signal
  FrameTooLarge,  // "frame_too_large": a message over the frame cap
  BadRequest,     // "bad_request": a request that does not validate
};
// The last code (a new one goes before it, or moves this).
inline constexpr Errc kLastErrc = Errc::BadRequest;

std::string_view to_string(Errc code);
std::ostream& operator<<(std::ostream& out, Errc code);  // its token

// nlohmann::json (found by ADL) stores an Errc as its token, never as a number:
// `j["code"] = e.code` gives "timeout" as it did when codes were strings.
template <typename Json>
void to_json(Json& j, Errc code) {
  j = std::string(to_string(code));
}

}  // namespace smha
