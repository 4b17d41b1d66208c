// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// Agent and SupervisedOpensmControl against scripted fakes (no simulated fabric).
#include <catch2/catch.hpp>

#include <algorithm>
#include <csignal>
#include <map>
#include <set>

#include "smha/agent/agent.hpp"
#include "smha/agent/supervised_opensm_control.hpp"
#include "manual_scheduler.hpp"

using namespace smha;
using namespace smha::agent;

using smha::test::ManualScheduler;

namespace {

// Scripted SMInfo answers per target; Sets are recorded. Answers arrive after 1 ms
// (or `delay[key]`, if that is within the request's timeout); no answer is
// silence until the timeout, or a refusal after 1 ms for keys in `refuse`.
struct FakeTransport : mad::MadTransport {
  ManualScheduler& s;
  std::map<std::string, std::optional<SmInfo>> answers;  // key: "dr:0", "lid:2", "dr:0,1,2"
  std::map<std::string, Duration> delay;
  std::map<std::string, Duration> late;  // a timeout reported this much after its deadline
  std::set<std::string> refuse;
  std::vector<std::pair<std::string, SmInfoModifier>> sets;
  int gets = 0;
  explicit FakeTransport(ManualScheduler& sch) : s(sch) {}
  void submit(mad::Request r, mad::ReplyCallback done) override {
    std::visit([&](const auto& q) { on(q, r.opts, std::move(done)); }, r.query);
  }
  static std::string key(const mad::Target& t) {
    if (auto l = std::get_if<Lid>(&t)) return "lid:" + std::to_string(l->value);
    return "dr:" + to_string(std::get<DrPath>(t));
  }
  void on(const mad::SmInfoGet& q, const mad::RequestOptions& o, mad::ReplyCallback done) {
    const mad::Target& t = q.target;
    ++gets;
    const auto k = key(t);
    auto a = answers[k];
    const Duration d = delay.count(k) ? delay[k] : milliseconds(1);
    const Duration limit = o.timeout * (o.retries + 1);
    if (a && d <= limit) {
      s.schedule_at(s.now() + d, [a, d, done] { done(mad::SmInfoReply{*a, d, 1}); });
    } else if (!a && refuse.count(k)) {
      s.schedule_at(s.now() + milliseconds(1), [done] { done(mad::mad_status_error(0x000c, "0x000c")); });
    } else {
      const Duration extra = late.count(k) ? late[k] : Duration{};
      s.schedule_at(s.now() + limit + extra, [done] { done(make_error(mad::kErrTimeout, "timeout")); });
    }
  }
  void on(const mad::SmInfoSet& q, const mad::RequestOptions&, mad::ReplyCallback done) {
    const mad::Target& t = q.target;
    const SmInfoModifier mod = q.mod;
    const SmInfo& payload = q.payload;
    sets.emplace_back(key(t), mod);
    CHECK(payload.state == SmState::Master);
    s.schedule_at(s.now() + milliseconds(1), [done] { done(mad::SmInfoReply{}); });
  }
  // PortInfo of our own port (DR 0): `port_state` after 1 ms, or silence until
  // the request's timeout x attempts when unset. Any other target is a peer's
  // switch port, keyed "dr:0,1#3" (switch path # port): `switch_ports`
  // (nullopt: silence), ACTIVE when absent.
  std::optional<mad::PortState> port_state;
  Lid port_sm_lid;  // our port's MasterSMLID
  std::vector<std::pair<std::uint8_t, mad::RequestOptions>> port_queries;
  std::map<std::string, std::optional<mad::PortState>> switch_ports;
  std::vector<std::string> switch_queries;
  void on(const mad::PortInfoGet& q, const mad::RequestOptions& o, mad::ReplyCallback done) {
    const mad::Target& t = q.target;
    const std::uint8_t port = q.port;
    std::optional<mad::PortState> st;
    if (key(t) == "dr:0") {
      port_queries.emplace_back(port, o);
      st = port_state;
    } else {
      const auto k = key(t) + "#" + std::to_string(port);
      switch_queries.push_back(k);
      st = switch_ports.count(k) ? switch_ports[k] : mad::PortState::Active;
    }
    if (st) {
      mad::PortInfo pi;
      pi.local_port = port;
      pi.state = *st;
      if (key(t) == "dr:0") pi.sm_lid = port_sm_lid;
      s.schedule_at(s.now() + milliseconds(1), [pi, done] { done(mad::PortInfoReply{pi, milliseconds(1), 1}); });
    } else {
      s.schedule_at(s.now() + o.timeout * (o.retries + 1),
                    [done] { done(make_error(mad::kErrTimeout, "timeout")); });
    }
  }
  // NodeInfo / NodeDescription per target after 1 ms; silence for the others.
  std::map<std::string, mad::NodeInfo> node_infos;
  std::map<std::string, std::string> descriptions;
  std::vector<std::string> node_queries;  // "info lid:7", "desc lid:7"
  void on(const mad::NodeInfoGet& q, const mad::RequestOptions& o, mad::ReplyCallback done) {
    const mad::Target& t = q.target;
    node_queries.push_back("info " + key(t));
    if (auto it = node_infos.find(key(t)); it != node_infos.end()) {
      const mad::NodeInfo n = it->second;
      s.schedule_at(s.now() + milliseconds(1), [n, done] { done(mad::NodeInfoReply{n, milliseconds(1), 1}); });
      return;
    }
    s.schedule_at(s.now() + o.timeout * (o.retries + 1),
                  [done] { done(make_error(mad::kErrTimeout, "timeout")); });
  }
  void on(const mad::NodeDescriptionGet& q, const mad::RequestOptions& o, mad::ReplyCallback done) {
    const mad::Target& t = q.target;
    node_queries.push_back("desc " + key(t));
    if (auto it = descriptions.find(key(t)); it != descriptions.end()) {
      const std::string d = it->second;
      s.schedule_at(s.now() + milliseconds(1), [d, done] { done(mad::NodeDescriptionReply{d, milliseconds(1), 1}); });
      return;
    }
    s.schedule_at(s.now() + o.timeout * (o.retries + 1),
                  [done] { done(make_error(mad::kErrTimeout, "timeout")); });
  }
  // No ServiceRecords here: silence (the drift check's own tests are in test_drift.cpp).
  std::uint64_t service_record_requests = 0;
  void on(const mad::ServiceRecordSet&, const mad::RequestOptions& o, mad::ReplyCallback done) {
    silent_sr(o, std::move(done));
  }
  void on(const mad::ServiceRecordGet&, const mad::RequestOptions& o, mad::ReplyCallback done) {
    silent_sr(o, std::move(done));
  }
  void on(const mad::ServiceRecordDelete&, const mad::RequestOptions& o, mad::ReplyCallback done) {
    silent_sr(o, std::move(done));
  }
  std::uint64_t port_counter_requests = 0;
  void on(const mad::PortCountersGet&, const mad::RequestOptions& o, mad::ReplyCallback done) {
    ++port_counter_requests;
    s.schedule_at(s.now() + o.timeout * (o.retries + 1), [done] { done(make_error(mad::kErrTimeout, "timeout")); });
  }
  void on(const mad::LftTopGet&, const mad::RequestOptions&, mad::ReplyCallback done) {
    s.schedule_at(s.now() + milliseconds(1), [done] { done(mad::LftTopReply{0, milliseconds(1), 1}); });
  }
  // Silence for the rest: the LFT blocks, the multicast members.
  template <class Q>
  void on(const Q&, const mad::RequestOptions& o, mad::ReplyCallback done) {
    s.schedule_at(s.now() + o.timeout * (o.retries + 1), [done] { done(make_error(mad::kErrTimeout, "timeout")); });
  }
  void silent_sr(const mad::RequestOptions& o, mad::ReplyCallback done) {
    ++service_record_requests;
    s.schedule_at(s.now() + o.timeout * (o.retries + 1),
                  [done] { done(make_error(mad::kErrTimeout, "timeout")); });
  }
  // The SA's SMInfoRecord table after 1 ms, or silence when unset.
  std::optional<Result<mad::SmInfoRecordTable>> sa_table;
  std::vector<Lid> sa_queries;
  void on(const mad::SmInfoRecordsGet& q, const mad::RequestOptions& o, mad::ReplyCallback done) {
    sa_queries.push_back(q.sa_lid);
    answer_table<mad::SmInfoRecordsReply>(sa_table, o, std::move(done));
  }
  // `table` (or its error) after 1 ms, or silence until the timeout x attempts when unset.
  template <typename Reply, typename Table, typename Callback>
  void answer_table(const std::optional<Result<Table>>& table, const mad::RequestOptions& o, Callback done) {
    if (!table) {
      s.schedule_at(s.now() + o.timeout * (o.retries + 1),
                    [done] { done(make_error(mad::kErrTimeout, "timeout")); });
      return;
    }
    auto t = *table;
    s.schedule_at(s.now() + milliseconds(1), [t, done] {
      if (!t) return done(t.error());
      done(Reply{*t, milliseconds(1), 1});
    });
  }
  // The SA's IsSM PortInfoRecord table after 1 ms, or silence when unset.
  std::optional<Result<mad::PortInfoRecordTable>> pir_table;
  std::vector<Lid> pir_queries;
  void on(const mad::IsSmPortRecordsGet& q, const mad::RequestOptions& o, mad::ReplyCallback done) {
    pir_queries.push_back(q.sa_lid);
    answer_table<mad::PortInfoRecordsReply>(pir_table, o, std::move(done));
  }
};

struct FakeControl : OpensmControl {
  sm::ProcessState st = sm::ProcessState::Running;
  std::vector<std::string> calls;
  ExitHandler h;
  Status start(std::uint8_t p) override { calls.push_back("start " + std::to_string(p)); st = sm::ProcessState::Running; return Status::Ok(); }
  Status stop(bool f) override { calls.push_back(f ? "kill" : "stop"); st = sm::ProcessState::Stopped; return Status::Ok(); }
  Status restart(std::uint8_t p, bool f) override { calls.push_back("restart " + std::to_string(p) + (f ? " kill" : "")); return Status::Ok(); }
  Status set_priority(std::uint8_t p) override { calls.push_back("prio " + std::to_string(p)); return Status::Ok(); }
  sm::ProcessState state() const override { return st; }
  void set_exit_handler(ExitHandler e) override { h = std::move(e); }
};

struct NullSink : EventSink {
  std::vector<std::string> events;
  std::vector<std::string> transitions;  // "STANDBY->MASTER because <evidence>"
  void event(const sm::RecordEvent& e, TimePoint) override {
    events.emplace_back(sm::to_string(e.kind));
    if (e.kind == sm::EventKind::StateChanged) transitions.push_back(e.reason + " because " + e.evidence);
  }
  void alarm(const RaiseAlarm&, TimePoint) override {}
  void clear(const ClearAlarm&, TimePoint) override {}
  void hook(const sm::RunHook&, TimePoint) override {}
  void error(const Error&, TimePoint) override {}
  void takeover_report(const fabric::TakeoverReport&, TimePoint) override {}
  std::vector<std::string> roles;  // "standby->taking_over: master lost"
  void role_changed(const sm::RoleChange& r, TimePoint) override {
    roles.push_back(std::string(sm::to_string(r.from)) + "->" + std::string(sm::to_string(r.to)) + ": " + r.why);
  }
};

SmInfo sminfo(Guid g, SmState s, std::uint8_t prio) {
  SmInfo i;
  i.guid = g;
  i.state = s;
  i.priority = prio;
  i.sm_key = 1;
  return i;
}

AgentConfig agent_config() {
  AgentConfig c;
  c.policy.node_name = "head02";
  c.policy.own_guid = Guid{0x20};
  c.policy.peers = {{"head01", Guid{0x10}}};
  c.policy.start_grace = milliseconds(200);
  c.peers = {{Guid{0x10}, Lid{1}, DrPath{{1, 1}}}};
  return c;
}

// Our SM (head02, 0x20) answers MASTER at 11; head01 (0x10) STANDBY at 10 on
// LID 1 and DR 0,1,1.
struct MasterBesideStandby {
  ManualScheduler s;
  FakeTransport t{s};
  FakeControl ctl;
  NullSink sink;
  MasterBesideStandby() {
    t.answers["dr:0"] = sminfo(Guid{0x20}, SmState::Master, 11);
    t.answers["lid:1"] = sminfo(Guid{0x10}, SmState::Standby, 10);
    t.answers["dr:0,1,1"] = sminfo(Guid{0x10}, SmState::Standby, 10);
  }
};

}  // namespace

TEST_CASE("Agent polls local (DR 0) and peer (LID + DR) every interval and sends DISCOVER only to the local SM",
          "[agent]") {
  ManualScheduler s;
  FakeTransport t(s);
  FakeControl ctl;
  NullSink sink;
  t.answers["dr:0"] = sminfo(Guid{0x20}, SmState::Standby, 10);
  t.answers["lid:1"] = sminfo(Guid{0x10}, SmState::Master, 11);
  t.answers["dr:0,1,1"] = sminfo(Guid{0x10}, SmState::Master, 11);
  Agent a(agent_config(), s, t, ctl, sink);
  a.start();
  s.run_until(s.now() + seconds(1));
  CHECK(a.rounds() == 10);
  CHECK(t.gets == 33);  // 10 complete rounds + the one that starts at t = 1 s
  CHECK(t.sets.empty());
  CHECK(a.status().role == sm::Role::Standby);
  // The master goes silent (hung): both peer paths time out. Rounds come back to
  // back, but the DISCOVER waits for the fence by the master's own smhad:
  // hang_timeout 400 + 2 polls + query window 50 ms after its last answer.
  t.answers["lid:1"].reset();
  t.answers["dr:0,1,1"].reset();
  s.run_until(s.now() + milliseconds(550));
  CHECK(t.sets.empty());
  s.run_until(s.now() + milliseconds(250));
  REQUIRE(t.sets.size() == 1);
  CHECK(t.sets[0].first == "dr:0");
  CHECK(t.sets[0].second == SmInfoModifier::Discover);
  CHECK(a.status().role == sm::Role::TakingOver);
  CHECK(sink.roles == std::vector<std::string>{"init->standby: smhad start: adopted the running OpenSM, STANDBY",
                                               "standby->taking_over: master lost"});
  a.stop();
  const auto gets = t.gets;
  s.run_until(s.now() + seconds(1));
  CHECK(t.gets == gets);  // stopped: no more polls
}

TEST_CASE("Agent: a state change carries the cause from its own step, never an older event", "[agent]") {
  ManualScheduler s;
  FakeTransport t(s);
  FakeControl ctl;
  NullSink sink;
  t.answers["dr:0"] = sminfo(Guid{0x20}, SmState::Standby, 10);
  t.answers["lid:1"] = sminfo(Guid{0x10}, SmState::Master, 11);
  t.answers["dr:0,1,1"] = sminfo(Guid{0x10}, SmState::Master, 11);
  Agent a(agent_config(), s, t, ctl, sink);
  a.start();
  s.run_until(s.now() + seconds(1));
  // The master goes silent: takeover_started, DISCOVER; our SM answers
  // MASTER some rounds later: the state change and takeover_done share a step.
  t.answers["lid:1"].reset();
  t.answers["dr:0,1,1"].reset();
  s.run_until(s.now() + milliseconds(800));
  REQUIRE(t.sets.size() == 1);
  CHECK(sink.transitions.empty());
  t.answers["dr:0"] = sminfo(Guid{0x20}, SmState::Master, 11);
  s.run_until(s.now() + milliseconds(300));
  REQUIRE(sink.transitions.size() == 1);
  CHECK(sink.transitions[0] == "STANDBY->MASTER because takeover_done: local SM is MASTER");
  CHECK(a.status().role == sm::Role::Master);
  // head01 is back as MASTER and our SM drops to STANDBY by itself (the
  // engine records nothing in that step): no cause is made up from the
  // takeover events before it.
  t.answers["lid:1"] = sminfo(Guid{0x10}, SmState::Master, 12);
  t.answers["dr:0,1,1"] = sminfo(Guid{0x10}, SmState::Master, 12);
  t.answers["dr:0"] = sminfo(Guid{0x20}, SmState::Standby, 11);
  s.run_until(s.now() + milliseconds(100));
  REQUIRE(sink.transitions.size() == 2);
  CHECK(sink.transitions[1] == "MASTER->STANDBY because ");
}

TEST_CASE("Agent: a master whose queries are refused (no SM bound) is taken over after the rounds",
          "[agent]") {
  ManualScheduler s;
  FakeTransport t(s);
  FakeControl ctl;
  NullSink sink;
  t.answers["dr:0"] = sminfo(Guid{0x20}, SmState::Standby, 10);
  t.answers["lid:1"] = sminfo(Guid{0x10}, SmState::Master, 11);
  t.answers["dr:0,1,1"] = sminfo(Guid{0x10}, SmState::Master, 11);
  t.refuse = {"lid:1", "dr:0,1,1"};
  Agent a(agent_config(), s, t, ctl, sink);
  a.start();
  s.run_until(s.now() + seconds(1));
  t.answers["lid:1"].reset();
  t.answers["dr:0,1,1"].reset();
  // At most one poll interval to the next round, then three rounds of ~1 ms + 10 ms gaps.
  s.run_until(s.now() + milliseconds(150));
  REQUIRE(t.sets.size() == 1);
  CHECK(t.sets[0].second == SmInfoModifier::Discover);
}

TEST_CASE_METHOD(MasterBesideStandby,
                 "Agent: a late answer within the query window counts, no fence of a slow local SM",
                 "[agent]") {
  // 40 ms: past the first attempt's slot (16 ms) and the old 10 ms per-attempt
  // timeout, inside the 50 ms window.
  t.delay["dr:0"] = milliseconds(40);
  Agent a(agent_config(), s, t, ctl, sink);
  bool stopped = false;
  a.set_local_stopped([&] { return stopped; });
  a.start();
  s.run_until(s.now() + seconds(3));
  CHECK(a.status().role == sm::Role::Master);
  CHECK(std::count(ctl.calls.begin(), ctl.calls.end(), "kill") == 0);
  CHECK(std::find(sink.events.begin(), sink.events.end(), "fence_local") == sink.events.end());
  // Beyond the window the local SM is silent but runs (busy): not fenced after
  // misses and hang_timeout, only after unresponsive_timeout (10 s).
  t.delay["dr:0"] = milliseconds(80);
  s.run_until(s.now() + seconds(5));
  CHECK(std::find(sink.events.begin(), sink.events.end(), "fence_local") == sink.events.end());
  s.run_until(s.now() + seconds(6));
  CHECK(std::find(sink.events.begin(), sink.events.end(), "fence_local") != sink.events.end());
}

TEST_CASE_METHOD(MasterBesideStandby,
                 "Agent: a stopped local MASTER is fenced hang_timeout after its last answered query, "
                 "and the standby gets DISCOVER once the kill is confirmed",
                 "[agent]") {
  Agent a(agent_config(), s, t, ctl, sink);
  a.set_local_stopped([&] { return !t.answers["dr:0"]; });  // silent = SIGSTOPped
  const TimePoint t0 = s.now();
  a.start();
  // The round sent at t0 + 1 s is answered (the answer is already on its way);
  // then the SM is silent. Silent rounds come 60 ms apart (50 ms window + 10 ms):
  // sent at +100, +160, +220, +280, and the one after is started at +350
  // instead of +340 so that it ends at +400 = hang_timeout, where the fence is
  // due, instead of at +390 (one round short) with the fence at +450.
  s.run_until(t0 + seconds(1));
  REQUIRE(a.status().role == sm::Role::Master);
  t.answers["dr:0"].reset();
  auto kills = [&] { return std::count(ctl.calls.begin(), ctl.calls.end(), "kill"); };
  s.run_until(t0 + seconds(1) + milliseconds(395));
  CHECK(kills() == 0);
  s.run_until(t0 + seconds(1) + milliseconds(405));
  REQUIRE(kills() == 1);
  CHECK(std::find(sink.events.begin(), sink.events.end(), "fence_local") != sink.events.end());
  // The process may answer until the kill lands: no DISCOVER yet.
  s.run_until(s.now() + milliseconds(20));
  CHECK(t.sets.empty());
  // The supervisor reports the stop done: DISCOVER to the standby (by LID).
  ctl.h();
  s.run_until(s.now() + milliseconds(5));
  REQUIRE(t.sets.size() == 1);
  CHECK(t.sets[0].first == "lid:1");
  CHECK(t.sets[0].second == SmInfoModifier::Discover);
  CHECK(std::find(sink.events.begin(), sink.events.end(), "peer_discover") != sink.events.end());
}

TEST_CASE_METHOD(MasterBesideStandby,
                 "Agent: rounds that end far past their window (smhad stalled) count only after misses - 1",
                 "[agent]") {
  Agent a(agent_config(), s, t, ctl, sink);
  a.set_local_stopped([&] { return !t.answers["dr:0"]; });  // silent = SIGSTOPped
  a.start();
  s.run_until(s.now() + seconds(1));
  // The local SM goes silent and every timeout is seen 200 ms late: each round
  // ends ~250 ms after it began (late). Rounds 1 and 2 are discounted, so the
  // fence (3 counted misses) comes at round 5 (~1.3 s), not round 3 (~0.8 s).
  t.answers["dr:0"].reset();
  t.late["dr:0"] = milliseconds(200);
  s.run_until(s.now() + milliseconds(1000));
  CHECK(std::find(sink.events.begin(), sink.events.end(), "fence_local") == sink.events.end());
  s.run_until(s.now() + milliseconds(1000));
  CHECK(std::find(sink.events.begin(), sink.events.end(), "fence_local") != sink.events.end());
}

TEST_CASE_METHOD(MasterBesideStandby,
                 "Agent without local_port_num sends no PortInfo, a LocalPortFn also replaces the query",
                 "[agent]") {
  t.port_state = mad::PortState::Down;
  {
    Agent a(agent_config(), s, t, ctl, sink);
    a.start();
    s.run_until(s.now() + milliseconds(500));
    CHECK(a.rounds() >= 4);
    CHECK(t.port_queries.empty());
  }
  AgentConfig c = agent_config();
  c.local_port_num = 1;
  Agent a(c, s, t, ctl, sink);
  a.set_local_port([] { return sm::PortState::Up; });
  a.start();
  s.run_until(s.now() + milliseconds(500));
  CHECK(t.port_queries.empty());
  CHECK(a.status().role == sm::Role::Master);
}

TEST_CASE_METHOD(MasterBesideStandby,
                 "Agent asks its own port's PortInfo by DR 0 every round: a master whose port is Down "
                 "renders the standby priority, and the master priority again once it is up",
                 "[agent]") {
  t.port_state = mad::PortState::Active;
  AgentConfig c = agent_config();
  c.local_port_num = 1;
  Agent a(c, s, t, ctl, sink);
  a.start();
  s.run_until(s.now() + seconds(1));
  REQUIRE(a.status().role == sm::Role::Master);
  const auto master_prio = a.status().rendered_priority;
  CHECK(a.rounds() == 10);
  REQUIRE(t.port_queries.size() == 11);  // every round, plus the one in flight
  for (const auto& [port, o] : t.port_queries) {
    CHECK(port == 1);
    CHECK(o.retries == c.attempts - 1);
    CHECK(o.timeout * c.attempts <= engine_policy(c).query_window);  // within the round's window
  }

  auto changes = [this] { return std::count(sink.events.begin(), sink.events.end(), "priority_changed"); };
  const auto changes_before = changes();
  t.port_state = mad::PortState::Down;
  s.run_until(s.now() + milliseconds(150));  // the round in flight and the next
  CHECK(a.status().role == sm::Role::Master);
  CHECK(a.status().rendered_priority < master_prio);
  CHECK(std::count(ctl.calls.begin(), ctl.calls.end(),
                   "prio " + std::to_string(a.status().rendered_priority)) == 1);
  CHECK(changes() == changes_before + 1);

  // INIT (relinked, not yet swept) is up.
  t.port_state = mad::PortState::Init;
  s.run_until(s.now() + milliseconds(150));
  CHECK(a.status().rendered_priority == master_prio);
  CHECK(changes() == changes_before + 2);
}

TEST_CASE("Agent: an unanswered PortInfo is an unknown port: a standby does not take over a "
          "silent master until its own port answers up",
          "[agent]") {
  ManualScheduler s;
  FakeTransport t(s);
  FakeControl ctl;
  NullSink sink;
  t.answers["dr:0"] = sminfo(Guid{0x20}, SmState::Standby, 10);
  t.answers["lid:1"] = sminfo(Guid{0x10}, SmState::Master, 11);
  t.answers["dr:0,1,1"] = sminfo(Guid{0x10}, SmState::Master, 11);
  t.refuse = {"lid:1", "dr:0,1,1"};
  AgentConfig c = agent_config();
  c.local_port_num = 1;
  Agent a(c, s, t, ctl, sink);
  a.start();
  t.port_state = mad::PortState::Active;
  s.run_until(s.now() + seconds(1));
  REQUIRE(a.status().role == sm::Role::Standby);
  // The master's SMInfo is refused (as in the takeover test above) and our own
  // port no longer answers: no takeover, however long.
  t.answers["lid:1"].reset();
  t.answers["dr:0,1,1"].reset();
  t.port_state.reset();
  s.run_until(s.now() + seconds(2));
  CHECK(t.sets.empty());
  CHECK(a.status().role == sm::Role::Standby);
  // Port DOWN: still none.
  t.port_state = mad::PortState::Down;
  s.run_until(s.now() + seconds(1));
  CHECK(t.sets.empty());
  // Our port answers ACTIVE: now the silent master is taken over.
  t.port_state = mad::PortState::Active;
  s.run_until(s.now() + milliseconds(300));
  REQUIRE(t.sets.size() == 1);
  CHECK(t.sets[0].second == SmInfoModifier::Discover);
}

TEST_CASE("Agent asks the PortInfo of the switch port a peer is cabled to (its DR path "
          "without the last hop): a silent master whose switch port is Down is taken over "
          "without waiting for the hang fence",
          "[agent]") {
  CHECK_FALSE(switch_port_of(PeerAddress{Guid{1}, Lid{1}, std::nullopt}));
  CHECK_FALSE(switch_port_of(PeerAddress{Guid{1}, Lid{1}, DrPath{{2}}}));  // back to back
  const auto sp = switch_port_of(PeerAddress{Guid{1}, Lid{1}, DrPath{{1, 4, 7}}});
  REQUIRE(sp);
  CHECK(sp->first == DrPath{{1, 4}});
  CHECK(sp->second == 7);

  ManualScheduler s;
  FakeTransport t(s);
  FakeControl ctl;
  NullSink sink;
  t.answers["dr:0"] = sminfo(Guid{0x20}, SmState::Standby, 10);
  t.answers["lid:1"] = sminfo(Guid{0x10}, SmState::Master, 11);
  t.answers["dr:0,1,1"] = sminfo(Guid{0x10}, SmState::Master, 11);
  t.switch_ports["dr:0,1#1"] = mad::PortState::Active;
  Agent a(agent_config(), s, t, ctl, sink);  // peer at DR 1,1: switch DR 1, port 1
  a.start();
  s.run_until(s.now() + seconds(1));
  CHECK(a.status().role == sm::Role::Standby);
  REQUIRE(t.switch_queries.size() == 11);  // every round, plus the one in flight
  for (const auto& k : t.switch_queries) CHECK(k == "dr:0,1#1");

  SECTION("switch port Active: silence is a hang, the standby waits for the fence") {
    t.answers["lid:1"].reset();
    t.answers["dr:0,1,1"].reset();
    s.run_until(s.now() + milliseconds(550));
    CHECK(t.sets.empty());
    s.run_until(s.now() + milliseconds(250));
    CHECK(t.sets.size() == 1);
  }
  SECTION("switch port Down: the link is gone, DISCOVER after the rounds") {
    t.answers["lid:1"].reset();
    t.answers["dr:0,1,1"].reset();
    t.switch_ports["dr:0,1#1"] = mad::PortState::Down;
    s.run_until(s.now() + milliseconds(350));
    REQUIRE(t.sets.size() == 1);
    CHECK(t.sets[0].first == "dr:0");
    CHECK(t.sets[0].second == SmInfoModifier::Discover);
  }
  SECTION("switch port unanswered: unknown, as without a DR path") {
    t.answers["lid:1"].reset();
    t.answers["dr:0,1,1"].reset();
    t.switch_ports["dr:0,1#1"] = std::nullopt;
    s.run_until(s.now() + milliseconds(550));
    CHECK(t.sets.empty());
  }
}

TEST_CASE("Agent starts a stopped OpenSM and reports an unexpected exit to the engine", "[agent]") {
  ManualScheduler s;
  FakeTransport t(s);
  FakeControl ctl;
  ctl.st = sm::ProcessState::Stopped;
  NullSink sink;
  Agent a(agent_config(), s, t, ctl, sink);
  a.start();
  // Nothing is rendered before the first round: an OpenSM may still answer on
  // our port (adopted as it is). None answers here: started at the standby value.
  CHECK(ctl.calls.empty());
  s.run_until(s.now() + milliseconds(100));
  REQUIRE(ctl.calls.size() == 1);
  CHECK(ctl.calls[0] == "start 10");
  ctl.st = sm::ProcessState::Exited;
  ctl.h();
  CHECK(ctl.calls.back() == "start 10");
}

namespace {

struct FakeRunner : os::ProcessRunner {
  std::vector<os::ProcessSpec> spawned;
  std::vector<std::pair<int, int>> signals;
  std::map<int, ExitHandler> exits;
  int next = 100;
  Result<int> spawn(const os::ProcessSpec& spec, OutputHandler, ExitHandler on_exit) override {
    spawned.push_back(spec);
    exits[next] = std::move(on_exit);
    return next++;
  }
  Status kill(int pid, int sig) override {
    signals.emplace_back(pid, sig);
    return Status::Ok();
  }
  Status adopt(int pid, ExitHandler on_exit) override {
    exits[pid] = std::move(on_exit);
    return Status::Ok();
  }
  void exit(int pid) { exits.at(pid)(os::ExitInfo{pid, false, 0}); }
};

struct MemFs : os::FileSystem {
  std::map<std::string, std::string> files;
  Status write_atomic(const std::string& p, std::string_view c, unsigned) override {
    files[p] = std::string(c);
    return Status::Ok();
  }
  Result<std::string> read(const std::string& p) const override {
    auto it = files.find(p);
    if (it == files.end()) return make_error(Errc::NotFound, p);
    return it->second;
  }
};

}  // namespace

TEST_CASE("SupervisedOpensmControl renders, spawns, SIGHUPs, restarts, unasked exits wait for start()",
          "[agent]") {
  ManualScheduler s;
  FakeRunner r;
  MemFs fs;
  opensm::SupervisorOptions o;
  o.conf_path = "/run/smha/opensm.conf";
  o.expected_exe = "/usr/sbin/opensm";
  o.stop_timeout = seconds(2);
  o.backoff_initial = seconds(1);
  o.crash_loop_count = 3;
  o.respawn_on_request = true;
  // No procfs here: nothing else runs.
  o.identify = [](int pid) -> Result<opensm::ProcessIdentity> {
    return make_error(Errc::NotFound, std::to_string(pid));
  };
  o.cmdline = [](int pid) -> Result<std::vector<std::string>> {
    return make_error(Errc::NotFound, std::to_string(pid));
  };
  o.find_bound = [](std::uint64_t) { return std::vector<opensm::BoundOpensm>{}; };
  const std::string conf = "/run/smha/opensm.conf";
  SupervisedOpensmControl c(
      s, r, fs,
      [conf] {
        return os::ProcessSpec{"/usr/sbin/opensm", {"/usr/sbin/opensm", "-F", conf, "-g", "0x0000000000000020"}, {}, ""};
      },
      o, [](std::uint8_t p) -> Result<std::string> { return "sm_priority " + std::to_string(p) + "\n"; });
  int ended = 0;
  c.set_exit_handler([&] { ++ended; });

  REQUIRE(c.start(10).ok());
  REQUIRE(r.spawned.size() == 1);
  CHECK(fs.files[conf] == "sm_priority 10\n");
  CHECK(c.state() == sm::ProcessState::Running);

  REQUIRE(c.set_priority(11).ok());
  CHECK(fs.files[conf] == "sm_priority 11\n");
  CHECK(r.signals.back() == std::make_pair(100, SIGHUP));

  // Restart: SIGTERM, the new one starts only once the old one is gone.
  REQUIRE(c.restart(10, false).ok());
  CHECK(r.signals.back() == std::make_pair(100, SIGTERM));
  CHECK(r.spawned.size() == 1);
  CHECK(c.state() == sm::ProcessState::Running);
  r.exit(100);
  CHECK(r.spawned.size() == 2);
  CHECK(fs.files[conf] == "sm_priority 10\n");
  CHECK(ended == 0);

  // A stop that SIGTERM does not finish escalates to SIGKILL.
  REQUIRE(c.stop(false).ok());
  s.run_until(s.now() + seconds(3));
  CHECK(r.signals.back() == std::make_pair(101, SIGKILL));
  CHECK(ended == 0);
  r.exit(101);
  CHECK(c.state() == sm::ProcessState::Stopped);
  CHECK(ended == 1);  // the stop is done

  // An exit nobody asked for is reported; the respawn waits for the engine's start().
  REQUIRE(c.start(10).ok());
  r.exit(102);
  CHECK(ended == 2);
  CHECK(c.state() == sm::ProcessState::Exited);
  s.run_until(s.now() + seconds(5));
  CHECK(r.spawned.size() == 3);
  REQUIRE(c.start(10).ok());
  CHECK(c.state() == sm::ProcessState::Running);
  CHECK(r.spawned.size() == 4);

  // The third crash within the window: supervision gives up, start() refuses.
  r.exit(103);
  CHECK(c.state() == sm::ProcessState::Exited);
  s.run_until(s.now() + seconds(5));
  REQUIRE(c.start(10).ok());
  REQUIRE(r.spawned.size() == 5);
  r.exit(104);
  CHECK(ended == 4);
  CHECK(c.state() == sm::ProcessState::Failed);
  CHECK(c.supervisor_status().state == opensm::SupervisorState::Failed);
  auto refused = c.start(10);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code == Errc::Failed);
  s.run_until(s.now() + seconds(600));
  CHECK(r.spawned.size() == 5);
}

TEST_CASE("Agent asks the SA at our port's MasterSMLID every sa_interval, its table feeds the census",
          "[agent][census][sa]") {
  ManualScheduler s;
  FakeTransport t(s);
  FakeControl ctl;
  NullSink sink;
  t.answers["dr:0"] = sminfo(Guid{0x20}, SmState::Standby, 10);
  t.answers["lid:1"] = sminfo(Guid{0x10}, SmState::Master, 11);
  t.answers["dr:0,1,1"] = sminfo(Guid{0x10}, SmState::Master, 11);
  t.port_state = mad::PortState::Active;
  AgentConfig c = agent_config();
  c.local_port_num = 1;
  c.census.sa_interval = seconds(30);
  Agent a(c, s, t, ctl, sink);
  a.start();
  // No MasterSMLID on our port yet: nothing sent, the reason kept.
  s.run_until(s.now() + seconds(4));
  CHECK(t.sa_queries.empty());
  CHECK(a.census_stats().sa_last_error == "no master SM LID on our port yet");
  // The master answers at LID 1 with itself, us and an SM on a compute node.
  t.port_sm_lid = Lid{1};
  SmInfo other = sminfo(Guid{0x30}, SmState::Standby, 0);
  other.act_count = 5;
  t.sa_table = Result<mad::SmInfoRecordTable>(mad::SmInfoRecordTable{
      {{Lid{1}, sminfo(Guid{0x10}, SmState::Master, 11)},
       {Lid{2}, sminfo(Guid{0x20}, SmState::Standby, 10)},
       {Lid{9}, other}},
      std::nullopt,
      false});
  s.run_until(s.now() + seconds(30));
  REQUIRE(t.sa_queries.size() == 1);
  CHECK(t.sa_queries[0] == Lid{1});
  const auto& st = a.census_stats();
  CHECK(st.sa_tables == 1);
  CHECK(st.sa_records == 3);
  CHECK(st.sa_mads == 1);
  CHECK(st.sa_last_error.empty());
  REQUIRE(a.census().entries().count(Guid{0x30}));
  CHECK((a.census().entries().at(Guid{0x30}).sources & fabric::kFromSa) != 0);
  CHECK(a.census().entries().at(Guid{0x30}).lid == Lid{9});
  // One query per interval: two more in the next 60 s.
  s.run_until(s.now() + seconds(60));
  CHECK(t.sa_queries.size() == 3);
  // An SA that refuses: the error kept, the census unchanged.
  t.sa_table = Result<mad::SmInfoRecordTable>(mad::mad_status_error(mad::kSaStatusNoRecords, "SA status 0x0300: no records"));
  s.run_until(s.now() + seconds(30));
  CHECK(st.sa_last_error == "mad_status: SA status 0x0300: no records");
  CHECK(st.sa_tables == 3);
  a.stop();
}

namespace {
mad::PortInfoRecord is_sm_port(std::uint16_t lid) {
  mad::PortInfoRecord r;
  r.lid = Lid{lid};
  r.port_num = 1;
  r.info.lid = Lid{lid};
  r.info.state = mad::PortState::Active;
  r.info.capability_mask = mad::kCapIsSm;
  return r;
}
}  // namespace

// An SM with another SM_Key is in no SMInfoRecord table, and a census walk on
// a large fabric is hours away: the SA's IsSM PortInfoRecord table (one MAD
// with the SMInfoRecord query) names its LID; the port is resolved by LID
// (NodeInfo, NodeDescription) and its SM asked by LID. One answering with a
// head's GUID from another port is an impostor.
TEST_CASE("Agent: the SA's IsSM PortInfoRecords find an SM no other source lists, and an impostor",
          "[agent][census][sa]") {
  ManualScheduler s;
  FakeTransport t(s);
  FakeControl ctl;
  NullSink sink;
  t.answers["dr:0"] = sminfo(Guid{0x20}, SmState::Standby, 10);
  t.answers["lid:1"] = sminfo(Guid{0x10}, SmState::Master, 11);
  t.answers["dr:0,1,1"] = sminfo(Guid{0x10}, SmState::Master, 11);
  t.port_state = mad::PortState::Active;
  t.port_sm_lid = Lid{1};
  AgentConfig c = agent_config();
  c.local_port_num = 1;
  c.census.sa_interval = seconds(30);
  c.census.first_walk_delay = seconds(36000);  // no walk, so no rechecks: the SA alone
  // The SMInfoRecord table lists the two heads only.
  t.sa_table = Result<mad::SmInfoRecordTable>(mad::SmInfoRecordTable{
      {{Lid{1}, sminfo(Guid{0x10}, SmState::Master, 11)}, {Lid{2}, sminfo(Guid{0x20}, SmState::Standby, 10)}},
      std::nullopt,
      false});
  // The IsSM ports: both heads, an SM at LID 7 and one at LID 8.
  t.pir_table = Result<mad::PortInfoRecordTable>(
      mad::PortInfoRecordTable{{is_sm_port(1), is_sm_port(2), is_sm_port(7), is_sm_port(8)}, std::nullopt, false});
  mad::NodeInfo n7;
  n7.port_guid = Guid{0x70};
  t.node_infos["lid:7"] = n7;
  t.descriptions["lid:7"] = "rogue07";
  t.answers["lid:7"] = sminfo(Guid{0x70}, SmState::Standby, 3);
  mad::NodeInfo n8;
  n8.port_guid = Guid{0x80};
  t.node_infos["lid:8"] = n8;
  t.descriptions["lid:8"] = "node08";
  t.answers["lid:8"] = sminfo(Guid{0x10}, SmState::Master, 15);  // claims head01's GUID
  Agent a(c, s, t, ctl, sink);
  a.start();
  s.run_until(s.now() + seconds(5));  // the first SA queries (sa_first_delay 3 s) and their answers
  REQUIRE(t.pir_queries.size() == 1);
  CHECK(t.pir_queries[0] == Lid{1});
  const auto& st = a.census_stats();
  CHECK(st.ism_tables == 1);
  CHECK(st.ism_records == 4);
  CHECK(st.ism_found == 2);
  CHECK(st.ism_last_error.empty());
  // Only the LIDs nobody knew were resolved (the heads' were not).
  CHECK(std::count(t.node_queries.begin(), t.node_queries.end(), "info lid:7") == 1);
  CHECK(std::count(t.node_queries.begin(), t.node_queries.end(), "info lid:8") == 1);
  CHECK(std::count(t.node_queries.begin(), t.node_queries.end(), "info lid:1") == 0);
  CHECK(std::count(t.node_queries.begin(), t.node_queries.end(), "info lid:2") == 0);
  const auto& e = a.census().entries();
  REQUIRE(e.count(Guid{0x70}));
  const auto& x = e.at(Guid{0x70});
  CHECK(x.sources & fabric::kFromSaIsSm);
  CHECK(x.is_sm);
  CHECK_FALSE(x.path);
  CHECK(x.lid == Lid{7});
  CHECK(x.description == "rogue07");
  REQUIRE(x.info);
  CHECK(x.info->priority == 3);
  CHECK_FALSE(x.head);
  // The port at LID 8 answered as head01: an impostor, not head01's answer.
  const auto imps = a.census().impostors(s.now());
  REQUIRE(imps.size() == 1);
  CHECK(imps[0].port == Guid{0x80});
  CHECK(imps[0].info.guid == Guid{0x10});
  CHECK(a.census().impostor_text(s.now()).find("\"node08\" lid 8") != std::string::npos);
  // Next table: the same ports, nothing resolved again; the SM at LID 7 is
  // gone from the table: it loses IsSM in the census.
  const auto resolved = t.node_queries.size();
  s.run_until(s.now() + seconds(30));
  CHECK(t.node_queries.size() == resolved);
  t.pir_table = Result<mad::PortInfoRecordTable>(
      mad::PortInfoRecordTable{{is_sm_port(1), is_sm_port(2), is_sm_port(8)}, std::nullopt, false});
  s.run_until(s.now() + seconds(30));
  CHECK(st.ism_tables == 3);
  if (a.census().entries().count(Guid{0x70})) CHECK_FALSE(a.census().entries().at(Guid{0x70}).is_sm);
  // An SA that refuses: the error kept.
  t.pir_table = Result<mad::PortInfoRecordTable>(mad::mad_status_error(0x0100, "SA status 0x0100: no resources"));
  s.run_until(s.now() + seconds(30));
  CHECK(st.ism_last_error == "mad_status: SA status 0x0100: no resources");
  a.stop();
}
