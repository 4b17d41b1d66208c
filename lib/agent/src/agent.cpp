// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/agent/agent.hpp"

#include <algorithm>
#include <cstdio>

#include "smha/core/text.hpp"

namespace smha::agent {

std::string PeerRoute::status() const {
  switch (state) {
    case RouteState::Configured: return "configured";
    case RouteState::Resolving: return "resolving";
    case RouteState::Resolved: return "resolved";
    case RouteState::NotFound: return "not found (" + searched + ")";
  }
  return "unknown";
}

namespace {

std::vector<std::pair<std::string, Guid>> named_peers(const AgentConfig& cfg) {
  std::vector<std::pair<std::string, Guid>> out;
  for (const auto& p : cfg.peers) {
    std::string name = to_string(p.guid);
    for (const auto& q : cfg.policy.peers)
      if (q.guid == p.guid) name = q.name;
    out.emplace_back(std::move(name), p.guid);
  }
  return out;
}

sm::HaPolicy policy_for(const AgentConfig& cfg) {
  sm::HaPolicy p = cfg.policy;
  p.attempts_per_query = std::max(1, cfg.attempts);
  p.query_window = query_window_for(cfg);
  return p;
}

}  // namespace

Duration query_window_for(const AgentConfig& cfg) {
  if (cfg.query_window) return *cfg.query_window;
  const Duration p = cfg.policy.poll_interval;
  return std::max<Duration>(p / 2, std::min<Duration>(milliseconds(30), p));
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

// MADs a finished request cost: its attempts, or all of them when it timed
// out (1 when it failed otherwise).
template <typename Reply>
std::uint64_t mads_of(const Result<Reply>& r, const mad::RequestOptions& o) {
  if (r.ok()) return static_cast<std::uint64_t>(r->attempts);
  return r.error().code == mad::kErrTimeout ? static_cast<std::uint64_t>(o.retries) + 1 : 1;
}

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
      machine_(policy_for(cfg_)),
      window_(query_window_for(cfg_)),
      alive_(std::make_shared<int>(0)),
      discovery_(sched, mad, cfg_.discovery),
      configured_(cfg_.peers),
      survey_(sched, mad, cfg_.census.walk),
      census_(cfg_.census.limits),
      drift_(cfg_.drift, sched, mad, cfg_.policy.own_guid, named_peers(cfg_), sink),
      reporter_(cfg_.routing_engines, cfg_.report_deadline) {
  reporter_.set_own(cfg_.policy.own_guid);
  reporter_.set_walks(cfg_.census.enabled);
  reporter_.set_log_followed(cfg_.opensm_log);
  reporter_.set_emit([this](const fabric::TakeoverReport& r) { sink_.takeover_report(r, sched_.now()); });
  std::vector<Guid> peer_guids;
  for (const auto& p : cfg_.peers) peer_guids.push_back(p.guid);
  census_.set_heads(cfg_.policy.own_guid, peer_guids);
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
  drift_.start();
  if (cfg_.census.enabled) {
    read_own_description();
    walk_timer_ = sched_.schedule_at(sched_.now() + cfg_.census.first_walk_delay, [this, alive] {
      if (alive.expired()) return;
      walk_timer_.reset();
      start_walk();
    });
    census_stats_.next_walk_at = sched_.now() + cfg_.census.first_walk_delay;
    census_timer_ = sched_.schedule_at(sched_.now() + cfg_.census.query_interval, [this, alive] {
      if (alive.expired()) return;
      census_timer_.reset();
      census_tick();
    });
    if (cfg_.census.sa_interval > Duration::zero())
      sa_timer_ = sched_.schedule_at(sched_.now() + cfg_.census.sa_first_delay, [this, alive] {
        if (alive.expired()) return;
        sa_timer_.reset();
        census_sa();
      });
  }
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
  if (walk_timer_) sched_.cancel(*walk_timer_);
  if (census_timer_) sched_.cancel(*census_timer_);
  if (sa_timer_) sched_.cancel(*sa_timer_);
  if (report_timer_) sched_.cancel(*report_timer_);
  sa_timer_.reset();
  report_timer_.reset();
  poll_timer_.reset();
  wake_timer_.reset();
  discovery_timer_.reset();
  walk_timer_.reset();
  census_timer_.reset();
  discovery_.cancel();
  survey_.cancel();
  discovery_pending_ = false;
  handover_asking_ = nullptr;
  handover_running_ = nullptr;
  for (auto& r : routes_) r.resolving = false;
  opensm_.set_exit_handler(nullptr);
  drift_.stop();
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
  const bool ask_peer_ports = !peer_port_;
  if (ask_peer_ports)
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
  if (ask_peer_ports)
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
  for (std::size_t i = 0; i < round->obs.peers.size(); ++i) {
    auto& p = round->obs.peers[i];
    p.port = peer_port_ ? peer_port_(p.guid) : round->peer_ports[i];
  }
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
  reporter_.round_began(round_started_);
  for (const auto& p : round->obs.peers)
    for (const sm::Probe* probe : {&p.via_lid, &p.via_dr})
      if (probe->info && probe->info->state == SmState::Master) reporter_.master_seen(probe->info->guid, round_started_);
  if (round->obs.port_master.info && round->obs.port_master.info->state == SmState::Master)
    reporter_.master_seen(round->obs.port_master.info->guid, round_started_);
  if (round->local_pi) drift_.set_sa_lid(round->local_pi->sm_lid);
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
    } else if (const auto* s = std::get_if<sm::RaiseAlarm>(&a)) {
      sink_.alarm(*s, now);
    } else if (const auto* s = std::get_if<sm::ClearAlarm>(&a)) {
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
  // The report takes a step's state change after its other events: a
  // takeover seen in one round (our SM already MASTER) records
  // takeover_started after the state change.
  for (bool changes : {false, true})
    for (const auto& a : d.actions)
      if (const auto* e = std::get_if<sm::RecordEvent>(&a); e && (e->kind == sm::EventKind::StateChanged) == changes)
        reporter_.on_event(*e, now);
  serve_report();
}

void Agent::opensm_logged(const opensm::LoggedEvent& e) {
  reporter_.on_opensm_log(e, sched_.now());
  serve_report();
}

// The takeover report's walk (started when it asks) and its deadline.
void Agent::serve_report() {
  if (!running_) return;
  const TimePoint now = sched_.now();
  reporter_.tick(now);
  if (reporter_.wants_walk(now)) {
    reporter_.walk_started();
    start_walk();
  }
  const auto at = reporter_.next_wakeup();
  if (report_timer_) sched_.cancel(*report_timer_);
  report_timer_.reset();
  if (!at) return;
  std::weak_ptr<int> alive = alive_;
  report_timer_ = sched_.schedule_at(std::max(*at, now), [this, alive] {
    if (alive.expired()) return;
    report_timer_.reset();
    serve_report();
  });
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
    sink_.error(make_error(Errc::NoRoute, "DISCOVER to peer " + to_string(peer) + ": no LID or route known"),
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
      sink_.error(make_error(Errc::NotSent, "DISCOVER to peer " + to_string(peer) + " not sent: it answers " +
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

// ---- discovery ---------------------------------------------------------------

void Agent::request_discovery(const std::string& why) {
  if (!running_) return;
  std::vector<Guid> targets;
  std::vector<DrPath> hints;
  for (std::size_t i = 0; i < routes_.size(); ++i) {
    const auto& r = routes_[i];
    if (!r.discover) continue;
    targets.push_back(r.guid);
    // A configured dr_path that leads to the peer is found there first (a
    // fabric with parallel links has several right paths); else the last one.
    if (configured_[i].dr) hints.push_back(*configured_[i].dr);
    else if (r.found && r.dr) hints.push_back(*r.dr);
  }
  if (targets.empty()) return;
  if (discovery_.running()) {
    discovery_pending_ = true;
    return;
  }
  const TimePoint now = sched_.now();
  if (last_discovery_at_ && now - *last_discovery_at_ < cfg_.rediscover_min_gap) {
    // Rate bound: once the gap is over.
    if (discovery_timer_) sched_.cancel(*discovery_timer_);
    std::weak_ptr<int> alive = alive_;
    discovery_timer_ = sched_.schedule_at(*last_discovery_at_ + cfg_.rediscover_min_gap,
                                          [this, alive, why] {
                                            if (alive.expired()) return;
                                            discovery_timer_.reset();
                                            request_discovery(why);
                                          });
    return;
  }
  if (discovery_timer_) sched_.cancel(*discovery_timer_);
  discovery_timer_.reset();
  discovery_pending_ = false;
  ++discoveries_;
  for (auto& r : routes_)
    if (r.discover) {
      r.resolving = true;
      if (!r.found) r.state = RouteState::Resolving;
    }
  last_discovery_at_ = now;
  std::weak_ptr<int> alive = alive_;
  discovery_.start(std::move(targets), [this, alive](const fabric::DiscoveryResult& r) {
    if (alive.expired() || !running_) return;
    on_discovery(r);
  }, std::move(hints));
  (void)why;
}

void Agent::on_discovery(const fabric::DiscoveryResult& res) {
  const TimePoint now = sched_.now();
  last_discovery_at_ = now;
  last_result_ = res;
  for (std::size_t i = 0; i < routes_.size(); ++i) {
    PeerRoute& r = routes_[i];
    if (!r.discover) continue;
    const PeerRoute before = r;
    r.resolving = false;
    auto it = res.found.find(r.guid);
    if (it == res.found.end()) {
      r.state = RouteState::NotFound;
      r.searched = fabric::searched_text(res);
      report_route(i, before);
      continue;
    }
    const fabric::ResolvedPort& p = it->second;
    const PeerAddress& conf = configured_[i];
    PeerAddress& eff = cfg_.peers[i];
    r.found = true;
    ++r.resolutions;
    if (p.description_known) r.description = p.description;
    r.state = RouteState::Resolved;
    if (conf.lid.value != 0) {
      if (p.lid_known && p.lid.value != 0 && p.lid != conf.lid)  // 0: no SM has given one yet
        sink_.error(make_error(Errc::RouteMismatch, "peer " + to_string(r.guid) + " is at LID " +
                                                     std::to_string(p.lid.value) +
                                                     " but its configured lid is " +
                                                     std::to_string(conf.lid.value)),
                    now);
    } else if (p.lid_known) {
      eff.lid = p.lid;  // 0 (no SM has given it one yet): polled by DR only
    }
    if (conf.dr) {
      if (*conf.dr != p.path)
        sink_.error(make_error(Errc::RouteMismatch, "peer " + to_string(r.guid) + " is at DR path " +
                                                     to_string(p.path) + " but its configured dr_path is " +
                                                     to_string(*conf.dr)),
                    now);
    } else if (!p.path.hops.empty()) {
      eff.dr = p.path;
    }
    r.lid = eff.lid;
    r.dr = eff.dr;
    report_route(i, before);
  }
  // Background refresh.
  if (discovery_timer_) sched_.cancel(*discovery_timer_);
  discovery_timer_.reset();
  if (discovery_pending_) {
    discovery_pending_ = false;
    request_discovery("pending");
    return;
  }
  // A search in which not even our own node answered (every request timed
  // out: a starved transport, as under a loaded ibsim) says nothing about the
  // fabric: tried again soon, not after the background interval.
  const Duration next = res.nodes == 0 && !res.missing.empty()
                            ? std::max<Duration>(cfg_.rediscover_min_gap, seconds(1))
                            : cfg_.rediscover_interval;
  std::weak_ptr<int> alive = alive_;
  discovery_timer_ = sched_.schedule_at(now + next, [this, alive] {
    if (alive.expired()) return;
    discovery_timer_.reset();
    request_discovery("refresh");
  });
}

// A peer_route event when what discovery says about peer `i` changed.
void Agent::report_route(std::size_t i, const PeerRoute& before) {
  const PeerRoute& r = routes_[i];
  if (r.status() == before.status() && r.lid == before.lid && r.dr == before.dr &&
      r.description == before.description)
    return;
  std::string name = to_string(r.guid);
  for (const auto& p : cfg_.policy.peers)
    if (p.guid == r.guid) name = p.name;
  sm::RecordEvent e{sm::EventKind::PeerRoute,
                    name + " (" + to_string(r.guid) + ") \"" + printable(r.description) + "\": " + r.status(),
                    "lid " + std::to_string(r.lid.value) + ", dr " + (r.dr ? to_string(*r.dr) : "-"),
                    {r.guid}};
  sink_.event(e, sched_.now());
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

void Agent::start_walk() {
  if (!running_ || !cfg_.census.enabled) return;
  if (walk_timer_) sched_.cancel(*walk_timer_);
  walk_timer_.reset();
  census_stats_.next_walk_at.reset();
  std::weak_ptr<int> alive = alive_;
  read_own_description();  // if the read at start failed
  survey_.survey([this, alive](const fabric::DiscoveryResult& r) {
    if (alive.expired() || !running_) return;
    on_walk(r);
  });
}

// Our own node's NodeDescription (one SubnGet on DR hop 0), once: the census
// and the events name this head with it.
void Agent::read_own_description() {
  if (!own_description_.empty() || own_description_pending_) return;
  own_description_pending_ = true;
  mad::RequestOptions o = cfg_.census.query;
  o.m_key = cfg_.m_key;
  std::weak_ptr<int> alive = alive_;
  mad_.get_node_description(DrPath{}, o, [this, alive](Result<mad::NodeDescriptionReply> d) {
    if (alive.expired()) return;
    own_description_pending_ = false;
    if (d.ok()) own_description_ = d->text;
  });
}

void Agent::on_walk(const fabric::DiscoveryResult& r) {
  const TimePoint now = sched_.now();
  ++census_stats_.walks;
  census_stats_.walk_mads += r.mads;
  census_stats_.last_walk = r;
  census_stats_.last_walk_at = now;
  census_.walked(r.sm_ports, !r.request_bound && !r.hop_bound, now);
  census_.known_ports(r.probed);
  if (walk_observer_) walk_observer_(r);
  reporter_.on_walk(r, now);
  serve_report();
  recheck_ports_.clear();
  recheck_next_ = 0;
  for (const auto& p : r.probed) {
    if (p.port_guid == cfg_.policy.own_guid) continue;
    if (std::any_of(cfg_.peers.begin(), cfg_.peers.end(), [&](const PeerAddress& a) { return a.guid == p.port_guid; }))
      continue;
    recheck_ports_.push_back(p);
  }
  // The next walk: its MADs spread at walk_mads_per_s on average.
  const auto& c = cfg_.census;
  Duration gap = c.walk_min_interval;
  if (c.walk_mads_per_s > 0) {
    const auto spread = std::chrono::duration_cast<Duration>(
        std::chrono::duration<double>(static_cast<double>(r.mads) / c.walk_mads_per_s));
    gap = std::clamp<Duration>(spread, c.walk_min_interval, std::max(c.walk_min_interval, c.walk_max_interval));
  }
  census_stats_.next_walk_at = now + gap;
  std::weak_ptr<int> alive = alive_;
  walk_timer_ = sched_.schedule_at(now + gap, [this, alive] {
    if (alive.expired()) return;
    walk_timer_.reset();
    start_walk();
  });
  // An SM the walk just found is asked at once, not at the next tick.
  bool fresh = false;
  for (const auto& p : r.sm_ports) {
    auto it = census_.entries().find(p.port_guid);
    if (it != census_.entries().end() && !it->second.head && it->second.answers == 0) fresh = true;
  }
  if (fresh) census_queries();
}

void Agent::census_tick() {
  if (!running_ || !cfg_.census.enabled) return;
  if (census_timer_) sched_.cancel(*census_timer_);
  std::weak_ptr<int> alive = alive_;
  census_timer_ = sched_.schedule_at(sched_.now() + cfg_.census.query_interval, [this, alive] {
    if (alive.expired()) return;
    census_timer_.reset();
    census_tick();
  });
  census_rechecks();
  census_queries();
  update_impostor_alarm();  // an impostor no longer seen clears it
}

// impostor_sm: raised when a port is first seen answering as a head,
// refreshed (no new event) while the same ports keep at it, cleared when
// none has for 4 x the census expiry or their ports lost IsSM.
void Agent::update_impostor_alarm() {
  const TimePoint now = sched_.now();
  const std::string text = census_.impostor_text(now);
  if (text == impostor_alarm_) return;
  std::set<Guid> ports;
  for (const auto& imp : census_.impostors(now)) ports.insert(imp.port);
  const bool grew = std::any_of(ports.begin(), ports.end(), [&](Guid p) { return !impostor_ports_.count(p); });
  impostor_alarm_ = text;
  impostor_ports_ = std::move(ports);
  if (text.empty()) sink_.clear(sm::ClearAlarm{sm::AlarmKind::ImpostorSm}, now);
  else sink_.alarm(sm::RaiseAlarm{sm::AlarmKind::ImpostorSm, text, !grew}, now);
}

// PortInfo of the next few ports the last walk read: IsSM appearing or gone
// between walks. A port that turns IsSM is asked for SMInfo (and its
// NodeDescription read) at once.
void Agent::census_rechecks() {
  if (recheck_ports_.empty()) return;
  std::weak_ptr<int> alive = alive_;
  mad::RequestOptions o = cfg_.census.query;
  o.m_key = cfg_.m_key;
  const std::size_t n = std::min(cfg_.census.rechecks, recheck_ports_.size());
  for (std::size_t k = 0; k < n; ++k) {
    const fabric::SmPort port = recheck_ports_[recheck_next_ % recheck_ports_.size()];
    recheck_next_ = (recheck_next_ + 1) % recheck_ports_.size();
    mad_.get_port_info(port.path, port.port_num, o, [this, alive, port, o](Result<mad::PortInfoReply> r) {
      if (alive.expired() || !running_) return;
      census_stats_.recheck_mads += mads_of(r, o);
      if (!r.ok()) return;
      const bool is_sm = mad::is_sm(r->info);
      auto before = census_.entries().find(port.port_guid);
      const bool was = before != census_.entries().end() && before->second.is_sm;
      fabric::SmPort p = port;
      p.lid = r->info.lid;
      census_.rechecked(p, is_sm, sched_.now());
      if (!is_sm || was) return;
      // New: its name, then its SMInfo (the SMInfo that makes it live, and
      // so raises the alarm, comes after the name is known).
      mad_.get_node_description(port.path, o, [this, alive, g = port.port_guid, o](
                                                  Result<mad::NodeDescriptionReply> d) {
        if (alive.expired() || !running_) return;
        census_stats_.recheck_mads += mads_of(d, o);
        if (d.ok()) census_.described(g, d->text);
        census_queries();  // named first: the alarm's text carries the name
      });
    });
  }
}

// SMInfo, by its DR path (or its LID when only the SA's IsSM table listed
// it), of every SM the census found that is not a head (the heads are polled
// every round), at most max_queries of them.
void Agent::census_queries() {
  if (!running_ || !cfg_.census.enabled) return;
  std::weak_ptr<int> alive = alive_;
  std::size_t sent = 0;
  mad::RequestOptions o = cfg_.census.query;
  o.m_key = cfg_.m_key;
  for (const auto& [g, e] : census_.entries()) {
    if (sent >= cfg_.census.max_queries) break;
    // By DR path (a walk or recheck found it), else by LID (the SA's IsSM table).
    if (e.head || !e.is_sm || (!e.path && e.lid.value == 0)) continue;
    ++sent;
    const Guid guid = g;
    const Lid lid = e.lid;
    mad_.get_sminfo(e.path ? mad::Target{*e.path} : mad::Target{e.lid}, o, [this, alive, guid, lid, o](Result<mad::SmInfoReply> r) {
      if (alive.expired() || !running_) return;
      census_stats_.query_mads += mads_of(r, o);
      if (r.ok()) {
        ++census_stats_.query_answers;
        // The port's SM answers with its own GUID: the port GUID it sits on.
        // A head's GUID from this port is an impostor: never the head's answer.
        census_.answered_at(guid, r->info, lid, sched_.now());
        update_impostor_alarm();
      } else {
        census_.missed(guid);
      }
    });
  }
}

// SubnAdmGetTable(SMInfoRecord) to the SA at our port's MasterSMLID (the
// master, which lists itself and the SMs its sweeps found), then again after
// sa_interval. A table cut short only adds and refreshes.
void Agent::census_sa() {
  if (!running_ || !cfg_.census.enabled) return;
  std::weak_ptr<int> alive = alive_;
  if (sa_timer_) sched_.cancel(*sa_timer_);
  sa_timer_ = sched_.schedule_at(sched_.now() + cfg_.census.sa_interval, [this, alive] {
    if (alive.expired()) return;
    sa_timer_.reset();
    census_sa();
  });
  auto& st = census_stats_;
  const Lid sa_lid = last_local_pi_ ? last_local_pi_->sm_lid : Lid{};
  if (sa_lid.value == 0 || sa_lid.value >= 0xc000) {
    st.sa_last_error = "no master SM LID on our port yet";
    return;
  }
  ++st.sa_queries;
  st.sa_lid = sa_lid;
  const mad::RequestOptions o = cfg_.census.sa_query;
  mad_.get_sminfo_records(sa_lid, o, [this, alive, o](Result<mad::SmInfoRecordsReply> r) {
    if (alive.expired() || !running_) return;
    auto& st = census_stats_;
    st.sa_mads += mads_of(r, o);
    if (!r.ok()) {
      st.sa_last_error = to_string(r.error());
      return;
    }
    const auto& t = r->table;
    ++st.sa_tables;
    if (t.truncated) ++st.sa_truncated;
    st.sa_last_at = sched_.now();
    st.sa_records = t.records.size();
    st.sa_claimed = t.claimed;
    st.sa_last_truncated = t.truncated;
    st.sa_last_error.clear();
    census_.sa_table(t.records, !t.truncated, sched_.now());
  });
  census_sa_is_sm(sa_lid);
}

// SubnAdmGetTable(PortInfoRecord) of the IsSM ports, to the same SA: one
// request that lists every port an SM is bound to, whatever its SM_Key or
// state (an SM with another SM_Key is in no SMInfoRecord table). A LID the
// census does not know as IsSM is resolved (NodeInfo: its port GUID, then
// its NodeDescription) and its SM asked by LID (census_queries).
void Agent::census_sa_is_sm(Lid sa_lid) {
  std::weak_ptr<int> alive = alive_;
  ++census_stats_.ism_queries;
  const mad::RequestOptions o = cfg_.census.sa_query;
  mad_.get_is_sm_port_records(sa_lid, o, [this, alive, o](Result<mad::PortInfoRecordsReply> r) {
    if (alive.expired() || !running_) return;
    auto& st = census_stats_;
    st.ism_mads += mads_of(r, o);
    if (!r.ok()) {
      st.ism_last_error = to_string(r.error());
      return;
    }
    const auto& t = r->table;
    ++st.ism_tables;
    if (t.truncated) ++st.ism_truncated;
    st.ism_last_at = sched_.now();
    st.ism_records = t.records.size();
    st.ism_last_truncated = t.truncated;
    st.ism_last_error.clear();
    std::vector<Lid> lids;
    std::size_t resolves = 0;
    const Lid own = last_local_pi_ ? last_local_pi_->lid : Lid{};
    for (const auto& rec : t.records) {
      if (!mad::is_sm(rec.info) || rec.lid.value == 0 || rec.lid.value >= 0xc000) continue;
      lids.push_back(rec.lid);
      if (rec.lid == own) continue;
      const fabric::CensusEntry* e = census_.by_lid(rec.lid);
      if (e && (e->is_sm || e->head)) continue;  // known: the census queries keep asking it
      if (resolves >= cfg_.census.max_queries || ism_resolving_.count(rec.lid.value)) continue;
      ++resolves;
      census_sa_port(rec.lid);
    }
    if (!t.truncated) census_.sa_is_sm_table(lids);
  });
}

// A port the SA lists with IsSM that the census does not know: its port GUID
// (NodeInfo by LID), its name, then its SMInfo (census_queries, by LID; an
// answer carrying a head's GUID is an impostor there).
void Agent::census_sa_port(Lid lid) {
  std::weak_ptr<int> alive = alive_;
  mad::RequestOptions o = cfg_.census.query;
  o.m_key = cfg_.m_key;
  ism_resolving_.insert(lid.value);
  mad_.get_node_info(mad::Target{lid}, o, [this, alive, lid, o](Result<mad::NodeInfoReply> n) {
    if (alive.expired()) return;
    ism_resolving_.erase(lid.value);
    if (!running_) return;
    census_stats_.ism_resolve_mads += mads_of(n, o);
    if (!n.ok()) return;
    const Guid port = n->info.port_guid;
    const bool known = census_.entries().count(port) && census_.entries().at(port).is_sm;
    census_.sa_is_sm(port, lid, sched_.now());
    if (known) return;
    ++census_stats_.ism_found;
    mad_.get_node_description(mad::Target{lid}, o, [this, alive, port, o](Result<mad::NodeDescriptionReply> d) {
      if (alive.expired() || !running_) return;
      census_stats_.ism_resolve_mads += mads_of(d, o);
      if (d.ok()) census_.described(port, d->text);
      census_queries();  // named first: the alarm's text carries the name
    });
  });
}

// After a round: its SMInfo answers go into the census, and the live SMs that
// are not heads into the round's other_sms (the engine's unknown_sm alarm).
void Agent::census_round(Round& round) {
  const TimePoint now = sched_.now();
  if (round.obs.local.info)
    census_.answered(*round.obs.local.info, fabric::kFromPoll, round.local_pi ? round.local_pi->lid : Lid{}, now);
  for (std::size_t i = 0; i < round.obs.peers.size(); ++i) {
    const auto& p = round.obs.peers[i];
    if (p.via_lid.info) census_.answered(*p.via_lid.info, fabric::kFromPoll, cfg_.peers[i].lid, now);
    else if (p.via_dr.info) census_.answered(*p.via_dr.info, fabric::kFromPoll, Lid{}, now);
  }
  if (round.obs.port_master.info && round.local_pi)
    census_.answered(*round.obs.port_master.info, fabric::kFromMasterSmLid, round.local_pi->sm_lid, now);
  // The heads' names: the peers' from discovery, ours read once.
  for (const auto& r : routes_)
    if (!r.description.empty()) census_.described(r.guid, r.description);
  if (!own_description_.empty()) census_.described(cfg_.policy.own_guid, own_description_);
  census_.expire(now);
  if (cfg_.census.enabled) round.obs.other_sms = census_.others(now);
}

}  // namespace smha::agent
