// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// smctl's documented exit codes, end to end: the built binary against a real
// control server whose methods answer each result code.
#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <cstdio>
#include <mutex>
#include <set>
#include <string>

#include "test_support.hpp"

using namespace smha::control;
using namespace smha::control::test;
using nlohmann::json;

namespace {

// Runs smctl with `args`; its exit status (stdout/stderr discarded).
int smctl(const std::string& args) {
  const std::string cmd = std::string(SMHA_SMCTL) + " " + args + " >/dev/null 2>&1";
  const int rc = std::system(cmd.c_str());
  REQUIRE(WIFEXITED(rc));
  return WEXITSTATUS(rc);
}

}  // namespace

TEST_CASE("smctl exit codes: 0, 1, 2, 6, 7 and 8", "[smctl][exit]") {
  TempDir dir;
  LogCapture log;
  ThreadedServer ts(test_options(dir, log));
  auto answer = [&](const std::string& method, Reply reply) {
    REQUIRE(ts.server().register_method(method, Access::ReadOnly, [reply](const Call&) { return reply; }).ok());
  };
  answer("status", Reply::ok(json{{"role", "master"}}));
  answer("release", Reply::failure(ResultCode::Conflict, "refused"));
  answer("reload", Reply::failure(ResultCode::Unauthorized, "root only"));
  answer("hold", Reply::failure(ResultCode::BadRequest, "bad"));
  // "drill" is not registered: an older smhad answers unsupported.
  REQUIRE(ts.server().start().ok());
  ts.run();
  const std::string sock = " --socket " + ts.server().socket_path();
  CHECK(smctl("status --json" + sock) == 0);
  CHECK(smctl("release" + sock) == 1);
  CHECK(smctl("hold" + sock) == 2);
  CHECK(smctl("reload" + sock) == 7);
  CHECK(smctl("drill" + sock) == 8);
  CHECK(smctl("metrics" + sock) == 8);
  CHECK(smctl("status --socket " + dir.sub("absent.sock")) == 6);
  CHECK(smctl("events --follow --socket " + dir.sub("absent.sock")) == 6);
  CHECK(smctl("drill --bogus" + sock) == 2);
}

TEST_CASE("smctl sends only the params keys smhad's methods take", "[smctl][params]") {
  TempDir dir;
  LogCapture log;
  ThreadedServer ts(test_options(dir, log));
  std::mutex mu;
  std::set<std::string> called;  // the handlers the server let through
  for (const auto& m : kMethods) {
    const std::string name(m.name);
    if (name == method::kVersion || name == method::kListMethods) continue;
    REQUIRE(ts.server()
                .register_method(
                    name, Access::ReadOnly,
                    [&mu, &called, name](const Call&) {
                      std::lock_guard<std::mutex> lock(mu);
                      called.insert(name);
                      return Reply::ok(json::object(), "ok");
                    },
                    method_params(name))
                .ok());
  }
  REQUIRE(ts.server().start().ok());
  ts.run();
  const std::string sock = " --socket " + ts.server().socket_path();
  // Every subcommand with every option that becomes a param: none is
  // refused (bad_request, exit 2); each reaches its method.
  for (const char* args : {"status --json", "sms --json", "events -n 5 --json", "metrics", "handover --to head02",
                           "drill --to head02", "hold --for 2h --reason fw", "release", "reload"}) {
    CAPTURE(args);
    CHECK(smctl(std::string(args) + sock) == 0);
  }
  std::lock_guard<std::mutex> lock(mu);
  CHECK(called == std::set<std::string>{"status", "sms", "events", "metrics", "handover", "drill", "hold",
                                        "release", "reload"});
}
