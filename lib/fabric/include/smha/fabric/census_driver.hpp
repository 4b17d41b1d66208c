// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// CensusDriver: what feeds the SM census (doc/census.md) besides the poll
// rounds. It owns the fabric::Census and its MADs: the census walks
// (Discovery::survey), the PortInfo rechecks of the ports the last walk read,
// the SMInfo queries to the SMs that are not heads, the master's SA tables
// (SubnAdmGetTable(SMInfoRecord) and of the IsSM PortInfoRecords), our own
// node's NodeDescription, and the impostor_sm alarm (through AlarmSink). The
// agent hands it every poll round's answers (round()) and is told of every
// finished walk (set_walk_handler()). Timers through smha::Scheduler;
// single-threaded.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "smha/core/alarm.hpp"
#include "smha/core/scheduler.hpp"
#include "smha/fabric/census.hpp"
#include "smha/fabric/discovery.hpp"
#include "smha/mad/transport.hpp"
#include "smha/sm/engine_status.hpp"

namespace smha::fabric {

// The SM census (doc/census.md): a census walk (Discovery::survey) finds the
// ports with IsSM, SMInfo of those that are not heads every `query_interval`;
// every poll round's SMInfo answers are counted too.
struct CensusConfig {
  bool enabled = true;
  // Every tick: SMInfo of each non-head SM the walk or a recheck found, and
  // PortInfo of the next `rechecks` ports the last walk read (round robin,
  // heads left out), so a new SM on a known port is seen between walks.
  Duration query_interval = seconds(5);
  std::size_t max_queries = 16;          // SMInfo queries per tick
  std::size_t rechecks = 4;              // PortInfo rechecks per tick
  mad::RequestOptions query{milliseconds(200), 1, 0};  // per census SMInfo / recheck
  // Walks: the next one starts `walk_mads / walk_mads_per_s` after the last
  // one ended (its MADs spread over time at that average rate), never sooner
  // than walk_min_interval nor later than walk_max_interval.
  // The first walk waits this long after start: the peers' discovery and the
  // first polls (and OpenSM's own first sweep) go first.
  Duration first_walk_delay = seconds(3);
  Duration walk_min_interval = seconds(60);
  Duration walk_max_interval = seconds(6 * 3600);
  double walk_mads_per_s = 0.5;
  DiscoveryLimits walk{63, 20000, 4, mad::RequestOptions{milliseconds(100), 1, 0}, true};
  // SubnAdmGetTable(SMInfoRecord) to the SA at our port's MasterSMLID every
  // sa_interval (three of OpenSM's default 10 s sweeps; 0: never), the first
  // sa_first_delay after start (our port's MasterSMLID is known by then).
  // One MAD (two when unanswered).
  Duration sa_interval = seconds(30);
  Duration sa_first_delay = seconds(3);
  mad::RequestOptions sa_query{milliseconds(500), 1, 0};
  CensusLimits limits;                   // expiry (live), max_sms
};

// What the census cost, for status and doc/census.md's figures.
struct CensusStats {
  std::uint64_t walks = 0;
  std::uint64_t walk_mads = 0;       // MADs of every walk
  std::uint64_t query_mads = 0;      // census SMInfo MADs (attempts)
  std::uint64_t recheck_mads = 0;    // PortInfo rechecks and NodeDescription reads (attempts)
  std::uint64_t query_answers = 0;
  std::optional<DiscoveryResult> last_walk;
  std::optional<TimePoint> last_walk_at;
  std::optional<TimePoint> next_walk_at;
  // The master's SA table (SubnAdmGetTable(SMInfoRecord)).
  std::uint64_t sa_queries = 0;      // tables asked
  std::uint64_t sa_mads = 0;         // their MADs (attempts)
  std::uint64_t sa_tables = 0;       // tables received
  std::uint64_t sa_truncated = 0;    // of them cut short
  std::optional<TimePoint> sa_last_at;        // the last table received
  Lid sa_lid;                                 // where the last query went
  std::size_t sa_records = 0;                 // records in the last table
  std::optional<std::uint32_t> sa_claimed;    // what it said the table has
  bool sa_last_truncated = false;
  std::string sa_last_error;                  // the last query's error ("" when it answered)
  // The master's SA table of IsSM ports (SubnAdmGetTable(PortInfoRecord)).
  std::uint64_t ism_queries = 0;
  std::uint64_t ism_mads = 0;
  std::uint64_t ism_tables = 0;
  std::uint64_t ism_truncated = 0;
  std::uint64_t ism_found = 0;       // ports it found before any other source
  std::uint64_t ism_resolve_mads = 0;  // NodeInfo / NodeDescription of the ports it found (attempts)
  std::optional<TimePoint> ism_last_at;
  std::size_t ism_records = 0;
  bool ism_last_truncated = false;
  std::string ism_last_error;
};

class CensusDriver {
 public:
  // `own`: our port GUID; `peers`: the configured peers' port GUIDs (the
  // heads: polled every round, never asked by the census). `m_key` goes in
  // every SMP. `sink` gets the impostor_sm alarm. All references must outlive
  // the driver.
  CensusDriver(CensusConfig cfg, Scheduler& sched, mad::MadTransport& mad, AlarmSink& sink, Guid own,
               std::vector<Guid> peers, std::uint64_t m_key);
  ~CensusDriver();
  CensusDriver(const CensusDriver&) = delete;
  CensusDriver& operator=(const CensusDriver&) = delete;

  // Called with every census walk's result, after the census took it and
  // before the next walk is armed (the agent's walk observer and its
  // PollListener).
  using WalkHandler = std::function<void(const DiscoveryResult&)>;
  void set_walk_handler(WalkHandler fn) { walk_handler_ = std::move(fn); }

  // With the census enabled: reads our NodeDescription and arms the first
  // walk, the query tick and the SA query.
  void start();
  // Cancels timers and the running walk; answers still in flight are dropped.
  void stop();
  // A census walk now (the takeover report's, or the walk timer's); a walk
  // armed for later is dropped, the next one is armed when this one ends.
  void start_walk();
  // After a poll round: its SMInfo answers go into the census, and the live
  // SMs that are not heads are returned for the round's other_sms (the
  // engine's unknown_sm alarm; none with the census disabled). `local_pi`:
  // this round's PortInfo of our port, if answered (its MasterSMLID is where
  // the SA is asked); `peer_lids`: where each peer was polled by LID, in
  // obs.peers' order; `peer_names`: the peers' NodeDescriptions (discovery).
  std::vector<sm::OtherSm> round(const sm::PollRound& obs, const std::optional<mad::PortInfo>& local_pi,
                                 const std::vector<Lid>& peer_lids,
                                 const std::vector<std::pair<Guid, std::string>>& peer_names);

  const Census& census() const { return census_; }
  const CensusStats& stats() const { return census_stats_; }
  // Our node's NodeDescription ("" until read; read at start with the census on).
  const std::string& own_description() const { return own_description_; }
  const CensusConfig& config() const { return cfg_; }

 private:
  void on_walk(const DiscoveryResult& r);
  void census_tick();
  void read_own_description();
  void census_queries();
  void census_rechecks();
  void census_sa();
  void census_sa_is_sm(Lid sa_lid);
  void census_sa_port(Lid lid);
  void update_impostor_alarm();

  CensusConfig cfg_;
  Scheduler& sched_;
  mad::MadTransport& mad_;
  AlarmSink& sink_;
  Guid own_guid_;
  std::vector<Guid> peers_;
  std::uint64_t m_key_;
  WalkHandler walk_handler_;
  bool running_ = false;
  std::shared_ptr<int> alive_;   // callbacks hold a weak_ptr: dropped after stop()/destruction
  std::optional<mad::PortInfo> last_local_pi_;  // our port's, from the last round that read it
  std::string impostor_alarm_;     // the impostor_sm detail raised, "" when clear
  std::set<Guid> impostor_ports_;  // the ports it names
  Discovery survey_;
  Census census_;
  CensusStats census_stats_;
  std::optional<Scheduler::TimerId> walk_timer_;
  std::optional<Scheduler::TimerId> census_timer_;
  std::optional<Scheduler::TimerId> sa_timer_;
  std::vector<SmPort> recheck_ports_;  // the last walk's ports, heads left out
  std::string own_description_;        // our node's NodeDescription (census, events)
  bool own_description_pending_ = false;
  std::size_t recheck_next_ = 0;
  std::set<std::uint16_t> ism_resolving_;  // LIDs of IsSM ports being resolved (NodeInfo, name)
};

}  // namespace smha::fabric
