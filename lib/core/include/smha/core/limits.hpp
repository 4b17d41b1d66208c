// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// Ranges of the HA settings, shared by the YAML loader (lib/config, which
// reports a value outside them with its file:line:column) and the engine's
// HaPolicy validation (lib/sm): one table, so whatever `smhad --check-config`
// accepts, start-up accepts too.
#pragma once

namespace smha::limits {

struct IntRange {
  long long min;
  long long max;
  constexpr bool contains(long long v) const { return v >= min && v <= max; }
};

// failover.poll_interval_ms: one SMInfo round of every SM.
inline constexpr IntRange kPollIntervalMs{10, 10000};
// failover.misses_before_takeover: silent rounds before a standby acts.
inline constexpr IntRange kMisses{1, 100};
// sm_priority and peers[].sm_priority: OpenSM's 4-bit priority (IBA 14.2.5.13 SMInfo).
inline constexpr IntRange kSmPriority{0, 15};

}  // namespace smha::limits
