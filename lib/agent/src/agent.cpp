#include "smha/agent/agent.hpp"

#include <algorithm>

namespace smha::agent {

namespace {

mad::RequestOptions request_for(const AgentConfig& cfg) {
  if (cfg.request) return *cfg.request;
  mad::RequestOptions o;
  // Short attempts: an SMInfo round trip takes microseconds on hardware and a
  // few milliseconds under ibsim; a round of three attempts stays well inside
  // the interval.
  o.timeout = std::clamp<Duration>(cfg.policy.poll_interval / 10, milliseconds(5), milliseconds(25));
  o.retries = 2;
  return o;
}

sm::HaPolicy policy_for(const AgentConfig& cfg) {
  sm::HaPolicy p = cfg.policy;
  p.attempts_per_query = request_for(cfg).retries + 1;
  return p;
}

sm::Probe to_probe(const Result<mad::SmInfoReply>& r, int max_attempts) {
  if (r.ok()) return sm::Probe::answered(r->info, r->attempts);
  return sm::Probe::unanswered(max_attempts);
}

}  // namespace

struct Agent::Round {
  sm::PollRound obs;
  int outstanding = 0;
};

Agent::Agent(AgentConfig cfg, Scheduler& sched, mad::MadTransport& mad, OpensmControl& opensm,
             EventSink& sink)
    : cfg_(std::move(cfg)),
      sched_(sched),
      mad_(mad),
      opensm_(opensm),
      sink_(sink),
      machine_(policy_for(cfg_)),
      req_(request_for(cfg_)),
      alive_(std::make_shared<int>(0)) {}

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
  step(sm::ProcessChanged{opensm_.state()});
  begin_round();
}

void Agent::stop() {
  if (!running_) return;
  running_ = false;
  alive_.reset();
  round_.reset();
  if (poll_timer_) sched_.cancel(*poll_timer_);
  if (wake_timer_) sched_.cancel(*wake_timer_);
  poll_timer_.reset();
  wake_timer_.reset();
  opensm_.set_exit_handler(nullptr);
}

void Agent::request_handover(std::optional<Guid> target) {
  if (!running_) return;
  step(sm::HandoverRequest{target});
}

void Agent::begin_round() {
  poll_timer_.reset();
  if (!running_) return;
  round_started_ = sched_.now();
  auto round = std::make_shared<Round>();
  round_ = round;
  const int attempts = req_.retries + 1;
  std::weak_ptr<int> alive = alive_;
  auto done = [this, alive, round]() {
    if (alive.expired() || round_ != round) return;
    if (--round->outstanding == 0) finish_round();
  };

  // Count every query first: a transport never calls back from inside the call,
  // but keep the count right even if one did.
  round->outstanding = 1;
  for (const auto& p : cfg_.peers) round->obs.peers.push_back(sm::PeerProbe{p.guid, {}, {}, {}});
  for (const auto& p : cfg_.peers) round->outstanding += p.dr ? 2 : 1;

  mad_.get_sminfo(DrPath{}, req_, [round, attempts, done](Result<mad::SmInfoReply> r) {
    round->obs.local = to_probe(r, attempts);
    done();
  });
  for (std::size_t i = 0; i < cfg_.peers.size(); ++i) {
    const auto& p = cfg_.peers[i];
    mad_.get_sminfo(p.lid, req_, [round, i, attempts, done](Result<mad::SmInfoReply> r) {
      round->obs.peers[i].via_lid = to_probe(r, attempts);
      done();
    });
    if (p.dr) {
      mad_.get_sminfo(*p.dr, req_, [round, i, attempts, done](Result<mad::SmInfoReply> r) {
        round->obs.peers[i].via_dr = to_probe(r, attempts);
        done();
      });
    }
  }
}

void Agent::finish_round() {
  auto round = std::move(round_);
  round_.reset();
  ++rounds_;
  round->obs.process = opensm_.state();
  round->obs.local_port = local_port_ ? local_port_() : sm::PortState::Up;
  for (auto& p : round->obs.peers) p.port = peer_port_ ? peer_port_(p.guid) : sm::PortState::Unknown;
  const bool soon = step(round->obs);
  if (!running_ || poll_timer_) return;
  const TimePoint next = soon ? sched_.now() + cfg_.policy.poll_interval / 10
                              : std::max(sched_.now(), round_started_ + cfg_.policy.poll_interval);
  std::weak_ptr<int> alive = alive_;
  poll_timer_ = sched_.schedule_at(next, [this, alive] {
    if (alive.expired()) return;
    begin_round();
  });
}

bool Agent::step(const sm::Observation& obs) {
  auto d = machine_.step(obs, sched_.now());
  apply(d);
  return d.poll_soon;
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
  for (const auto& a : d.actions) {
    Status st;
    if (std::holds_alternative<sm::SendDiscover>(a)) {
      // SubnSet(SMInfo, DISCOVER) to our own SM; OpenSM wants payload state MASTER.
      SmInfo payload;
      payload.guid = cfg_.policy.own_guid;
      payload.state = SmState::Master;
      std::weak_ptr<int> alive = alive_;
      mad_.set_sminfo(DrPath{}, SmInfoModifier::Discover, payload, req_,
                      [this, alive](Result<mad::SmInfoReply> r) {
                        if (alive.expired() || r.ok()) return;
                        sink_.error(make_error(r.error().code, "DISCOVER to local SM: " +
                                                                   r.error().message),
                                    sched_.now());
                      });
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
      sink_.event(*s, now);
    } else if (const auto* s = std::get_if<sm::RunHook>(&a)) {
      sink_.hook(*s, now);
    }
    if (!st.ok()) sink_.error(st.error(), now);
  }
  arm_wakeup(d.next_wakeup);
}

}  // namespace smha::agent
