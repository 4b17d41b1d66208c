// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// Every metric name smhad renders for a snapshot with every part set
// (histogram families also as _bucket, _sum and _count): what the shipped
// alert rules and Grafana dashboard may query.
#pragma once

#include <set>
#include <sstream>
#include <string>

#include "smha/control/metrics.hpp"

namespace smha::control::test {

inline std::set<std::string> rendered_metric_names() {
  MetricsSnapshot m;
  m.node = "head01";
  m.role = "master";
  m.sms = {{"head01", smha::Guid{0xa1}, smha::SmState::Master, 15}};
  m.fabric_sms = {{"master", 1}};
  m.active_alarms = {"config_drift"};
  m.known_alarms = {"two_masters", "no_master", "config_drift"};
  m.version = "1.0";
  m.start_time = 1.0;
  m.last_reload_success = 1.0;
  m.last_takeover_seconds = 0.1;
  m.last_report = smha::control::MetricsSnapshot::LastReport{0.5, 0, true, 0};
  m.failovers_by_reason = {{"takeover", 1}};
  m.config_digests = {{"opensm_conf", "00112233445566"}, {"partitions", "66554433221100"}};
  m.drift_peers = {{"head02", "drift"}};
  m.drift_rejected = {{"foreign", 1}};
  m.health = MetricsSnapshot::Health{{{"switch-ca", 4}}, {{"switch-ca", 1}}, 1, 0,
                                     {{"a", "b", "1X SDR", "4X SDR", "below_tier", 0.25}}};
  ErrorCounterMetrics e;
  e.reading = true;
  e.ports = {{"over_threshold", 1}};
  e.rising_by_counter = {{"symbol_errors", 1}};
  e.worst = {{"Switch2 0x1 port 2", "SymbolErrorCounter", 25}};
  m.errors = e;
  ContinuityMetrics k;
  k.sa_copy_age_s = 3;
  k.guid2lid_copy_age_s = 3;
  k.refused = {{"not_master", 1}};
  k.peer_up = {{"head02", true}};
  m.continuity = k;
  std::set<std::string> names;
  std::istringstream in(render_prometheus(m));
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    names.insert(line.substr(0, line.find_first_of("{ ")));
  }
  return names;
}

}  // namespace smha::control::test
