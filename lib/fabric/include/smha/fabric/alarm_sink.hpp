// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// Where a fabric service's alarms go. agent::EventSink is one (smhad's journal
// and metrics, the simulation's records); the drift check raises and clears
// config_drift and drift_unknown through it.
#pragma once

#include <string>

#include "smha/core/clock.hpp"
#include "smha/sm/ha_machine.hpp"

namespace smha::fabric {

class AlarmSink {
 public:
  virtual ~AlarmSink() = default;
  // `a.refresh`: only the detail of an active alarm changed (no new alarm event).
  virtual void alarm(const sm::RaiseAlarm& a, TimePoint at) = 0;
  virtual void clear(const sm::ClearAlarm& a, TimePoint at) = 0;
};

// Makes `kind` say `detail`: raised when `current` (what was raised, "" for
// nothing) is empty, refreshed when only the detail changed, cleared when
// `detail` is empty; nothing when it already says so. `current` follows.
inline void set_alarm(AlarmSink& sink, sm::AlarmKind kind, const std::string& detail, std::string& current,
                      TimePoint now) {
  if (detail.empty()) {
    if (!current.empty()) sink.clear(sm::ClearAlarm{kind}, now);
  } else if (detail != current) {
    sink.alarm(sm::RaiseAlarm{kind, detail, !current.empty()}, now);
  }
  current = detail;
}

}  // namespace smha::fabric
