// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/service/service.hpp"

#include <algorithm>
#include <fstream>

namespace smha::service {

bool process_stopped(int pid) {
  if (pid <= 0) return false;
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return false;
  // "pid (comm) S ...": comm may hold spaces and parentheses; the state follows the last ')'.
  const auto close = line.rfind(')');
  if (close == std::string::npos || close + 2 >= line.size()) return false;
  const char state = line[close + 2];
  return state == 'T' || state == 't';
}

control::Reply guard_reload(const char* via, LogEventSink& sink, const std::function<control::Reply()>& body) {
  std::string what;
  try {
    return body();
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
    what = "an exception that is not a std::exception";
  }
  try {
    sink.note("RELOAD_REFUSED", "reload failed: " + what, via);
  } catch (...) {
    // Out of memory again while recording it: the reply still says why.
  }
  return control::Reply::failure(control::ResultCode::Error, "reload failed, old configuration kept: " + what);
}

// ---- map_config ------------------------------------------------------------

namespace {

// The operator needs the YAML key that set the HaPolicy field a policy error
// is about, and its position. Derived bounds (hang_timeout, takeover_bound
// ...) point at the poll interval they follow from.
Error policy_error_at(const config::Config& c, const sm::PolicyError& e) {
  std::string key = "failover.poll_interval_ms";
  switch (e.field) {
    case sm::PolicyField::PollInterval:
    case sm::PolicyField::Derived: break;
    case sm::PolicyField::Misses: key = "failover.misses_before_takeover"; break;
    case sm::PolicyField::BasePriority: key = "sm_priority"; break;
    case sm::PolicyField::OwnGuid: key = "node.port_guid"; break;
    case sm::PolicyField::PreferredMaster: key = "failover"; break;
    case sm::PolicyField::Peers: key = "peers"; break;
    case sm::PolicyField::PeerGuid:
    case sm::PolicyField::PeerPriority:
      // map_config lists the policy's peers in the configuration's order.
      key = e.peer < c.peers.size() ? "peers[" + std::to_string(e.peer) + "]" +
                                          (e.field == sm::PolicyField::PeerPriority ? ".sm_priority" : ".port_guid")
                                    : "peers";
      break;
  }
  config::Diagnostic d{c.source_path, c.position_of(key), key, "HA policy: " + e.error.message};
  return Error{e.error.code, d.to_string()};
}

}  // namespace

Result<agent::AgentConfig> map_config(const config::Config& c, Guid own_guid) {
  agent::AgentConfig a;
  sm::HaPolicy& p = a.policy;
  p.node_name = c.node_name;
  p.own_guid = own_guid;
  for (const auto& peer : c.peers) {
    std::optional<std::uint8_t> prio;
    if (peer.sm_priority) prio = static_cast<std::uint8_t>(*peer.sm_priority);
    p.peers.push_back(sm::PeerSpec{peer.name, peer.port_guid, prio});
    // Every peer is found by its port GUID (doc/discovery.md); a configured
    // lid or dr_path is an override, checked against what discovery finds.
    a.peers.push_back(
        agent::PeerAddress{peer.port_guid, peer.lid.value_or(Lid{}), peer.dr_path, true});
  }
  p.poll_interval = c.failover.poll_interval;
  p.misses = c.failover.misses_before_takeover;
  p.failback = c.failover.failback == config::FailbackPolicy::Preempt ? sm::FailbackMode::Preempt
                                                                      : sm::FailbackMode::Sticky;
  p.preempt_hold_down = c.failover.preempt_holddown;
  p.base_priority = static_cast<std::uint8_t>(std::clamp(c.sm_priority, 0, 15));
  p.hang_timeout = (p.misses + 1) * p.poll_interval;
  // Bounds that must cover at least a round (sm::validate) follow a long
  // poll interval; at the default interval they keep the engine's defaults.
  p.takeover_bound = std::max(p.takeover_bound, p.poll_interval);
  p.handover_bound = std::max(p.handover_bound, p.poll_interval);
  p.unresponsive_timeout = std::max(p.unresponsive_timeout, p.hang_timeout);
  p.query_window = agent::query_window_for(a);  // what the agent will use
  a.drift.unknown_alarm = c.drift_unknown_alarm;
  if (auto e = sm::check(p)) return policy_error_at(c, *e);
  return a;
}

}  // namespace smha::service
