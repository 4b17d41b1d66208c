// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/service/drill.hpp"

#include <spdlog/spdlog.h>

namespace smha::service {

using control::Reply;
using control::ResultCode;
using nlohmann::json;

namespace {

std::string str(const json& j, const char* key) {
  auto it = j.find(key);
  return (it != j.end() && it->is_string()) ? it->get<std::string>() : std::string();
}

bool live_standby(const json& peer) {
  return str(peer, "state") == "STANDBY" && peer.value("last_poll_answered", false);
}


}  // namespace

std::optional<DrillRefusal> check_drill(const json& s, const std::optional<std::string>& to, bool busy) {
  auto refuse = [](ResultCode code, std::string reason, std::string text) {
    return DrillRefusal{code, std::move(reason), "drill refused: " + std::move(text)};
  };
  if (s.value("observe", false))
    return refuse(ResultCode::Conflict, "observe", "smhad runs in observe mode (it never moves mastership)");
  if (s.value("hold", json::object()).value("held", false))
    return refuse(ResultCode::Conflict, "hold", "a maintenance hold is active (smctl release ends it)");
  if (busy) return refuse(ResultCode::Conflict, "busy", "a handover or another drill is in progress");
  const json alarms = s.value("alarms", json::array());
  if (!alarms.empty()) {
    std::string kinds;
    for (const auto& a : alarms) kinds += (kinds.empty() ? "" : ", ") + str(a, "kind");
    return refuse(ResultCode::Conflict, "alarms", "alarms are active: " + kinds);
  }
  const json local = s.value("local", json::object());
  if (str(s, "role") != "master" || str(local, "state") != "MASTER")
    return refuse(ResultCode::Conflict, "not_master",
                  "this head is not the master (role " + str(s, "role") + ", local SM " +
                      (str(local, "state").empty() ? "not answering" : str(local, "state")) +
                      "); run the drill on the master head");
  const json peers = s.value("peers", json::array());
  if (to) {
    for (const auto& p : peers) {
      if (str(p, "name") != *to) continue;
      if (!live_standby(p))
        return refuse(ResultCode::Conflict, "no_standby",
                      *to + " is not a live standby (state " + str(p, "state") + ")");
      return std::nullopt;
    }
    return refuse(ResultCode::NotFound, "not_found", "no peer named " + *to);
  }
  for (const auto& p : peers)
    if (live_standby(p)) return std::nullopt;
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
  // Mastership over the whole window, as this head sees it: the local SM's
  // state changes (every one a poll round saw is a journal transition) and the
  // master each round saw. Once a leg moved mastership, its coming back before
  // the next leg (or after the failback) is a flip-back and fails the drill.
  bool left_master = false;      // failover: the local SM left MASTER
  bool regained_master = false;  // failback: the local SM is MASTER again
  // The same from OpenSM's own log ("opensm_state" events), which also holds a
  // mastership shorter than a poll round. Kept apart from the rounds' view: the
  // log is read once per poll interval, so its lines may arrive a leg late.
  // Expected over the whole window: MASTER, left once, MASTER once more.
  bool log_left = false;
  bool log_regained = false;
  std::string flip;              // the first flip-back seen
};

DrillRunner::DrillRunner(boost::asio::io_context& io, DrillHost& host, const Clock& clock, DrillOptions options)
    : host_(host), clock_(clock), options_(options), timer_(io) {}

double DrillRunner::ms_since(TimePoint t0) const {
  return std::chrono::duration<double, std::milli>(clock_.now() - t0).count();
}

DrillRunner::~DrillRunner() { timer_.cancel(); }

Status DrillRunner::attach(control::ControlServer& server) {
  return server.register_async_method("drill", control::Access::Mutating,
                                      [this](const control::Call& call, control::Responder r) {
                                        handle(call, std::move(r));
                                      });
}

void DrillRunner::handle(const control::Call& call, control::Responder respond) {
  auto r = std::make_shared<control::Responder>(std::move(respond));
  start(call.params, call.peer.uid, [r](Reply reply) { (*r)(std::move(reply)); });
}

void DrillRunner::start(const json& params, uid_t uid, std::function<void(Reply)> respond) {
  std::optional<std::string> to;
  if (params.contains("to")) {
    if (!params["to"].is_string()) {
      respond(Reply::failure(ResultCode::BadRequest, "drill: to must be a peer name", json{{"refused", "bad_request"}}));
      return;
    }
    to = params["to"].get<std::string>();
  }
  const json status = host_.status();
  if (auto r = check_drill(status, to, running() || host_.handover_running())) {
    spdlog::info("DRILL_REFUSED reason={} {}", r->reason, r->text);
    respond(Reply::failure(r->code, r->text, json{{"refused", r->reason}}));
    return;
  }
  run_ = std::make_shared<Run>();
  run_->respond = std::move(respond);
  if (to)
    for (const auto& p : status["peers"])
      if (str(p, "name") == *to) run_->target = parse_guid(str(p, "guid"));
  const auto& ev = host_.events().events();
  run_->seen_seq = ev.empty() ? 0 : ev.back().seq;
  run_->started = run_->phase_started = clock_.now();
  spdlog::info("DRILL_START to={} uid={}", to.value_or("best standby"), uid);
  host_.request_handover(run_->target);
  timer_.expires_after(options_.check_interval);
  timer_.async_wait([this](const boost::system::error_code& ec) {
    if (!ec) step();
  });
}

void DrillRunner::step() {
  if (!run_) return;
  Run& r = *run_;
  const Guid own = host_.own_guid();
  // Events since the last check: a rolled-back or rejected handover ends the leg,
  // an alarm fails the verdict.
  std::string leg_error;
  for (const auto& e : host_.events().events()) {
    if (e.seq <= r.seen_seq) continue;
    r.seen_seq = e.seq;
    if (e.kind == "alarm") r.alarms.push_back(e.reason);
    if (e.kind == "alarm" && e.reason == "two_masters" && r.flip.empty())
      r.flip = "two MASTERs seen: " + e.evidence;
    if (e.kind == "transition") {
      const auto arrow = e.reason.find("->");
      const std::string from = arrow == std::string::npos ? "" : e.reason.substr(0, arrow);
      const std::string to = arrow == std::string::npos ? "" : e.reason.substr(arrow + 2);
      const bool failover = r.phase == Run::Phase::Failover || r.phase == Run::Phase::Settle1;
      if (failover && from == "MASTER") r.left_master = true;
      else if (failover && to == "MASTER" && r.left_master && r.flip.empty())
        r.flip = "failover: this head became MASTER again before the failback (" + e.reason + ")";
      if (!failover && to == "MASTER") r.regained_master = true;
      else if (!failover && from == "MASTER" && r.regained_master && r.flip.empty())
        r.flip = "failback: this head left MASTER again (" + e.reason + ")";
    }
    if (e.kind == "opensm_state") {
      const bool to_master = e.reason.ends_with("->MASTER");
      const bool failover = r.phase == Run::Phase::Failover || r.phase == Run::Phase::Settle1;
      if (!to_master && !r.log_left) {
        r.log_left = true;
      } else if (to_master && r.log_left && !r.log_regained) {
        if (failover && r.flip.empty())
          r.flip = "failover: this head's OpenSM was MASTER again before the failback (" + e.evidence + ")";
        r.log_regained = true;
      } else if (!to_master && r.log_regained && r.flip.empty()) {
        r.flip = "this head's OpenSM left MASTER again after regaining it (" + e.evidence + ")";
      } else if (to_master && r.log_regained && r.flip.empty()) {
        r.flip = "this head's OpenSM entered MASTER twice (" + e.evidence + ")";
      }
    }
    if (e.kind == "handover_rolled_back" || e.kind == "handover_rejected") leg_error = e.kind + ": " + e.reason;
  }
  const auto es = host_.engine();
  if (r.flip.empty() && r.new_master && es.master) {
    const bool failover = r.phase == Run::Phase::Failover || r.phase == Run::Phase::Settle1;
    if (failover && *es.master == own)
      r.flip = "failover: mastership flipped back to this head before the failback";
    if (!failover && *es.master == own) r.regained_master = true;
    if (!failover && r.regained_master && *es.master == *r.new_master)
      r.flip = "failback: mastership flipped back to " + to_string(*r.new_master);
  }
  if (!r.flip.empty()) return finish(false, r.flip);
  const double elapsed = ms_since(r.phase_started);
  const auto leg_limit = r.phase == Run::Phase::Failover || r.phase == Run::Phase::Failback ? options_.leg_timeout
                                                                                            : options_.settle_timeout;
  auto next_phase = [&](Run::Phase p) {
    r.phase = p;
    r.phase_started = clock_.now();
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
        host_.request_handover(std::nullopt);
      }
      break;
    case Run::Phase::Failback:
      if (es.master == own && es.role == sm::Role::Master && es.local_state == SmState::Master) {
        r.legs.push_back({{"leg", "failback"}, {"to", to_string(own)}, {"duration_ms", elapsed}});
        next_phase(Run::Phase::Settle2);
      }
      break;
    case Run::Phase::Settle2: {
      const json s = host_.status();
      int masters = str(s.value("local", json::object()), "state") == "MASTER" ? 1 : 0;
      bool peer_standby = false;
      for (const auto& p : s.value("peers", json::array())) {
        masters += str(p, "state") == "MASTER";
        if (r.new_master && str(p, "guid") == to_string(*r.new_master)) peer_standby = live_standby(p);
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
      const json s = host_.status();
      int masters = str(s.value("local", json::object()), "state") == "MASTER" ? 1 : 0;
      std::string peer_state;
      for (const auto& p : s.value("peers", json::array())) {
        masters += str(p, "state") == "MASTER";
        if (r.new_master && str(p, "guid") == to_string(*r.new_master)) peer_state = str(p, "state");
      }
      // A peer whose latest poll went unanswered (one lost round while
      // OpenSM sweeps) has not changed role; any answer but STANDBY has.
      const bool still = es.master == own && es.role == sm::Role::Master && masters == 1 &&
                         (peer_state == "STANDBY" || peer_state == "unreachable");
      if (!still)
        return finish(false, "not stable after the failback: " + std::to_string(masters) + " MASTER(s), role " +
                                 std::string(sm::to_string(es.role)) + ", peer " + peer_state + " after " +
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
  timer_.expires_after(r.phase == Run::Phase::Stable ? std::max(options_.check_interval, std::chrono::milliseconds(100))
                                                     : options_.check_interval);
  timer_.async_wait([this](const boost::system::error_code& ec) {
    if (!ec) step();
  });
}

void DrillRunner::finish(bool pass, const std::string& why) {
  auto run = std::move(run_);
  const double total = ms_since(run->started);
  json data{{"verdict", pass ? "pass" : "fail"}, {"legs", run->legs}, {"total_ms", total}, {"alarms", run->alarms}};
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

}  // namespace smha::service
