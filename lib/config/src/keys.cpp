// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/config/keys.hpp"

#include <algorithm>
#include <stdexcept>

namespace smha::config {

namespace {

// limits::kRangedKeys' range of `path`; every integer key of the table takes
// its range from there (a path missing there stops the program at start-up,
// and the unit tests, at once).
limits::IntRange ranged(std::string_view path) {
  for (const auto& k : limits::kRangedKeys)
    if (k.path == path) return k.range;
  throw std::logic_error("no limits::kRangedKeys entry for " + std::string(path));
}

// The member at `Path` (a chain of member pointers from Config) differs.
template <auto... Path>
bool differ(const Config& a, const Config& b) {
  return !((a .* ... .* Path) == (b .* ... .* Path));
}

// A key of the `continuity` section: compared when both have the section
// (adding or removing it is the key "continuity").
template <auto... Path>
bool channel_differ(const Config& a, const Config& b) {
  return a.continuity.enabled && b.continuity.enabled && differ<&Config::continuity, Path...>(a, b);
}

template <auto Member>
bool peer_differ(const Peer& a, const Peer& b) {
  return !(a.*Member == b.*Member);
}

bool same_extra(const std::vector<ExtraKey>& a, const std::vector<ExtraKey>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                    [](const ExtraKey& x, const ExtraKey& y) { return x.key == y.key && x.value == y.value; });
}

using E = ReloadEffect;
using C = Config;
using O = OpensmSettings;
using F = FailoverPolicy;
using H = HealthSettings;
using K = ContinuitySettings;

KeyInfo key(std::string_view path, E effect, bool (*d)(const Config&, const Config&), bool engine = false,
            bool channel = false) {
  return KeyInfo{path, effect, engine, channel, std::nullopt, d, nullptr};
}
KeyInfo ranged_key(std::string_view path, E effect, bool (*d)(const Config&, const Config&), bool engine = false) {
  return KeyInfo{path, effect, engine, false, ranged(path), d, nullptr};
}
KeyInfo peer_key(std::string_view path, bool (*d)(const Peer&, const Peer&), bool engine, bool channel) {
  KeyInfo k{path, E::Live, engine, channel, std::nullopt, nullptr, d};
  if (path == "peers[].sm_priority") k.range = ranged(path);
  return k;
}

constexpr bool kEngine = true;
constexpr bool kChannel = true;

std::vector<KeyInfo> make_table() {
  return {
      key("node.name", E::SmhadRestart, differ<&C::node_name>),
      key("node.ca", E::SmhadRestart, differ<&C::port, &PortSelector::ca>),
      ranged_key("node.port", E::SmhadRestart, differ<&C::port, &PortSelector::port>),
      key("node.port_guid", E::SmhadRestart, differ<&C::port, &PortSelector::port_guid>),
      // The engine's peers; with continuity on also the channel's (connections,
      // the names their certificates must carry).
      key("peers", E::Live, [](const C& a, const C& b) { return a.peers.size() != b.peers.size(); }, kEngine,
          kChannel),
      peer_key("peers[].name", peer_differ<&Peer::name>, kEngine, kChannel),
      peer_key("peers[].port_guid", peer_differ<&Peer::port_guid>, kEngine, kChannel),
      peer_key("peers[].lid", peer_differ<&Peer::lid>, kEngine, false),
      peer_key("peers[].dr_path", peer_differ<&Peer::dr_path>, kEngine, false),
      peer_key("peers[].sm_priority", peer_differ<&Peer::sm_priority>, kEngine, false),
      // Only the peer channel uses it.
      peer_key("peers[].address",
               [](const Peer& a, const Peer& b) {
                 return a.address_host != b.address_host || a.address_port != b.address_port;
               },
               false, kChannel),
      // The engine's base priority: it renders its new priorities (SIGHUP).
      ranged_key("sm_priority", E::Sighup, differ<&C::sm_priority>, kEngine),
      ranged_key("failover.poll_interval_ms", E::Live, differ<&C::failover, &F::poll_interval>, kEngine),
      ranged_key("failover.misses_before_takeover", E::Live, differ<&C::failover, &F::misses_before_takeover>,
                 kEngine),
      key("failover.failback", E::Live, differ<&C::failover, &F::failback>, kEngine),
      ranged_key("failover.preempt_holddown_s", E::Live, differ<&C::failover, &F::preempt_holddown>, kEngine),
      // sminfo_polling_timeout; the planned-handover bound follows it.
      ranged_key("failover.opensm_polling_timeout_ms", E::Sighup, differ<&C::failover, &F::opensm_polling_timeout>,
                 kEngine),
      ranged_key("failover.opensm_polling_retries", E::Sighup, differ<&C::failover, &F::opensm_polling_retries>),
      key("sm_key", E::Sighup, [](const C& a, const C& b) { return a.sm_key != b.sm_key || a.sm_key_set != b.sm_key_set; }),
      // The key a file holds is compared as sm_key (the file's path is not kept).
      key("sm_key_file", E::Sighup, [](const C&, const C&) { return false; }),
      key("sa_key", E::Sighup, [](const C& a, const C& b) { return a.sa_key != b.sa_key || a.sa_key_set != b.sa_key_set; }),
      key("sa_key_file", E::Sighup, [](const C&, const C&) { return false; }),
      // OpenSM's command line and the capabilities probed from it are fixed at start.
      key("opensm.binary", E::SmhadRestart, differ<&C::opensm, &O::binary>),
      key("opensm.flavor", E::Rendered, differ<&C::opensm, &O::flavor>, kEngine),
      key("opensm.routing_engine", E::OpensmRestart, differ<&C::opensm, &O::routing_engine>, kEngine),
      ranged_key("opensm.sweep_interval", E::Sighup, differ<&C::opensm, &O::sweep_interval_s>, kEngine),
      ranged_key("opensm.max_wire_smps", E::Sighup, differ<&C::opensm, &O::max_wire_smps>),
      key("opensm.adaptive_routing", E::OpensmRestart, differ<&C::opensm, &O::adaptive_routing>, kEngine),
      key("opensm.sharp", E::OpensmRestart, differ<&C::opensm, &O::sharp>),
      key("opensm.downgrade_unsupported", E::Rendered, differ<&C::opensm, &O::downgrade_unsupported>, kEngine),
      // Whether OpenSM's log is followed is also the takeover report's input (the watchers', made with the engine).
      key("opensm.log_file", E::OpensmRestart, differ<&C::opensm, &O::log_file>, kEngine),
      key("opensm.dump_files_dir", E::OpensmRestart, differ<&C::opensm, &O::dump_files_dir>, false, kChannel),
      // OSM_CACHE_DIR of OpenSM's environment, set when smhad starts it.
      key("opensm.cache_dir", E::SmhadRestart, differ<&C::opensm, &O::cache_dir>),
      key("opensm.conf_path", E::SmhadRestart, differ<&C::opensm, &O::conf_path>),
      key("opensm.honor_guid2lid_file", E::Sighup, differ<&C::opensm, &O::honor_guid2lid_file>),
      // honor_guid2lid_file, and smhad's own guid2lid keeping (applied by the reload).
      key("opensm.lid_continuity", E::Sighup, differ<&C::opensm, &O::lid_continuity>),
      key("opensm.sa_db_dump", E::Sighup, differ<&C::opensm, &O::sa_db_dump>),
      key("opensm.sa_db_file", E::OpensmRestart, differ<&C::opensm, &O::sa_db_file>, false, kChannel),
      key("opensm.extra", E::Rendered, [](const C& a, const C& b) { return !same_extra(a.opensm.extra, b.opensm.extra); }),
      // The supervisor's policy, fixed when it is made at start.
      ranged_key("opensm.restart_backoff_initial_ms", E::SmhadRestart, differ<&C::opensm, &O::restart_backoff_initial>),
      ranged_key("opensm.restart_backoff_max_s", E::SmhadRestart, differ<&C::opensm, &O::restart_backoff_max>),
      ranged_key("opensm.restart_stable_s", E::SmhadRestart, differ<&C::opensm, &O::restart_stable>),
      ranged_key("opensm.crash_loop_count", E::SmhadRestart, differ<&C::opensm, &O::crash_loop_count>),
      ranged_key("opensm.crash_loop_window_s", E::SmhadRestart, differ<&C::opensm, &O::crash_loop_window>),
      ranged_key("opensm.crash_loop_retry_s", E::SmhadRestart, differ<&C::opensm, &O::crash_loop_retry>),
      ranged_key("opensm.crash_loop_retry_no_master_s", E::SmhadRestart,
                 differ<&C::opensm, &O::crash_loop_retry_no_master>),
      key("control.socket", E::SmhadRestart, differ<&C::control, &ControlSettings::socket_path>),
      key("control.group", E::SmhadRestart, differ<&C::control, &ControlSettings::group>),
      key("metrics.listen", E::SmhadRestart,
          [](const C& a, const C& b) {
            return a.metrics.listen_address != b.metrics.listen_address ||
                   a.metrics.listen_port != b.metrics.listen_port;
          }),
      key("metrics.textfile_dir", E::SmhadRestart, differ<&C::metrics, &MetricsSettings::textfile_dir>),
      ranged_key("metrics.textfile_interval_s", E::SmhadRestart,
                 differ<&C::metrics, &MetricsSettings::textfile_interval>),
      key("hooks", E::Live, differ<&C::hooks>),
      ranged_key("hook_timeout_s", E::Live, differ<&C::hook_timeout>),
      key("state_dir", E::SmhadRestart, differ<&C::state_dir>),
      ranged_key("drift_unknown_alarm_s", E::Live, differ<&C::drift_unknown_alarm>),
      key("fabric", E::SmhadRestart, differ<&C::fabric>),
      // The link health and error counters are the engine's parts, made with it.
      key("health.link_degraded_alarm", E::Live, differ<&C::health, &H::link_degraded_alarm>, kEngine),
      ranged_key("health.link_degraded_min_links", E::Live, differ<&C::health, &H::link_degraded_min_links>, kEngine),
      key("health.expect_switch_links", E::Live, differ<&C::health, &H::expect_switch_links>, kEngine),
      key("health.expect_ca_links", E::Live, differ<&C::health, &H::expect_ca_links>, kEngine),
      ranged_key("health.counter_reads_per_second", E::Live, differ<&C::health, &H::counter_reads_per_second>,
                 kEngine),
      ranged_key("health.counter_start_after_s", E::Live, differ<&C::health, &H::counter_start_after_s>, kEngine),
      ranged_key("health.error_window_s", E::Live, differ<&C::health, &H::error_window_s>, kEngine),
      key("health.link_errors_alarm", E::Live, differ<&C::health, &H::link_errors_alarm>, kEngine),
      ranged_key("health.link_errors_min_ports", E::Live, differ<&C::health, &H::link_errors_min_ports>, kEngine),
      ranged_key("health.error_thresholds", E::Live, differ<&C::health, &H::error_thresholds>, kEngine),
      // The peer channel is set up once, at start (doc/continuity.md).
      key("continuity", E::SmhadRestart,
          [](const C& a, const C& b) { return a.continuity.enabled != b.continuity.enabled; }),
      key("continuity.listen", E::SmhadRestart,
          [](const C& a, const C& b) {
            return channel_differ<&K::listen_address>(a, b) || channel_differ<&K::listen_port>(a, b);
          }),
      key("continuity.certificate", E::SmhadRestart, channel_differ<&K::certificate>),
      key("continuity.private_key", E::SmhadRestart, channel_differ<&K::private_key>),
      key("continuity.ca", E::SmhadRestart, channel_differ<&K::ca>),
      ranged_key("continuity.max_copy_age_s", E::SmhadRestart, channel_differ<&K::max_copy_age_s>),
      ranged_key("continuity.refresh_s", E::SmhadRestart, channel_differ<&K::refresh_s>),
      ranged_key("continuity.max_copy_mib", E::SmhadRestart, channel_differ<&K::max_copy_mib>),
      ranged_key("continuity.max_services_per_port", E::SmhadRestart, channel_differ<&K::max_services_per_port>),
      ranged_key("continuity.max_services", E::SmhadRestart, channel_differ<&K::max_services>),
      ranged_key("continuity.max_subscriptions_per_port", E::SmhadRestart,
                 channel_differ<&K::max_subscriptions_per_port>),
      ranged_key("continuity.max_subscriptions", E::SmhadRestart, channel_differ<&K::max_subscriptions>),
      ranged_key("continuity.max_groups", E::SmhadRestart, channel_differ<&K::max_groups>),
  };
}

bool under(std::string_view path, std::string_view section) {
  return path.size() > section.size() && path.substr(0, section.size()) == section &&
         (path[section.size()] == '.' || path[section.size()] == '[');
}

}  // namespace

std::string_view to_string(ReloadEffect effect) {
  switch (effect) {
    case ReloadEffect::Live: return "live";
    case ReloadEffect::Sighup: return "SIGHUP";
    case ReloadEffect::OpensmRestart: return "OpenSM restart";
    case ReloadEffect::Rendered: return "per rendered key";
    case ReloadEffect::SmhadRestart: return "smhad restart";
  }
  return "unknown";
}

const std::vector<KeyInfo>& key_table() {
  static const std::vector<KeyInfo> table = make_table();
  return table;
}

const KeyInfo* find_key(std::string_view path) {
  for (const auto& k : key_table())
    if (k.path == path) return &k;
  return nullptr;
}

std::vector<std::string> key_names(std::string_view section) {
  std::vector<std::string> out;
  for (const auto& k : key_table()) {
    std::string name;
    if (section.empty()) {
      name = std::string(k.path.substr(0, k.path.find_first_of(".[")));
    } else if (k.path.size() > section.size() + 1 && k.path.substr(0, section.size()) == section &&
               k.path[section.size()] == '.') {
      name = std::string(k.path.substr(section.size() + 1));
    } else {
      continue;
    }
    if (std::find(out.begin(), out.end(), name) == out.end()) out.push_back(std::move(name));
  }
  return out;
}

std::string table_path(std::string_view written) {
  std::string p;
  for (std::size_t i = 0; i < written.size(); ++i) {
    p += written[i];
    if (written[i] != '[') continue;
    std::size_t j = i + 1;
    while (j < written.size() && written[j] >= '0' && written[j] <= '9') ++j;
    if (j < written.size() && written[j] == ']') i = j - 1;  // "[12]" -> "[]"
  }
  while (find_key(p) == nullptr) {
    const auto cut = p.find_last_of('.') != std::string::npos ? p.find_last_of('.') : p.find('[');
    if (cut == std::string::npos) break;
    p.resize(cut);
  }
  return p;
}

std::vector<KeyChange> changed_keys(const Config& cur, const Config& next) {
  const bool channel = cur.continuity.enabled && next.continuity.enabled;
  auto effect_of = [channel](const KeyInfo& k) { return channel && k.channel ? ReloadEffect::SmhadRestart : k.effect; };
  std::vector<KeyChange> out;
  bool items_done = false;
  for (const auto& k : key_table()) {
    if (k.peer_differs != nullptr) {
      if (items_done) continue;
      items_done = true;
      const std::size_t n = std::min(cur.peers.size(), next.peers.size());
      for (std::size_t i = 0; i < n; ++i)
        for (const auto& item : key_table())
          if (item.peer_differs != nullptr && item.peer_differs(cur.peers[i], next.peers[i]))
            out.push_back({"peers[" + std::to_string(i) + "]" + std::string(item.path.substr(7)), &item,
                           effect_of(item)});
      continue;
    }
    if (k.differs(cur, next)) out.push_back({std::string(k.path), &k, effect_of(k)});
  }
  // A key of these sections that the table misses still counts, as the section.
  auto named = [&out](std::string_view section) {
    return std::any_of(out.begin(), out.end(), [section](const KeyChange& c) { return under(c.key, section); });
  };
  if (!(cur.health == next.health) && !named("health")) out.push_back({"health", find_key("health.error_thresholds"), ReloadEffect::Live});
  if (channel && !(cur.continuity == next.continuity) && !named("continuity"))
    out.push_back({"continuity", find_key("continuity"), ReloadEffect::SmhadRestart});
  return out;
}

}  // namespace smha::config
