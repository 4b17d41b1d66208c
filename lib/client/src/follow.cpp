// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/client/follow.hpp"

#include <chrono>
#include <ostream>

#include "smha/control/client.hpp"
#include "smha/client/render.hpp"

namespace smha::client {

using nlohmann::json;

int follow_events(const CliOptions& options, std::size_t n, std::ostream& out, std::ostream& err,
                  const volatile std::sig_atomic_t* stop) {
  const auto timeout = std::chrono::milliseconds(static_cast<long long>(options.timeout_s * 1000.0));
  auto print = [&](const json& events) {
    if (options.json) {
      for (const auto& e : events) out << e.dump(-1, ' ', false, json::error_handler_t::replace) << '\n';
    } else {
      out << render_events_text(json{{"events", events}});
    }
    out << std::flush;
  };
  auto gone = [&](const Error& e, bool connected) {
    if (e.code == control::kErrInterrupted || (stop && *stop)) return kExitOk;
    if (e.code == control::kErrTimeout) {
      err << "smctl: events: " << e.message << '\n';
      return kExitTimeout;
    }
    if (e.code == control::kErrPermission) {
      err << "smctl: events: " << e.message << '\n';
      return kExitUnauthorized;
    }
    err << "smctl: events: " << (connected ? "smhad went away: " : "") << e.message << '\n';
    return kExitNoDaemon;
  };
  const auto socket = socket_for(options);
  if (!socket) {
    err << "smctl: " << socket.error().message << '\n';
    return kExitUsage;
  }
  auto client = control::ControlClient::connect(*socket, timeout);
  if (!client) return gone(client.error(), false);
  client->set_interrupt_flag(stop);
  auto first = client->call(control::method::kEvents, json{{control::param::kN, n}}, timeout);
  if (!first) return gone(first.error(), true);
  if (!first->is_ok()) {
    err << "smctl: events: " << control::to_string(first->result) << ": " << first->text << '\n';
    return exit_code_for(first->result);
  }
  print(first->data.value("events", json::array()));
  std::uint64_t after = first->data.value("last_seq", std::uint64_t{0});
  const auto poll_timeout = timeout + std::chrono::milliseconds(static_cast<long long>(kFollowWaitSeconds * 1000));
  while (!(stop && *stop)) {
    auto r = client->call(control::method::kEvents,
                          json{{control::param::kAfter, after}, {control::param::kWaitS, kFollowWaitSeconds},
                               {control::param::kN, 1000}},
                          poll_timeout);
    if (!r) return gone(r.error(), true);
    if (!r->is_ok()) {
      err << "smctl: events: " << control::to_string(r->result) << ": " << r->text << '\n';
      return exit_code_for(r->result);
    }
    const json events = r->data.value("events", json::array());
    print(events);
    const auto last = r->data.value("last_seq", std::uint64_t{0});
    if (!events.empty()) after = events.back().value("seq", after);
    else if (last < after) after = last;  // smhad's history restarted below us
  }
  return kExitOk;
}

}  // namespace smha::client
