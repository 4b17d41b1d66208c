// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// The key table (config::key_table): doc/configuration.md's Reload column,
// the loader's keys and the ranges agree with it; a reload's diff comes from it.
#include <catch2/catch.hpp>

#include <fstream>
#include <map>
#include <set>

#include "smha/config/keys.hpp"

using namespace smha;
using namespace smha::config;

namespace {

std::string trim(std::string s) {
  while (!s.empty() && s.front() == ' ') s.erase(s.begin());
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

std::vector<std::string> cells(const std::string& line) {
  std::vector<std::string> out;
  std::size_t pos = 1;  // after the leading '|'
  while (pos < line.size()) {
    const std::size_t bar = line.find('|', pos);
    if (bar == std::string::npos) break;
    out.push_back(trim(line.substr(pos, bar - pos)));
    pos = bar + 1;
  }
  return out;
}

struct DocRow {
  std::string reload;
  int line = 0;
};

// Every row of doc/configuration.md's key tables (header "| Key | ... |
// Reload |"), by full path: a row names its key in full ("node.name",
// "peers[].lid", "continuity") or, inside its section's table, by the rest
// ("poll_interval_ms" under "### `failover`").
std::map<std::string, DocRow> doc_rows() {
  std::ifstream doc(SMHA_CONFIGURATION_DOC);
  REQUIRE(doc);
  std::map<std::string, DocRow> rows;
  std::string section;
  bool in_table = false;
  int n = 0;
  for (std::string line; std::getline(doc, line);) {
    ++n;
    if (line.rfind("### ", 0) == 0) {
      const auto a = line.find('`');
      const auto b = a == std::string::npos ? a : line.find('`', a + 1);
      section = a == std::string::npos || b == std::string::npos ? "" : line.substr(a + 1, b - a - 1);
      in_table = false;
      continue;
    }
    if (line.rfind('|', 0) != 0) {
      in_table = false;
      continue;
    }
    const auto c = cells(line);
    if (c.size() >= 2 && c.front() == "Key" && c.back() == "Reload") {
      in_table = true;
      continue;
    }
    if (!in_table || c.empty() || c.front().size() < 3 || c.front().front() != '`') continue;
    const std::string key = c.front().substr(1, c.front().size() - 2);
    const bool full = section.empty() || key == section || key.rfind(section + ".", 0) == 0 ||
                      key.rfind(section + "[", 0) == 0;
    const std::string path = full ? key : section + "." + key;
    INFO(path << " at line " << n);
    CHECK(rows.count(path) == 0);  // each key once
    rows[path] = DocRow{c.back(), n};
  }
  return rows;
}

std::optional<ReloadEffect> effect_of(const std::string& cell) {
  for (auto e : {ReloadEffect::Live, ReloadEffect::Sighup, ReloadEffect::OpensmRestart, ReloadEffect::Rendered,
                 ReloadEffect::SmhadRestart})
    if (cell.rfind(std::string(to_string(e)), 0) == 0) return e;
  return std::nullopt;
}

Config load(const std::string& text) {
  auto r = load_config_from_string(text, "t.yaml");
  INFO(r.error_text());
  REQUIRE(r.ok());
  return r.value();
}

const std::string kNode = "node:\n  name: head01\n  port_guid: 0x10\n";
const std::string kPeers = "peers:\n  - name: head02\n    port_guid: 0x20\n    lid: 7\n    address: 10.0.0.2:7390\n";

std::vector<std::string> keys_of(const std::vector<KeyChange>& changes) {
  std::vector<std::string> out;
  for (const auto& c : changes) out.push_back(c.key);
  return out;
}

}  // namespace

TEST_CASE("the key table and doc/configuration.md's Reload column name the same keys with the same effect") {
  const auto rows = doc_rows();
  std::set<std::string> table;
  for (const auto& k : key_table()) {
    const std::string path(k.path);
    INFO(path);
    CHECK(table.insert(path).second);  // each key once
    const auto it = rows.find(path);
    REQUIRE(it != rows.end());
    const std::string& cell = it->second.reload;
    INFO("doc/configuration.md:" << it->second.line << ": " << cell);
    CHECK(effect_of(cell) == k.effect);
    CHECK((cell.find("engine restart") != std::string::npos) == k.engine);
    CHECK((cell.find("smhad restart with `continuity`") != std::string::npos) == k.channel);
  }
  for (const auto& [path, row] : rows) {
    INFO("doc/configuration.md:" << row.line << ": " << path << " is not in config::key_table()");
    CHECK(table.count(path) == 1);
  }
}

TEST_CASE("the key table: every ranged key's range is limits::kRangedKeys', and no other key has one") {
  std::set<std::string> ranged;
  for (const auto& [path, range] : limits::kRangedKeys) {
    INFO(path);
    const KeyInfo* k = find_key(path);
    REQUIRE(k != nullptr);
    REQUIRE(k->range.has_value());
    CHECK(k->range->min == range.min);
    CHECK(k->range->max == range.max);
    ranged.insert(std::string(path));
  }
  for (const auto& k : key_table()) {
    INFO(k.path);
    CHECK(k.range.has_value() == (ranged.count(std::string(k.path)) == 1));
    CHECK((k.differs != nullptr) != (k.peer_differs != nullptr));  // one way to compare it
  }
}

TEST_CASE("the loader accepts exactly the table's keys: each given in a file lands on its table entry") {
  // Every key of the table set in one file (continuity's files need not exist to load).
  const std::string all =
      "fabric: fab0\nnode:\n  name: head01\n  port_guid: 0x10\n"
      "peers:\n  - name: head02\n    port_guid: 0x20\n    lid: 7\n    dr_path: \"0,1\"\n    sm_priority: 3\n"
      "    address: 10.0.0.2:7390\n"
      "sm_priority: 4\nsm_key: 0x1234\nsa_key: 0x5678\nhook_timeout_s: 5\ndrift_unknown_alarm_s: 600\n"
      "state_dir: /var/lib/smha/fab0\n"
      "failover:\n  poll_interval_ms: 100\n  misses_before_takeover: 3\n  failback: sticky\n  preempt_holddown_s: 30\n"
      "  opensm_polling_timeout_ms: 2000\n  opensm_polling_retries: 4\n"
      "opensm:\n  binary: /usr/sbin/opensm\n  flavor: auto\n  routing_engine: minhop\n  sweep_interval: 10\n"
      "  max_wire_smps: 8\n  adaptive_routing: false\n  sharp: false\n  downgrade_unsupported: false\n"
      "  log_file: /var/log/o.log\n  dump_files_dir: /var/log/o/\n  cache_dir: /var/cache/o\n"
      "  conf_path: /var/lib/smha/o.conf\n  honor_guid2lid_file: true\n  lid_continuity: true\n  sa_db_dump: true\n"
      "  sa_db_file: /var/lib/smha/sa.copy\n  extra:\n    lmc: 0\n  restart_backoff_initial_ms: 1000\n"
      "  restart_backoff_max_s: 60\n  restart_stable_s: 60\n  crash_loop_count: 5\n  crash_loop_window_s: 300\n"
      "  crash_loop_retry_s: 600\n  crash_loop_retry_no_master_s: 60\n"
      "control:\n  socket: /run/smha/fab0.sock\n  group: smha\n"
      "metrics:\n  listen: 127.0.0.1:9464\n  textfile_dir: /tmp\n  textfile_interval_s: 15\n"
      "hooks:\n  master: /bin/true\n"
      "health:\n  link_degraded_alarm: true\n  link_degraded_min_links: 1\n  expect_switch_links: 4X\n"
      "  expect_ca_links: 4X\n  counter_reads_per_second: 20\n  counter_start_after_s: 30\n  error_window_s: 3600\n"
      "  link_errors_alarm: true\n  link_errors_min_ports: 1\n  error_thresholds:\n    symbol_errors: 10\n"
      "continuity:\n  listen: 0.0.0.0:7390\n  certificate: /etc/smha/h.pem\n  private_key: /etc/smha/h.key\n"
      "  ca: /etc/smha/ca.pem\n  max_copy_age_s: 120\n  refresh_s: 30\n  max_copy_mib: 64\n"
      "  max_services_per_port: 64\n  max_services: 4096\n  max_subscriptions_per_port: 64\n"
      "  max_subscriptions: 4096\n  max_groups: 8192\n";
  const Config c = load(all);
  std::set<std::string> given;
  for (const auto& [written, pos] : c.positions) {
    INFO(written);
    const std::string path = table_path(written);
    CHECK(find_key(path) != nullptr);
    given.insert(path);
  }
  // Sections and lists are entries of their own; sm_key_file and sa_key_file
  // exclude sm_key and sa_key, node.ca and node.port exclude node.port_guid.
  const Config by_ca = load("node:\n  name: head01\n  ca: mlx5_0\n  port: 1\n" + kPeers);
  for (const auto& [written, pos] : by_ca.positions) given.insert(table_path(written));
  for (const auto& k : key_table()) {
    const std::string path(k.path);
    if (path == "peers" || path == "continuity" || path == "sm_key_file" || path == "sa_key_file") continue;
    // The loader keeps no position for a peer's lid and dr_path: their values say they were taken.
    if (path == "peers[].lid" || path == "peers[].dr_path") continue;
    INFO(path);
    CHECK(given.count(path) == 1);
  }
  REQUIRE(c.peers.size() == 1);
  CHECK(c.peers[0].lid == Lid{7});
  CHECK(c.peers[0].dr_path.has_value());
  // The loader's own lists are the table's.
  CHECK(key_names("failover") == std::vector<std::string>{"poll_interval_ms", "misses_before_takeover", "failback",
                                                          "preempt_holddown_s", "opensm_polling_timeout_ms",
                                                          "opensm_polling_retries"});
  CHECK(key_names("peers[]") ==
        std::vector<std::string>{"name", "port_guid", "lid", "dr_path", "sm_priority", "address"});
  CHECK(key_names("") == std::vector<std::string>{"node", "peers", "sm_priority", "failover", "sm_key",
                                                  "sm_key_file", "sa_key", "sa_key_file", "opensm", "control",
                                                  "metrics", "hooks", "hook_timeout_s", "state_dir",
                                                  "drift_unknown_alarm_s", "fabric", "health", "continuity"});
}

TEST_CASE("table_path: a key as written to its table entry") {
  CHECK(table_path("peers[12].address") == "peers[].address");
  CHECK(table_path("peers[0]") == "peers");
  CHECK(table_path("health.error_thresholds.symbol_errors") == "health.error_thresholds");
  CHECK(table_path("opensm.extra.lmc") == "opensm.extra");
  CHECK(table_path("hooks.master[1]") == "hooks");
  CHECK(table_path("opensm.sweep_interval") == "opensm.sweep_interval");
}

TEST_CASE("changed_keys: each changed key once, as written, with its effect, the running channel's are restarts") {
  const Config a = load(kNode + kPeers);
  CHECK(changed_keys(a, a).empty());
  Config b = load(kNode + kPeers + "failover:\n  poll_interval_ms: 200\nhook_timeout_s: 3\n" +
                  "health:\n  error_window_s: 120\nopensm:\n  sweep_interval: 20\n  crash_loop_count: 7\n");
  const auto ch = changed_keys(a, b);
  CHECK(keys_of(ch) == std::vector<std::string>{"failover.poll_interval_ms", "opensm.sweep_interval",
                                                "opensm.crash_loop_count", "hook_timeout_s",
                                                "health.error_window_s"});
  CHECK(ch[0].info->engine);
  CHECK(ch[1].effect == ReloadEffect::Sighup);
  CHECK(ch[2].effect == ReloadEffect::SmhadRestart);
  CHECK(ch[3].effect == ReloadEffect::Live);
  CHECK_FALSE(ch[3].info->engine);
  CHECK(ch[4].info->engine);

  // A peer's keys, by item; its address is the channel's only.
  b = load(kNode + "peers:\n  - name: head02\n    port_guid: 0x20\n    lid: 9\n    address: 10.0.0.9:7390\n");
  auto pc = changed_keys(a, b);
  REQUIRE(keys_of(pc) == std::vector<std::string>{"peers[0].lid", "peers[0].address"});
  CHECK(pc[0].effect == ReloadEffect::Live);
  CHECK(pc[1].effect == ReloadEffect::Live);
  const std::string channel = "continuity:\n  listen: 0.0.0.0:7390\n  certificate: /c.pem\n  private_key: /c.key\n"
                              "  ca: /ca.pem\n";
  pc = changed_keys(load(kNode + kPeers + channel),
                    load(kNode + "peers:\n  - name: head02\n    port_guid: 0x20\n    lid: 9\n    address: "
                                 "10.0.0.9:7390\n" + channel));
  REQUIRE(keys_of(pc) == std::vector<std::string>{"peers[0].lid", "peers[0].address"});
  CHECK(pc[0].effect == ReloadEffect::Live);
  CHECK(pc[1].effect == ReloadEffect::SmhadRestart);
}
