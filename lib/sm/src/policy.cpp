#include "smha/sm/policy.hpp"

#include <set>

namespace smha::sm {

std::string_view to_string(FailbackMode mode) {
  switch (mode) {
    case FailbackMode::Sticky: return "sticky";
    case FailbackMode::Preempt: return "preempt";
  }
  return "unknown";
}

Status validate(const HaPolicy& p) {
  auto bad = [](std::string msg) { return Status(make_error("policy", std::move(msg))); };
  if (p.own_guid.value == 0) return bad("own_guid: must be a non-zero port GUID");
  if (p.peers.empty()) return bad("peers: at least one other head is needed");
  std::set<std::uint64_t> guids{p.own_guid.value};
  for (const auto& peer : p.peers) {
    if (peer.guid.value == 0) return bad("peers[" + peer.name + "].guid: must be non-zero");
    if (!guids.insert(peer.guid.value).second)
      return bad("peers[" + peer.name + "].guid: " + to_string(peer.guid) + " is used twice");
  }
  if (p.poll_interval < milliseconds(10) || p.poll_interval > seconds(10))
    return bad("poll_interval: must be 10 ms .. 10 s");
  if (p.misses < 1 || p.misses > 100) return bad("misses: must be 1 .. 100");
  if (p.base_priority < 1 || p.base_priority > 13)
    return bad("base_priority: must be 1 .. 13 (yield P-1 and claim P+2 must fit 0..15)");
  if (p.takeover_bound < p.poll_interval) return bad("takeover_bound: must be >= poll_interval");
  if (p.handover_bound < p.poll_interval) return bad("handover_bound: must be >= poll_interval");
  if (p.attempts_per_query < 1) return bad("attempts_per_query: must be >= 1");
  if (!(p.false_alarm_target > 0 && p.false_alarm_target < 1))
    return bad("false_alarm_target: must be in (0, 1)");
  if (p.preferred_master && !guids.count(p.preferred_master->value))
    return bad("preferred_master: " + to_string(*p.preferred_master) + " is not a configured head");
  return Status::Ok();
}

Priorities priorities(const HaPolicy& p) {
  const auto b = p.base_priority;
  return Priorities{static_cast<std::uint8_t>(b - 1), b, static_cast<std::uint8_t>(b + 1),
                    static_cast<std::uint8_t>(b + 2)};
}

}  // namespace smha::sm
