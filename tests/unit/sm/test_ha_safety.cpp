// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// HaMachine safety rules: verified priority changes, a handover that does not
// bounce back, no takeover while the SM our port names as master answers, and
// an adoption at smhad start that keeps a MASTER's priority.
#include <catch2/catch.hpp>

#include "rig.hpp"

using namespace smha;
using namespace smha::sm;
using namespace smha::sm::test;

namespace {
constexpr auto S = SmState::Standby;
constexpr auto M = SmState::Master;
constexpr auto kSilent = std::nullopt;
constexpr Guid kForeign{0x99};

// A round whose local PortInfo names an SM we do not poll as master.
PollRound with_port_master(PollRound r, Guid g, SmState s, std::uint8_t prio) {
  r.port_master = Probe::answered(info(g, s, prio));
  return r;
}
}  // namespace

TEST_CASE("Priority: a change OpenSM did not apply is signalled again, then alarmed, "
          "and retried until it shows",
          "[sm][priority_verify]") {
  Rig rig;
  rig.polls(3, round(Local{S, 10}, {Peer{M, 11}}));
  // Our SM became MASTER (the peer handed over or died): the master value is rendered.
  auto acts = rig.polls(1, round(Local{M, 10}, {Peer{S, 10}}));
  REQUIRE(priorities_set(acts) == std::vector<std::uint8_t>{11});
  REQUIRE(rig.m.status().role == Role::Master);
  // The SIGHUP is lost (absorbed by a running sweep): OpenSM keeps answering 10.
  acts = rig.polls(3, round(Local{M, 10}, {Peer{S, 10}}));
  CHECK(priorities_set(acts) == std::vector<std::uint8_t>{11, 11, 11});  // bounded re-sends
  // Then a retry every 10 rounds (the write may succeed now); the alarm once
  // the value has been missing for handover_bound (2 s here).
  acts = rig.polls(16, round(Local{M, 10}, {Peer{S, 10}}));  // 0.4 .. 1.9 s after the signal
  CHECK(priorities_set(acts) == std::vector<std::uint8_t>{11});
  CHECK_FALSE(has_alarm(acts, AlarmKind::PriorityNotApplied));
  acts = rig.polls(1, round(Local{M, 10}, {Peer{S, 10}}));
  CHECK(has_alarm(acts, AlarmKind::PriorityNotApplied));
  auto alarm = first<RaiseAlarm>(acts);
  REQUIRE(alarm);
  CHECK(alarm->detail.find("wanted 11, local SM answers 10") != std::string::npos);
  acts = rig.polls(10, round(Local{M, 10}, {Peer{S, 10}}));
  CHECK(priorities_set(acts) == std::vector<std::uint8_t>{11});
  CHECK(rig.m.status().rendered_priority == 11);
  // Applied at last: the alarm clears.
  acts = rig.polls(1, round(Local{M, 11}, {Peer{S, 10}}));
  CHECK(std::any_of(acts.begin(), acts.end(), [](const Action& a) {
    const auto* c = std::get_if<ClearAlarm>(&a);
    return c && c->kind == AlarmKind::PriorityNotApplied;
  }));
  CHECK(priorities_set(acts).empty());
}

TEST_CASE("Priority: a change OpenSM applied at once is not signalled again", "[sm][priority_verify]") {
  Rig rig;
  rig.polls(3, round(Local{M, 11}, {Peer{S, 10}}));
  rig.step(HandoverRequest{kPeer});
  auto acts = rig.polls(20, round(Local{M, 9}, {Peer{S, 10}}));
  CHECK(priorities_set(acts).empty());
  CHECK_FALSE(has_alarm(acts, AlarmKind::PriorityNotApplied));
}

TEST_CASE("Handover push: the old master keeps the yield value until the target is MASTER "
          "at the master value",
          "[sm][handover]") {
  Rig rig;
  rig.polls(3, round(Local{M, 11}, {Peer{S, 10}}));
  rig.step(HandoverRequest{kPeer});
  // OpenSM handed over: the target is MASTER at its standby value; its smhad
  // has not rendered the master value yet. Our standby value (10, lower GUID)
  // would win OpenSM's next election: keep 9.
  auto acts = rig.polls(5, round(Local{S, 9}, {Peer{M, 10}}));
  CHECK_FALSE(has_event(acts, EventKind::HandoverDone));
  CHECK(priorities_set(acts).empty());
  CHECK(rig.m.status().role == Role::HandingOver);
  acts = rig.polls(1, round(Local{S, 9}, {Peer{M, 11}}));
  CHECK(has_event(acts, EventKind::HandoverDone));
  CHECK(priorities_set(acts) == std::vector<std::uint8_t>{10});
  CHECK(rig.m.status().role == Role::Standby);
}

TEST_CASE("Adoption: a MASTER found at smhad start keeps the master value from the first write",
          "[sm][adopt]") {
  // The real daemon: the supervisor has not adopted the process yet (Stopped);
  // the local SM answers MASTER at 11.
  Rig rig;
  auto d = rig.step(ProcessChanged{ProcessState::Stopped});
  CHECK(count<StartOpensm>(d.actions) == 0);  // decided by the first round
  auto acts = rig.polls(1, round(Local{M, 11}, {Peer{S, 10}}, {}, ProcessState::Stopped));
  auto s = first<StartOpensm>(acts);
  REQUIRE(s);
  CHECK(s->priority == 11);
  CHECK(has_event(acts, EventKind::Adopted));
  CHECK_FALSE(has_event(acts, EventKind::StateChanged));
  CHECK_FALSE(has_event(acts, EventKind::OpensmStarted));
  CHECK(rig.m.status().role == Role::Master);
  acts = rig.polls(10, round(Local{M, 11}, {Peer{S, 10}}));
  CHECK(priorities_set(acts).empty());
  CHECK_FALSE(has_event(acts, EventKind::StateChanged));

  // Already ours (the runner adopted it): nothing is written.
  Rig running;
  acts = running.polls(5, round(Local{M, 11}, {Peer{S, 10}}));
  CHECK(priorities_set(acts).empty());
  CHECK(count<StartOpensm>(acts) == 0);
  CHECK(has_event(acts, EventKind::Adopted));
  CHECK(running.m.status().role == Role::Master);

  // A STANDBY is adopted at the standby value; nothing answers: started as standby.
  Rig standby;
  acts = standby.polls(1, round(Local{S, 10}, {Peer{M, 11}}, {}, ProcessState::Stopped));
  s = first<StartOpensm>(acts);
  REQUIRE(s);
  CHECK(s->priority == 10);
  Rig cold;
  acts = cold.polls(1, round(Local{kSilent}, {Peer{M, 11}}, {}, ProcessState::Stopped));
  s = first<StartOpensm>(acts);
  REQUIRE(s);
  CHECK(s->priority == 10);
  CHECK(has_event(acts, EventKind::OpensmStarted));
}

TEST_CASE("Adoption: an OpenSM taken over at smhad start that answers late is waited for, "
          "never given a standby value",
          "[sm][adopt]") {
  // smhad's control took the running OpenSM over before the first step
  // (adopt_running()); a busy machine delays its first answers.
  Rig rig;
  auto d = rig.step(ProcessChanged{ProcessState::Running});
  CHECK(d.actions.empty());
  auto acts = rig.polls(2, round(Local{kSilent, 11, false}, {Peer{S, 10}}));
  CHECK(count<StartOpensm>(acts) == 0);
  CHECK(count<RestartOpensm>(acts) == 0);
  CHECK(priorities_set(acts).empty());
  CHECK(rig.m.status().role == Role::Init);
  // It answers MASTER at the master value: kept as it is, no role change.
  acts = rig.polls(10, round(Local{M, 11}, {Peer{S, 10}}));
  CHECK(priorities_set(acts).empty());
  CHECK(count<StartOpensm>(acts) == 0);
  CHECK(has_event(acts, EventKind::Adopted));
  CHECK_FALSE(has_event(acts, EventKind::StateChanged));
  CHECK(rig.m.status().role == Role::Master);

  // One that stays silent past the start grace and the silence rule is
  // fenced as any hung OpenSM, and restarted below the live standby peer (the
  // yield value), which takes over: no master was seen.
  Rig silent;
  silent.step(ProcessChanged{ProcessState::Running});
  acts = silent.polls(120, round(Local{kSilent, 10, false}, {Peer{S, 10}}));  // unresponsive_timeout 10 s
  CHECK(has_event(acts, EventKind::FenceLocal));
  auto r = first<RestartOpensm>(acts);
  REQUIRE(r);
  CHECK(r->priority == 9);
  CHECK(r->force);
  CHECK(count<StartOpensm>(acts) == 0);  // one forced restart, not a start turned into one
}

TEST_CASE("Takeover: none while the SM at our port's MasterSMLID answers MASTER", "[sm][port_master]") {
  // The peer has no lid in the configuration: it is not polled (no PeerProbe).
  Rig rig;
  auto acts = rig.polls(50, with_port_master(round(Local{S, 10}, {}), kPeer, M, 11));
  CHECK(count<SendDiscover>(acts) == 0);
  CHECK(count<RestartOpensm>(acts) == 0);
  CHECK_FALSE(has_alarm(acts, AlarmKind::NoMaster));
  CHECK_FALSE(has_alarm(acts, AlarmKind::UnknownSm));  // a configured head
  CHECK(rig.m.status().master == kPeer);

  // The peer at a stale LID: its configured address refuses; the master answers elsewhere.
  Rig stale;
  Peer gone{kSilent, 10, PortState::Unknown, kPeer, true, kKey, true};
  stale.polls(5, round(Local{S, 10}, {Peer{M, 11}}));
  acts = stale.polls(50, with_port_master(round(Local{S, 10}, {gone}), kPeer, M, 11));
  CHECK(count<SendDiscover>(acts) == 0);
  CHECK(count<RestartOpensm>(acts) == 0);

  // An SM that is not a head: no takeover, unknown_sm with its GUID.
  Rig foreign;
  acts = foreign.polls(50, with_port_master(round(Local{S, 10}, {Peer{S, 10}}), kForeign, M, 0));
  CHECK(count<SendDiscover>(acts) == 0);
  CHECK(count<RestartOpensm>(acts) == 0);
  REQUIRE(has_alarm(acts, AlarmKind::UnknownSm));
  CHECK(first<RaiseAlarm>(acts)->detail.find(to_string(kForeign)) != std::string::npos);

  // Once it stops answering, the takeover proceeds as before.
  acts = foreign.polls(10, round(Local{S, 10}, {Peer{S, 10}}));
  CHECK(count<SendDiscover>(acts) == 1);
}

TEST_CASE("Takeover: the fallback restart is not made when the port's master answers by then",
          "[sm][port_master]") {
  Rig rig;
  rig.polls(5, round(Local{S, 10}, {Peer{M, 11}}));
  auto acts = rig.polls(3, round(Local{S, 10}, {Peer{kSilent, 11, PortState::Down}}));
  REQUIRE(count<SendDiscover>(acts) == 1);
  // DISCOVER did not make us MASTER; an SM we do not poll is master now.
  acts = rig.polls(15, with_port_master(round(Local{S, 10}, {Peer{kSilent, 11, PortState::Down}}),
                                        kForeign, M, 0));
  CHECK(count<RestartOpensm>(acts) == 0);
  CHECK(has_event(acts, EventKind::TakeoverAborted));
  CHECK(rig.m.status().role == Role::Standby);
}

TEST_CASE("Observe: a node without OpenSM (local SM never answered) raises no local_sm_hung, "
          "one that answered and went silent does",
          "[ha][observe]") {
  const bool observe = GENERATE(false, true);
  auto p = policy();
  p.observe = observe;
  Rig rig(p);
  // The control reports Running (smhad --observe cannot tell), nothing answers
  // on DR hop 0, the peer is MASTER; far past start_grace and unresponsive_timeout.
  Local none{kSilent};
  none.stopped = false;
  auto acts = rig.polls(200, round(none, {{M, 12}}));
  CHECK(has_alarm(acts, AlarmKind::LocalSmHung) == !observe);
  CHECK(has_event(acts, EventKind::FenceLocal) == !observe);

  if (observe) {
    // An OpenSM on the node (someone else's) answers, then hangs: still reported.
    rig.polls(5, round({S, 10}, {{M, 12}}));
    auto later = rig.polls(200, round(none, {{M, 12}}));
    CHECK(has_alarm(later, AlarmKind::LocalSmHung));
  }
}

TEST_CASE("Local exit while MASTER: DISCOVER at once to the standby OpenSM's election would pick, "
          "never to a MASTER or a silent peer",
          "[sm][peer_discover]") {
  // Three heads; both peers STANDBY at 10: the lower GUID (kPeer) wins a tie.
  Rig rig(policy({{"head02", kPeer}, {"head03", kPeer2}}));
  rig.polls(3, round(Local{M, 11}, {Peer{S, 10, PortState::Up, kPeer}, Peer{S, 10, PortState::Up, kPeer2}}));
  REQUIRE(rig.m.status().role == Role::Master);
  auto d = rig.step(ProcessChanged{ProcessState::Exited});
  auto dp = first<DiscoverPeer>(d.actions);
  REQUIRE(dp);
  CHECK(dp->peer == kPeer);
  CHECK(count<DiscoverPeer>(d.actions) == 1);
  CHECK(count<SendDiscover>(d.actions) == 0);  // our own SM is gone
  CHECK(has_event(d.actions, EventKind::PeerDiscover));
  CHECK(has_event(d.actions, EventKind::LocalFailure));

  // A higher priority wins over a lower GUID.
  Rig prio(policy({{"head02", kPeer}, {"head03", kPeer2}}));
  prio.polls(3, round(Local{M, 11}, {Peer{S, 10, PortState::Up, kPeer}, Peer{S, 11, PortState::Up, kPeer2}}));
  dp = first<DiscoverPeer>(prio.step(ProcessChanged{ProcessState::Exited}).actions);
  REQUIRE(dp);
  CHECK(dp->peer == kPeer2);

  // No peer answered STANDBY in the latest round (silent, or DISCOVERING): no Set.
  Rig silent;
  silent.polls(3, round(Local{M, 11}, {Peer{S, 10}}));
  silent.polls(1, round(Local{M, 11}, {Peer{kSilent, 10}}));
  CHECK(count<DiscoverPeer>(silent.step(ProcessChanged{ProcessState::Exited}).actions) == 0);
  Rig sweeping;
  sweeping.polls(3, round(Local{M, 11}, {Peer{SmState::Discovering, 10}}));
  CHECK(count<DiscoverPeer>(sweeping.step(ProcessChanged{ProcessState::Exited}).actions) == 0);

  // A standby's exit, or our own stop, sends nothing to a peer.
  Rig standby;
  standby.polls(3, round(Local{S, 10}, {Peer{M, 11}}));
  CHECK(count<DiscoverPeer>(standby.step(ProcessChanged{ProcessState::Exited}).actions) == 0);

}

TEST_CASE("Fenced MASTER: the standby gets DISCOVER once the stop is done, not at the fence",
          "[sm][peer_discover]") {
  Rig rig;
  rig.t = TimePoint{} + seconds(10);  // past start_grace
  rig.polls(5, round(Local{M, 11}, {Peer{S, 10}}));  // last answer sent at 10.4 s
  // Silent (stopped): each round's decision says when the fence is due.
  auto d = rig.poll(round(Local{kSilent}, {Peer{S, 10}}));
  REQUIRE(d.fence_due);
  CHECK(*d.fence_due == TimePoint{} + seconds(10) + milliseconds(400 + 400));
  auto acts = rig.polls(2, round(Local{kSilent}, {Peer{S, 10}}));  // misses reached, not the time
  CHECK(count<StopOpensm>(acts) == 0);
  rig.t = *d.fence_due;
  acts = rig.poll(round(Local{kSilent}, {Peer{S, 10}})).actions;
  REQUIRE(count<StopOpensm>(acts) == 1);
  CHECK(has_event(acts, EventKind::FenceLocal));
  // It may answer until the kill lands: nothing to the peer yet, in the
  // rounds before the stop is done either.
  CHECK(count<DiscoverPeer>(acts) == 0);
  acts = rig.polls(1, round(Local{kSilent}, {Peer{S, 10}}, {}, ProcessState::Stopped));
  CHECK(count<DiscoverPeer>(acts) == 0);
  d = rig.step(ProcessChanged{ProcessState::Stopped});
  auto dp = first<DiscoverPeer>(d.actions);
  REQUIRE(dp);
  CHECK(dp->peer == kPeer);
  CHECK(has_event(d.actions, EventKind::PeerDiscover));
  // Once only.
  CHECK(count<DiscoverPeer>(rig.step(ProcessChanged{ProcessState::Stopped}).actions) == 0);

  // A fenced standby's stop sends nothing to the MASTER peer.
  Rig standby;
  standby.t = TimePoint{} + seconds(10);
  standby.polls(5, round(Local{S, 10}, {Peer{M, 11}}));
  acts.clear();
  while (!has_event(acts, EventKind::FenceLocal) && standby.t < TimePoint{} + seconds(30))
    acts = standby.poll(round(Local{kSilent}, {Peer{M, 11}})).actions;
  REQUIRE(has_event(acts, EventKind::FenceLocal));
  CHECK(count<DiscoverPeer>(standby.step(ProcessChanged{ProcessState::Stopped}).actions) == 0);
}

TEST_CASE("No master anywhere: no_master after the start grace with nobody sweeping, cleared by a MASTER, and "
          "a crash loop's retry is started by the engine",
          "[sm][no_master]") {
  Rig rig;
  rig.polls(3, round(Local{M, 11}, {Peer{S, 10}}));
  REQUIRE(rig.m.status().role == Role::Master);
  REQUIRE(rig.m.status().fabric_master);
  // Both heads' OpenSMs crash-loop: ours fails under supervision, the peer's
  // SM stops answering (refused: nothing bound to its port).
  rig.step(ProcessChanged{ProcessState::Failed});
  const auto dead = round(Local{kSilent, 10, false}, {Peer{kSilent, 10, PortState::Up, kPeer, true, kKey, true}},
                          {}, ProcessState::Failed);
  auto acts = rig.polls(5, dead);
  CHECK_FALSE(has_alarm(acts, AlarmKind::NoMaster));  // a takeover's gap is not an outage
  CHECK_FALSE(rig.m.status().fabric_master);
  REQUIRE(rig.m.status().masterless_since.has_value());
  CHECK(count<StartOpensm>(acts) == 0);  // supervision failed: no start asked for
  acts = rig.polls(6, dead);              // 1.1 s without a master
  REQUIRE(has_alarm(acts, AlarmKind::NoMaster));
  CHECK(first<RaiseAlarm>(acts)->detail.find("no SM answers MASTER on the fabric for") == 0);
  CHECK(first<RaiseAlarm>(acts)->detail.find("supervision failed") != std::string::npos);
  // Raised once, not per round.
  acts = rig.polls(20, dead);
  CHECK_FALSE(has_alarm(acts, AlarmKind::NoMaster));
  CHECK(rig.m.status().master == std::nullopt);
  // Supervision retries the crash loop (Failed -> Exited): the engine starts
  // OpenSM, below the standby value while no master is seen.
  auto retry = dead;
  retry.process = ProcessState::Exited;
  acts = rig.polls(1, retry);
  REQUIRE(count<StartOpensm>(acts) == 1);
  CHECK(first<StartOpensm>(acts)->priority <= 10);
  // Our OpenSM sweeps and becomes MASTER: the alarm clears.
  acts = rig.polls(1, round(Local{SmState::Discovering, 10}, {Peer{kSilent, 10, PortState::Up, kPeer, true, kKey, true}}));
  CHECK_FALSE(has_alarm(acts, AlarmKind::NoMaster));
  acts = rig.polls(1, round(Local{M, 10}, {Peer{kSilent, 10, PortState::Up, kPeer, true, kKey, true}}));
  CHECK(std::any_of(acts.begin(), acts.end(), [](const Action& a) {
    const auto* c = std::get_if<ClearAlarm>(&a);
    return c && c->kind == AlarmKind::NoMaster;
  }));
  CHECK(rig.m.status().fabric_master);
  CHECK_FALSE(rig.m.status().masterless_since.has_value());
}

TEST_CASE("No master anywhere: an SM that is not a head answering MASTER counts as a master", "[sm][no_master]") {
  Rig rig;
  rig.polls(3, round(Local{S, 10}, {Peer{M, 11}}));
  auto r = round(Local{S, 10}, {Peer{kSilent, 10, PortState::Up, kPeer, true, kKey, true}});
  OtherSm other;
  other.info = info(kForeign, M, 15);
  r.other_sms.push_back(other);
  auto acts = rig.polls(40, r);
  CHECK_FALSE(has_alarm(acts, AlarmKind::NoMaster));
  CHECK(rig.m.status().fabric_master);
}
