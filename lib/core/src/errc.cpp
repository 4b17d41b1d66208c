// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/core/errc.hpp"

#include <ostream>

namespace smha {

std::string_view to_string(Errc code) {
  switch (code) {
    case Errc::Failed: return "failed";
    case Errc::Invalid: return "invalid";
    case Errc::TooLarge: return "too_large";
    case Errc::Unsupported: return "unsupported";
    case Errc::Busy: return "busy";
    case Errc::Conflict: return "conflict";
    case Errc::Timeout: return "timeout";
    case Errc::NotFound: return "not_found";
    case Errc::Io: return "io";
    case Errc::NotRegular: return "not_regular";
    case Errc::Permission: return "permission";
    case Errc::Parse: return "parse";
    case Errc::Config: return "config";
    case Errc::Policy: return "policy";
    case Errc::Insecure: return "insecure";
    case Errc::Exec: return "exec";
    case Errc::Resources: return "resources";
    case Errc::Foreign: return "foreign";
    case Errc::MadStatus: return "mad_status";
    case Errc::NoPort: return "no_port";
    case Errc::RouteMismatch: return "route_mismatch";
    case Errc::Observe: return "observe";
    case Errc::Unreachable: return "unreachable";
    case Errc::Closed: return "closed";
    case Errc::Protocol: return "protocol";
    case Errc::Interrupted: return "interrupted";
    case Errc::FrameTooLarge: return "frame_too_large";
    case Errc::BadRequest: return "bad_request";
  }
  return "failed";
}

std::ostream& operator<<(std::ostream& out, Errc code) { return out << to_string(code); }

}  // namespace smha
