// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/head/plan.hpp"

#include <algorithm>

#include "smha/opensm/check.hpp"

namespace smha::head {

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

std::string join_errors(const std::vector<config::Diagnostic>& errors) {
  std::string out;
  for (const auto& d : errors) out += (out.empty() ? "" : "\n") + d.to_string();
  return out;
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
    a.peers.push_back(agent::PeerAddress{peer.port_guid, peer.lid.value_or(Lid{}), peer.dr_path, true});
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
  // A pull completes when the master learns that a standby outranks it: by the
  // trap 144 the standby sends when its priority is raised, which a lost MAD
  // can drop, then again at each of its polls of the lower master
  // (sminfo_polling_timeout), or at the master's next sweep (sweep_interval).
  // The bound covers two of those chances plus a sweep: 5 s at the defaults.
  const Duration resend =
      std::min<Duration>(2 * c.failover.opensm_polling_timeout, seconds(c.opensm.sweep_interval_s));
  p.handover_bound = std::max(p.handover_bound, resend + seconds(1));
  p.unresponsive_timeout = std::max(p.unresponsive_timeout, p.hang_timeout);
  // The policy the engine will run, with the agent's query window.
  if (auto e = sm::check(agent::engine_policy(a))) return policy_error_at(c, *e);
  return a;
}

fabric::WatchersConfig map_watchers(const config::Config& c) {
  fabric::WatchersConfig w;
  w.drift.unknown_alarm = c.drift_unknown_alarm;
  w.health.alarm = c.health.link_degraded_alarm;
  w.health.alarm_min_links = static_cast<std::size_t>(c.health.link_degraded_min_links);
  // Validated at load (config::Loader::load_health); empty: the majority of that kind.
  if (auto r = parse_link_rate(c.health.expect_switch_links); r) w.health.expect.switch_switch = *r;
  if (auto r = parse_link_rate(c.health.expect_ca_links); r) w.health.expect.switch_ca = *r;
  w.errors.reads_per_second = c.health.counter_reads_per_second;
  w.errors.start_after = seconds(c.health.counter_start_after_s);
  w.errors.window = seconds(c.health.error_window_s);
  w.errors.alarm = c.health.link_errors_alarm;
  w.errors.alarm_min_ports = static_cast<std::size_t>(c.health.link_errors_min_ports);
  for (auto k : mad::kErrorCounters)
    if (auto it = c.health.error_thresholds.find(std::string(mad::counter_key(k))); it != c.health.error_thresholds.end())
      mad::at(w.errors.thresholds, k) = static_cast<std::uint32_t>(it->second);
  return w;
}

agent::PriorityRenderer priority_renderer(std::string rendered) {
  return [text = std::move(rendered)](std::uint8_t prio) -> Result<std::string> {
    return opensm::set_sm_priority(text, prio);
  };
}

fabric::DigestInputs drift_inputs(const config::Config& c, const opensm::Capabilities& caps, std::string rendered) {
  const auto& f = c.failover;
  fabric::DigestInputs in;
  in.rendered_conf = std::move(rendered);
  in.ha_policy = "poll_interval_ms " + std::to_string(f.poll_interval.count()) + "\nmisses_before_takeover " +
                 std::to_string(f.misses_before_takeover) + "\nfailback " + std::string(config::to_string(f.failback)) +
                 "\npreempt_holddown_s " + std::to_string(f.preempt_holddown.count()) + "\nopensm_polling_timeout_ms " +
                 std::to_string(f.opensm_polling_timeout.count()) + "\nopensm_polling_retries " +
                 std::to_string(f.opensm_polling_retries) + "\n";
  in.opensm = caps.version + " " + std::string(opensm::to_string(caps.flavor));
  in.sm_key = c.sm_key;
  in.sa_key = c.sa_key;
  return in;
}

os::ProcessSpec opensm_spec(const config::Config& c, Guid own_guid) {
  os::ProcessSpec s;
  const std::string binary = c.opensm.binary;
  s.path = binary;
  s.argv = {binary, "-F", c.opensm.conf_path, "-g", to_string(own_guid)};
  s.env = {{"OSM_CACHE_DIR", c.opensm.cache_dir}, {"OSM_TMP_DIR", c.opensm.cache_dir}};
  s.cwd = c.state_dir;
  s.parent_death_signal = 0;  // survives smhad: adopted by the next smhad
  return s;
}

opensm::SupervisorOptions supervisor_options(const config::Config& c) {
  opensm::SupervisorOptions so;
  so.conf_path = c.opensm.conf_path;
  so.pidfile_path = c.state_dir + "/opensm.pid";
  so.log_file = c.opensm.log_file;
  so.keep_running_on_exit = true;
  so.backoff_initial = c.opensm.restart_backoff_initial;
  so.backoff_max = c.opensm.restart_backoff_max;
  so.stable_uptime = c.opensm.restart_stable;
  so.crash_loop_count = c.opensm.crash_loop_count;
  so.crash_loop_window = c.opensm.crash_loop_window;
  so.crash_loop_retry = c.opensm.crash_loop_retry;
  so.crash_loop_retry_no_master = c.opensm.crash_loop_retry_no_master;
  so.respawn_on_request = true;  // the HA engine decides when a crashed OpenSM comes back
  return so;
}

Result<Plan> make_plan(const config::Config& c, agent::AgentConfig mapped, const PlanInputs& in,
                       const os::FileSystem& fs) {
  Plan plan;
  plan.agent = std::move(mapped);
  plan.agent.policy.observe = in.observe;  // no OpenSM of ours: a silent local port is no hang
  plan.watchers = map_watchers(c);
  if (in.observe) return plan;
  plan.watchers.routing_engines = opensm::rendered_routing_engines(c, in.caps);
  plan.watchers.opensm_log = !c.opensm.log_file.empty();

  Plan::Opensm o;
  // The one rendering of this configuration: a bad config for this OpenSM is
  // refused before anything starts.
  const auto prio = static_cast<std::uint8_t>(c.sm_priority);
  auto prep = in.prepare ? in.prepare(c, in.caps, prio, in.own_guid, &fs)
                         : opensm::prepare_opensm_conf(c, in.caps, prio, in.own_guid, &fs);
  if (!prep.ok()) return make_error(Errc::Config, join_errors(prep.errors));
  for (const auto& w : prep.warnings) o.warnings.push_back(w.to_string());
  o.render = priority_renderer(prep.rendered);
  o.drift = drift_inputs(c, in.caps, std::move(prep.rendered));

  o.spec = opensm_spec(c, in.own_guid);
  o.supervisor = supervisor_options(c);

  // LID continuity (doc/lid-continuity.md) is fed by the census walks.
  if (c.opensm.lid_continuity && plan.agent.census.enabled) {
    fabric::LidContinuityConfig lc;
    lc.path = c.opensm.cache_dir + "/guid2lid";
    for (const auto& x : c.opensm.extra)
      if (x.key == "lmc" && x.value.size() == 1 && x.value[0] >= '0' && x.value[0] <= '7')
        lc.lmc = static_cast<unsigned>(x.value[0] - '0');
    o.lid_continuity = lc;
  }
  // Made before OpenSM starts: an instance's own dump_files_dir
  // (/var/log/opensm-NAME/) is new on a head, and OpenSM's dumps need it.
  o.dirs = {c.state_dir, c.opensm.cache_dir, c.opensm.dump_files_dir};
  plan.opensm = std::move(o);
  return plan;
}

}  // namespace smha::head
