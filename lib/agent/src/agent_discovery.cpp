// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// Agent: the peers' routes by directed-route discovery (agent.hpp, "Discovery"):
// when a search runs, what it found, and the peer_route events. The poll loop
// and the triggers it checks after each round are in agent.cpp.
#include "smha/agent/agent.hpp"

#include <algorithm>

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

}  // namespace smha::agent
