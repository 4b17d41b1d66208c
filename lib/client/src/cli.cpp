// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/client/cli.hpp"

#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ostream>

#include "smha/client/instances.hpp"
#include "smha/control/client.hpp"

namespace smha::client {

using control::ControlClient;

void add_cli_options(CLI::App& command, CliOptions& options) {
  options.socket_option =
      command.add_option("--socket", options.socket_path, "smhad control socket")->capture_default_str();
  command.add_flag("--json", options.json, "print the reply as JSON (for scripts)");
  command.add_option("--timeout", options.timeout_s, "seconds to wait for smhad")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
}

int exit_code_for(ResultCode result) {
  switch (result) {
    case ResultCode::Ok: return kExitOk;
    case ResultCode::BadRequest: return kExitUsage;
    case ResultCode::Unauthorized: return kExitUnauthorized;
    case ResultCode::Unsupported:
    case ResultCode::VersionMismatch: return kExitUnsupported;
    case ResultCode::Error:
    case ResultCode::NotFound:
    case ResultCode::Conflict: return kExitFailure;
  }
  return kExitFailure;
}

namespace {
int exit_code_for_transport(Errc code) {
  if (code == control::kErrUnreachable) return kExitNoDaemon;
  if (code == control::kErrPermission) return kExitUnauthorized;
  if (code == control::kErrTimeout) return kExitTimeout;
  return kExitFailure;
}
}  // namespace

Result<std::string> socket_for(const CliOptions& options) {
  if (options.fabric == nullptr || options.fabric->empty()) return options.socket_path;
  if (auto why = fabric_name_problem(*options.fabric))
    return make_error(Errc::Invalid, "-f " + *options.fabric + ": the instance name " + *why);
  if (options.socket_option != nullptr && options.socket_option->count() > 0)
    return make_error(Errc::Invalid, "-f " + *options.fabric + " and --socket " + options.socket_path +
                                         " name two sockets: give one");
  return instance_socket(*options.fabric);
}

int run_cli_call(const CliOptions& options, const std::string& method, const nlohmann::json& params,
                 std::ostream& out, std::ostream& err, const HumanRenderer& render) {
  auto timeout = std::chrono::milliseconds(static_cast<long long>(options.timeout_s * 1000.0));
  const auto socket = socket_for(options);
  if (!socket) {
    err << "smctl: " << socket.error().message << '\n';
    return kExitUsage;
  }
  auto reply = [&]() -> Result<Reply> {
    auto client = ControlClient::connect(*socket, timeout);
    if (!client) return client.error();
    return client->call(method, params, timeout);
  }();
  if (!reply) {
    const Error& e = reply.error();
    if (options.json) {
      out << nlohmann::json{{"result", "error"}, {"error", to_string(e.code)}, {"text", e.message}}.dump(2) << '\n';
    } else {
      err << "smctl: " << method << ": " << e.message << '\n';
    }
    return exit_code_for_transport(e.code);
  }
  if (options.json) {
    nlohmann::json doc = {{"result", std::string(to_string(reply->result))},
                          {"text", reply->text},
                          {"data", reply->data},
                          {"version", reply->version}};
    out << doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
  } else if (reply->is_ok()) {
    if (render) {
      render(*reply, out);
    } else if (!reply->text.empty()) {
      out << reply->text << '\n';
    } else {
      out << reply->data.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
    }
  } else {
    err << "smctl: " << method << ": " << to_string(reply->result) << ": " << reply->text << '\n';
  }
  return exit_code_for(reply->result);
}

Result<double> parse_duration_seconds(const std::string& text, double max_seconds) {
  auto bad = [&](const std::string& why) {
    return make_error(Errc::Invalid, "duration '" + text + "': " + why);
  };
  if (text.empty()) return bad("empty");
  std::string number = text;
  double unit = 1;
  switch (text.back()) {
    case 's': unit = 1; number.pop_back(); break;
    case 'm': unit = 60; number.pop_back(); break;
    case 'h': unit = 3600; number.pop_back(); break;
    case 'd': unit = 86400; number.pop_back(); break;
    default: break;
  }
  bool plain = !number.empty();
  for (char ch : number) plain = plain && (std::isdigit(static_cast<unsigned char>(ch)) || ch == '.');
  if (!plain)
    return bad("expected a number of seconds or a number with s, m, h or d (e.g. 90, 30m, 2h)");
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(number, &used);
  } catch (const std::exception&) {
    return bad("not a number");
  }
  if (used != number.size()) return bad("expected a number of seconds or a number with s, m, h or d (e.g. 90, 30m, 2h)");
  v *= unit;
  if (!std::isfinite(v) || v <= 0) return bad("must be more than 0");
  if (v > max_seconds) {
    char limit[64];
    std::snprintf(limit, sizeof limit, "%.0f", max_seconds);
    return bad(std::string("longer than the limit of ") + limit + " s");
  }
  return v;
}

}  // namespace smha::client
