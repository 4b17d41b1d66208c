// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// smctl's documented exit codes, end to end: the built binary against a real
// control server whose methods answer each result code.
#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <cstdio>
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
