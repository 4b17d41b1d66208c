// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/sm/ha_machine.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <sstream>

namespace smha::sm {

std::string_view to_string(ProcessState s) {
  switch (s) {
    case ProcessState::Stopped: return "stopped";
    case ProcessState::Running: return "running";
    case ProcessState::Exited: return "exited";
    case ProcessState::Failed: return "failed";
  }
  return "unknown";
}

std::string_view to_string(PortState s) {
  switch (s) {
    case PortState::Unknown: return "unknown";
    case PortState::Down: return "down";
    case PortState::Up: return "up";
  }
  return "unknown";
}

std::string_view to_string(EventKind k) {
  switch (k) {
    case EventKind::StateChanged: return "state_changed";
    case EventKind::TakeoverStarted: return "takeover_started";
    case EventKind::TakeoverDone: return "takeover_done";
    case EventKind::TakeoverAborted: return "takeover_aborted";
    case EventKind::TakeoverFallback: return "takeover_fallback";
    case EventKind::LocalFailure: return "local_failure";
    case EventKind::FenceLocal: return "fence_local";
    case EventKind::OpensmStarted: return "opensm_started";
    case EventKind::SplitBrainYield: return "split_brain_yield";
    case EventKind::HandoverStarted: return "handover_started";
    case EventKind::HandoverDone: return "handover_done";
    case EventKind::HandoverRolledBack: return "handover_rolled_back";
    case EventKind::HandoverRejected: return "handover_rejected";
    case EventKind::PriorityChanged: return "priority_changed";
    case EventKind::Adopted: return "adopted";
    case EventKind::PeerDiscover: return "peer_discover";
    case EventKind::PeerRoute: return "peer_route";
    case EventKind::ActionHeld: return "action_held";
  }
  return "unknown";
}

std::string_view to_string(Role r) {
  switch (r) {
    case Role::Init: return "init";
    case Role::Starting: return "starting";
    case Role::Standby: return "standby";
    case Role::Master: return "master";
    case Role::TakingOver: return "taking_over";
    case Role::Recovering: return "recovering";
    case Role::HandingOver: return "handing_over";
  }
  return "unknown";
}

struct HaMachine::Ctx {
  Decision& d;
  template <typename T>
  void act(T a) {
    d.actions.emplace_back(std::in_place_type<T>, std::move(a));
  }
  void event(EventKind k, std::string reason, std::string evidence = {}, std::vector<Guid> nodes = {}) {
    act(RecordEvent{k, std::move(reason), std::move(evidence), std::move(nodes)});
  }
  TimePoint now;
  // Only future wakeups: a deadline already due is handled in this step or by
  // the next poll round, never by an immediate re-step (which could spin).
  void wake(TimePoint t) {
    if (t <= now) return;
    if (!d.next_wakeup || t < *d.next_wakeup) d.next_wakeup = t;
  }
};

namespace {

const SmInfo* best_info(const PeerProbe& p) {
  if (p.via_lid.info) return &*p.via_lid.info;
  if (p.via_dr.info) return &*p.via_dr.info;
  return nullptr;
}

std::string ms(Duration d) {
  std::ostringstream o;
  o << static_cast<long long>(std::chrono::duration_cast<milliseconds>(d).count()) << "ms";
  return o.str();
}

}  // namespace

HaMachine::HaMachine(HaPolicy policy)
    : policy_(std::move(policy)), prio_(priorities(policy_)), health_(policy_.peers) {
  assert(validate(policy_).ok());
  rendered_ = prio_.standby;
}


double HaMachine::round_miss_estimate() const { return health_.round_miss_estimate(); }

int HaMachine::required_rounds() const {
  return health_.required_rounds(policy_.misses, policy_.false_alarm_target);
}

EngineStatus HaMachine::status() const {
  EngineStatus s;
  s.role = role();
  if (local_) s.local_state = local_state_;
  s.rendered_priority = rendered_;
  s.master = master_seen_;
  s.held = held_;
  if (const auto* h = std::get_if<HandingOverRole>(&state_)) s.handover_target = h->target;
  s.required_rounds = required_rounds();
  s.round_miss_estimate = round_miss_estimate();
  s.alarms = alarms_;
  s.fabric_master = fabric_master_;
  s.masterless_since = masterless_since_;
  return s;
}

std::string HaMachine::peer_name(Guid g) const {
  for (const auto& p : peers())
    if (p.spec.guid == g) return p.spec.name;
  if (g == policy_.own_guid) return policy_.node_name;
  return to_string(g);
}

Decision HaMachine::step(const Observation& obs, TimePoint now) {
  Decision d;
  Ctx c{d, now};
  if (const auto* r = std::get_if<PollRound>(&obs)) {
    on_round(*r, now, c);
  } else if (const auto* p = std::get_if<ProcessChanged>(&obs)) {
    on_process(p->process, now, c);
  } else if (std::holds_alternative<Tick>(obs)) {
    on_tick(now, c);
  } else if (const auto* h = std::get_if<HandoverRequest>(&obs)) {
    on_handover(*h, now, c);
  } else if (const auto* hold = std::get_if<HoldChanged>(&obs)) {
    held_ = hold->held;
  }
  sync_priority(c);
  if (const auto* t = std::get_if<TakingOverRole>(&state_)) {
    c.wake(t->deadline);
  } else if (const auto* h = std::get_if<HandingOverRole>(&state_)) {
    c.wake(h->deadline);
  } else if (const auto* rec = std::get_if<RecoveringRole>(&state_)) {
    if (process_ != ProcessState::Failed) c.wake(rec->restart_at);
  } else if (const auto* s = std::get_if<StandbyRole>(&state_); s && s->healthy_since) {
    c.wake(*s->healthy_since + policy_.preempt_hold_down);
  }
  if (held_) hold_actions(d);
  return d;
}

// A maintenance hold (HoldChanged): what would move mastership or touch a
// running OpenSM is recorded, not carried out; but a STANDBY renders the yield
// priority (desired_priority), which only keeps mastership away from it.
void HaMachine::hold_actions(Decision& d) {
  std::vector<Action> kept;
  kept.reserve(d.actions.size());
  for (auto& a : d.actions) {
    std::string what;
    if (std::holds_alternative<SendDiscover>(a)) what = "DISCOVER to the local SM";
    else if (const auto* p = std::get_if<DiscoverPeer>(&a)) what = "DISCOVER to peer " + to_string(p->peer);
    else if (const auto* s = std::get_if<StopOpensm>(&a)) what = s->force ? "stop OpenSM (SIGKILL)" : "stop OpenSM";
    else if (const auto* r = std::get_if<RestartOpensm>(&a))
      what = "restart OpenSM at priority " + std::to_string(r->priority);
    else if (const auto* p = std::get_if<SetPriority>(&a);
             p && !(p->priority == prio_.yield && std::holds_alternative<StandbyRole>(state_)))
      what = "render priority " + std::to_string(p->priority);
    if (what.empty()) {
      kept.push_back(std::move(a));
      continue;
    }
    kept.push_back(RecordEvent{EventKind::ActionHeld, what + " not carried out", "maintenance hold"});
  }
  d.actions = std::move(kept);
}

void HaMachine::enter(const RoleState& to, std::string why, Ctx& c) {
  const auto next = static_cast<Role>(to.index());
  if (next == role()) return;
  c.d.role_changes.push_back(RoleChange{role(), next, std::move(why)});
  state_ = to;
}

void HaMachine::set_alarm(AlarmKind k, bool on, const std::string& detail, Ctx& c) {
  auto it = std::find(alarms_.begin(), alarms_.end(), k);
  if (on && it == alarms_.end()) {
    alarms_.push_back(k);
    c.act(RaiseAlarm{k, detail});
  } else if (!on && it != alarms_.end()) {
    alarms_.erase(it);
    c.act(ClearAlarm{k});
  }
}

std::uint8_t HaMachine::desired_priority() const {
  if (std::holds_alternative<MasterRole>(state_)) return local_port_down_ ? prio_.standby : prio_.master;
  if (const auto* h = std::get_if<HandingOverRole>(&state_)) return h->push ? prio_.yield : prio_.claim;
  if (const auto* t = std::get_if<TakingOverRole>(&state_)) return t->stage > 0 ? prio_.master : prio_.standby;
  // A held STANDBY ranks itself below every standby, so that neither a peer's
  // smhad (its DISCOVER to the best standby) nor OpenSM's own election picks
  // a head under maintenance while another standby can take over.
  if (held_ && std::holds_alternative<StandbyRole>(state_)) return prio_.yield;
  return yield_until_master_ ? prio_.yield : prio_.standby;
}

void HaMachine::sync_priority(Ctx& c) {
  // At Init the first answer decides (adopt()): an OpenSM smhad took over at
  // start may be a MASTER that must keep its value.
  if (role() == Role::Init) return;
  const auto want = desired_priority();
  if (want == rendered_) return;
  // A stopped OpenSM gets the right priority when it is started.
  if (process_ != ProcessState::Running) return;
  c.act(SetPriority{want});
  c.event(EventKind::PriorityChanged,
          std::to_string(rendered_) + "->" + std::to_string(want) + " as " +
              std::string(to_string(role())));
  rendered_ = want;
  prio_signalled_at_ = prio_wanted_since_ = c.now;
  prio_resends_ = 0;
}

// OpenSM applies sm_priority only when it re-reads its file: at start, and at
// the start of the heavy sweep a SIGHUP requests. A SIGHUP that lands while a
// heavy sweep runs is taken by that sweep, which has already re-read the file,
// and is lost; a write that failed (disk full) leaves the old value. The local
// SM's SMInfo priority, read every round, is the truth: a value not applied a
// poll interval after it was signalled is signalled again (file written again,
// SIGHUP), up to kPriorityResends times; then the signal repeats every
// kPriorityRetryRounds poll intervals until the value shows, and
// `priority_not_applied` is raised once it has been missing for
// handover_bound. The value showing clears the alarm.
namespace {
constexpr int kPriorityResends = 3;
constexpr int kPriorityRetryRounds = 10;
}  // namespace

void HaMachine::verify_priority(const PollRound& r, TimePoint now, Ctx& c) {
  if (!r.local.info || process_ != ProcessState::Running) return;
  const auto answered = r.local.info->priority;
  if (answered == rendered_) {
    prio_resends_ = 0;
    set_alarm(AlarmKind::PriorityNotApplied, false, "", c);
    return;
  }
  const Duration since = now - prio_signalled_at_;
  const std::string evidence = "rendered " + std::to_string(rendered_) + ", local SM answers " +
                               std::to_string(answered) + " " + ms(since) + " after the signal";
  if (prio_resends_ < kPriorityResends) {
    if (since < policy_.poll_interval) return;
    ++prio_resends_;
    c.act(SetPriority{rendered_});
    c.event(EventKind::PriorityChanged,
            "not applied: signalled again (" + std::to_string(prio_resends_) + " of " +
                std::to_string(kPriorityResends) + ")",
            evidence);
    prio_signalled_at_ = now;
    return;
  }
  // A heavy sweep that waits for transaction timeouts delays the re-read by
  // up to a second or so; the alarm is for a value that stays unapplied.
  if (now - prio_wanted_since_ >= policy_.handover_bound)
    set_alarm(AlarmKind::PriorityNotApplied, true,
              "wanted " + std::to_string(rendered_) + ", local SM answers " +
                  std::to_string(answered) + " " + ms(now - prio_wanted_since_) + " and " +
                  std::to_string(kPriorityResends) +
                  " re-sends later; check that opensm.conf can be written",
              c);
  if (since >= kPriorityRetryRounds * policy_.poll_interval) {
    c.act(SetPriority{rendered_});
    prio_signalled_at_ = now;
  }
}

void HaMachine::yield_below_weak_master() {
  if (const auto* m = live_master_peer(); m && m->last->priority < prio_.master) yield_until_master_ = true;
}

// Starts OpenSM (from Init or Recovering) at the standby priority, or at the
// yield value while a failure may let a peer take over. force_restart: the
// process is hung and still there: it is killed at once and started again.
void HaMachine::start(TimePoint now, Ctx& c, const std::string& why, bool force_restart) {
  yield_below_weak_master();
  rendered_ = yield_until_master_ ? prio_.yield : prio_.standby;
  if (force_restart) c.act(RestartOpensm{rendered_, true});
  else c.act(StartOpensm{rendered_});
  c.event(EventKind::OpensmStarted, why, "priority " + std::to_string(rendered_));
  prio_signalled_at_ = prio_wanted_since_ = now;
  prio_resends_ = 0;
  process_ = ProcessState::Running;
  discover_on_exit_ = false;
  local_port_down_ = false;
  started_at_ = now;
  answered_since_start_ = false;
  local_misses_ = 0;
  enter(StartingRole{}, why, c);
}

// A peer answered in the last round as STANDBY or DISCOVERING: it can take over.
bool HaMachine::peer_live() const {
  for (const auto& p : peers())
    if (p.misses == 0 && p.last &&
        (p.last->state == SmState::Standby || p.last->state == SmState::Discovering))
      return true;
  return false;
}

// A peer answering DISCOVERING while our OpenSM is down is taking over (its
// discovery sweep grows with the fabric): an OpenSM started now would race it
// with a sweep of its own and could end MASTER first. The restart waits for the
// peer's MASTER, up to sweep_bound after our OpenSM went down.
// Recovering, OpenSM not running and not failed: the recovery delay is over
// and no peer sweeps. While one does, the delay moves one poll interval on.
bool HaMachine::recovery_due(RecoveringRole& rec, TimePoint now) {
  if (process_ == ProcessState::Running || process_ == ProcessState::Failed || now < rec.restart_at)
    return false;
  if (peer_sweeping(rec, now)) {
    rec.restart_at = now + policy_.poll_interval;  // look again after the next round
    return false;
  }
  return true;
}

bool HaMachine::peer_sweeping(const RecoveringRole& rec, TimePoint now) const {
  if (now - rec.since >= policy_.sweep_bound) return false;
  for (const auto& p : peers())
    if (p.answered && p.last && p.last->state == SmState::Discovering) return true;
  return false;
}

const PeerTrack* HaMachine::live_master_peer() const {
  for (const auto& p : peers())
    if (p.answered && p.last && p.last->state == SmState::Master) return &p;
  return nullptr;
}

// Local OpenSM is gone (exited), was fenced, or its supervision failed. While
// master, the restart is deferred so a live standby peer takes over cleanly
// instead of racing our own restarted OpenSM through two concurrent discovery
// sweeps.
bool HaMachine::local_down(TimePoint now, Ctx& c, const std::string& why, Relaunch how) {
  const Role r = role();
  const bool was_master = local_ && local_state_ == SmState::Master &&
                          (r == Role::Master || r == Role::HandingOver || r == Role::Starting);
  c.event(EventKind::LocalFailure, why,
          std::string("role ") + std::string(to_string(r)) + (was_master ? ", was MASTER" : ""));
  local_.reset();
  local_misses_ = 0;
  process_ = ProcessState::Stopped;
  // After a local failure, while a peer may be taking over (it answered as
  // STANDBY or DISCOVERING, and no MASTER is seen), OpenSM comes back below
  // every standby (yield): the peer's discovery sweep runs at the standby
  // priority, and an equal priority with our lower GUID would win OpenSM's
  // election there and leave no MASTER until our own sweep ends. Raised to
  // the standby priority once a MASTER is seen.
  yield_until_master_ = peer_live() && live_master_peer() == nullptr;
  if (was_master && peer_live()) {
    enter(RecoveringRole{now, now + policy_.poll_interval * (required_rounds() + 2) + policy_.takeover_bound},
          why + ": restart deferred while a standby takes over", c);
    // A hung process is killed now; the restart waits.
    if (how == Relaunch::ForcedRestart) c.act(StopOpensm{true});
    return true;
  }
  enter(RecoveringRole{now, now}, why, c);
  if (how != Relaunch::None) start(now, c, why + ": restart as standby", how == Relaunch::ForcedRestart);
  return false;
}

void HaMachine::on_process(ProcessState p, TimePoint now, Ctx& c) {
  // The first report always comes at Init (the engine leaves Init only in
  // adopt(), after it): handled below.
  process_known_ = true;
  if (p == ProcessState::Running) {
    if (process_ != ProcessState::Running) {
      process_ = p;
      started_at_ = now;
      answered_since_start_ = false;
      // Started without our asking (a reload that cleared a supervision
      // failure): it is ours again. At Init the first round decides (adopt()).
      if (role() == Role::Recovering) {
        yield_below_weak_master();
        enter(StartingRole{}, "OpenSM started without our asking", c);
      }
    }
    return;
  }
  const Role r = role();
  const bool was_master = (r == Role::Master || r == Role::HandingOver) && local_ &&
                          local_state_ == SmState::Master;
  if (p == ProcessState::Failed) {
    if (process_ == ProcessState::Failed) return;
    if (process_ == ProcessState::Running) {
      // A start would be refused: the engine waits for the process instead
      // of asking every round.
      local_down(now, c, "OpenSM supervision failed", Relaunch::None);
      if (was_master) discover_successor(now, c, "our MASTER's OpenSM exited");
    } else {
      c.event(EventKind::LocalFailure, "OpenSM supervision failed",
              std::string("role ") + std::string(to_string(r)));
      enter(RecoveringRole{now, now}, "OpenSM supervision failed", c);
    }
    process_ = ProcessState::Failed;
    return;
  }
  if (process_ == ProcessState::Failed) {
    // Supervision retries after a crash loop: OpenSM may be started again.
    // Recovering's round starts it (as standby, or below a sweeping peer).
    process_ = p;
    if (auto* rec = std::get_if<RecoveringRole>(&state_)) rec->restart_at = now;
    else if (p == ProcessState::Exited) enter(RecoveringRole{now, now}, "OpenSM supervision retries", c);
    return;
  }
  if (r == Role::Init) {
    // smhad start: the first poll round decides (adopt()): an OpenSM may still
    // run on our port (the previous smhad's), and rendering before its answer
    // could dip a MASTER's priority.
    process_ = p;
    return;
  }
  if (process_ != ProcessState::Running) {  // already handled (our own stop)
    if (discover_on_exit_) {
      discover_on_exit_ = false;
      discover_successor(now, c, "our fenced MASTER's OpenSM is dead");
    }
    return;
  }
  local_down(now, c, std::string("OpenSM ") + std::string(to_string(p)), Relaunch::Start);
  if (was_master) discover_successor(now, c, "our MASTER's OpenSM exited");
}

// The standby OpenSM's own election would choose (priority, then lower GUID),
// among the peers that answered STANDBY in the latest round, recently: a
// peer that answered MASTER, DISCOVERING or nothing gets no Set. Its smhad
// sees its SM sweep and become MASTER as after its own DISCOVER; if the Set is
// lost, its smhad's rounds find the master gone as before.
void HaMachine::discover_successor(TimePoint now, Ctx& c, const char* why) {
  const PeerTrack* best = nullptr;
  for (const auto& t : peers()) {
    if (!t.answered || !t.last || t.last->state != SmState::Standby) continue;
    if (now - t.last_answer_at > 2 * policy_.poll_interval) continue;
    if (best == nullptr || t.last->priority > best->last->priority ||
        (t.last->priority == best->last->priority && t.spec.guid < best->spec.guid))
      best = &t;
  }
  if (best == nullptr) return;
  c.act(DiscoverPeer{best->spec.guid});
  c.event(EventKind::PeerDiscover, why,
          "DISCOVER sent to " + peer_name(best->spec.guid) + " (STANDBY, priority " +
              std::to_string(best->last->priority) + ")",
          {best->spec.guid});
}

void HaMachine::on_tick(TimePoint now, Ctx& c) {
  if (auto* rec = std::get_if<RecoveringRole>(&state_)) tick_recovering(*rec, now, c);
  else if (auto* t = std::get_if<TakingOverRole>(&state_)) tick_taking_over(*t, now, c);
  else if (const auto* h = std::get_if<HandingOverRole>(&state_)) tick_handing_over(*h, now, c);
}

void HaMachine::tick_recovering(RecoveringRole& rec, TimePoint now, Ctx& c) {
  if (recovery_due(rec, now)) start(now, c, "recovery delay over: restart as standby");
}

void HaMachine::tick_taking_over(TakingOverRole& t, TimePoint now, Ctx& c) {
  if (now < t.deadline) return;
  // DISCOVERING: OpenSM took the DISCOVER and is sweeping; a restart would
  // only start that sweep over. Wait for it up to sweep_bound.
  if (t.stage == 0 && local_ && local_state_ == SmState::Discovering &&
      now - local_answer_at_ <= 2 * policy_.poll_interval && now - t.started < policy_.sweep_bound) {
    t.deadline = std::min(now + policy_.poll_interval, t.started + policy_.sweep_bound);
    return;
  }
  // The SM our port names as master answered MASTER in the last round: there
  // is a master (one we do not poll as a peer); a restart would fight it.
  if (port_master_) {
    enter(StandbyRole{}, "takeover: the SM our port names as master answers MASTER", c);
    c.event(EventKind::TakeoverAborted, "a master answered",
            peer_name(port_master_->guid) + " is MASTER at our port's MasterSMLID", {port_master_->guid});
    return;
  }
  if (t.stage == 0) {
    t.stage = 1;
    t.deadline = now + policy_.takeover_bound + policy_.start_grace;
    c.act(RestartOpensm{prio_.master, false});
    rendered_ = prio_.master;
    prio_signalled_at_ = prio_wanted_since_ = now;
    prio_resends_ = 0;
    started_at_ = now;
    answered_since_start_ = false;
    local_misses_ = 0;
    c.event(EventKind::TakeoverFallback, "local SM not MASTER " + ms(now - t.started) + " after DISCOVER",
            "restart at priority " + std::to_string(prio_.master));
    return;
  }
  // An SM that is not a head may be MASTER (the census sees it): then the
  // fabric has a master after all, and no_master would only flap.
  if (!fabric_master_)
    set_alarm(AlarmKind::NoMaster, true, "takeover gave no MASTER within " + ms(now - t.started), c);
  enter(StandbyRole{}, "takeover gave no MASTER", c);
}

void HaMachine::tick_handing_over(const HandingOverRole& h, TimePoint now, Ctx& c) {
  if (now < h.deadline) return;
  const bool local_master = local_ && local_state_ == SmState::Master;
  set_alarm(AlarmKind::HandoverFailed, true, "no new master within " + ms(policy_.handover_bound), c);
  c.event(EventKind::HandoverRolledBack, h.push ? "target did not become MASTER" : "master did not hand over",
          "target " + peer_name(h.target), {h.target});
  if (local_master) enter(MasterRole{}, "handover rolled back", c);
  else enter(StandbyRole{}, "handover rolled back", c);
}

void HaMachine::check_alarms(const PollRound& r, TimePoint, Ctx& c) {
  // Unknown SMs: reported by the poller, or a configured LID answering with another GUID.
  std::string unknown;
  std::vector<Guid> guids;
  for (const auto& s : r.other_sms) {
    unknown += to_string(s.info.guid) + " " + std::string(to_string(s.info.state)) +
               (s.where.empty() ? "" : " " + s.where) + "; ";
    guids.push_back(s.info.guid);
  }
  for (const auto& p : r.peers)
    if (const SmInfo* i = best_info(p); i && i->guid != p.guid &&
        std::none_of(r.other_sms.begin(), r.other_sms.end(), [&](const OtherSm& o) { return o.info.guid == i->guid; })) {
      unknown += to_string(i->guid) + " (at " + peer_name(p.guid) + "'s address) ";
      guids.push_back(i->guid);
    }
  if (const auto& pm = r.port_master.info; pm && pm->guid != policy_.own_guid &&
      std::none_of(peers().begin(), peers().end(), [&](const PeerTrack& t) { return t.spec.guid == pm->guid; }) &&
      std::none_of(r.other_sms.begin(), r.other_sms.end(), [&](const OtherSm& o) { return o.info.guid == pm->guid; })) {
    unknown += to_string(pm->guid) + " (" + std::string(to_string(pm->state)) +
               " at our port's MasterSMLID) ";
    guids.push_back(pm->guid);
  }
  // One alarm event per SM: raised when an SM appears that the active alarm
  // has not named yet. Its detail follows what the census learns (a
  // NodeDescription read after the SM was first seen, its state) without a
  // new event: a rogue SM that keeps changing state must not flood the log
  // and the event ring. The detail counts those changes.
  const bool active = std::find(alarms_.begin(), alarms_.end(), AlarmKind::UnknownSm) != alarms_.end();
  const std::string detail = "SM not a configured head: " + unknown;
  bool new_sm = false;
  for (Guid g : guids)
    if (std::find(unknown_sm_guids_.begin(), unknown_sm_guids_.end(), g) == unknown_sm_guids_.end()) {
      unknown_sm_guids_.push_back(g);
      new_sm = true;
    }
  if (unknown.empty()) {
    set_alarm(AlarmKind::UnknownSm, false, {}, c);
    unknown_sm_guids_.clear();
  } else if (!active || new_sm) {
    if (active) c.act(RaiseAlarm{AlarmKind::UnknownSm, detail});
    else set_alarm(AlarmKind::UnknownSm, true, detail, c);
    unknown_sm_changes_ = 0;
  } else if (detail != unknown_sm_detail_) {
    ++unknown_sm_changes_;
    c.act(RaiseAlarm{AlarmKind::UnknownSm,
                     detail + "[changed " + std::to_string(unknown_sm_changes_) + " time" +
                         (unknown_sm_changes_ == 1 ? "" : "s") + " since raised]",
                     true});
  }
  unknown_sm_detail_ = unknown.empty() ? std::string() : detail;

  // SM_Key mismatch: heads with different keys ignore each other's SMInfo.
  std::string mismatch;
  if (r.local.info && r.local.info->sm_key != 0) {
    for (const auto& p : r.peers)
      if (const SmInfo* i = best_info(p); i && i->sm_key != 0 && i->sm_key != r.local.info->sm_key)
        mismatch += peer_name(p.guid) + " ";
  }
  set_alarm(AlarmKind::SmKeyMismatch, !mismatch.empty(),
            "SM_Key differs from ours on: " + mismatch, c);

  // Configured priorities: every head must list the same ones, or the rendered
  // standby values no longer stay below the master's (sticky failback breaks).
  // A STANDBY peer renders its standby value, the claim value while pulling,
  // or the yield value while held (or until it sees a master after a restart).
  std::string prio;
  for (auto& t : peers()) {
    if (!t.answered || t.last->state != SmState::Standby) continue;
    const auto want = prio_.standby_for(t.spec.guid);
    if (t.last->priority == want || t.last->priority == prio_.claim || t.last->priority == prio_.yield)
      t.prio_mismatch = 0;
    else ++t.prio_mismatch;
    if (t.prio_mismatch >= 2 * policy_.misses)
      prio += peer_name(t.spec.guid) + " renders " + std::to_string(t.last->priority) +
              " as STANDBY, expected " + std::to_string(want) + "; ";
  }
  const bool any = std::any_of(peers().begin(), peers().end(), [&](const PeerTrack& t) {
    return t.prio_mismatch >= 2 * policy_.misses;
  });
  set_alarm(AlarmKind::PriorityMismatch, any,
            prio + "give every head the same sm_priority and peers[].sm_priority values", c);
}

void HaMachine::track_peers(const PollRound& r, TimePoint now) {
  health_.observe(r, now);
  port_master_.reset();
  if (r.port_master.info && r.port_master.info->state == SmState::Master &&
      r.port_master.info->guid != policy_.own_guid)
    port_master_ = *r.port_master.info;
}

void HaMachine::track_local_port(const PollRound& r) {
  if (r.local_port == PortState::Down) {
    local_port_down_ = true;
    port_up_rounds_ = 0;
  } else if (local_port_down_ && r.local_port == PortState::Up) {
    const bool peers_heard =
        peers().empty() || std::any_of(peers().begin(), peers().end(), [](const PeerTrack& t) { return t.answered; });
    ++port_up_rounds_;
    if (live_master_peer() == nullptr && (peers_heard || port_up_rounds_ >= 4 * policy_.misses))
      local_port_down_ = false;
  }
}

void HaMachine::track_local_sm(const PollRound& r, TimePoint now, Ctx& c) {
  const std::optional<SmState> before = local_ ? std::optional<SmState>(local_state_) : std::nullopt;
  if (r.local.info) {
    local_ = *r.local.info;
    local_misses_ = 0;
    local_answer_at_ = now;
    local_alive_at_ = r.sent_at.value_or(now);
    answered_since_start_ = true;
    // At Init the answer is an OpenSM smhad adopts (adopt()), not a change.
    if (role() != Role::Init && (!before || *before != r.local.info->state)) {
      const SmState old = before.value_or(SmState::NotActive);
      local_state_ = r.local.info->state;
      RecordEvent changed{EventKind::StateChanged,
                          std::string(to_string(old)) + "->" + std::string(to_string(local_state_)), {}};
      changed.from = old;
      changed.to = local_state_;
      c.act(std::move(changed));
      c.act(RunHook{"transition", local_state_, old, rendered_});
    }
    local_state_ = r.local.info->state;
    set_alarm(AlarmKind::LocalSmHung, false, "", c);
  } else if (r.local.queried && process_ == ProcessState::Running) {
    ++local_misses_;
  }
}

void HaMachine::track_master(const PollRound& r) {
  master_seen_.reset();
  if (r.local.info && r.local.info->state == SmState::Master) master_seen_ = policy_.own_guid;
  else if (const auto* m = live_master_peer()) master_seen_ = m->last->guid;
  else if (port_master_) master_seen_ = port_master_->guid;
  // A head restarted after a failure keeps the yield value until the master
  // runs at the master value: a new master's first SIGHUP may have been lost
  // (verify_priority() repeats it), and at its standby value it would not
  // outrank us at ours. A master that is not a head has no master value.
  if (!master_seen_) return;
  if (*master_seen_ == policy_.own_guid) {
    yield_until_master_ = false;
  } else if (const auto* m = live_master_peer()) {
    if (m->last->priority >= prio_.master) yield_until_master_ = false;
  } else if (port_master_) {
    const bool head = std::any_of(peers().begin(), peers().end(),
                                  [&](const PeerTrack& t) { return t.spec.guid == port_master_->guid; });
    if (!head || port_master_->priority >= prio_.master) yield_until_master_ = false;
  }
}

void HaMachine::track_fabric_master(const PollRound& r, TimePoint now, Ctx& c) {
  bool sweeping = r.local.info && r.local.info->state == SmState::Discovering;
  for (const auto& t : peers())
    if (t.answered && t.last->state == SmState::Discovering) sweeping = true;
  fabric_master_ = master_seen_.has_value();
  for (const auto& o : r.other_sms) {
    if (o.info.state == SmState::Master) fabric_master_ = true;
    if (o.info.state == SmState::Discovering) sweeping = true;
  }
  if (fabric_master_) {
    masterless_since_.reset();
    set_alarm(AlarmKind::NoMaster, false, "", c);
    return;
  }
  if (!masterless_since_) masterless_since_ = r.sent_at.value_or(now);
  const Duration quiet = now - *masterless_since_;
  // A start or a takeover leaves the fabric without a MASTER for a moment
  // (OpenSM binds, then sweeps as DISCOVERING): only a silence longer than
  // the start grace with nobody sweeping, or one longer than any sweep, is
  // an outage.
  if ((sweeping || quiet < std::max(policy_.start_grace, policy_.takeover_bound)) && quiet < policy_.sweep_bound)
    return;
  std::string local = process_ == ProcessState::Failed   ? "this head's OpenSM: supervision failed"
                      : process_ != ProcessState::Running ? "this head's OpenSM: not running"
                      : r.local.info ? "this head's SM: " + std::string(to_string(r.local.info->state))
                                     : "this head's SM: no answer";
  set_alarm(AlarmKind::NoMaster, true,
            "no SM answers MASTER on the fabric for " + ms(quiet) + " (" + local + ")", c);
}

void HaMachine::on_round(const PollRound& r, TimePoint now, Ctx& c) {
  // Process state first: a round can reveal an exit the runner reported late.
  if (!process_known_ || r.process != process_) on_process(r.process, now, c);
  track_peers(r, now);
  check_alarms(r, now, c);
  track_local_port(r);
  const bool was_standby = local_ && local_state_ == SmState::Standby;
  track_local_sm(r, now, c);
  track_master(r);
  track_fabric_master(r, now, c);

  // The first round decides what to do with OpenSM; an adopted one is then
  // judged in this same round (e.g. the second of two masters yields now).
  if (role() == Role::Init) adopt(r, now, c);
  if (auto* rec = std::get_if<RecoveringRole>(&state_)) return round_recovering(*rec, now, c);
  if (process_ != ProcessState::Running) return;
  if (consider_fence(r, now, c) || !r.local.info) return;

  const SmState ls = r.local.info->state;
  switch (role()) {
    case Role::Init:
    case Role::Starting: round_starting(ls, c); break;
    case Role::Standby: round_standby(r, ls, was_standby, now, c); break;
    case Role::Master: round_master(ls, c); break;
    case Role::TakingOver: round_taking_over(std::get<TakingOverRole>(state_), ls, now, c); break;
    case Role::HandingOver: round_handing_over(std::get<HandingOverRole>(state_), ls, now, c); break;
    case Role::Recovering: break;  // handled above
  }
  after_round(r, now, c);
}

void HaMachine::round_recovering(RecoveringRole& rec, TimePoint now, Ctx& c) {
  if (process_ != ProcessState::Running && process_ != ProcessState::Failed && live_master_peer() != nullptr)
    start(now, c, "a peer is MASTER: restart as standby");
  else if (recovery_due(rec, now))
    start(now, c, "recovery delay over: restart as standby");
}

// Hung local OpenSM: running, port up, DR hop 0 unanswered for `misses` rounds
// and `hang_timeout` (a short CPU stall of OpenSM or of us is not a hang). Fence it.
// The start grace covers only a fresh OpenSM that has not answered yet. Only
// a process the kernel shows stopped, or a MASTER a peer has already
// replaced, is fenced that fast; one that runs but is silent (busy) gets
// `unresponsive_timeout` — a standby too: its peer answering MASTER is the
// normal case, and a standby starved of CPU for a moment is no hang (the
// loss soak under load saw one killed after 0.4 s of silence).
bool HaMachine::consider_fence(const PollRound& r, TimePoint now, Ctx& c) {
  const bool replaced_master = local_state_ == SmState::Master && live_master_peer() != nullptr;
  const TimePoint fence_at =
      std::max(local_alive_at_, started_at_) +
      (r.local_stopped || replaced_master ? policy_.hang_timeout : policy_.unresponsive_timeout);
  if (r.local.info) return false;
  if (local_misses_ >= policy_.misses &&
      (answered_since_start_ || (!policy_.observe && now - started_at_ >= policy_.start_grace)) &&
      now >= fence_at && r.local_port != PortState::Down) {
    set_alarm(AlarmKind::LocalSmHung, true,
              "no SMInfo answer from local OpenSM for " + std::to_string(local_misses_) + " rounds", c);
    const bool was_master = local_ && local_state_ == SmState::Master;
    c.event(EventKind::FenceLocal, "local OpenSM unresponsive",
            std::to_string(local_misses_) + " rounds unanswered by DR hop 0" + (was_master ? ", was MASTER" : ""));
    // Deferred (we were MASTER and a peer answers STANDBY): the process may
    // still answer until the kill lands, so the DISCOVER waits for its exit
    // (on_process()).
    if (local_down(now, c, "local OpenSM hung", Relaunch::ForcedRestart)) discover_on_exit_ = was_master;
    return true;
  }
  // Nothing more to decide without our own SM's view: the next round soon,
  // and when the silence will reach its threshold (the agent phases the
  // rounds to it); not for a fresh OpenSM that has not answered yet: the
  // start grace covers it.
  c.d.poll_soon = true;
  if (answered_since_start_ && r.local_port != PortState::Down) c.d.fence_due = fence_at;
  return false;
}

void HaMachine::round_starting(SmState ls, Ctx& c) {
  if (ls == SmState::Master) enter(MasterRole{}, "local SM answers MASTER", c);
  else if (ls == SmState::Standby) enter(StandbyRole{}, "local SM answers STANDBY", c);
}

void HaMachine::round_standby(const PollRound& r, SmState ls, bool was_standby, TimePoint now, Ctx& c) {
  // Our SM left STANDBY without our DISCOVER while the master is lost
  // (sweeping with no MASTER seen, or already MASTER while the head that
  // was MASTER no longer answers; a handover leaves that head answering
  // STANDBY). Not with our port down: OpenSM then lost its own port.
  if (was_standby && r.local_port == PortState::Up &&
      ((ls == SmState::Discovering && !master_seen_) || (ls == SmState::Master && unanswered_master()))) {
    swept_takeover(now, c);
    if (ls == SmState::Master) takeover_done(std::get<TakingOverRole>(state_), now, c);
  } else if (ls == SmState::Master) {
    enter(MasterRole{}, "local SM answers MASTER", c);
  }
}

void HaMachine::round_master(SmState ls, Ctx& c) {
  if (ls == SmState::Standby || ls == SmState::Discovering)
    enter(StandbyRole{}, "local SM answers " + std::string(to_string(ls)), c);
}

void HaMachine::round_taking_over(TakingOverRole& t, SmState ls, TimePoint now, Ctx& c) {
  if (ls == SmState::Master) {
    takeover_done(t, now, c);
  } else if (const PeerTrack* m = live_master_peer(); m != nullptr || port_master_) {
    const Guid master = m != nullptr ? m->spec.guid : port_master_->guid;
    enter(StandbyRole{}, "takeover aborted: a master answered", c);
    c.event(EventKind::TakeoverAborted, "a master answered", peer_name(master) + " is MASTER", {master});
  } else {
    tick_taking_over(t, now, c);
  }
}

// Done only once the target answers MASTER at the master value: until its
// smhad has rendered that, it runs at its standby value, and our standby value
// (equal, or higher by configuration; a lower GUID wins a tie) would make
// OpenSM's next election hand mastership back to us. Until then we keep the
// yield value.
void HaMachine::round_handing_over(const HandingOverRole& h, SmState ls, TimePoint now, Ctx& c) {
  const PeerTrack* m = live_master_peer();
  if (h.push && ls != SmState::Master && m != nullptr && m->last->priority >= prio_.master) {
    enter(StandbyRole{}, "handed over: the target answers MASTER", c);
    set_alarm(AlarmKind::HandoverFailed, false, "", c);
    c.event(EventKind::HandoverDone, "handed over", peer_name(m->spec.guid) + " is MASTER", {m->spec.guid});
  } else if (!h.push && ls == SmState::Master) {
    enter(MasterRole{}, "took over by request: local SM answers MASTER", c);
    set_alarm(AlarmKind::HandoverFailed, false, "", c);
    c.event(EventKind::HandoverDone, "took over by request", "local SM is MASTER");
  } else {
    tick_handing_over(h, now, c);
  }
}

void HaMachine::after_round(const PollRound& r, TimePoint now, Ctx& c) {
  const SmState ls = r.local.info->state;
  if (role() != Role::Master) local_port_down_ = false;
  // A change this step asks for is signalled by sync_priority(); verify the one before.
  if (desired_priority() == rendered_) verify_priority(r, now, c);

  // Our port is down and OpenSM still answers MASTER. OpenSM notices its own
  // port only when it sweeps; the standby priority rendered at the first such
  // round came with a SIGHUP, which starts a sweep at once unless one is
  // already running (then it waits for transaction timeouts). A master that
  // has not noticed by the next round is restarted as standby: otherwise, when
  // the link comes back after a peer took over, there would be two masters.
  if (role() == Role::Master && r.local_port == PortState::Down && ls == SmState::Master && !peers().empty()) {
    if (++port_down_master_rounds_ >= 2) {
      c.event(EventKind::FenceLocal, "local port down and OpenSM still MASTER",
              "port down for " + std::to_string(port_down_master_rounds_) +
                  " rounds; OpenSM did not leave MASTER after the standby priority and SIGHUP; "
                  "restart as standby so it cannot return as a second master");
      port_down_master_rounds_ = 0;
      restart_as_standby(now, c);
      return;
    }
  } else {
    port_down_master_rounds_ = 0;
  }

  // No-master bookkeeping (for the takeover decision).
  const bool peers_queried = std::any_of(r.peers.begin(), r.peers.end(), [](const PeerProbe& p) {
    return p.via_lid.queried || p.via_dr.queried;
  });
  // Counted only while our own SM answers STANDBY: rounds in which it was
  // still starting or sweeping say nothing about a master (OpenSM goes STANDBY
  // only after its sweep found one, which a peer we cannot address may be).
  if (master_seen_ || ls != SmState::Standby) {
    no_master_rounds_ = 0;
  } else if (peers_queried || r.peers.empty()) {
    if (no_master_rounds_ == 0) no_master_since_ = now;
    ++no_master_rounds_;
  }

  c.d.poll_soon = !master_seen_ && role() != Role::Master;
  if (role() == Role::Standby) consider_takeover(r, now, c);
  if (auto* m = std::get_if<MasterRole>(&state_)) consider_split_brain(*m, r, now, c);
  if (auto* s = std::get_if<StandbyRole>(&state_)) consider_preempt(*s, r, now, c);
  if (role() != Role::Master && role() != Role::HandingOver) {
    set_alarm(AlarmKind::TwoMasters, false, "", c);
    set_alarm(AlarmKind::IgnoreOtherSm, false, "", c);
  }
}

// The first poll round after smhad started. An OpenSM that answers on our
// port (left running by the previous smhad: kill -9, restart, upgrade) is
// adopted as it is: a MASTER keeps the master priority from the first write,
// so a restart of smhad never dips it below a standby and never moves
// mastership; no state change is recorded, since OpenSM did not change.
// Nothing answers: OpenSM is started as at any start. One that smhad took over
// at start (OpensmControl::adopt_running(): it runs, but its first answer is
// late on a busy machine) is waited for at Init, rendering nothing, so a
// MASTER is never given a standby value first; the hang rule in
// consider_fence() fences it if it stays silent past the start grace.
void HaMachine::adopt(const PollRound& r, TimePoint now, Ctx& c) {
  if (!r.local.info) {
    if (process_ == ProcessState::Running) return;
    if (process_ == ProcessState::Failed) {
      enter(RecoveringRole{now, now}, "smhad start: OpenSM supervision failed", c);
      return;
    }
    start(now, c, "smhad start: OpenSM not running");
    return;
  }
  const SmInfo& l = *r.local.info;
  const std::string why = "smhad start: adopted the running OpenSM, " + std::string(to_string(l.state));
  if (l.state == SmState::Master) enter(MasterRole{}, why, c);
  else if (l.state == SmState::Standby) enter(StandbyRole{}, why, c);
  else enter(StartingRole{}, why, c);
  local_ = l;
  local_state_ = l.state;
  local_answer_at_ = now;
  local_alive_at_ = r.sent_at.value_or(now);
  answered_since_start_ = true;
  started_at_ = now;
  const std::uint8_t want = desired_priority();
  std::string how;
  if (process_ != ProcessState::Running && process_ != ProcessState::Failed) {
    // Not ours yet: the start finds it running and takes it over, rendering
    // the priority its state calls for.
    c.act(StartOpensm{want});
    rendered_ = want;
    prio_signalled_at_ = prio_wanted_since_ = now;
    process_ = ProcessState::Running;
    how = "rendered " + std::to_string(want);
  } else {
    // Already ours (taken over at start: OpensmControl::adopt_running()):
    // sync_priority() renders the priority its state calls for if it does not
    // run with it.
    rendered_ = l.priority;
    prio_signalled_at_ = prio_wanted_since_ = now;
    how = want == l.priority ? "priority kept" : "priority " + std::to_string(want) + " rendered";
  }
  master_seen_.reset();
  if (l.state == SmState::Master) master_seen_ = policy_.own_guid;
  else if (const auto* m = live_master_peer()) master_seen_ = m->last->guid;
  c.event(EventKind::Adopted, "OpenSM already runs on our port as " + std::string(to_string(l.state)),
          "priority " + std::to_string(l.priority) + "; " + how + "; role " + std::string(to_string(role())));
}

void HaMachine::consider_takeover(const PollRound& r, TimePoint now, Ctx& c) {
  if (master_seen_ || r.local.info->state != SmState::Standby) return;
  if (r.local_port != PortState::Up) return;  // we cannot tell a dead master from our own isolation
  // A peer that answers DISCOVERING is sweeping and decides for itself.
  for (const auto& t : peers())
    if (t.answered && t.last->state == SmState::Discovering &&
        now - no_master_since_ < policy_.takeover_bound)
      return;

  // The master we lost: the last peer seen MASTER. Its port state is a second
  // signal: down confirms the loss. How it fails to answer is a third: refused
  // (no SM bound: dead, or already fenced) needs no more than the rounds;
  // silence (hung, or unreachable) waits until the smhad beside it has had
  // time to fence it (hang_timeout after its last answer, plus one poll
  // interval of phase between the two smhad, one query window and one poll
  // interval of margin), so OpenSM's discovery sweep never waits on a frozen SM
  // and a hung master woken later is already dead.
  int need = required_rounds();
  std::string evidence;
  std::optional<TimePoint> wait_until;
  for (const auto& t : peers()) {
    if (!t.last || t.last->state != SmState::Master) continue;
    if (t.answered) continue;  // answered as non-MASTER: it left the role itself
    if (t.port == PortState::Down) need = policy_.misses;
    else if (!t.refused)
      wait_until = std::max(wait_until.value_or(TimePoint{}),
                            t.last_answer_at + policy_.hang_timeout + 2 * policy_.poll_interval +
                                policy_.query_window);
    evidence += peer_name(t.spec.guid) + " (last MASTER) unanswered on LID and DR for " +
                std::to_string(t.misses) + " rounds (" + (t.refused ? "refused" : "silent") +
                ", last answer " + ms(now - t.last_answer_at) + " ago), port " +
                std::string(to_string(t.port)) + "; ";
  }
  if (wait_until && now < *wait_until) return;  // rounds keep coming (poll_soon)
  // Rank among live standbys (OpenSM's order): the best acts first, the next one
  // only if the best has not produced a master within the takeover bound.
  int above = 0;
  for (const auto& t : peers())
    if (t.answered && t.last->state == SmState::Standby &&
        outranks(t.last->priority, t.last->guid, r.local.info->priority, policy_.own_guid))
      ++above;
  const auto bound_rounds = static_cast<int>(policy_.takeover_bound / policy_.poll_interval);
  if (no_master_rounds_ < need + above * (bound_rounds + need)) return;

  evidence += "no MASTER answered for " + std::to_string(no_master_rounds_) + " rounds (need " +
              std::to_string(need) + ", round-miss estimate " +
              std::to_string(round_miss_estimate()) +
              "); local SM STANDBY answers; local port up; " + std::to_string(above) +
              " higher-ranked live standbys";
  c.act(SendDiscover{});
  std::vector<Guid> lost;
  if (auto g = lost_master()) lost.push_back(*g);
  c.event(EventKind::TakeoverStarted, "master lost", evidence, lost);
  enter(TakingOverRole{now, now + policy_.takeover_bound, 0, false, unanswered_master()}, "master lost", c);
}

// Our STANDBY SM left STANDBY (for DISCOVERING, or already MASTER) by itself
// while the master is lost: the lost master's smhad sent it DISCOVER
// (DiscoverPeer), or OpenSM's own polling of the master gave up. That is a
// takeover; it is followed (and recorded) as one started by our own DISCOVER.
// Our STANDBY SM left STANDBY (for DISCOVERING, or already MASTER) by itself
// while the master is lost: the lost master's smhad sent it DISCOVER
// (DiscoverPeer), or OpenSM's own polling of the master gave up. That is a
// takeover; it is followed (and recorded) as one started by our own DISCOVER.
void HaMachine::swept_takeover(TimePoint now, Ctx& c) {
  const std::optional<Guid> from = unanswered_master();
  std::vector<Guid> lost;
  std::string evidence = "local SM went STANDBY->" + std::string(to_string(local_state_)) +
                         " without our DISCOVER";
  if (auto g = lost_master()) {
    lost.push_back(*g);
    evidence += "; " + peer_name(*g) + " (last MASTER) " + (from == g ? "unanswered" : "no longer MASTER");
  }
  c.event(EventKind::TakeoverStarted, "master lost: local SM left STANDBY", evidence, lost);
  enter(TakingOverRole{now, now + policy_.takeover_bound, 0, true, from}, "master lost: local SM left STANDBY", c);
}

std::optional<Guid> HaMachine::unanswered_master() const {
  std::optional<Guid> g;
  for (const auto& t : peers())
    if (t.last && t.last->state == SmState::Master && !t.answered) g = t.spec.guid;
  return g;
}

std::optional<Guid> HaMachine::lost_master() const {
  const PeerTrack* lost = nullptr;
  for (const auto& t : peers()) {
    if (!t.master_at || (t.answered && t.last && t.last->state == SmState::Master)) continue;
    if (!lost || *t.master_at > *lost->master_at) lost = &t;
  }
  if (!lost) return std::nullopt;
  return lost->spec.guid;
}

void HaMachine::takeover_done(const TakingOverRole& t, TimePoint now, Ctx& c) {
  const std::string how = ms(now - t.started) + (t.swept ? " after it left STANDBY" : " after DISCOVER");
  MasterRole m;
  m.took_over_from = t.took_over_from;
  enter(m, "takeover done: local SM answers MASTER", c);  // t is gone from here on
  set_alarm(AlarmKind::NoMaster, false, "", c);
  c.event(EventKind::TakeoverDone, "local SM is MASTER", how);
}

void HaMachine::consider_split_brain(MasterRole& m, const PollRound& r, TimePoint now, Ctx& c) {
  const PeerTrack* other = nullptr;
  for (const auto& t : peers())
    if (t.answered && t.last->state == SmState::Master) other = &t;
  if (!other) {
    m.dual_since.reset();
    set_alarm(AlarmKind::TwoMasters, false, "", c);
    set_alarm(AlarmKind::IgnoreOtherSm, false, "", c);
    return;
  }
  // A different master, or the same one at a new priority or with a lower
  // ActCount (its OpenSM restarted: it yielded and came back), is a new overlap.
  const SmInfo& o = *other->last;
  if (!m.dual_since || o.guid != m.dual_with || o.priority != m.dual_prio || o.act_count < m.dual_act) {
    m.dual_since = now;
    m.dual_with = o.guid;
    m.dual_prio = o.priority;
  }
  m.dual_act = o.act_count;
  const auto& me = *r.local.info;
  // Rank as OpenSM (observed priority, then lower GUID), except that two masters
  // at the same rendered priority (both render the master value) are ranked by
  // their configured priority first, so the preferred head keeps mastership.
  const auto mine = policy_.base_priority;
  const auto theirs = other->spec.priority.value_or(policy_.base_priority);
  const bool lower = o.priority != me.priority || mine == theirs
                         ? outranks(o.priority, o.guid, me.priority, me.guid)
                         : theirs > mine;
  const std::string detail = peer_name(other->spec.guid) + " prio " + std::to_string(o.priority) +
                             " and " + policy_.node_name + " prio " + std::to_string(me.priority) +
                             " both MASTER";
  set_alarm(AlarmKind::TwoMasters, true, detail, c);
  // Who yields (never a Set to a master: yielding is a restart of our own
  // OpenSM as standby):
  //  - a master whose port was down while a peer took over is the stale one:
  //    at once, whatever the ranks say (its priority change may not have
  //    reached OpenSM while the port was down);
  //  - otherwise the lower-ranked one at once, except when the other is the
  //    master we took over from: its smhad knows it is stale and yields, so
  //    we wait `stale_wait` for that first;
  //  - the higher-ranked one only if the other has stayed MASTER (same
  //    process: same priority, ActCount not reset) for a poll interval (its
  //    smhad may be down).
  const bool stale = local_port_down_;
  const Duration stale_wait = 2 * policy_.poll_interval + policy_.query_window;
  Duration wait = policy_.poll_interval;
  if (stale) wait = Duration{0};
  else if (lower) wait = m.took_over_from == o.guid ? stale_wait : Duration{0};
  const Duration overlap = now - *m.dual_since;
  if (overlap >= std::max(wait, 5 * policy_.poll_interval))
    set_alarm(AlarmKind::IgnoreOtherSm, true,
              detail + " for " + ms(overlap) + ": check sm_key and ignore_other_sm on both heads", c);
  if (overlap < wait) return;
  c.event(EventKind::SplitBrainYield,
          stale   ? "our port was down while the other took over"
          : lower ? "lower-ranked of two masters"
                  : "other master did not yield",
          detail, {other->spec.guid});
  restart_as_standby(now, c);  // m is gone from here on
}

void HaMachine::restart_as_standby(TimePoint now, Ctx& c) {
  c.act(RestartOpensm{prio_.standby, false});
  rendered_ = prio_.standby;
  prio_signalled_at_ = prio_wanted_since_ = now;
  prio_resends_ = 0;
  enter(StartingRole{}, "restarted as standby", c);
  started_at_ = now;
  answered_since_start_ = false;
  local_.reset();
  local_misses_ = 0;
  local_port_down_ = false;
}

void HaMachine::consider_preempt(StandbyRole& s, const PollRound& r, TimePoint now, Ctx& c) {
  const Guid preferred = preferred_head(policy_);
  const PeerTrack* m = live_master_peer();
  const bool healthy = policy_.failback == FailbackMode::Preempt && preferred == policy_.own_guid &&
                       r.local.info->state == SmState::Standby && m != nullptr && alarms_.empty();
  if (!healthy) {
    s.healthy_since.reset();
    return;
  }
  if (!s.healthy_since) s.healthy_since = now;
  if (now - *s.healthy_since < policy_.preempt_hold_down) return;
  enter(HandingOverRole{false, policy_.own_guid, now + policy_.handover_bound},
        "preempt: preferred head takes mastership back", c);
  RecordEvent started{EventKind::HandoverStarted, "preempt: preferred head takes mastership back",
                      "healthy for " + ms(policy_.preempt_hold_down) + "; master " + peer_name(m->spec.guid),
                      {m->spec.guid}};
  started.preempt = true;
  c.act(std::move(started));
}

void HaMachine::on_handover(const HandoverRequest& h, TimePoint now, Ctx& c) {
  auto reject = [&](std::string why, std::vector<Guid> nodes = {}) {
    c.event(EventKind::HandoverRejected, std::move(why), {}, std::move(nodes));
  };
  HandingOverRole next{false, policy_.own_guid, now + policy_.handover_bound};
  if (role() == Role::Master && local_ && local_state_ == SmState::Master) {
    // Push: drop below every standby; OpenSM's heavy sweep hands over to the
    // highest-ranked standby, so the target must be that one.
    const PeerTrack* best = nullptr;
    for (const auto& t : peers())
      if (t.answered && t.last->state == SmState::Standby &&
          (!best || outranks(t.last->priority, t.last->guid, best->last->priority, best->last->guid)))
        best = &t;
    if (!best) return reject("no live standby to hand over to");
    if (h.target && *h.target != best->spec.guid)
      return reject(peer_name(*h.target) + " is not the highest-ranked live standby (" +
                        peer_name(best->spec.guid) + " is); run the handover on the target head",
                    {*h.target, best->spec.guid});
    next.push = true;
    next.target = best->spec.guid;
  } else if (role() == Role::Standby && local_ && local_state_ == SmState::Standby) {
    if (h.target && *h.target != policy_.own_guid)
      return reject("this head is STANDBY: it can only pull mastership to itself");
    if (live_master_peer() == nullptr) return reject("no live master to take over from");
  } else {
    return reject(std::string("not in a steady role (") + std::string(to_string(role())) + ")");
  }
  const Guid target = next.target;
  const bool push = next.push;
  enter(next, push ? "handover requested: push" : "handover requested: pull", c);
  c.event(EventKind::HandoverStarted, push ? "by request: push" : "by request: pull", "target " + peer_name(target),
          {target});
}

}  // namespace smha::sm
