// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// One head's smha.yaml as the tests write it for a running smhad, with every
// path under one directory: <dir>/ctl/smhad.sock, <dir>/state,
// <dir>/cache, <dir>/opensm.conf, <dir>/opensm.log. The ibsim harness, the
// daemon's unit tests and the state_dir lock tests all write theirs with it.
// (Tests of the loader's positions keep their literal YAML documents.)
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace smha::test {

struct YamlPeer {
  std::string name;
  std::uint64_t guid = 0;
  int lid = 0;               // 0: no lid (found by discovery)
  std::string dr_path = {};  // e.g. "0,1,3,1"; empty: none
  std::string address = {};  // continuity address HOST:PORT; empty: none
};

struct HeadYaml {
  std::string dir;
  std::string name = "head01";
  std::uint64_t guid = 0x10;
  std::vector<YamlPeer> peers = {{"head02", 0x20}};
  std::optional<int> sm_priority;
  std::optional<int> poll_interval_ms;
  std::optional<int> misses;
  std::string failback;  // empty: the default
  std::optional<int> preempt_holddown_s;
  std::string opensm_log_file;  // empty: <dir>/opensm.log
  bool dump_files_dir = false;  // opensm.dump_files_dir: <dir>/
  std::string opensm_extra;     // lines inside the opensm: map, indented two spaces
  std::string state_dir;        // empty: <dir>/state
  std::string extra;            // appended verbatim (e.g. a metrics or hooks section)

  std::string socket() const { return dir + "/ctl/smhad.sock"; }
  std::string state() const { return state_dir.empty() ? dir + "/state" : state_dir; }
  std::string conf() const { return dir + "/opensm.conf"; }
  std::string opensm_log() const { return opensm_log_file.empty() ? dir + "/opensm.log" : opensm_log_file; }

  static std::string hex(std::uint64_t v) {
    char b[24];
    std::snprintf(b, sizeof b, "0x%016llx", static_cast<unsigned long long>(v));
    return b;
  }

  std::string text() const {
    std::ostringstream y;
    y << "node:\n  name: " << name << "\n  port_guid: " << hex(guid) << "\n";
    y << "peers:\n";
    for (const auto& p : peers) {
      y << "  - name: " << p.name << "\n    port_guid: " << hex(p.guid) << "\n";
      if (p.lid != 0) y << "    lid: " << p.lid << "\n";
      if (!p.dr_path.empty()) y << "    dr_path: \"" << p.dr_path << "\"\n";
      if (!p.address.empty()) y << "    address: \"" << p.address << "\"\n";
    }
    if (sm_priority) y << "sm_priority: " << *sm_priority << "\n";
    if (poll_interval_ms || misses || !failback.empty() || preempt_holddown_s) {
      y << "failover:\n";
      if (poll_interval_ms) y << "  poll_interval_ms: " << *poll_interval_ms << "\n";
      if (misses) y << "  misses_before_takeover: " << *misses << "\n";
      if (!failback.empty()) y << "  failback: " << failback << "\n";
      if (preempt_holddown_s) y << "  preempt_holddown_s: " << *preempt_holddown_s << "\n";
    }
    y << "opensm:\n  log_file: " << opensm_log() << "\n";
    if (dump_files_dir) y << "  dump_files_dir: " << dir << "/\n";
    y << "  cache_dir: " << dir << "/cache\n  conf_path: " << conf() << "\n" << opensm_extra;
    y << "control:\n  socket: " << socket() << "\n  group: root\n";
    y << "state_dir: " << state() << "\n";
    y << extra;
    return y.str();
  }

  // Writes text() to `path` and makes <dir>/ctl for the socket.
  void write(const std::string& path) const {
    std::filesystem::create_directories(dir + "/ctl");
    std::ofstream(path) << text();
  }
};

}  // namespace smha::test
