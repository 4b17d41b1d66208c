// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// Reloading the configuration (SIGHUP and `smctl reload`): validate, re-render,
// apply what changed, keep the old configuration on any error.

#include "daemon_impl.hpp"

namespace smha::service {

namespace method = control::method;
namespace param = control::param;
using control::ResultCode;

namespace {


bool same_policy(const agent::AgentConfig& a, const agent::AgentConfig& b) {
  const auto& p = a.policy;
  const auto& q = b.policy;
  if (p.node_name != q.node_name || p.own_guid != q.own_guid || p.poll_interval != q.poll_interval ||
      p.misses != q.misses || p.failback != q.failback || p.preempt_hold_down != q.preempt_hold_down ||
      p.base_priority != q.base_priority || p.peers.size() != q.peers.size() ||
      a.peers.size() != b.peers.size())
    return false;
  for (std::size_t i = 0; i < p.peers.size(); ++i)
    if (p.peers[i].name != q.peers[i].name || p.peers[i].guid != q.peers[i].guid ||
        p.peers[i].priority != q.peers[i].priority)
      return false;
  for (std::size_t i = 0; i < a.peers.size(); ++i)
    if (a.peers[i].guid != b.peers[i].guid || a.peers[i].lid != b.peers[i].lid ||
        a.peers[i].dr != b.peers[i].dr)
      return false;
  return true;
}

}  // namespace

Reply Daemon::reload_guarded(const char* via) {
  return guard_reload(via, sink_, [this] { return do_reload(); });
}

Reply Daemon::do_reload() {
  auto loaded = config::load_config(config_.source_path);
  if (!loaded) {
    // The count and the first errors: a file with 100 000 errors must not make
    // a reply larger than a client accepts (smhad --check-config lists all).
    constexpr std::size_t kShown = 20;
    const auto& all = loaded.errors();
    json errs = json::array();
    std::string shown;
    for (std::size_t i = 0; i < all.size() && i < kShown; ++i) {
      errs.push_back(all[i].to_string());
      shown += all[i].to_string() + "\n";
    }
    if (all.size() > kShown)
      shown += "... and " + std::to_string(all.size() - kShown) + " more (smhad --check-config lists them all)\n";
    sink_.note("RELOAD_REFUSED", std::to_string(all.size()) + " error(s)", shown);
    return Reply::failure(ResultCode::Error, "invalid configuration, old one kept:\n" + shown,
                          json{{"errors", errs}, {"error_count", all.size()}});
  }
  config::Config next = std::move(loaded).value();
  if (auto st = HookDispatcher::check(next); !st.ok()) {
    sink_.note("RELOAD_REFUSED", "1 error(s)", st.error().message);
    return Reply::failure(ResultCode::Error, "invalid configuration, old one kept:\n" + st.error().message);
  }
  std::vector<std::string> needs_restart;
  if (next.node_name != config_.node_name) needs_restart.push_back("node.name");
  if (next.port.ca != config_.port.ca || next.port.port != config_.port.port ||
      next.port.port_guid != config_.port.port_guid)
    needs_restart.push_back("node.port");
  if (next.control.socket_path != config_.control.socket_path) needs_restart.push_back("control.socket");
  if (next.control.group != config_.control.group) needs_restart.push_back("control.group");
  if (next.opensm.restart_backoff_initial != config_.opensm.restart_backoff_initial)
    needs_restart.push_back("opensm.restart_backoff_initial_ms");
  if (next.opensm.restart_backoff_max != config_.opensm.restart_backoff_max)
    needs_restart.push_back("opensm.restart_backoff_max_s");
  if (next.opensm.restart_stable != config_.opensm.restart_stable) needs_restart.push_back("opensm.restart_stable_s");
  if (next.opensm.crash_loop_count != config_.opensm.crash_loop_count)
    needs_restart.push_back("opensm.crash_loop_count");
  if (next.opensm.crash_loop_window != config_.opensm.crash_loop_window)
    needs_restart.push_back("opensm.crash_loop_window_s");
  if (next.opensm.crash_loop_retry != config_.opensm.crash_loop_retry)
    needs_restart.push_back("opensm.crash_loop_retry_s");
  if (next.opensm.crash_loop_retry_no_master != config_.opensm.crash_loop_retry_no_master)
    needs_restart.push_back("opensm.crash_loop_retry_no_master_s");
  if (next.opensm.conf_path != config_.opensm.conf_path) needs_restart.push_back("opensm.conf_path");
  if (next.state_dir != config_.state_dir) needs_restart.push_back("state_dir");
  if (next.metrics.listen_address != config_.metrics.listen_address ||
      next.metrics.listen_port != config_.metrics.listen_port ||
      next.metrics.textfile_dir != config_.metrics.textfile_dir ||
      next.metrics.textfile_interval != config_.metrics.textfile_interval)
    needs_restart.push_back("metrics");
  if (!needs_restart.empty()) {
    std::string keys;
    for (const auto& k : needs_restart) keys += (keys.empty() ? "" : ", ") + k;
    return Reply::failure(ResultCode::Conflict,
                          "these keys take effect only when smhad restarts: " + keys + "; nothing changed",
                          json{{"restart_keys", needs_restart}});
  }
  auto mapped = head::map_config(next, own_guid_);
  if (!mapped) return Reply::failure(ResultCode::Error, mapped.error().message);
  json data;
  std::string text;
  if (supervised_) {
    opensm::ReloadDecision decision;
    auto render = head::make_renderer(next, caps_, own_guid_, fs_);
    const std::string failed_reason = supervised_->supervisor_status().state == opensm::SupervisorState::Failed
                                          ? supervised_->supervisor_status().reason
                                          : std::string();
    auto r = supervised_->reload(std::move(render), decision);
    if (!r) return Reply::failure(ResultCode::Error, "reload refused, old configuration kept: " + r.error().message);
    data["opensm_action"] = std::string(opensm::to_string(r.value()));
    data["opensm_change"] = std::string(opensm::to_string(decision.kind));
    data["changed_keys"] = decision.changed;
    if (!decision.key.empty()) data["restart_key"] = decision.key;
    text = "opensm.conf: " + std::string(opensm::to_string(r.value()));
    if (r.value() == opensm::ReloadAction::Retried) {
      // A reload of a failed head always tries OpenSM again: say so, and why it had failed.
      data["retried_after"] = printable(failed_reason);
      text = "OpenSM had failed (" + printable(failed_reason) + "): started again now; opensm.conf " +
             (decision.changed.empty() ? "unchanged" : "changed");
    }
    if (!decision.changed.empty()) {
      text += " (changed:";
      for (const auto& k : decision.changed) text += " " + k;
      text += ")";
    }
    const auto warnings = log_render_warnings(next);
    data["warnings"] = warnings;
    for (const auto& w : warnings) text += "; warning: " + w;
  }
  // opensm.conf rendered above: the plan cannot fail on it any more.
  auto planned = head::make_plan(next, std::move(mapped).value(), head::PlanInputs{own_guid_, options_.observe, caps_},
                                 fs_);
  if (!planned) return Reply::failure(ResultCode::Error, planned.error().message);
  const bool policy_changed = !same_policy(agent_cfg_, planned.value().agent);
  data["engine_restarted"] = policy_changed;
  config_ = std::move(next);
  plan_ = std::move(planned).value();
  if (policy_changed) {
    osm_log_interval_ = plan_.agent.policy.poll_interval;
    start_agent(plan_.agent);
    text += (text.empty() ? "" : "; ") + std::string("HA policy changed: engine restarted with the new policy");
  } else {
    agent_->drift().set_unknown_alarm(plan_.agent.drift.unknown_alarm);
    start_lid_continuity();  // opensm.lid_continuity or the LMC may have changed
    text += (text.empty() ? "" : "; ") + std::string("HA policy unchanged");
  }
  config_loaded_wall_ = clock_.wall_now();
  if (!policy_changed) update_drift_digests();  // a new engine got them in start_agent()
  sink_.note("RELOAD", text);
  hooks_->configure(config_);
  const auto snap = snapshot();
  hooks_->reload(snap.state, snap.priority, text);
  return Reply::ok(data, text);
}

}  // namespace smha::service
