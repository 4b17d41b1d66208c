// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// The alarm registry: every alarm a head raises (the engine's, the fabric
// services', the peer channel's and smhad's own), its name, the raise and
// clear records and the sink they go to. Below every module that raises one,
// so none of them needs the engine's header for it.
//
// A name is the alarm on the wire (status JSON, events, the journal, metrics
// labels, log lines, hooks): never change one.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "smha/core/clock.hpp"

namespace smha {

enum class AlarmKind : std::uint8_t {
  TwoMasters,        // two SMs answer MASTER
  SmKeyMismatch,     // a head answers with another SM_Key: the SMs ignore each other
  IgnoreOtherSm,     // two masters persist and neither yields (ignore_other_sm-like)
  UnknownSm,         // an SM whose GUID is not a configured head
  LocalSmHung,       // local OpenSM runs but does not answer SMInfo
  NoMaster,          // no SM answers MASTER anywhere (track_fabric_master()), or a
                     // takeover did not produce a master within its bounds
  HandoverFailed,    // planned handover rolled back
  PriorityMismatch,  // a standby peer renders a priority our configuration does not expect
  PriorityNotApplied,  // the local SM keeps answering another priority than the one rendered
  ConfigDrift,       // a head's registered configuration digests differ from ours (fabric::DriftMonitor)
  DriftUnknown,      // a head's drift verdict stayed unknown past its bound (fabric::DriftMonitor)
  ImpostorSm,        // an SM answers with a head's GUID from another port (fabric::Census)
  LinkDegraded,      // links run below their width or speed (fabric::LinkHealth)
  LinkErrors,        // ports' error counters rising (fabric::PortErrors)
  SaCopyStale,       // the master's SA database copy here is missing or old (peer::Continuity)
  SaCopyTrimmed,     // the SA copy leaves out records nodes registered (peer::Continuity, opensm::trim_sa_dump)
  OpensmFailed,      // supervision gave up on OpenSM, or retries a crash loop (head::OpensmWatch)
};

// Every kind, in the enumeration's order (metrics list them in this order).
inline constexpr AlarmKind kAlarmKinds[] = {
    AlarmKind::TwoMasters,     AlarmKind::SmKeyMismatch,      AlarmKind::IgnoreOtherSm, AlarmKind::UnknownSm,
    AlarmKind::LocalSmHung,    AlarmKind::NoMaster,           AlarmKind::HandoverFailed,
    AlarmKind::PriorityMismatch, AlarmKind::PriorityNotApplied, AlarmKind::ConfigDrift, AlarmKind::DriftUnknown,
    AlarmKind::ImpostorSm,     AlarmKind::LinkDegraded,       AlarmKind::LinkErrors,    AlarmKind::SaCopyStale,
    AlarmKind::SaCopyTrimmed,  AlarmKind::OpensmFailed,
};

// The alarm's name ("two_masters", ...); "unknown" for a value out of range.
std::string_view to_string(AlarmKind k);
// The kind named `name` (to_string's inverse); nullopt for any other text.
std::optional<AlarmKind> alarm_kind_named(std::string_view name);

// `refresh`: the alarm is already active and only its detail changed (e.g.
// unknown_sm's SM changed state): show the new detail, record no new alarm
// event and run no hooks.
struct RaiseAlarm { AlarmKind kind; std::string detail; bool refresh = false; };
struct ClearAlarm { AlarmKind kind; };

// Where alarms go: smhad's event log (journal, status, metrics, hooks), the
// simulation's records. Every raiser -- the engine's actions as the agent
// carries them out, the fabric services, the peer channel, OpenSM's watch --
// uses one.
class AlarmSink {
 public:
  virtual ~AlarmSink() = default;
  // `a.refresh`: only the detail of an active alarm changed (no new alarm event).
  virtual void alarm(const RaiseAlarm& a, TimePoint at) = 0;
  virtual void clear(const ClearAlarm& a, TimePoint at) = 0;
};

// Makes `kind` say `detail`: raised when `current` (what was raised, "" for
// nothing) is empty, refreshed when only the detail changed, cleared when
// `detail` is empty; nothing when it already says so. `current` follows.
void set_alarm(AlarmSink& sink, AlarmKind kind, const std::string& detail, std::string& current, TimePoint now);

}  // namespace smha
