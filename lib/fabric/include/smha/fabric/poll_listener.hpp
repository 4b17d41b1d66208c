// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// PollListener: what the poll loop (agent::Agent) tells the services that
// consume its rounds (fabric::Watchers: drift, link health, error counters,
// the takeover report). The loop calls it; it never calls back into the loop.
// Single-threaded, on the loop's Scheduler.
#pragma once

#include <optional>
#include <span>

#include "smha/fabric/discovery.hpp"
#include "smha/mad/transport.hpp"
#include "smha/sm/engine_status.hpp"

namespace smha::fabric {

class PollListener {
 public:
  virtual ~PollListener() = default;
  // A poll round ended: its answers (rounds far past their window already
  // discounted), before the engine steps on them, so that what the round saw
  // comes before the events the step records. `local_pi`: the round's
  // PortInfo of our own port, when answered.
  virtual void round_polled(const sm::PollRound& round, const std::optional<mad::PortInfo>& local_pi) = 0;
  // The engine stepped (a round, a timer, OpenSM's exit, a hold, a handover
  // request) and its actions were carried out: the events the step recorded,
  // in order, and the engine's status after it. Also before the loop starts
  // (a hold set early).
  virtual void engine_stepped(std::span<const sm::RecordEvent> events, const sm::EngineStatus& status) = 0;
  // A census walk ended; the census has taken it.
  virtual void census_walked(const DiscoveryResult& walk) = 0;
};

}  // namespace smha::fabric
