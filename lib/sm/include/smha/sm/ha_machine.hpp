// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// HaMachine: the HA engine, a pure reactor (OpenSM osm_sm_state_mgr_process style).
//
//   Decision d = machine.step(observation, now);
//
// Observations are poll rounds (SMInfo of the local SM by DR hop 0 and of every
// peer by LID and DR), local process changes, timer ticks and handover requests.
// The Decision lists actions for the adapters (lib/agent) and the time the engine
// wants to be stepped again. No I/O, no clock reads, no threads, no globals.
// doc/ha-engine.md describes the states, decisions and invariants.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "smha/core/clock.hpp"
#include "smha/core/sminfo.hpp"
#include "smha/core/types.hpp"
#include "smha/sm/engine_status.hpp"
#include "smha/sm/peer_health.hpp"
#include "smha/sm/policy.hpp"

namespace smha::sm {

// ---- Observations ---------------------------------------------------------
// (their value types, with the events, roles and EngineStatus: engine_status.hpp)

struct ProcessChanged {
  ProcessState process;
};
struct Tick {};
// Planned handover (smctl handover). target: the peer that should become master
// (on the master) or this node / nullopt (on a standby: pull mastership here).
struct HandoverRequest {
  std::optional<Guid> target;
};
// A maintenance hold begins (held) or ends. While held the engine keeps
// observing, deciding and alarming, but carries out nothing that would move
// mastership or touch OpenSM: SendDiscover, DiscoverPeer, StopOpensm,
// RestartOpensm and SetPriority are left out of its decisions, each recorded
// as an action_held event instead (StartOpensm is not held: an OpenSM that is
// not running is started as usual). Ending the hold changes nothing by itself;
// the next decisions are carried out again.
struct HoldChanged {
  bool held = false;
};
using Observation = std::variant<PollRound, ProcessChanged, Tick, HandoverRequest, HoldChanged>;

// ---- Actions --------------------------------------------------------------

// SubnSet(SMInfo, DISCOVER, payload SMState MASTER) to the LOCAL SM (DR hop 0).
// Only ever emitted in a step whose poll round showed the local SM in STANDBY.
struct SendDiscover {};
// SubnSet(SMInfo, DISCOVER) to a peer head's SM that answered STANDBY in the
// latest round: emitted only by the smhad beside a MASTER whose OpenSM has
// just exited unasked, to the standby OpenSM's own election would pick
// (highest priority, then lowest GUID), so it sweeps now instead of after the
// peer's smhad has counted the missed rounds. DISCOVER is safe at any time:
// an SM that finds a master in that sweep returns to STANDBY. Never sent to
// a MASTER; HANDOVER is never sent.
struct DiscoverPeer { Guid peer; };
struct StartOpensm { std::uint8_t priority; };
// force: SIGKILL at once (fencing a hung OpenSM); otherwise SIGTERM then SIGKILL.
struct StopOpensm { bool force = false; };
struct RestartOpensm { std::uint8_t priority; bool force = false; };
// Render sm_priority and SIGHUP the running OpenSM.
struct SetPriority { std::uint8_t priority; };

// keepalived-style hook: `hook EVENT NEW_STATE OLD_STATE PRIORITY`.
struct RunHook {
  std::string event;
  SmState new_state;
  SmState old_state;
  std::uint8_t priority;
};

using Action = std::variant<SendDiscover, DiscoverPeer, StartOpensm, StopOpensm, RestartOpensm, SetPriority,
                            RaiseAlarm, ClearAlarm, RecordEvent, RunHook>;

struct Decision {
  std::vector<Action> actions;
  std::optional<TimePoint> next_wakeup;  // step(Tick{}) no later than this
  // Set after a poll round in which the master (or our own SM) did not answer:
  // the next round should start at once instead of after the poll interval, so
  // the required rounds are collected quickly. Loss tolerance is unchanged: it
  // is counted in rounds.
  bool poll_soon = false;
  // Our own SM is silent: at this time its silence reaches the fence threshold
  // (hang_timeout or unresponsive_timeout after the query it last answered was
  // sent). The fence is decided when a round ends, so the agent phases the
  // round that would otherwise end just before it to end then instead: a fence
  // waits for its threshold, not for the round after it.
  std::optional<TimePoint> fence_due;
  // Every role change of this step, in order.
  std::vector<RoleChange> role_changes;
};

// ---- The machine ----------------------------------------------------------

class HaMachine {
 public:
  // `policy` must pass validate(); the constructor asserts it.
  explicit HaMachine(HaPolicy policy);

  Decision step(const Observation& obs, TimePoint now);

  EngineStatus status() const;
  const HaPolicy& policy() const { return policy_; }
  // Rounds a master must miss before a standby acts, given the observed loss.
  int required_rounds() const;
  // Estimated probability that a live peer misses a whole round (both paths, all
  // attempts) because of MAD loss alone.
  double round_miss_estimate() const;

 private:
  struct Ctx;

  // ---- Roles and what each keeps while it lasts --------------------------
  // The engine is in exactly one of these; entering another drops the old
  // one's data (enter()). The alternatives are in Role's order: role() is the
  // index.
  struct InitRole {};
  struct StartingRole {};
  struct StandbyRole {
    // Preempt failback: since when this preferred head has been a healthy
    // standby beside a live master (consider_preempt()).
    std::optional<TimePoint> healthy_since;
  };
  struct MasterRole {
    // The master we took over from (set by a takeover). If it shows up as
    // MASTER again it is the stale one: its smhad yields at once, so we give
    // it time before yielding by rank.
    std::optional<Guid> took_over_from;
    // Split brain: since when another head answers MASTER beside us, and that
    // master as first seen in this overlap: a new priority or a lower ActCount
    // means its OpenSM restarted (it yielded), so the overlap starts over.
    std::optional<TimePoint> dual_since;
    Guid dual_with{};
    std::uint8_t dual_prio = 0;
    std::uint32_t dual_act = 0;
  };
  struct TakingOverRole {
    TimePoint started{};
    TimePoint deadline{};
    // 0: DISCOVER sent (or our SM left STANDBY by itself); 1: the fallback
    // restart at the master priority is under way.
    int stage = 0;
    bool swept = false;  // started by our SM leaving STANDBY, not by our DISCOVER
    std::optional<Guid> took_over_from;  // passed on to MasterRole
  };
  struct RecoveringRole {
    TimePoint since{};       // when local_down() deferred the restart
    TimePoint restart_at{};  // the restart is due (recovery_due())
  };
  struct HandingOverRole {
    bool push = false;  // we are MASTER and hand over; false: we pull mastership here
    Guid target{};
    TimePoint deadline{};
  };
  using RoleState = std::variant<InitRole, StartingRole, StandbyRole, MasterRole, TakingOverRole,
                                 RecoveringRole, HandingOverRole>;
  Role role() const { return static_cast<Role>(state_.index()); }
  // The one place the role changes: records the change and its cause. Entering
  // the role the engine is already in changes nothing.
  void enter(const RoleState& to, std::string why, Ctx& c);

  // ---- Observations -------------------------------------------------------
  void on_round(const PollRound& r, TimePoint now, Ctx& c);
  void on_process(ProcessState p, TimePoint now, Ctx& c);
  void on_tick(TimePoint now, Ctx& c);
  void on_handover(const HandoverRequest& h, TimePoint now, Ctx& c);

  // What a round shows, whatever the role.
  void track_peers(const PollRound& r, TimePoint now);
  void track_local_port(const PollRound& r);
  void track_local_sm(const PollRound& r, TimePoint now, Ctx& c);
  void track_master(const PollRound& r);
  // No SM answers MASTER anywhere on the fabric (heads, our port's master, the
  // census): no_master once that lasts past the start grace with nobody
  // sweeping, or past sweep_bound; cleared by the first MASTER answer.
  void track_fabric_master(const PollRound& r, TimePoint now, Ctx& c);
  void check_alarms(const PollRound& r, TimePoint now, Ctx& c);
  // Fences a hung local OpenSM; true when it did. Otherwise, with our SM
  // silent, asks for the next round soon (and when the fence would be due).
  bool consider_fence(const PollRound& r, TimePoint now, Ctx& c);

  // One handler per role for a round in which our SM answered `ls`
  // (Init: a round adopt() left undecided is handled as Starting).
  void round_starting(SmState ls, Ctx& c);
  void round_standby(const PollRound& r, SmState ls, bool was_standby, TimePoint now, Ctx& c);
  void round_master(SmState ls, Ctx& c);
  void round_taking_over(TakingOverRole& t, SmState ls, TimePoint now, Ctx& c);
  void round_handing_over(const HandingOverRole& h, SmState ls, TimePoint now, Ctx& c);
  void round_recovering(RecoveringRole& rec, TimePoint now, Ctx& c);
  // What every role decides after its handler: priority checks, the port-down
  // master, takeover, split brain and preempt.
  void after_round(const PollRound& r, TimePoint now, Ctx& c);
  // One handler per role with a deadline.
  void tick_recovering(RecoveringRole& rec, TimePoint now, Ctx& c);
  void tick_taking_over(TakingOverRole& t, TimePoint now, Ctx& c);
  void tick_handing_over(const HandingOverRole& h, TimePoint now, Ctx& c);

  void consider_takeover(const PollRound& r, TimePoint now, Ctx& c);
  void consider_split_brain(MasterRole& m, const PollRound& r, TimePoint now, Ctx& c);
  void consider_preempt(StandbyRole& s, const PollRound& r, TimePoint now, Ctx& c);
  // How local_down() brings OpenSM back: start it (it exited), kill the hung
  // process and start it again (fenced), or not at all (supervision failed:
  // a start would be refused; the engine waits for the process instead).
  enum class Relaunch : std::uint8_t { Start, ForcedRestart, None };
  // Returns true when the restart is deferred (we were MASTER and a standby
  // takes over): the engine is then Recovering.
  bool local_down(TimePoint now, Ctx& c, const std::string& why, Relaunch how);
  // Our MASTER's OpenSM is gone (exited): DISCOVER to the standby that would win.
  void discover_successor(TimePoint now, Ctx& c, const char* why);
  void swept_takeover(TimePoint now, Ctx& c);
  // The peer that answered MASTER last and does not now: the master a
  // takeover lost, for the event (its port may answer NOTACTIVE once its SM
  // is gone, so the latest answer alone does not say).
  std::optional<Guid> lost_master() const;
  // The configured head that was MASTER and no longer answers.
  std::optional<Guid> unanswered_master() const;
  void takeover_done(const TakingOverRole& t, TimePoint now, Ctx& c);
  void restart_as_standby(TimePoint now, Ctx& c);
  bool peer_sweeping(const RecoveringRole& rec, TimePoint now) const;
  bool recovery_due(RecoveringRole& rec, TimePoint now);
  void start(TimePoint now, Ctx& c, const std::string& why, bool force_restart = false);
  // A head MASTER below the master value (its SIGHUP not applied yet) would
  // not outrank a standby at our standby value: we start at the yield value
  // until it does.
  void yield_below_weak_master();
  void set_alarm(AlarmKind k, bool on, const std::string& detail, Ctx& c);
  void sync_priority(Ctx& c);
  void hold_actions(Decision& d);
  void verify_priority(const PollRound& r, TimePoint now, Ctx& c);
  void adopt(const PollRound& r, TimePoint now, Ctx& c);
  std::uint8_t desired_priority() const;
  bool peer_live() const;
  const PeerTrack* live_master_peer() const;
  std::string peer_name(Guid g) const;

  HaPolicy policy_;
  Priorities prio_;
  RoleState state_;
  ProcessState process_ = ProcessState::Stopped;
  bool process_known_ = false;
  std::optional<SmInfo> local_;       // last answer of the local SM
  SmState local_state_ = SmState::NotActive;
  int local_misses_ = 0;
  TimePoint local_answer_at_{};       // last answer of the local SM
  TimePoint local_alive_at_{};        // when the query it answered last was sent
  TimePoint started_at_{};
  bool answered_since_start_ = false;  // the local SM answered since (re)start/adoption
  // Our own port went down while we were master. A real OpenSM stays MASTER
  // through a short link loss; from then on this master renders the standby
  // priority, so when the link comes back after a peer took over, OpenSM's own
  // election hands mastership to the peer instead of the returning head winning
  // by priority. Cleared once the port is up and the peers answer with no
  // MASTER among them (nobody took over), or after `port_up_rounds_` reach
  // 4 x misses with the peers silent, or when we are no longer master.
  bool local_port_down_ = false;
  int port_up_rounds_ = 0;
  // Consecutive rounds in which our port was down while our OpenSM still
  // answered MASTER. The first one renders the standby priority (the SIGHUP
  // makes OpenSM sweep and notice its port); if OpenSM is still MASTER a round
  // later (a sweep in progress delays it), it is restarted as standby so it
  // cannot come back as a second master once a peer has taken over.
  int port_down_master_rounds_ = 0;
  // We fenced our MASTER while a peer answers STANDBY: once the kill is
  // confirmed (its exit is seen), DISCOVER that peer as after a crash.
  bool discover_on_exit_ = false;
  // The sm_priority last rendered and signalled (SIGHUP, or read at start).
  // OpenSM may not apply it (a SIGHUP absorbed by a running heavy sweep, a
  // failed write): every answer of the local SM is compared with it, and the
  // change is signalled again until it shows (verify_priority()).
  std::uint8_t rendered_ = 0;
  TimePoint prio_signalled_at_{};
  TimePoint prio_wanted_since_{};  // when rendered_ took its current value
  int prio_resends_ = 0;
  PeerHealth health_;  // the peers as the rounds show them, and the loss measured
  std::vector<PeerTrack>& peers() { return health_.peers(); }
  const std::vector<PeerTrack>& peers() const { return health_.peers(); }
  int no_master_rounds_ = 0;
  TimePoint no_master_since_{};
  bool yield_until_master_ = false;  // restarted after a failure: yield priority until a MASTER
  std::vector<AlarmKind> alarms_;
  // The active unknown_sm: its detail (refreshed when it changes), the GUIDs
  // it has named since it was raised (raised again only for a new one) and
  // how often its detail changed since the last raise.
  std::string unknown_sm_detail_;
  std::vector<Guid> unknown_sm_guids_;
  int unknown_sm_changes_ = 0;
  std::optional<Guid> master_seen_;
  // Since when no SM anywhere answered MASTER (track_fabric_master()); unset
  // while one does.
  std::optional<TimePoint> masterless_since_;
  bool fabric_master_ = false;
  bool held_ = false;  // a maintenance hold (HoldChanged)
  // The SM at our port's MasterSMLID answered MASTER this round (see
  // PollRound::port_master): a master exists even if no configured peer
  // answers as one (unaddressed, stale LID, not a head). No takeover acts then.
  std::optional<SmInfo> port_master_;
};

}  // namespace smha::sm
