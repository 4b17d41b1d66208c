// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// Three events in a LogEventSink whose SMs are named (the journal's and the
// events method's tests): a takeover_started naming the peer and this head, a
// handover_rejected naming a stray SM, a daemon note naming none. The peer's
// NodeDescription carries a control byte.
#pragma once

#include "smha/head/event_log.hpp"

namespace smha::test {

inline constexpr Guid kNamedOwn{0x0002c90300000001};
inline constexpr Guid kNamedPeer{0x0002c90300000002};
inline constexpr Guid kNamedStray{0x0002c90300000009};

inline void record_named_events(head::LogEventSink& sink) {
  sink.set_node_namer(kNamedOwn, [](Guid g) {
    if (g == kNamedOwn) return head::EventNode{"head01", g, "head01 HCA-1"};
    if (g == kNamedPeer) return head::EventNode{"head02", g, "head02 \x01HCA-1"};
    return head::EventNode{"", g, ""};
  });
  // This head first, then the event's own nodes, each once.
  sink.event({sm::EventKind::TakeoverStarted, "master lost", "head02 silent", {kNamedPeer, kNamedOwn, kNamedPeer}},
             TimePoint{});
  sink.event({sm::EventKind::HandoverRejected, "no live standby", "", {kNamedStray}}, TimePoint{});
  sink.note("RELOAD", "configuration reloaded");  // a daemon note names no SM
}

}  // namespace smha::test
