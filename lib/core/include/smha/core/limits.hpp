// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// The ranges of every integer setting in smha.yaml, in one table: the YAML
// loader (lib/config) reports a value outside them with its file:line:column,
// the engine's HaPolicy validation (lib/sm) checks the HA ones again, and a
// unit test holds doc/configuration.md to the same numbers. So whatever
// `smhad --check-config` accepts, start-up accepts too, and the docs say so.
#pragma once

#include <array>
#include <limits>
#include <string_view>

namespace smha::limits {

struct IntRange {
  long long min;
  long long max;
  constexpr bool contains(long long v) const { return v >= min && v <= max; }
};

// node.port: a physical HCA port number.
inline constexpr IntRange kHcaPort{1, 254};
// sm_priority and peers[].sm_priority: OpenSM's 4-bit priority (IBA 14.2.5.13 SMInfo).
inline constexpr IntRange kSmPriority{0, 15};
// hook_timeout_s: how long a notify hook may run before it is killed.
inline constexpr IntRange kHookTimeoutS{1, 3600};
// Longer than a few read intervals (20 s) and a lease (60 s): an SA that
// answers late, or a peer restarting, is no alarm.
inline constexpr IntRange kDriftUnknownAlarmS{60, 86400};
// failover.poll_interval_ms: one SMInfo round of every SM.
inline constexpr IntRange kPollIntervalMs{10, 10000};
// failover.misses_before_takeover: silent rounds before a standby acts.
inline constexpr IntRange kMisses{1, 100};
// failover.preempt_holddown_s: how long a returning preferred head waits.
inline constexpr IntRange kPreemptHolddownS{0, 86400};
// failover.opensm_polling_timeout_ms / _retries: OpenSM's own standby polling.
inline constexpr IntRange kOpensmPollingTimeoutMs{1, std::numeric_limits<int>::max()};
inline constexpr IntRange kOpensmPollingRetries{0, 100};
// opensm.sweep_interval (seconds; OpenSM's light sweep).
inline constexpr IntRange kSweepIntervalS{1, 86400};
// opensm.max_wire_smps: SMPs OpenSM keeps outstanding at once.
inline constexpr IntRange kMaxWireSmps{1, 64};
// opensm.restart_* and crash_loop_*: the supervisor's respawn policy.
inline constexpr IntRange kRestartBackoffInitialMs{10, 600000};
inline constexpr IntRange kRestartBackoffMaxS{1, 3600};
inline constexpr IntRange kRestartStableS{1, 86400};
inline constexpr IntRange kCrashLoopCount{1, 1000};
inline constexpr IntRange kCrashLoopWindowS{1, 86400};
// A crash loop's retry: often enough that a fabric gets its SM back within
// minutes of the cause going, rarely enough that a lasting fault costs one
// OpenSM start per retry.
inline constexpr IntRange kCrashLoopRetryS{10, 86400};
// metrics.textfile_interval_s: how often the node_exporter textfile is written.
inline constexpr IntRange kTextfileIntervalS{1, 3600};
inline constexpr IntRange kLinkDegradedMinLinks{1, 100000};
// health.*: the error counters' reader (doc/health.md): its MAD rate (0:
// off), how long the head is master first, the window "rising" looks back
// over, the ports that raise link_errors and each counter's threshold.
inline constexpr IntRange kCounterReadsPerSecond{0, 1000};
inline constexpr IntRange kCounterStartAfterS{0, 86400};
inline constexpr IntRange kErrorWindowS{60, 604800};
inline constexpr IntRange kLinkErrorsMinPorts{1, 100000};
inline constexpr IntRange kErrorThreshold{1, 65535};
// continuity.*: the peer channel (doc/continuity.md): how old the SA copy may
// be before sa_copy_stale, how often the master re-sends an unchanged copy,
// the largest copy taken (MiB).
inline constexpr IntRange kMaxCopyAgeS{10, 86400};
inline constexpr IntRange kCopyRefreshS{5, 3600};
inline constexpr IntRange kMaxCopyMiB{1, 1024};
// continuity.max_services*, max_subscriptions*, max_groups: records an SA
// copy may carry (0: no bound).
inline constexpr IntRange kCopyRecords{0, 1000000};

// Every ranged key by its path in smha.yaml (doc/configuration.md lists each
// with the same range; tests/unit/config checks it).
struct RangedKey {
  std::string_view path;
  IntRange range;
};
inline constexpr std::array<RangedKey, 34> kRangedKeys{{
    {"node.port", kHcaPort},
    {"sm_priority", kSmPriority},
    {"hook_timeout_s", kHookTimeoutS},
    {"drift_unknown_alarm_s", kDriftUnknownAlarmS},
    {"failover.poll_interval_ms", kPollIntervalMs},
    {"failover.misses_before_takeover", kMisses},
    {"failover.preempt_holddown_s", kPreemptHolddownS},
    {"failover.opensm_polling_timeout_ms", kOpensmPollingTimeoutMs},
    {"failover.opensm_polling_retries", kOpensmPollingRetries},
    {"opensm.sweep_interval", kSweepIntervalS},
    {"opensm.max_wire_smps", kMaxWireSmps},
    {"opensm.restart_backoff_initial_ms", kRestartBackoffInitialMs},
    {"opensm.restart_backoff_max_s", kRestartBackoffMaxS},
    {"opensm.restart_stable_s", kRestartStableS},
    {"opensm.crash_loop_count", kCrashLoopCount},
    {"opensm.crash_loop_window_s", kCrashLoopWindowS},
    {"opensm.crash_loop_retry_s", kCrashLoopRetryS},
    {"opensm.crash_loop_retry_no_master_s", kCrashLoopRetryS},
    {"metrics.textfile_interval_s", kTextfileIntervalS},
    {"health.link_degraded_min_links", kLinkDegradedMinLinks},
    {"health.counter_reads_per_second", kCounterReadsPerSecond},
    {"health.counter_start_after_s", kCounterStartAfterS},
    {"health.error_window_s", kErrorWindowS},
    {"health.link_errors_min_ports", kLinkErrorsMinPorts},
    {"health.error_thresholds", kErrorThreshold},
    {"peers[].sm_priority", kSmPriority},
    {"continuity.max_copy_age_s", kMaxCopyAgeS},
    {"continuity.refresh_s", kCopyRefreshS},
    {"continuity.max_copy_mib", kMaxCopyMiB},
    {"continuity.max_services_per_port", kCopyRecords},
    {"continuity.max_services", kCopyRecords},
    {"continuity.max_subscriptions_per_port", kCopyRecords},
    {"continuity.max_subscriptions", kCopyRecords},
    {"continuity.max_groups", kCopyRecords},
}};

}  // namespace smha::limits
