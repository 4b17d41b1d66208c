// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// lib/service pieces without a fabric: AsioScheduler, LogEventSink,
// RecordingTransport's hold, the human status layout, and the OS side (the
// STATUS line, SystemdReporter on a real datagram socket, HookDispatcher
// running real scripts).
#include <catch2/catch.hpp>

#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include "smha/client/render.hpp"
#include "smha/core/limits.hpp"
#include "smha/head/event_journal.hpp"
#include "smha/head/head_status.hpp"
#include "smha/service/check_config.hpp"
#include "smha/service/hook_dispatcher.hpp"
#include "smha/service/systemd_reporter.hpp"
#include "smha/service/service.hpp"

#include "fake_transport.hpp"
#include "sample_config.hpp"
#include "smha/os/posix_process_runner.hpp"

using namespace smha;
using namespace smha::service;
using namespace smha::head;
using namespace smha::client;
using namespace std::chrono_literals;
using smha::test::FakeTransport;

namespace {

// The hook runner smhad's system adapters give: fork/exec on `io`.
HookDispatcher::MakeProcesses posix_processes(boost::asio::io_context& io) {
  return [&io] { return std::make_unique<os::PosixProcessRunner>(io); };
}

}  // namespace

TEST_CASE("AsioScheduler fires timers in time order and not after cancel") {
  boost::asio::io_context io;
  SteadyClock clock;
  os::AsioScheduler sched(io, clock);
  std::vector<int> fired;
  const auto now = clock.now();
  sched.schedule_at(now + 30ms, [&] { fired.push_back(3); });
  sched.schedule_at(now + 10ms, [&] { fired.push_back(1); });
  auto id = sched.schedule_at(now + 20ms, [&] { fired.push_back(2); });
  sched.schedule_at(now - 5ms, [&] { fired.push_back(0); });  // past: at once
  sched.cancel(id);
  sched.cancel(9999);  // unknown: no-op
  io.run();
  CHECK(fired == std::vector<int>{0, 1, 3});
  CHECK(sched.pending() == 0);
  CHECK(clock.now() - now >= 30ms);
}

TEST_CASE("AsioScheduler keeps time order when the loop arms timers late") {
  // A loop that is late arming timers (a busy machine) must not reorder them:
  // a time already past stays earlier than a later time armed before it.
  boost::asio::io_context io;
  SteadyClock clock;
  os::AsioScheduler sched(io, clock);
  std::vector<int> fired;
  const auto now = clock.now();
  sched.schedule_at(now + 30ms, [&] { fired.push_back(3); });
  // The late loop: arm the next timers only once now + 30 ms has passed.
  std::this_thread::sleep_until(now + 40ms);
  sched.schedule_at(now + 10ms, [&] { fired.push_back(1); });
  sched.schedule_at(now - 5ms, [&] { fired.push_back(0); });
  io.run();
  CHECK(fired == std::vector<int>{0, 1, 3});
}

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

TEST_CASE("status shows the master, since when, and the last takeover or handover") {
  auto j = nlohmann::json::parse(R"({
    "node":"head01","role":"standby",
    "mastership":{"guid":"0x20","node":"head02","since":"2026-12-03T15:02:11.123Z","for_s":7980.2,"exact":true},
    "last_change":{"kind":"handover","reason":"by request: push: target head02","outcome":"done",
                   "time":"2026-12-03T15:02:10.900Z","duration_s":0.2234}})");
  std::string t = render_status_text(j);
  CHECK(t.find("Master: head02 (0x20) since 2026-12-03T15:02:11.123Z, 2h13m\n") != std::string::npos);
  CHECK(t.find("Changed: handover (by request: push: target head02) at 2026-12-03T15:02:10.900Z, done in 223ms\n") !=
        std::string::npos);
  j["mastership"]["exact"] = false;
  j["mastership"]["node"] = "";
  t = render_status_text(j);
  CHECK(t.find("Master: unknown SM (0x20) since at least 2026-12-03T15:02:11.123Z, 2h13m") != std::string::npos);
  j["mastership"]["guid"] = nullptr;
  t = render_status_text(j);
  CHECK(t.find("Master: none since 2026-12-03T15:02:11.123Z, 2h13m") != std::string::npos);
}

TEST_CASE("status shows each peer's config drift verdict (doc/drift.md)") {
  auto j = nlohmann::json::parse(R"({
    "node":"head01","role":"master",
    "drift":{"own":{"partitions":"00112233445566"},
             "peers":[{"name":"head02","state":"drift","detail":"partitions, qos differ"},
                      {"name":"head03","state":"unknown","detail":"no smha record at the SA"}]},
    "alarms":[{"kind":"config_drift","detail":"head02 (0x20): partitions, qos differ"}]})");
  std::string t = render_status_text(j);
  CHECK(t.find("    Drift: head02 drift (partitions, qos differ)\n"
               "           head03 unknown (no smha record at the SA)\n") != std::string::npos);
  CHECK(t.find("Alarms: config_drift (head02 (0x20): partitions, qos differ)") != std::string::npos);
  j["drift"]["own"] = nullptr;
  t = render_status_text(j);
  CHECK(t.find("Drift: (own digests not computed) head02 drift") != std::string::npos);
  j.erase("drift");
  CHECK(render_status_text(j).find("Drift:") == std::string::npos);
}

TEST_CASE("SMs on the fabric: status lines and the smctl sms table, escaped") {
  using nlohmann::json;
  const json sms = json::parse(R"([
    {"guid":"0x10","head":"head01","local":true,"node_description":"head01","lid":1,"state":"MASTER",
     "priority":14,"switch_guid":"0x200000","switch_port":3,"last_answer_age_s":0.05},
    {"guid":"0x100009","head":null,"local":false,"node_description":"node07 \u001b[2J","lid":5,
     "state":"STANDBY","priority":0,"switch_guid":"0x200001","switch_port":3,"last_answer_age_s":1.5},
    {"guid":"0x100011","head":null,"local":false,"node_description":null,"lid":null,"state":"unknown",
     "priority":null,"switch_guid":null,"switch_port":null,"last_answer_age_s":null}])");
  json st = json::object();
  st["sms"] = sms;
  const std::string t = render_status_text(st);
  CHECK(t.find("      SMs:\n           this node  MASTER  prio 14  guid 0x10  lid 1  \"head01\"  at 0x200000 port 3\n") !=
        std::string::npos);
  CHECK(t.find("NOT A HEAD  STANDBY  prio 0  guid 0x100009  lid 5  \"node07 \\x1b[2J\"  at 0x200001 port 3\n") !=
        std::string::npos);
  const json reply = {{"sms", sms},
                      {"census", {{"enabled", true}, {"walks", 2}, {"walk_mads", 62}, {"query_mads", 4},
                                  {"last_walk_age_s", 3.0}, {"next_walk_in_s", 57.0},
                                  {"last_walk", {{"nodes", 6}, {"ports", 22}, {"mads", 31}, {"sm_ports", 3}}}}}};
  const std::string tab = render_sms_text(reply);
  INFO(tab);
  CHECK(tab.find("* 0x10") != std::string::npos);
  CHECK(tab.find("! 0x100009") != std::string::npos);
  CHECK(tab.find("node07 \\x1b[2J") != std::string::npos);
  CHECK(tab.find('\x1b') == std::string::npos);
  CHECK(tab.find("! 0x100011           unknown") != std::string::npos);
  CHECK(tab.find("never") != std::string::npos);
  CHECK(tab.find("Census: 2 walks (62 MADs), 4 SMInfo MADs; last walk 3.0s ago: 6 nodes, 22 ports, 31 MADs, 3 IsSM ports; next in 57s") !=
        std::string::npos);
  CHECK(tab.find("SA table") == std::string::npos);  // an smhad without it: no line

  // The SA table line: asked, answered, records of claimed, truncated, the last error.
  json with_sa = reply;
  with_sa["census"]["sa"] = {{"sa_lid", 3}, {"queries", 4}, {"tables", 3}, {"mads", 5}, {"last_age_s", 12.0},
                             {"records", 6}, {"claimed", 9}, {"truncated", true},
                             {"last_error", "timeout: no answer after 2 attempt(s) of 500 ms"}};
  const std::string sa = render_sms_text(with_sa);
  INFO(sa);
  CHECK(sa.find("SA table: lid 3, 3 of 4 answered (5 MADs); last 12s ago: 6 records of 9, TRUNCATED; "
                "last error: timeout: no answer after 2 attempt(s) of 500 ms\n") != std::string::npos);
  with_sa["census"]["sa"] = {{"sa_lid", nullptr}, {"queries", 0}, {"tables", 0}, {"mads", 0},
                             {"last_age_s", nullptr}, {"records", nullptr}, {"claimed", nullptr},
                             {"truncated", false}, {"last_error", nullptr}};
  CHECK(render_sms_text(with_sa).find("SA table: not asked yet\n") != std::string::npos);
}

TEST_CASE("smctl health: off, not yet assessed, healthy, and degraded links worst first, escaped") {
  CHECK(render_health_text(nlohmann::json::parse(R"({"health":{"enabled":false}})")).find("Fabric health is off") == 0);
  CHECK(render_health_text(nlohmann::json::parse(R"({"health":{"enabled":true,"assessed":false}})"))
            .find("No census walk assessed yet") == 0);
  auto reply = nlohmann::json::parse(R"({"node":"head01","health":{"enabled":true,"assessed":true,"walk_age_s":12,
    "links":6,"links_by_kind":{"switch-switch":2,"switch-ca":4,"other":0},"unknown":0,"degraded_total":0,
    "degraded":[]}})");
  std::string t = render_health_text(reply);
  CHECK(t.find("Links: 6 assessed (switch-ca 4, switch-switch 2), 0 not decoded; census walk 12s ago\n") == 0);
  CHECK(t.find("Degraded links: none\n") != std::string::npos);
  reply["health"]["degraded_total"] = 2;
  reply["health"]["degraded"] = nlohmann::json::parse(R"([{"a":{"guid":"0x0000000000200001","port":2,
      "node_description":"Switch2"},"b":{"guid":"0x000000000010000a","port":1,"node_description":"h\u001b[2J"},
      "kind":"switch-ca","active":"1X SDR","should":"4X SDR","why":"below_tier",
      "detail":"3 of 4 switch-ca links run at 4X","degraded_for_s":125}])");
  t = render_health_text(reply);
  CHECK(t.find("Degraded links: 2 (the worst 1 shown), worst first\n") != std::string::npos);
  CHECK(t.find("1X SDR   4X SDR   below_tier       2m05s  \"Switch2\" 0x0000000000200001 port 2 <-> \"h") !=
        std::string::npos);
  CHECK(t.find('\x1b') == std::string::npos);
  CHECK(t.find("(switch-ca: 3 of 4 switch-ca links run at 4X)") != std::string::npos);
}

TEST_CASE("event times: one formatter, UTC with milliseconds, also before 1970") {
  using std::chrono::system_clock;
  CHECK(format_utc(system_clock::time_point(std::chrono::milliseconds(1796221800123))) == "2026-12-02T14:30:00.123Z");
  CHECK(format_utc(system_clock::time_point(std::chrono::milliseconds(-1))) == "1969-12-31T23:59:59.999Z");
  CHECK(format_utc(system_clock::time_point(std::chrono::microseconds(1999))) == "1970-01-01T00:00:00.001Z");
}

TEST_CASE("RecordingTransport remembers answers per SM and refuses Sets in observe mode only") {
  boost::asio::io_context io;
  SteadyClock clock;
  FakeTransport inner(io);
  RecordingTransport t(inner, clock, false);
  bool got = false;
  t.get_sminfo(mad::Target{Lid{7}}, {}, [&](Result<mad::SmInfoReply> r) { got = r.ok(); });
  io.run();
  io.restart();
  CHECK(got);
  auto seen = t.last_seen(Guid{0x20});
  REQUIRE(seen);
  CHECK(seen->info.act_count == 42);
  CHECK(seen->rtt == 3ms);
  auto q = t.last_query(mad::Target{Lid{7}});
  REQUIRE(q);
  CHECK(q->answered);
  CHECK_FALSE(t.last_query(mad::Target{Lid{8}}));

  t.set_sminfo(mad::Target{DrPath{}}, SmInfoModifier::Discover, SmInfo{}, {}, [](Result<mad::SmInfoReply>) {});
  io.run();
  io.restart();
  CHECK(inner.sets == 1);

  RecordingTransport observing(inner, clock, true);
  std::optional<Error> err;
  observing.set_sminfo(mad::Target{DrPath{}}, SmInfoModifier::Discover, SmInfo{}, {},
                       [&](Result<mad::SmInfoReply> r) { if (!r) err = r.error(); });
  CHECK(err);
  CHECK(err->code == Errc::Observe);
  CHECK(inner.sets == 1);
}

TEST_CASE("RecordingTransport keeps the last PortInfo answer per port across a silent query") {
  boost::asio::io_context io;
  SteadyClock clock;
  FakeTransport inner(io);
  RecordingTransport t(inner, clock, true);  // read-only: Gets still pass
  CHECK_FALSE(t.last_port_info(DrPath{}, 1));
  inner.port = mad::PortInfo{Lid{3}, Lid{1}, 1, mad::PortState::Down};
  std::optional<mad::PortState> got;
  t.get_port_info(DrPath{}, 1, {}, [&](Result<mad::PortInfoReply> r) { if (r) got = r->info.state; });
  io.run();
  io.restart();
  CHECK(got == mad::PortState::Down);
  auto rec = t.last_port_info(DrPath{}, 1);
  REQUIRE(rec);
  CHECK(rec->answered);
  REQUIRE(rec->info);
  CHECK(rec->info->state == mad::PortState::Down);
  CHECK_FALSE(t.last_port_info(DrPath{}, 2));
  CHECK_FALSE(t.last_port_info(mad::Target{Lid{3}}, 1));

  inner.port.reset();
  bool failed = false;
  t.get_port_info(DrPath{}, 1, {}, [&](Result<mad::PortInfoReply> r) { failed = !r.ok(); });
  io.run();
  CHECK(failed);
  rec = t.last_port_info(DrPath{}, 1);
  REQUIRE(rec);
  CHECK_FALSE(rec->answered);
  REQUIRE(rec->info);  // the last answer is kept
  CHECK(rec->info->state == mad::PortState::Down);
}

TEST_CASE("the human status shows role, local SM, OpenSM, peers and alarms") {
  const auto j = nlohmann::json::parse(R"({
    "node":"head01","role":"Master","observe":false,"smhad_version":"0.1.0","uptime_s":7980.4,
    "local":{"state":"MASTER","priority":14,"guid":"0x10","lid":1,"act_count":99,"last_poll_age_s":0.05,
             "port_state":"DOWN","port_state_source":"smp","port_state_age_s":0.02},
    "opensm":{"supervisor":"running","pid":1234,"uptime_s":12.5,"restarts":1,"adopted":true,"reason":""},
    "peers":[{"name":"head02","state":"STANDBY","priority":13,"guid":"0x20","lid":7,"rtt_ms":0.4,"last_answer_age_s":0.1,
              "node_description":"head02 mlx5_0\\x0a","dr_path":"0,1,3,1"}],
    "policy":{"poll_interval_ms":100,"misses":3,"failback":"sticky","base_priority":13},
    "alarms":[{"kind":"two_masters","detail":"x"}],
    "hold":{"held":false},
    "last_transition":{"reason":"STANDBY->MASTER","evidence":"takeover_done","time":"T"}})");
  const std::string t = render_status_text(j);
  CHECK(t.find(" smhad head01 - managing OpenSM\n") != std::string::npos);
  CHECK(t.find("Role: Master") != std::string::npos);
  auto instance = j;
  instance["fabric"] = "rail1";
  CHECK(render_status_text(instance).find(" smhad@rail1 head01 - managing OpenSM\n") != std::string::npos);
  instance["fabric"] = nullptr;  // a one-fabric head
  CHECK(render_status_text(instance).find(" smhad head01 - managing OpenSM\n") != std::string::npos);
  CHECK(t.find("Local SM: MASTER  prio 14") != std::string::npos);
  CHECK(t.find("Port: DOWN  (smp, PortInfo 20ms ago)") != std::string::npos);
  CHECK(t.find("smhad: 0.1.0, up 2h13m") != std::string::npos);
  CHECK(t.find("uptime 12s") != std::string::npos);
  CHECK(t.find("rtt 0.40 ms  (100ms ago)") != std::string::npos);
  CHECK(t.find("pid 1234") != std::string::npos);
  CHECK(t.find("(adopted)") != std::string::npos);
  CHECK(t.find("head02  STANDBY  prio 13") != std::string::npos);
  CHECK(t.find("(100ms ago)  \"head02 mlx5_0\\x0a\"  dr 0,1,3,1") != std::string::npos);
  CHECK(t.find("two_masters") != std::string::npos);
  CHECK(t.find("STANDBY->MASTER (takeover_done)") != std::string::npos);
}

TEST_CASE("the human status and events escape what the fabric or OpenSM wrote") {
  // As smctl gets it: JSON carries ESC as \u001b; invalid UTF-8 was replaced
  // by the server, but a raw byte string is escaped all the same.
  auto j = nlohmann::json::parse(R"({
    "node":"head01","role":"Master",
    "opensm":{"supervisor":"failed","pid":0,"restarts":0,"reason":"OpenSM: \"\u001b[2J\u001b]0;owned\u0007\""},
    "peers":[{"name":"head02","state":"STANDBY"}],
    "alarms":[{"kind":"unknown_sm","detail":"node \u009b31mred\u202e"}]})");
  j["peers"][0]["name"] = std::string("head02\xe9\x1b[31m");
  const std::string t = render_status_text(j);
  INFO(t);
  CHECK(t.find('\x1b') == std::string::npos);
  CHECK(t.find('\x07') == std::string::npos);
  CHECK(t.find("OpenSM: \"\\x1b[2J\\x1b]0;owned\\x07\"") != std::string::npos);
  CHECK(t.find("head02\\xe9\\x1b[31m  STANDBY") != std::string::npos);
  CHECK(t.find("unknown_sm (node \\u009b31mred\\u202e)") != std::string::npos);

  const auto ev = nlohmann::json::parse(
      R"({"events":[{"time":"T","kind":"opensm_state","reason":"log \u001b[1mbold","evidence":"x\ny"}]})");
  const std::string e = render_events_text(ev);
  CHECK(e == "T  opensm_state  log \\x1b[1mbold  [x\\x0ay]\n");
}

TEST_CASE("durations and round-trip times are rounded for people") {
  CHECK(human_duration(0.384122) == "384ms");
  CHECK(human_duration(4.26) == "4.3s");
  CHECK(human_duration(42.9) == "42s");
  CHECK(human_duration(1918.028497873) == "31m58s");
  CHECK(human_duration(7980) == "2h13m");
  CHECK(human_duration(3 * 86400 + 4 * 3600 + 59) == "3d04h");
  CHECK(human_duration(-1) == "-");
  CHECK(human_ms(0.384122) == "0.38 ms");
  CHECK(human_ms(12.34) == "12.3 ms");
  CHECK(human_ms(250.4) == "250 ms");
}

namespace {

// A private temp directory (mode 0700, so hooks in it pass the security check).
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "smha-svc-XXXXXX").string();
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    path_ = tmpl;
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// NOTIFY_SOCKET pointing at a bound datagram socket for the test's lifetime.
class NotifySink {
 public:
  explicit NotifySink(const std::string& path) : path_(path) {
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd_ >= 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, path.data(), path.size());
    REQUIRE(::bind(fd_, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0);
    ::setenv("NOTIFY_SOCKET", path.c_str(), 1);
    ::unsetenv("WATCHDOG_USEC");
  }
  ~NotifySink() {
    ::unsetenv("NOTIFY_SOCKET");
    ::close(fd_);
  }
  // Every datagram waiting now.
  std::vector<std::string> drain() {
    std::vector<std::string> out;
    char buf[2048];
    ssize_t n;
    while ((n = ::recv(fd_, buf, sizeof buf, MSG_DONTWAIT)) >= 0) out.emplace_back(buf, static_cast<std::size_t>(n));
    return out;
  }

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace

TEST_CASE("systemd_status_line and peer_view: local state and every peer and hold and a failed OpenSM") {
  boost::asio::io_context io;
  SteadyClock clock;
  FakeTransport inner(io);
  RecordingTransport t(inner, clock, false);
  const config::Config c = smha::test::two_heads();
  // What smhad's head_status() makes of the poller and the agent's routes.
  auto status = [&](std::optional<SmState> local, const std::vector<agent::PeerRoute>* routes) {
    HeadStatus h;
    if (local) {
      h.local.answer = SmView::Answer{*local};
      h.local.seen = head::SmSeen::Answered;
    }
    for (std::size_t i = 0; i < c.peers.size(); ++i)
      h.peers.push_back(peer_view(c.peers[i], routes ? &(*routes)[i] : nullptr, t, clock.now()));
    return h;
  };
  CHECK(systemd_status_line(status(std::nullopt, nullptr), nullptr) ==
        "no answer from local SM; peer head02 unknown, peer head03 unaddressed");

  t.get_sminfo(mad::Target{Lid{7}}, {}, [](Result<mad::SmInfoReply>) {});
  io.run();
  HeadStatus h = status(SmState::Master, nullptr);
  CHECK(systemd_status_line(h, nullptr) == "MASTER; peer head02 STANDBY prio 5, peer head03 unaddressed");
  CHECK(h.peers[0].live_standby());
  CHECK(h.peers[0].last_poll_answered == true);

  h.held = true;
  opensm::SupervisorStatus st;
  st.state = opensm::SupervisorState::Running;
  CHECK(systemd_status_line(h, &st) == "MASTER; peer head02 STANDBY prio 5, peer head03 unaddressed; HOLD");
  h.held = false;
  st.state = opensm::SupervisorState::Failed;
  st.reason = "crash loop: 2 crashes within 60s";
  CHECK(systemd_status_line(h, &st) ==
        "MASTER; peer head02 STANDBY prio 5, peer head03 unaddressed; OpenSM failed: crash loop: 2 "
        "crashes within 60s");

  // With the agent's routes: head03 (no lid) shows its discovery.
  std::vector<agent::PeerRoute> routes(2);
  routes[0].guid = c.peers[0].port_guid;
  routes[1].guid = c.peers[1].port_guid;
  routes[1].discover = true;
  routes[1].state = agent::RouteState::NotFound;
  routes[1].searched = "searched 6 nodes, 14 ports";
  CHECK(systemd_status_line(status(SmState::Master, &routes), nullptr) ==
        "MASTER; peer head02 STANDBY prio 5, peer head03 not found (searched 6 nodes, 14 ports)");
  routes[1].state = agent::RouteState::Resolving;
  CHECK(systemd_status_line(status(SmState::Master, &routes), nullptr) ==
        "MASTER; peer head02 STANDBY prio 5, peer head03 resolving");
  // Found at a DR path but no LID yet: polled by DR, unreachable when that poll went unanswered.
  routes[1].state = agent::RouteState::Resolved;
  routes[1].found = true;
  routes[1].dr = DrPath{{1, 3}};
  inner.answer = [](const mad::Target&) { return std::optional<SmInfo>(); };
  t.get_sminfo(mad::Target{*routes[1].dr}, {}, [](Result<mad::SmInfoReply>) {});
  io.restart();
  io.run();
  h = status(SmState::Master, &routes);
  CHECK(h.peers[1].shown() == "unreachable");
  CHECK_FALSE(h.peers[1].last_poll_answered);  // by LID only: no live standby without a LID
  CHECK(systemd_status_line(h, nullptr) == "MASTER; peer head02 STANDBY prio 5, peer head03 unreachable");
}

TEST_CASE("SystemdReporter: READY once when ready and STATUS only on change and RELOADING and STOPPING") {
  TempDir dir;
  NotifySink sink(dir.path() + "/notify");
  boost::asio::io_context io;
  bool ready = false;
  std::string line = "STANDBY; no peer";
  SystemdReporter r(io, [&] { return ready; }, [&] { return line; }, 10ms);
  r.start();
  r.refresh();
  CHECK(sink.drain().empty());  // not ready: nothing (no watchdog configured)
  CHECK_FALSE(r.ready_sent());
  ready = true;
  io.run_for(50ms);  // the refresh timer notices
  CHECK(r.ready_sent());
  CHECK(sink.drain() == std::vector<std::string>{"READY=1\nSTATUS=STANDBY; no peer"});
  r.refresh();
  CHECK(sink.drain().empty());  // unchanged
  line = "MASTER; no peer";
  r.refresh();
  CHECK(sink.drain() == std::vector<std::string>{"STATUS=MASTER; no peer"});
  r.reloading();
  r.reloaded();
  CHECK(sink.drain() ==
        std::vector<std::string>{"RELOADING=1", "READY=1\nSTATUS=MASTER; no peer"});
  r.stopping("SIGTERM");
  CHECK(sink.drain() == std::vector<std::string>{"STOPPING=1", "STATUS=stopping: SIGTERM"});
  line = "STANDBY; no peer";
  r.refresh();
  CHECK(sink.drain().empty());  // stopped: nothing more
}

TEST_CASE("SystemdReporter pings WATCHDOG at half of WATCHDOG_USEC") {
  TempDir dir;
  NotifySink sink(dir.path() + "/notify");
  ::setenv("WATCHDOG_USEC", "40000", 1);  // 20 ms
  ::unsetenv("WATCHDOG_PID");
  boost::asio::io_context io;
  SystemdReporter r(io, [] { return false; }, [] { return std::string("x"); }, 1000ms);
  r.start();
  REQUIRE(r.watchdog_interval());
  CHECK(*r.watchdog_interval() == 20ms);
  io.run_for(110ms);
  const auto got = sink.drain();
  ::unsetenv("WATCHDOG_USEC");
  // One at start, then every 20 ms: 5 or 6 in 110 ms (timers may run late, never early).
  CHECK(got.size() >= 3);
  CHECK(got.size() <= 6);
  for (const auto& m : got) CHECK(m == "WATCHDOG=1");
}

TEST_CASE("HookDispatcher: each event runs the hooks of its key with the documented argv") {
  TempDir dir;
  const std::string out = dir.path() + "/out";
  auto script = [&](const std::string& name) {
    const std::string p = dir.path() + "/" + name;
    std::ofstream(p) << "#!/bin/sh\necho \"" << name << " $* peer=$SMHA_PEER reason=$SMHA_REASON\" >> " << out << "\n";
    REQUIRE(::chmod(p.c_str(), 0755) == 0);
    return p;
  };
  config::Config c = smha::test::two_heads();
  c.hooks["master"] = {script("m")};
  c.hooks["standby"] = {script("s")};
  c.hooks["fault"] = {script("f")};
  c.hooks["opensm_restart"] = {script("o")};
  c.hooks["reload"] = {script("r")};
  c.hooks["unknown_sm"] = {script("u")};
  REQUIRE(HookDispatcher::check(c).ok());
  boost::asio::io_context io;
  SteadyClock clock;
  os::AsioScheduler sched(io, clock);
  std::vector<platform::HookResult> results;
  HookDispatcher d(sched, posix_processes(io), c, [&](const platform::HookResult& r) { results.push_back(r); });
  d.transition(SmState::Standby, SmState::Master, 11, "head02", "takeover_started: lost");
  d.transition(SmState::Master, SmState::NotActive, 11, "head02", "observed");
  d.transition(SmState::NotActive, SmState::Standby, 10, "head02", "observed");
  d.alarm("STANDBY", 10, "two_masters: x");
  d.opensm_restart("STANDBY", 10, "respawned after 1 crash(es): pid 5");
  d.reload("STANDBY", 10, "HA policy unchanged");
  d.unknown_sm("STANDBY", 10, "unknown_sm: SM not a configured head: 0x100009 STANDBY");
  // HookRunner posts each start on the io_context: run until all seven ended.
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (results.size() < 7 && std::chrono::steady_clock::now() < deadline) io.run_for(20ms);
  REQUIRE(results.size() == 7);
  for (const auto& r : results) CHECK(r.outcome == platform::HookOutcome::Ok);
  CHECK(slurp(out) ==
        "m TRANSITION MASTER STANDBY 11 peer=head02 reason=takeover_started: lost\n"
        "f TRANSITION NOTACTIVE MASTER 11 peer=head02 reason=observed\n"
        "s TRANSITION STANDBY NOTACTIVE 10 peer=head02 reason=observed\n"
        "f ALARM STANDBY STANDBY 10 peer= reason=two_masters: x\n"
        "o OPENSM_RESTART STANDBY STANDBY 10 peer= reason=respawned after 1 crash(es): pid 5\n"
        "r RELOAD STANDBY STANDBY 10 peer= reason=HA policy unchanged\n"
        "u ALARM STANDBY STANDBY 10 peer= reason=unknown_sm: SM not a configured head: 0x100009 STANDBY\n");
}

TEST_CASE("HookDispatcher::check names the key of an insecure hook") {
  TempDir dir;
  const std::string p = dir.path() + "/hook";
  std::ofstream(p) << "#!/bin/sh\n";
  REQUIRE(::chmod(p.c_str(), 0775) == 0);
  config::Config c = smha::test::two_heads();
  c.hooks["standby"] = {p};
  auto st = HookDispatcher::check(c);
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().code == Errc::Insecure);
  CHECK(st.error().message == "hooks.standby: hook '" + p + "': writable by group or others (mode 0775)");
  REQUIRE(::chmod(p.c_str(), 0755) == 0);
  CHECK(HookDispatcher::check(c).ok());
}

TEST_CASE("HeadEventSink passes state changes and alarms and suppresses repeats beyond a burst") {
  config::Config c = smha::test::two_heads();
  boost::asio::io_context io;
  SteadyClock clock;
  os::AsioScheduler sched(io, clock);
  HookDispatcher hooks(sched, posix_processes(io), c);
  LogEventSink log(1000);
  int changed = 0;
  HeadEventSink sink(log, hooks, [] { return HeadEventSink::Snapshot{"STANDBY", 10, "head02"}; },
                       [&] { ++changed; });
  const TimePoint t0{};
  const sm::RecordEvent lf{sm::EventKind::LocalFailure, "OpenSM exited", "role recovering"};
  for (int i = 0; i < 10; ++i) {
    sink.event(lf, t0 + std::chrono::seconds(i));
    sink.error(Error{Errc::Failed, "OpenSM supervision failed"}, t0 + std::chrono::seconds(i));
    sink.event({sm::EventKind::StateChanged, "STANDBY->MASTER", ""}, t0 + std::chrono::seconds(i));
  }
  sink.alarm({AlarmKind::NoMaster, "x"}, t0);
  auto count = [&](const std::string& kind) {
    return std::count_if(log.events().begin(), log.events().end(),
                         [&](const EventRecord& e) { return e.kind == kind; });
  };
  CHECK(count("local_failure") == HeadEventSink::kRepeatBurst);
  CHECK(count("error") == HeadEventSink::kRepeatBurst);
  CHECK(count("transition") == 10);  // never suppressed
  CHECK(count("alarm") == 1);
  CHECK(sink.suppressed_total() == 2 * (10 - HeadEventSink::kRepeatBurst));

  // After the window: passed on again, saying how many were suppressed.
  sink.event(lf, t0 + HeadEventSink::kRepeatWindow + std::chrono::seconds(1));
  CHECK(count("local_failure") == HeadEventSink::kRepeatBurst + 1);
  CHECK(log.events().back().evidence == "role recovering [7 repeats suppressed]");
}

TEST_CASE("HeadEventSink: a transition's reason is its own step's cause or unknown, never an old event") {
  TempDir dir;
  const std::string out = dir.path() + "/out";
  const std::string hook = dir.path() + "/m";
  std::ofstream(hook) << "#!/bin/sh\necho \"$1 $2 reason=$SMHA_REASON\" >> " << out << "\n";
  REQUIRE(::chmod(hook.c_str(), 0755) == 0);
  config::Config c = smha::test::two_heads();
  c.hooks["master"] = {hook};
  c.hooks["standby"] = {hook};
  boost::asio::io_context io;
  SteadyClock clock;
  os::AsioScheduler sched(io, clock);
  std::vector<platform::HookResult> results;
  HookDispatcher hooks(sched, posix_processes(io), c, [&](const platform::HookResult& r) { results.push_back(r); });
  LogEventSink log(1000);
  HeadEventSink sink(log, hooks, [] { return HeadEventSink::Snapshot{"MASTER", 11, "head02"}; }, [] {});
  const TimePoint t0{};
  // A peer_route event, then 44 s later the local SM becomes MASTER in a step
  // that recorded nothing else (the agent leaves the evidence empty).
  sink.event({sm::EventKind::PeerRoute, "head01 (0x10) \"head01\": found", "lid 1, dr 0,1"}, t0);
  sink.event({sm::EventKind::StateChanged, "STANDBY->MASTER", "", {}, SmState::Standby, SmState::Master},
             t0 + std::chrono::seconds(44));
  sink.hook({"transition", SmState::Master, SmState::Standby, 11}, t0 + std::chrono::seconds(44));
  CHECK(log.events().back().kind == "transition");
  CHECK(log.events().back().evidence == "unknown");
  // With the cause of its step.
  sink.event({sm::EventKind::StateChanged, "MASTER->STANDBY", "handover_done: head01 answers MASTER", {},
              SmState::Master, SmState::Standby},
             t0 + std::chrono::seconds(50));
  sink.hook({"transition", SmState::Standby, SmState::Master, 10}, t0 + std::chrono::seconds(50));
  CHECK(log.events().back().evidence == "handover_done: head01 answers MASTER");
  REQUIRE(log.last_transition());
  CHECK(log.last_transition()->evidence == "handover_done: head01 answers MASTER");
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (results.size() < 2 && std::chrono::steady_clock::now() < deadline) io.run_for(20ms);
  REQUIRE(results.size() == 2);
  CHECK(slurp(out) == "TRANSITION MASTER reason=unknown\nTRANSITION STANDBY reason=handover_done: head01 answers MASTER\n");
}

TEST_CASE("smhad --check-config also refuses an insecure hook") {
  TempDir dir;
  const std::string hook = dir.path() + "/hook";
  std::ofstream(hook) << "#!/bin/sh\n";
  REQUIRE(::chmod(hook.c_str(), 0757) == 0);
  const std::string yaml = dir.path() + "/smha.yaml";
  std::ofstream(yaml) << "node:\n  name: head01\n  port_guid: 0x10\nsm_key: 0x5\nsa_key: 0x6\n"
                      << "peers:\n  - name: head02\n    port_guid: 0x20\n"
                      << "opensm:\n  conf_path: " << dir.path() << "/opensm.conf\n"
                      << "hooks:\n  master: " << hook << "\n";
  opensm::ExecOpensmRunner runner;
  std::ostringstream out, err;
  CHECK(run_check_config(yaml, runner, out, err) == 1);
  CHECK(out.str().empty());
  CHECK(err.str() == "error: " + yaml + ": hooks.master: hook '" + hook +
                         "': writable by group or others (mode 0757)\n" + yaml + ": 1 error(s)\n");
  REQUIRE(::chmod(hook.c_str(), 0755) == 0);
  std::ostringstream out2, err2;
  CHECK(run_check_config(yaml, runner, out2, err2) == 0);
  CHECK(out2.str().find(yaml + ": OK for OpenSM") == 0);
}

// One run shows every problem of every stage (OpenSM's keys, the hooks, the
// state_dir, the HA policy), not only the first stage's.
TEST_CASE("smhad --check-config reports the problems of every stage in one run") {
  TempDir dir;
  const std::string hook = dir.path() + "/hook";
  std::ofstream(hook) << "#!/bin/sh\n";
  REQUIRE(::chmod(hook.c_str(), 0757) == 0);
  const std::string yaml = dir.path() + "/smha.yaml";
  std::ofstream(yaml) << "node:\n  name: head01\n  port_guid: 0x10\nsm_key: 0x5\n"
                      << "state_dir: /proc/smha-no-such-dir\n"
                      << "opensm:\n  conf_path: " << dir.path() << "/opensm.conf\n"
                      << "  extra:\n    no_such_key: 1\n    no_clients_rereg: TRUE\n"
                      << "hooks:\n  master: " << hook << "\n";
  opensm::ExecOpensmRunner runner;
  std::ostringstream out, err;
  CHECK(run_check_config(yaml, runner, out, err) == 1);
  CHECK(out.str().empty());
  const std::string e = err.str();
  INFO(e);
  CHECK(e.find("warning: " + yaml + ":10:5: opensm.extra.no_clients_rereg: is TRUE") == 0);
  CHECK(e.find("error: " + yaml + ":9:5: opensm.extra.no_such_key: opensm.conf key 'no_such_key' is not known") !=
        std::string::npos);
  CHECK(e.find("Unrecognized token\")") == std::string::npos);  // the same key once
  CHECK(e.find("error: " + yaml + ": hooks.master: hook '" + hook + "': writable by group or others") !=
        std::string::npos);
  CHECK(e.find("error: " + yaml + ": state_dir /proc/smha-no-such-dir is not usable: ") != std::string::npos);
  CHECK(e.find("error: " + yaml + ": peers: HA policy: peers: at least one other head is needed\n") !=
        std::string::npos);
  CHECK(e.find(yaml + ": 4 error(s)\n") != std::string::npos);
}

// Start-up's policy check (map_config) runs in --check-config too: a file with
// no peer loads, and smhad would refuse to start with it.
TEST_CASE("smhad --check-config refuses what start-up refuses: no peer") {
  TempDir dir;
  const std::string yaml = dir.path() + "/smha.yaml";
  std::ofstream(yaml) << "node:\n  name: head01\n  port_guid: 0x10\nsm_key: 0x5\nsa_key: 0x6\n"
                      << "opensm:\n  conf_path: " << dir.path() << "/opensm.conf\n";
  opensm::ExecOpensmRunner runner;
  std::ostringstream out, err;
  CHECK(run_check_config(yaml, runner, out, err) == 1);
  CHECK(out.str().empty());
  CHECK(err.str() == "error: " + yaml + ": peers: HA policy: peers: at least one other head is needed\n" + yaml +
                         ": 1 error(s)\n");
}

namespace {

// A head's files: its YAML, and certificates from scripts/make-peer-certs.
struct TlsHead {
  std::filesystem::path dir;
  TlsHead() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "smha-tls-XXXXXX").string();
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    dir = tmpl;
    const std::string mk = std::string(SMHA_SOURCE_DIR) + "/scripts/make-peer-certs " + (dir / "pki").string();
    REQUIRE(std::system((mk + " head01").c_str()) == 0);
  }
  ~TlsHead() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  std::string pki(const std::string& f) const { return (dir / "pki" / f).string(); }
  std::string write(const std::string& certificate, const std::string& key) const {
    const std::string path = (dir / "smha.yaml").string();
    std::ofstream(path) << "node:\n  name: head01\n  port_guid: 0x10\nsm_key: 0x5\nsa_key: 0x6\n"
                        << "peers:\n  - name: head02\n    port_guid: 0x20\n    address: 10.0.0.2:7390\n"
                        << "state_dir: " << (dir / "state").string() << "\n"
                        << "opensm:\n  conf_path: " << (dir / "opensm.conf").string() << "\n"
                        << "continuity:\n  listen: 127.0.0.1:7390\n  certificate: " << certificate
                        << "\n  private_key: " << key << "\n  ca: " << pki("ca.pem") << "\n";
    return path;
  }
};

int check_config(const std::string& path, std::string& err) {
  opensm::ExecOpensmRunner runner;
  std::ostringstream out, e;
  const int rc = run_check_config(path, runner, out, e, {});
  err = e.str();
  return rc;
}

}  // namespace

TEST_CASE("smhad --check-config refuses the TLS files start-up refuses: a missing certificate, a key others can read") {
  TlsHead h;
  std::string err;
  const std::string good = h.write(h.pki("head01.pem"), h.pki("head01.key"));
  const int rc = check_config(good, err);
  INFO(err);
  REQUIRE(rc == 0);

  const std::string missing = h.write(h.pki("nope.pem"), h.pki("head01.key"));
  CHECK(check_config(missing, err) == 1);
  CHECK_THAT(err, Catch::Contains("error: " + missing + ": continuity.certificate " + h.pki("nope.pem") +
                                  ": No such file or directory\n"));

  REQUIRE(::chmod(h.pki("head01.key").c_str(), 0644) == 0);
  const std::string readable = h.write(h.pki("head01.pem"), h.pki("head01.key"));
  CHECK(check_config(readable, err) == 1);
  CHECK_THAT(err, Catch::Contains("error: " + readable + ": continuity.private_key " + h.pki("head01.key") +
                                  " can be read by others (mode 420 octal 644); make it 0600\n"));
}

TEST_CASE("route_warnings: a GUID on no port, a lid or dr_path discovery contradicts") {
  auto c = smha::test::two_heads();
  c.peers[0].dr_path = DrPath{{1, 3, 1}};
  fabric::DiscoveryResult r;
  r.nodes = 6;
  r.ports = 18;
  fabric::ResolvedPort p;
  p.port_guid = Guid{0x20};
  p.path = DrPath{{1, 5, 1}};
  p.lid = Lid{9};
  p.lid_known = true;
  r.found[Guid{0x20}] = p;
  r.missing = {Guid{0x30}};
  auto w = route_warnings(c, r);
  REQUIRE(w.size() == 3);
  CHECK(w[0].key_path == "peers[0].lid");
  CHECK(w[0].message == "peer head02 is at LID 9, not 7 (directed-route discovery)");
  CHECK(w[1].key_path == "peers[0].dr_path");
  CHECK(w[1].message == "peer head02 is at directed route 0,1,5,1, not 0,1,3,1 (directed-route discovery)");
  CHECK(w[2].key_path == "peers[1].port_guid");
  CHECK(w[2].message == "peer head03 (0x0000000000000030) is on no port of the fabric: not found "
                        "(searched 6 nodes, 18 ports)");
  CHECK(w[2].to_string().find("t.yaml:") == 0);
  // What discovery confirms is not warned about.
  r.found[Guid{0x20}].lid = Lid{7};
  r.found[Guid{0x20}].path = DrPath{{1, 3, 1}};
  r.found[Guid{0x30}] = p;
  CHECK(route_warnings(c, r).empty());
}

TEST_CASE("smhad --check-config prints route warnings when the fabric answers, and still passes") {
  TempDir dir;
  const std::string yaml = dir.path() + "/smha.yaml";
  std::ofstream(yaml) << "node:\n  name: head01\n  port_guid: 0x10\nsm_key: 0x5\nsa_key: 0x6\n"
                      << "peers:\n  - name: head02\n    port_guid: 0x20\n"
                      << "opensm:\n  conf_path: " << dir.path() << "/opensm.conf\n";
  opensm::ExecOpensmRunner runner;
  std::ostringstream out, err;
  RouteProbe none_found = [](const config::Config&) {
    fabric::DiscoveryResult r;
    r.nodes = 3;
    r.ports = 4;
    r.missing = {Guid{0x20}};
    return std::optional<fabric::DiscoveryResult>(r);
  };
  CHECK(run_check_config(yaml, runner, out, err, none_found) == 0);
  CHECK(out.str().find(yaml + ": OK for OpenSM") == 0);
  CHECK(err.str() == "warning: " + yaml + ":8:16: peers[0].port_guid: peer head02 (0x0000000000000020) is on no "
                     "port of the fabric: not found (searched 3 nodes, 4 ports)\n");
  // No fabric: nothing checked, nothing printed.
  std::ostringstream out2, err2;
  CHECK(run_check_config(yaml, runner, out2, err2, [](const config::Config&) {
          return std::optional<fabric::DiscoveryResult>();
        }) == 0);
  CHECK(err2.str().empty());
}

TEST_CASE("status shows the guid2lid smhad keeps (LID continuity), or that it keeps none") {
  auto j = nlohmann::json::parse(R"({"lid_continuity":{"enabled":true,"honor_guid2lid_file":true,
    "path":"/var/cache/opensm/guid2lid","state":"writing","entries":6,"kept":2,"writes":3,
    "last_written_age_s":41.2,"file_skipped":1,"last_error":null,
    "rejected":{"bad_lid":1,"duplicate_lid":2,"conflict":0}}})");
  std::string t = render_status_text(j);
  CHECK(t.find(" guid2lid: 6 entries (2 kept for ports not seen now), writing, written 3x, last 41s ago; "
               "/var/cache/opensm/guid2lid\n"
               "           refused: 1 bad LID, 2 duplicate LID, 0 conflicting; file records skipped 1\n") !=
        std::string::npos);
  j["lid_continuity"]["state"] = "error";
  j["lid_continuity"]["last_error"] = "write /var/cache/opensm/guid2lid: No space left on device";
  t = render_status_text(j);
  CHECK(t.find("file records skipped 1; error: write /var/cache/opensm/guid2lid: No space left on device\n") !=
        std::string::npos);
  t = render_status_text(nlohmann::json::parse(R"({"lid_continuity":{"enabled":false,"honor_guid2lid_file":false}})"));
  CHECK(t.find(" guid2lid: not kept by smhad (honor_guid2lid_file FALSE)\n") != std::string::npos);
}
