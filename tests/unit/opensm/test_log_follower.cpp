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

std::vector<std::string> states(const std::vector<LoggedEvent>& v) {
  std::vector<std::string> out;
  for (const auto& s : v)
    if (s.kind == LoggedEvent::Kind::SmState) out.push_back(s.text);
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
  REQUIRE(got.size() == 4);
  CHECK(got[1].kind == LoggedEvent::Kind::SubnetUp);
  CHECK(got[2].stamp == "Dec 03 15:00:01 050000");
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
    CHECK(f.last_error()->code == Errc::NotFound);
    fs.files[path] = line("Dec 03 15:00:04 000000", "Entering MASTER state");
    CHECK(states(f.poll()) == std::vector<std::string>{"MASTER"});
    CHECK_FALSE(f.last_error());
  }
}

TEST_CASE("parse_log_event: the lines of a master sweep the takeover report reads", "[opensm][log]") {
  // As OpenSM 3.3.23 wrote them in the lab (ftree and updn fail on its
  // two-switch fabric, minhop configures the switches).
  auto up = parse_log_event("Dec 04 17:50:03 844495 [437AD6C0] 0x02 -> SUBNET UP");
  REQUIRE(up);
  CHECK(up->kind == LoggedEvent::Kind::SubnetUp);
  CHECK(up->stamp == "Dec 04 17:50:03 844495");
  auto failed = parse_log_event("Dec 04 17:50:03 842268 [437AD6C0] 0x01 -> ucast_mgr_route: ftree: cannot build lid matrices");
  REQUIRE(failed);
  CHECK(failed->kind == LoggedEvent::Kind::RoutingFailed);
  CHECK(failed->text == "ftree: cannot build lid matrices");
  auto done = parse_log_event(
      "Dec 04 17:50:03 842370 [437AD6C0] 0x02 -> osm_ucast_mgr_process: minhop tables configured on all switches");
  REQUIRE(done);
  CHECK(done->kind == LoggedEvent::Kind::RoutingDone);
  CHECK(done->text == "minhop");
  auto none = parse_log_event("Dec 04 17:50:03 842370 [1] 0x01 -> osm_ucast_mgr_process: No routing engine able to "
                              "successfully configure  switch tables on current fabric");
  REQUIRE(none);
  CHECK(none->kind == LoggedEvent::Kind::RoutingFailed);
  auto state = parse_log_event("Dec 04 17:50:03 839515 [437AD6C0] 0x80 -> Entering MASTER state");
  REQUIRE(state);
  CHECK(state->kind == LoggedEvent::Kind::SmState);
  CHECK(state->text == "MASTER");

  // Loading sa_db_file (osm_sa.c): each way it fails, the function's name dropped.
  auto no_file = parse_log_event(
      "Dec 07 08:01:02 100000 [1] 0x01 -> osm_sa_db_file_load: ERR 4C02: Can't open sa db file "
      "'/var/lib/smha/opensm-sa.copy'. Skip restoring");
  REQUIRE(no_file);
  CHECK(no_file->kind == LoggedEvent::Kind::SaRestoreFailed);
  CHECK(no_file->text == "ERR 4C02: Can't open sa db file '/var/lib/smha/opensm-sa.copy'. Skip restoring");
  auto parse = parse_log_event("Dec 07 08:01:02 100000 [1] 0x01 -> osm_sa_db_file_load: PARSE ERROR: /x:3: "
                               "cannot find \"mlid=0x\" string");
  REQUIRE(parse);
  CHECK(parse->kind == LoggedEvent::Kind::SaRestoreFailed);
  CHECK(parse->text.starts_with("PARSE ERROR: /x:3:"));
  auto taken = parse_log_event("Dec 07 08:01:02 100000 [1] 0x01 -> load_mcgroup: cannot create MC group with mlid "
                               "0xc001 and mgid 0xff12601bffff0000:0x00000001ff000001");
  REQUIRE(taken);
  CHECK(taken->kind == LoggedEvent::Kind::SaRestoreFailed);
  CHECK_FALSE(parse_log_event("Dec 07 08:01:02 100000 [1] 0x01 -> other_function: ERR 4C02: Can't open sa db file"));
  CHECK_FALSE(parse_log_event("Dec 04 17:50:03 842245 [1] 0x01 -> construct_fabric: ERR AB2B: Found more than one root"));
  CHECK_FALSE(parse_log_event("Dec 04 17:50:03 842245 [1] 0x02 -> SUBNET UP again"));
  CHECK_FALSE(parse_log_event("Dec 04 17:50:03 842245 [1] 0x02 -> a b tables configured on all switches"));
  // A long engine failure is cut, not kept whole.
  auto long_fail = parse_log_event("ucast_mgr_route: " + std::string(5000, 'x') + ": cannot build lid matrices");
  REQUIRE(long_fail);
  CHECK(long_fail->text.size() <= 160);
}

TEST_CASE("stamp_us: OpenSM's time stamps, differences across a second, a day and a month", "[opensm][log]") {
  auto a = stamp_us("Dec 04 17:50:03 839515");
  auto b = stamp_us("Dec 04 17:50:03 844495");
  REQUIRE(a);
  REQUIRE(b);
  CHECK(*b - *a == 4980);
  CHECK(*stamp_us("Dec 04 17:50:04 000001") - *stamp_us("Dec 04 17:50:03 999999") == 2);
  CHECK(*stamp_us("Dec 05 00:00:00 000000") - *stamp_us("Dec 04 23:59:59 500000") == 500000);
  CHECK(*stamp_us("Mar 01 00:00:00 000000") - *stamp_us("Feb 29 23:59:59 000000") == 1000000);
  CHECK(*stamp_us("Jan 01 00:00:00 000000") == 0);
  CHECK_FALSE(stamp_us(""));
  CHECK_FALSE(stamp_us("Foo 04 17:50:03 844495"));
  CHECK_FALSE(stamp_us("Dec 32 17:50:03 844495"));
  CHECK_FALSE(stamp_us("Dec 04 24:50:03 844495"));
  CHECK_FALSE(stamp_us("Dec 04 17:50:03 84449x"));
  CHECK_FALSE(stamp_us("Dec 04 17:50:03 8444951"));
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
