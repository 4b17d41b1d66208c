// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// Cluster: N head nodes, each running smhad's head (head::Head from the plan
// smhad makes: the agent, OpenSM supervision with pidfile adoption, backoff and
// crash loop, the event log and journal, hold, handover, drill) beside a
// simulated OpenSM, plus one observer node (a third node that only queries
// SMInfo), on one Fabric. The scenario and property tests drive it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "smha/agent/agent.hpp"
#include "smha/agent/supervised_opensm_control.hpp"
#include "smha/head/head.hpp"
#include "smha/sim/fabric.hpp"

namespace smha::sim {

// How every head's configuration addresses its peers.
//   Lid:        the peer's real LID (and DR path);
//   Unaddressed: no lid (the README quick start): the peer is not polled;
//   StaleLid:   a LID nobody has any more (the peer moved), no DR path;
//   GuidOnly:   name + port_guid only: every route found by discovery
//               (doc/discovery.md);
//   GuidWrongLid: discovery with a configured lid override that is wrong
//               (the peer's LID + 50): polled there, reported as a mismatch.
enum class PeerAddressing : std::uint8_t { Lid, Unaddressed, StaleLid, GuidOnly, GuidWrongLid };

struct ClusterParams {
  int heads = 2;
  sm::FailbackMode failback = sm::FailbackMode::Sticky;
  Duration poll_interval = milliseconds(100);
  int misses = 3;
  Duration takeover_bound = milliseconds(1000);
  Duration preempt_hold_down = seconds(5);
  Duration start_grace = seconds(2);
  std::uint8_t base_priority = 10;
  // Configured sm_priority per head (head i gets priorities[i], and every head's
  // policy lists all of them); empty: base_priority on every head.
  std::vector<std::uint8_t> priorities;
  // The keys the simulated OpenSM reads. Empty: its polling and sweep keys are
  // the ones smhad renders from the head's configuration (as on a real head).
  std::optional<OpensmKeys> opensm_conf;
  // OpenSM supervision, as smhad's opensm.restart_* and crash_loop_* defaults.
  struct Supervision {
    Duration backoff_initial = seconds(1);
    Duration backoff_max = seconds(60);
    Duration stable_uptime = seconds(60);
    int crash_loop_count = 5;
    Duration crash_loop_window = seconds(300);
    Duration crash_loop_retry = seconds(600);
    Duration crash_loop_retry_no_master = seconds(60);
  } supervision;
  FabricParams fabric;  // fabric.switches > 1: head01 on the first switch, the last head on the last
  Duration observer_interval = milliseconds(5);  // third-node SMInfo polling; 0: off
  PeerAddressing peer_addressing = PeerAddressing::Lid;
  // Every head's SM census (doc/census.md). Off by default here so that the
  // seeded scenarios keep their MAD sequences; smhad has it on.
  fabric::CensusConfig census = [] {
    fabric::CensusConfig c;
    c.enabled = false;
    return c;
  }();
};

// One event, alarm or error an smhad reported.
struct HeadRecord {
  TimePoint at;
  std::string what;    // "event", "alarm", "clear", "hook", "error", "report", "role"
  std::string kind;
  std::string detail;
};

class Cluster {
 public:
  Cluster(std::uint64_t seed, ClusterParams params = {});
  ~Cluster();

  Fabric& fabric() { return fabric_; }
  const Fabric& fabric() const { return fabric_; }
  EventQueue& queue() { return fabric_.queue(); }
  TimePoint now() const;
  const ClusterParams& params() const { return params_; }

  int heads() const { return static_cast<int>(heads_.size()); }
  NodeId head(int i) const;
  NodeId observer() const { return observer_; }
  // Head index whose node runs this GUID's OpenSM, or -1.
  int head_of(Guid g) const;

  // Every SMInfo answer head i's smhad gets (via "lid:N" or "dr:PATH") and
  // every answer of its own port's PortInfo (DR hop 0), with the times the
  // query was sent and answered: what smhad's RecordingTransport feeds a
  // MastershipWindow (lib/service). Applies to smhad started after the call.
  struct Tap {
    std::function<void(const SmInfo&, TimePoint sent, TimePoint received, const std::string& via)> sminfo;
    std::function<void(const mad::PortInfo&, TimePoint sent, TimePoint received)> local_port;
    // Every request smhad makes, by attribute ("SMInfo", "SMInfo Set",
    // "PortInfo", "NodeInfo", "NodeDescription"): what it costs the fabric.
    std::function<void(const char* attribute)> request;
    // Fault injection: an SMInfo Get for which it returns true is not sent;
    // smhad gets a timeout after the request's full time, as for a lost MAD.
    std::function<bool(const mad::Target&)> drop_sminfo;
  };
  void set_tap(int i, Tap tap);

  void start_smhad(int i);
  void start_all_smhad();
  // smhad dies (its OpenSM keeps running, as with a real crash of smhad).
  void crash_smhad(int i);
  bool smhad_up(int i) const;
  agent::Agent* agent(int i);
  // Head i's drift, health, error counters and takeover report (nullptr while its smhad is down).
  fabric::Watchers* watchers(int i);
  // Head i's head, as its smhad runs it (nullptr while its smhad is down).
  head::Head* smhad(int i);
  // Head i's OpenSM supervision (nullptr while its smhad is down).
  const opensm::SupervisorStatus* supervisor(int i) const;
  // OpenSM processes head i's smhad started (spawns over every smhad run).
  int opensm_spawns(int i) const;
  const std::vector<HeadRecord>& records(int i) const;
  // The keys head i's simulated OpenSM reads (ClusterParams::opensm_conf).
  OpensmKeys opensm_keys(int i) const;
  int count_events(int i, const std::string& kind) const;

  void run_for(Duration d);
  // Runs until pred() holds or `limit` passes; true if it held.
  bool run_until(const std::function<bool()>& pred, Duration limit);

  // The third node's view, refreshed every observer_interval by SMInfo Gets by
  // LID to every head: GUIDs that answered MASTER in the latest complete sweep.
  std::vector<Guid> observed_masters() const { return observed_; }
  // First time (after `since`) the observer saw a MASTER other than `old`.
  std::optional<TimePoint> first_new_master_seen(TimePoint since, std::optional<Guid> old) const;

  // Invariant bookkeeping, updated after every event: total time with two or more
  // active MASTERs, and the longest single stretch.
  Duration dual_master_total() const { return dual_total_; }
  Duration dual_master_longest() const { return dual_longest_; }
  void reset_dual_master_stats() { dual_total_ = dual_longest_ = Duration{}; }

 private:
  struct Head;
  struct Sink;
  void observe_loop();
  void track();

  ClusterParams params_;
  Fabric fabric_;
  std::vector<std::unique_ptr<Head>> heads_;
  NodeId observer_ = 0;
  std::vector<Guid> observed_;
  std::vector<std::pair<TimePoint, std::vector<Guid>>> observed_log_;
  std::optional<TimePoint> dual_since_;
  Duration dual_total_{};
  Duration dual_longest_{};
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
};

}  // namespace smha::sim
