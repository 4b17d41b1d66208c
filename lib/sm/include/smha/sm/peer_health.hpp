// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// PeerHealth: what the HA engine knows of each configured peer from the poll
// rounds (consecutive misses, the last answer, whether the last miss was a
// refusal) and the MAD loss it has measured on the way, from which it derives
// how many rounds a silent master must miss before a standby acts
// (doc/ha-engine.md "Decisions", required_rounds()). Pure: no clock reads, no I/O.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "smha/core/clock.hpp"
#include "smha/core/sminfo.hpp"
#include "smha/sm/policy.hpp"

namespace smha::sm {

enum class PortState : std::uint8_t;  // ha_machine.hpp
struct PollRound;                     // ha_machine.hpp

// One configured peer as the rounds have shown it.
struct PeerTrack {
  PeerSpec spec;
  int misses = 0;                      // consecutive rounds with no answer on any path
  bool answered = false;               // this round
  std::optional<SmInfo> last;          // last answer
  TimePoint last_answer_at{};          // when it was seen
  std::optional<TimePoint> master_at;  // when it last answered MASTER
  bool refused = false;                // the latest unanswered round was refused, not silent
  int prio_mismatch = 0;               // consecutive STANDBY answers with an unexpected priority (the engine's)
  PortState port{};                    // the peer's port as the round reported it (Unknown until then)
};

class PeerHealth {
 public:
  explicit PeerHealth(const std::vector<PeerSpec>& peers);

  // One poll round at `now`: each peer's answer (either path) or miss (a
  // round in which it was queried and did not answer; an unqueried peer keeps
  // its count), and the loss estimates' evidence: the paths that failed in
  // rounds where a peer answered on the other, and the miss streaks that
  // ended with an answer. Peers the round does not list are left as they were
  // but for `answered`, which is false for them.
  void observe(const PollRound& r, TimePoint now);

  // Estimated probability that a live peer misses a whole round (both paths,
  // all attempts) because of MAD loss alone: 0 until there is evidence.
  double round_miss_estimate() const;
  // Rounds a master must miss before a standby acts: `misses` without loss,
  // more as the estimate rises so that a live master is taken for dead with
  // probability below `false_alarm_target`, at most 4 x `misses`.
  int required_rounds(int misses, double false_alarm_target) const;

  // The peers in the policy's order.
  std::vector<PeerTrack>& peers() { return peers_; }
  const std::vector<PeerTrack>& peers() const { return peers_; }

 private:
  void track_peers(const PollRound& r, TimePoint now);
  void update_loss(const PollRound& r);

  std::vector<PeerTrack> peers_;
  double loss_fail_ = 0, loss_total_ = 0;      // query level, decaying slowly
  double fast_fail_ = 0, fast_total_ = 0;      // query level, decaying fast
  double streak_miss_ = 0, streak_total_ = 0;  // round level, decaying
};

}  // namespace smha::sm
