// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/core/alarm.hpp"

namespace smha {

std::string_view to_string(AlarmKind k) {
  switch (k) {
    case AlarmKind::TwoMasters: return "two_masters";
    case AlarmKind::SmKeyMismatch: return "sm_key_mismatch";
    case AlarmKind::IgnoreOtherSm: return "ignore_other_sm";
    case AlarmKind::UnknownSm: return "unknown_sm";
    case AlarmKind::LocalSmHung: return "local_sm_hung";
    case AlarmKind::NoMaster: return "no_master";
    case AlarmKind::HandoverFailed: return "handover_failed";
    case AlarmKind::PriorityMismatch: return "priority_mismatch";
    case AlarmKind::PriorityNotApplied: return "priority_not_applied";
    case AlarmKind::ConfigDrift: return "config_drift";
    case AlarmKind::DriftUnknown: return "drift_unknown";
    case AlarmKind::ImpostorSm: return "impostor_sm";
    case AlarmKind::LinkDegraded: return "link_degraded";
    case AlarmKind::LinkErrors: return "link_errors";
    case AlarmKind::SaCopyStale: return "sa_copy_stale";
    case AlarmKind::SaCopyTrimmed: return "sa_copy_trimmed";
    case AlarmKind::OpensmFailed: return "opensm_failed";
  }
  return "unknown";
}

std::optional<AlarmKind> alarm_kind_named(std::string_view name) {
  for (const AlarmKind k : kAlarmKinds)
    if (to_string(k) == name) return k;
  return std::nullopt;
}

void set_alarm(AlarmSink& sink, AlarmKind kind, const std::string& detail, std::string& current, TimePoint now) {
  if (detail.empty()) {
    if (!current.empty()) sink.clear(ClearAlarm{kind}, now);
  } else if (detail != current) {
    sink.alarm(RaiseAlarm{kind, detail, !current.empty()}, now);
  }
  current = detail;
}

}  // namespace smha
