// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// The HA drills, defined once: each is a start mode, a fault sequence and the
// outcome it must end with. tests/sim/sim/test_sim_drill_table.cpp runs them on
// the in-process simulated fabric (lib/sim), tests/ibsim/service/
// test_ha_drills_ibsim.cpp on real OpenSM under ibsim with two smhad; both
// assert the same outcome (doc/ha-engine.md, "Drills: sim and ibsim agree").
//
// Roles: the drills run with two heads. `A` is head01 (ibsim Hca1, sim head 0:
// the lower port GUID in both), `B` is head02. With DrillStart::AFirst, A's smhad
// starts first and A is MASTER before the first step; B joins as STANDBY.
//
// Contract for a runner:
// - With `past_start_grace`, the first step waits until A's OpenSM has run
//   for longer than smhad's start grace.
// - Fault steps act on head A only; Await* steps are condition waits with a
//   bound (a runner fails the drill if the bound passes); Soak runs for `arg`
//   seconds while checking that the observer (a third node) never sees two
//   MASTERs and that the master does not change.
// - At the end: exactly one MASTER seen from the observer, on `final_master`;
//   takeover_done events summed over both heads == `takeovers`; every kind in
//   `a_events` / `b_events` was recorded at least once by that head's smhad
//   since it started; no kind in `forbidden` was recorded by either head; no
//   kind other than state_changed / priority_changed was recorded more than
//   kMaxSameKind times by one head (a restart or retry loop is a failure even
//   when the drill ends well).
// - Event kinds are the engine's (sm::EventKind names, e.g. "takeover_done");
//   alarms are "alarm:<kind>" (e.g. "alarm:local_sm_hung"); local SM state
//   changes are "state_changed". A runner maps its records onto these names.
#pragma once

#include <algorithm>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace smha::testing {

enum class DrillStart {
  AFirst,    // A's smhad first (A becomes MASTER), then B's (STANDBY)
  Together,  // both smhad started at the same moment
};

enum class DrillFailback { Sticky, Preempt };

enum class DrillOp {
  KillOpensm,       // SIGKILL A's OpenSM (its smhad keeps running)
  StopOpensm,       // SIGSTOP A's OpenSM: a hung master
  ContOpensm,       // SIGCONT it
  Unlink,           // remove A's HCA link (ibsim `Unlink "Hca1"[1]`)
  Relink,           // restore it (`ReLink "Hca1"[1]`)
  CrashHead,        // kill -9 of A's smhad and of its OpenSM
  RestartSmhad,     // start A's smhad again (it starts OpenSM)
  LossOn,           // `arg` % loss of the SMInfo MADs both heads send off-node (ibsim: the loss shim)
  LossOff,          // loss back to 0
  Soak,             // `arg` seconds; invariants checked continuously
  AwaitBMaster,     // the observer sees B as the only MASTER
  AwaitAMaster,     // the observer sees A as the only MASTER
  AwaitAStandby,    // A's smhad reports its (running) local SM STANDBY
  AwaitOneMaster,   // the observer sees exactly one MASTER
};

struct DrillStep {
  DrillOp op;
  int arg = 0;
};

// Any: exactly one MASTER, either head (a simultaneous start is won by the
// OpenSM whose first sweep finds no master; the other finds it and stands by).
enum class DrillHead { A, B, Any };

struct DrillScenario {
  std::string_view name;
  DrillStart start = DrillStart::AFirst;
  DrillFailback failback = DrillFailback::Sticky;
  int preempt_holddown_s = 3;  // used with DrillFailback::Preempt
  // Before the first step, wait until A's OpenSM has run longer than smhad's
  // start grace (the engine gives no hang verdict on a freshly started OpenSM,
  // doc/ha-engine.md "Fencing"); a hang inside the grace is not fenced.
  bool past_start_grace = false;
  std::vector<DrillStep> steps;
  DrillHead final_master = DrillHead::B;
  int takeovers = 0;
  std::vector<std::string_view> a_events;
  std::vector<std::string_view> b_events;
  std::vector<std::string_view> forbidden;
  // Text that B's takeover_started evidence must contain (empty: not checked).
  std::string_view b_takeover_evidence = {};
};

inline constexpr int kMaxSameKind = 4;
// State changes (the engine's and those OpenSM logged, opensm_state) and
// priority changes come several to an episode; they are not loop evidence.
inline bool counted_for_loops(std::string_view kind) {
  return kind != "state_changed" && kind != "priority_changed" && kind != "opensm_state";
}

// Kinds that mean the guard had to act or that a standby took mastership.
inline const std::vector<std::string_view> kNoSplitBrain{"split_brain_yield", "alarm:two_masters"};

inline const std::vector<DrillScenario>& ha_drills() {
  using O = DrillOp;
  static const std::vector<DrillScenario> table{
      {.name = "kill9",
       .steps = {{O::KillOpensm}, {O::AwaitBMaster}, {O::AwaitAStandby}},
       .final_master = DrillHead::B,
       .takeovers = 1,
       .a_events = {"local_failure", "opensm_started"},
       .b_events = {"takeover_started", "takeover_done"},
       .forbidden = kNoSplitBrain},
      {.name = "hung_master",
       .past_start_grace = true,
       .steps = {{O::StopOpensm}, {O::AwaitBMaster}, {O::ContOpensm}, {O::AwaitAStandby}},
       .final_master = DrillHead::B,
       .takeovers = 1,
       .a_events = {"fence_local", "alarm:local_sm_hung", "opensm_started"},
       .b_events = {"takeover_started", "takeover_done"},
       .forbidden = kNoSplitBrain},
      {.name = "link_down_up",
       .steps = {{O::Unlink}, {O::AwaitBMaster}, {O::Relink}, {O::AwaitAStandby}},
       .final_master = DrillHead::B,
       .takeovers = 1,
       .a_events = {"state_changed"},
       .b_events = {"takeover_started", "takeover_done"},
       // OpenSM notices its own port only when it sweeps. If a sweep was in
       // progress when the link went, the old master can still be MASTER when
       // the link comes back; its smhad then yields at once as the stale one
       // (split_brain_yield, two_masters for one round). The probe's
       // confirmed_dual check still requires no observed overlap; only head02
       // (the new master) must never yield.
       .forbidden = {"handover_started"},
       // B reads the PortInfo of the switch port A is cabled to: Down, so
       // the takeover knows the link is gone (no hang wait).
       .b_takeover_evidence = "port down"},
      {.name = "sticky_restart",
       .steps = {{O::CrashHead}, {O::AwaitBMaster}, {O::RestartSmhad}, {O::AwaitAStandby}},
       .final_master = DrillHead::B,
       .takeovers = 1,
       .a_events = {"opensm_started"},
       .b_events = {"takeover_started", "takeover_done"},
       .forbidden = {"split_brain_yield", "alarm:two_masters", "handover_started"}},
      {.name = "preempt_restart",
       .failback = DrillFailback::Preempt,
       .preempt_holddown_s = 3,
       .steps = {{O::CrashHead}, {O::AwaitBMaster}, {O::RestartSmhad}, {O::AwaitAMaster}},
       .final_master = DrillHead::A,
       .takeovers = 1,
       .a_events = {"opensm_started", "handover_started", "handover_done"},
       .b_events = {"takeover_started", "takeover_done"},
       .forbidden = {"split_brain_yield", "alarm:two_masters", "handover_rolled_back"}},
      {.name = "loss_soak",
       .steps = {{O::LossOn, 20}, {O::Soak, 60}, {O::LossOff}, {O::AwaitOneMaster}},
       .final_master = DrillHead::A,
       .takeovers = 0,
       .a_events = {},
       .b_events = {},
       .forbidden = {"takeover_done", "split_brain_yield", "alarm:two_masters", "fence_local",
                     "local_failure"}},
      {.name = "start_together",
       .start = DrillStart::Together,
       .steps = {{O::AwaitOneMaster}},
       .final_master = DrillHead::Any,
       .takeovers = 0,
       .a_events = {},
       .b_events = {},
       .forbidden = {"takeover_done"}},
  };
  return table;
}

// The event part of the contract, checked on the kinds each head recorded
// (`a` = head01's, `b` = head02's): one line per violation, "" if none.
inline std::string drill_event_problems(const DrillScenario& d, const std::vector<std::string>& a,
                                        const std::vector<std::string>& b) {
  auto count = [](const std::vector<std::string>& v, std::string_view k) {
    int n = 0;
    for (const auto& e : v) n += e == k;
    return n;
  };
  std::string out;
  for (auto e : d.a_events)
    if (count(a, e) == 0) out += "head01 did not record " + std::string(e) + "\n";
  for (auto e : d.b_events)
    if (count(b, e) == 0) out += "head02 did not record " + std::string(e) + "\n";
  for (auto e : d.forbidden) {
    if (int n = count(a, e)) out += "head01 recorded forbidden " + std::string(e) + " x" + std::to_string(n) + "\n";
    if (int n = count(b, e)) out += "head02 recorded forbidden " + std::string(e) + " x" + std::to_string(n) + "\n";
  }
  for (const auto* v : {&a, &b}) {
    std::vector<std::string> seen;
    for (const auto& e : *v) {
      if (!counted_for_loops(e) || std::find(seen.begin(), seen.end(), e) != seen.end()) continue;
      seen.push_back(e);
      if (int n = count(*v, e); n > kMaxSameKind)
        out += std::string(v == &a ? "head01" : "head02") + " recorded " + e + " x" + std::to_string(n) +
               " (more than " + std::to_string(kMaxSameKind) + ": a loop)\n";
    }
  }
  return out;
}

inline const DrillScenario& ha_drill(std::string_view name) {
  for (const auto& d : ha_drills())
    if (d.name == name) return d;
  throw std::invalid_argument("no HA drill named " + std::string(name));
}

}  // namespace smha::testing
