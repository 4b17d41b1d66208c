// lib/service pieces without a fabric: AsioScheduler, map_config, LogEventSink,
// RecordingTransport's hold, and the human status layout.
#include <catch2/catch.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include "smha/service/service.hpp"

using namespace smha;
using namespace smha::service;
using namespace std::chrono_literals;

namespace {

config::Config two_heads() {
  auto r = config::load_config_from_string(
      "node:\n  name: head01\n  port_guid: 0x10\n"
      "peers:\n  - name: head02\n    port_guid: 0x20\n    lid: 7\n  - name: head03\n    port_guid: 0x30\n"
      "sm_priority: 15\nfailover:\n  poll_interval_ms: 50\n  misses_before_takeover: 2\n  failback: preempt\n",
      "t.yaml");
  INFO(r.error_text());
  REQUIRE(r.ok());
  return r.value();
}

// A transport that answers every Get with a fixed SMInfo and every Set with ok.
class FakeTransport final : public mad::MadTransport {
 public:
  explicit FakeTransport(boost::asio::io_context& io) : io_(io) {}
  void get_sminfo(const mad::Target&, const mad::RequestOptions&, mad::SmInfoCallback done) override {
    boost::asio::post(io_, [done, info = info] { done(mad::SmInfoReply{info, 3ms, 1}); });
  }
  void set_sminfo(const mad::Target&, SmInfoModifier, const SmInfo& p, const mad::RequestOptions&,
                  mad::SmInfoCallback done) override {
    ++sets;
    boost::asio::post(io_, [done, p] { done(mad::SmInfoReply{p, 1ms, 1}); });
  }
  // Answers PortInfo with `port` while set, else fails with a timeout.
  void get_port_info(const mad::Target&, std::uint8_t, const mad::RequestOptions&,
                     mad::PortInfoCallback done) override {
    boost::asio::post(io_, [done, port = port] {
      if (port) done(mad::PortInfoReply{*port, 1ms, 1});
      else done(make_error(mad::kErrTimeout, "no answer"));
    });
  }
  SmInfo info{Guid{0x20}, 0, 42, 5, SmState::Standby};
  std::optional<mad::PortInfo> port;
  int sets = 0;

 private:
  boost::asio::io_context& io_;
};

}  // namespace

TEST_CASE("AsioScheduler fires timers in time order and not after cancel") {
  boost::asio::io_context io;
  SteadyClock clock;
  AsioScheduler sched(io, clock);
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

TEST_CASE("map_config maps the failover policy and polls only peers with a LID") {
  std::vector<std::string> unaddressed;
  auto r = map_config(two_heads(), Guid{0x10}, &unaddressed);
  REQUIRE(r.ok());
  const auto& a = r.value();
  CHECK(a.policy.node_name == "head01");
  CHECK(a.policy.own_guid == Guid{0x10});
  REQUIRE(a.policy.peers.size() == 2);
  CHECK(a.policy.peers[1].name == "head03");
  CHECK(a.policy.poll_interval == 50ms);
  CHECK(a.policy.misses == 2);
  CHECK(a.policy.failback == sm::FailbackMode::Preempt);
  CHECK(a.policy.base_priority == 15);  // all 15: standby renders 13, master 14, claim 15
  CHECK(sm::priorities(a.policy).master == 14);
  CHECK_FALSE(a.policy.peers[0].priority.has_value());  // not given: the same as ours
  CHECK(a.policy.hang_timeout == 150ms);                 // (misses + 1) x poll interval
  REQUIRE(a.peers.size() == 1);
  CHECK(a.peers[0].guid == Guid{0x20});
  CHECK(a.peers[0].lid == Lid{7});
  CHECK(unaddressed == std::vector<std::string>{"head03"});
}

TEST_CASE("map_config passes each peer's configured priority") {
  auto c = two_heads();
  c.sm_priority = 15;
  c.peers[0].sm_priority = 14;
  auto r = map_config(c, Guid{0x10});
  REQUIRE(r.ok());
  REQUIRE(r.value().policy.peers[0].priority.has_value());
  CHECK(*r.value().policy.peers[0].priority == 14);
  const auto t = sm::priorities(r.value().policy);
  CHECK(t.standby == 13);
  CHECK(t.standby_for(Guid{0x20}) == 12);
}

TEST_CASE("map_config refuses a policy the engine would not accept") {
  auto c = two_heads();
  c.peers.clear();
  auto r = map_config(c, Guid{0x10});
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == "policy");
}

TEST_CASE("LogEventSink names each transition with the event that caused it and tracks alarms") {
  LogEventSink sink(3);
  sink.event({sm::EventKind::TakeoverStarted, "master head02 silent", "3 rounds"}, TimePoint{});
  sink.event({sm::EventKind::StateChanged, "STANDBY->MASTER", ""}, TimePoint{});
  REQUIRE(sink.last_transition());
  CHECK(sink.last_transition()->reason == "STANDBY->MASTER");
  CHECK(sink.last_transition()->evidence == "takeover_started: master head02 silent");
  sink.alarm({sm::AlarmKind::NoMaster, "x"}, TimePoint{});
  CHECK(sink.alarms().size() == 1);
  sink.clear({sm::AlarmKind::NoMaster}, TimePoint{});
  CHECK(sink.alarms().empty());
  CHECK(sink.events().size() == 3);  // bounded
  CHECK(sink.events().back().kind == "alarm_cleared");
  CHECK(sink.events().front().seq == 2);
}

TEST_CASE("RecordingTransport remembers answers per SM and refuses Sets during a hold") {
  boost::asio::io_context io;
  SteadyClock clock;
  FakeTransport inner(io);
  HoldState hold;
  RecordingTransport t(inner, clock, hold, false);
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

  hold.held = true;
  std::optional<Error> err;
  t.set_sminfo(mad::Target{DrPath{}}, SmInfoModifier::Discover, SmInfo{}, {},
               [&](Result<mad::SmInfoReply> r) { if (!r) err = r.error(); });
  CHECK(err);
  CHECK(err->code == "hold");
  CHECK(inner.sets == 0);
  hold.held = false;
  t.set_sminfo(mad::Target{DrPath{}}, SmInfoModifier::Discover, SmInfo{}, {}, [](Result<mad::SmInfoReply>) {});
  io.run();
  CHECK(inner.sets == 1);
}

TEST_CASE("RecordingTransport keeps the last PortInfo answer per port across a silent query") {
  boost::asio::io_context io;
  SteadyClock clock;
  FakeTransport inner(io);
  HoldState hold;
  RecordingTransport t(inner, clock, hold, true);  // read-only: Gets still pass
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
    "node":"head01","role":"Master","observe":false,
    "local":{"state":"MASTER","priority":14,"guid":"0x10","lid":1,"act_count":99,"last_poll_age_s":0.05,
             "port_state":"DOWN","port_state_source":"smp","port_state_age_s":0.02},
    "opensm":{"supervisor":"running","pid":1234,"uptime_s":12.5,"restarts":1,"adopted":true,"reason":""},
    "peers":[{"name":"head02","state":"STANDBY","priority":13,"guid":"0x20","lid":7,"rtt_ms":0.4,"last_answer_age_s":0.1}],
    "policy":{"poll_interval_ms":100,"misses":3,"failback":"sticky","base_priority":13},
    "alarms":[{"kind":"two_masters","detail":"x"}],
    "hold":{"held":false},
    "last_transition":{"reason":"STANDBY->MASTER","evidence":"takeover_done","time":"T"}})");
  const std::string t = render_status_text(j);
  CHECK(t.find("smhad head01") != std::string::npos);
  CHECK(t.find("Role: Master") != std::string::npos);
  CHECK(t.find("Local SM: MASTER  prio 14") != std::string::npos);
  CHECK(t.find("Port: DOWN  (smp, PortInfo 0.02s ago)") != std::string::npos);
  CHECK(t.find("pid 1234") != std::string::npos);
  CHECK(t.find("(adopted)") != std::string::npos);
  CHECK(t.find("head02  STANDBY  prio 13") != std::string::npos);
  CHECK(t.find("two_masters") != std::string::npos);
  CHECK(t.find("STANDBY->MASTER (takeover_done)") != std::string::npos);
}
