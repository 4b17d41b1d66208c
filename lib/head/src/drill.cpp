// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/head/drill.hpp"

#include <utility>

#include <spdlog/spdlog.h>

namespace smha::head {

using control::Reply;
using control::ResultCode;
using nlohmann::json;

std::optional<DrillRefusal> check_drill(const HeadStatus& s, const std::optional<std::string>& to, bool busy) {
  auto refuse = [](ResultCode code, std::string reason, std::string text) {
    return DrillRefusal{code, std::move(reason), "drill refused: " + std::move(text)};
  };
  if (s.observe)
    return refuse(ResultCode::Conflict, "observe", "smhad runs in observe mode (it never moves mastership)");
  if (s.held) return refuse(ResultCode::Conflict, "hold", "a maintenance hold is active (smctl release ends it)");
  if (busy) return refuse(ResultCode::Conflict, "busy", "a handover or another drill is in progress");
  if (!s.alarms.empty()) {
    std::string kinds;
    for (const auto& a : s.alarms) kinds += (kinds.empty() ? "" : ", ") + std::string(to_string(a.kind));
    return refuse(ResultCode::Conflict, "alarms", "alarms are active: " + kinds);
  }
  if (s.role != sm::Role::Master || s.local.state() != SmState::Master) {
    const auto local = s.local.state();
    return refuse(ResultCode::Conflict, "not_master",
                  "this head is not the master (role " + std::string(sm::to_string(s.role)) + ", local SM " +
                      (local ? std::string(to_string(*local)) : std::string("not answering")) +
                      "); run the drill on the master head");
  }
  if (to) {
    for (const auto& p : s.peers) {
      if (p.name != *to) continue;
      if (!p.live_standby())
        return refuse(ResultCode::Conflict, "no_standby", *to + " is not a live standby (state " + p.shown() + ")");
      return std::nullopt;
    }
    return refuse(ResultCode::NotFound, "not_found", "no peer named " + *to);
  }
  for (const auto& p : s.peers)
    if (p.live_standby()) return std::nullopt;
  return refuse(ResultCode::Conflict, "no_standby", "no peer answers as a live STANDBY to fail over to");
}

struct DrillRunner::Run {
  enum class Phase { Failover, Settle1, Failback, Settle2, Stable } phase = Phase::Failover;
  std::function<void(control::Reply)> respond;
  std::optional<Guid> target;  // the configured peer asked for, if any
  std::optional<Guid> new_master;
  std::uint64_t seen_seq = 0;  // events up to this one were inspected
  TimePoint started, phase_started;
  json legs = json::array();
  std::vector<std::string> alarms;
  std::string failure;  // a leg that failed
  // The engine's outcome of the leg's handover request when it failed
  // (rolled back or rejected), for the verdict.
  std::string leg_error;
  // Who was MASTER over the whole window, on every head, as far as this head
  // can see (MastershipWindow): the first break of the plan fails the drill.
  std::shared_ptr<MastershipWindow> window;
};

DrillRunner::DrillRunner(Scheduler& sched, DrillHost& host, DrillOptions options)
    : sched_(sched), host_(host), options_(options) {}

double DrillRunner::ms_since(TimePoint t0) const {
  return std::chrono::duration<double, std::milli>(sched_.now() - t0).count();
}

DrillRunner::~DrillRunner() {
  if (timer_) sched_.cancel(*timer_);
}

void DrillRunner::step_in(Duration d) {
  if (timer_) sched_.cancel(*timer_);
  timer_ = sched_.schedule_in(d, [this] {
    timer_.reset();
    step();
  });
}

Status DrillRunner::attach(control::ControlServer& server) {
  return server.register_async_method(control::method::kDrill, control::Access::Mutating,
                                      [this](const control::Call& call, control::Responder r) {
                                        handle(call, std::move(r));
                                      },
                                      control::method_params(control::method::kDrill));
}

void DrillRunner::handle(const control::Call& call, control::Responder respond) {
  auto r = std::make_shared<control::Responder>(std::move(respond));
  start(call.params, call.peer.uid, [r](Reply reply) { (*r)(std::move(reply)); });
}

void DrillRunner::start(const json& params, uid_t uid, std::function<void(Reply)> respond) {
  std::optional<std::string> to;
  if (params.contains(control::param::kTo)) {
    if (!params[control::param::kTo].is_string()) {
      respond(Reply::failure(ResultCode::BadRequest, "drill: to must be a peer name", json{{"refused", "bad_request"}}));
      return;
    }
    to = params[control::param::kTo].get<std::string>();
  }
  const HeadStatus status = host_.status();
  if (auto r = check_drill(status, to, running() || host_.handover_running())) {
    spdlog::info("DRILL_REFUSED reason={} {}", r->reason, r->text);
    respond(Reply::failure(r->code, r->text, json{{"refused", r->reason}}));
    return;
  }
  run_ = std::make_shared<Run>();
  run_->respond = std::move(respond);
  if (to)
    for (const auto& p : status.peers)
      if (p.name == *to) run_->target = p.guid;
  // The window first (it records what the local OpenSM logged until now), then
  // the events from here on are the drill's.
  run_->window = host_.open_window();
  const auto& ev = host_.events().events();
  run_->seen_seq = ev.empty() ? 0 : ev.back().seq;
  run_->started = run_->phase_started = sched_.now();
  spdlog::info("DRILL_START to={} uid={}", to.value_or("best standby"), uid);
  if (run_->target) run_->window->set_target(*run_->target);
  request_leg(run_->target);
  // The engine chose the target (the highest-ranked live standby): a master
  // other than that one is a bounce, even if it is a configured head.
  if (const auto t = host_.engine().handover_target) run_->window->set_target(*t);
  step_in(options_.check_interval);
}

void DrillRunner::step() {
  if (!run_) return;
  Run& r = *run_;
  const Guid own = host_.own_guid();
  // Events since the last check: an alarm fails the verdict. A rolled-back or
  // rejected handover (request_leg()'s outcome) ends the leg.
  for (const auto& e : host_.events().events()) {
    if (e.seq <= r.seen_seq) continue;
    r.seen_seq = e.seq;
    if (e.type == EventType::Alarm) r.alarms.push_back(e.reason);
    r.window->event(e);
  }
  const std::string leg_error = std::exchange(r.leg_error, std::string());
  const auto es = host_.engine();
  if (const auto& v = r.window->violation()) return finish(false, *v);
  const double elapsed = ms_since(r.phase_started);
  const auto leg_limit = r.phase == Run::Phase::Failover || r.phase == Run::Phase::Failback ? options_.leg_timeout
                                                                                            : options_.settle_timeout;
  auto next_phase = [&](Run::Phase p) {
    r.phase = p;
    r.phase_started = sched_.now();
  };
  switch (r.phase) {
    case Run::Phase::Failover:
      if (es.master && *es.master != own && (!r.target || *es.master == *r.target)) {
        r.new_master = es.master;
        r.legs.push_back({{"leg", "failover"}, {"to", to_string(*es.master)}, {"duration_ms", elapsed}});
        next_phase(Run::Phase::Settle1);
      }
      break;
    case Run::Phase::Settle1:
      if (es.role == sm::Role::Standby && es.local_state == SmState::Standby && es.master == r.new_master) {
        r.legs.back()["settle_ms"] = elapsed;
        next_phase(Run::Phase::Failback);
        r.window->plan_failback(sched_.now());
        request_leg(std::nullopt);
      }
      break;
    case Run::Phase::Failback:
      if (es.master == own && es.role == sm::Role::Master && es.local_state == SmState::Master) {
        r.legs.push_back({{"leg", "failback"}, {"to", to_string(own)}, {"duration_ms", elapsed}});
        next_phase(Run::Phase::Settle2);
      }
      break;
    case Run::Phase::Settle2: {
      const HeadStatus s = host_.status();
      int masters = s.local.state() == SmState::Master ? 1 : 0;
      bool peer_standby = false;
      for (const auto& p : s.peers) {
        masters += p.state() == SmState::Master;
        if (r.new_master && p.guid == *r.new_master) peer_standby = p.live_standby();
      }
      if (masters == 1 && peer_standby) {
        r.legs.back()["settle_ms"] = elapsed;
        next_phase(Run::Phase::Stable);
      }
      if (r.phase == Run::Phase::Settle2 && std::chrono::milliseconds(static_cast<long long>(elapsed)) >= leg_limit)
        return finish(false, masters != 1 ? std::to_string(masters) + " MASTERs after the failback"
                                          : "the peer did not return to STANDBY after the failback");
      break;
    }
    case Run::Phase::Stable: {
      const HeadStatus s = host_.status();
      int masters = s.local.state() == SmState::Master ? 1 : 0;
      const SmView* peer = nullptr;
      for (const auto& p : s.peers) {
        masters += p.state() == SmState::Master;
        if (r.new_master && p.guid == *r.new_master) peer = &p;
      }
      // A peer whose latest poll went unanswered (one lost round while
      // OpenSM sweeps) has not changed role; any answer but STANDBY has. The
      // same holds for our own SM: in a round where nobody answered MASTER
      // (our OpenSM busy in its first sweeps after the pull) the engine names
      // no master, and our SM's last answer is still MASTER. Another head
      // answering MASTER is a move.
      const bool ours = es.master ? *es.master == own : es.local_state == SmState::Master;
      const bool still = ours && es.role == sm::Role::Master && masters == 1 &&
                         peer && (peer->state() == SmState::Standby || peer->seen == SmSeen::Unreachable);
      if (!still)
        return finish(false, "not stable after the failback: " + std::to_string(masters) + " MASTER(s), role " +
                                 std::string(sm::to_string(es.role)) + ", peer " +
                                 (peer ? peer->shown() : std::string()) + " after " +
                                 std::to_string(static_cast<long long>(elapsed)) + " ms");
      if (std::chrono::milliseconds(static_cast<long long>(elapsed)) >= options_.stable) {
        r.legs.back()["stable_ms"] = elapsed;
        return finish(r.alarms.empty(), r.alarms.empty() ? "" : "alarms raised during the drill");
      }
      break;
    }
  }
  if (!leg_error.empty() && (r.phase == Run::Phase::Failover || r.phase == Run::Phase::Failback))
    return finish(false, std::string(r.phase == Run::Phase::Failover ? "failover" : "failback") + ": " + leg_error);
  if (r.phase != Run::Phase::Settle2 && r.phase != Run::Phase::Stable && std::chrono::milliseconds(static_cast<long long>(elapsed)) >= leg_limit) {
    const char* what = r.phase == Run::Phase::Failover   ? "failover: no other head answered MASTER"
                       : r.phase == Run::Phase::Settle1  ? "failover: this head did not settle as STANDBY"
                                                         : "failback: this head did not become MASTER again";
    return finish(false, std::string(what) + " within " + std::to_string(leg_limit.count()) + " ms");
  }
  // A client that hung up does not stop the drill: the fabric is not left half-way.
  // While holding still, status() (which reads the port) is not needed every 10 ms.
  step_in(r.phase == Run::Phase::Stable ? std::max<Duration>(options_.check_interval, std::chrono::milliseconds(100))
                                        : Duration(options_.check_interval));
}

void DrillRunner::request_leg(std::optional<Guid> target) {
  std::weak_ptr<Run> run = run_;
  host_.request_handover(target, [run](const sm::RecordEvent& outcome) {
    auto r = run.lock();
    if (!r || outcome.kind == sm::EventKind::HandoverDone) return;
    r->leg_error = std::string(sm::to_string(outcome.kind)) + ": " + outcome.reason;
  });
}

void DrillRunner::finish(bool pass, const std::string& why) {
  auto run = std::move(run_);
  host_.close_window();
  const double total = ms_since(run->started);
  json data{{"verdict", pass ? "pass" : "fail"}, {"legs", run->legs},           {"total_ms", total},
            {"alarms", run->alarms},             {"mastership", run->window->summary()}};
  if (!why.empty()) data["reason"] = why;
  std::string text = pass ? "drill passed" : "drill FAILED: " + why;
  for (const auto& l : run->legs)
    text += "\n  " + l["leg"].get<std::string>() + ": " + std::to_string(static_cast<long long>(l["duration_ms"].get<double>())) +
            " ms to " + l["to"].get<std::string>() +
            (l.contains("settle_ms") ? ", settled after " + std::to_string(static_cast<long long>(l["settle_ms"].get<double>())) + " ms" : "");
  text += "\n  total: " + std::to_string(static_cast<long long>(total)) + " ms";
  spdlog::info("DRILL_{} total_ms={:.0f} {}", pass ? "PASS" : "FAIL", total, why);
  run->respond(pass ? Reply::ok(data, text) : Reply::failure(ResultCode::Error, text, data));
}

}  // namespace smha::head
