// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// The engine's public value types (doc/ha-engine.md): what a poll round
// observed, the engine's roles and events, and its status. Split from
// ha_machine.hpp so that the modules that build or read these (lib/fabric,
// lib/peer) need not see the engine itself. Alarms are in smha/core/alarm.hpp.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "smha/core/alarm.hpp"
#include "smha/core/clock.hpp"
#include "smha/core/sminfo.hpp"
#include "smha/core/types.hpp"

namespace smha::sm {

// ---- Observations ---------------------------------------------------------

// The local OpenSM process as the supervisor sees it.
// Failed: supervision gave up (permanent failure, crash loop); a start is
// refused. The engine does not ask again; it goes on when the process is
// Running again (a reload), or Exited again: supervision retries a crash loop
// after a long backoff and waits for the engine's start (at the priority the
// engine chooses), as after any crash.
enum class ProcessState : std::uint8_t { Stopped, Running, Exited, Failed };
std::string_view to_string(ProcessState s);

enum class PortState : std::uint8_t { Unknown, Down, Up };
std::string_view to_string(PortState s);

// One SMInfo query. Unqueried probes carry no information.
struct Probe {
  bool queried = false;
  std::optional<SmInfo> info;  // nullopt: no answer (timeout, error status, send failure)
  int attempts = 0;            // attempts used; answered: 1..N, unanswered: N
  // Unanswered, and every attempt was refused at once (an error status or an
  // error completion well before its deadline) rather than met with silence.
  // A refused SM is gone (no SM bound to the port), not hung: no fence to wait for.
  bool refused = false;
  static Probe answered(const SmInfo& i, int attempts = 1) { return Probe{true, i, attempts, false}; }
  static Probe unanswered(int attempts) { return Probe{true, std::nullopt, attempts, false}; }
  static Probe refused_by_all(int attempts) { return Probe{true, std::nullopt, attempts, true}; }
};

struct PeerProbe {
  Guid guid;            // the configured peer this is about
  Probe via_lid;
  Probe via_dr;         // not queried when no DR path is known
  PortState port = PortState::Unknown;  // the peer's port, where known
};

// An SM on the fabric that is not a configured head (lib/agent's census).
struct OtherSm {
  SmInfo info;        // its last SMInfo answer
  std::string where;  // for people: NodeDescription, LID, cabling (already printable)
};

// One poll round: every query of the round has completed (answered or not).
struct PollRound {
  ProcessState process = ProcessState::Running;
  Probe local;                          // local SM by DR hop 0
  PortState local_port = PortState::Up;
  // The kernel shows the local OpenSM process stopped (state T/t: SIGSTOP or a
  // tracer): it cannot answer until continued. False where unknown.
  bool local_stopped = false;
  std::vector<PeerProbe> peers;         // configured peers; missing ones count as unqueried
  std::vector<OtherSm> other_sms;       // SMs seen on the fabric that are not configured heads
  // The SM our port's PortInfo names as master (MasterSMLID), asked for SMInfo
  // by that LID. Queried when the LID is set and is neither ours nor a
  // configured peer's address (those are polled anyway): a peer without a
  // configured LID, one at a stale LID, or an SM that is not a head.
  Probe port_master;
  // When the round's queries were sent (the agent sets it; unset: the step's
  // `now`). An answer in this round shows the SM alive at this time at the
  // latest, so a silence is measured from here, not from when the round ended:
  // otherwise the answer's latency decides whether the fence comes at the
  // round that completes hang_timeout or one round later.
  std::optional<TimePoint> sent_at;
};
// ---- Events and roles -----------------------------------------------------

enum class EventKind : std::uint8_t {
  StateChanged,       // local SM state changed (reason "from->to")
  TakeoverStarted,    // DISCOVER sent; evidence lists the signals
  TakeoverDone,
  TakeoverAborted,    // a master answered after all
  TakeoverFallback,   // DISCOVER did not work in time: restart at master priority
  LocalFailure,       // local OpenSM exited or was fenced
  FenceLocal,         // local OpenSM hung: killed
  OpensmStarted,
  SplitBrainYield,    // we were one of two masters and restart as standby
  HandoverStarted,
  HandoverDone,
  HandoverRolledBack,
  HandoverRejected,
  PriorityChanged,
  Adopted,            // smhad started beside a running OpenSM and took it over as it was
  PeerDiscover,       // our MASTER's OpenSM exited: DISCOVER sent to the best standby's SM
  PeerRoute,          // the agent's discovery found a peer (or not) or its route changed;
                      // recorded by lib/agent, never by the engine
  ActionHeld,         // an action left out during a maintenance hold (HoldChanged); reason names it
};
std::string_view to_string(EventKind k);
// `nodes`: the other SMs the event is about (a lost master, a handover's
// target, the second master), by port GUID; the event is always also about
// this head. smhad shows each with its name and NodeDescription.
// `reason` and `evidence` are for people (log, journal, smctl); what the event
// means to code is in its typed fields: never parse the text.
struct RecordEvent {
  EventKind kind;
  std::string reason;
  std::string evidence;
  std::vector<Guid> nodes = {};
  // StateChanged: the local SM's state before and after (the reason says
  // "from->to" for people). Unset for every other kind.
  std::optional<SmState> from = std::nullopt;
  std::optional<SmState> to = std::nullopt;
  // HandoverStarted: started by the preempt failback policy, not by a request.
  bool preempt = false;
};

enum class Role : std::uint8_t {
  Init,         // nothing observed yet
  Starting,     // OpenSM (re)started or adopted; waiting for its first answer
  Standby,
  Master,
  TakingOver,   // DISCOVER sent (or fallback restart), waiting for local MASTER
  Recovering,   // local OpenSM down after a failure while master; restart deferred
  HandingOver,  // planned handover in progress
};
std::string_view to_string(Role r);

// A change of the engine's role, with what caused it (smhad logs it as SM_ROLE).
struct RoleChange {
  Role from = Role::Init;
  Role to = Role::Init;
  std::string why;
};

// What smctl status shows.
struct EngineStatus {
  Role role = Role::Init;
  std::optional<SmState> local_state;  // last answered
  std::uint8_t rendered_priority = 0;
  std::optional<Guid> master;          // who answered MASTER last round (us included)
  // While HandingOver: the head that is to be MASTER when the handover is done
  // (the chosen standby on a push, this head on a pull).
  std::optional<Guid> handover_target;
  int required_rounds = 0;
  double round_miss_estimate = 0;      // estimated chance a live peer misses a whole round
  std::vector<AlarmKind> alarms;
  // Some SM answered MASTER in the latest round: this head's, a peer's, the
  // one at our port's MasterSMLID, or one the census found. False before the
  // first round.
  bool fabric_master = false;
  // Since when no SM answered MASTER anywhere (unset while one does).
  std::optional<TimePoint> masterless_since;
  bool held = false;  // a maintenance hold is on (HoldChanged)
};

}  // namespace smha::sm
