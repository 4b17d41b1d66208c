// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// smctl on a head with one smhad per fabric: -f NAME and status --all.
#include <catch2/catch.hpp>

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <sstream>

#include "smha/client/instances.hpp"
#include "test_support.hpp"

using namespace smha::client;
using namespace smha::control;
using namespace smha::control::test;
using nlohmann::json;

TEST_CASE("smctl -f NAME is instance NAME's socket, with --socket or a bad name a usage error", "[client][instances]") {
  CHECK(instance_socket("fab0") == "/run/smha/fab0.sock");
  CHECK(instance_socket("") == "/run/smha/smhad.sock");
  CLI::App app;
  auto* sub = app.add_subcommand("status");
  CliOptions opts;
  add_cli_options(*sub, opts);
  std::string fabric = "rail3";
  opts.fabric = &fabric;
  app.parse("status", false);
  CHECK(socket_for(opts).value() == "/run/smha/rail3.sock");
  fabric = "../x";
  REQUIRE_FALSE(socket_for(opts).ok());
  CHECK(socket_for(opts).error().message ==
        "-f ../x: the instance name may hold only letters, digits, '_' and '-' (it names files, a socket and a "
        "systemd unit)");
  std::ostringstream out, err;
  CHECK(run_cli_call(opts, "status", json::object(), out, err) == kExitUsage);
  CHECK(err.str() ==
        "smctl: -f ../x: the instance name may hold only letters, digits, '_' and '-' (it names files, a socket and "
        "a systemd unit)\n");
  fabric = "rail3";
  CLI::App app2;
  auto* sub2 = app2.add_subcommand("status");
  CliOptions both;
  add_cli_options(*sub2, both);
  both.fabric = &fabric;
  app2.parse("status --socket /tmp/x.sock", false);
  CHECK(socket_for(both).error().message == "-f rail3 and --socket /tmp/x.sock name two sockets: give one");
  fabric.clear();
  CHECK(socket_for(both).value() == "/tmp/x.sock");
}

TEST_CASE("status --all: one row per instance socket, answered or not", "[client][instances]") {
  TempDir dir;
  LogCapture log;
  auto serve = [&](const std::string& sock, json status) {
    auto o = test_options(dir, log);
    o.socket_path = dir.sub("run/" + sock);
    auto ts = std::make_unique<ThreadedServer>(o);
    REQUIRE(ts->server().register_method("status", Access::ReadOnly, [status](const Call&) {
      return Reply::ok(status);
    }).ok());
    REQUIRE(ts->server().start().ok());
    ts->run();
    return ts;
  };
  auto fab1 = serve("fab1.sock", json{{"node", "head01"},
                                      {"role", "standby"},
                                      {"mastership", {{"guid", "0x20"}, {"node", "head02"}}},
                                      {"last_change", nullptr},
                                      {"alarms", json::array({{{"kind", "config_drift"}, {"detail", "x"}}})}});
  auto fab0 = serve("fab0.sock", json{{"node", "head01"},
                                      {"role", "master"},
                                      {"mastership", {{"guid", "0x10"}, {"node", "head01"}}},
                                      {"last_change", {{"kind", "takeover"}, {"time", "2026-12-06T18:00:00Z"},
                                                       {"outcome", "done"}}},
                                      {"alarms", json::array()}});
  const std::string run = dir.sub("run");
  CHECK(list_instances(run) == std::vector<std::pair<std::string, std::string>>{
                                   {"fab0", run + "/fab0.sock"}, {"fab1", run + "/fab1.sock"}});
  CliOptions opts;
  std::ostringstream out, err;
  CHECK(run_status_all(opts, out, err, run) == kExitOk);
  CHECK(out.str() ==
        "FABRIC  NODE    ROLE     MASTER  LAST CHANGE                           ALARMS\n"
        "fab0    head01  master   head01  takeover 2026-12-06T18:00:00Z (done)  -\n"
        "fab1    head01  standby  head02  -                                     config_drift\n");
  // An instance that is gone, its socket left behind (nothing listens): shown,
  // and the exit code says so.
  fab1.reset();
  {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    REQUIRE(fd >= 0);
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    std::snprintf(sa.sun_path, sizeof sa.sun_path, "%s", (run + "/fab1.sock").c_str());
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0);
    ::close(fd);
  }
  opts.json = true;
  std::ostringstream jout, jerr;
  CHECK(run_status_all(opts, jout, jerr, run) == kExitNoDaemon);
  const auto rows = json::parse(jout.str());
  REQUIRE(rows.size() == 2);
  CHECK(rows[0]["fabric"] == "fab0");
  CHECK(rows[0]["role"] == "master");
  CHECK(rows[0]["master"] == "head01");
  CHECK(rows[1]["fabric"] == "fab1");
  CHECK(rows[1].contains("error"));
  // A reply of another shape (fields of the wrong type): shown as such.
  auto odd = serve("odd.sock", json{{"role", 5}, {"mastership", "x"}, {"last_change", {{"kind", 1}}}});
  auto typed = serve("typed.sock", json{{"role", "standby"}, {"node", "head01"}, {"mastership", {{"node", 7}}},
                                        {"last_change", {{"kind", "handover"}, {"time", 3}}},
                                        {"alarms", json::array({1, {{"kind", 2}}, {{"kind", "no_master"}}})}});
  const auto mixed = status_all(CliOptions{}, run);
  REQUIRE(mixed.size() == 4);
  CHECK(mixed[2]["fabric"] == "odd");
  CHECK(mixed[2]["error"] == "the status reply has no role");
  CHECK(mixed[3]["master"].is_null());
  CHECK(mixed[3]["last_change"] == json{{"kind", "handover"}, {"time", ""}, {"outcome", ""}});
  CHECK(mixed[3]["alarms"] == json::array({"no_master"}));
  CHECK_NOTHROW(render_status_all_text(mixed));
  odd.reset();
  typed.reset();
  // No instance at all.
  TempDir empty;
  std::ostringstream eout, eerr;
  CHECK(run_status_all(CliOptions{}, eout, eerr, empty.sub("run")) == kExitNoDaemon);
  CHECK(eerr.str() == "smctl: status --all: no smhad control socket in " + empty.sub("run") + "\n");
}
