// Agent: runs one HaMachine. Every poll interval it queries the local SM (DR hop
// 0) and every peer (by LID, and by DR when a path is known) through MadTransport,
// waits for all answers of the round (each query ends by its own deadline), steps
// the machine and carries out the actions. Single-threaded; no mutexes.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "smha/agent/seams.hpp"
#include "smha/mad/transport.hpp"
#include "smha/sm/ha_machine.hpp"

namespace smha::agent {

struct PeerAddress {
  Guid guid;                  // must match a peer in the policy
  Lid lid;                    // LID-routed SMInfo target
  std::optional<DrPath> dr;   // directed-route path from our port, if known
};

struct AgentConfig {
  sm::HaPolicy policy;
  std::vector<PeerAddress> peers;
  // Per query. Default: poll_interval / 10 per attempt (5..25 ms), 2 retries,
  // so a round ends well before the next one starts.
  std::optional<mad::RequestOptions> request;
};

class Agent {
 public:
  // Port state providers: where the daemon (sysfs) or the sim knows them.
  using LocalPortFn = std::function<sm::PortState()>;
  using PeerPortFn = std::function<sm::PortState(Guid)>;

  // All references must outlive the agent. `cfg.policy` must pass sm::validate().
  Agent(AgentConfig cfg, Scheduler& sched, mad::MadTransport& mad, OpensmControl& opensm,
        EventSink& sink);
  ~Agent();
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  void set_local_port(LocalPortFn fn) { local_port_ = std::move(fn); }
  void set_peer_port(PeerPortFn fn) { peer_port_ = std::move(fn); }

  // Tells the machine the process state and starts polling now.
  void start();
  // Cancels timers; answers still in flight are dropped. OpenSM is left running.
  void stop();
  // smctl handover: see sm::HandoverRequest.
  void request_handover(std::optional<Guid> target);

  sm::EngineStatus status() const { return machine_.status(); }
  const AgentConfig& config() const { return cfg_; }
  std::uint64_t rounds() const { return rounds_; }

 private:
  struct Round;
  void begin_round();
  void finish_round();
  bool step(const sm::Observation& obs);  // true: poll again soon
  void apply(const sm::Decision& d);
  void arm_wakeup(std::optional<TimePoint> t);

  AgentConfig cfg_;
  Scheduler& sched_;
  mad::MadTransport& mad_;
  OpensmControl& opensm_;
  EventSink& sink_;
  sm::HaMachine machine_;
  mad::RequestOptions req_;
  LocalPortFn local_port_;
  PeerPortFn peer_port_;
  std::shared_ptr<int> alive_;   // callbacks hold a weak_ptr: dropped after stop()/destruction
  std::shared_ptr<Round> round_;
  bool running_ = false;
  TimePoint round_started_{};
  std::optional<Scheduler::TimerId> poll_timer_;
  std::optional<Scheduler::TimerId> wake_timer_;
  std::uint64_t rounds_ = 0;
};

}  // namespace smha::agent
