// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// Safety scenarios on the simulated fabric: a SIGHUP OpenSM absorbs in a
// running sweep, a planned handover that must not bounce back, peers the
// configuration does not address (no lid, a stale LID) and an SM that is not a
// head. Each asserts the whole run, not only its end.
#include <catch2/catch.hpp>

#include <csignal>
#include <algorithm>
#include <iostream>

#include "smha/sim/cluster.hpp"

using namespace smha;
using namespace smha::sim;

namespace {

// Every head's records, printed (a failing run shows what each smhad did).
void dump(const Cluster& c) {
  for (int i = 0; i < c.heads(); ++i)
    for (const auto& r : c.records(i))
      std::cout << c.fabric().name(c.head(i)) << " " << to_ms(r.at.time_since_epoch()) << "ms " << r.what
                << " " << r.kind << " " << r.detail << "\n";
}

int master_head(const Cluster& c) {
  auto m = c.observed_masters();
  return m.size() == 1 ? c.head_of(m[0]) : -1;
}

void settle(Cluster& c) {
  c.start_all_smhad();
  REQUIRE(c.run_until([&] { return c.observed_masters().size() == 1; }, seconds(3)));
  c.run_for(seconds(2));
  REQUIRE(c.observed_masters().size() == 1);
  c.reset_dual_master_stats();
}

int count_records(const Cluster& c, int head, const std::string& what, const std::string& kind) {
  const auto& rs = c.records(head);
  return static_cast<int>(std::count_if(rs.begin(), rs.end(), [&](const HeadRecord& r) {
    return r.what == what && r.kind == kind;
  }));
}

// Runs `d` and returns whether the observer ever saw a MASTER other than `g` in it.
bool other_master_seen(Cluster& c, Guid g, Duration d) {
  const auto t0 = c.now();
  c.run_for(d);
  return c.first_new_master_seen(t0, g).has_value();
}

}  // namespace

TEST_CASE("Sticky failback holds when the new master's first SIGHUP is absorbed by its sweep",
          "[sim][priority_verify]") {
  Cluster c(41);
  settle(c);
  REQUIRE(master_head(c) == 0);
  // head02 takes over; its SIGHUP for the master value lands in the sweep
  // OpenSM runs on becoming MASTER and is lost.
  c.fabric().absorb_next_hups(c.head(1), 1);
  REQUIRE(c.fabric().signal_opensm(c.head(0), SIGKILL));
  REQUIRE(c.run_until([&] { return master_head(c) == 1; }, seconds(5)));
  const Guid g1 = c.fabric().guid(c.head(1));
  // head01's OpenSM comes back at its standby value, equal to head02's until
  // head02's value is applied; head01's lower GUID would win that tie.
  const bool bounced = other_master_seen(c, g1, seconds(15));
  if (bounced || c.fabric().sm(c.head(1))->priority != 11) dump(c);
  CHECK(c.fabric().hups_absorbed() >= 1);
  CHECK_FALSE(bounced);
  CHECK(master_head(c) == 1);
  CHECK(c.fabric().sm(c.head(1))->priority == 11);
  REQUIRE(c.fabric().sm(c.head(0)));
  CHECK(c.fabric().sm(c.head(0))->state == SmState::Standby);
  CHECK(c.fabric().sm(c.head(0))->priority == 10);
  CHECK(count_records(c, 1, "alarm", "priority_not_applied") == 0);
  CHECK(c.fabric().sets_to_master() == 0);
}

TEST_CASE("A priority OpenSM never applies raises priority_not_applied, which clears once it is",
          "[sim][priority_verify]") {
  Cluster c(43);
  settle(c);
  REQUIRE(master_head(c) == 0);
  // Every SIGHUP head02 sends while MASTER is lost for a while: the first,
  // three re-sends a poll interval apart, then one a second, past the 5 s bound.
  c.fabric().absorb_next_hups(c.head(1), 10);
  REQUIRE(c.fabric().signal_opensm(c.head(0), SIGKILL));
  REQUIRE(c.run_until([&] { return master_head(c) == 1; }, seconds(5)));
  REQUIRE(c.run_until([&] { return count_records(c, 1, "alarm", "priority_not_applied") == 1; },
                      seconds(6)));
  REQUIRE(c.run_until([&] { return count_records(c, 1, "clear", "priority_not_applied") == 1; },
                      seconds(5)));
  CHECK(c.fabric().sm(c.head(1))->priority == 11);
  CHECK(c.fabric().hups_absorbed() >= 10);
}

TEST_CASE("Planned handover does not bounce back when the target's first SIGHUP is absorbed",
          "[sim][handover]") {
  Cluster c(47);
  settle(c);
  REQUIRE(master_head(c) == 0);
  const Guid g1 = c.fabric().guid(c.head(1));
  c.fabric().absorb_next_hups(c.head(1), 1);
  c.agent(0)->request_handover(g1);
  REQUIRE(c.run_until([&] { return master_head(c) == 1; }, seconds(5)));
  const bool bounced = other_master_seen(c, g1, seconds(10));
  if (bounced) dump(c);
  CHECK_FALSE(bounced);
  CHECK(master_head(c) == 1);
  CHECK(c.count_events(0, "handover_done") == 1);
  CHECK(c.count_events(0, "handover_rolled_back") == 0);
  CHECK(c.fabric().sm(c.head(1))->priority == 11);
  CHECK(c.fabric().sm(c.head(0))->priority == 10);
  CHECK(c.dual_master_longest() < milliseconds(50));
}

namespace {
void no_takeover_while_master_answers(PeerAddressing addressing, std::uint64_t seed) {
  ClusterParams p;
  p.peer_addressing = addressing;
  Cluster c(seed, p);
  settle(c);
  const int m = master_head(c);
  REQUIRE(m >= 0);
  const bool moved = other_master_seen(c, c.fabric().guid(c.head(m)), seconds(20));
  if (moved || c.count_events(0, "takeover_started") + c.count_events(1, "takeover_started") > 0) dump(c);
  for (int i = 0; i < c.heads(); ++i) {
    CHECK(c.count_events(i, "takeover_started") == 0);
    CHECK(c.count_events(i, "takeover_fallback") == 0);
    CHECK(count_records(c, i, "alarm", "no_master") == 0);
    CHECK(count_records(c, i, "alarm", "unknown_sm") == 0);
    CHECK(c.count_events(i, "opensm_started") <= 1);
  }
  CHECK_FALSE(moved);
  CHECK(c.dual_master_total() == Duration{0});
  CHECK(c.fabric().active_masters().size() == 1);
}
}  // namespace

TEST_CASE("Peers without a lid: the standby asks the SM its port names as master and does not "
          "take over",
          "[sim][port_master]") {
  no_takeover_while_master_answers(PeerAddressing::Unaddressed, 53);
}

TEST_CASE("Peers at a stale LID: the standby asks the SM its port names as master and does not "
          "take over",
          "[sim][port_master]") {
  no_takeover_while_master_answers(PeerAddressing::StaleLid, 59);
}

TEST_CASE("An SM that is not a head is MASTER when the heads start: unknown_sm, no takeover "
          "action against it",
          "[sim][port_master]") {
  Cluster c(61);
  // A compute node runs an OpenSM at priority 0; no head runs one yet.
  const NodeId node = c.observer();
  const std::string conf = "/etc/opensm/opensm.conf";
  REQUIRE(c.fabric().fs(node).write_atomic(conf, sim::render_opensm_keys({}, 0), 0644).ok());
  os::ProcessSpec spec;
  spec.path = "/usr/sbin/opensm";
  spec.argv = {spec.path, "-F", conf};
  REQUIRE(c.fabric().runner(node).spawn(spec, {}, {}).ok());
  REQUIRE(c.run_until([&] { return c.fabric().active_masters() == std::vector<NodeId>{node}; },
                      seconds(2)));
  c.reset_dual_master_stats();
  // head01's smhad, then head02's once head01's OpenSM runs.
  c.start_smhad(0);
  REQUIRE(c.run_until([&] { return c.fabric().sm(c.head(0)).has_value(); }, seconds(1)));
  c.run_for(seconds(1));
  c.start_smhad(1);
  c.run_for(seconds(20));
  if (c.dual_master_total() != Duration{0}) dump(c);
  int unknown = 0;
  for (int i = 0; i < c.heads(); ++i) {
    unknown += count_records(c, i, "alarm", "unknown_sm");
    CHECK(c.count_events(i, "takeover_started") == 0);
    CHECK(c.count_events(i, "takeover_fallback") == 0);
    CHECK(count_records(c, i, "alarm", "no_master") == 0);
    CHECK(count_records(c, i, "alarm", "two_masters") == 0);
  }
  CHECK(unknown >= 1);
  // OpenSM's own election hands mastership to the higher-priority head.
  if (c.fabric().active_masters().size() != 1) dump(c);
  CHECK(c.fabric().active_masters().size() == 1);
  CHECK(c.dual_master_total() == Duration{0});
  CHECK(c.fabric().sets_to_master() == 0);
}
