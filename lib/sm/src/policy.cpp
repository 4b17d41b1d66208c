// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/sm/policy.hpp"

#include <algorithm>
#include <set>

#include "smha/core/limits.hpp"

namespace smha::sm {

std::string_view to_string(FailbackMode mode) {
  switch (mode) {
    case FailbackMode::Sticky: return "sticky";
    case FailbackMode::Preempt: return "preempt";
  }
  return "unknown";
}

std::optional<PolicyError> check(const HaPolicy& p) {
  auto bad = [](PolicyField field, std::string msg, std::size_t peer = 0) {
    return std::optional<PolicyError>(PolicyError{field, peer, make_error(Errc::Policy, std::move(msg))});
  };
  if (p.own_guid.value == 0) return bad(PolicyField::OwnGuid, "own_guid: must be a non-zero port GUID");
  if (p.peers.empty()) return bad(PolicyField::Peers, "peers: at least one other head is needed");
  std::set<std::uint64_t> guids{p.own_guid.value};
  for (std::size_t i = 0; i < p.peers.size(); ++i) {
    const auto& peer = p.peers[i];
    if (peer.guid.value == 0) return bad(PolicyField::PeerGuid, "peers[" + peer.name + "].guid: must be non-zero", i);
    if (!guids.insert(peer.guid.value).second)
      return bad(PolicyField::PeerGuid, "peers[" + peer.name + "].guid: " + to_string(peer.guid) + " is used twice",
                 i);
  }
  const auto range_text = [](limits::IntRange r) {
    return std::to_string(r.min) + " .. " + std::to_string(r.max);
  };
  if (p.poll_interval < milliseconds(limits::kPollIntervalMs.min) ||
      p.poll_interval > milliseconds(limits::kPollIntervalMs.max))
    return bad(PolicyField::PollInterval, "poll_interval: must be " + range_text(limits::kPollIntervalMs) + " ms");
  if (!limits::kMisses.contains(p.misses))
    return bad(PolicyField::Misses, "misses: must be " + range_text(limits::kMisses));
  if (!limits::kSmPriority.contains(p.base_priority))
    return bad(PolicyField::BasePriority, "base_priority: must be " + range_text(limits::kSmPriority));
  std::vector<std::uint8_t> configured{p.base_priority};
  for (std::size_t i = 0; i < p.peers.size(); ++i) {
    const auto& peer = p.peers[i];
    if (peer.priority && !limits::kSmPriority.contains(*peer.priority))
      return bad(PolicyField::PeerPriority,
                 "peers[" + peer.name + "].priority: must be " + range_text(limits::kSmPriority), i);
    configured.push_back(peer.priority.value_or(p.base_priority));
  }
  if (auto r = standby_priorities(configured); !r) return PolicyError{PolicyField::BasePriority, 0, r.error()};
  if (p.hang_timeout < p.poll_interval) return bad(PolicyField::Derived, "hang_timeout: must be >= poll_interval");
  if (p.unresponsive_timeout < p.hang_timeout)
    return bad(PolicyField::Derived, "unresponsive_timeout: must be >= hang_timeout");
  if (p.query_window <= Duration::zero() || p.query_window > p.poll_interval)
    return bad(PolicyField::Derived, "query_window: must be > 0 and <= poll_interval");
  if (p.takeover_bound < p.poll_interval)
    return bad(PolicyField::Derived, "takeover_bound: must be >= poll_interval");
  if (p.sweep_bound < p.takeover_bound) return bad(PolicyField::Derived, "sweep_bound: must be >= takeover_bound");
  if (p.handover_bound < p.poll_interval)
    return bad(PolicyField::Derived, "handover_bound: must be >= poll_interval");
  if (p.attempts_per_query < 1) return bad(PolicyField::Derived, "attempts_per_query: must be >= 1");
  if (!(p.false_alarm_target > 0 && p.false_alarm_target < 1))
    return bad(PolicyField::Derived, "false_alarm_target: must be in (0, 1)");
  if (p.preferred_master && !guids.count(p.preferred_master->value))
    return bad(PolicyField::PreferredMaster,
               "preferred_master: " + to_string(*p.preferred_master) + " is not a configured head");
  return std::nullopt;
}

Status validate(const HaPolicy& p) {
  if (auto e = check(p)) return e->error;
  return Status::Ok();
}

Result<std::vector<std::uint8_t>> standby_priorities(const std::vector<std::uint8_t>& configured) {
  std::vector<std::uint8_t> levels(configured);
  std::sort(levels.begin(), levels.end());
  levels.erase(std::unique(levels.begin(), levels.end()), levels.end());
  if (levels.size() > 13)
    return make_error(Errc::Policy, "priority: " + std::to_string(levels.size()) +
                                    " distinct configured sm_priority values; at most 13 fit "
                                    "between yield (below every standby) and master/claim (above)");
  // Keep each value where it fits; push up from 1, then down from 13, one step
  // apart, so the order is kept and every value lies in 1..13.
  const std::size_t k = levels.size();
  std::vector<int> r(k);
  for (std::size_t j = 0; j < k; ++j)
    r[j] = std::max<int>(levels[j], j == 0 ? 1 : r[j - 1] + 1);
  for (std::size_t j = k; j-- > 0;) r[j] = std::min(r[j], j + 1 == k ? 13 : r[j + 1] - 1);
  std::vector<std::uint8_t> out;
  for (auto c : configured) {
    const auto j = static_cast<std::size_t>(std::lower_bound(levels.begin(), levels.end(), c) - levels.begin());
    out.push_back(static_cast<std::uint8_t>(r[j]));
  }
  return out;
}

std::uint8_t Priorities::standby_for(Guid head) const {
  for (const auto& [g, v] : standby_of)
    if (g == head) return v;
  return standby;
}

Priorities priorities(const HaPolicy& p) {
  std::vector<std::uint8_t> configured{p.base_priority};
  for (const auto& peer : p.peers) configured.push_back(peer.priority.value_or(p.base_priority));
  auto r = standby_priorities(configured);
  const std::vector<std::uint8_t> standby = r ? r.value() : std::vector<std::uint8_t>(configured.size(), 10);
  Priorities out{};
  out.standby = standby[0];
  out.standby_of.emplace_back(p.own_guid, standby[0]);
  for (std::size_t i = 0; i < p.peers.size(); ++i) out.standby_of.emplace_back(p.peers[i].guid, standby[i + 1]);
  const auto [lo, hi] = std::minmax_element(standby.begin(), standby.end());
  out.yield = static_cast<std::uint8_t>(*lo - 1);
  out.master = static_cast<std::uint8_t>(*hi + 1);
  out.claim = static_cast<std::uint8_t>(*hi + 2);
  return out;
}

Guid preferred_head(const HaPolicy& p) {
  if (p.preferred_master) return *p.preferred_master;
  Guid best = p.own_guid;
  std::uint8_t best_prio = p.base_priority;
  for (const auto& peer : p.peers) {
    const auto prio = peer.priority.value_or(p.base_priority);
    if (prio > best_prio || (prio == best_prio && peer.guid < best)) {
      best = peer.guid;
      best_prio = prio;
    }
  }
  return best;
}

}  // namespace smha::sm
