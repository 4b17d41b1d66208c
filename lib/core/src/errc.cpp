// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/core/errc.hpp"

#include <ostream>

namespace smha {

std::string_view to_string(Errc code) {
  switch (code) {
    case Errc::Failed: return "failed";
    case Errc::Invalid: return "invalid";
    case Errc::InvalidArgument: return "invalid_argument";
    case Errc::Range: return "range";
    case Errc::Type: return "type";
    case Errc::TooLarge: return "too_large";
    case Errc::TooDeep: return "too_deep";
    case Errc::Unsupported: return "unsupported";
    case Errc::Busy: return "busy";
    case Errc::Conflict: return "conflict";
    case Errc::Timeout: return "timeout";
    case Errc::NotFound: return "not_found";
    case Errc::Io: return "io";
    case Errc::ReadOnly: return "read_only";
    case Errc::NotRegular: return "not_regular";
    case Errc::NotFile: return "not_file";
    case Errc::Permission: return "permission";
    case Errc::Parse: return "parse";
    case Errc::Json: return "json";
    case Errc::Config: return "config";
    case Errc::Policy: return "policy";
    case Errc::Insecure: return "insecure";
    case Errc::Spawn: return "spawn";
    case Errc::Exec: return "exec";
    case Errc::Resources: return "resources";
    case Errc::Kill: return "kill";
    case Errc::Signal: return "signal";
    case Errc::Esrch: return "esrch";
    case Errc::NotRunning: return "not_running";
    case Errc::Foreign: return "foreign";
    case Errc::Probe: return "probe";
    case Errc::Dir: return "dir";
    case Errc::Socket: return "socket";
    case Errc::Group: return "group";
    case Errc::Bind: return "bind";
    case Errc::Open: return "open";
    case Errc::BadAddress: return "bad_address";
    case Errc::MadStatus: return "mad_status";
    case Errc::Send: return "send";
    case Errc::Decode: return "decode";
    case Errc::Cancelled: return "cancelled";
    case Errc::NoPort: return "no_port";
    case Errc::NoRoute: return "no_route";
    case Errc::RouteMismatch: return "route_mismatch";
    case Errc::NotSent: return "not_sent";
    case Errc::BadDigest: return "bad_digest";
    case Errc::Hold: return "hold";
    case Errc::Observe: return "observe";
    case Errc::Unreachable: return "unreachable";
    case Errc::Closed: return "closed";
    case Errc::Protocol: return "protocol";
    case Errc::Interrupted: return "interrupted";
    case Errc::FrameTooLarge: return "frame_too_large";
    case Errc::BadRequest: return "bad_request";
    case Errc::BadDuration: return "bad_duration";
  }
  return "failed";
}

std::ostream& operator<<(std::ostream& out, Errc code) { return out << to_string(code); }

}  // namespace smha
