// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// HaPolicy: the engine's own configuration, a plain struct. The daemon maps its
// Config onto it; lib/sm does not depend on lib/config.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "smha/core/clock.hpp"
#include "smha/core/result.hpp"
#include "smha/core/types.hpp"

namespace smha::sm {

// What happens when a former master comes back healthy.
//   Sticky:  it stays STANDBY; mastership moves only on failure or by request.
//   Preempt: the preferred head takes mastership back by a planned handover
//            (priority + SIGHUP) after it has been healthy for `preempt_hold_down`.
enum class FailbackMode : std::uint8_t { Sticky, Preempt };
std::string_view to_string(FailbackMode mode);

// Another head node running smhad + OpenSM.
struct PeerSpec {
  std::string name;  // for events and logs ("head02")
  Guid guid;         // port GUID of its OpenSM
  // Its configured sm_priority (0..15); nullopt: the same as this head's.
  std::optional<std::uint8_t> priority = std::nullopt;
};

struct HaPolicy {
  std::string node_name;       // this head, for events and hooks
  Guid own_guid;               // port GUID our OpenSM binds to
  std::vector<PeerSpec> peers; // every other head (N >= 2 heads: at least one peer)

  Duration poll_interval = milliseconds(100);
  // Consecutive poll rounds in which no path reached the master before a standby
  // acts. The engine raises this on its own while it observes MAD loss (see
  // HaMachine::required_rounds), never lowers it.
  int misses = 3;
  FailbackMode failback = FailbackMode::Sticky;
  Duration preempt_hold_down = seconds(30);
  // DISCOVER -> local MASTER; past it the engine restarts OpenSM at the master
  // priority (which also makes OpenSM sweep and take over if no master answers).
  Duration takeover_bound = milliseconds(1000);
  // An SM that answers DISCOVERING is in its discovery sweep, which grows with
  // the fabric (~1-2 s at 1000 HCAs under ibsim). Up to this long the engine
  // waits for it instead of restarting it (our own SM after DISCOVER) or racing
  // it with a second sweep (a peer taking over while our OpenSM is down).
  Duration sweep_bound = seconds(30);
  // Planned handover: new master visible within this, else rolled back.
  Duration handover_bound = seconds(5);
  // A freshly started OpenSM answers SMInfo only after its first sweep created
  // its port object; no hang verdict on it before this.
  Duration start_grace = seconds(5);
  // This head's configured sm_priority (0..15). The rendered priorities derive
  // from every head's configured priority (see priorities()); with the same P
  // (1..13) on every head: yield P-1, standby P, master P+1, claim P+2.
  std::uint8_t base_priority = 10;
  // Preempt mode: the head that should hold mastership when healthy. Default:
  // the highest configured priority, then the lowest GUID (OpenSM's own order).
  std::optional<Guid> preferred_master;
  // A local OpenSM that runs but leaves SMInfo on DR hop 0 unanswered for
  // `misses` rounds AND this long since its last answer is hung: fenced
  // (SIGKILL). A peer waits longer than this before it acts on a master that is
  // silent (not refused), so the smhad beside a hung master fences it first.
  Duration hang_timeout = milliseconds(400);
  // hang_timeout applies when the kernel shows the local OpenSM stopped
  // (SIGSTOP, tracer) or a peer already answers MASTER. An OpenSM that still
  // runs but answers late or not at all (busy: a sweep under heavy MAD loss) is
  // fenced only after this much silence: killing a busy master is a bigger
  // disruption than waiting, and a peer that takes over meanwhile makes it fast.
  Duration unresponsive_timeout = seconds(10);
  // How long one SMInfo query may take within a round (the agent sets it from
  // its query scheme); the peer's wait for a silent master includes it.
  Duration query_window = milliseconds(50);
  // Attempts the transport makes per SMInfo query (1 + retries); the loss
  // estimate needs it.
  int attempts_per_query = 3;
  // Accepted probability that a healthy master looks dead to one peer for the
  // required number of rounds only because of MAD loss.
  double false_alarm_target = 1e-7;
  // smhad --observe: it runs no OpenSM, and the node may have none. A local SM
  // that never answered since smhad started is then absent, not hung (no
  // local_sm_hung, no fence); one that answered and went silent still is.
  bool observe = false;
};

// Which setting a policy error is about, so that a caller can point at the
// configuration key that set it without reading the message.
enum class PolicyField : std::uint8_t {
  OwnGuid,          // own_guid
  Peers,            // the peer list as a whole (empty)
  PeerGuid,         // peers[peer].guid
  PeerPriority,     // peers[peer].priority
  PollInterval,     // poll_interval
  Misses,           // misses
  BasePriority,     // base_priority, or the configured priorities together (too many distinct values)
  Derived,          // a bound derived from the poll interval (hang_timeout, takeover_bound ...)
  PreferredMaster,  // preferred_master
};
struct PolicyError {
  PolicyField field = PolicyField::Derived;
  std::size_t peer = 0;  // PeerGuid, PeerPriority: the index into HaPolicy::peers
  Error error;           // code "policy"; the message names the field
};

// Checks ranges and identities: the first problem found, or nullopt.
std::optional<PolicyError> check(const HaPolicy& policy);
// check() as a Status.
Status validate(const HaPolicy& policy);

// The sm_priority values smhad renders, by role. Sticky failback rests on
// standby < master: a returning head at its standby value is strictly below the
// current master, so OpenSM's preemption (higher priority, or equal priority +
// lower GUID) does not fire.
//
// Heads may be configured with different priorities (0..15, e.g. head01 15,
// head02 14: "prefer head01"). Every head computes the same table from the
// configured priorities of all heads: the distinct configured values, in
// order, map to standby values that keep that order and fit 1..13 (kept as
// configured where they fit; otherwise moved up from 1 / down from 13 as
// little as possible); master = highest standby + 1, claim = master + 1,
// yield = lowest standby - 1. OpenSM's election among standbys (priority, then
// lower GUID) therefore follows the configured preference, and no standby can
// ever outrank a master. At most 13 distinct configured values fit.
struct Priorities {
  std::uint8_t yield;    // a master handing over (below every standby)
  std::uint8_t standby;  // this head when it is not master, including at start
  std::uint8_t master;   // the current master (any head)
  std::uint8_t claim;    // a standby pulling mastership (above the master)
  std::vector<std::pair<Guid, std::uint8_t>> standby_of;  // every head's standby value
  std::uint8_t standby_for(Guid head) const;  // standby value of a head (own if unknown)
};
Priorities priorities(const HaPolicy& policy);

// The standby values for a set of configured priorities (any order, repeats
// allowed): result[i] belongs to configured[i]. Error "policy" when more than
// 13 distinct values are given (they cannot all fit below master and claim).
Result<std::vector<std::uint8_t>> standby_priorities(const std::vector<std::uint8_t>& configured);

// The head that should hold mastership by configuration: the highest
// configured priority, then the lowest GUID; or policy.preferred_master.
Guid preferred_head(const HaPolicy& policy);

}  // namespace smha::sm
