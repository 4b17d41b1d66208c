// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// Agent: runs one HaMachine. Every poll interval it queries the local SM (DR hop
// 0) and every peer (by LID, and by DR when a path is known) through MadTransport,
// waits for all answers of the round (each query ends by its own deadline), steps
// the machine and carries out the actions. Single-threaded; no mutexes.
//
// Queries (doc/ha-engine.md "Queries"): each SMInfo query of a round may take
// the whole query window. Its attempts are spread over the window (attempt k is
// sent at k/attempts of it, or at once when the attempt before it was refused)
// and every attempt may be answered until the window ends, so an answer that is
// late because a process was not scheduled still counts. A query whose attempts
// were all refused at once (error status or error completion) is reported as
// refused, not silent. A round that ends far past its window (this process was
// stalled) reports its unanswered queries as not queried, at most `misses - 1`
// rounds in a row.
//
// Local port: with AgentConfig::local_port_num set, every round also sends
// SubnGet(PortInfo) for that port by DR hop 0 (our own SMA answers it whatever
// the link state; sysfs under umad2sim never changes) and reports the answer as
// the round's local_port: Down for PortState Down, Up for Init/Armed/Active,
// Unknown when unanswered or refused.
//
// Port master: when the local PortInfo names a MasterSMLID that is neither
// ours nor a configured peer's LID, the round also asks that LID for SMInfo
// (same query scheme) and reports it as the round's port_master.
//
// Peer ports: for a peer whose DR path crosses a switch ("0,1,3": out our port
// 1, then the switch's port 3), every round also sends SubnGet(PortInfo) for
// that switch port (DR path without its last hop, modifier = the last hop) and
// reports its state as the peer's port. The switch's SMA answers whatever the
// peer does, so Down there means the peer's link is gone, not that MADs were
// lost; unanswered or refused is Unknown.
//
// Discovery (doc/discovery.md): a peer with `discover` set is found by its
// port GUID with fabric::Discovery. Until it is found, and while it is being
// re-resolved, it is not polled at all: its probes stay unqueried, so the
// engine sees it as unknown, never as absent. Re-resolution runs at start,
// when a found peer's LID stops answering while its DR path answers, when its
// DR path fails while its LID answers (both silent is a peer gone, left to
// the engine), when our port's LID or MasterSMLID changes, and every
// `rediscover_interval` (after a search in which not even our own node
// answered: after 1 s); never more often than `rediscover_min_gap`. A peer
// not found keeps the addresses it had (a peer found once and then gone is
// polled there, and missed, as before).
//
// The round's consumers (fabric::Watchers: drift, link health, error
// counters, the takeover report) are told of every round, engine step and
// census walk through one fabric::PollListener (set_listener()); the agent
// knows nothing else of them.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "smha/fabric/census_driver.hpp"
#include "smha/fabric/discovery.hpp"
#include "smha/agent/seams.hpp"
#include "smha/fabric/poll_listener.hpp"
#include "smha/mad/transport.hpp"
#include "smha/sm/ha_machine.hpp"

namespace smha::agent {

struct PeerAddress {
  Guid guid;                  // must match a peer in the policy
  Lid lid;                    // LID-routed SMInfo target; 0: none (not queried by LID)
  std::optional<DrPath> dr;   // directed-route path from our port, if known
  // Find the peer by discovery: a zero `lid` and an absent `dr` are filled in
  // from what it finds; set ones are overrides, checked against it (a mismatch
  // is reported through EventSink::error, code "route_mismatch").
  bool discover = false;
};

// Where finding a peer's route stands.
enum class RouteState : std::uint8_t {
  Configured,  // not discovered: polled where the configuration says
  Resolving,   // a discovery for it runs and it was never found
  Resolved,    // the last discovery found it
  NotFound,    // the last discovery did not find it
};

// What the agent knows of a peer's route, for status.
struct PeerRoute {
  Guid guid;
  Lid lid;                    // the LID polled (0: none)
  std::optional<DrPath> dr;   // the DR path polled
  bool discover = false;
  bool found = false;         // discovery found it (at least once)
  bool resolving = false;     // a discovery for it is running: not polled
  std::string description;    // NodeDescription, raw
  RouteState state = RouteState::Configured;
  std::string searched;       // NotFound: what the discovery searched ("searched N nodes, M ports")
  std::uint64_t resolutions = 0;  // discoveries that found it

  // "configured", "resolving", "resolved", "not found (searched N nodes, M ports)".
  std::string status() const;
};

struct AgentConfig {
  sm::HaPolicy policy;
  std::vector<PeerAddress> peers;
  // How long one query may take. Default: half the poll interval, at least
  // 30 ms (never more than the interval). engine_policy() sets
  // policy.query_window from it.
  std::optional<Duration> query_window;
  // Attempts per query (>= 1). engine_policy() sets policy.attempts_per_query.
  int attempts = 3;
  std::uint64_t m_key = 0;  // carried in every SMP
  // Our own port's number (the PortInfo attribute modifier). 0: no PortInfo
  // query; the round's local_port is then set_local_port()'s answer, or Up.
  std::uint8_t local_port_num = 0;
  // Discovery of peers with `discover` set (see the header comment).
  fabric::DiscoveryLimits discovery;
  Duration rediscover_interval = seconds(60);
  // At most one discovery this often. A re-resolution asks the peers' last
  // paths first (Discovery hints), so one that finds them costs a few MADs.
  Duration rediscover_min_gap = milliseconds(500);
  fabric::CensusConfig census;
};
// The engine's policy for an AgentConfig: `policy` with the query window and
// the attempts per query the agent polls with. The only place they are
// derived: the agent runs its engine on it and times its queries by it, and
// the head's mapping checks it (sm::check).
sm::HaPolicy engine_policy(const AgentConfig& cfg);
// The switch port a peer's cable ends in: the DR path to that switch and the
// port number, when the peer's DR path has a switch hop; else nullopt.
std::optional<std::pair<DrPath, std::uint8_t>> switch_port_of(const PeerAddress& p);

class Agent {
 public:
  // Port state providers, for tests and sims that know them without a query.
  // A LocalPortFn, when set, wins over the PortInfo query's answer.
  using LocalPortFn = std::function<sm::PortState()>;

  // All references must outlive the agent. `cfg.policy` must pass sm::validate().
  Agent(AgentConfig cfg, Scheduler& sched, mad::MadTransport& mad, OpensmControl& opensm,
        EventSink& sink);
  ~Agent();
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  void set_local_port(LocalPortFn fn) { local_port_ = std::move(fn); }
  // Whether the kernel shows the local OpenSM stopped (see PollRound::local_stopped).
  void set_local_stopped(std::function<bool()> fn) { local_stopped_ = std::move(fn); }
  // Called with every census walk's result (LID continuity reads its ports).
  using WalkObserver = std::function<void(const fabric::DiscoveryResult&)>;
  void set_walk_observer(WalkObserver fn) { walk_observer_ = std::move(fn); }
  // Who consumes the rounds (fabric::Watchers); nullptr: nobody. It must
  // outlive the agent, or be unset first.
  void set_listener(fabric::PollListener* listener) { listener_ = listener; }

  // Tells the machine the process state and starts polling now.
  void start();
  // Cancels timers; answers still in flight are dropped. OpenSM is left running.
  void stop();
  // smctl handover: see sm::HandoverRequest. `done`, if set, is called once
  // with the engine's outcome of this request: handover_done,
  // handover_rolled_back or handover_rejected (a rejection from within this
  // call). It is not called if the handover ends any other way (the engine
  // left HandingOver for another reason, the agent stopped): the caller keeps
  // its own deadline.
  using HandoverDone = std::function<void(const sm::RecordEvent& outcome)>;
  // A maintenance hold on or off (sm::HoldChanged): while on, the engine
  // carries out nothing that moves mastership or touches a running OpenSM.
  // May be called before start().
  void set_hold(bool held);
  void request_handover(std::optional<Guid> target, HandoverDone done = {});

  sm::EngineStatus status() const { return machine_.status(); }
  const AgentConfig& config() const { return cfg_; }
  std::uint64_t rounds() const { return rounds_; }
  const std::vector<PeerRoute>& routes() const { return routes_; }
  std::uint64_t discoveries() const { return discoveries_; }
  const std::optional<fabric::DiscoveryResult>& last_discovery() const { return last_result_; }
  const fabric::Census& census() const { return census_driver_.census(); }
  // Our node's NodeDescription ("" until read; read at start with the census on).
  const std::string& own_description() const { return census_driver_.own_description(); }
  const fabric::CensusStats& census_stats() const { return census_driver_.stats(); }
  // The census and its walks (CensusDriver::start_walk: a walk now, whose
  // result reaches the walk observer and the listener).
  fabric::CensusDriver& census_driver() { return census_driver_; }
  const fabric::CensusDriver& census_driver() const { return census_driver_; }

 private:
  struct Round;
  struct Query;
  void begin_round();
  void start_query(const std::shared_ptr<Round>& round, const mad::Target& target,
                   std::function<void(sm::Probe)> report);
  void send_attempt(const std::shared_ptr<Query>& q);
  mad::RequestOptions port_info_options() const;
  void query_local_port(const std::shared_ptr<Round>& round);
  void query_port_master(const std::shared_ptr<Round>& round, const mad::PortInfo& pi);
  void query_peer_port(const std::shared_ptr<Round>& round, std::size_t i, const DrPath& sw,
                       std::uint8_t port);
  void finish_round();
  void discover_peer(Guid peer);
  void request_discovery(const std::string& why);
  void on_discovery(const fabric::DiscoveryResult& r);
  void check_routes(const Round& round);
  void report_route(std::size_t i, const PeerRoute& before);
  void on_walk(const fabric::DiscoveryResult& r);
  void census_round(Round& round);
  sm::Decision step(const sm::Observation& obs);  // applied; the caller reads poll_soon, fence_due
  void apply(const sm::Decision& d);
  void report_handover(const sm::RecordEvent& e);
  void arm_wakeup(std::optional<TimePoint> t);

  AgentConfig cfg_;
  Scheduler& sched_;
  mad::MadTransport& mad_;
  OpensmControl& opensm_;
  EventSink& sink_;
  sm::HaMachine machine_;
  Duration window_{};
  int late_rounds_ = 0;  // consecutive rounds discounted because we were stalled
  LocalPortFn local_port_;
  std::function<bool()> local_stopped_;
  WalkObserver walk_observer_;
  fabric::PollListener* listener_ = nullptr;
  // request_handover()'s callback: while the request is being stepped, then
  // until the handover it started ends.
  HandoverDone handover_asking_;
  HandoverDone handover_running_;
  std::shared_ptr<int> alive_;   // callbacks hold a weak_ptr: dropped after stop()/destruction
  std::shared_ptr<Round> round_;
  bool running_ = false;
  TimePoint round_started_{};
  std::optional<Scheduler::TimerId> poll_timer_;
  std::optional<Scheduler::TimerId> wake_timer_;
  std::uint64_t rounds_ = 0;
  // Discovery.
  fabric::Discovery discovery_;
  std::vector<PeerRoute> routes_;        // same order as cfg_.peers
  std::vector<PeerAddress> configured_;  // the overrides as configured
  std::optional<TimePoint> last_discovery_at_;
  std::optional<fabric::DiscoveryResult> last_result_;
  std::optional<Scheduler::TimerId> discovery_timer_;
  bool discovery_pending_ = false;
  std::uint64_t discoveries_ = 0;
  std::optional<mad::PortInfo> last_local_pi_;
  // Census: its walks, queries, SA tables and the impostor_sm alarm.
  fabric::CensusDriver census_driver_;
};

}  // namespace smha::agent
