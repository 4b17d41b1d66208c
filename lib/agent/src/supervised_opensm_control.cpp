// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/agent/supervised_opensm_control.hpp"

#include <charconv>
#include <csignal>

#include <spdlog/spdlog.h>

#include "smha/core/logger.hpp"

namespace smha::agent {

namespace {

// The engine's logger, as smhad's event sink uses it.
std::shared_ptr<spdlog::logger> log() { return named_logger("sm"); }

}  // namespace

SupervisedOpensmControl::SupervisedOpensmControl(Scheduler& sched, os::ProcessRunner& runner,
                                                 os::FileSystem& fs,
                                                 opensm::OpensmSupervisor::SpecFactory spec,
                                                 opensm::SupervisorOptions options,
                                                 PriorityRenderer render)
    : runner_(runner), fs_(fs), conf_path_(options.conf_path), render_(std::move(render)) {
  std::weak_ptr<int> alive = alive_;
  auto user_change = options.on_change;
  options.on_change = [this, alive, user_change](const opensm::SupervisorStatus& st) {
    if (alive.expired()) return;
    changed(st);
    if (user_change) user_change(st);
  };
  sup_ = std::make_unique<opensm::OpensmSupervisor>(sched, runner, fs, std::move(spec),
                                                    std::move(options));
}

SupervisedOpensmControl::~SupervisedOpensmControl() { alive_.reset(); }

void SupervisedOpensmControl::changed(const opensm::SupervisorStatus& st) {
  using S = opensm::SupervisorState;
  const S before = last_state_;
  last_state_ = st.state;
  const bool was_up = before == S::Running || before == S::Stopping;
  const bool now_down = st.state == S::Backoff || st.state == S::Failed;
  if (was_up && now_down) respawn_requested_ = false;  // a new exit: Exited until asked again
  // An exit nobody asked for, or a stop() done (after a fence the engine
  // waits for it to DISCOVER the standby).
  const bool unasked = now_down && !stop_requested_;
  const bool stopped = st.state == S::Stopped && stop_requested_;
  if (was_up && (unasked || stopped) && on_exit_) on_exit_();
}

sm::ProcessState SupervisedOpensmControl::state() const {
  using S = opensm::SupervisorState;
  switch (sup_->status().state) {
    case S::Running:
    case S::Stopping:
      return stop_requested_ ? sm::ProcessState::Stopped : sm::ProcessState::Running;
    case S::Backoff:
      // The engine asked for a start: the supervisor respawns after its backoff.
      return respawn_requested_ ? sm::ProcessState::Running : sm::ProcessState::Exited;
    case S::Failed:
      return sm::ProcessState::Failed;
    case S::Stopped:
      return sm::ProcessState::Stopped;
  }
  return sm::ProcessState::Stopped;
}

Status SupervisedOpensmControl::start(std::uint8_t priority) {
  using S = opensm::SupervisorState;
  auto text = render_(priority);
  if (!text) return text.error();
  const auto& st = sup_->status();
  if (st.state == S::Failed) {
    return make_error(Errc::Failed, "OpenSM supervision failed (" + st.reason +
                                    "); fix the configuration and reload");
  }
  if (st.state == S::Running || st.state == S::Backoff || st.state == S::Stopping) {
    // Already running or about to respawn: make sure the next start reads this priority.
    priority_ = priority;
    stop_requested_ = false;
    if (st.state != S::Backoff) return write_and_apply(priority, opensm::ConfChangeKind::Sighup);
    respawn_requested_ = true;
    auto w = write_and_apply(priority, opensm::ConfChangeKind::Sighup);
    if (w.ok()) sup_->request_respawn();  // after the file: the respawn reads this priority
    return w;
  }
  stop_requested_ = false;
  auto r = sup_->start(text.value());
  if (!r) return r.error();
  priority_ = priority;
  if (r.value().adopted && r.value().conf_differs) return apply_to_adopted(text.value());
  return Status::Ok();
}

bool SupervisedOpensmControl::adopt_running() {
  if (!sup_->adopt_running()) return false;
  stop_requested_ = false;
  // It runs the file the previous smhad wrote. Our file, at the priority that
  // one holds (the engine decides the priority from OpenSM's first answer),
  // is applied now as a reload would; a file without a readable sm_priority
  // is left for the engine's first write.
  auto old = fs_.read(conf_path_);
  if (!old) return true;
  const auto conf = opensm::parse_opensm_conf(old.value());
  const auto it = conf.find("sm_priority");
  if (it == conf.end()) return true;
  unsigned v = 0;
  const auto& t = it->second;
  const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (ec != std::errc() || end != t.data() + t.size() || v > 15) return true;
  priority_ = static_cast<std::uint8_t>(v);
  auto text = render_(priority_);
  if (!text) {
    log()->warn("adopted OpenSM: cannot render opensm.conf: {}", text.error().message);
    return true;
  }
  if (auto st = apply_to_adopted(text.value()); !st.ok())
    log()->warn("adopted OpenSM: cannot apply the new opensm.conf: {}", st.error().message);
  return true;
}

Status SupervisedOpensmControl::apply_to_adopted(const std::string& text) {
  auto old = fs_.read(conf_path_);
  auto d = opensm::classify_change(old ? old.value() : std::string(), text);
  opensm::ConfChange change;
  change.kind = d.kind == opensm::ReloadDecision::Kind::Restart ? opensm::ConfChangeKind::Restart
                : d.kind == opensm::ReloadDecision::Kind::Sighup ? opensm::ConfChangeKind::Sighup
                                                                 : opensm::ConfChangeKind::None;
  change.restart_key = d.key;
  auto rr = sup_->reload(text, change);
  if (!rr) return rr.error();
  return Status::Ok();
}

Status SupervisedOpensmControl::write_and_apply(std::uint8_t priority, opensm::ConfChangeKind kind) {
  auto text = render_(priority);
  if (!text) return text.error();
  opensm::ConfChange change;
  change.kind = kind;
  change.restart_key = "sm_priority";
  auto r = sup_->reload(text.value(), change);
  if (!r) return r.error();
  priority_ = priority;
  return Status::Ok();
}

// The supervisor stops with SIGTERM and escalates only after its stop timeout;
// a SIGSTOPped OpenSM does not act on SIGTERM, so a fence adds SIGKILL at once.
// The supervisor then sees the exit it is waiting for.
void SupervisedOpensmControl::kill_now() {
  const int pid = sup_->status().pid;
  if (pid <= 0) return;
  if (auto st = runner_.kill(pid, SIGKILL); !st.ok())
    log()->warn("SIGKILL to hung OpenSM pid {}: {}", pid, st.error().message);
}

Status SupervisedOpensmControl::stop(bool force) {
  stop_requested_ = true;
  sup_->stop();
  if (force) kill_now();
  return Status::Ok();
}

Status SupervisedOpensmControl::restart(std::uint8_t priority, bool force) {
  using S = opensm::SupervisorState;
  if (sup_->status().state != S::Running) return start(priority);
  auto st = write_and_apply(priority, opensm::ConfChangeKind::None);
  if (!st.ok()) return st;
  stop_requested_ = false;
  auto r = sup_->restart("the HA engine asked for a restart at priority " + std::to_string(priority),
                         false);
  if (r.ok() && force) kill_now();
  return r;
}

Status SupervisedOpensmControl::set_priority(std::uint8_t priority) {
  using S = opensm::SupervisorState;
  auto text = render_(priority);
  if (!text) return text.error();
  const auto old = fs_.read(conf_path_);
  const bool unchanged = old && old.value() == text.value();
  if (auto st = write_and_apply(priority, opensm::ConfChangeKind::Sighup); !st.ok()) return st;
  // The engine asks again for a priority OpenSM has not applied (a SIGHUP that
  // landed in a running heavy sweep is lost, doc/ha-engine.md): the file
  // already holds it, so the supervisor leaves OpenSM alone; signal it here.
  const int pid = sup_->status().pid;
  if (unchanged && sup_->status().state == S::Running && pid > 0) {
    if (auto st = runner_.kill(pid, SIGHUP); !st.ok()) return st;
    log()->info("sm_priority {} not applied yet: sent SIGHUP to OpenSM pid {} again", priority, pid);
  }
  return Status::Ok();
}

Result<opensm::ReloadAction> SupervisedOpensmControl::reload(PriorityRenderer render,
                                                             opensm::ReloadDecision& decision) {
  auto text = render(priority_);
  if (!text) return text.error();
  auto old = fs_.read(conf_path_);
  decision = opensm::classify_change(old ? old.value() : std::string(), text.value());
  opensm::ConfChange change;
  change.kind = decision.kind == opensm::ReloadDecision::Kind::Restart ? opensm::ConfChangeKind::Restart
                : decision.kind == opensm::ReloadDecision::Kind::Sighup ? opensm::ConfChangeKind::Sighup
                                                                        : opensm::ConfChangeKind::None;
  change.restart_key = decision.key;
  auto r = sup_->reload(text.value(), change);
  if (!r) return r.error();
  render_ = std::move(render);
  return r.value();
}

}  // namespace smha::agent
