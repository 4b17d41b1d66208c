// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// HaMachine scenarios: sequences of rounds through takeover, fallback, local
// failure, planned handover, failback policies, loss adaptation, alarms, N heads.
#include <catch2/catch.hpp>

#include "rig.hpp"

using namespace smha;
using namespace smha::sm;
using namespace smha::sm::test;

namespace {
constexpr auto S = SmState::Standby;
constexpr auto M = SmState::Master;
constexpr auto D = SmState::Discovering;
constexpr auto kSilent = std::nullopt;
using P = PortState;
}  // namespace

TEST_CASE("Policy validation names the field and priorities bracket the base", "[sm]") {
  CHECK(validate(policy()).ok());
  auto p = policy();
  p.base_priority = 16;  // 0..15 (14 and 15 are fine: rendered below master and claim)
  REQUIRE_FALSE(validate(p).ok());
  CHECK(validate(p).error().message.find("base_priority") != std::string::npos);
  p = policy();
  p.peers.push_back({"dup", kOwn});
  REQUIRE_FALSE(validate(p).ok());
  CHECK(validate(p).error().message.find("used twice") != std::string::npos);
  p = policy();
  p.peers.clear();
  CHECK_FALSE(validate(p).ok());
  p = policy();
  p.preferred_master = Guid{0x99};
  CHECK_FALSE(validate(p).ok());
  p = policy();
  p.hang_timeout = milliseconds(50);
  CHECK(validate(p).error().message.find("hang_timeout") != std::string::npos);
  auto pr = priorities(policy());
  CHECK(pr.yield == 9);
  CHECK(pr.standby == 10);
  CHECK(pr.master == 11);
  CHECK(pr.claim == 12);
}

TEST_CASE("Start: a stopped OpenSM is started at the standby priority, a running one is adopted",
          "[sm]") {
  Rig rig;
  auto d = rig.poll(round(Local{kSilent}, {Peer{M, 11}}, {}, ProcessState::Stopped));
  auto s = first<StartOpensm>(d.actions);
  REQUIRE(s);
  CHECK(s->priority == 10);

  Rig adopt;
  auto acts = adopt.polls(3, round(Local{M, 11}, {Peer{S, 10}}));
  CHECK(count<StartOpensm>(acts) == 0);
  CHECK(count<RestartOpensm>(acts) == 0);
  // Adopted master: it already runs at the master priority (sticky); nothing to write.
  CHECK(count<SetPriority>(acts) == 0);
  CHECK(adopt.m.status().rendered_priority == 11);
  CHECK(adopt.m.status().role == Role::Master);
}

TEST_CASE("Takeover: DISCOVER after the required rounds, then master priority", "[sm]") {
  Rig rig;
  rig.polls(5, round(Local{S}, {Peer{M, 11, P::Up}}));
  std::vector<Action> acts;
  int rounds_to_discover = 0;
  for (int i = 1; i <= 10 && count<SendDiscover>(acts) == 0; ++i) {
    auto d = rig.poll(round(Local{S}, {Peer{kSilent, 11, P::Down}}));
    acts.insert(acts.end(), d.actions.begin(), d.actions.end());
    rounds_to_discover = i;
  }
  CHECK(rounds_to_discover == 3);
  CHECK(has_event(acts, EventKind::TakeoverStarted));
  CHECK(rig.m.status().role == Role::TakingOver);
  auto after = rig.polls(1, round(Local{D}, {Peer{kSilent, 11, P::Down}}));
  CHECK(count<SendDiscover>(after) == 0);
  after = rig.polls(1, round(Local{M, 10}, {Peer{kSilent, 11, P::Down}}));
  CHECK(has_event(after, EventKind::TakeoverDone));
  auto sp = first<SetPriority>(after);
  REQUIRE(sp);
  CHECK(sp->priority == 11);
  CHECK(rig.m.status().role == Role::Master);
}

TEST_CASE("Hold: the engine decides as usual but carries out nothing that moves mastership, until released",
          "[sm][hold]") {
  Rig rig;
  rig.polls(5, round(Local{S}, {Peer{M, 11, P::Up}}));
  rig.step(HoldChanged{true});
  CHECK(rig.m.status().held);
  // The master goes silent: the engine takes over in its own bookkeeping, but
  // the DISCOVER to our SM is recorded as held, not emitted.
  auto acts = rig.polls(5, round(Local{S}, {Peer{kSilent, 11, P::Down}}));
  CHECK(count<SendDiscover>(acts) == 0);
  CHECK(has_event(acts, EventKind::TakeoverStarted));
  CHECK(has_event(acts, EventKind::ActionHeld));
  // Nor is the fallback restart once the bound passes, or a priority change.
  acts = rig.polls(20, round(Local{S}, {Peer{kSilent, 11, P::Down}}));
  CHECK(count<RestartOpensm>(acts) == 0);
  CHECK(count<SetPriority>(acts) == 0);
  CHECK(count<StopOpensm>(acts) == 0);
  // Released: the engine's decisions are carried out again.
  rig.step(HoldChanged{false});
  CHECK_FALSE(rig.m.status().held);
  Rig fresh;
  fresh.polls(5, round(Local{S}, {Peer{M, 11, P::Up}}));
  fresh.step(HoldChanged{true});
  fresh.step(HoldChanged{false});
  acts = fresh.polls(5, round(Local{S}, {Peer{kSilent, 11, P::Down}}));
  CHECK(count<SendDiscover>(acts) == 1);
  CHECK_FALSE(has_event(acts, EventKind::ActionHeld));
}

TEST_CASE("Hold: a held STANDBY renders the yield value (no peer or election picks it), released the standby value",
          "[sm][hold]") {
  Rig rig;
  rig.polls(5, round(Local{S, 10}, {Peer{M, 11, P::Up}}));
  auto d = rig.step(HoldChanged{true});
  CHECK(priorities_set(d.actions) == std::vector<std::uint8_t>{9});
  CHECK_FALSE(has_event(d.actions, EventKind::ActionHeld));
  // OpenSM answers the yield value: nothing more to render, no alarm.
  auto acts = rig.polls(10, round(Local{S, 9}, {Peer{M, 11, P::Up}}));
  CHECK(priorities_set(acts).empty());
  CHECK_FALSE(has_alarm(acts, AlarmKind::PriorityNotApplied));
  d = rig.step(HoldChanged{false});
  CHECK(priorities_set(d.actions) == std::vector<std::uint8_t>{10});
}

TEST_CASE("Hold: a stopped OpenSM is still started (a start moves no mastership)", "[sm][hold]") {
  Rig rig;
  rig.step(HoldChanged{true});
  auto d = rig.poll(round(Local{kSilent}, {Peer{M, 11}}, {}, ProcessState::Stopped));
  CHECK(first<StartOpensm>(d.actions));
  CHECK_FALSE(has_event(d.actions, EventKind::ActionHeld));
}

TEST_CASE("Roles: every change is reported once, in order, with its cause", "[sm]") {
  Rig rig;
  std::vector<std::string> seen;
  auto poll = [&](int n, const PollRound& r) {
    for (int i = 0; i < n; ++i)
      for (const auto& c : rig.poll(r).role_changes)
        seen.push_back(std::string(to_string(c.from)) + "->" + std::string(to_string(c.to)) + ": " + c.why);
  };
  poll(5, round(Local{S}, {Peer{M, 11, P::Up}}));
  poll(3, round(Local{S}, {Peer{kSilent, 11, P::Down}}));
  poll(1, round(Local{D}, {Peer{kSilent, 11, P::Down}}));
  poll(3, round(Local{M, 11}, {Peer{kSilent, 11, P::Down}}));
  CHECK(seen == std::vector<std::string>{
                    "init->standby: smhad start: adopted the running OpenSM, STANDBY",
                    "standby->taking_over: master lost",
                    "taking_over->master: takeover done: local SM answers MASTER",
                });
  CHECK(rig.m.status().role == Role::Master);
}

TEST_CASE("Takeover: a silent master gets time to be fenced by its own smhad, a refused one does not",
          "[sm]") {
  // Last answer at t = 400 ms; hang_timeout 400 + 2 polls + query window 50 = 1050 ms.
  Rig rig;
  rig.polls(5, round(Local{S}, {Peer{M, 11, P::Up}}));
  auto acts = rig.polls(6, round(Local{S}, {Peer{kSilent, 11, P::Up}}));  // t = 500 .. 1000
  CHECK(count<SendDiscover>(acts) == 0);
  acts = rig.polls(1, round(Local{S}, {Peer{kSilent, 11, P::Up}}));  // t = 1100
  CHECK(count<SendDiscover>(acts) == 1);

  // Dead (every query refused at once: no SM bound): the rounds suffice.
  Rig dead;
  dead.polls(5, round(Local{S}, {Peer{M, 11, P::Up}}));
  const Peer refused{kSilent, 11, P::Up, kPeer, true, kKey, true};
  acts = dead.polls(2, round(Local{S}, {refused}));
  CHECK(count<SendDiscover>(acts) == 0);
  acts = dead.polls(1, round(Local{S}, {refused}));
  CHECK(count<SendDiscover>(acts) == 1);

  // Silent, then refused (its smhad fenced it): act at the first refused round.
  Rig fenced;
  fenced.polls(5, round(Local{S}, {Peer{M, 11, P::Up}}));
  acts = fenced.polls(4, round(Local{S}, {Peer{kSilent, 11, P::Up}}));
  CHECK(count<SendDiscover>(acts) == 0);
  acts = fenced.polls(1, round(Local{S}, {refused}));
  CHECK(count<SendDiscover>(acts) == 1);
}

TEST_CASE("Fence: a silent local SM is fenced only after misses rounds AND hang_timeout", "[sm]") {
  Rig rig;
  rig.t = TimePoint{} + seconds(10);  // past start_grace
  rig.polls(5, round(Local{M, 11}, {Peer{S, 10}}));  // last local answer at 10.4 s
  // Three silent rounds 10 ms apart (a CPU stall): misses reached, hang_timeout not.
  for (int i = 0; i < 3; ++i) {
    auto d = rig.step(round(Local{kSilent}, {Peer{S, 10}}));
    CHECK(count<StopOpensm>(d.actions) == 0);
    rig.t += milliseconds(10);
  }
  rig.t = TimePoint{} + seconds(10) + milliseconds(400 + 400);
  auto d = rig.step(round(Local{kSilent}, {Peer{S, 10}}));
  auto stop = first<StopOpensm>(d.actions);
  REQUIRE(stop);
  CHECK(stop->force);
  CHECK(has_event(d.actions, EventKind::FenceLocal));
}

TEST_CASE("Fence: silence is counted from when the last answered query was sent, so the "
          "answer's latency does not cost a round", "[sm]") {
  // The agent's rhythm with a silent local SM: a round every poll interval
  // while it answers, then (poll_soon) one 60 ms apart, each ending when its
  // 50 ms window closes. The last answered round was sent at 10.0 s and ended
  // 3 ms later (the answer's latency). The round sent at 10.35 s ends at
  // 10.40 s: hang_timeout (400 ms) after the query the SM last answered.
  const TimePoint t0 = TimePoint{} + seconds(10);
  auto sent = [&](Rig& rig, const PollRound& r, Duration at, Duration took) {
    PollRound x = r;
    x.sent_at = t0 + at;
    rig.t = t0 + at + took;
    return rig.step(x);
  };
  Rig rig;
  for (int i = 0; i < 5; ++i)
    sent(rig, round(Local{M, 11}, {Peer{S, 10}}), milliseconds(100 * (i - 4)), milliseconds(3));
  std::vector<Action> acts;
  for (const int at : {100, 160, 220, 280}) {
    auto d = sent(rig, round(Local{kSilent}, {Peer{S, 10}}), milliseconds(at), milliseconds(50));
    acts.insert(acts.end(), d.actions.begin(), d.actions.end());
  }
  CHECK(count<StopOpensm>(acts) == 0);
  CHECK(count<RestartOpensm>(acts) == 0);
  auto d = sent(rig, round(Local{kSilent}, {Peer{S, 10}}), milliseconds(350), milliseconds(50));
  CHECK(has_event(d.actions, EventKind::FenceLocal));
}

TEST_CASE("Fence: a silent OpenSM that still runs (busy) waits for unresponsive_timeout, "
          "unless it was MASTER and a peer is MASTER now", "[sm]") {
  Rig rig;
  rig.t = TimePoint{} + seconds(10);  // past start_grace
  rig.polls(5, round(Local{M, 11}, {Peer{S, 10}}));
  const Local busy{std::nullopt, 10, false};
  // Well past hang_timeout, short of unresponsive_timeout (10 s): no fence.
  auto acts = rig.polls(50, round(busy, {Peer{S, 10}}));  // 5 s of silence
  CHECK(count<StopOpensm>(acts) == 0);
  CHECK(count<RestartOpensm>(acts) == 0);
  // The kernel now shows it stopped: fenced at once (hang_timeout long passed).
  auto d = rig.step(round(Local{kSilent}, {Peer{S, 10}}));
  REQUIRE(first<StopOpensm>(d.actions));
  CHECK(has_event(d.actions, EventKind::FenceLocal));

  // Busy, but silent past unresponsive_timeout: fenced.
  Rig slow;
  slow.t = TimePoint{} + seconds(10);
  slow.polls(5, round(Local{M, 11}, {Peer{S, 10}}));
  acts = slow.polls(99, round(busy, {Peer{S, 10}}));  // 9.9 s
  CHECK(count<StopOpensm>(acts) == 0);
  acts = slow.polls(2, round(busy, {Peer{S, 10}}));
  CHECK(count<StopOpensm>(acts) == 1);

  // Busy standby while a peer answers MASTER (the normal case for a standby):
  // no fence past hang_timeout either, only after unresponsive_timeout.
  Rig standby;
  standby.t = TimePoint{} + seconds(10);
  standby.polls(5, round(Local{S}, {Peer{M, 11}}));
  acts = standby.polls(99, round(busy, {Peer{M, 11}}));  // 9.9 s
  CHECK(count<RestartOpensm>(acts) == 0);
  CHECK_FALSE(has_event(acts, EventKind::FenceLocal));
  acts = standby.polls(2, round(busy, {Peer{M, 11}}));
  CHECK(count<RestartOpensm>(acts) == 1);

  // A stopped standby (SIGSTOP) is fenced after hang_timeout.
  Rig stopped;
  stopped.t = TimePoint{} + seconds(10);
  stopped.polls(5, round(Local{S}, {Peer{M, 11}}));
  acts = stopped.polls(6, round(Local{kSilent}, {Peer{M, 11}}));
  CHECK(count<RestartOpensm>(acts) == 1);

  // A MASTER a peer has already replaced: hang_timeout suffices.
  Rig replaced;
  replaced.t = TimePoint{} + seconds(10);
  replaced.polls(5, round(Local{M, 11}, {Peer{S, 10}}));
  acts = replaced.polls(6, round(busy, {Peer{M, 10}}));
  CHECK(has_event(acts, EventKind::FenceLocal));
}

TEST_CASE("Takeover: DISCOVER finds the master alive and the takeover is aborted", "[sm]") {
  Rig rig;
  rig.polls(5, round(Local{S}, {Peer{M, 11}}));
  // Refused (looks dead), e.g. a restarting OpenSM that has not bound yet.
  auto acts = rig.polls(3, round(Local{S}, {Peer{kSilent, 11, P::Unknown, kPeer, true, kKey, true}}));
  REQUIRE(count<SendDiscover>(acts) == 1);
  acts = rig.polls(1, round(Local{S}, {Peer{M, 11}}));
  CHECK(has_event(acts, EventKind::TakeoverAborted));
  CHECK(rig.m.status().role == Role::Standby);
  CHECK(count<SetPriority>(acts) == 0);
}

TEST_CASE("Takeover: no MASTER within the bound falls back to a restart at master priority",
          "[sm]") {
  Rig rig;
  rig.polls(5, round(Local{S}, {Peer{M, 11}}));
  auto acts = rig.polls(3, round(Local{S}, {Peer{kSilent, 11, P::Down}}));
  REQUIRE(count<SendDiscover>(acts) == 1);
  acts = rig.polls(10, round(Local{S}, {Peer{kSilent, 11, P::Down}}));
  auto r = first<RestartOpensm>(acts);
  REQUIRE(r);
  CHECK(r->priority == 11);
  CHECK(has_event(acts, EventKind::TakeoverFallback));
  CHECK(count<SendDiscover>(acts) == 0);
  // The tick path reaches the same deadline without a poll.
  Rig tick;
  tick.polls(5, round(Local{S}, {Peer{M, 11}}));
  auto d = tick.polls(3, round(Local{S}, {Peer{kSilent, 11, P::Down}}));
  REQUIRE(count<SendDiscover>(d) == 1);
  auto dec = tick.m.step(Tick{}, tick.t + milliseconds(2000));
  CHECK(first<RestartOpensm>(dec.actions).has_value());
}

TEST_CASE("Takeover: a local SM that answers DISCOVERING is sweeping and is not restarted "
          "before sweep_bound",
          "[sm]") {
  Rig rig;
  rig.polls(5, round(Local{S}, {Peer{M, 11}}));
  auto acts = rig.polls(3, round(Local{S}, {Peer{kSilent, 11, P::Down}}));
  REQUIRE(count<SendDiscover>(acts) == 1);
  // A big fabric: the discovery sweep outlasts takeover_bound (1 s) by far.
  acts = rig.polls(40, round(Local{D}, {Peer{kSilent, 11, P::Down}}));
  CHECK(count<RestartOpensm>(acts) == 0);
  CHECK_FALSE(has_event(acts, EventKind::TakeoverFallback));
  CHECK(rig.m.status().role == Role::TakingOver);
  acts = rig.polls(1, round(Local{M, 11}, {Peer{kSilent, 11, P::Down}}));
  CHECK(has_event(acts, EventKind::TakeoverDone));
  CHECK(rig.m.status().role == Role::Master);

  // Still DISCOVERING at sweep_bound: the fallback restart.
  HaPolicy p = policy();
  p.sweep_bound = seconds(3);
  Rig stuck(p);
  stuck.polls(5, round(Local{S}, {Peer{M, 11}}));
  REQUIRE(count<SendDiscover>(stuck.polls(3, round(Local{S}, {Peer{kSilent, 11, P::Down}}))) == 1);
  acts = stuck.polls(25, round(Local{D}, {Peer{kSilent, 11, P::Down}}));
  CHECK(count<RestartOpensm>(acts) == 0);
  acts = stuck.polls(10, round(Local{D}, {Peer{kSilent, 11, P::Down}}));
  CHECK(count<RestartOpensm>(acts) == 1);
  CHECK(has_event(acts, EventKind::TakeoverFallback));

  // A local SM that went silent after DISCOVER is not known to sweep: the
  // fallback at takeover_bound, as for one that stays STANDBY.
  Rig silent;
  silent.polls(5, round(Local{S}, {Peer{M, 11}}));
  REQUIRE(count<SendDiscover>(silent.polls(3, round(Local{S}, {Peer{kSilent, 11, P::Down}}))) == 1);
  silent.polls(1, round(Local{D}, {Peer{kSilent, 11, P::Down}}));
  acts = silent.polls(12, round(Local{kSilent, 10, false}, {Peer{kSilent, 11, P::Down}}));
  const auto tick = silent.step(Tick{});  // the wakeup the engine asked for
  acts.insert(acts.end(), tick.actions.begin(), tick.actions.end());
  CHECK(has_event(acts, EventKind::TakeoverFallback));
}

TEST_CASE("Loss: a master answering on one path only is alive, and observed loss raises the bar",
          "[sm]") {
  Rig rig;
  rig.polls(5, round(Local{S}, {Peer{M, 11}}));
  CHECK(rig.m.required_rounds() == 3);
  // Heavy loss: DR lost every round while LID answers; answered LID queries needed 3 attempts.
  PollRound lossy = round(Local{S}, {Peer{M, 11, P::Up, kPeer, false}});
  lossy.peers[0].via_lid.attempts = 3;
  auto acts = rig.polls(50, lossy);
  CHECK(count<SendDiscover>(acts) == 0);
  CHECK(rig.m.required_rounds() > 3);
  const int need = rig.m.required_rounds();
  const Peer refused{kSilent, 11, P::Unknown, kPeer, true, kKey, true};
  acts = rig.polls(need - 1, round(Local{S}, {refused}));
  CHECK(count<SendDiscover>(acts) == 0);
  acts = rig.polls(1, round(Local{S}, {refused}));
  CHECK(count<SendDiscover>(acts) == 1);
}

TEST_CASE("Local OpenSM exit while master: restart deferred until the peer is MASTER", "[sm]") {
  Rig rig;
  rig.polls(5, round(Local{M, 11}, {Peer{S, 10}}));
  auto d = rig.step(ProcessChanged{ProcessState::Exited});
  CHECK(has_event(d.actions, EventKind::LocalFailure));
  CHECK(count<StartOpensm>(d.actions) == 0);
  REQUIRE(d.next_wakeup);
  CHECK(rig.m.status().role == Role::Recovering);
  auto acts = rig.polls(2, round(Local{kSilent}, {Peer{S, 10}}, {}, ProcessState::Exited));
  CHECK(count<StartOpensm>(acts) == 0);
  acts = rig.polls(1, round(Local{kSilent}, {Peer{M, 10}}, {}, ProcessState::Exited));
  auto s = first<StartOpensm>(acts);
  REQUIRE(s);
  // The new master still runs at its standby value (its SIGHUP for the master
  // value may have been lost): our equal value and lower GUID would win
  // OpenSM's election. Yield until it runs at the master value.
  CHECK(s->priority == 9);
  acts = rig.polls(2, round(Local{S, 9}, {Peer{M, 10}}));
  CHECK(count<SetPriority>(acts) == 0);
  acts = rig.polls(1, round(Local{S, 9}, {Peer{M, 11}}));
  auto sp = first<SetPriority>(acts);
  REQUIRE(sp);
  CHECK(sp->priority == 10);
}

TEST_CASE("Local OpenSM exit while master: no restart while the peer answers DISCOVERING "
          "(its takeover sweep), until sweep_bound",
          "[sm]") {
  Rig rig;
  rig.polls(5, round(Local{M, 11}, {Peer{S, 10}}));
  auto d = rig.step(ProcessChanged{ProcessState::Exited});
  REQUIRE(d.next_wakeup);
  const TimePoint delay_over = *d.next_wakeup;
  // The peer took the DISCOVER and sweeps a big fabric for 4 s: past the delay.
  std::vector<Action> acts;
  while (rig.t < delay_over + seconds(3)) {
    auto r = rig.poll(round(Local{kSilent}, {Peer{D, 10}}, {}, ProcessState::Exited));
    acts.insert(acts.end(), r.actions.begin(), r.actions.end());
    if (r.next_wakeup) CHECK(*r.next_wakeup > rig.t - rig.m.policy().poll_interval);
    auto tick = rig.m.step(Tick{}, rig.t - milliseconds(1));
    acts.insert(acts.end(), tick.actions.begin(), tick.actions.end());
  }
  CHECK(count<StartOpensm>(acts) == 0);
  CHECK(rig.m.status().role == Role::Recovering);
  acts = rig.polls(1, round(Local{kSilent}, {Peer{M, 11}}, {}, ProcessState::Exited));
  REQUIRE(count<StartOpensm>(acts) == 1);
  CHECK(first<StartOpensm>(acts)->priority == 10);

  // A peer DISCOVERING for longer than sweep_bound is not waited for.
  HaPolicy p = policy();
  p.sweep_bound = seconds(4);
  Rig stuck(p);
  stuck.polls(5, round(Local{M, 11}, {Peer{S, 10}}));
  stuck.step(ProcessChanged{ProcessState::Exited});
  acts = stuck.polls(38, round(Local{kSilent}, {Peer{D, 10}}, {}, ProcessState::Exited));
  CHECK(count<StartOpensm>(acts) == 0);
  for (int i = 0; i < 4 && count<StartOpensm>(acts) == 0; ++i)
    acts = stuck.polls(1, round(Local{kSilent}, {Peer{D, 10}}, {}, ProcessState::Exited));
  REQUIRE(count<StartOpensm>(acts) == 1);
  CHECK(stuck.t - TimePoint{} >= seconds(4));
  // Still no MASTER: it comes back at the yield priority, below the sweeping
  // peer's standby priority, so it cannot win that peer's election.
  CHECK(first<StartOpensm>(acts)->priority == 9);
  acts = stuck.polls(3, round(Local{S, 9}, {Peer{D, 10}}));
  CHECK(count<SetPriority>(acts) == 0);
  acts = stuck.polls(1, round(Local{S, 9}, {Peer{M, 11}}));
  REQUIRE(count<SetPriority>(acts) == 1);
  CHECK(first<SetPriority>(acts)->priority == 10);
}

TEST_CASE("Supervision failed: the engine records it once, does not ask for a start every "
          "round, and goes on when OpenSM runs again",
          "[sm]") {
  Rig rig;
  rig.polls(5, round(Local{S}, {Peer{M, 11}}));
  auto d = rig.step(ProcessChanged{ProcessState::Failed});
  CHECK(has_event(d.actions, EventKind::LocalFailure));
  CHECK(count<StartOpensm>(d.actions) == 0);
  CHECK(count<RestartOpensm>(d.actions) == 0);
  CHECK_FALSE(has_event(d.actions, EventKind::OpensmStarted));
  CHECK(rig.m.status().role == Role::Recovering);
  // Decided, not retracted: one change of role, no start asked for and taken back.
  REQUIRE(d.role_changes.size() == 1);
  CHECK(d.role_changes[0].from == Role::Standby);
  CHECK(d.role_changes[0].to == Role::Recovering);
  auto acts = rig.polls(50, round(Local{kSilent}, {Peer{M, 11}}, {}, ProcessState::Failed));
  CHECK(count<StartOpensm>(acts) == 0);
  CHECK_FALSE(has_event(acts, EventKind::LocalFailure));
  const auto tick = rig.m.step(Tick{}, rig.t);
  CHECK_FALSE(tick.next_wakeup);  // nothing to wake up for
  // The operator fixed it (a reload restarted OpenSM): ours again.
  rig.step(ProcessChanged{ProcessState::Running});
  CHECK(rig.m.status().role == Role::Starting);
  rig.polls(3, round(Local{S, 10}, {Peer{M, 11}}));
  CHECK(rig.m.status().role == Role::Standby);

  // Failed from an exit the engine already saw (Exited, a start was asked):
  // one more event, no start.
  Rig exited;
  exited.polls(5, round(Local{S}, {Peer{M, 11}}));
  REQUIRE(count<StartOpensm>(exited.step(ProcessChanged{ProcessState::Exited}).actions) == 1);
  d = exited.step(ProcessChanged{ProcessState::Failed});
  CHECK(has_event(d.actions, EventKind::LocalFailure));
  CHECK(count<StartOpensm>(d.actions) == 0);
}

TEST_CASE("Local OpenSM exit while master and no live peer: restart at once", "[sm]") {
  Rig rig;
  rig.polls(5, round(Local{M, 11}, {Peer{kSilent, 10}}));
  auto d = rig.step(ProcessChanged{ProcessState::Exited});
  auto s = first<StartOpensm>(d.actions);
  REQUIRE(s);
  CHECK(s->priority == 10);
}

TEST_CASE("Local OpenSM exit while master: restart after the delay if nobody takes over", "[sm]") {
  Rig rig;
  rig.polls(5, round(Local{M, 11}, {Peer{S, 10}}));
  auto d = rig.step(ProcessChanged{ProcessState::Exited});
  REQUIRE(d.next_wakeup);
  auto early = rig.m.step(Tick{}, *d.next_wakeup - milliseconds(1));
  CHECK(count<StartOpensm>(early.actions) == 0);
  auto late = rig.m.step(Tick{}, *d.next_wakeup);
  CHECK(count<StartOpensm>(late.actions) == 1);
}

TEST_CASE("Local OpenSM exit while standby: restart at once at standby priority", "[sm]") {
  Rig rig;
  rig.polls(5, round(Local{S}, {Peer{M, 11}}));
  auto d = rig.step(ProcessChanged{ProcessState::Exited});
  auto s = first<StartOpensm>(d.actions);
  REQUIRE(s);
  CHECK(s->priority == 10);
}

TEST_CASE("Leaving MASTER (port down) re-renders the standby priority: no failback by GUID tie",
          "[sm]") {
  Rig rig;
  rig.polls(5, round(Local{M, 11}, {Peer{S, 10}}));
  auto acts = rig.polls(1, round(Local{D, 11}, {Peer{kSilent, 10}}, Link{P::Down}));
  auto sp = first<SetPriority>(acts);
  REQUIRE(sp);
  CHECK(sp->priority == 10);
}

TEST_CASE("Port down while MASTER: standby priority at once and a restart as standby if OpenSM is still MASTER a round later",
          "[sm]") {
  Rig rig;
  rig.polls(5, round(Local{M, 11}, {Peer{S, 10}}));
  // First round with the port down: the standby priority (its SIGHUP makes OpenSM sweep).
  auto acts = rig.polls(1, round(Local{M, 11}, {Peer{kSilent, 10}}, Link{P::Down}));
  auto sp = first<SetPriority>(acts);
  REQUIRE(sp);
  CHECK(sp->priority == 10);
  CHECK(count<RestartOpensm>(acts) == 0);
  // OpenSM did not notice (a sweep in progress): restarted as standby.
  acts = rig.polls(1, round(Local{M, 11}, {Peer{kSilent, 10}}, Link{P::Down}));
  auto rs = first<RestartOpensm>(acts);
  REQUIRE(rs);
  CHECK(rs->priority == 10);
  CHECK(has_event(acts, EventKind::FenceLocal));
  CHECK(rig.m.status().role == Role::Starting);

  // OpenSM that noticed (DISCOVERING) is left alone.
  Rig noticed;
  noticed.polls(5, round(Local{M, 11}, {Peer{S, 10}}));
  noticed.polls(1, round(Local{M, 11}, {Peer{kSilent, 10}}, Link{P::Down}));
  acts = noticed.polls(5, round(Local{D, 10}, {Peer{kSilent, 10}}, Link{P::Down}));
  CHECK(count<RestartOpensm>(acts) == 0);
}

TEST_CASE("Two masters after a link flap: the head whose port was down yields at once even when it outranks",
          "[sm]") {
  Rig rig;  // kOwn has the lower GUID: it outranks the peer at equal priority
  rig.polls(5, round(Local{M, 11}, {Peer{S, 10}}));
  rig.polls(1, round(Local{M, 11}, {Peer{kSilent, 10}}, Link{P::Down}));
  // The link is back before OpenSM noticed; the peer took over meanwhile.
  auto acts = rig.polls(1, round(Local{M, 11}, {Peer{M, 11}}));
  CHECK(has_event(acts, EventKind::SplitBrainYield));
  auto rs = first<RestartOpensm>(acts);
  REQUIRE(rs);
  CHECK(rs->priority == 10);
}

TEST_CASE("Two masters: the head that took over waits for the stale master it replaced before yielding by rank",
          "[sm]") {
  Rig rig;
  const Peer refused{kSilent, 11, P::Up, kPeer, true, kKey, true};
  rig.polls(5, round(Local{S}, {Peer{M, 11, P::Up}}));
  auto acts = rig.polls(3, round(Local{S}, {refused}));
  REQUIRE(count<SendDiscover>(acts) == 1);
  rig.polls(1, round(Local{M, 10}, {refused}));
  REQUIRE(rig.m.status().role == Role::Master);
  // The old master is back as MASTER and outranks us (12 > 11): its own smhad
  // should yield; we give it two rounds and a query window (250 ms) before
  // yielding by rank.
  acts = rig.polls(3, round(Local{M, 11}, {Peer{M, 12}}));  // t = 0, 100, 200 ms of overlap
  CHECK(has_alarm(acts, AlarmKind::TwoMasters));
  CHECK(count<RestartOpensm>(acts) == 0);
  acts = rig.polls(1, round(Local{M, 11}, {Peer{M, 12}}));  // 300 ms
  CHECK(count<RestartOpensm>(acts) == 1);
  CHECK(has_event(acts, EventKind::SplitBrainYield));

  // Without a takeover from it, the lower-ranked master yields at first sight.
  Rig plain;
  plain.polls(5, round(Local{M, 11}, {Peer{S, 10}}));
  acts = plain.polls(1, round(Local{M, 11}, {Peer{M, 12}}));
  CHECK(count<RestartOpensm>(acts) == 1);
}

TEST_CASE("Two masters: an other master whose OpenSM restarted (ActCount reset) starts the wait over",
          "[sm]") {
  Rig rig;  // we outrank: we yield only if the other stays MASTER for a poll interval
  rig.polls(3, round(Local{M, 11}, {Peer{S, 10}}));
  auto acts = rig.polls(1, round(Local{M, 11}, {Peer{M, 11, P::Unknown, kPeer, true, kKey, false, 5000}}));
  CHECK(count<RestartOpensm>(acts) == 0);
  // Its smhad restarted it (it yielded) and the new process came up MASTER.
  acts = rig.polls(1, round(Local{M, 11}, {Peer{M, 11, P::Unknown, kPeer, true, kKey, false, 40}}));
  CHECK(count<RestartOpensm>(acts) == 0);
  acts = rig.polls(1, round(Local{M, 11}, {Peer{M, 11, P::Unknown, kPeer, true, kKey, false, 90}}));
  CHECK(count<RestartOpensm>(acts) == 1);
  CHECK(has_event(acts, EventKind::SplitBrainYield));
}

TEST_CASE("Planned handover push: yield priority, done when the peer is MASTER", "[sm]") {
  Rig rig;
  rig.polls(5, round(Local{M, 11}, {Peer{S, 10}}));
  auto d = rig.step(HandoverRequest{kPeer});
  CHECK(has_event(d.actions, EventKind::HandoverStarted));
  auto sp = first<SetPriority>(d.actions);
  REQUIRE(sp);
  CHECK(sp->priority == 9);
  // Two masters briefly during OpenSM's own handover: no yield while handing over.
  auto acts = rig.polls(1, round(Local{M, 9}, {Peer{M, 10}}));
  CHECK(count<RestartOpensm>(acts) == 0);
  acts = rig.polls(1, round(Local{S, 9}, {Peer{M, 11}}));
  CHECK(has_event(acts, EventKind::HandoverDone));
  sp = first<SetPriority>(acts);
  REQUIRE(sp);
  CHECK(sp->priority == 10);
}

// Which SMs an event is about (RecordEvent::nodes; smhad names them with
// their NodeDescription), besides this head.
static std::vector<Guid> nodes_of(const std::vector<Action>& v, EventKind k) {
  for (const auto& a : v)
    if (const auto* e = std::get_if<RecordEvent>(&a); e && e->kind == k) return e->nodes;
  return {};
}

TEST_CASE("Events name the other SMs they are about: the lost master, the handover's target", "[sm]") {
  Rig rig;
  rig.polls(5, round(Local{S}, {Peer{M, 11, P::Up}}));
  auto acts = rig.polls(4, round(Local{S}, {Peer{kSilent, 11, P::Down}}));
  CHECK(nodes_of(acts, EventKind::TakeoverStarted) == std::vector<Guid>{kPeer});

  // Its SM gone, the old master's port answers NOTACTIVE (ibsim does): the
  // takeover still names it (the ibsim preempt drill caught an unnamed one
  // under load).
  Rig gone;
  gone.polls(5, round(Local{S}, {Peer{M, 11, P::Up}}));
  acts = gone.polls(6, round(Local{S}, {Peer{SmState::NotActive, 0, P::Up}}));
  REQUIRE(has_event(acts, EventKind::TakeoverStarted));
  CHECK(nodes_of(acts, EventKind::TakeoverStarted) == std::vector<Guid>{kPeer});

  Rig push;
  push.polls(5, round(Local{M, 11}, {Peer{S, 10}}));
  auto d = push.step(HandoverRequest{kPeer});
  CHECK(nodes_of(d.actions, EventKind::HandoverStarted) == std::vector<Guid>{kPeer});
  acts = push.polls(1, round(Local{S, 9}, {Peer{M, 11}}));
  CHECK(nodes_of(acts, EventKind::HandoverDone) == std::vector<Guid>{kPeer});
  // A local state change is about this head only.
  CHECK(has_event(acts, EventKind::StateChanged));
  CHECK(nodes_of(acts, EventKind::StateChanged).empty());
}

TEST_CASE("Planned handover is rolled back when the peer does not take over", "[sm]") {
  Rig rig;
  rig.polls(5, round(Local{M, 11}, {Peer{S, 10}}));
  rig.step(HandoverRequest{});
  auto acts = rig.polls(25, round(Local{M, 9}, {Peer{S, 10}}));
  CHECK(has_event(acts, EventKind::HandoverRolledBack));
  CHECK(has_alarm(acts, AlarmKind::HandoverFailed));
  auto sp = first<SetPriority>(acts);
  REQUIRE(sp);
  CHECK(sp->priority == 11);
  CHECK(rig.m.status().role == Role::Master);
}

TEST_CASE("Planned handover: rejected without a live standby or for a target out of rank", "[sm]") {
  Rig rig;
  rig.polls(5, round(Local{M, 11}, {Peer{kSilent, 10}}));
  auto d = rig.step(HandoverRequest{});
  CHECK(has_event(d.actions, EventKind::HandoverRejected));
  CHECK(count<SetPriority>(d.actions) == 0);

  Rig three(policy({{"head02", kPeer}, {"head03", kPeer2}}));
  three.polls(5, round(Local{M, 11}, {Peer{S, 10}, Peer{S, 10, P::Up, kPeer2}}));
  d = three.step(HandoverRequest{kPeer2});  // head02 (lower GUID) outranks head03
  CHECK(has_event(d.actions, EventKind::HandoverRejected));
  d = three.step(HandoverRequest{kPeer});
  CHECK(has_event(d.actions, EventKind::HandoverStarted));
}

TEST_CASE("Planned handover pull from a standby: claim priority, then master priority", "[sm]") {
  Rig rig;
  rig.polls(5, round(Local{S}, {Peer{M, 11}}));
  auto d = rig.step(HandoverRequest{});
  auto sp = first<SetPriority>(d.actions);
  REQUIRE(sp);
  CHECK(sp->priority == 12);
  auto acts = rig.polls(1, round(Local{M, 12}, {Peer{S, 10}}));
  CHECK(has_event(acts, EventKind::HandoverDone));
  sp = first<SetPriority>(acts);
  REQUIRE(sp);
  CHECK(sp->priority == 11);
}

TEST_CASE("Sticky failback: a healthy returning preferred head stays standby", "[sm]") {
  Rig rig;  // own GUID 0x10 is the lowest: preferred
  auto acts = rig.polls(100, round(Local{S}, {Peer{M, 11}}));
  CHECK(count<SetPriority>(acts) == 0);
  CHECK_FALSE(has_event(acts, EventKind::HandoverStarted));
}

TEST_CASE("Preempt failback: the preferred head pulls mastership after the hold-down", "[sm]") {
  auto p = policy();
  p.failback = FailbackMode::Preempt;
  Rig rig(p);
  auto acts = rig.polls(19, round(Local{S}, {Peer{M, 11}}));
  CHECK(count<SetPriority>(acts) == 0);
  acts = rig.polls(3, round(Local{S}, {Peer{M, 11}}));
  CHECK(has_event(acts, EventKind::HandoverStarted));
  auto sp = first<SetPriority>(acts);
  REQUIRE(sp);
  CHECK(sp->priority == 12);

  // A non-preferred head never pulls.
  auto q = policy({{"head02", Guid{0x5}}});
  q.failback = FailbackMode::Preempt;
  Rig other(q);
  acts = other.polls(60, round(Local{S}, {Peer{M, 11, P::Up, Guid{0x5}}}));
  CHECK(count<SetPriority>(acts) == 0);
}

TEST_CASE("Alarms: SM_Key mismatch and unknown SMs are raised once and cleared", "[sm]") {
  Rig rig;
  auto acts = rig.polls(3, round(Local{S}, {Peer{M, 11, P::Up, kPeer, true, 7}}));
  CHECK(count<RaiseAlarm>(acts) == 1);
  CHECK(has_alarm(acts, AlarmKind::SmKeyMismatch));
  acts = rig.polls(1, round(Local{S}, {Peer{M, 11}}));
  CHECK(count<ClearAlarm>(acts) == 1);

  PollRound r = round(Local{S}, {Peer{M, 11}});
  r.other_sms.push_back(OtherSm{info(Guid{0xbad}, S, 3), "\"node7 HCA-1\" lid 7"});
  acts = rig.polls(2, r);
  CHECK(has_alarm(acts, AlarmKind::UnknownSm));
  CHECK(count<RaiseAlarm>(acts) == 1);
  // The census's text (node description, where) is in the detail.
  bool named = false;
  for (const auto& a : acts)
    if (const auto* ra = std::get_if<RaiseAlarm>(&a); ra && ra->kind == AlarmKind::UnknownSm)
      named = ra->detail.find(to_string(Guid{0xbad})) != std::string::npos &&
              ra->detail.find("\"node7 HCA-1\" lid 7") != std::string::npos;
  CHECK(named);
  // The same SM, its NodeDescription not yet read, then read: the active
  // alarm's detail follows (a refresh, no new alarm event), once per change.
  PollRound unnamed = round(Local{S}, {Peer{M, 11}});
  unnamed.other_sms.push_back(OtherSm{info(Guid{0xbad}, S, 3), "lid 7"});
  acts = rig.polls(1, unnamed);
  REQUIRE(count<RaiseAlarm>(acts) == 1);
  CHECK(first<RaiseAlarm>(acts)->refresh);
  acts = rig.polls(2, r);
  REQUIRE(count<RaiseAlarm>(acts) == 1);
  for (const auto& a : acts)
    if (const auto* ra = std::get_if<RaiseAlarm>(&a)) {
      CHECK(ra->refresh);
      CHECK(ra->detail.find("\"node7 HCA-1\"") != std::string::npos);
    }
  CHECK(count<ClearAlarm>(acts) == 0);
  // Gone from the census: cleared.
  acts = rig.polls(1, round(Local{S}, {Peer{M, 11}}));
  CHECK(count<ClearAlarm>(acts) == 1);
}

TEST_CASE("A rogue SM that keeps changing state: one unknown_sm per SM, its detail current, a count", "[sm]") {
  Rig rig;
  rig.polls(3, round(Local{S}, {Peer{M, 11}}));
  auto rogue = [](Guid g, SmState st) { return OtherSm{info(g, st, 3), "\"node7\" lid 7"}; };
  PollRound r = round(Local{S}, {Peer{M, 11}});
  r.other_sms = {rogue(Guid{0xbad}, S)};
  auto acts = rig.polls(1, r);
  REQUIRE(count<RaiseAlarm>(acts) == 1);
  CHECK_FALSE(first<RaiseAlarm>(acts)->refresh);

  // 60 state changes of the same SM: every one refreshes the detail (which
  // names the current state and counts the changes), none is a new raise.
  const SmState states[] = {SmState::Discovering, SmState::NotActive, S, M};
  std::vector<RaiseAlarm> raised;
  for (int i = 0; i < 60; ++i) {
    r.other_sms = {rogue(Guid{0xbad}, states[i % 4])};
    for (const auto& a : rig.polls(1, r))
      if (const auto* ra = std::get_if<RaiseAlarm>(&a); ra && ra->kind == AlarmKind::UnknownSm) raised.push_back(*ra);
  }
  REQUIRE(raised.size() == 60);
  CHECK(std::none_of(raised.begin(), raised.end(), [](const RaiseAlarm& a) { return !a.refresh; }));
  CHECK(raised.back().detail ==
        "SM not a configured head: " + to_string(Guid{0xbad}) + " MASTER \"node7\" lid 7; [changed 60 times since raised]");
  CHECK(raised.front().detail.find("DISCOVERING") != std::string::npos);
  CHECK(raised.front().detail.find("[changed 1 time since raised]") != std::string::npos);
  // Unchanged: nothing.
  CHECK(count<RaiseAlarm>(rig.polls(3, r)) == 0);

  // A second SM appears: a new alarm event naming both, the count restarts.
  r.other_sms = {rogue(Guid{0xbad}, M), rogue(Guid{0xbee}, S)};
  acts = rig.polls(1, r);
  REQUIRE(count<RaiseAlarm>(acts) == 1);
  const auto second = first<RaiseAlarm>(acts);
  REQUIRE(second);
  CHECK_FALSE(second->refresh);
  CHECK(second->detail.find(to_string(Guid{0xbee})) != std::string::npos);
  CHECK(second->detail.find("changed") == std::string::npos);
  // The first goes and comes back: the same SMs as before, refreshes only.
  r.other_sms = {rogue(Guid{0xbee}, S)};
  acts = rig.polls(1, r);
  REQUIRE(count<RaiseAlarm>(acts) == 1);
  CHECK(first<RaiseAlarm>(acts)->refresh);
  r.other_sms = {rogue(Guid{0xbad}, S), rogue(Guid{0xbee}, S)};
  acts = rig.polls(1, r);
  REQUIRE(count<RaiseAlarm>(acts) == 1);
  CHECK(first<RaiseAlarm>(acts)->refresh);
  CHECK(count<ClearAlarm>(acts) == 0);

  // Cleared, then the same SM again: a new alarm.
  acts = rig.polls(1, round(Local{S}, {Peer{M, 11}}));
  CHECK(count<ClearAlarm>(acts) == 1);
  r.other_sms = {rogue(Guid{0xbad}, S)};
  acts = rig.polls(1, r);
  REQUIRE(count<RaiseAlarm>(acts) == 1);
  CHECK_FALSE(first<RaiseAlarm>(acts)->refresh);
}

TEST_CASE("Two masters that persist raise the ignore_other_sm alarm", "[sm]") {
  Rig rig;
  rig.polls(3, round(Local{M, 11}, {Peer{S, 10}}));
  // We outrank (lower GUID) and yield after one interval; before that the alarm is two_masters.
  auto acts = rig.polls(1, round(Local{M, 11}, {Peer{M, 11}}));
  CHECK(has_alarm(acts, AlarmKind::TwoMasters));
  CHECK(count<RestartOpensm>(acts) == 0);
}

TEST_CASE("N heads: only the highest-ranked live standby acts, the next one after the bound",
          "[sm]") {
  // We are 0x20; head01 (0x10) outranks us; head03 (0x30) is the master that dies.
  auto p = policy({{"head01", Guid{0x10}}, {"head03", kPeer2}}, kPeer);
  Rig rig(p);
  auto steady = [&](std::optional<SmState> h1, std::optional<SmState> h3) {
    PollRound r = round(Local{S}, {Peer{h1, 10, P::Up, Guid{0x10}}, Peer{h3, 11, P::Up, kPeer2}});
    r.local.info->guid = kPeer;
    return r;
  };
  rig.polls(5, steady(S, M));
  auto acts = rig.polls(8, steady(S, kSilent));
  CHECK(count<SendDiscover>(acts) == 0);  // head01 acts first
  acts = rig.polls(12, steady(S, kSilent));
  CHECK(count<SendDiscover>(acts) == 1);  // head01 did not produce a master within the bound
}

TEST_CASE("DISCOVER is only ever sent in a round that shows the local SM in STANDBY", "[sm]") {
  // Random walk over local/peer views; every SendDiscover must follow a STANDBY local view.
  const std::optional<SmState> views[] = {S, M, D, kSilent};
  const P ports[] = {P::Up, P::Down, P::Unknown};
  std::uint64_t x = 88172645463325252ull;
  auto rnd = [&](int n) {
    x ^= x << 13; x ^= x >> 7; x ^= x << 17;
    return static_cast<int>(x % static_cast<std::uint64_t>(n));
  };
  Rig rig;
  for (int i = 0; i < 5000; ++i) {
    const auto local = views[rnd(4)];
    PollRound r = round(Local{local, static_cast<std::uint8_t>(9 + rnd(4))},
                        {Peer{views[rnd(4)], static_cast<std::uint8_t>(9 + rnd(4)), ports[rnd(3)]}},
                        Link{ports[rnd(2)]});
    auto d = rig.poll(r);
    if (count<SendDiscover>(d.actions) > 0) {
      REQUIRE(local == S);
      REQUIRE(r.local_port == P::Up);
    }
  }
}
