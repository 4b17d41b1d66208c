// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// Where a fabric service's alarms go: smha::AlarmSink (smha/core/alarm.hpp).
// agent::EventSink is one (smhad's journal and metrics, the simulation's
// records); the drift check raises and clears config_drift and drift_unknown
// through it.
#pragma once

#include "smha/core/alarm.hpp"

namespace smha::fabric {

// Old spelling, kept for callers.
using smha::AlarmSink;
using smha::set_alarm;

}  // namespace smha::fabric
