// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// smctl subcommands that talk to smhad over the control socket: status, sms, health, events,
// metrics, handover, drill, hold, release, reload. Thin: options -> params,
// lib/client does the call (run_cli_call), renders status and
// events and follows them.
#include <csignal>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "smctl_commands.hpp"
#include "smha/client/cli.hpp"
#include "smha/client/follow.hpp"
#include "smha/client/instances.hpp"
#include "smha/client/render.hpp"

namespace smha::smctl {

namespace {

struct OpsState {
  client::CliOptions status, sms, health, events, metrics, handover, drill, hold, release, reload;
  std::size_t n = 20;
  bool follow = false;
  bool all = false;
  std::string to, drill_to;
  std::string hold_for = "3600";
  std::string hold_reason = "maintenance";
};

int call(const client::CliOptions& o, const std::string& method, const nlohmann::json& params,
         const client::HumanRenderer& render = nullptr) {
  return client::run_cli_call(o, method, params, std::cout, std::cerr, render);
}

void print_text(const control::Reply& r, std::ostream& out) {
  out << (r.text.empty() ? r.data.dump(2) : r.text) << '\n';
}

volatile std::sig_atomic_t g_stop = 0;
extern "C" void on_stop_signal(int) { g_stop = 1; }

// SIGINT/SIGTERM end `events --follow` cleanly: no SA_RESTART, so a blocked
// poll() returns EINTR and the client sees the flag.
void catch_stop_signals() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
}

}  // namespace

void register_daemon_ops(CLI::App& app, int& exit_code, const std::string& fabric) {
  auto st = std::make_shared<OpsState>();
  for (auto* o : {&st->status, &st->sms, &st->health, &st->events, &st->metrics, &st->handover, &st->drill, &st->hold, &st->release,
                  &st->reload})
    o->fabric = &fabric;

  auto* status = app.add_subcommand("status", "show smhad's role, the SMs it polls, OpenSM and alarms");
  client::add_cli_options(*status, st->status);
  status->add_flag("--all", st->all,
                   "one line per smhad on this head (every fabric): fabric, node, role, master, last change, alarms");
  status->callback([st, &exit_code, &fabric] {
    if (st->all) {
      if (!fabric.empty() || st->status.socket_option->count() > 0) {
        std::cerr << "smctl: status --all asks every instance: give neither -f nor --socket\n";
        exit_code = kExitUsage;
        return;
      }
      exit_code = client::run_status_all(st->status, std::cout, std::cerr);
      return;
    }
    exit_code = call(st->status, control::method::kStatus, nlohmann::json::object(),
                     [](const control::Reply& r, std::ostream& out) {
                       out << client::render_status_text(r.data);
                     });
  });

  auto* sms = app.add_subcommand("sms", "every SM on the fabric (the census), like chronyc sources");
  client::add_cli_options(*sms, st->sms);
  sms->callback([st, &exit_code] {
    exit_code = call(st->sms, control::method::kSms, nlohmann::json::object(),
                     [](const control::Reply& r, std::ostream& out) { out << client::render_sms_text(r.data); });
  });

  auto* health = app.add_subcommand("health", "fabric health: links below their width or speed, worst first");
  client::add_cli_options(*health, st->health);
  health->callback([st, &exit_code] {
    exit_code = call(st->health, control::method::kHealth, nlohmann::json::object(),
                     [](const control::Reply& r, std::ostream& out) { out << client::render_health_text(r.data); });
  });

  auto* events = app.add_subcommand("events", "recent transitions, alarms and operations");
  client::add_cli_options(*events, st->events);
  events->add_option("-n", st->n, "number of events")->check(CLI::PositiveNumber)->capture_default_str();
  events->add_flag("-f,--follow", st->follow, "keep printing new events as they happen (until Ctrl-C)");
  events->callback([st, &exit_code] {
    if (st->follow) {
      catch_stop_signals();
      exit_code = client::follow_events(st->events, st->n, std::cout, std::cerr, &g_stop);
      return;
    }
    exit_code = call(st->events, control::method::kEvents, nlohmann::json{{control::param::kN, st->n}},
                     [](const control::Reply& r, std::ostream& out) {
                       out << client::render_events_text(r.data);
                     });
  });

  auto* handover = app.add_subcommand("handover", "planned handover of mastership to a peer");
  client::add_cli_options(*handover, st->handover);
  handover->add_option("--to", st->to, "peer name (default: the best standby)");
  handover->callback([st, &exit_code] {
    nlohmann::json params = nlohmann::json::object();
    if (!st->to.empty()) params[control::param::kTo] = st->to;
    exit_code = call(st->handover, control::method::kHandover, params, print_text);
  });

  auto* metrics = app.add_subcommand("metrics", "print smhad's Prometheus metrics (exposition text)");
  client::add_cli_options(*metrics, st->metrics);
  metrics->callback([st, &exit_code] {
    exit_code = call(st->metrics, control::method::kMetrics, nlohmann::json::object(), [](const control::Reply& r, std::ostream& out) {
      out << r.data.value("text", std::string());
    });
  });

  auto* drill = app.add_subcommand("drill", "planned failover to a peer and failback, timed, with a verdict");
  st->drill.timeout_s = 60;  // two legs of up to handover_bound + 2 s each, plus settling
  client::add_cli_options(*drill, st->drill);
  drill->add_option("--to", st->drill_to, "peer to fail over to (default: the best standby)");
  drill->callback([st, &exit_code] {
    nlohmann::json params = nlohmann::json::object();
    if (!st->drill_to.empty()) params[control::param::kTo] = st->drill_to;
    exit_code = client::run_cli_call(st->drill, control::method::kDrill, params, std::cout, std::cerr, print_text);
  });

  auto* hold = app.add_subcommand("hold", "maintenance hold: freeze automatic transitions");
  client::add_cli_options(*hold, st->hold);
  hold->add_option("--for", st->hold_for, "time until the hold expires: seconds, or with a unit (30m, 2h, 1d); at most 7 days")
      ->check([](const std::string& v) {
        auto d = client::parse_duration_seconds(v, control::kMaxHoldSeconds);
        return d ? std::string() : d.error().message;
      })
      ->capture_default_str();
  hold->add_option("--reason", st->hold_reason, "shown in status and events");
  hold->callback([st, &exit_code] {
    const double secs = client::parse_duration_seconds(st->hold_for, control::kMaxHoldSeconds).value();
    exit_code = call(st->hold, control::method::kHold,
                     nlohmann::json{{control::param::kDurationS, secs}, {control::param::kReason, st->hold_reason}},
                     print_text);
  });

  auto* release = app.add_subcommand("release", "end a maintenance hold");
  client::add_cli_options(*release, st->release);
  release->callback([st, &exit_code] { exit_code = call(st->release, control::method::kRelease, nlohmann::json::object(), print_text); });

  auto* reload = app.add_subcommand("reload", "re-read smha.yaml and apply what changed");
  client::add_cli_options(*reload, st->reload);
  reload->callback([st, &exit_code] { exit_code = call(st->reload, control::method::kReload, nlohmann::json::object(), print_text); });
}

}  // namespace smha::smctl
