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
  // Planned handover: new master visible within this, else rolled back.
  Duration handover_bound = seconds(5);
  // A freshly started OpenSM answers SMInfo only after its first sweep created
  // its port object; no hang verdict on it before this.
  Duration start_grace = seconds(5);
  // Rendered priorities derive from it (1..13): yield P-1, standby P, master P+1,
  // claim P+2. See priorities().
  std::uint8_t base_priority = 10;
  // Preempt mode: the head that should hold mastership when healthy. Default:
  // the lowest GUID among all heads (OpenSM's own tie-break).
  std::optional<Guid> preferred_master;
  // Attempts the transport makes per SMInfo query (1 + retries); the loss
  // estimate needs it.
  int attempts_per_query = 3;
  // Accepted probability that a healthy master looks dead to one peer for the
  // required number of rounds only because of MAD loss.
  double false_alarm_target = 1e-7;
};

// Checks ranges and identities. Error code "policy"; message names the field.
Status validate(const HaPolicy& policy);

// The sm_priority values smhad renders, by role. Sticky failback rests on
// standby < master: a returning head at `standby` is strictly below the current
// master, so OpenSM's preemption (equal priority + lower GUID) does not fire.
struct Priorities {
  std::uint8_t yield;    // a master handing over (below every standby)
  std::uint8_t standby;  // every head that is not master, including at start
  std::uint8_t master;   // the current master
  std::uint8_t claim;    // a standby pulling mastership (above the master)
};
Priorities priorities(const HaPolicy& policy);

}  // namespace smha::sm
