// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// Reloading the configuration (SIGHUP and `smctl reload`): load and check the
// file, refuse keys that need a restart, map the policy, and let the head
// apply it (head::Head::reload); the old configuration stays on any error.

#include <algorithm>

#include "daemon_impl.hpp"
#include "smha/service/reload.hpp"

namespace smha::service {

std::vector<std::string> restart_keys(const config::Config& cur, const config::Config& next) {
  std::vector<std::string> keys;
  auto differ = [&keys](bool changed, const char* key) {
    if (changed) keys.emplace_back(key);
  };
  differ(next.fabric != cur.fabric, "fabric");
  differ(next.node_name != cur.node_name, "node.name");
  differ(next.port.ca != cur.port.ca || next.port.port != cur.port.port || next.port.port_guid != cur.port.port_guid,
         "node.port");
  // The peer channel's own copy of the peers (its connections, the names its
  // certificates must carry): fixed at start.
  const bool channel = cur.continuity.enabled && next.continuity.enabled;
  if (channel && next.peers.size() != cur.peers.size()) {
    keys.emplace_back("peers");
  } else if (channel) {
    for (std::size_t i = 0; i < cur.peers.size(); ++i) {
      const auto& a = cur.peers[i];
      const auto& b = next.peers[i];
      const std::string at = "peers[" + std::to_string(i) + "]";
      if (a.name != b.name) keys.push_back(at + ".name");
      if (a.port_guid != b.port_guid) keys.push_back(at + ".port_guid");
      if (a.address_host != b.address_host || a.address_port != b.address_port) keys.push_back(at + ".address");
    }
  }
  const auto& o = cur.opensm;
  const auto& n = next.opensm;
  differ(n.restart_backoff_initial != o.restart_backoff_initial, "opensm.restart_backoff_initial_ms");
  differ(n.restart_backoff_max != o.restart_backoff_max, "opensm.restart_backoff_max_s");
  differ(n.restart_stable != o.restart_stable, "opensm.restart_stable_s");
  differ(n.crash_loop_count != o.crash_loop_count, "opensm.crash_loop_count");
  differ(n.crash_loop_window != o.crash_loop_window, "opensm.crash_loop_window_s");
  differ(n.crash_loop_retry != o.crash_loop_retry, "opensm.crash_loop_retry_s");
  differ(n.crash_loop_retry_no_master != o.crash_loop_retry_no_master, "opensm.crash_loop_retry_no_master_s");
  differ(n.conf_path != o.conf_path, "opensm.conf_path");
  // Where the channel writes a copy and reads the master's dump and guid2lid.
  differ(channel && n.sa_db_file != o.sa_db_file, "opensm.sa_db_file");
  differ(channel && n.dump_files_dir != o.dump_files_dir, "opensm.dump_files_dir");
  differ(channel && n.cache_dir != o.cache_dir, "opensm.cache_dir");
  differ(next.control.socket_path != cur.control.socket_path, "control.socket");
  differ(next.control.group != cur.control.group, "control.group");
  differ(next.metrics.listen_address != cur.metrics.listen_address ||
             next.metrics.listen_port != cur.metrics.listen_port ||
             next.metrics.textfile_dir != cur.metrics.textfile_dir ||
             next.metrics.textfile_interval != cur.metrics.textfile_interval,
         "metrics");
  differ(next.state_dir != cur.state_dir, "state_dir");
  const auto& k = cur.continuity;
  const auto& m = next.continuity;
  if (k.enabled != m.enabled) {
    keys.emplace_back("continuity");
  } else if (k.enabled) {
    differ(m.listen_address != k.listen_address || m.listen_port != k.listen_port, "continuity.listen");
    differ(m.certificate != k.certificate, "continuity.certificate");
    differ(m.private_key != k.private_key, "continuity.private_key");
    differ(m.ca != k.ca, "continuity.ca");
    differ(m.max_copy_age_s != k.max_copy_age_s, "continuity.max_copy_age_s");
    differ(m.refresh_s != k.refresh_s, "continuity.refresh_s");
    differ(m.max_copy_mib != k.max_copy_mib, "continuity.max_copy_mib");
    differ(m.max_services_per_port != k.max_services_per_port, "continuity.max_services_per_port");
    differ(m.max_services != k.max_services, "continuity.max_services");
    differ(m.max_subscriptions_per_port != k.max_subscriptions_per_port, "continuity.max_subscriptions_per_port");
    differ(m.max_subscriptions != k.max_subscriptions, "continuity.max_subscriptions");
    differ(m.max_groups != k.max_groups, "continuity.max_groups");
    // A key added to the section later and not named above still refuses.
    if (!(m == k) && std::none_of(keys.begin(), keys.end(), [](const std::string& key) {
          return key.rfind("continuity", 0) == 0;
        }))
      keys.emplace_back("continuity");
  }
  return keys;
}

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
  const std::vector<std::string> needs_restart = restart_keys(cur, next);
  if (!needs_restart.empty()) {
    std::string keys;
    for (const auto& k : needs_restart) keys += (keys.empty() ? "" : ", ") + k;
    return Reply::failure(ResultCode::Conflict,
                          "these keys take effect only when smhad restarts: " + keys +
                              "; nothing changed: restart smhad to apply them",
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
