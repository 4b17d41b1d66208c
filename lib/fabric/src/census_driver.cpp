// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/fabric/census_driver.hpp"

#include <algorithm>
#include <chrono>

namespace smha::fabric {

namespace {

// MADs a finished request cost: its attempts, or all of them when it timed
// out (1 when it failed otherwise).
template <typename Reply>
std::uint64_t mads_of(const Result<Reply>& r, const mad::RequestOptions& o) {
  if (r.ok()) return static_cast<std::uint64_t>(r->attempts);
  return r.error().code == mad::kErrTimeout ? static_cast<std::uint64_t>(o.retries) + 1 : 1;
}

}  // namespace

CensusDriver::CensusDriver(CensusConfig cfg, Scheduler& sched, mad::MadTransport& mad, AlarmSink& sink, Guid own,
                           std::vector<Guid> peers, std::uint64_t m_key)
    : cfg_(cfg),
      sched_(sched),
      mad_(mad),
      sink_(sink),
      own_guid_(own),
      peers_(std::move(peers)),
      m_key_(m_key),
      survey_(sched, mad, cfg_.walk),
      census_(cfg_.limits) {
  census_.set_heads(own_guid_, peers_);
}

CensusDriver::~CensusDriver() { stop(); }

void CensusDriver::start() {
  if (running_) return;
  running_ = true;
  alive_ = std::make_shared<int>(0);
  std::weak_ptr<int> alive = alive_;
  if (cfg_.enabled) {
    read_own_description();
    walk_timer_ = sched_.schedule_at(sched_.now() + cfg_.first_walk_delay, [this, alive] {
      if (alive.expired()) return;
      walk_timer_.reset();
      start_walk();
    });
    census_stats_.next_walk_at = sched_.now() + cfg_.first_walk_delay;
    census_timer_ = sched_.schedule_at(sched_.now() + cfg_.query_interval, [this, alive] {
      if (alive.expired()) return;
      census_timer_.reset();
      census_tick();
    });
    if (cfg_.sa_interval > Duration::zero())
      sa_timer_ = sched_.schedule_at(sched_.now() + cfg_.sa_first_delay, [this, alive] {
        if (alive.expired()) return;
        sa_timer_.reset();
        census_sa();
      });
  }
}

void CensusDriver::stop() {
  if (!running_) return;
  running_ = false;
  alive_.reset();
  if (walk_timer_) sched_.cancel(*walk_timer_);
  if (census_timer_) sched_.cancel(*census_timer_);
  if (sa_timer_) sched_.cancel(*sa_timer_);
  sa_timer_.reset();
  walk_timer_.reset();
  census_timer_.reset();
  survey_.cancel();
}

void CensusDriver::start_walk() {
  if (!running_ || !cfg_.enabled) return;
  if (walk_timer_) sched_.cancel(*walk_timer_);
  walk_timer_.reset();
  census_stats_.next_walk_at.reset();
  std::weak_ptr<int> alive = alive_;
  read_own_description();  // if the read at start failed
  survey_.survey([this, alive](const DiscoveryResult& r) {
    if (alive.expired() || !running_) return;
    on_walk(r);
  });
}

// Our own node's NodeDescription (one SubnGet on DR hop 0), once: the census
// and the events name this head with it.
void CensusDriver::read_own_description() {
  if (!own_description_.empty() || own_description_pending_) return;
  own_description_pending_ = true;
  mad::RequestOptions o = cfg_.query;
  o.m_key = m_key_;
  std::weak_ptr<int> alive = alive_;
  mad_.get_node_description(DrPath{}, o, [this, alive](Result<mad::NodeDescriptionReply> d) {
    if (alive.expired()) return;
    own_description_pending_ = false;
    if (d.ok()) own_description_ = d->info;
  });
}

void CensusDriver::on_walk(const DiscoveryResult& r) {
  const TimePoint now = sched_.now();
  ++census_stats_.walks;
  census_stats_.walk_mads += r.mads;
  census_stats_.last_walk = r;
  census_stats_.last_walk_at = now;
  census_.walked(r.sm_ports, !r.request_bound && !r.hop_bound, now);
  census_.known_ports(r.probed);
  if (walk_handler_) walk_handler_(r);
  recheck_ports_.clear();
  recheck_next_ = 0;
  for (const auto& p : r.probed) {
    if (p.port_guid == own_guid_) continue;
    if (std::find(peers_.begin(), peers_.end(), p.port_guid) != peers_.end()) continue;
    recheck_ports_.push_back(p);
  }
  // The next walk: its MADs spread at walk_mads_per_s on average.
  const auto& c = cfg_;
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

void CensusDriver::census_tick() {
  if (!running_ || !cfg_.enabled) return;
  if (census_timer_) sched_.cancel(*census_timer_);
  std::weak_ptr<int> alive = alive_;
  census_timer_ = sched_.schedule_at(sched_.now() + cfg_.query_interval, [this, alive] {
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
void CensusDriver::update_impostor_alarm() {
  const TimePoint now = sched_.now();
  const std::string text = census_.impostor_text(now);
  if (text == impostor_alarm_) return;
  std::set<Guid> ports;
  for (const auto& imp : census_.impostors(now)) ports.insert(imp.port);
  const bool grew = std::any_of(ports.begin(), ports.end(), [&](Guid p) { return !impostor_ports_.count(p); });
  impostor_alarm_ = text;
  impostor_ports_ = std::move(ports);
  if (text.empty()) sink_.clear(ClearAlarm{AlarmKind::ImpostorSm}, now);
  else sink_.alarm(RaiseAlarm{AlarmKind::ImpostorSm, text, !grew}, now);
}

// PortInfo of the next few ports the last walk read: IsSM appearing or gone
// between walks. A port that turns IsSM is asked for SMInfo (and its
// NodeDescription read) at once.
void CensusDriver::census_rechecks() {
  if (recheck_ports_.empty()) return;
  std::weak_ptr<int> alive = alive_;
  mad::RequestOptions o = cfg_.query;
  o.m_key = m_key_;
  const std::size_t n = std::min(cfg_.rechecks, recheck_ports_.size());
  for (std::size_t k = 0; k < n; ++k) {
    const SmPort port = recheck_ports_[recheck_next_ % recheck_ports_.size()];
    recheck_next_ = (recheck_next_ + 1) % recheck_ports_.size();
    mad_.get_port_info(port.path, port.port_num, o, [this, alive, port, o](Result<mad::PortInfoReply> r) {
      if (alive.expired() || !running_) return;
      census_stats_.recheck_mads += mads_of(r, o);
      if (!r.ok()) return;
      const bool is_sm = mad::is_sm(r->info);
      auto before = census_.entries().find(port.port_guid);
      const bool was = before != census_.entries().end() && before->second.is_sm;
      SmPort p = port;
      p.lid = r->info.lid;
      census_.rechecked(p, is_sm, sched_.now());
      if (!is_sm || was) return;
      // New: its name, then its SMInfo (the SMInfo that makes it live, and
      // so raises the alarm, comes after the name is known).
      mad_.get_node_description(port.path, o, [this, alive, g = port.port_guid, o](
                                                  Result<mad::NodeDescriptionReply> d) {
        if (alive.expired() || !running_) return;
        census_stats_.recheck_mads += mads_of(d, o);
        if (d.ok()) census_.described(g, d->info);
        census_queries();  // named first: the alarm's text carries the name
      });
    });
  }
}

// SMInfo, by its DR path (or its LID when only the SA's IsSM table listed
// it), of every SM the census found that is not a head (the heads are polled
// every round), at most max_queries of them.
void CensusDriver::census_queries() {
  if (!running_ || !cfg_.enabled) return;
  std::weak_ptr<int> alive = alive_;
  std::size_t sent = 0;
  mad::RequestOptions o = cfg_.query;
  o.m_key = m_key_;
  for (const auto& [g, e] : census_.entries()) {
    if (sent >= cfg_.max_queries) break;
    // By DR path (a walk or recheck found it), else by LID (the SA's IsSM table).
    if (e.head || !e.is_sm || (!e.path && e.lid.value == 0)) continue;
    ++sent;
    const Guid guid = g;
    const Lid lid = e.lid;
    const mad::Target target = e.path ? mad::Target{*e.path} : mad::Target{e.lid};
    mad_.get_sminfo(target, o, [this, alive, guid, lid, o](Result<mad::SmInfoReply> r) {
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
void CensusDriver::census_sa() {
  if (!running_ || !cfg_.enabled) return;
  std::weak_ptr<int> alive = alive_;
  if (sa_timer_) sched_.cancel(*sa_timer_);
  sa_timer_ = sched_.schedule_at(sched_.now() + cfg_.sa_interval, [this, alive] {
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
  const mad::RequestOptions o = cfg_.sa_query;
  mad_.get_sminfo_records(sa_lid, o, [this, alive, o](Result<mad::SmInfoRecordsReply> r) {
    if (alive.expired() || !running_) return;
    auto& st = census_stats_;
    st.sa_mads += mads_of(r, o);
    if (!r.ok()) {
      st.sa_last_error = to_string(r.error());
      return;
    }
    const auto& t = r->info;
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
void CensusDriver::census_sa_is_sm(Lid sa_lid) {
  std::weak_ptr<int> alive = alive_;
  ++census_stats_.ism_queries;
  const mad::RequestOptions o = cfg_.sa_query;
  mad_.get_is_sm_port_records(sa_lid, o, [this, alive, o](Result<mad::PortInfoRecordsReply> r) {
    if (alive.expired() || !running_) return;
    auto& st = census_stats_;
    st.ism_mads += mads_of(r, o);
    if (!r.ok()) {
      st.ism_last_error = to_string(r.error());
      return;
    }
    const auto& t = r->info;
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
      const CensusEntry* e = census_.by_lid(rec.lid);
      if (e && (e->is_sm || e->head)) continue;  // known: the census queries keep asking it
      if (resolves >= cfg_.max_queries || ism_resolving_.count(rec.lid.value)) continue;
      ++resolves;
      census_sa_port(rec.lid);
    }
    if (!t.truncated) census_.sa_is_sm_table(lids);
  });
}

// A port the SA lists with IsSM that the census does not know: its port GUID
// (NodeInfo by LID), its name, then its SMInfo (census_queries, by LID; an
// answer carrying a head's GUID is an impostor there).
void CensusDriver::census_sa_port(Lid lid) {
  std::weak_ptr<int> alive = alive_;
  mad::RequestOptions o = cfg_.query;
  o.m_key = m_key_;
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
      if (d.ok()) census_.described(port, d->info);
      census_queries();  // named first: the alarm's text carries the name
    });
  });
}

// After a round: its SMInfo answers go into the census, and the live SMs that
// are not heads into the round's other_sms (the engine's unknown_sm alarm).
std::vector<sm::OtherSm> CensusDriver::round(const sm::PollRound& obs, const std::optional<mad::PortInfo>& local_pi,
                                             const std::vector<Lid>& peer_lids,
                                             const std::vector<std::pair<Guid, std::string>>& peer_names) {
  if (local_pi) last_local_pi_ = local_pi;  // where census_sa() asks the SA
  const TimePoint now = sched_.now();
  if (obs.local.info) census_.answered(*obs.local.info, kFromPoll, local_pi ? local_pi->lid : Lid{}, now);
  for (std::size_t i = 0; i < obs.peers.size(); ++i) {
    const auto& p = obs.peers[i];
    if (p.via_lid.info) census_.answered(*p.via_lid.info, kFromPoll, peer_lids[i], now);
    else if (p.via_dr.info) census_.answered(*p.via_dr.info, kFromPoll, Lid{}, now);
  }
  if (obs.port_master.info && local_pi)
    census_.answered(*obs.port_master.info, kFromMasterSmLid, local_pi->sm_lid, now);
  // The heads' names: the peers' from discovery, ours read once.
  for (const auto& [guid, description] : peer_names)
    if (!description.empty()) census_.described(guid, description);
  if (!own_description_.empty()) census_.described(own_guid_, own_description_);
  census_.expire(now);
  if (cfg_.enabled) return census_.others(now);
  return {};
}

}  // namespace smha::fabric
