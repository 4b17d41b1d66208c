// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// The head's event log (LogEventSink: transitions, alarms, a bounded list),
// who is master since when (MasterWatch) and the one time formatter.
#include <catch2/catch.hpp>

#include <chrono>

#include "smha/client/render.hpp"
#include "smha/head/event_journal.hpp"
#include "smha/head/event_log.hpp"
#include "smha/head/head_status.hpp"
#include "smha/head/mastership_window.hpp"

using namespace smha;
using namespace smha::head;
using namespace smha::client;
using namespace std::chrono_literals;

TEST_CASE("LogEventSink names each transition with the cause the agent found in its step and tracks alarms") {
  LogEventSink sink(3);
  sink.event({sm::EventKind::TakeoverStarted, "master head02 silent", "3 rounds"}, TimePoint{});
  sink.event({sm::EventKind::StateChanged, "STANDBY->MASTER", "takeover_done: local SM is MASTER"}, TimePoint{});
  REQUIRE(sink.last_transition());
  CHECK(sink.last_transition()->reason == "STANDBY->MASTER");
  CHECK(sink.last_transition()->evidence == "takeover_done: local SM is MASTER");
  // A step without a cause: "unknown", not the takeover_started before it.
  sink.event({sm::EventKind::StateChanged, "MASTER->STANDBY", ""}, TimePoint{});
  CHECK(sink.last_transition()->evidence == "unknown");
  sink.alarm({AlarmKind::NoMaster, "x"}, TimePoint{});
  CHECK(sink.alarms().size() == 1);
  sink.clear({AlarmKind::NoMaster}, TimePoint{});
  CHECK(sink.alarms().empty());
  CHECK(sink.events().size() == 3);  // bounded
  CHECK(sink.events().back().kind == "alarm_cleared");
  CHECK(sink.events().front().seq == 3);
}

TEST_CASE("LogEventSink: a refreshed alarm shows its new detail without a new event") {
  LogEventSink sink;
  sink.alarm({AlarmKind::UnknownSm, "SM not a configured head: 0x9 STANDBY; "}, TimePoint{});
  sink.alarm({AlarmKind::UnknownSm, "SM not a configured head: 0x9 MASTER; [changed 1 time since raised]", true},
             TimePoint{});
  CHECK(sink.alarms().at(AlarmKind::UnknownSm) == "SM not a configured head: 0x9 MASTER; [changed 1 time since raised]");
  REQUIRE(sink.events().size() == 1);
  CHECK(sink.events().back().evidence == "SM not a configured head: 0x9 STANDBY; ");
  // A new SM: raised again, recorded.
  sink.alarm({AlarmKind::UnknownSm, "SM not a configured head: 0x9 MASTER; 0xa STANDBY; "}, TimePoint{});
  CHECK(sink.events().size() == 2);
}

TEST_CASE("after an adoption the last transition is the adoption, not an earlier run's cause") {
  LogEventSink sink;
  EventRecord earlier;
  earlier.seq = 7;
  earlier.kind = "transition";
  earlier.type = EventType::Transition;
  earlier.reason = "->MASTER";
  earlier.evidence = "opensm_started: smhad start: OpenSM not running";
  sink.restore({earlier});
  REQUIRE(sink.last_transition());
  CHECK(sink.last_transition()->evidence == earlier.evidence);
  sink.event({sm::EventKind::Adopted, "OpenSM already runs on our port as MASTER", "priority 14; priority kept"},
             TimePoint{});
  REQUIRE(sink.last_transition());
  CHECK(sink.last_transition()->kind == "adopted");
  CHECK(sink.last_transition()->reason == "OpenSM already runs on our port as MASTER");
  nlohmann::json j{{"node", "head01"},
                   {"role", "master"},
                   {"last_transition",
                    {{"kind", "adopted"}, {"reason", "OpenSM already runs on our port as MASTER"},
                     {"evidence", "priority 14; priority kept"}, {"time", "T"}}}};
  CHECK(render_status_text(j).find(
            "Last: adopted: OpenSM already runs on our port as MASTER (priority 14; priority kept) at T") !=
        std::string::npos);
}

TEST_CASE("MasterWatch: who is master and since when") {
  MasterWatch w;
  const TimePoint t0{std::chrono::seconds(50)};
  const auto wall0 = std::chrono::system_clock::time_point(std::chrono::seconds(1796292000));
  SmInfo a{};
  a.guid = Guid{0x10};
  SmInfo b{};
  b.guid = Guid{0x20};
  CHECK_FALSE(w.current());
  // Already MASTER at its first answer: the time is only a lower bound.
  b.state = SmState::Master;
  a.state = SmState::Standby;
  w.observe(a, t0, wall0);
  w.observe(b, t0, wall0);
  REQUIRE(w.current());
  CHECK(w.current()->guid == Guid{0x20});
  CHECK_FALSE(w.current()->exact);
  // Later answers of the same master do not move the time.
  w.observe(b, t0 + 5s, wall0 + 5s);
  CHECK(w.current()->since == t0);
  // The master leaves MASTER: none since then; a takeover: exact.
  b.state = SmState::NotActive;
  w.observe(b, t0 + 10s, wall0 + 10s);
  CHECK_FALSE(w.current()->guid);
  CHECK(w.current()->since == t0 + 10s);
  a.state = SmState::Master;
  w.observe(a, t0 + 10s + 400ms, wall0 + 10s + 400ms);
  CHECK(w.current()->guid == Guid{0x10});
  CHECK(w.current()->exact);
  CHECK(w.current()->since_wall == wall0 + 10s + 400ms);
  // A fresh fabric: an SM seen DISCOVERING first becomes MASTER, exactly then.
  MasterWatch fresh;
  SmInfo c{};
  c.guid = Guid{0x30};
  c.state = SmState::Discovering;
  fresh.observe(c, t0, wall0);
  CHECK_FALSE(fresh.current());
  c.state = SmState::Master;
  fresh.observe(c, t0 + 2s, wall0 + 2s);
  REQUIRE(fresh.current());
  CHECK(fresh.current()->exact);
}

TEST_CASE("event times: one formatter, UTC with milliseconds, also before 1970") {
  using std::chrono::system_clock;
  CHECK(format_utc(system_clock::time_point(std::chrono::milliseconds(1796221800123))) == "2026-12-02T14:30:00.123Z");
  CHECK(format_utc(system_clock::time_point(std::chrono::milliseconds(-1))) == "1969-12-31T23:59:59.999Z");
  CHECK(format_utc(system_clock::time_point(std::chrono::microseconds(1999))) == "1970-01-01T00:00:00.001Z");
}
