// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// One smhad per state_dir: a second instance exits at once with a message
// naming the holder's PID, before it opens the IB port or starts anything.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "smha_yaml.hpp"
#include "test_support.hpp"

using namespace smha::control::test;

namespace {

// Runs `cmd`; its exit status and everything it wrote to stdout and stderr.
std::pair<int, std::string> run(const std::string& cmd) {
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  REQUIRE(p != nullptr);
  std::string out;
  std::array<char, 512> buf{};
  while (std::fgets(buf.data(), static_cast<int>(buf.size()), p) != nullptr) out += buf.data();
  const int rc = ::pclose(p);
  REQUIRE(WIFEXITED(rc));
  return {WEXITSTATUS(rc), out};
}

}  // namespace

TEST_CASE("a second smhad on the same state_dir exits naming the holder's PID", "[smhad][lock]") {
  TempDir dir;
  const std::string state = dir.sub("state");
  std::filesystem::create_directories(state);
  const std::string yaml = dir.sub("smha.yaml");
  smha::test::HeadYaml y;
  y.dir = dir.path();
  y.state_dir = state;
  y.write(yaml);
  // The running instance: it holds the lock and recorded its PID.
  const std::string lock = state + "/smhad.lock";
  int fd = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  REQUIRE(fd >= 0);
  REQUIRE(::flock(fd, LOCK_EX | LOCK_NB) == 0);
  REQUIRE(::pwrite(fd, "424242\n", 7, 0) == 7);

  auto [rc, out] = run(std::string(SMHA_SMHAD) + " -c " + yaml + " --log-target stderr");
  INFO(out);
  CHECK(rc == 1);
  CHECK(out.find("another smhad (pid 424242) already runs with state_dir " + state) != std::string::npos);
  CHECK(out.find(lock) != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(dir.sub("opensm.conf")));  // nothing was started or written
  CHECK_FALSE(std::filesystem::exists(dir.sub("ctl/smhad.sock")));
  ::close(fd);
}

TEST_CASE("an unusable state_dir fails --check-config and start-up, naming the failing call",
          "[smhad][state_dir]") {
  TempDir dir;
  const std::string file = dir.sub("a-file");
  std::ofstream(file) << "not a directory\n";
  auto yaml_with = [&](const std::string& state) {
    std::string yaml = dir.sub("smha.yaml");
    smha::test::HeadYaml y;
    y.dir = dir.path();
    y.state_dir = state;
    y.write(yaml);
    return yaml;
  };
  SECTION("a usable one passes --check-config") {
    auto [rc, out] = run(std::string(SMHA_SMHAD) + " --check-config -c " + yaml_with(dir.sub("state")));
    INFO(out);
    CHECK(rc == 0);
    CHECK_FALSE(std::filesystem::exists(dir.sub("state")));  // checked, not created
  }
  SECTION("below a regular file") {
    const std::string yaml = yaml_with(file + "/state");
    const std::string want = "state_dir " + file + "/state is not usable: mkdir " + file +
                             "/state: Not a directory (" + file + " is not a directory)";
    auto [rc, out] = run(std::string(SMHA_SMHAD) + " --check-config -c " + yaml);
    INFO(out);
    CHECK(rc == 1);
    CHECK(out.find(want) != std::string::npos);
    auto [rc2, out2] = run(std::string(SMHA_SMHAD) + " -c " + yaml + " --log-target stderr");
    INFO(out2);
    CHECK(rc2 == 1);
    CHECK(out2.find("smhad: " + want) != std::string::npos);
    CHECK(out2.find("cannot execute") == std::string::npos);
    CHECK_FALSE(std::filesystem::exists(dir.sub("opensm.conf")));  // nothing started or written
    CHECK_FALSE(std::filesystem::exists(dir.sub("ctl/smhad.sock")));
  }
  SECTION("on a file system that refuses new entries (sysfs)") {
    const std::string yaml = yaml_with("/sys/smha-state");
    auto [rc, out] = run(std::string(SMHA_SMHAD) + " --check-config -c " + yaml);
    INFO(out);
    CHECK(rc == 1);
    CHECK(out.find("state_dir /sys/smha-state is not usable: open /sys/.smhad-probe-") != std::string::npos);
    CHECK(out.find("Permission denied") != std::string::npos);
    auto [rc2, out2] = run(std::string(SMHA_SMHAD) + " -c " + yaml + " --log-target stderr");
    INFO(out2);
    CHECK(rc2 == 1);
    CHECK(out2.find("smhad: state_dir /sys/smha-state is not usable: mkdir /sys/smha-state: Operation not permitted") !=
          std::string::npos);
  }
}
