// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// A head (head.hpp): its start, agent, OpenSM log, hold, handover, reload and status.
#include "smha/head/head.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <chrono>

#include <spdlog/spdlog.h>

#include "smha/core/text.hpp"
#include "smha/opensm/check.hpp"

namespace smha::head {

using control::Reply;
using control::ResultCode;

namespace {

double seconds_since(TimePoint then, TimePoint now) { return std::chrono::duration<double>(now - then).count(); }

// Name and port GUID of every peer the agent polls, for the drift check.
std::vector<std::pair<std::string, Guid>> named_peers(const agent::AgentConfig& cfg) {
  std::vector<std::pair<std::string, Guid>> out;
  for (const auto& p : cfg.peers) {
    std::string name = to_string(p.guid);
    for (const auto& q : cfg.policy.peers)
      if (q.guid == p.guid) name = q.name;
    out.emplace_back(std::move(name), p.guid);
  }
  return out;
}

// The engine's outputs to its host's tap, then to the head's sink. Each
// method is one line: every call goes through each().
class TeeSink final : public agent::EventSink {
 public:
  TeeSink(agent::EventSink& head, agent::EventSink& tap) : sinks_{&tap, &head} {}
  void event(const sm::RecordEvent& e, TimePoint at) override { each(&agent::EventSink::event, e, at); }
  void alarm(const RaiseAlarm& x, TimePoint at) override { each(&agent::EventSink::alarm, x, at); }
  void clear(const ClearAlarm& x, TimePoint at) override { each(&agent::EventSink::clear, x, at); }
  void hook(const sm::RunHook& h, TimePoint at) override { each(&agent::EventSink::hook, h, at); }
  void error(const Error& e, TimePoint at) override { each(&agent::EventSink::error, e, at); }
  void takeover_report(const fabric::TakeoverReport& r, TimePoint at) override {
    each(&agent::EventSink::takeover_report, r, at);
  }
  void role_changed(const sm::RoleChange& c, TimePoint at) override { each(&agent::EventSink::role_changed, c, at); }

 private:
  // `method` (a member of EventSink or of a base) on every sink, in order.
  template <class Method, class... Args>
  void each(Method method, const Args&... args) {
    for (agent::EventSink* s : sinks_) (s->*method)(args...);
  }
  std::array<agent::EventSink*, 2> sinks_;
};

}  // namespace

Head::Head(config::Config config, Plan plan, HeadOptions options, HeadSeams seams)
    : config_(std::move(config)),
      plan_(std::move(plan)),
      options_(std::move(options)),
      seams_(std::move(seams)),
      sink_(kEventHistory, seams_.clock) {
  started_at_ = seams_.clock.now();
  started_wall_ = config_loaded_wall_ = seams_.clock.wall_now();
  mad_ = std::make_unique<RecordingTransport>(seams_.port, seams_.clock, options_.observe);
  mad_->set_taps(
      [this](const SmInfo& info, TimePoint sent, TimePoint received, const mad::Target& via) {
        if (window_) window_->sminfo(info, sent, received, RecordingTransport::via_text(via));
        else rates_.record(info, received);
        if (handover_) handover_->check();
      },
      [this](const mad::PortInfo& pi, TimePoint sent, TimePoint received) {
        if (window_) window_->local_port(pi.lid, pi.sm_lid, sent, received);
        if (handover_) handover_->check();
      });
  events_ = std::make_unique<HeadEventSink>(sink_, seams_.hooks, [this] { return snapshot(); }, seams_.changed);
  if (seams_.tap) tee_ = std::make_unique<TeeSink>(*events_, *seams_.tap);
  // opensm_failed goes where the engine's alarms go: the log, the fault hooks
  // (doc/hooks.md: every alarm raised) and the host's tap.
  osm_watch_ = std::make_unique<OpensmWatch>(
      sink_, tee_ ? static_cast<AlarmSink&>(*tee_) : static_cast<AlarmSink&>(*events_), seams_.clock,
      seams_.hooks, [this] { return snapshot(); }, seams_.changed);
  if (plan_.opensm && seams_.opensm) {
    opensm::SupervisorOptions so = plan_.opensm->supervisor;
    so.on_change = [this](const opensm::SupervisorStatus& st) {
      osm_watch_->on_change(st);
      if (seams_.opensm_changed) seams_.opensm_changed(st);
    };
    supervised_ = std::make_unique<agent::SupervisedOpensmControl>(
        seams_.sched, *seams_.opensm, seams_.fs, [spec = plan_.opensm->spec] { return spec; }, so,
        plan_.opensm->render);
    control_ = supervised_.get();
  } else {
    control_ = &observe_control_;
  }
  if (seams_.wrap_control) {
    wrapped_ = seams_.wrap_control(*control_);
    control_ = wrapped_.get();
  }
  drill_ = std::make_unique<DrillRunner>(seams_.sched, *this);
  const auto bound = std::chrono::duration_cast<std::chrono::milliseconds>(plan_.agent.policy.handover_bound);
  DrillOptions d;
  d.leg_timeout = bound + std::chrono::seconds(2);
  d.stable = bound + std::chrono::seconds(1);
  drill_->set_options(d);
}

Head::~Head() { stop(); }

void Head::start() {
  // state_dir was checked by the host; a failure here shows in the journal's own errors.
  (void)seams_.fs.make_dirs(config_.state_dir);
  journal_ = std::make_unique<EventJournal>(seams_.fs, config_.state_dir + "/events.jsonl");
  auto loaded = journal_->load();
  if (!loaded) {
    spdlog::warn("EVENTS_JOURNAL_UNREADABLE {}; starting with an empty history", loaded.error().message);
  } else {
    if (loaded.value().skipped > 0)
      spdlog::warn("EVENTS_JOURNAL_SKIPPED {} line(s) of {} that did not parse", loaded.value().skipped,
                   journal_->path());
    sink_.restore(loaded.value().events);
  }
  sink_.add_listener([this](const EventRecord& e) {
    auto st = journal_->append(e);
    const std::string err = st.ok() ? std::string() : st.error().message;
    if (err != journal_error_) {
      if (err.empty()) spdlog::info("EVENTS_JOURNAL_OK {} is written again", journal_->path());
      else spdlog::warn("EVENTS_JOURNAL_WRITE_FAILED {}", err);
      journal_error_ = err;
    }
  });
  sink_.add_listener([this](const EventRecord& e) { failovers_.observe(e); });
  sink_.add_listener([this](const EventRecord& e) {
    if (handover_) handover_->event(e);
  });
  if (supervised_) {
    for (const auto& w : plan_.opensm->warnings) spdlog::warn("{}", w);
    // Where OpenSM runs and keeps its cache; if they cannot be made, OpenSM's
    // start says why (the supervisor's error, event and alarm).
    for (const std::string& dir : plan_.opensm->dirs)
      if (auto st = seams_.fs.make_dirs(dir); !st.ok()) spdlog::warn("{}", st.error().message);
  }
  start_agent(plan_.agent);
  follow_opensm_log();
}

void Head::stop() {
  if (stopped_) return;
  stopped_ = true;
  if (agent_) agent_->stop();
  if (watchers_) watchers_->stop();
  for (auto* t : {&hold_timer_, &osm_log_timer_}) {
    if (*t) seams_.sched.cancel(**t);
    t->reset();
  }
}

const opensm::SupervisorStatus* Head::opensm() const {
  return supervised_ ? &supervised_->supervisor_status() : nullptr;
}

void Head::start_agent(agent::AgentConfig cfg) {
  if (agent_) {
    agent_->stop();
    agent_.reset();
  }
  if (watchers_) {
    watchers_->stop();
    watchers_.reset();
  }
  // Our port's state comes from its own SMA every round (sysfs is static under umad2sim).
  cfg.local_port_num = seams_.local_port;
  agent::EventSink& sink = tee_ ? *tee_ : static_cast<agent::EventSink&>(*events_);
  fabric::WatchersConfig wcfg = plan_.watchers;
  wcfg.walks = cfg.census.enabled;
  wcfg.sa_copy = [this]() -> std::optional<fabric::SaCopyInfo> {
    return sa_copy_source_ ? sa_copy_source_() : std::nullopt;
  };
  const Guid own = cfg.policy.own_guid;
  auto peers = named_peers(cfg);
  agent_ = std::make_unique<agent::Agent>(std::move(cfg), seams_.sched, *mad_, *control_, sink);
  watchers_ = std::make_unique<fabric::Watchers>(
      std::move(wcfg),
      fabric::WatchersSeams{seams_.sched, *mad_, sink,
                            [s = &sink](const fabric::TakeoverReport& r, TimePoint at) { s->takeover_report(r, at); },
                            [this] { agent_->census_driver().start_walk(); }},
      own, std::move(peers));
  agent_->set_listener(watchers_.get());
  if (hold_.held) agent_->set_hold(true);  // a new engine keeps the hold
  if (supervised_)
    agent_->set_local_stopped([this] { return seams_.process_stopped(supervised_->supervisor_status().pid); });
  start_lid_continuity();
  sink_.set_node_namer(options_.own_guid, [this](Guid g) { return event_node(g); });
  watchers_->start();
  agent_->start();
  update_drift_digests();
}

void Head::update_drift_digests() {
  if (!supervised_ || !agent_ || !plan_.opensm || !options_.drift) return;  // observing: no OpenSM of ours to compare
  // The plan's (a reload's new plan read the policy files again): the digests follow their edits.
  watchers_->drift().set_own(fabric::compute_digests(plan_.opensm->drift));
}

// LID continuity (doc/lid-continuity.md): fed by the census walks, writes
// <cache_dir>/guid2lid while our OpenSM is STANDBY. Off in observe mode (no
// OpenSM of ours) and without the census (nothing feeds it). Kept across
// reloads while its file and LMC stay the same.
void Head::start_lid_continuity() {
  if (!supervised_ || !plan_.opensm || !plan_.opensm->lid_continuity) {
    lid_continuity_.reset();
    return;
  }
  const fabric::LidContinuityConfig& lc = *plan_.opensm->lid_continuity;
  if (!lid_continuity_ || lid_continuity_->status().path != lc.path || lid_lmc_ != lc.lmc) {
    lid_lmc_ = lc.lmc;
    lid_continuity_ = std::make_unique<fabric::LidContinuity>(
        lc, seams_.sched, seams_.fs,
        [this]() -> std::optional<SmState> {
          // The engine's last answer from our SM, while OpenSM runs.
          if (!agent_ || !supervised_ || supervised_->state() != sm::ProcessState::Running) return std::nullopt;
          return agent_->status().local_state;
        },
        [this](const fabric::LidConflict&, const std::string& text) {
          // Once per distinct claim: a node that keeps re-asserting a LID is one event.
          sink_.note("lid_conflict", text, "the file keeps the holder's LID; the claim is not written");
        });
  }
  agent_->set_walk_observer([this](const fabric::DiscoveryResult& r) {
    if (lid_continuity_) lid_continuity_->observe(r.probed, !r.request_bound && !r.hop_bound);
  });
}

// Each poll interval, what the local OpenSM appended to its log file (bounded,
// non-blocking: OpensmLogFollower). Each `Entering <STATE> state` line is
// recorded as an "opensm_state" event "<from>-><to>" with OpenSM's time stamp,
// so a mastership shorter than one poll round is on record too (doc/supervision.md).
void Head::read_opensm_log() {
  if (!osm_log_) return;
  for (const auto& e : osm_log_->poll()) opensm_logged(e);
}

void Head::opensm_logged(const opensm::LoggedEvent& e) {
  if (watchers_) watchers_->opensm_logged(e);
  if (e.kind != opensm::LoggedEvent::Kind::SmState) return;
  const std::string where = osm_log_ ? "OpenSM log " + osm_log_->path() : std::string("OpenSM log");
  sink_.opensm_state(osm_log_state_, e.text,
                     where + (e.stamp.empty() ? "" : " " + e.stamp) + ": Entering " + e.text + " state");
  osm_log_state_ = e.text;
}

void Head::follow_opensm_log() {
  const std::string& path = config_.opensm.log_file;
  if (osm_log_timer_) seams_.sched.cancel(*osm_log_timer_);
  osm_log_timer_.reset();
  if (path.empty()) {
    osm_log_.reset();
    return;  // nothing to follow until a reload names a log file
  }
  if (!osm_log_ || osm_log_->path() != path) {
    osm_log_ = std::make_unique<opensm::OpensmLogFollower>(seams_.fs, path);
    osm_log_->skip_existing();
    osm_log_state_ = "UNKNOWN";
  } else {
    read_opensm_log();
  }
  osm_log_timer_ = seams_.sched.schedule_in(plan_.agent.policy.poll_interval, [this] {
    osm_log_timer_.reset();
    follow_opensm_log();
  });
}

Head::Readiness Head::readiness(Duration grace) {
  if (!agent_ || agent_->rounds() < 1) return Readiness::NotYet;
  // A peer found by discovery is polled only once found: READY waits for a
  // round after every peer's first resolution, so that STATUS= carries each
  // peer's first outcome ("unreachable", STANDBY ...), not "unknown".
  if (!routes_settled_round_) {
    bool any = false;
    for (const auto& r : agent_->routes()) {
      if (r.discover && !r.found && r.state == agent::RouteState::Resolving) return Readiness::NotYet;
      any = any || r.discover;
    }
    // The round running now may have begun before the last resolution.
    routes_settled_round_ = any ? agent_->rounds() + 1 : 0;
  }
  if (agent_->rounds() <= *routes_settled_round_) return Readiness::NotYet;
  if (!supervised_) return Readiness::Ready;
  const auto& st = supervised_->supervisor_status();
  if (st.state == opensm::SupervisorState::Failed) return Readiness::OpensmFailed;
  const auto local = agent_->status().local_state;
  return (local && *local != SmState::NotActive) || st.adopted || seams_.clock.now() - started_at_ >= grace
             ? Readiness::Ready
             : Readiness::NotYet;
}

std::string Head::head_name(Guid guid) const {
  if (guid == options_.own_guid) return config_.node_name;
  for (const auto& peer : config_.peers)
    if (peer.port_guid == guid) return peer.name;
  return "";  // an SM that is not a configured head
}

// An SM as events name it: head name, GUID, and the NodeDescription the
// census (every SM, our own node included) or the peer's discovery found.
EventNode Head::event_node(Guid guid) const {
  EventNode n{head_name(guid), guid, {}};
  if (!agent_) return n;
  const auto& sms = agent_->census().entries();
  if (auto it = sms.find(guid); it != sms.end()) n.description = it->second.description;
  if (n.description.empty() && guid == options_.own_guid) n.description = agent_->own_description();
  if (n.description.empty())
    for (const auto& r : agent_->routes())
      if (r.guid == guid) n.description = r.description;
  return n;
}

HeadEventSink::Snapshot Head::snapshot() const {
  HeadEventSink::Snapshot s;
  s.state = "UNKNOWN";
  if (agent_) {
    const auto es = agent_->status();
    if (es.local_state) s.state = std::string(to_string(*es.local_state));
    s.priority = es.rendered_priority;
    if (es.master && *es.master != options_.own_guid)
      for (const auto& p : config_.peers)
        if (p.port_guid == *es.master) s.peer = p.name;
  }
  if (s.peer.empty() && !config_.peers.empty()) s.peer = config_.peers.front().name;
  return s;
}

// ---- hold ------------------------------------------------------------------

void Head::hold(Duration d, std::string reason, uid_t by_uid) {
  hold_.held = true;
  hold_.by_uid = by_uid;
  hold_.reason = std::move(reason);
  hold_.until = seams_.clock.now() + d;
  if (agent_) agent_->set_hold(true);
  if (hold_timer_) seams_.sched.cancel(*hold_timer_);
  hold_timer_ = seams_.sched.schedule_in(d, [this] {
    hold_timer_.reset();
    expire_hold();
  });
  const double secs = std::chrono::duration<double>(d).count();
  sink_.note("HOLD", "automatic transitions frozen for " + std::to_string(secs) + " s: " + hold_.reason,
             "uid " + std::to_string(by_uid));
}

void Head::expire_hold() {
  if (!hold_.held) return;
  hold_ = HoldState{};
  if (agent_) agent_->set_hold(false);
  sink_.note("HOLD_EXPIRED", "maintenance hold expired; automatic transitions resume");
}

bool Head::release() {
  if (!hold_.held) return false;
  hold_ = HoldState{};
  if (agent_) agent_->set_hold(false);
  if (hold_timer_) seams_.sched.cancel(*hold_timer_);
  hold_timer_.reset();
  sink_.note("RELEASE", "maintenance hold released; automatic transitions resume");
  return true;
}

// ---- handover and drill ----------------------------------------------------

// A window judges what happens from its start: what OpenSM logged before is
// read now, so it is on record before the window's first event (the log is
// otherwise read once per poll interval, and a line written just before the
// start would count as inside the window: a false flip-back).
std::shared_ptr<MastershipWindow> Head::open_window() {
  read_opensm_log();
  std::vector<MastershipWindow::Head> heads;
  for (const auto& p : config_.peers) {
    // The LID polled: a GUID-only peer's is the one discovery found, so that
    // its sweep (our port's MasterSMLID) is known as that head's.
    std::optional<Lid> lid = p.lid;
    if (agent_)
      for (const auto& r : agent_->routes())
        if (r.guid == p.port_guid && r.lid.value != 0) lid = r.lid;
    heads.push_back({p.port_guid, p.name, lid});
  }
  window_ = std::make_shared<MastershipWindow>(options_.own_guid, config_.node_name, std::move(heads),
                                               seams_.clock.now(), rates_);
  return window_;
}

void Head::close_window() {
  if (window_) rates_ = window_->rates();
  window_.reset();
}

void Head::handover(const std::optional<std::string>& to, uid_t by_uid, std::function<void(Reply)> reply) {
  if (options_.observe) {
    reply(Reply::failure(ResultCode::Conflict, "handover: smhad runs in observe mode"));
    return;
  }
  if (hold_.held) {
    reply(Reply::failure(ResultCode::Conflict, "handover: a maintenance hold is active"));
    return;
  }
  if (handover_ || drill_->running()) {
    reply(Reply::failure(ResultCode::Conflict, "handover: one is already running (handover or drill)"));
    return;
  }
  std::optional<Guid> target;
  const bool to_self = to && *to == config_.node_name;
  if (to && !to_self) {
    for (const auto& p : config_.peers)
      if (p.name == *to) target = p.port_guid;
    if (!target) {
      reply(Reply::failure(ResultCode::NotFound, "handover: no peer named " + *to));
      return;
    }
  }
  const auto before = agent_->status();
  // On the MASTER a push to the best standby (or the one named); on a STANDBY
  // a pull of mastership to this head, from whichever head is MASTER.
  const bool pull = before.role == sm::Role::Standby;
  if (before.role != sm::Role::Master && !pull) {
    reply(Reply::failure(ResultCode::Conflict, "handover: this head is neither MASTER nor STANDBY (role " +
                                                   std::string(sm::to_string(before.role)) + ")"));
    return;
  }
  if (!pull && to_self) {
    reply(Reply::failure(ResultCode::Conflict, "handover: this head is MASTER already"));
    return;
  }
  if (pull && target) {
    reply(Reply::failure(ResultCode::Conflict, "handover: this head is STANDBY: it can only pull mastership to "
                                               "itself; run the handover to " + *to + " on the MASTER head"));
    return;
  }
  if (pull && (!before.master || *before.master == options_.own_guid)) {
    reply(Reply::failure(ResultCode::Conflict, "handover: no live master to take over from"));
    return;
  }
  // The same verdict as the drill's (MastershipWindow): the plan is this head,
  // then the engine's target (a pull: the master, then this head); anything
  // else seen in the window fails the reply.
  // The window opens first: it records what OpenSM logged before the request.
  // Done only when the engine says so (the target answers MASTER at the master
  // value, so OpenSM's election cannot hand mastership back): HandoverCall.
  auto window = open_window();
  sink_.note("HANDOVER_REQUEST",
             pull ? "pull to this head from " + to_string(*before.master)
                  : target ? "to " + to_string(*target) : "to the best standby",
             "uid " + std::to_string(by_uid));
  if (pull) window->plan_pull(*before.master);
  if (target) window->set_target(*target);
  handover_ = std::make_shared<HandoverCall>(
      seams_.sched, window, [this] { return agent_ ? agent_->status().master : std::nullopt; },
      [this, window, reply = std::move(reply)](Reply r) {
        handover_.reset();  // HandoverCall::end() holds this function while it runs
        if (window_ == window) close_window();
        reply(std::move(r));
      });
  std::weak_ptr<HandoverCall> pending = handover_;
  agent_->request_handover(target, [pending](const sm::RecordEvent& outcome) {
    if (auto c = pending.lock()) c->outcome(outcome);
  });
  if (const auto t = agent_->status().handover_target) window->set_target(*t);
  if (auto c = pending.lock()) c->start(agent_->config().policy.handover_bound + seconds(2));
}

// ---- reload ----------------------------------------------------------------

Result<Head::Reloaded> Head::reload(config::Config next, Plan plan, const std::vector<config::KeyChange>& changes) {
  Reloaded out;
  nlohmann::json& data = out.data;
  std::string& text = out.text;
  if (supervised_) {
    if (!plan.opensm) return make_error(Errc::Invalid, "reload refused, old configuration kept: a plan without OpenSM");
    // The plan's rendering, at the priority OpenSM runs at: nothing is rendered again.
    opensm::ReloadDecision decision;
    const std::string failed_reason = supervised_->supervisor_status().state == opensm::SupervisorState::Failed
                                          ? supervised_->supervisor_status().reason
                                          : std::string();
    // A new opensm.log_file restarts OpenSM: its next run's failures are read from there.
    supervised_->set_log_file(plan.opensm->supervisor.log_file);
    auto r = supervised_->reload(plan.opensm->render, decision);
    if (!r) {
      supervised_->set_log_file(plan_.opensm->supervisor.log_file);
      return make_error(r.error().code, "reload refused, old configuration kept: " + r.error().message);
    }
    data["opensm_action"] = std::string(opensm::to_string(r.value()));
    data["opensm_change"] = std::string(opensm::to_string(decision.kind));
    data["changed_keys"] = decision.changed;
    if (!decision.key.empty()) data["restart_key"] = decision.key;
    text = "opensm.conf: " + std::string(opensm::to_string(r.value()));
    if (r.value() == opensm::ReloadAction::Retried) {
      // A reload of a failed head always tries OpenSM again: say so, and why it had failed.
      data["retried_after"] = printable(failed_reason);
      text = "OpenSM had failed (" + printable(failed_reason) + "): started again now; opensm.conf " +
             (decision.changed.empty() ? "unchanged" : "changed");
    }
    if (!decision.changed.empty()) {
      text += " (changed:";
      for (const auto& k : decision.changed) text += " " + k;
      text += ")";
    }
    data["warnings"] = plan.opensm->warnings;
    for (const auto& w : plan.opensm->warnings) {
      spdlog::warn("{}", w);
      text += "; warning: " + w;
    }
  }
  // What the table says of each changed key (config::key_table): the HA
  // policy, the peers and health are the engine's (a new engine takes them);
  // the rest is applied below or by the OpenSM side above.
  std::vector<std::string> keys, engine_keys;
  bool policy_changed = false;
  bool health_changed = false;
  for (const auto& c : changes) {
    keys.push_back(c.key);
    if (!c.info->engine) continue;
    engine_keys.push_back(c.key);
    (c.key.rfind("health", 0) == 0 ? health_changed : policy_changed) = true;
  }
  const bool restart = !engine_keys.empty();
  data["engine_restarted"] = restart;
  data["config_keys"] = keys;
  config_ = std::move(next);
  plan_ = std::move(plan);
  if (restart) {
    start_agent(plan_.agent);
    const char* what = !health_changed ? "HA policy changed"
                       : policy_changed ? "HA policy and health changed"
                                        : "health changed";
    std::string named;
    for (const auto& k : engine_keys) named += (named.empty() ? "" : ", ") + k;
    text += (text.empty() ? "" : "; ") + std::string(what) + " (" + named +
            "): engine restarted with the new settings";
  } else {
    watchers_->drift().set_unknown_alarm(plan_.watchers.drift.unknown_alarm);
    start_lid_continuity();  // opensm.lid_continuity or the LMC may have changed
    text += (text.empty() ? "" : "; ") + std::string("HA policy unchanged");
  }
  if (!keys.empty()) {
    text += "; configuration keys changed:";
    for (const auto& k : keys) text += " " + k;
  } else {
    text += "; no configuration key changed";
  }
  config_loaded_wall_ = seams_.clock.wall_now();
  if (!restart) update_drift_digests();  // a new engine got them in start_agent()
  if (!osm_log_timer_) follow_opensm_log();  // a log file named only now
  sink_.note("RELOAD", text);
  return out;
}

// ---- status ----------------------------------------------------------------

HeadStatus Head::status(bool fabric) const {
  const TimePoint now = seams_.clock.now();
  const auto es = agent_->status();
  HeadStatus h;
  h.node = config_.node_name;
  h.fabric = config_.fabric;
  h.observe = options_.observe;
  h.role = es.role;
  h.version = options_.version;
  h.started = started_wall_;
  h.config_loaded = config_loaded_wall_;
  // Our own SM: the state the engine last saw, the rest from its last answer.
  h.local.name = config_.node_name;
  h.local.guid = options_.own_guid;
  h.local.answer = last_answer(*mad_, options_.own_guid, now);
  h.local_answered = h.local.answer.has_value();
  if (es.local_state) {
    if (!h.local.answer) h.local.answer = SmView::Answer{};
    h.local.answer->state = *es.local_state;
    h.local.seen = SmSeen::Answered;
  }
  const std::vector<agent::PeerRoute>& routes = agent_->routes();
  for (std::size_t pi = 0; pi < config_.peers.size(); ++pi) {
    const auto& peer = config_.peers[pi];
    const agent::PeerRoute* route = pi < routes.size() && routes[pi].guid == peer.port_guid ? &routes[pi] : nullptr;
    h.peers.push_back(peer_view(peer, route, *mad_, now));
  }
  for (const auto& [kind, detail] : sink_.alarms()) h.alarms.push_back({kind, detail});
  std::sort(h.alarms.begin(), h.alarms.end(),
            [](const auto& a, const auto& b) { return to_string(a.kind) < to_string(b.kind); });
  h.held = hold_.held;
  if (hold_.held) {
    h.hold_reason = hold_.reason;
    if (hold_.until) h.hold_expires_in_s = seconds_since(now, *hold_.until);
  }
  if (!fabric) return h;
  for (const auto& [g, e] : agent_->census().entries()) {
    std::string st = agent_->census().state_text(e, now);
    for (auto& ch : st) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    ++h.fabric_sms[st];
  }
  if (supervised_) h.opensm_restarts = supervised_->supervisor_status().restarts;
  if (lid_continuity_) {
    const auto& st = lid_continuity_->status();
    h.lid_continuity = HeadStatus::LidContinuity{st.entries, st.writes, st.write_errors,
                                                 {{"bad_lid", st.rejected.bad_lid},
                                                  {"duplicate_lid", st.rejected.duplicate_lid},
                                                  {"conflict", st.rejected.conflict}}};
  }
  const auto& d = watchers_->drift();
  if (d.own())
    for (std::size_t i = 0; i < fabric::kDriftComponents; ++i)
      h.drift.own.emplace_back(std::string(fabric::to_string(static_cast<fabric::DriftComponent>(i))),
                               fabric::to_hex(d.own()->digest[i]));
  std::sort(h.drift.own.begin(), h.drift.own.end());  // by component name, as the status reply lists them
  for (const auto& p : d.peers()) h.drift.peers.emplace_back(p.name, std::string(fabric::to_string(p.state)));
  h.drift.rejected = {{"foreign", d.stats().rejected_foreign}, {"bad_digest", d.stats().rejected_data}};
  if (const auto& hs = watchers_->health().snapshot(); watchers_->health().config().enabled && hs.assessed) {
    HeadStatus::Health out;
    out.links = hs.links;
    out.degraded = hs.degraded_total;
    out.unknown = hs.unknown;
    for (auto k : fabric::kLinkKinds) {
      const std::string name(fabric::to_string(k));
      const auto links = hs.by_kind.find(k);
      const auto degraded = hs.degraded_by_kind.find(k);
      out.links_by_kind[name] = links == hs.by_kind.end() ? 0 : links->second;
      out.degraded_by_kind[name] = degraded == hs.degraded_by_kind.end() ? 0 : degraded->second;
    }
    for (const auto& e : hs.degraded) {
      if (out.worst.size() == kMetricsWorstLinks) break;
      out.worst.push_back({fabric::label_text(e.link.a), fabric::label_text(e.link.b), to_string(e.link.active), to_string(e.link.should),
                           std::string(fabric::to_string(e.link.why)), e.link.fraction});
    }
    h.health = std::move(out);
  }
  if (watchers_->errors().config().enabled) h.errors = error_metrics(watchers_->errors());
  return h;
}

AlarmSink& Head::alarm_sink() {
  if (tee_) return *tee_;
  return *events_;
}

}  // namespace smha::head
