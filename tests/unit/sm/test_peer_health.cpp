// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// PeerHealth: the engine's per-peer miss/answer bookkeeping and its loss
// estimate, round by round, without the engine.
#include <catch2/catch.hpp>

#include "smha/sm/ha_machine.hpp"
#include "smha/sm/peer_health.hpp"

using namespace smha;
using namespace smha::sm;

namespace {

constexpr Guid kA{0x20};
constexpr Guid kB{0x30};

SmInfo info(Guid g, SmState s) {
  SmInfo i;
  i.guid = g;
  i.state = s;
  i.priority = 10;
  i.sm_key = 1;
  return i;
}

// What one peer did in a round: answered on LID and/or DR, silent, refused.
PeerProbe probe(Guid g, std::optional<SmState> lid, std::optional<SmState> dr) {
  PeerProbe p;
  p.guid = g;
  p.via_lid = lid ? Probe::answered(info(g, *lid)) : Probe::unanswered(1);
  p.via_dr = dr ? Probe::answered(info(g, *dr)) : Probe::unanswered(1);
  p.port = PortState::Up;
  return p;
}

PollRound round_of(std::vector<PeerProbe> peers) {
  PollRound r;
  r.peers = std::move(peers);
  return r;
}

const TimePoint t0{};

}  // namespace

TEST_CASE("peer health: misses count up while queried and silent, an answer resets them", "[sm][peer_health]") {
  PeerHealth h({{"a", kA}, {"b", kB}});
  REQUIRE(h.peers().size() == 2);
  CHECK(h.peers()[0].spec.guid == kA);
  CHECK(h.peers()[0].port == PortState::Unknown);

  h.observe(round_of({probe(kA, SmState::Master, SmState::Master), probe(kB, std::nullopt, std::nullopt)}), t0);
  CHECK(h.peers()[0].answered);
  CHECK(h.peers()[0].misses == 0);
  CHECK(h.peers()[0].last->state == SmState::Master);
  CHECK(h.peers()[0].master_at == t0);
  CHECK(h.peers()[0].port == PortState::Up);
  CHECK_FALSE(h.peers()[1].answered);
  CHECK(h.peers()[1].misses == 1);
  CHECK_FALSE(h.peers()[1].refused);

  const TimePoint t1 = t0 + milliseconds(100);
  h.observe(round_of({probe(kA, std::nullopt, std::nullopt), probe(kB, std::nullopt, std::nullopt)}), t1);
  CHECK(h.peers()[0].misses == 1);
  CHECK(h.peers()[0].last_answer_at == t0);  // the last answer is kept
  CHECK(h.peers()[1].misses == 2);

  const TimePoint t2 = t1 + milliseconds(100);
  h.observe(round_of({probe(kA, std::nullopt, std::nullopt), probe(kB, SmState::Standby, std::nullopt)}), t2);
  CHECK(h.peers()[0].misses == 2);
  CHECK(h.peers()[1].answered);
  CHECK(h.peers()[1].misses == 0);
  CHECK(h.peers()[1].last_answer_at == t2);
  CHECK_FALSE(h.peers()[1].master_at);
}

TEST_CASE("peer health: an unqueried or unlisted peer keeps its count", "[sm][peer_health]") {
  PeerHealth h({{"a", kA}});
  h.observe(round_of({probe(kA, std::nullopt, std::nullopt)}), t0);
  REQUIRE(h.peers()[0].misses == 1);
  h.observe(round_of({}), t0 + milliseconds(100));  // not in the round
  CHECK(h.peers()[0].misses == 1);
  CHECK_FALSE(h.peers()[0].answered);
  PeerProbe unqueried;
  unqueried.guid = kA;
  h.observe(round_of({unqueried}), t0 + milliseconds(200));
  CHECK(h.peers()[0].misses == 1);
}

TEST_CASE("peer health: a miss is a refusal only when every queried path refused", "[sm][peer_health]") {
  PeerHealth h({{"a", kA}});
  PeerProbe p;
  p.guid = kA;
  p.via_lid = Probe::refused_by_all(1);
  p.via_dr = Probe::refused_by_all(1);
  h.observe(round_of({p}), t0);
  CHECK(h.peers()[0].refused);
  p.via_dr = Probe::unanswered(1);  // silence on one path: not gone, maybe hung
  h.observe(round_of({p}), t0 + milliseconds(100));
  CHECK_FALSE(h.peers()[0].refused);
  p.via_dr = Probe{};  // DR not queried: the LID's refusal decides
  h.observe(round_of({p}), t0 + milliseconds(200));
  CHECK(h.peers()[0].refused);
}

TEST_CASE("peer health: no loss gives no estimate, one path failing raises the rounds required", "[sm][peer_health]") {
  PeerHealth h({{"a", kA}});
  TimePoint t = t0;
  for (int i = 0; i < 20; ++i, t += milliseconds(100))
    h.observe(round_of({probe(kA, SmState::Master, SmState::Master)}), t);
  CHECK(h.round_miss_estimate() == 0);
  CHECK(h.required_rounds(3, 1e-7) == 3);

  // Every other round the DR path fails while the LID answers: heavy loss.
  for (int i = 0; i < 20; ++i, t += milliseconds(100))
    h.observe(round_of({probe(kA, SmState::Master, i % 2 ? std::optional<SmState>(SmState::Master) : std::nullopt)}), t);
  const double q = h.round_miss_estimate();
  CHECK(q > 0);
  CHECK(q < 1);
  const int need = h.required_rounds(3, 1e-7);
  CHECK(need > 3);
  CHECK(need <= 12);
}

TEST_CASE("peer health: miss streaks that end with an answer count as loss, capped at 4 x misses", "[sm][peer_health]") {
  PeerHealth h({{"a", kA}});
  TimePoint t = t0;
  // Silent for 2 rounds, then answering, again and again: every round's miss was loss.
  for (int i = 0; i < 30; ++i, t += milliseconds(100)) {
    const bool answers = i % 3 == 2;
    h.observe(round_of({answers ? probe(kA, SmState::Master, SmState::Master) : probe(kA, std::nullopt, std::nullopt)}), t);
  }
  CHECK(h.round_miss_estimate() > 0.5);
  CHECK(h.required_rounds(3, 1e-7) == 12);
}
