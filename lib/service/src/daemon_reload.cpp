// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// Reloading the configuration (SIGHUP and `smctl reload`): load and check the
// file, refuse keys that need a restart, map the policy, and let the head
// apply it (head::Head::reload); the old configuration stays on any error.

#include "daemon_impl.hpp"

namespace smha::service {

namespace method = control::method;
namespace param = control::param;
using control::ResultCode;

Reply Daemon::reload_guarded(const char* via) {
  return guard_reload(via, head_->log(), [this] { return do_reload(); });
}

Reply Daemon::do_reload() {
  auto loaded = config::load_config(head_->config().source_path, config::LoadOptions{options_.fabric});
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
    head_->log().note("RELOAD_REFUSED", std::to_string(all.size()) + " error(s)", shown);
    return Reply::failure(ResultCode::Error, "invalid configuration, old one kept:\n" + shown,
                          json{{"errors", errs}, {"error_count", all.size()}});
  }
  config::Config next = std::move(loaded).value();
  const config::Config& cur = head_->config();
  if (auto st = HookDispatcher::check(next); !st.ok()) {
    head_->log().note("RELOAD_REFUSED", "1 error(s)", st.error().message);
    return Reply::failure(ResultCode::Error, "invalid configuration, old one kept:\n" + st.error().message);
  }
  std::vector<std::string> needs_restart;
  if (next.node_name != cur.node_name) needs_restart.push_back("node.name");
  if (next.port.ca != cur.port.ca || next.port.port != cur.port.port ||
      next.port.port_guid != cur.port.port_guid)
    needs_restart.push_back("node.port");
  if (next.control.socket_path != cur.control.socket_path) needs_restart.push_back("control.socket");
  if (next.control.group != cur.control.group) needs_restart.push_back("control.group");
  if (next.opensm.restart_backoff_initial != cur.opensm.restart_backoff_initial)
    needs_restart.push_back("opensm.restart_backoff_initial_ms");
  if (next.opensm.restart_backoff_max != cur.opensm.restart_backoff_max)
    needs_restart.push_back("opensm.restart_backoff_max_s");
  if (next.opensm.restart_stable != cur.opensm.restart_stable) needs_restart.push_back("opensm.restart_stable_s");
  if (next.opensm.crash_loop_count != cur.opensm.crash_loop_count)
    needs_restart.push_back("opensm.crash_loop_count");
  if (next.opensm.crash_loop_window != cur.opensm.crash_loop_window)
    needs_restart.push_back("opensm.crash_loop_window_s");
  if (next.opensm.crash_loop_retry != cur.opensm.crash_loop_retry)
    needs_restart.push_back("opensm.crash_loop_retry_s");
  if (next.opensm.crash_loop_retry_no_master != cur.opensm.crash_loop_retry_no_master)
    needs_restart.push_back("opensm.crash_loop_retry_no_master_s");
  if (next.opensm.conf_path != cur.opensm.conf_path) needs_restart.push_back("opensm.conf_path");
  if (next.state_dir != cur.state_dir) needs_restart.push_back("state_dir");
  if (next.metrics.listen_address != cur.metrics.listen_address ||
      next.metrics.listen_port != cur.metrics.listen_port ||
      next.metrics.textfile_dir != cur.metrics.textfile_dir ||
      next.metrics.textfile_interval != cur.metrics.textfile_interval)
    needs_restart.push_back("metrics");
  if (!needs_restart.empty()) {
    std::string keys;
    for (const auto& k : needs_restart) keys += (keys.empty() ? "" : ", ") + k;
    return Reply::failure(ResultCode::Conflict,
                          "these keys take effect only when smhad restarts: " + keys + "; nothing changed",
                          json{{"restart_keys", needs_restart}});
  }
  auto mapped = head::map_config(next, head_->own_guid());
  if (!mapped) return Reply::failure(ResultCode::Error, mapped.error().message);
  auto applied = head_->reload(std::move(next), std::move(mapped).value());
  if (!applied) return Reply::failure(ResultCode::Error, applied.error().message);
  hooks_->configure(head_->config());
  const auto snap = head_->snapshot();
  hooks_->reload(snap.state, snap.priority, applied.value().text);
  return Reply::ok(applied.value().data, applied.value().text);
}

}  // namespace smha::service
