// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/fabric/watchers.hpp"

#include <cstdio>

namespace smha::fabric {

namespace {

// Health rides on the census walks: no walks, no health.
HealthConfig health_config(const WatchersConfig& cfg) {
  HealthConfig h = cfg.health;
  h.enabled = h.enabled && cfg.walks;
  return h;
}

ErrorsConfig errors_config(const WatchersConfig& cfg) {
  ErrorsConfig e = cfg.errors;
  e.enabled = e.enabled && cfg.walks;
  return e;
}

}  // namespace

Watchers::Watchers(WatchersConfig cfg, WatchersSeams seams, Guid own,
                   std::vector<std::pair<std::string, Guid>> peers)
    : cfg_(std::move(cfg)),
      seams_(std::move(seams)),
      alive_(std::make_shared<int>(0)),
      drift_(cfg_.drift, seams_.sched, seams_.mad, own, std::move(peers), seams_.alarms),
      health_(health_config(cfg_), seams_.sched, seams_.mad, seams_.alarms),
      errors_(errors_config(cfg_), seams_.sched, seams_.mad, seams_.alarms),
      reporter_(cfg_.routing_engines, cfg_.report_deadline) {
  reporter_.set_own(own);
  reporter_.set_walks(cfg_.walks);
  reporter_.set_log_followed(cfg_.opensm_log);
  reporter_.set_sa_probe(cfg_.report_sa_probe);
  if (cfg_.sa_copy) reporter_.set_sa_copy_source(cfg_.sa_copy);
  reporter_.set_emit([this](const TakeoverReport& r) {
    if (seams_.report) seams_.report(r, seams_.sched.now());
  });
}

Watchers::~Watchers() { stop(); }

void Watchers::start() {
  if (running_) return;
  running_ = true;
  alive_ = std::make_shared<int>(0);
  drift_.start();
}

void Watchers::stop() {
  if (!running_) return;
  running_ = false;
  alive_.reset();
  if (report_timer_) seams_.sched.cancel(*report_timer_);
  report_timer_.reset();
  if (sa_probe_timer_) seams_.sched.cancel(*sa_probe_timer_);
  sa_probe_timer_.reset();
  sa_probes_in_flight_ = 0;
  drift_.stop();
  health_.stop();
  errors_.stop();
  master_since_.reset();
}

void Watchers::round_polled(const sm::PollRound& round, const std::optional<mad::PortInfo>& local_pi) {
  const TimePoint at = round.sent_at.value_or(seams_.sched.now());  // the round's start
  reporter_.round_began(at);
  for (const auto& p : round.peers)
    for (const sm::Probe* probe : {&p.via_lid, &p.via_dr})
      if (probe->info && probe->info->state == SmState::Master) reporter_.master_seen(probe->info->guid, at);
  if (round.port_master.info && round.port_master.info->state == SmState::Master)
    reporter_.master_seen(round.port_master.info->guid, at);
  if (local_pi) {
    own_lid_ = local_pi->lid;
    drift_.set_sa_lid(local_pi->sm_lid);
  }
}

void Watchers::engine_stepped(std::span<const sm::RecordEvent> events, const sm::EngineStatus& status) {
  const TimePoint now = seams_.sched.now();
  // The report takes a step's state change after its other events: a
  // takeover seen in one round (our SM already MASTER) records
  // takeover_started after the state change.
  for (bool changes : {false, true})
    for (const auto& e : events)
      if ((e.kind == sm::EventKind::StateChanged) == changes) reporter_.on_event(e, now);
  serve_report();
  update_error_reading(status);
}

void Watchers::census_walked(const DiscoveryResult& walk) {
  health_.on_walk(walk);
  errors_.on_walk(walk);
  reporter_.on_walk(walk, seams_.sched.now());
  serve_report();
}

void Watchers::opensm_logged(const opensm::LoggedEvent& e) {
  reporter_.on_opensm_log(e, seams_.sched.now());
  serve_report();
}

// Error counters are read by the head whose OpenSM is MASTER, once it has
// been for errors.start_after: never by a head that may be taking over.
void Watchers::update_error_reading(const sm::EngineStatus& st) {
  if (!running_) return;
  const bool master = st.role == sm::Role::Master && st.local_state == SmState::Master;
  if (!master) {
    master_since_.reset();
    errors_.set_reading(false, "standby");
    return;
  }
  const TimePoint now = seams_.sched.now();
  if (!master_since_) master_since_ = now;
  if (now - *master_since_ >= cfg_.errors.start_after)
    errors_.set_reading(true);
  else
    errors_.set_reading(false, "waiting");
}

// The takeover report's walk (started when it asks) and its deadline.
void Watchers::serve_report() {
  if (!running_) return;
  const TimePoint now = seams_.sched.now();
  reporter_.tick(now);
  if (reporter_.wants_walk(now)) {
    reporter_.walk_started();
    if (seams_.start_walk) seams_.start_walk();
  }
  if (reporter_.wants_sa_answer() && !sa_probe_timer_ && sa_probes_in_flight_ == 0) probe_sa();
  if (auto groups = reporter_.take_group_check(); !groups.empty()) check_groups(std::move(groups));
  const auto at = reporter_.next_wakeup();
  if (report_timer_) seams_.sched.cancel(*report_timer_);
  report_timer_.reset();
  if (!at) return;
  std::weak_ptr<int> alive = alive_;
  report_timer_ = seams_.sched.schedule_at(std::max(*at, now), [this, alive] {
    if (alive.expired()) return;
    report_timer_.reset();
    serve_report();
  });
}

// The report's SA figures: our SA from MASTER on until it answers, as a
// compute node would find it (OpenSM drops every SA query until its first
// master sweep ends). SubnAdmGetTable(SMInfoRecord) to our own LID, a new one
// every kSaProbeEvery while fewer than kSaProbeInFlight are outstanding, so an
// answer slower than the interval still counts; the first answer ends it (an
// SA error status too: the SA is answering).
namespace {
constexpr Duration kSaProbeEvery = milliseconds(10);
constexpr Duration kSaProbeTimeout = milliseconds(250);
constexpr int kSaProbeInFlight = 8;
constexpr int kGroupChecksInFlight = 4;
}  // namespace

void Watchers::probe_sa() {
  sa_probe_timer_.reset();
  if (!running_ || !reporter_.wants_sa_answer()) return;
  const Lid own = own_lid_;
  std::weak_ptr<int> alive = alive_;
  if (own.value != 0 && sa_probes_in_flight_ < kSaProbeInFlight) {
    ++sa_probes_in_flight_;
    seams_.mad.get_sminfo_records(own, mad::RequestOptions{kSaProbeTimeout, 0, 0},
                                  [this, alive](Result<mad::SmInfoRecordsReply> r) {
                                    if (alive.expired()) return;
                                    --sa_probes_in_flight_;
                                    if (r.ok() || r.error().code == mad::kErrMadStatus) {
                                      reporter_.on_sa_answer(seams_.sched.now());
                                      serve_report();
                                    }
                                  });
  }
  sa_probe_timer_ = seams_.sched.schedule_at(seams_.sched.now() + kSaProbeEvery, [this, alive] {
    if (alive.expired()) return;
    probe_sa();
  });
}

// The report's group check: each group of the SA copy our OpenSM was given,
// asked of our SA by one of its full members (SubnAdmGet MCMemberRecord); the
// copy's MLID back is a group kept.
void Watchers::check_groups(std::vector<SaCopyInfo::Group> groups) {
  struct Check {
    std::vector<SaCopyInfo::Group> groups;
    std::size_t next = 0, done = 0, kept = 0;
    int in_flight = 0;
    std::vector<std::string> lost;
  };
  auto c = std::make_shared<Check>();
  c->groups = std::move(groups);
  const Lid own = own_lid_;
  std::weak_ptr<int> alive = alive_;
  auto pump = std::make_shared<std::function<void()>>();
  *pump = [this, c, own, alive, weak_pump = std::weak_ptr<std::function<void()>>(pump)] {
    while (c->in_flight < kGroupChecksInFlight && c->next < c->groups.size()) {
      const auto g = c->groups[c->next++];
      ++c->in_flight;
      auto again = weak_pump.lock();
      seams_.mad.get_mcmember(own, g.mgid, g.member, mad::RequestOptions{milliseconds(200), 1, 0},
                              [this, c, g, alive, again](Result<mad::McMemberReply> r) {
                                if (alive.expired()) return;
                                --c->in_flight;
                                ++c->done;
                                const std::string name = mad::to_string(g.mgid);
                                if (r.ok() && r->info == g.mlid) {
                                  ++c->kept;
                                } else if (c->lost.size() < kReportGroupsNamed) {
                                  char was[8];
                                  std::snprintf(was, sizeof was, "0x%04x", g.mlid.value);
                                  std::string why;
                                  if (r.ok()) {
                                    char now_mlid[8];
                                    std::snprintf(now_mlid, sizeof now_mlid, "0x%04x", r->info.value);
                                    why = std::string("MLID ") + now_mlid + ", was " + was;
                                  } else if (r.error().code == mad::kErrMadStatus &&
                                             r.error().mad_status == mad::kSaStatusNoRecords) {
                                    why = std::string("not on the new master (was MLID ") + was + ")";
                                  } else {
                                    why = "not answered: " + r.error().message;
                                  }
                                  c->lost.push_back(name + ": " + why);
                                }
                                if (c->done == c->groups.size()) {
                                  reporter_.on_groups_checked(c->groups.size(), c->kept, std::move(c->lost));
                                  serve_report();
                                } else if (again) {
                                  (*again)();
                                }
                              });
    }
  };
  (*pump)();  // the answers' callbacks hold the pump from here until the last one
}

}  // namespace smha::fabric
