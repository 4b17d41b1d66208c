// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// smctl plumbing: exit codes and output for every outcome.
#include <catch2/catch.hpp>

#include <sstream>

#include "smha/client/cli.hpp"
#include "test_support.hpp"

using namespace smha::client;
using namespace smha::control;
using namespace smha::control::test;
using nlohmann::json;

TEST_CASE("exit codes map every result code", "[client][cli]") {
  CHECK(exit_code_for(ResultCode::Ok) == 0);
  CHECK(exit_code_for(ResultCode::Error) == 1);
  CHECK(exit_code_for(ResultCode::NotFound) == 1);
  CHECK(exit_code_for(ResultCode::Conflict) == 1);
  CHECK(exit_code_for(ResultCode::BadRequest) == 2);
  CHECK(exit_code_for(ResultCode::Unauthorized) == 7);
  CHECK(exit_code_for(ResultCode::Unsupported) == 8);
  CHECK(exit_code_for(ResultCode::VersionMismatch) == 8);
}

TEST_CASE("cannot reach smhad has its own exit code", "[client][cli]") {
  TempDir dir;
  CliOptions opts;
  opts.socket_path = dir.sub("absent.sock");
  std::ostringstream out, err;
  CHECK(run_cli_call(opts, "status", json::object(), out, err) == kExitNoDaemon);
  CHECK(out.str().empty());
  CHECK_THAT(err.str(), Catch::Contains("cannot reach smhad at " + opts.socket_path));

  opts.json = true;
  std::ostringstream jout, jerr;
  CHECK(run_cli_call(opts, "status", json::object(), jout, jerr) == kExitNoDaemon);
  auto doc = json::parse(jout.str());
  CHECK(doc["result"] == "error");
  CHECK(doc["error"] == "unreachable");
}

TEST_CASE("cli call against a server: human and json output", "[client][cli]") {
  TempDir dir;
  LogCapture log;
  ThreadedServer ts(test_options(dir, log));
  REQUIRE(ts.server().register_method("status", Access::ReadOnly, [](const Call&) {
    return Reply::ok(json{{"role", "master"}});
  }).ok());
  REQUIRE(ts.server().register_method("fails", Access::Mutating, [](const Call&) {
    return Reply::failure(ResultCode::Conflict, "a handover is already running");
  }).ok());
  REQUIRE(ts.server().start().ok());
  ts.run();
  CliOptions opts;
  opts.socket_path = ts.server().socket_path();

  std::ostringstream out, err;
  int rc = run_cli_call(opts, "status", json::object(), out, err, [](const Reply& r, std::ostream& o) {
    o << "role: " << r.data["role"].get<std::string>() << "\n";
  });
  CHECK(rc == 0);
  CHECK(out.str() == "role: master\n");

  std::ostringstream out2, err2;
  CHECK(run_cli_call(opts, "fails", json::object(), out2, err2) == kExitFailure);
  CHECK(err2.str() == "smctl: fails: conflict: a handover is already running\n");

  std::ostringstream out3, err3;
  CHECK(run_cli_call(opts, "nope", json::object(), out3, err3) == kExitUnsupported);

  opts.json = true;
  std::ostringstream jout, jerr;
  CHECK(run_cli_call(opts, "status", json::object(), jout, jerr) == 0);
  auto doc = json::parse(jout.str());
  CHECK(doc["result"] == "ok");
  CHECK(doc["data"]["role"] == "master");
  CHECK(doc["version"] == kProtocolVersion);
}

TEST_CASE("add_cli_options parses --socket, --json and --timeout", "[client][cli]") {
  CLI::App app;
  auto* sub = app.add_subcommand("status");
  CliOptions opts;
  add_cli_options(*sub, opts);
  app.parse("status --socket /tmp/x.sock --json --timeout 2.5", /*program_name_included=*/false);
  CHECK(opts.socket_path == "/tmp/x.sock");
  CHECK(opts.json);
  CHECK(opts.timeout_s == 2.5);
  CliOptions bad;
  CLI::App app2;
  auto* sub2 = app2.add_subcommand("status");
  add_cli_options(*sub2, bad);
  CHECK_THROWS_AS(app2.parse("status --timeout -1", false), CLI::ParseError);
}

TEST_CASE("hold durations: seconds or a unit, bounded, never overflowing", "[client][cli]") {
  CHECK(parse_duration_seconds("90", kMaxHoldSeconds).value() == 90.0);
  CHECK(parse_duration_seconds("1.5", kMaxHoldSeconds).value() == 1.5);
  CHECK(parse_duration_seconds("30s", kMaxHoldSeconds).value() == 30.0);
  CHECK(parse_duration_seconds("90m", kMaxHoldSeconds).value() == 5400.0);
  CHECK(parse_duration_seconds("2h", kMaxHoldSeconds).value() == 7200.0);
  CHECK(parse_duration_seconds("7d", kMaxHoldSeconds).value() == 604800.0);
  for (const char* bad : {"", "0", "-5", "8d", "20000000000", "1e400", "nan", "inf", "2x", "h", "2 h", "0x10"}) {
    INFO(bad);
    auto r = parse_duration_seconds(bad, kMaxHoldSeconds);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == smha::Errc::Invalid);
    CHECK_THAT(r.error().message, Catch::Contains(std::string("'") + bad + "'"));
  }
  CHECK_THAT(parse_duration_seconds("20000000000", kMaxHoldSeconds).error().message,
             Catch::Contains("longer than the limit of 604800 s"));
}
