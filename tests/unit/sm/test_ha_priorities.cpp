// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// Heads configured with different sm_priority values (e.g. head01 15, head02 14:
// "prefer head01"): the rendered table, and the engine's decisions with it. The
// expected values are written out per row, not computed.
#include <catch2/catch.hpp>

#include <sstream>

#include "rig.hpp"

using namespace smha;
using namespace smha::sm;
using namespace smha::sm::test;

namespace {

constexpr auto S = SmState::Standby;
constexpr auto M = SmState::Master;
constexpr auto kSilent = std::nullopt;
using P = PortState;

std::vector<std::uint8_t> standby(std::vector<std::uint8_t> configured) {
  auto r = standby_priorities(configured);
  REQUIRE(r.ok());
  return r.value();
}

// head01 (kOwn, 0x10) and head02 (kPeer, 0x20) with the given configured priorities,
// seen from `self`.
HaPolicy pair(std::uint8_t p1, std::uint8_t p2, bool self_is_head01) {
  HaPolicy p = self_is_head01 ? policy({{"head02", kPeer, p2}}, kOwn)
                              : policy({{"head01", kOwn, p1}}, kPeer);
  p.node_name = self_is_head01 ? "head01" : "head02";
  p.base_priority = self_is_head01 ? p1 : p2;
  return p;
}

PollRound as(PollRound r, Guid own) {
  if (r.local.info) r.local.info->guid = own;
  return r;
}

}  // namespace

TEST_CASE("Priorities: configured values map to ordered standby values in 1..13", "[sm][priority]") {
  using V = std::vector<std::uint8_t>;
  CHECK(standby({10, 10}) == V{10, 10});           // same P everywhere: as configured
  CHECK(standby({15, 14}) == V{13, 12});           // prefer head01: shifted below master/claim
  CHECK(standby({14, 15}) == V{12, 13});
  CHECK(standby({15, 1}) == V{13, 1});
  CHECK(standby({1, 0}) == V{2, 1});               // room for yield below
  CHECK(standby({0, 0}) == V{1, 1});
  CHECK(standby({15, 15, 14}) == V{13, 13, 12});
  CHECK(standby({5, 9, 7}) == V{5, 9, 7});
  CHECK(standby({15, 14, 13, 12}) == V{13, 12, 11, 10});
  CHECK(standby({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}) ==
        V{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13});
  auto too_many = standby_priorities({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13});
  REQUIRE_FALSE(too_many.ok());
  CHECK(too_many.error().message.find("at most 13") != std::string::npos);
}

TEST_CASE("Priorities: the role table every head computes alike", "[sm][priority]") {
  struct Row {
    std::uint8_t p1, p2;
    std::uint8_t s1, s2, yield, master, claim;
  };
  const Row rows[] = {
      {10, 10, 10, 10, 9, 11, 12},  // today's equal case
      {15, 14, 13, 12, 11, 14, 15},
      {15, 1, 13, 1, 0, 14, 15},
      {1, 0, 2, 1, 0, 3, 4},
      {15, 15, 13, 13, 12, 14, 15},
  };
  for (const auto& r : rows) {
    for (bool self1 : {true, false}) {
      INFO("configured " << int(r.p1) << "/" << int(r.p2) << " seen from head0" << (self1 ? 1 : 2));
      const auto t = priorities(pair(r.p1, r.p2, self1));
      CHECK(t.standby == (self1 ? r.s1 : r.s2));
      CHECK(t.standby_for(kOwn) == r.s1);
      CHECK(t.standby_for(kPeer) == r.s2);
      CHECK(t.yield == r.yield);
      CHECK(t.master == r.master);
      CHECK(t.claim == r.claim);
    }
  }
  // The preferred head: highest configured priority, then the lowest GUID.
  CHECK(preferred_head(pair(15, 14, true)) == kOwn);
  CHECK(preferred_head(pair(14, 15, true)) == kPeer);
  CHECK(preferred_head(pair(14, 15, false)) == kPeer);
  CHECK(preferred_head(pair(10, 10, false)) == kOwn);
}

TEST_CASE("Priorities: validate rejects values outside 0..15", "[sm][priority]") {
  auto p = pair(15, 14, true);
  CHECK(validate(p).ok());
  p.base_priority = 16;
  CHECK(validate(p).error().message.find("base_priority") != std::string::npos);
  p = pair(15, 14, true);
  p.peers[0].priority = 16;
  CHECK(validate(p).error().message.find("peers[head02].priority") != std::string::npos);
}

TEST_CASE("Policy: check names the field and the peer it is about, typed", "[sm][policy]") {
  auto p = pair(15, 14, true);
  CHECK_FALSE(check(p).has_value());
  p.base_priority = 16;
  REQUIRE(check(p));
  CHECK(check(p)->field == PolicyField::BasePriority);
  p = pair(15, 14, true);
  p.peers.push_back(PeerSpec{"head03", Guid{0x30}, std::uint8_t{20}});
  REQUIRE(check(p));
  CHECK(check(p)->field == PolicyField::PeerPriority);
  CHECK(check(p)->peer == 1);
  p.peers[1].priority = 3;
  p.peers[1].guid = p.peers[0].guid;
  REQUIRE(check(p));
  CHECK(check(p)->field == PolicyField::PeerGuid);
  CHECK(check(p)->peer == 1);
  p = pair(15, 14, true);
  p.hang_timeout = p.poll_interval / 2;
  REQUIRE(check(p));
  CHECK(check(p)->field == PolicyField::Derived);
  CHECK(check(p)->error.code == Errc::Policy);
  CHECK(validate(p).error().message == check(p)->error.message);
}

// Decision table with head01 15 / head02 14 (standby 13 / 12, master 14, claim
// 15, yield 11). Each row: the head, failback, its view for 30 rounds (3 s, past
// the 2 s hold-down), and what it must do.
TEST_CASE("Priorities: decision table, head01 15 / head02 14", "[sm][priority][table]") {
  struct Expect {
    std::optional<std::uint8_t> start = std::nullopt;  // StartOpensm priority at the first round
    std::optional<std::uint8_t> set = std::nullopt;    // first SetPriority
    bool discover = false;
    bool handover = false;                // HandoverStarted (preempt)
    bool mismatch = false;                // priority_mismatch alarm
  };
  struct Row {
    const char* what;
    bool head01;
    FailbackMode mode;
    ProcessState proc;
    std::optional<SmState> local;
    std::uint8_t local_prio;
    std::optional<SmState> peer;
    std::uint8_t peer_prio;
    Expect e;
  };
  const Row rows[] = {
      {"head01 starts its OpenSM at its standby value", true, FailbackMode::Sticky,
       ProcessState::Stopped, S, 13, M, 14, {.start = 13}},
      {"head02 starts its OpenSM at its standby value", false, FailbackMode::Sticky,
       ProcessState::Stopped, S, 12, M, 14, {.start = 12}},
      {"head01 MASTER renders 14", true, FailbackMode::Sticky, ProcessState::Running, M, 13, S, 12,
       {.set = 14}},
      {"head02 MASTER renders 14", false, FailbackMode::Sticky, ProcessState::Running, M, 12, S, 13,
       {.set = 14}},
      {"sticky: head01 back beside master head02 stays STANDBY at 13", true, FailbackMode::Sticky,
       ProcessState::Running, S, 13, M, 14, {}},
      {"preempt: head01 back beside master head02 pulls after the hold-down", true,
       FailbackMode::Preempt, ProcessState::Running, S, 13, M, 14, {.set = 15, .handover = true}},
      {"preempt: head02 is not preferred and never pulls", false, FailbackMode::Preempt,
       ProcessState::Running, S, 12, M, 14, {}},
      {"head02 standby beside master head01: nothing", false, FailbackMode::Preempt,
       ProcessState::Running, S, 12, M, 14, {}},
      {"a standby peer rendering what our configuration does not expect", true,
       FailbackMode::Sticky, ProcessState::Running, M, 14, S, 10, {.mismatch = true}},
      {"a standby peer at its claim value is expected", true, FailbackMode::Sticky,
       ProcessState::Running, M, 14, S, 15, {}},
      {"an adopted MASTER already at the master value is not written", true, FailbackMode::Sticky,
       ProcessState::Running, M, 14, S, 12, {}},
  };
  for (const auto& row : rows) {
    INFO(row.what);
    auto p = pair(15, 14, row.head01);
    p.failback = row.mode;
    Rig rig(p);
    const Guid own = row.head01 ? kOwn : kPeer;
    const Guid other = row.head01 ? kPeer : kOwn;
    std::vector<Action> acts;
    for (int i = 0; i < 30; ++i) {
      const bool started = i > 0 || row.proc == ProcessState::Running;
      PollRound r = as(round(Local{started ? row.local : kSilent, row.local_prio},
                             {Peer{row.peer, row.peer_prio, P::Up, other}}, {},
                             started ? ProcessState::Running : row.proc),
                       own);
      auto d = rig.poll(r);
      acts.insert(acts.end(), d.actions.begin(), d.actions.end());
    }
    auto start = first<StartOpensm>(acts);
    CHECK(start.has_value() == row.e.start.has_value());
    if (start && row.e.start) CHECK(start->priority == *row.e.start);
    auto set = first<SetPriority>(acts);
    CHECK(set.has_value() == row.e.set.has_value());
    if (set && row.e.set) CHECK(set->priority == *row.e.set);
    CHECK((count<SendDiscover>(acts) > 0) == row.e.discover);
    CHECK(has_event(acts, EventKind::HandoverStarted) == row.e.handover);
    CHECK(has_alarm(acts, AlarmKind::PriorityMismatch) == row.e.mismatch);
  }
}

TEST_CASE("Priorities: the preferred standby acts first when the master dies (N = 3)",
          "[sm][priority]") {
  // head01 15 (0x10) is master; head02 14 (0x20) and head03 13 (0x30) are standbys.
  // Seen from head03: head02 ranks above it (standby 12 > 11), so head03 waits.
  HaPolicy p = policy({{"head01", kOwn, 15}, {"head02", kPeer, 14}}, kPeer2);
  p.node_name = "head03";
  p.base_priority = 13;
  const auto t = priorities(p);
  CHECK(t.standby == 11);
  CHECK(t.standby_for(kPeer) == 12);
  CHECK(t.master == 14);
  Rig rig(p);
  auto view = [&](std::optional<SmState> h1, std::optional<SmState> h2) {
    const Peer refused{kSilent, 14, P::Up, kOwn, true, kKey, true};
    PollRound r = round(Local{S, 11}, {h1 ? Peer{h1, 14, P::Up, kOwn} : refused, Peer{h2, 12, P::Up, kPeer}});
    r.local.info->guid = kPeer2;
    return r;
  };
  rig.polls(5, view(M, S));
  auto acts = rig.polls(8, view(kSilent, S));
  CHECK(count<SendDiscover>(acts) == 0);  // head02 acts first
  // Seen from head02: it is the best live standby and acts after the rounds.
  HaPolicy p2 = policy({{"head01", kOwn, 15}, {"head03", kPeer2, 13}}, kPeer);
  p2.node_name = "head02";
  p2.base_priority = 14;
  Rig rig2(p2);
  auto view2 = [&](std::optional<SmState> h1) {
    const Peer refused{kSilent, 14, P::Up, kOwn, true, kKey, true};
    PollRound r = round(Local{S, 12}, {h1 ? Peer{h1, 14, P::Up, kOwn} : refused, Peer{S, 11, P::Up, kPeer2}});
    r.local.info->guid = kPeer;
    return r;
  };
  rig2.polls(5, view2(M));
  acts = rig2.polls(3, view2(kSilent));
  CHECK(count<SendDiscover>(acts) == 1);
}
