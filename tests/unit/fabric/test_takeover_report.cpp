// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// The takeover report's bookkeeping: what each figure is measured from, what
// a handover, a cold start and a lost mastership report, and what is said
// when a figure does not arrive.
#include <catch2/catch.hpp>

#include "smha/fabric/takeover_report.hpp"

using namespace smha;
using namespace smha::fabric;
using opensm::LoggedEvent;

namespace {

const Guid kOwn{0x0002c90300000002ULL};
const Guid kOld{0x0002c90300000001ULL};
const Guid kCompute{0x0002c90300000010ULL};

TimePoint at_ms(long ms) { return TimePoint{} + milliseconds(ms); }

sm::RecordEvent state(SmState from, SmState to) {
  sm::RecordEvent e{sm::EventKind::StateChanged, "", ""};
  e.from = from;
  e.to = to;
  return e;
}

LoggedEvent logged(LoggedEvent::Kind k, std::string text, std::string stamp) {
  return LoggedEvent{k, std::move(text), std::move(stamp)};
}

SmPort port(Guid g, std::uint16_t lid, std::uint16_t master_lid, mad::PortState st = mad::PortState::Active) {
  SmPort p;
  p.port_guid = g;
  p.lid = Lid{lid};
  p.master_sm_lid = Lid{master_lid};
  p.state = st;
  return p;
}

DiscoveryResult walk(std::vector<SmPort> ports) {
  DiscoveryResult r;
  r.probed = std::move(ports);
  return r;
}

struct Fixture {
  std::vector<TakeoverReport> out;
  TakeoverReporter rep{{"ftree", "updn"}, seconds(30)};
  Fixture() {
    rep.set_own(kOwn);
    rep.set_log_followed(true);
    rep.set_emit([this](const TakeoverReport& r) { out.push_back(r); });
    // Standby: the census walk saw the old master at LID 1, us at 2, a compute port at 3.
    rep.on_walk(walk({port(kOld, 1, 1), port(kOwn, 2, 1), port(kCompute, 3, 1)}), at_ms(0));
  }
  // The master answers until 1000 ms, our takeover starts at 1120, our SM answers MASTER at 1134.
  void takeover() {
    rep.master_seen(kOld, at_ms(1000));
    rep.on_event(sm::RecordEvent{sm::EventKind::TakeoverStarted, "master lost: 3 rounds unanswered", ""}, at_ms(1120));
    rep.on_opensm_log(logged(LoggedEvent::Kind::SmState, "MASTER", "Dec 04 17:50:03 839515"), at_ms(1130));
    rep.on_event(state(SmState::Standby, SmState::Master), at_ms(1134));
  }
  void sweep_logged() {
    rep.on_opensm_log(logged(LoggedEvent::Kind::RoutingFailed, "ftree: cannot build lid matrices",
                             "Dec 04 17:50:03 842268"),
                      at_ms(1140));
    rep.on_opensm_log(logged(LoggedEvent::Kind::RoutingFailed, "updn: cannot build lid matrices",
                             "Dec 04 17:50:03 842280"),
                      at_ms(1140));
    rep.on_opensm_log(logged(LoggedEvent::Kind::RoutingDone, "minhop", "Dec 04 17:50:03 842370"), at_ms(1140));
    rep.on_opensm_log(logged(LoggedEvent::Kind::SubnetUp, "", "Dec 04 17:50:03 844495"), at_ms(1140));
  }
};

}  // namespace

TEST_CASE("TakeoverReporter: a takeover's figures, each from its own source", "[agent][report]") {
  Fixture f;
  f.takeover();
  CHECK(f.rep.pending());
  CHECK_FALSE(f.rep.wants_walk(at_ms(1134)));  // not before SUBNET UP
  f.sweep_logged();
  REQUIRE(f.rep.wants_walk(at_ms(1140)));
  f.rep.walk_started();
  CHECK(f.out.empty());
  // The old master's port is gone; the compute port kept LID 3 and points at us (LID 2).
  f.rep.on_walk(walk({port(kOwn, 2, 2), port(kCompute, 3, 2)}), at_ms(1200));
  REQUIRE(f.out.size() == 1);
  const TakeoverReport& r = f.out[0];
  CHECK(r.kind == TakeoverReport::Kind::Takeover);
  CHECK(r.previous_master == kOld);
  CHECK(r.cause == "master lost: 3 rounds unanswered");
  CHECK(r.detection == milliseconds(120));
  CHECK(r.to_master == milliseconds(14));
  CHECK(r.master_to_subnet_up == microseconds(4980));  // OpenSM's stamps, not when smhad read them
  CHECK(r.routing_engine == "minhop");
  CHECK(r.routing_fallback);
  CHECK(r.routing_failures == std::vector<std::string>{"ftree: cannot build lid matrices", "updn: cannot build lid matrices"});
  CHECK(r.ports_compared == 2u);
  CHECK(r.lids_changed == 0);
  CHECK(r.master_lid == Lid{2});
  CHECK(r.ports_sampled == 2u);
  CHECK(r.ports_on_new_master == 2);
  CHECK(r.incomplete.empty());
  CHECK(f.rep.last() == r);
  CHECK_FALSE(f.rep.pending());
  const std::string s = summary(r);
  CHECK(s.find("detected in 120 ms") != std::string::npos);
  CHECK(s.find("routing minhop (fell back: ftree: cannot build lid matrices)") != std::string::npos);
  CHECK(s.find("LIDs changed 0 of 2") != std::string::npos);
  CHECK(s.find("2 of 2 active ports point at the new master") != std::string::npos);
}

TEST_CASE("TakeoverReporter: changed LIDs and ports still pointing at the old master are counted and named",
          "[agent][report]") {
  Fixture f;
  f.takeover();
  f.sweep_logged();
  f.rep.walk_started();
  const Guid other{0x0002c90300000011ULL};
  f.rep.on_walk(walk({port(kOwn, 2, 2), port(kCompute, 7, 1), port(other, 9, 0, mad::PortState::Down)}), at_ms(1200));
  REQUIRE(f.out.size() == 1);
  CHECK(f.out[0].ports_compared == 2u);  // the new port was not in the walk before
  CHECK(f.out[0].lids_changed == 1);
  CHECK(f.out[0].lid_changed_ports == std::vector<Guid>{kCompute});
  CHECK(f.out[0].ports_sampled == 2u);  // a Down port is not sampled
  CHECK(f.out[0].ports_on_new_master == 1);
  CHECK(f.out[0].ports_elsewhere == std::vector<Guid>{kCompute});
}

TEST_CASE("TakeoverReporter: the engine the configuration names first is no fallback", "[agent][report]") {
  Fixture f;
  f.takeover();
  f.rep.on_opensm_log(logged(LoggedEvent::Kind::RoutingDone, "ftree", "Dec 04 17:50:03 842370"), at_ms(1140));
  f.rep.on_opensm_log(logged(LoggedEvent::Kind::SubnetUp, "", "Dec 04 17:50:03 844495"), at_ms(1140));
  f.rep.walk_started();
  f.rep.on_walk(walk({port(kOwn, 2, 2)}), at_ms(1200));
  REQUIRE(f.out.size() == 1);
  CHECK(f.out[0].routing_engine == "ftree");
  CHECK_FALSE(f.out[0].routing_fallback);
  SECTION("a later sweep's lines are not this report's") {
    f.rep.on_opensm_log(logged(LoggedEvent::Kind::RoutingFailed, "ftree: cannot build lid matrices", ""), at_ms(9000));
    CHECK(f.out.size() == 1);
  }
}

TEST_CASE("TakeoverReporter: a handover to us, and a cold start that is no takeover", "[agent][report]") {
  Fixture f;
  SECTION("handover: the old master answered MASTER until ours took over") {
    f.rep.master_seen(kOld, at_ms(1000));
    f.rep.on_event(state(SmState::Standby, SmState::Master), at_ms(1040));
    REQUIRE(f.rep.pending());
    f.rep.on_opensm_log(logged(LoggedEvent::Kind::SmState, "MASTER", ""), at_ms(1041));
    f.rep.on_opensm_log(logged(LoggedEvent::Kind::SubnetUp, "", ""), at_ms(1046));  // no stamps: when read
    f.rep.walk_started();
    f.rep.on_walk(walk({port(kOwn, 2, 2)}), at_ms(1100));
    REQUIRE(f.out.size() == 1);
    CHECK(f.out[0].kind == TakeoverReport::Kind::Handover);
    CHECK_FALSE(f.out[0].detection);
    CHECK(f.out[0].to_master == milliseconds(40));
    CHECK(f.out[0].master_to_subnet_up == milliseconds(5));
  }
  SECTION("cold start: no master was seen and no takeover started") {
    TakeoverReporter cold;
    cold.set_own(kOwn);
    cold.on_event(state(SmState::Discovering, SmState::Master), at_ms(10));
    CHECK_FALSE(cold.pending());
    CHECK_FALSE(cold.last());
  }
  SECTION("cold start of two heads: both MASTER in one round is no handover") {
    f.rep.round_began(at_ms(1000));
    f.rep.master_seen(kOld, at_ms(1000));
    f.rep.on_event(state(SmState::Discovering, SmState::Master), at_ms(1040));
    CHECK_FALSE(f.rep.pending());
    f.rep.on_event(state(SmState::Master, SmState::Standby), at_ms(1140));
    CHECK(f.out.empty());
  }
}

// smhad still starting (our SM not yet seen STANDBY) when the lost master's
// smhad sent our SM DISCOVER: the engine started no takeover, yet ours took
// over from the master that stopped answering.
TEST_CASE("TakeoverReporter: our SM taking over before the engine saw it STANDBY is a takeover",
          "[agent][report]") {
  Fixture f;
  f.rep.round_began(at_ms(1000));
  f.rep.master_seen(kOld, at_ms(1000));
  SECTION("the old master stopped answering MASTER: reported") {
    f.rep.round_began(at_ms(1100));  // kOld is not seen MASTER in this round
    f.rep.on_event(state(SmState::Discovering, SmState::Master), at_ms(1104));
    REQUIRE(f.rep.pending());
    f.rep.on_opensm_log(logged(LoggedEvent::Kind::SmState, "MASTER", ""), at_ms(1105));
    f.rep.on_opensm_log(logged(LoggedEvent::Kind::SubnetUp, "", ""), at_ms(1110));
    f.rep.walk_started();
    f.rep.on_walk(walk({port(kOld, 1, 2), port(kOwn, 2, 2), port(kCompute, 3, 2)}), at_ms(1200));
    REQUIRE(f.out.size() == 1);
    const TakeoverReport& r = f.out[0];
    CHECK(r.kind == TakeoverReport::Kind::Takeover);
    CHECK(r.previous_master == kOld);
    CHECK(r.cause == "master lost: local SM went DISCOVERING->MASTER without our DISCOVER");
    CHECK(r.to_master == milliseconds(104));
    CHECK_FALSE(r.detection);
    CHECK(r.ports_compared == 3u);
    CHECK(r.lids_changed == 0);
    CHECK(r.incomplete.empty());
  }
  SECTION("our SM's first answer is MASTER (never seen before): reported") {
    f.rep.round_began(at_ms(1100));
    f.rep.on_event(state(SmState::NotActive, SmState::Master), at_ms(1104));
    REQUIRE(f.rep.pending());
  }
  SECTION("the old master still answers MASTER in this round: two masters, no takeover") {
    f.rep.round_began(at_ms(1100));
    f.rep.master_seen(kOld, at_ms(1100));
    f.rep.on_event(state(SmState::Discovering, SmState::Master), at_ms(1104));
    CHECK_FALSE(f.rep.pending());
  }
}

TEST_CASE("TakeoverReporter: what did not arrive is named, at the deadline or when mastership ends",
          "[agent][report]") {
  Fixture f;
  f.takeover();
  REQUIRE(f.rep.next_wakeup() == at_ms(1134) + seconds(30));
  SECTION("no SUBNET UP within the deadline") {
    f.rep.tick(at_ms(1134) + seconds(29));
    CHECK(f.out.empty());
    f.rep.tick(at_ms(1134) + seconds(30));
    REQUIRE(f.out.size() == 1);
    CHECK(f.out[0].incomplete == "SUBNET UP not logged, no census walk within 30 s");
    CHECK(f.out[0].detection == milliseconds(120));
  }
  SECTION("our SM left MASTER first") {
    f.rep.on_event(state(SmState::Master, SmState::Standby), at_ms(2000));
    REQUIRE(f.out.size() == 1);
    CHECK(f.out[0].incomplete == "our SM left MASTER before the report was complete");
    CHECK_FALSE(f.rep.pending());
  }
  SECTION("an aborted takeover is forgotten: the next mastership is a handover") {
    f.rep.on_event(state(SmState::Master, SmState::Standby), at_ms(2000));
    f.rep.master_seen(kOld, at_ms(3000));
    f.rep.on_event(sm::RecordEvent{sm::EventKind::TakeoverStarted, "x", ""}, at_ms(3100));
    f.rep.on_event(sm::RecordEvent{sm::EventKind::TakeoverAborted, "a master answered", ""}, at_ms(3150));
    f.rep.on_event(state(SmState::Standby, SmState::Master), at_ms(4000));
    REQUIRE(f.rep.pending());
    f.rep.tick(at_ms(4000) + seconds(30));
    REQUIRE(f.out.size() == 2);
    CHECK(f.out[1].kind == TakeoverReport::Kind::Handover);
  }
}

TEST_CASE("TakeoverReporter: without OpenSM's log the walk starts on its own", "[agent][report]") {
  std::vector<TakeoverReport> out;
  TakeoverReporter rep;
  rep.set_own(kOwn);
  rep.set_log_followed(false);
  rep.set_emit([&](const TakeoverReport& r) { out.push_back(r); });
  rep.master_seen(kOld, at_ms(1000));
  rep.on_event(state(SmState::Standby, SmState::Master), at_ms(1100));
  CHECK_FALSE(rep.wants_walk(at_ms(1100)));
  CHECK(rep.next_wakeup() == at_ms(1100) + TakeoverReporter::kWalkWithoutLog);
  REQUIRE(rep.wants_walk(at_ms(1100) + TakeoverReporter::kWalkWithoutLog));
  rep.walk_started();
  rep.on_walk(walk({port(kOwn, 2, 2)}), at_ms(3200));
  REQUIRE(out.size() == 1);
  CHECK(out[0].ports_sampled == 1u);
  CHECK(out[0].incomplete == "OpenSM's log not followed: no SUBNET UP or routing figures");
}

namespace {

SwitchLft lft(std::vector<std::uint8_t> ports) {
  SwitchLft t;
  t.ports = std::move(ports);
  t.blocks = 1;
  t.blocks_read = 1;
  return t;
}

SaCopyInfo copy_with_groups() {
  SaCopyInfo c;
  c.generation = 7;
  c.sender = "head01";
  c.age_s = 12.0;
  c.groups = 3;
  c.members = 5;
  c.services = 2;
  c.informs = 4;
  const mad::Gid member{mad::kDefaultSubnetPrefix, kCompute};
  c.checkable = {{mad::Gid{0xff12401bffff0000ULL, Guid{0xffffffff}}, Lid{0xc000}, member},
                 {mad::Gid{0xff12601bffff0000ULL, Guid{0x1ff000001}}, Lid{0xc001}, member}};
  return c;
}

}  // namespace

TEST_CASE("TakeoverReporter: LFT entries changed, from the last walk before against the walk at SUBNET UP",
          "[agent][report]") {
  Fixture f;
  const Guid sw_a{0x0002c90300000100ULL}, sw_b{0x0002c90300000200ULL}, sw_c{0x0002c90300000300ULL};
  DiscoveryResult before = walk({port(kOld, 1, 1), port(kOwn, 2, 1), port(kCompute, 3, 1)});
  before.lfts[sw_a] = lft({255, 1, 2, 3});
  before.lfts[sw_b] = lft({255, 4, 4, 4});
  f.rep.on_walk(before, at_ms(500));
  f.takeover();
  f.sweep_logged();
  f.rep.walk_started();
  DiscoveryResult after = walk({port(kOwn, 2, 2), port(kCompute, 3, 2)});
  after.lfts[sw_a] = lft({255, 1, 3, 3, 5});  // LID 2 moved to port 3; LID 4 new
  after.lfts[sw_b] = lft({255, 4, 4, 4});
  after.lfts[sw_c] = lft({255, 1, 1, 1});     // not in the walk before: not compared
  SwitchLft partial = lft({255, 9, 9, 9});
  partial.blocks = 2;                          // a block unanswered: not compared
  after.lfts[sw_b] = partial;
  f.rep.on_walk(after, at_ms(1200));
  REQUIRE(f.out.size() == 1);
  const TakeoverReport& r = f.out[0];
  REQUIRE(r.lft_entries_compared == 4u);       // sw_a: LIDs 1..4
  CHECK(r.lft_entries_changed == 2);
  CHECK(r.lft_changed_switches == std::vector<Guid>{sw_a});
  CHECK(summary(r).find("LFT entries changed 2 of 4") != std::string::npos);
}

TEST_CASE("TakeoverReporter: no switch read both times gives no LFT figure", "[agent][report]") {
  Fixture f;
  f.takeover();
  f.sweep_logged();
  f.rep.walk_started();
  f.rep.on_walk(walk({port(kOwn, 2, 2), port(kCompute, 3, 2)}), at_ms(1200));
  REQUIRE(f.out.size() == 1);
  CHECK_FALSE(f.out[0].lft_entries_compared);
  CHECK(summary(f.out[0]).find("LFT") == std::string::npos);
}

TEST_CASE("TakeoverReporter: the SA outage waits for our SA's first answer", "[agent][report]") {
  Fixture f;
  f.rep.set_sa_probe(true);
  CHECK_FALSE(f.rep.wants_sa_answer());
  f.takeover();
  CHECK(f.rep.wants_sa_answer());
  f.sweep_logged();
  f.rep.walk_started();
  f.rep.on_walk(walk({port(kOwn, 2, 2), port(kCompute, 3, 2)}), at_ms(1200));
  CHECK(f.out.empty());  // everything but the SA
  f.rep.on_sa_answer(at_ms(1534));
  REQUIRE(f.out.size() == 1);
  const TakeoverReport& r = f.out[0];
  CHECK(r.sa_after_master == milliseconds(400));  // MASTER at 1134
  CHECK(r.sa_outage == milliseconds(534));        // the old master's last answer at 1000
  CHECK_FALSE(f.rep.wants_sa_answer());
  const std::string s = summary(r);
  CHECK(s.find("SA answering 400 ms after MASTER (534 ms after the old master's last answer)") != std::string::npos);
  CHECK(s.find("SA database not restored (no copy from the master)") != std::string::npos);
}

TEST_CASE("TakeoverReporter: an SA that never answers is named at the deadline", "[agent][report]") {
  Fixture f;
  f.rep.set_sa_probe(true);
  f.takeover();
  f.sweep_logged();
  f.rep.walk_started();
  f.rep.on_walk(walk({port(kOwn, 2, 2), port(kCompute, 3, 2)}), at_ms(1200));
  f.rep.tick(at_ms(1134) + seconds(30));
  REQUIRE(f.out.size() == 1);
  CHECK(f.out[0].incomplete == "our SA did not answer within 30 s");
  CHECK_FALSE(f.out[0].sa_after_master);
}

TEST_CASE("TakeoverReporter: the SA copy restored, its groups checked against our SA", "[agent][report]") {
  Fixture f;
  f.rep.set_sa_probe(true);
  int asked = 0;
  f.rep.set_sa_copy_source([&] {
    ++asked;
    return std::optional<SaCopyInfo>(copy_with_groups());
  });
  f.takeover();
  CHECK(asked == 1);  // at MASTER
  CHECK(f.rep.take_group_check().empty());  // not before the SA answers
  f.sweep_logged();
  f.rep.walk_started();
  f.rep.on_walk(walk({port(kOwn, 2, 2), port(kCompute, 3, 2)}), at_ms(1200));
  f.rep.on_sa_answer(at_ms(1300));
  CHECK(f.out.empty());  // the groups are still to be checked
  const auto groups = f.rep.take_group_check();
  REQUIRE(groups.size() == 2);
  CHECK(groups[1].mlid == Lid{0xc001});
  CHECK(f.rep.take_group_check().empty());  // once
  f.rep.on_groups_checked(2, 1, {"0xff12601bffff0000:0x00000001ff000001: MLID 0xc003, was 0xc001"});
  REQUIRE(f.out.size() == 1);
  const TakeoverReport& r = f.out[0];
  REQUIRE(r.sa_copy);
  CHECK(r.sa_copy->generation == 7);
  CHECK(r.sa_copy->checkable.empty());  // the list is not kept in the report
  CHECK(r.groups_checked == 2u);
  CHECK(r.groups_kept == 1);
  CHECK(r.groups_lost.size() == 1);
  CHECK(r.incomplete.empty());
  CHECK(sa_restore_text(r) ==
        "SA database restored from generation 7 of head01 (12 s old): groups kept their MLID 1 of 2");
}

TEST_CASE("TakeoverReporter: OpenSM's log saying the SA file did not load", "[agent][report]") {
  Fixture f;
  f.rep.set_sa_copy_source([] {
    SaCopyInfo c = copy_with_groups();
    c.checkable.clear();
    return std::optional<SaCopyInfo>(c);
  });
  f.takeover();
  f.rep.on_opensm_log(logged(LoggedEvent::Kind::SaRestoreFailed, "ERR 4C02: Can't open sa db file '/x'. Skip restoring",
                             "Dec 04 17:50:03 840000"),
                      at_ms(1136));
  f.sweep_logged();
  f.rep.walk_started();
  f.rep.on_walk(walk({port(kOwn, 2, 2), port(kCompute, 3, 2)}), at_ms(1200));
  REQUIRE(f.out.size() == 1);
  const TakeoverReport& r = f.out[0];
  CHECK(r.sa_restore_error == "ERR 4C02: Can't open sa db file '/x'. Skip restoring");
  CHECK_FALSE(r.groups_checked);
  CHECK(sa_restore_text(r).starts_with("SA database not restored: OpenSM could not read generation 7 of head01"));
  TakeoverReport partial = r;
  partial.sa_restore_error = "PARSE ERROR: /x:3: cannot parse hex value after \"mlid=0x\"";
  CHECK(sa_restore_text(partial).starts_with("SA database restored in part from generation 7 of head01"));
}
