// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// The OpenSM log follower: the state lines OpenSM 3.3.23 writes
// (osm_report_sm_state), only what was appended, partial lines, truncation and
// rotation, bursts above the read cap, and a missing file.
#include <catch2/catch.hpp>

#include "smha/opensm/log_follower.hpp"
#include "test_support.hpp"

using namespace smha;
using namespace smha::opensm;
using namespace smha::os;
using smha::opensm::test::MemoryFileSystem;

namespace {

std::string line(const std::string& stamp, const std::string& msg) {
  return stamp + " [7F3A2B] 0x80 -> " + msg + "\n";
}

std::vector<std::string> states(const std::vector<LoggedSmState>& v) {
  std::vector<std::string> out;
  for (const auto& s : v) out.push_back(s.state);
  return out;
}

}  // namespace

TEST_CASE("parse_sm_state_line: OpenSM's state lines, with its time stamp", "[opensm][log]") {
  auto m = parse_sm_state_line("Dec 03 15:20:33 123456 [7F3A2B] 0x80 -> Entering MASTER state");
  REQUIRE(m);
  CHECK(m->state == "MASTER");
  CHECK(m->stamp == "Dec 03 15:20:33 123456");
  for (std::string s : {"STANDBY", "DISCOVERING", "NOTACTIVE"}) {
    auto p = parse_sm_state_line("Jan 01 00:00:00 000001 [1] 0x80 -> Entering " + s + " state\n");
    REQUIRE(p);
    CHECK(p->state == s);
  }
  auto bare = parse_sm_state_line("Entering STANDBY state");  // stdout form
  REQUIRE(bare);
  CHECK(bare->stamp.empty());
  CHECK_FALSE(parse_sm_state_line("Dec 03 15:20:33 123456 [1] 0x80 -> SUBNET UP"));
  CHECK_FALSE(parse_sm_state_line("Dec 03 15:20:33 123456 [1] 0x02 -> Entering BOGUS state"));
  CHECK_FALSE(parse_sm_state_line("Dec 03 15:20:33 123456 [1] 0x80 -> Entering MASTER state now"));
  // The verbose box (ENTERING SM MASTER STATE) is a second copy, not a change.
  CHECK_FALSE(parse_sm_state_line("Dec 03 15:20:33 123456 [1] 0x04 -> \t\t\t\tENTERING SM MASTER STATE"));
  CHECK_FALSE(parse_sm_state_line(""));
}

TEST_CASE("OpensmLogFollower: each appended state line once, oldest first", "[opensm][log]") {
  MemoryFileSystem fs;
  const std::string path = "/var/log/opensm.log";
  fs.files[path] = line("Dec 03 15:00:00 000001", "Entering MASTER state");
  OpensmLogFollower f(fs, path);
  f.skip_existing();  // history
  CHECK(f.poll().empty());

  // A mastership shorter than a poll round: STANDBY -> MASTER -> STANDBY between two polls.
  fs.files[path] += line("Dec 03 15:00:01 000100", "Entering STANDBY state") +
                    line("Dec 03 15:00:01 000200", "SUBNET UP") +
                    line("Dec 03 15:00:01 050000", "Entering MASTER state") +
                    line("Dec 03 15:00:01 090000", "Entering STANDBY state");
  auto got = f.poll();
  CHECK(states(got) == std::vector<std::string>{"STANDBY", "MASTER", "STANDBY"});
  REQUIRE(got.size() == 3);
  CHECK(got[1].stamp == "Dec 03 15:00:01 050000");
  CHECK(f.poll().empty());  // nothing new: nothing twice

  SECTION("a partial last line waits for its end") {
    const std::string whole = line("Dec 03 15:00:02 000000", "Entering MASTER state");
    fs.files[path] += whole.substr(0, 30);
    CHECK(f.poll().empty());
    fs.files[path] += whole.substr(30);
    CHECK(states(f.poll()) == std::vector<std::string>{"MASTER"});
  }
  SECTION("truncated (log_max_size) or rotated: the new file from its start") {
    fs.files[path] = line("Dec 03 15:00:03 000000", "Entering DISCOVERING state");
    CHECK(states(f.poll()) == std::vector<std::string>{"DISCOVERING"});
    CHECK(f.restarts() == 1);
  }
  SECTION("removed, then created again") {
    fs.files.erase(path);
    CHECK(f.poll().empty());
    REQUIRE(f.last_error());
    CHECK(f.last_error()->code == "not_found");
    fs.files[path] = line("Dec 03 15:00:04 000000", "Entering MASTER state");
    CHECK(states(f.poll()) == std::vector<std::string>{"MASTER"});
    CHECK_FALSE(f.last_error());
  }
}

TEST_CASE("OpensmLogFollower: a burst above the read cap costs at most the cap", "[opensm][log]") {
  MemoryFileSystem fs;
  const std::string path = "/log";
  OpensmLogFollower f(fs, path, 200);
  f.skip_existing();  // no file yet: from 0
  std::string burst;
  for (int i = 0; i < 100; ++i) burst += line("Dec 03 15:00:00 000000", "some sweep line " + std::to_string(i));
  burst += line("Dec 03 15:00:05 000000", "Entering MASTER state");
  fs.files[path] = burst;
  // Only the newest 200 bytes are read; the cut first line is not parsed.
  CHECK(states(f.poll()) == std::vector<std::string>{"MASTER"});
  CHECK(f.skipped_bytes() > 0);
  CHECK(f.skipped_bytes() < burst.size());
  CHECK(f.offset() == burst.size());

  SECTION("a line longer than the cap is skipped, not kept") {
    fs.files[path] += std::string(1000, 'x');
    CHECK(f.poll().empty());
    CHECK(f.offset() == fs.files[path].size());
    fs.files[path] += "\n" + line("Dec 03 15:00:06 000000", "Entering STANDBY state");
    CHECK(states(f.poll()) == std::vector<std::string>{"STANDBY"});
  }
}
