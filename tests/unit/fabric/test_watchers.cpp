// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// Watchers fed through the PollListener alone (no agent::Agent): rounds,
// engine steps and census walks reach the takeover report, the drift check,
// link health and the error counters; what they send goes through the
// transport and the walk they were handed.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "smha/fabric/watchers.hpp"
#include "manual_scheduler.hpp"

using namespace smha;
using namespace smha::fabric;

using smha::test::ManualScheduler;

namespace {

const Guid kOwn{0x20};
const Guid kPeer{0x10};

// Records every request by attribute and target LID. The SA answers an empty
// SMInfoRecord table after 1 ms; everything else is silence until the
// request's timeout.
struct Transport : mad::MadTransport {
  ManualScheduler& s;
  std::vector<std::string> sent;  // "SMInfoRecord lid:2", "ServiceRecord Set lid:1", ...
  explicit Transport(ManualScheduler& sch) : s(sch) {}
  void submit(mad::Request req, mad::ReplyCallback done) override {
    std::visit([&](const auto& q) { on(q, req.opts, std::move(done)); }, req.query);
  }
  // Everything is silence until the request's timeout, recorded by its name.
  template <class Q>
  void on(const Q&, const mad::RequestOptions& o, mad::ReplyCallback done) {
    sent.emplace_back(Q::kName);
    silence(o, std::move(done));
  }
  void on(const mad::SmInfoRecordsGet& q, const mad::RequestOptions&, mad::ReplyCallback done) {
    sent.push_back("SMInfoRecord lid:" + std::to_string(q.sa_lid.value));
    s.schedule_at(s.now() + milliseconds(1),
                  [done] { done(mad::SmInfoRecordsReply{mad::SmInfoRecordTable{}, milliseconds(1), 1}); });
  }
  void on(const mad::ServiceRecordSet& q, const mad::RequestOptions& o, mad::ReplyCallback done) {
    sent.push_back("ServiceRecord Set lid:" + std::to_string(q.sa_lid.value));
    silence(o, std::move(done));
  }
  void on(const mad::ServiceRecordGet& q, const mad::RequestOptions& o, mad::ReplyCallback done) {
    sent.push_back("ServiceRecord lid:" + std::to_string(q.sa_lid.value));
    silence(o, std::move(done));
  }
  void on(const mad::ServiceRecordDelete& q, const mad::RequestOptions& o, mad::ReplyCallback done) {
    sent.push_back("ServiceRecord Delete lid:" + std::to_string(q.sa_lid.value));
    silence(o, std::move(done));
  }
  void on(const mad::PortCountersGet& q, const mad::RequestOptions& o, mad::ReplyCallback done) {
    sent.push_back("PortCounters lid:" + std::to_string(q.lid.value));
    silence(o, std::move(done));
  }
  void silence(const mad::RequestOptions& o, mad::ReplyCallback done) {
    s.schedule_at(s.now() + o.timeout * (o.retries + 1), [done] { done(make_error(mad::kErrTimeout, "timeout")); });
  }
  std::size_t count(const std::string& prefix) const {
    std::size_t n = 0;
    for (const auto& x : sent) n += x.rfind(prefix, 0) == 0 ? 1 : 0;
    return n;
  }
};

struct Alarms : AlarmSink {
  std::vector<std::string> log;
  void alarm(const RaiseAlarm& a, TimePoint) override { log.push_back("raise " + std::string(to_string(a.kind))); }
  void clear(const ClearAlarm& a, TimePoint) override { log.push_back("clear " + std::string(to_string(a.kind))); }
};

SmInfo sminfo(Guid g, SmState s) {
  SmInfo i;
  i.guid = g;
  i.state = s;
  return i;
}

// A round in which the peer answers `peer` by LID and our port's PortInfo
// says LID 2, master SM at LID 1.
sm::PollRound round_at(TimePoint at, SmState peer) {
  sm::PollRound r;
  r.local = sm::Probe::answered(sminfo(kOwn, SmState::Standby));
  r.peers.push_back(sm::PeerProbe{kPeer, sm::Probe::answered(sminfo(kPeer, peer)), {}, sm::PortState::Up});
  r.sent_at = at;
  return r;
}

mad::PortInfo own_port() {
  mad::PortInfo pi;
  pi.lid = Lid{2};
  pi.sm_lid = Lid{1};
  pi.state = mad::PortState::Active;
  return pi;
}

sm::RecordEvent state_changed(SmState from, SmState to) {
  sm::RecordEvent e{sm::EventKind::StateChanged, "", ""};
  e.from = from;
  e.to = to;
  return e;
}

sm::EngineStatus engine(sm::Role role, SmState local) {
  sm::EngineStatus st;
  st.role = role;
  st.local_state = local;
  return st;
}

// The walk at SUBNET UP: us at LID 2, the old master at LID 1, both pointing at us.
DiscoveryResult walk() {
  DiscoveryResult r;
  for (auto [g, lid] : {std::pair{kOwn, 2}, std::pair{kPeer, 1}}) {
    SmPort p;
    p.port_guid = g;
    p.lid = Lid{static_cast<std::uint16_t>(lid)};
    p.master_sm_lid = Lid{2};
    p.state = mad::PortState::Active;
    r.probed.push_back(p);
  }
  return r;
}

struct Rig {
  ManualScheduler s;
  Transport t{s};
  Alarms alarms;
  std::vector<TakeoverReport> reports;
  int walks_asked = 0;
  std::unique_ptr<Watchers> w;
  explicit Rig(WatchersConfig cfg) {
    w = std::make_unique<Watchers>(
        std::move(cfg),
        WatchersSeams{s, t, alarms, [this](const TakeoverReport& r, TimePoint) { reports.push_back(r); },
                      [this] { ++walks_asked; }},
        kOwn, std::vector<std::pair<std::string, Guid>>{{"head01", kPeer}});
  }
};

WatchersConfig config() {
  WatchersConfig c;
  c.routing_engines = {"minhop"};
  c.opensm_log = true;
  c.errors.start_after = seconds(1);
  return c;
}

}  // namespace

TEST_CASE("Watchers get the rounds, the engine's steps and the census walks through the PollListener, "
          "without an agent",
          "[watchers]") {
  Rig r(config());
  PollListener& l = *r.w;  // all the poll loop knows of them
  r.w->start();

  // Standby beside the peer's MASTER: no report, no error counters read.
  l.round_polled(round_at(r.s.now(), SmState::Master), own_port());
  l.engine_stepped({}, engine(sm::Role::Standby, SmState::Standby));
  CHECK(r.w->errors().snapshot().state == "standby");
  // The round's MasterSMLID is where our drift record goes.
  r.w->drift().set_own(ConfigDigests{});
  CHECK(r.t.count("ServiceRecord Set lid:1") == 1);

  // A handover: our SM STANDBY -> MASTER while the peer was seen MASTER.
  r.s.run_for(milliseconds(100));
  l.round_polled(round_at(r.s.now(), SmState::Standby), own_port());
  const std::vector<sm::RecordEvent> events{state_changed(SmState::Standby, SmState::Master)};
  l.engine_stepped(events, engine(sm::Role::Master, SmState::Master));
  CHECK(r.w->errors().snapshot().state == "waiting");
  // Our SA is asked at our own LID from MASTER on, and answers.
  CHECK(r.t.count("SMInfoRecord lid:2") == 1);
  r.s.run_for(milliseconds(5));
  CHECK(r.reports.empty());  // the walk at SUBNET UP is still missing
  CHECK(r.walks_asked == 0);

  // OpenSM's log says SUBNET UP: the report asks for its census walk, whose
  // result comes back as the listener's.
  r.w->opensm_logged(opensm::LoggedEvent{opensm::LoggedEvent::Kind::SmState, "MASTER", ""});
  r.w->opensm_logged(opensm::LoggedEvent{opensm::LoggedEvent::Kind::SubnetUp, "", ""});
  CHECK(r.walks_asked == 1);
  l.census_walked(walk());
  REQUIRE(r.reports.size() == 1);
  const TakeoverReport& rep = r.reports.front();
  CHECK(rep.kind == TakeoverReport::Kind::Handover);
  REQUIRE(rep.previous_master);
  CHECK(*rep.previous_master == kPeer);
  CHECK(rep.sa_after_master);
  REQUIRE(rep.ports_sampled);
  CHECK(*rep.ports_sampled == 2);
  CHECK(rep.ports_on_new_master == 2);
  CHECK(rep.incomplete.empty());
  REQUIRE(r.w->last_takeover());
  CHECK(*r.w->last_takeover() == rep);

  // The walk reached link health too.
  CHECK(r.w->health().snapshot().walks == 1);

  // MASTER for errors.start_after, as the next step sees it: the counters
  // are read, paced, at the PMAs the walk found.
  r.s.run_for(seconds(1));
  l.engine_stepped({}, engine(sm::Role::Master, SmState::Master));
  CHECK(r.w->errors().snapshot().state == "reading");

  // Back to STANDBY: reading stops at once.
  l.engine_stepped({}, engine(sm::Role::Standby, SmState::Standby));
  CHECK(r.w->errors().snapshot().state == "standby");

  // Stopped: our drift record is deleted, nothing is armed.
  r.w->stop();
  CHECK(r.t.count("ServiceRecord Delete") <= 1);
  const auto sent = r.t.sent.size();
  r.s.run_for(seconds(120));
  CHECK(r.t.sent.size() == sent);
}

TEST_CASE("Watchers: before start() the listener's calls are taken in, nothing is sent or read", "[watchers]") {
  WatchersConfig c = config();
  c.errors.start_after = Duration{};
  Rig r(c);
  PollListener& l = *r.w;
  l.round_polled(round_at(r.s.now(), SmState::Master), own_port());
  const std::vector<sm::RecordEvent> events{state_changed(SmState::Standby, SmState::Master)};
  l.engine_stepped(events, engine(sm::Role::Master, SmState::Master));
  CHECK(r.t.sent.empty());
  CHECK(r.w->errors().snapshot().state == "off");
  // Started: the next step is served (the report's SA probe, the counters).
  r.w->start();
  l.engine_stepped({}, engine(sm::Role::Master, SmState::Master));
  CHECK(r.t.count("SMInfoRecord lid:2") == 1);
  CHECK(r.w->errors().snapshot().state == "reading");
}

TEST_CASE("Watchers: without census walks there is no health, no error counters and no report walk",
          "[watchers]") {
  WatchersConfig c = config();
  c.walks = false;
  Rig r(c);
  PollListener& l = *r.w;
  r.w->start();
  CHECK_FALSE(r.w->health().config().enabled);
  CHECK_FALSE(r.w->errors().config().enabled);
  l.round_polled(round_at(r.s.now(), SmState::Master), own_port());
  r.s.run_for(milliseconds(100));
  l.round_polled(round_at(r.s.now(), SmState::Standby), own_port());
  const std::vector<sm::RecordEvent> events{state_changed(SmState::Standby, SmState::Master)};
  l.engine_stepped(events, engine(sm::Role::Master, SmState::Master));
  r.s.run_for(milliseconds(5));
  r.w->opensm_logged(opensm::LoggedEvent{opensm::LoggedEvent::Kind::SmState, "MASTER", ""});
  r.w->opensm_logged(opensm::LoggedEvent{opensm::LoggedEvent::Kind::SubnetUp, "", ""});
  CHECK(r.walks_asked == 0);
  REQUIRE(r.reports.size() == 1);
  CHECK(r.reports.front().incomplete == "census disabled: no LID or MasterSMLID figures");
}
