// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// MastershipWindow: who was MASTER during a planned handover or drill, from
// everything this head can see of the fabric, and the one verdict that both
// `smctl handover` and `smctl drill` reply with (doc/ha-engine.md, "Drill and
// handover verdicts").
//
// The plan is a sequence of masters: this head, then the handover's target,
// then (a drill's failback, once requested) this head again; or, for a pull
// (a handover run on a STANDBY head), the master, then this head. Evidence, fed as
// it arrives:
//   - every SMInfo answer this head's poller got (local SM by DR hop 0, every
//     peer by LID and DR, the SM at our port's MasterSMLID), with the time the
//     query was sent and the answer received;
//   - our port's PortInfo MasterSMLID each round: it changes only when a master
//     sweeps the port (OpenSM's LID manager writes its own LID there), so a
//     change to X proves X was MASTER, however briefly, even when no SMInfo
//     answer caught it;
//   - the ActCount of every SM between two STANDBY answers: OpenSM's ActCount
//     is the number of SMPs it sent (qp0_mads_sent); a STANDBY sends only
//     SMInfo answers and its poll of the master, a sweep sends at least one
//     SMP per port of the fabric. A jump far above the SM's own rate shows that
//     it swept in between: it was MASTER (e.g. for 25 ms after a stray
//     HANDOVER, then handed back) or DISCOVERING;
//   - this head's events: OpenSM's own log of its state changes
//     (`opensm_state`), the engine's transitions and a `two_masters` alarm.
// The verdict fails at the first evidence that breaks the plan: a master that
// is not the planned one (a bounce to a third head or an unknown SM), a former
// master MASTER again after the next one took over (proven by the times: the
// query was sent after the new master's answer arrived), the planned master
// leaving MASTER before the next leg was asked for, a sweep of a SM that
// answered STANDBY on both sides of it, or two masters. Single-threaded; pure
// apart from what it is fed.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "smha/core/clock.hpp"
#include "smha/core/sminfo.hpp"
#include "smha/core/types.hpp"

namespace smha::head {

struct EventRecord;

// The ActCount rate of every SM between two STANDBY answers (per second, the
// last 64 gaps), what MastershipWindow judges a sweep against. smhad keeps one
// for its lifetime, fed with every SMInfo answer, and hands a copy to each
// window: a peer that was MASTER until a moment ago is judged with the rate it
// had as STANDBY before. An SM whose ActCount went down (its OpenSM restarted)
// starts over.
class ActCountRates {
 public:
  // Answers of one SM closer together than this (its LID and DR answers of one
  // round) in the same state are one sample: a rate over a 0.1 ms gap says nothing.
  static constexpr Duration kMinGap = std::chrono::milliseconds(30);
  struct Track {
    std::optional<SmInfo> last;
    TimePoint last_at{};
    std::vector<double> rates;
  };
  // Records `info` as the SM's latest answer; a STANDBY->STANDBY gap becomes a
  // rate sample unless `sample` is false (a sweep is no sample).
  void record(const SmInfo& info, TimePoint received, bool sample = true);
  const Track* find(Guid g) const;
  const std::map<std::uint64_t, Track>& all() const { return sms_; }

 private:
  std::map<std::uint64_t, Track> sms_;
};

class MastershipWindow {
 public:
  struct Head {
    Guid guid;
    std::string name;
    std::optional<Lid> lid;  // peers: configured, or found by discovery; ours is learnt from the local PortInfo
  };
  // An ActCount rise between two STANDBY answers counts as a sweep above
  // 2 x the SM's own median rate (in this window) x the gap + kSweepSlack,
  // judged once kRateSamples gaps of that SM were seen.
  static constexpr std::uint32_t kSweepSlack = 12;
  static constexpr std::size_t kRateSamples = 3;

  // `own`: this head, the master when the window starts. `peers`: the other
  // configured heads (names for the messages; their LIDs map MasterSMLID).
  // `rates`: what the ActCounts did before the window (ActCountRates).
  MastershipWindow(Guid own, std::string own_name, std::vector<Head> peers, TimePoint start,
                   ActCountRates rates = {});

  // The failover leg's planned master (the engine's handover target). Until it
  // is known, the first other head seen MASTER is taken as the target.
  void set_target(Guid target);
  // A drill's failback leg was asked for at `at`: this head may be MASTER again.
  void plan_failback(TimePoint at);
  // A pull (`handover` run on a STANDBY head): the plan is `master` (MASTER
  // when the window starts), then this head; call before any evidence.
  void plan_pull(Guid master);

  void sminfo(const SmInfo& info, TimePoint sent, TimePoint received, const std::string& via);
  void local_port(Lid own_lid, Lid master_sm_lid, TimePoint sent, TimePoint received);
  void event(const EventRecord& e);

  // The first evidence that broke the plan, with its source; nullopt so far.
  const std::optional<std::string>& violation() const { return violation_; }
  // Masters in the order they were seen, sweeps seen, samples counted.
  nlohmann::json summary() const;
  // The rates as fed so far (for the next window).
  const ActCountRates& rates() const { return rates_; }

 private:
  std::string name(Guid g) const;
  std::string at(TimePoint t) const;
  void fail(std::string why);
  void master_seen(Guid who, TimePoint sent, TimePoint received, const std::string& how);
  void not_master_seen(Guid who, TimePoint sent, TimePoint received, const std::string& how);
  void check_sweep(const SmInfo& info, TimePoint received, const std::string& via);

  Guid own_;
  std::string own_name_;
  std::vector<Head> peers_;
  TimePoint start_;
  // plan_[0] = own; [1] target; [2] own (failback). A pull: [0] the master, [1] own.
  std::vector<Guid> plan_;
  std::vector<TimePoint> leg_asked_;      // when plan_[i] was allowed to become MASTER
  std::size_t holder_ = 0;                // index into plan_ of the current master
  std::optional<TimePoint> holder_seen_;  // receipt of the first MASTER answer of plan_[holder_]
  std::optional<Lid> own_lid_;
  std::optional<Lid> port_master_;        // last MasterSMLID our port answered
  TimePoint port_sample_sent_{};          // when that sample was asked for
  ActCountRates rates_;
  bool log_left_ = false, log_regained_ = false;
  std::optional<std::string> violation_;
  nlohmann::json masters_ = nlohmann::json::array();
  nlohmann::json sweeps_ = nlohmann::json::array();
  std::uint64_t answers_ = 0, port_samples_ = 0;
};

}  // namespace smha::head
