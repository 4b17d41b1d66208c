// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// Agent: the poll loop (rounds, queries, the engine's steps and actions, the
// census rounds and walks to the listener). The peers' routes by discovery:
// agent_discovery.cpp.
#include "smha/agent/agent.hpp"

#include <algorithm>

namespace smha::agent {

namespace {

std::vector<Guid> peer_guids_of(const AgentConfig& cfg) {
  std::vector<Guid> out;
  for (const auto& p : cfg.peers) out.push_back(p.guid);
  return out;
}

}  // namespace

sm::HaPolicy engine_policy(const AgentConfig& cfg) {
  sm::HaPolicy p = cfg.policy;
  p.attempts_per_query = std::max(1, cfg.attempts);
  const Duration poll = cfg.policy.poll_interval;
  p.query_window = cfg.query_window ? *cfg.query_window
                                    : std::max<Duration>(poll / 2, std::min<Duration>(milliseconds(30), poll));
  return p;
}

// One query of a round: up to `attempts` requests, spread over the window; the
// first answer wins, each request may be answered until the window ends.
struct Agent::Query {
  mad::Target target;
  std::function<void(sm::Probe)> report;
  TimePoint begin{};
  TimePoint end{};
  int attempts = 0;
  int sent = 0;
  int failed = 0;
  bool refused_all = true;
  bool done = false;
  std::optional<Scheduler::TimerId> slot;  // the next attempt's send time
};

struct Agent::Round {
  sm::PollRound obs;
  int outstanding = 0;
  sm::PortState port = sm::PortState::Unknown;  // this round's PortInfo answer
  std::vector<sm::PortState> peer_ports;        // the peers' switch ports, same order
  std::optional<mad::PortInfo> local_pi;        // this round's PortInfo of our port
  std::vector<bool> polled;                     // per peer: queried this round
};

namespace {

sm::PortState port_state_of(mad::PortState s) {
  switch (s) {
    case mad::PortState::Down: return sm::PortState::Down;
    case mad::PortState::Init:
    case mad::PortState::Armed:
    case mad::PortState::Active: return sm::PortState::Up;
    case mad::PortState::Unknown: break;
  }
  return sm::PortState::Unknown;
}

}  // namespace

Agent::Agent(AgentConfig cfg, Scheduler& sched, mad::MadTransport& mad, OpensmControl& opensm,
             EventSink& sink)
    : cfg_(std::move(cfg)),
      sched_(sched),
      mad_(mad),
      opensm_(opensm),
      sink_(sink),
      machine_(engine_policy(cfg_)),
      window_(machine_.policy().query_window),
      alive_(std::make_shared<int>(0)),
      discovery_(sched, mad, cfg_.discovery),
      configured_(cfg_.peers),
      census_driver_(cfg_.census, sched, mad, sink, cfg_.policy.own_guid, peer_guids_of(cfg_), cfg_.m_key) {
  census_driver_.set_walk_handler([this](const fabric::DiscoveryResult& r) { on_walk(r); });
  for (const auto& p : cfg_.peers) {
    PeerRoute r;
    r.guid = p.guid;
    r.lid = p.lid;
    r.dr = p.dr;
    r.discover = p.discover;
    r.state = p.discover ? RouteState::Resolving : RouteState::Configured;
    routes_.push_back(std::move(r));
  }
}

Agent::~Agent() { stop(); }

void Agent::start() {
  if (running_) return;
  running_ = true;
  alive_ = std::make_shared<int>(0);
  std::weak_ptr<int> alive = alive_;
  opensm_.set_exit_handler([this, alive] {
    if (alive.expired() || !running_) return;
    step(sm::ProcessChanged{opensm_.state()});
  });
  // An OpenSM left running by the previous smhad is known to run before the
  // first round: if its first answer is late, the engine waits for it rather
  // than "starting" it at a standby value (a MASTER must keep its own).
  opensm_.adopt_running();
  step(sm::ProcessChanged{opensm_.state()});
  request_discovery("start");
  census_driver_.start();
  begin_round();
}

void Agent::stop() {
  if (!running_) return;
  running_ = false;
  alive_.reset();
  round_.reset();
  if (poll_timer_) sched_.cancel(*poll_timer_);
  if (wake_timer_) sched_.cancel(*wake_timer_);
  if (discovery_timer_) sched_.cancel(*discovery_timer_);
  poll_timer_.reset();
  wake_timer_.reset();
  discovery_timer_.reset();
  discovery_.cancel();
  census_driver_.stop();
  discovery_pending_ = false;
  handover_asking_ = nullptr;
  handover_running_ = nullptr;
  for (auto& r : routes_) r.resolving = false;
  opensm_.set_exit_handler(nullptr);
}

void Agent::set_hold(bool held) { step(sm::HoldChanged{held}); }

void Agent::request_handover(std::optional<Guid> target, HandoverDone done) {
  if (!running_) return;
  handover_asking_ = std::move(done);
  step(sm::HandoverRequest{target});
  // Not rejected: the handover it started reports its end (apply()).
  if (handover_asking_) handover_running_ = std::move(handover_asking_);
  handover_asking_ = nullptr;
}

// The engine's handover events to whoever asked for the handover.
void Agent::report_handover(const sm::RecordEvent& e) {
  HandoverDone done;
  switch (e.kind) {
    case sm::EventKind::HandoverStarted:
      // One the engine started on its own (preempt): a request's handover that
      // ended without an outcome is over.
      if (!handover_asking_) handover_running_ = nullptr;
      return;
    case sm::EventKind::HandoverRejected:
      done = std::move(handover_asking_);
      handover_asking_ = nullptr;
      break;
    case sm::EventKind::HandoverDone:
    case sm::EventKind::HandoverRolledBack:
      done = std::move(handover_running_);
      handover_running_ = nullptr;
      break;
    default:
      return;
  }
  if (done) done(e);
}

void Agent::begin_round() {
  poll_timer_.reset();
  if (!running_) return;
  round_started_ = sched_.now();
  auto round = std::make_shared<Round>();
  round_ = round;
  // Count every query first: reports may come while later queries start.
  round->outstanding = 1;
  for (const auto& p : cfg_.peers) round->obs.peers.push_back(sm::PeerProbe{p.guid, {}, {}, {}});
  // A peer being resolved, or with no address yet, is not polled: unqueried.
  round->polled.assign(cfg_.peers.size(), false);
  for (std::size_t i = 0; i < cfg_.peers.size(); ++i)
    round->polled[i] = !routes_[i].resolving;
  for (std::size_t i = 0; i < cfg_.peers.size(); ++i) {
    if (!round->polled[i]) continue;
    const auto& p = cfg_.peers[i];
    round->outstanding += (p.lid.value != 0 ? 1 : 0) + (p.dr ? 1 : 0);
  }
  const bool ask_port = cfg_.local_port_num != 0 && !local_port_;
  if (ask_port) ++round->outstanding;
  round->peer_ports.assign(cfg_.peers.size(), sm::PortState::Unknown);
  for (std::size_t i = 0; i < cfg_.peers.size(); ++i)
    if (round->polled[i] && switch_port_of(cfg_.peers[i])) ++round->outstanding;

  start_query(round, DrPath{}, [round](sm::Probe p) { round->obs.local = p; });
  for (std::size_t i = 0; i < cfg_.peers.size(); ++i) {
    const auto& p = cfg_.peers[i];
    if (!round->polled[i]) continue;
    if (p.lid.value != 0)
      start_query(round, p.lid, [round, i](sm::Probe pr) { round->obs.peers[i].via_lid = pr; });
    if (p.dr) start_query(round, *p.dr, [round, i](sm::Probe pr) { round->obs.peers[i].via_dr = pr; });
  }
  if (ask_port) query_local_port(round);
  for (std::size_t i = 0; i < cfg_.peers.size(); ++i)
    if (round->polled[i])
      if (auto sp = switch_port_of(cfg_.peers[i])) query_peer_port(round, i, sp->first, sp->second);
}

std::optional<std::pair<DrPath, std::uint8_t>> switch_port_of(const PeerAddress& p) {
  if (!p.dr || p.dr->hops.size() < 2) return std::nullopt;
  DrPath sw{std::vector<std::uint8_t>(p.dr->hops.begin(), p.dr->hops.end() - 1)};
  return std::make_pair(std::move(sw), p.dr->hops.back());
}

// A PortInfo query: one request over the whole window, its attempts spread
// evenly in it.
mad::RequestOptions Agent::port_info_options() const {
  const int attempts = std::max(1, cfg_.attempts);
  mad::RequestOptions o;
  o.timeout = std::max<Duration>(window_ / attempts, milliseconds(1));
  o.retries = attempts - 1;
  o.m_key = cfg_.m_key;
  return o;
}

void Agent::query_peer_port(const std::shared_ptr<Round>& round, std::size_t i, const DrPath& sw,
                            std::uint8_t port) {
  std::weak_ptr<int> alive = alive_;
  mad_.get_port_info(sw, port, port_info_options(), [this, alive, round, i](Result<mad::PortInfoReply> r) {
    if (alive.expired() || round_ != round) return;
    round->peer_ports[i] = r.ok() ? port_state_of(r->info.state) : sm::PortState::Unknown;
    if (--round->outstanding == 0) finish_round();
  });
}

void Agent::query_local_port(const std::shared_ptr<Round>& round) {
  std::weak_ptr<int> alive = alive_;
  mad_.get_port_info(DrPath{}, cfg_.local_port_num, port_info_options(),
                     [this, alive, round](Result<mad::PortInfoReply> r) {
                       if (alive.expired() || round_ != round) return;
                       round->port = r.ok() ? port_state_of(r->info.state) : sm::PortState::Unknown;
                       if (r.ok()) round->local_pi = r->info;
                       if (r.ok()) query_port_master(round, r->info);
                       if (--round->outstanding == 0) finish_round();
                     });
}

// The SM our port names as master (MasterSMLID), unless that is us or a
// configured peer's address (polled anyway): its SMInfo tells the engine
// whether a master it does not poll exists (sm::PollRound::port_master).
void Agent::query_port_master(const std::shared_ptr<Round>& round, const mad::PortInfo& pi) {
  const Lid m = pi.sm_lid;
  if (m.value == 0 || m == pi.lid) return;
  for (std::size_t i = 0; i < cfg_.peers.size(); ++i)
    if (cfg_.peers[i].lid == m && !routes_[i].resolving) return;
  ++round->outstanding;  // before the query starts: an answer may come at once
  start_query(round, m, [round](sm::Probe p) { round->obs.port_master = p; });
}

void Agent::start_query(const std::shared_ptr<Round>& round, const mad::Target& target,
                        std::function<void(sm::Probe)> report) {
  auto q = std::make_shared<Query>();
  q->target = target;
  std::weak_ptr<int> alive = alive_;
  q->report = [this, alive, round, report = std::move(report)](sm::Probe p) {
    if (alive.expired() || round_ != round) return;
    report(p);
    if (--round->outstanding == 0) finish_round();
  };
  q->begin = sched_.now();
  q->end = q->begin + window_;
  q->attempts = std::max(1, cfg_.attempts);
  send_attempt(q);
}

void Agent::send_attempt(const std::shared_ptr<Query>& q) {
  if (q->done || q->sent >= q->attempts) return;
  if (q->slot) sched_.cancel(*q->slot);
  q->slot.reset();
  const int k = q->sent++;
  const TimePoint sent_at = sched_.now();
  mad::RequestOptions o;
  o.timeout = std::max<Duration>(q->end - sent_at, milliseconds(1));
  o.retries = 0;
  o.m_key = cfg_.m_key;
  std::weak_ptr<int> alive = alive_;
  mad_.get_sminfo(q->target, o, [this, alive, q, k, sent_at, o](Result<mad::SmInfoReply> r) {
    if (alive.expired() || q->done) return;
    if (r.ok()) {
      q->done = true;
      if (q->slot) sched_.cancel(*q->slot);
      q->slot.reset();
      q->report(sm::Probe::answered(r->info, k + 1));
      return;
    }
    // Refused: failed well before its deadline (error status, error completion).
    const bool refused = sched_.now() - sent_at < o.timeout / 2;
    if (!refused) q->refused_all = false;
    ++q->failed;
    if (q->failed >= q->attempts) {
      q->done = true;
      q->report(q->refused_all ? sm::Probe::refused_by_all(q->attempts)
                               : sm::Probe::unanswered(q->attempts));
      return;
    }
    if (refused && q->sent == q->failed) send_attempt(q);  // next one now, not at its slot
  });
  // The next attempt at its slot, unless an answer or a refusal came first.
  if (q->sent < q->attempts) {
    const TimePoint slot = q->begin + window_ * q->sent / q->attempts;
    const int expect = q->sent;
    q->slot = sched_.schedule_at(slot, [this, alive, q, expect] {
      if (alive.expired()) return;
      q->slot.reset();
      if (q->done || q->sent != expect) return;
      send_attempt(q);
    });
  }
}

void Agent::finish_round() {
  auto round = std::move(round_);
  round_.reset();
  ++rounds_;
  round->obs.process = opensm_.state();
  round->obs.local_port = local_port_                ? local_port_()
                          : cfg_.local_port_num != 0 ? round->port
                                                     : sm::PortState::Up;
  round->obs.local_stopped = local_stopped_ && local_stopped_();
  round->obs.sent_at = round_started_;
  for (std::size_t i = 0; i < round->obs.peers.size(); ++i) round->obs.peers[i].port = round->peer_ports[i];
  // Far past the window: this process was not running (CPU stall), so silence
  // in this round says nothing about the SMs. Not believed for `misses` rounds.
  const bool late = sched_.now() - round_started_ > 2 * window_ + milliseconds(5);
  if (late) ++late_rounds_;
  else late_rounds_ = 0;
  if (late && late_rounds_ < cfg_.policy.misses) {
    auto discount = [](sm::Probe& p) {
      if (!p.info) p.queried = false;
    };
    discount(round->obs.local);
    for (auto& p : round->obs.peers) {
      discount(p.via_lid);
      discount(p.via_dr);
    }
  }
  check_routes(*round);
  census_round(*round);
  if (listener_) listener_->round_polled(round->obs, round->local_pi);
  const sm::Decision d = step(round->obs);
  opensm_.fabric_master(machine_.status().fabric_master);
  if (!running_ || poll_timer_) return;
  const Duration gap = cfg_.policy.poll_interval / 10;
  TimePoint next = d.poll_soon ? sched_.now() + gap
                               : std::max(sched_.now(), round_started_ + cfg_.policy.poll_interval);
  // Our SM is silent: a round that would end just short of its fence threshold
  // is started later, so that it ends at the threshold (the fence then comes
  // there, not one round later). A silent SM holds a round for its window.
  if (d.poll_soon && d.fence_due) {
    const TimePoint aligned = *d.fence_due - window_;
    if (aligned > next && aligned < next + window_ + gap) next = aligned;
  }
  std::weak_ptr<int> alive = alive_;
  poll_timer_ = sched_.schedule_at(next, [this, alive] {
    if (alive.expired()) return;
    begin_round();
  });
}

sm::Decision Agent::step(const sm::Observation& obs) {
  auto d = machine_.step(obs, sched_.now());
  apply(d);
  if (listener_) {
    std::vector<sm::RecordEvent> events;
    for (const auto& a : d.actions)
      if (const auto* e = std::get_if<sm::RecordEvent>(&a)) events.push_back(*e);
    listener_->engine_stepped(events, machine_.status());
  }
  return d;
}

void Agent::arm_wakeup(std::optional<TimePoint> t) {
  if (wake_timer_) sched_.cancel(*wake_timer_);
  wake_timer_.reset();
  if (!t || !running_) return;
  std::weak_ptr<int> alive = alive_;
  wake_timer_ = sched_.schedule_at(std::max(*t, sched_.now()), [this, alive] {
    if (alive.expired()) return;
    wake_timer_.reset();
    step(sm::Tick{});
  });
}

void Agent::apply(const sm::Decision& d) {
  const TimePoint now = sched_.now();
  // The cause of a state change is what the engine decided in the same step:
  // its first other event (the engine records the state change as soon as it
  // sees it, before the event that explains it), never an older one. A
  // priority change follows the role, it explains nothing.
  std::string cause;
  for (const auto& a : d.actions)
    if (const auto* e = std::get_if<sm::RecordEvent>(&a);
        e && e->kind != sm::EventKind::StateChanged && e->kind != sm::EventKind::PriorityChanged &&
        e->kind != sm::EventKind::PeerRoute) {
      cause = std::string(sm::to_string(e->kind)) + (e->reason.empty() ? "" : ": " + e->reason);
      break;
    }
  for (const auto& a : d.actions) {
    Status st;
    if (std::holds_alternative<sm::SendDiscover>(a)) {
      // SubnSet(SMInfo, DISCOVER) to our own SM; OpenSM wants payload state MASTER.
      SmInfo payload;
      payload.guid = cfg_.policy.own_guid;
      payload.state = SmState::Master;
      std::weak_ptr<int> alive = alive_;
      mad::RequestOptions req;
      req.timeout = std::max<Duration>(window_ / std::max(1, cfg_.attempts), milliseconds(1));
      req.retries = std::max(1, cfg_.attempts) - 1;
      req.m_key = cfg_.m_key;
      mad_.set_sminfo(DrPath{}, SmInfoModifier::Discover, payload, req,
                      [this, alive](Result<mad::SmInfoReply> r) {
                        if (alive.expired() || r.ok()) return;
                        sink_.error(make_error(r.error().code, "DISCOVER to local SM: " +
                                                                   r.error().message),
                                    sched_.now());
                      });
    } else if (const auto* s = std::get_if<sm::DiscoverPeer>(&a)) {
      discover_peer(s->peer);
    } else if (const auto* s = std::get_if<sm::StartOpensm>(&a)) {
      st = opensm_.start(s->priority);
    } else if (const auto* s = std::get_if<sm::StopOpensm>(&a)) {
      st = opensm_.stop(s->force);
    } else if (const auto* s = std::get_if<sm::RestartOpensm>(&a)) {
      st = opensm_.restart(s->priority, s->force);
    } else if (const auto* s = std::get_if<sm::SetPriority>(&a)) {
      st = opensm_.set_priority(s->priority);
    } else if (const auto* s = std::get_if<RaiseAlarm>(&a)) {
      sink_.alarm(*s, now);
    } else if (const auto* s = std::get_if<ClearAlarm>(&a)) {
      sink_.clear(*s, now);
    } else if (const auto* s = std::get_if<sm::RecordEvent>(&a)) {
      if (s->kind == sm::EventKind::StateChanged) {
        sm::RecordEvent changed = *s;
        changed.evidence = cause;
        sink_.event(changed, now);
      } else {
        sink_.event(*s, now);
      }
      report_handover(*s);
    } else if (const auto* s = std::get_if<sm::RunHook>(&a)) {
      sink_.hook(*s, now);
    }
    if (!st.ok()) sink_.error(st.error(), now);
  }
  for (const auto& r : d.role_changes) sink_.role_changed(r, now);
  arm_wakeup(d.next_wakeup);
}

// SubnSet(SMInfo, DISCOVER) to a peer head's STANDBY SM (sm::DiscoverPeer): by
// its LID (the switches still route it while our OpenSM is gone), else by its
// directed route. The engine saw it STANDBY in the latest round, but a HANDOVER
// our OpenSM sent just before it died may have made it MASTER since: a Get
// first, and the Set only if it still answers STANDBY (nothing else can make
// it MASTER within one round trip: from STANDBY only a HANDOVER does, and a
// sweep it began since answers DISCOVERING). Sent once; a lost or skipped Set
// costs only the time the peer's smhad needs to count the missed rounds.
void Agent::discover_peer(Guid peer) {
  std::optional<mad::Target> target;
  for (const auto& p : cfg_.peers) {
    if (p.guid != peer) continue;
    if (p.lid.value != 0) target = p.lid;
    else if (p.dr) target = *p.dr;
  }
  if (!target) {
    sink_.error(make_error(Errc::NotFound, "DISCOVER to peer " + to_string(peer) + ": no LID or route known"),
                sched_.now());
    return;
  }
  mad::RequestOptions req;
  req.timeout = std::max<Duration>(window_ / std::max(1, cfg_.attempts), milliseconds(1));
  req.retries = 0;
  req.m_key = cfg_.m_key;
  std::weak_ptr<int> alive = alive_;
  mad_.get_sminfo(*target, req, [this, alive, peer, target = *target, req](Result<mad::SmInfoReply> g) {
    if (alive.expired() || !running_) return;
    if (!g.ok() || g->info.guid != peer || g->info.state != SmState::Standby) {
      sink_.error(make_error(Errc::Failed, "DISCOVER to peer " + to_string(peer) + " not sent: it answers " +
                                            (g.ok() ? std::string(to_string(g->info.state)) + " as " +
                                                          to_string(g->info.guid)
                                                    : g.error().message)),
                  sched_.now());
      return;
    }
    SmInfo payload;
    payload.guid = cfg_.policy.own_guid;
    payload.state = SmState::Master;
    mad_.set_sminfo(target, SmInfoModifier::Discover, payload, req, [this, alive, peer](Result<mad::SmInfoReply> r) {
      if (alive.expired() || r.ok()) return;
      sink_.error(make_error(r.error().code, "DISCOVER to peer " + to_string(peer) + ": " + r.error().message),
                  sched_.now());
    });
  });
}

// After a round: the triggers for re-resolving (see the header comment).
void Agent::check_routes(const Round& round) {
  bool again = false;
  for (std::size_t i = 0; i < routes_.size(); ++i) {
    const PeerRoute& r = routes_[i];
    if (!r.discover || !r.found || r.resolving || !round.polled[i]) continue;
    const auto& pp = round.obs.peers[i];
    const bool lid_silent = pp.via_lid.queried && !pp.via_lid.info;
    const bool dr_ok = pp.via_dr.queried && pp.via_dr.info.has_value();
    const bool dr_failed = pp.via_dr.queried && !pp.via_dr.info;
    const bool lid_ok = pp.via_lid.queried && pp.via_lid.info.has_value();
    // Both silent is a peer gone, not a route gone: the engine's business,
    // and a search would only delay its verdict.
    // A configured override is polled whatever discovery finds: searching
    // again cannot mend it (the mismatch was reported).
    const bool lid_ours = configured_[i].lid.value != 0;
    const bool dr_ours = configured_[i].dr.has_value();
    if ((lid_silent && dr_ok && !lid_ours) || (dr_failed && lid_ok && !dr_ours)) again = true;
  }
  if (round.local_pi) {
    if (last_local_pi_ && (last_local_pi_->lid != round.local_pi->lid ||
                           last_local_pi_->sm_lid != round.local_pi->sm_lid))
      again = true;
    last_local_pi_ = round.local_pi;
  }
  if (again) request_discovery("route check");
}

// ---- census ------------------------------------------------------------------

// Every census walk, to the walk observer and the listener (the driver's own
// bookkeeping came first; it arms the next walk after this).
void Agent::on_walk(const fabric::DiscoveryResult& r) {
  if (walk_observer_) walk_observer_(r);
  if (listener_) listener_->census_walked(r);
}

// After a round: its SMInfo answers go into the census, and the live SMs that
// are not heads into the round's other_sms (the engine's unknown_sm alarm).
void Agent::census_round(Round& round) {
  std::vector<Lid> peer_lids;
  for (const auto& p : cfg_.peers) peer_lids.push_back(p.lid);
  std::vector<std::pair<Guid, std::string>> peer_names;
  for (const auto& r : routes_) peer_names.emplace_back(r.guid, r.description);
  round.obs.other_sms = census_driver_.round(round.obs, round.local_pi, peer_lids, peer_names);
}

}  // namespace smha::agent
