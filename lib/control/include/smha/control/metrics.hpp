// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// Prometheus text exposition (format 0.0.4) of a metrics snapshot. Pure: the
// daemon fills a MetricsSnapshot from its state and serves or writes the text
// (HTTP on localhost, or an atomic write into node_exporter's textfile dir).
//
// Metric families (all prefixed smha_, labels in braces):
//   smha_role{node,role}                 gauge 1 for this head's current role, 0 for the others
//   smha_sm_up{node,guid}                gauge 1 if the SM answered its last SMInfo poll
//   smha_sm_state{node,guid}             gauge SMInfo SMState: 0 not-active, 1 discovering, 2 standby, 3 master
//   smha_sm_priority{node,guid}          gauge SMInfo priority
//   smha_sm_master{node,guid}            gauge 1 if that SM is MASTER
//   (state, priority and master only for SMs that answered)
//   smha_fabric_sms{state}               gauge SMs the census knows on the fabric (heads included), per
//                                        state: master, standby, discovering, notactive, silent, unknown
//   smha_lid_continuity_entries          gauge entries in the guid2lid smhad last wrote (doc/lid-continuity.md)
//   smha_lid_continuity_writes_total     counter guid2lid files written
//   smha_lid_continuity_write_errors_total counter failed reads/writes of it
//   smha_lid_continuity_rejected_total{reason} counter fabric answers refused: bad_lid, duplicate_lid, conflict
//   (the lid_continuity families only while it is on)
//   smha_failovers_total{reason}         counter
//   smha_last_takeover_duration_seconds  gauge (absent until the first takeover)
//   smha_poll_rtt_seconds                histogram (_bucket{le}, _sum, _count)
//   smha_missed_polls_total              counter
//   smha_opensm_restarts_total           counter
//   smha_alarm_active{alarm}             gauge 1 per active alarm, 0 for every other known alarm
//   smha_alarms_active                   gauge number of active alarms
//   smha_hold_active                     gauge 1 while a maintenance hold is in force
//   smha_build_info{version}             gauge 1 (absent if the version is unknown)
//   smha_start_time_seconds              gauge smhad's start, Unix time
//   smha_config_last_reload_success_timestamp_seconds  gauge the last successful load, Unix time
//   smha_config_digest_info{node,<component>...} gauge 1, this head's config digests (never sm_key's)
//   (counters and labelled gauges carry every known label value from the start, at 0)
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "smha/core/types.hpp"

namespace smha::control {

struct SmMetrics {
  std::string node;  // the head's name ("" if unknown)
  Guid guid;
  SmState state = SmState::NotActive;
  uint8_t priority = 0;
  bool answered = true;  // false: no SMInfo answer (state and priority unknown)
};

// Cumulative histogram: counts[i] observations <= bounds[i] (bounds ascending,
// seconds); count is the total (the +Inf bucket), sum the sum of observations.
struct Histogram {
  std::vector<double> bounds;
  std::vector<uint64_t> counts;
  uint64_t count = 0;
  double sum = 0.0;
};

// The error counters' part of a metrics snapshot (and of a head's status):
// ports by state, ports rising by counter key, the reader's totals and the
// worst kMetricsWorst ports by name (never one series per port).
struct ErrorCounterMetrics {
  bool reading = false;                 // this head reads now (its OpenSM is MASTER)
  std::map<std::string, uint64_t> ports;             // read, unknown, with_errors, rising, over_threshold
  std::map<std::string, uint64_t> rising_by_counter; // every counter key, 0 included
  uint64_t reads = 0;
  uint64_t failures = 0;
  uint64_t wrong_port = 0;
  uint64_t resets = 0;
  struct Worst {
    std::string port;     // "<description> <guid> port N", raw
    std::string counter;  // the counter risen most past its threshold
    double rise = 0;      // its rise within the window
  };
  std::vector<Worst> worst;
};

// The peer channel (doc/continuity.md): the copies held here, what arrived
// and was refused, and each peer's outbound link.
struct ContinuityMetrics {
  bool sending = false;                      // this head's OpenSM is MASTER: it sends
  std::optional<double> sa_copy_age_s;       // since the master last confirmed the SA copy; none held: unset
  std::optional<double> guid2lid_copy_age_s;
  uint64_t sa_groups = 0;                    // in the SA copy held
  uint64_t sa_members = 0;
  uint64_t sa_services = 0;
  uint64_t sa_subscriptions = 0;
  uint64_t received = 0;
  uint64_t applied = 0;
  std::map<std::string, uint64_t> refused;   // by reason token, every reason
  uint64_t sent = 0;
  uint64_t handshake_failed = 0;
  uint64_t unknown_identity = 0;
  uint64_t protocol_errors = 0;
  uint64_t rejected_source_limit = 0;
  uint64_t rejected_rate = 0;
  uint64_t rejected_memory = 0;
  uint64_t preauth_timeouts = 0;
  std::map<std::string, bool> peer_up;       // outbound link up, by peer name
};

struct MetricsSnapshot {
  std::string node;
  // The instance's fabric: a `fabric` label on every sample when set (several
  // smhad on one head, one per fabric), none on a one-fabric head.
  std::string fabric;
  std::string role;  // "master", "standby", "not_active", "discovering", "held", ...
  std::vector<std::string> roles = {"master", "standby", "discovering", "not_active", "failed"};
  std::vector<SmMetrics> sms;
  // The census (doc/census.md): SMs per state; every state in fabric_sm_states
  // is rendered (0 when absent).
  std::map<std::string, uint64_t> fabric_sms;
  std::vector<std::string> fabric_sm_states = {"master", "standby", "discovering", "notactive", "silent", "unknown"};
  // LID continuity (doc/lid-continuity.md); absent while off.
  struct LidContinuity {
    uint64_t entries = 0;
    uint64_t writes = 0;
    uint64_t write_errors = 0;
    std::map<std::string, uint64_t> rejected;  // bad_lid, duplicate_lid, conflict
  };
  std::optional<LidContinuity> lid_continuity;
  std::map<std::string, uint64_t> failovers_by_reason;
  std::optional<double> last_takeover_seconds;
  // The last takeover report's workload figures (doc/takeover-report.md);
  // each unset when the report has none.
  struct LastReport {
    std::optional<double> sa_outage_seconds;
    std::optional<std::uint64_t> lft_entries_changed;
    bool sa_restored = false;
    std::optional<std::uint64_t> groups_lost;  // groups of the copy not at their MLID
  };
  std::optional<LastReport> last_report;
  Histogram poll_rtt;
  uint64_t missed_polls = 0;
  uint64_t opensm_restarts = 0;
  std::vector<std::string> active_alarms;
  std::vector<std::string> known_alarms;  // rendered at 0 unless active
  bool hold_active = false;
  std::string version;                    // smha_build_info
  std::optional<double> start_time;       // Unix seconds
  std::optional<double> last_reload_success;  // Unix seconds
  // Config drift (doc/drift.md): this head's digests, component -> hex (empty:
  // none computed); each peer's state ("unknown", "match", "drift"); records
  // rejected by reason ("foreign", "bad_digest").
  std::vector<std::pair<std::string, std::string>> config_digests;
  std::vector<std::pair<std::string, std::string>> drift_peers;
  std::map<std::string, uint64_t> drift_rejected;
  // Fabric health (doc/health.md); nullopt: off or not assessed yet. Bounded:
  // counts by kind, and the worst few links by name (never one series per port).
  struct Health {
    std::map<std::string, uint64_t> links_by_kind;
    std::map<std::string, uint64_t> degraded_by_kind;
    uint64_t degraded = 0;
    uint64_t unknown = 0;
    struct Worst {
      std::string a, b, active, should, why;
      double fraction = 1;
    };
    std::vector<Worst> worst;
  };
  std::optional<Health> health;
  // Error counters (doc/health.md); nullopt: off. Bounded like Health.
  std::optional<ErrorCounterMetrics> errors;
  // The peer channel; nullopt: not configured.
  std::optional<ContinuityMetrics> continuity;
};

// The config digest component smha_config_digest_info never carries: the
// SM_Key's fingerprint. Whoever can reach the listener (any local user) or
// read the textfile (mode 0644, often published by node_exporter) could
// otherwise search the key offline, one SHA-1 per guess, and SM_Keys are not
// always chosen from all 2^64 values. Drift of the key is still detected in
// band and shows as smha_config_drift_peer_state and alarm config_drift.
inline constexpr const char* kUnexposedDigest = "sm_key";

// Renders the snapshot. Label values are escaped (\\, \", \n); if `role` is not
// in `roles` it is added. A histogram whose bounds and counts differ in length
// is rendered with the common prefix only.
std::string render_prometheus(const MetricsSnapshot& snapshot);

}  // namespace smha::control
