// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// MastershipWindow: the verdict `smctl drill` and `smctl handover` share. Each
// signal on its own: SMInfo answers of every head (with the order of send and
// receipt), our port's MasterSMLID, ActCount sweeps between STANDBY answers and
// this head's events; a clean drill passes, every break of the plan fails with
// its evidence, and what cannot be ordered does not.
#include <catch2/catch.hpp>

#include "smha/head/mastership_window.hpp"
#include "smha/head/event_log.hpp"

using namespace smha;
using namespace smha::head;
using namespace std::chrono_literals;

namespace {

constexpr Guid kA{0xa}, kB{0xb}, kC{0xc};
const TimePoint t0{};

TimePoint ms(int n) { return t0 + std::chrono::milliseconds(n); }

MastershipWindow window() {
  return MastershipWindow(kA, "head01", {{kB, "head02", Lid{2}}, {kC, "head03", Lid{3}}}, t0);
}

SmInfo info_of(Guid g, SmState s, std::uint32_t act = 0) {
  SmInfo i;
  i.guid = g;
  i.state = s;
  i.act_count = act;
  return i;
}

// One poll round at `at` ms: each answer sent at `at` and back 1 ms later.
void round(MastershipWindow& w, int at, SmState a, SmState b, SmState c, std::uint32_t act_b = 0,
           std::uint32_t act_c = 0) {
  w.sminfo(info_of(kA, a), ms(at), ms(at + 1), "dr:0");
  w.sminfo(info_of(kB, b, act_b), ms(at), ms(at + 1), "lid:2");
  w.sminfo(info_of(kC, c, act_c), ms(at), ms(at + 1), "lid:3");
}

// An event as LogEventSink records it: typed by its kind; a transition's or
// an opensm_state's "FROM->TO" (this test's shorthand) gives from and to.
EventRecord ev(std::string kind, std::string reason, std::string evidence = {}, int at = 0) {
  EventRecord e;
  e.kind = std::move(kind);
  e.reason = std::move(reason);
  e.evidence = std::move(evidence);
  e.at = ms(at);
  set_type_from_kind(e);
  if (const auto arrow = e.reason.find("->"); arrow != std::string::npos && e.type != EventType::Engine) {
    e.from = sm_state_named(e.reason.substr(0, arrow));
    e.to = sm_state_named(e.reason.substr(arrow + 2));
  }
  return e;
}

constexpr auto M = SmState::Master;
constexpr auto S = SmState::Standby;
constexpr auto D = SmState::Discovering;

}  // namespace

TEST_CASE("a clean drill passes: A, then B, then A again, ActCounts at their rate", "[service][mastership]") {
  auto w = window();
  w.set_target(kB);
  int t = 0;
  std::uint32_t act = 100;
  w.local_port(Lid{1}, Lid{1}, ms(0), ms(1));
  for (; t < 500; t += 100, act += 3) round(w, t, M, S, S, act, act);
  for (; t < 1500; t += 100, act += 3) {
    round(w, t, S, M, S, act + 500, act);  // B sweeps as MASTER: not judged
    if (t == 1000) w.local_port(Lid{1}, Lid{2}, ms(t + 10), ms(t + 11));  // B swept our port
  }
  w.plan_failback(ms(t));
  for (; t < 3000; t += 100, act += 3) {
    round(w, t, M, S, S, act + 900, act);
    if (t == 2000) w.local_port(Lid{1}, Lid{1}, ms(t + 10), ms(t + 11));  // A again, after the failback
  }
  CHECK_FALSE(w.violation());
  const auto s = w.summary();
  REQUIRE(s["masters_seen"].size() == 3);
  CHECK(s["masters_seen"][1]["name"] == "head02");
  CHECK(s["plan"].size() == 3);
}

TEST_CASE("a bounce to a third head fails, even when it is a configured head", "[service][mastership]") {
  auto w = window();
  w.set_target(kB);
  round(w, 0, M, S, S);
  round(w, 100, S, S, M);  // B's mastership was shorter than a round; C is MASTER now
  REQUIRE(w.violation());
  CHECK_THAT(*w.violation(), Catch::Contains("head03 was MASTER at +101 ms (SMInfo lid:3 answered MASTER)") &&
                                 Catch::Contains("the planned master then was head01 (this head) or head02"));
}

TEST_CASE("without a named target the first new master is the target, a second one fails", "[service][mastership]") {
  auto w = window();
  round(w, 0, M, S, S);
  round(w, 100, S, M, S);
  CHECK_FALSE(w.violation());
  round(w, 200, S, S, M);
  REQUIRE(w.violation());
  // The first break the answers show: head02 gave mastership away.
  CHECK_THAT(*w.violation(), Catch::Contains("head02 left MASTER at +201 ms"));
}

TEST_CASE("a flip-back fails only when the order is certain", "[service][mastership]") {
  auto w = window();
  w.set_target(kB);
  // One round: A's answer (sent before B's came back) still says MASTER while B
  // already does. The two answers race: no verdict.
  w.sminfo(info_of(kB, M), ms(0), ms(1), "lid:2");
  w.sminfo(info_of(kA, M), ms(0), ms(2), "dr:0");
  CHECK_FALSE(w.violation());
  // Sent after B's MASTER answer came back: A is MASTER again.
  w.sminfo(info_of(kA, M), ms(100), ms(101), "dr:0");
  REQUIRE(w.violation());
  CHECK_THAT(*w.violation(), Catch::StartsWith("flip-back: head01 (this head) was MASTER again at +101 ms") &&
                                 Catch::Contains("after head02 had taken over at +1 ms"));
}

TEST_CASE("the target leaving MASTER before the failback fails, after it is asked for, it does not",
          "[service][mastership]") {
  SECTION("before") {
    auto w = window();
    w.set_target(kB);
    round(w, 0, S, M, S);
    round(w, 100, S, S, S);
    REQUIRE(w.violation());
    CHECK_THAT(*w.violation(), Catch::Contains("head02 left MASTER at +101 ms") &&
                                   Catch::Contains("mastership moved on its own"));
  }
  SECTION("after") {
    auto w = window();
    w.set_target(kB);
    round(w, 0, S, M, S);
    w.plan_failback(ms(50));
    round(w, 100, S, S, S);
    round(w, 200, M, S, S);
    CHECK_FALSE(w.violation());
  }
  SECTION("this head leaving MASTER again after the failback") {
    auto w = window();
    w.set_target(kB);
    round(w, 0, S, M, S);
    w.plan_failback(ms(50));
    round(w, 100, M, S, S);
    round(w, 200, D, S, S);
    REQUIRE(w.violation());
    CHECK_THAT(*w.violation(), Catch::Contains("head01 (this head) left MASTER at +201 ms"));
  }
}

TEST_CASE("our port's MasterSMLID: a change proves a mastership no SMInfo answer caught", "[service][mastership]") {
  SECTION("to a third head's LID") {
    auto w = window();
    w.set_target(kB);
    w.local_port(Lid{1}, Lid{1}, ms(0), ms(1));
    w.local_port(Lid{1}, Lid{3}, ms(100), ms(101));
    REQUIRE(w.violation());
    CHECK_THAT(*w.violation(), Catch::Contains("head03 was MASTER") &&
                                   Catch::Contains("our port's MasterSMLID changed to 3"));
  }
  SECTION("to a LID that is no configured head") {
    auto w = window();
    w.local_port(Lid{1}, Lid{1}, ms(0), ms(1));
    w.local_port(Lid{1}, Lid{9}, ms(100), ms(101));
    REQUIRE(w.violation());
    CHECK_THAT(*w.violation(), Catch::Contains("an SM at LID 9 that is not a configured head swept our port"));
  }
  SECTION("back to this head after the target took over, before the failback") {
    auto w = window();
    w.set_target(kB);
    w.local_port(Lid{1}, Lid{1}, ms(0), ms(1));
    round(w, 10, S, M, S);
    w.local_port(Lid{1}, Lid{2}, ms(100), ms(101));
    w.local_port(Lid{1}, Lid{1}, ms(200), ms(201));
    REQUIRE(w.violation());
    CHECK_THAT(*w.violation(), Catch::StartsWith("flip-back: head01 (this head) was MASTER again"));
  }
  SECTION("a late write of the target's LID after the failback is no flip-back") {
    // The change can have happened any time after the previous sample was
    // asked for, which was before this head was MASTER again.
    auto w = window();
    w.set_target(kB);
    w.local_port(Lid{1}, Lid{1}, ms(0), ms(1));
    round(w, 10, S, M, S);
    w.plan_failback(ms(20));
    round(w, 30, M, S, S);
    w.local_port(Lid{1}, Lid{2}, ms(100), ms(101));
    CHECK_FALSE(w.violation());
  }
}

TEST_CASE("ActCount: a sweep between two STANDBY answers fails, a restart does not", "[service][mastership]") {
  SECTION("a stray HANDOVER: MASTER for 25 ms between two polls, handed back") {
    auto w = window();
    w.set_target(kB);
    std::uint32_t act = 500;
    int t = 0;
    for (; t < 600; t += 100, act += 3) round(w, t, M, S, S, act, act);
    CHECK_FALSE(w.violation());
    round(w, t, M, S, S, act, act + 60);
    REQUIRE(w.violation());
    CHECK_THAT(*w.violation(), Catch::Contains("head03 swept between two STANDBY answers (ActCount +") &&
                                   Catch::Contains("it was MASTER or DISCOVERING in between"));
    CHECK(w.summary()["sweeps"].size() == 1);
  }
  SECTION("a restarted OpenSM starts its ActCount over") {
    auto w = window();
    std::uint32_t act = 5000;
    int t = 0;
    for (; t < 600; t += 100, act += 3) round(w, t, M, S, S, act, act);
    round(w, t, M, S, S, act, 7);
    for (t += 100; t < 1200; t += 100) round(w, t, M, S, S, act, 7 + static_cast<std::uint32_t>(t / 100) * 3);
    CHECK_FALSE(w.violation());
  }
  SECTION("the rates from before the window judge its first gap") {
    // head02 was MASTER until a moment ago: its STANDBY rate is the one it had
    // before (smhad's long-lived ActCountRates), so a sweep right after it
    // went STANDBY again is seen.
    ActCountRates before;
    std::uint32_t act = 900;
    for (int t = -1000; t < -500; t += 100, act += 3) before.record(info_of(kB, S, act), ms(t + 1));
    before.record(info_of(kB, M, act + 400), ms(-399));
    MastershipWindow w(kA, "head01", {{kB, "head02", Lid{2}}}, t0, before);
    w.set_target(kB);
    w.sminfo(info_of(kB, S, act + 500), ms(0), ms(1), "lid:2");
    w.sminfo(info_of(kB, S, act + 560), ms(100), ms(101), "lid:2");
    REQUIRE(w.violation());
    CHECK_THAT(*w.violation(), Catch::Contains("head02 swept between two STANDBY answers (ActCount +60 in 100 ms"));
  }
  SECTION("not judged before the SM's own rate is known") {
    auto w = window();
    round(w, 0, M, S, S, 0, 100);
    round(w, 100, M, S, S, 0, 200);
    CHECK_FALSE(w.violation());
  }
}

TEST_CASE("this head's events: OpenSM's log order and a two_masters alarm", "[service][mastership]") {
  SECTION("MASTER again in the log after handing over") {
    auto w = window();
    w.set_target(kB);
    w.event(ev("opensm_state", "MASTER->STANDBY", "log 1"));
    w.event(ev("opensm_state", "STANDBY->MASTER", "OpenSM log x: Entering MASTER state"));
    REQUIRE(w.violation());
    CHECK_THAT(*w.violation(), Catch::Contains("flip-back: this head's OpenSM was MASTER again after it had handed "
                                               "over (OpenSM log x: Entering MASTER state)"));
  }
  SECTION("the same once the failback was asked for") {
    auto w = window();
    w.set_target(kB);
    w.event(ev("opensm_state", "MASTER->STANDBY"));
    w.plan_failback(ms(10));
    w.event(ev("opensm_state", "STANDBY->MASTER"));
    CHECK_FALSE(w.violation());
    w.event(ev("opensm_state", "MASTER->STANDBY", "log 3"));
    REQUIRE(w.violation());
    CHECK_THAT(*w.violation(), Catch::Contains("left MASTER again after regaining it (log 3)"));
  }
  SECTION("two_masters") {
    auto w = window();
    w.event(ev("alarm", "two_masters", "head02 and head03 answer MASTER"));
    REQUIRE(w.violation());
    CHECK(*w.violation() == "two MASTERs seen: head02 and head03 answer MASTER");
  }
  SECTION("the engine's transitions are this head's SMInfo") {
    auto w = window();
    w.set_target(kB);
    round(w, 0, S, M, S);
    w.event(ev("transition", "STANDBY->MASTER", "", 300));
    REQUIRE(w.violation());
    CHECK_THAT(*w.violation(), Catch::StartsWith("flip-back: head01 (this head) was MASTER again at +300 ms"));
  }
}

// The window reads the typed fields of events (EventRecord::type, from, to,
// alarm), never their text: reworded or empty reasons give the same verdict.
TEST_CASE("the window's verdict does not depend on the wording of events", "[service][mastership]") {
  auto typed = [](EventType type, std::optional<SmState> from, std::optional<SmState> to, std::string reason,
                  int at = 0) {
    EventRecord e;
    e.type = type;
    e.kind = type == EventType::Transition ? "transition" : "opensm_state";
    e.from = from;
    e.to = to;
    e.reason = std::move(reason);
    e.at = ms(at);
    return e;
  };
  for (const std::string& reason : {std::string(), std::string("MASTER->STANDBY"), std::string("words ->MASTER")}) {
    INFO("reason '" << reason << "'");
    {
      auto w = window();
      w.set_target(kB);
      w.event(typed(EventType::OpensmState, M, S, reason));
      w.event(typed(EventType::OpensmState, S, M, reason));
      REQUIRE(w.violation());
      CHECK_THAT(*w.violation(), Catch::StartsWith("flip-back: this head's OpenSM was MASTER again"));
    }
    {
      auto w = window();
      w.set_target(kB);
      w.event(typed(EventType::OpensmState, M, S, reason));
      w.plan_failback(ms(10));
      w.event(typed(EventType::OpensmState, S, M, reason));
      CHECK_FALSE(w.violation());
    }
    {
      auto w = window();
      w.set_target(kB);
      round(w, 0, S, M, S);
      w.event(typed(EventType::Transition, S, M, reason, 300));
      REQUIRE(w.violation());
      CHECK_THAT(*w.violation(), Catch::StartsWith("flip-back: head01 (this head) was MASTER again at +300 ms"));
    }
    {
      auto w = window();
      w.event(typed(EventType::Transition, M, S, reason, 300));  // the first leg: expected
      CHECK_FALSE(w.violation());
    }
    {
      EventRecord alarm;
      alarm.type = EventType::Alarm;
      alarm.kind = "alarm";
      alarm.alarm = AlarmKind::TwoMasters;
      alarm.reason = reason;
      auto w = window();
      w.event(alarm);
      CHECK(w.violation());
      alarm.alarm = AlarmKind::UnknownSm;
      alarm.reason = "two_masters";
      auto quiet = window();
      quiet.event(alarm);
      CHECK_FALSE(quiet.violation());
    }
  }
}

TEST_CASE("a pull: the master, then this head, and a bounce, a flip-back or leaving again fail", "[service][mastership]") {
  SECTION("clean") {
    auto w = window();
    w.plan_pull(kC);  // head03 is MASTER, head01 (this head) pulls
    round(w, 0, S, S, M);
    w.event(ev("opensm_state", "STANDBY->MASTER", "log 1", 150));
    round(w, 200, M, S, S);
    w.event(ev("transition", "STANDBY->MASTER", "", 210));
    round(w, 300, M, S, S);
    CHECK_FALSE(w.violation());
    CHECK(w.summary()["plan"] == nlohmann::json::array({"head03", "head01 (this head)"}));
  }
  SECTION("the other standby MASTER") {
    auto w = window();
    w.plan_pull(kC);
    round(w, 0, S, S, M);
    round(w, 100, S, M, S);
    REQUIRE(w.violation());
    CHECK_THAT(*w.violation(), Catch::Contains("head02 was MASTER at +101 ms") &&
                                   Catch::Contains("the planned master then was head03 or head01 (this head)"));
  }
  SECTION("the old master MASTER again after this head took over") {
    auto w = window();
    w.plan_pull(kC);
    round(w, 0, S, S, M);
    round(w, 100, M, S, S);
    round(w, 200, M, S, M);
    REQUIRE(w.violation());
    CHECK_THAT(*w.violation(), Catch::StartsWith("flip-back: head03 was MASTER again at +201 ms"));
  }
  SECTION("this head's OpenSM leaving MASTER after the pull") {
    auto w = window();
    w.plan_pull(kC);
    w.event(ev("opensm_state", "STANDBY->MASTER", "log 1"));
    CHECK_FALSE(w.violation());
    w.event(ev("opensm_state", "MASTER->STANDBY", "log 2"));
    REQUIRE(w.violation());
    CHECK_THAT(*w.violation(), Catch::Contains("left MASTER again after regaining it (log 2)"));
  }
}
