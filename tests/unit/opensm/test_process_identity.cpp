// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>

#include "process_test_util.hpp"
#include "smha/opensm/process_identity.hpp"

using namespace smha::opensm;

TEST_CASE("start time is field 22, counted after the last ')' of comm", "[identity]") {
  // comm "a) (b c" with spaces and parentheses; fields 3.. follow.
  const std::string line =
      "1234 (a) (b c) S 1 1234 1234 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654321 12345 100 "
      "18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n";
  auto v = parse_proc_stat_start_time(line);
  REQUIRE(v.ok());
  CHECK(*v == 987654321u);
  CHECK_FALSE(parse_proc_stat_start_time("1234 (x) S 1 2 3").ok());
  CHECK_FALSE(parse_proc_stat_start_time("no paren at all").ok());
}

TEST_CASE("read_process_identity names the running executable", "[identity]") {
  auto self = read_process_identity(::getpid());
  REQUIRE(self.ok());
  CHECK(self->pid == ::getpid());
  CHECK(self->exe == std::filesystem::read_symlink("/proc/self/exe").string());
  CHECK(self->start_time > 0);
  auto again = read_process_identity(::getpid());
  REQUIRE(again.ok());
  CHECK(*again == *self);
  auto none = read_process_identity(999999999);
  REQUIRE_FALSE(none.ok());
  CHECK(none.error().code == smha::Errc::NotFound);
}

TEST_CASE("pidfile round trip and parse errors", "[identity]") {
  ProcessIdentity id{4242, 1234567, "/usr/sbin/opensm"};
  auto text = format_pidfile(id);
  CHECK(text == "pid=4242\nstart_time=1234567\nexe=/usr/sbin/opensm\n");
  auto back = parse_pidfile(text);
  REQUIRE(back.ok());
  CHECK(*back == id);

  CHECK(parse_pidfile("pid=12\nstart_time=3\n").error().message.find("lacks") != std::string::npos);
  CHECK(parse_pidfile("pid=x\nstart_time=3\nexe=/a\n").error().message == "pidfile line 1: bad pid");
  CHECK(parse_pidfile("pid=1\nstart_time=3\nexe=rel\n").error().message ==
        "pidfile line 3: exe must be absolute");
  CHECK(parse_pidfile("pid=1\nfoo=3\n").error().message == "pidfile line 2: unknown key 'foo'");
  CHECK(parse_pidfile("garbage").error().message == "pidfile line 1: expected key=value");
}
