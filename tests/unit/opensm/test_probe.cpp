// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include <catch2/catch.hpp>

#include <signal.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>

#include "smha/core/clock.hpp"
#include "smha/opensm/probe.hpp"
#include "test_support.hpp"

using namespace smha;
using namespace smha::opensm;
using namespace smha::os;
using namespace smha::opensm::test;

namespace {

// True once `pid` no longer runs (gone, or a zombie nobody reaped yet).
bool process_gone(int pid) {
  if (::kill(pid, 0) != 0) return errno == ESRCH;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  auto close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'Z';
}

// Waits (bounded) for the condition a SIGKILL makes true.
bool eventually_gone(int pid) {
  SteadyClock clock;
  auto deadline = clock.now() + std::chrono::seconds(5);
  while (clock.now() < deadline) {
    if (process_gone(pid)) return true;
    struct timespec ts{0, 1000000};
    nanosleep(&ts, nullptr);
  }
  return process_gone(pid);
}

}  // namespace

TEST_CASE("probe of a captured upstream OpenSM 3.3.23") {
  auto caps = parse_probe("/usr/sbin/opensm", capture("opensm-3.3.23"));
  REQUIRE(caps.ok());
  CHECK(caps->version == "3.3.23");
  CHECK(caps->flavor == Flavor::Upstream);
  CHECK(caps->defaults.size() == 160);
  CHECK(caps->knows("sm_priority"));
  CHECK(caps->knows("sminfo_polling_timeout"));
  CHECK_FALSE(caps->knows("sharp_enabled"));
  CHECK_FALSE(caps->knows("priority"));
  CHECK(caps->defaults.at("sm_priority") == "0");
  CHECK(caps->defaults.at("sm_key") == "0x0000000000000001");
  CHECK_FALSE(caps->adaptive_routing);
  CHECK_FALSE(caps->sharp);
  CHECK(caps->describe() == "OpenSM 3.3.23 (upstream) at /usr/sbin/opensm");
}

TEST_CASE("probe of a (synthetic) NVIDIA SM capture") {
  auto caps = parse_probe("/opt/nvidia/opensm", capture("nvidia-synthetic"));
  REQUIRE(caps.ok());
  CHECK(caps->version == "5.17.0.MLNX20231105.synthetic");
  CHECK(caps->flavor == Flavor::Nvidia);
  CHECK(caps->adaptive_routing);
  CHECK(caps->sharp);
  CHECK(caps->knows("sharp_enabled"));
}

TEST_CASE("probe output without keys or banner") {
  auto empty = parse_probe("/bin/x", ProbeOutput{"hello\n", "# nothing\n\n"});
  REQUIRE_FALSE(empty.ok());
  CHECK(empty.error().code == Errc::Failed);
  CHECK(empty.error().message == "/bin/x -c wrote no opensm.conf keys; is it OpenSM?");
  auto no_banner = parse_probe("/bin/x", ProbeOutput{"", "sm_priority 0\n"});
  REQUIRE(no_banner.ok());
  CHECK(no_banner->version == "unknown");
}

TEST_CASE("probe_opensm runs the binary once without a config") {
  FakeOpensm fake("opensm-3.3.23");
  auto caps = probe_opensm(fake, "/usr/sbin/opensm");
  REQUIRE(caps.ok());
  CHECK(fake.runs == 1);
  CHECK(fake.last_binary == "/usr/sbin/opensm");
  CHECK(fake.last_config.empty());
  fake.fail = make_error(Errc::Timeout, "too slow");
  auto failed = probe_opensm(fake, "/usr/sbin/opensm");
  REQUIRE_FALSE(failed.ok());
  CHECK(failed.error().message == "too slow");
}

TEST_CASE("ExecOpensmRunner: a binary that does not exist") {
  ExecOpensmRunner runner;
  auto r = runner.run("/nonexistent/opensm", std::nullopt);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == Errc::Exec);
  CHECK(r.error().message == "cannot run /nonexistent/opensm: No such file or directory");
}

TEST_CASE("ExecOpensmRunner: a binary that writes no dump") {
  ExecOpensmRunner runner;
  auto r = runner.run(data_path("probe/silent-opensm.sh"), std::nullopt);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == Errc::Failed);
  CHECK(r.error().message == data_path("probe/silent-opensm.sh") +
                                 " -c wrote no file (it exited with status 3); its output:\n"
                                 "not opensm\n");
}

TEST_CASE("ExecOpensmRunner: a hanging binary is killed by pid, with its process group") {
  std::string pidfile = (std::filesystem::temp_directory_path() /
                         ("smha-hang-" + std::to_string(::getpid()))).string();
  std::filesystem::remove(pidfile);
  REQUIRE(::setenv("SMHA_TEST_PIDFILE", pidfile.c_str(), 1) == 0);
  ExecOpensmRunner runner(std::chrono::milliseconds(300));
  SteadyClock clock;
  auto start = clock.now();
  auto r = runner.run(data_path("probe/hang-opensm.sh"), std::nullopt);
  auto took = clock.now() - start;
  ::unsetenv("SMHA_TEST_PIDFILE");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == Errc::Timeout);
  CHECK(took >= std::chrono::milliseconds(300));
  CHECK(took < std::chrono::seconds(5));
  // "... killed pid N": the script itself is reaped.
  auto at = r.error().message.rfind("killed pid ");
  REQUIRE(at != std::string::npos);
  int pid = std::stoi(r.error().message.substr(at + 11));
  CHECK(process_gone(pid));
  // Its child (which held stdout open) died with the process group.
  std::ifstream in(pidfile);
  int child = 0;
  in >> child;
  std::filesystem::remove(pidfile);
  REQUIRE(child > 0);
  CHECK(eventually_gone(child));
}
