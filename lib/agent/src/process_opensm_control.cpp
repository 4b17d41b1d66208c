// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/agent/process_opensm_control.hpp"

#include <csignal>
#include <cstdio>

namespace smha::agent {

std::string render_minimal_conf(const MinimalConf& c, std::uint8_t priority) {
  char key[32];
  std::snprintf(key, sizeof key, "0x%016llx", static_cast<unsigned long long>(c.sm_key));
  std::string out = "# Rendered by smhad. Do not edit: changes are overwritten.\n";
  out += "sm_priority " + std::to_string(priority) + "\n";
  out += "sm_key " + std::string(key) + "\n";
  out += "sminfo_polling_timeout " + std::to_string(c.sminfo_polling_timeout_ms) + "\n";
  out += "polling_retry_number " + std::to_string(c.polling_retry_number) + "\n";
  out += "sweep_interval " + std::to_string(c.sweep_interval_s) + "\n";
  out += "ignore_other_sm FALSE\n";
  return out;
}

ProcessOpensmControl::ProcessOpensmControl(os::ProcessRunner& runner, os::FileSystem& fs,
                                           Scheduler& sched, OpensmLaunch launch,
                                           ConfRenderer render)
    : runner_(runner), fs_(fs), sched_(sched), launch_(std::move(launch)), render_(std::move(render)) {}

ProcessOpensmControl::~ProcessOpensmControl() {
  if (kill_timer_) sched_.cancel(*kill_timer_);
}

Status ProcessOpensmControl::write_conf(std::uint8_t priority) {
  if (priority > 15)
    return make_error("priority", "sm_priority " + std::to_string(priority) + " is above 15");
  return fs_.write_atomic(launch_.conf_path, render_(priority), 0644);
}

Status ProcessOpensmControl::start(std::uint8_t priority) {
  if (pid_) {
    if (stopping_) {  // the old one is on its way out: start when it is gone
      start_after_exit_ = priority;
      return Status::Ok();
    }
    return make_error("running", "OpenSM already runs as pid " + std::to_string(*pid_));
  }
  if (auto st = write_conf(priority); !st.ok()) return st;
  os::ProcessSpec spec;
  spec.path = launch_.binary;
  spec.argv = {launch_.binary, "-F", launch_.conf_path, "-g", to_string(launch_.guid)};
  spec.argv.insert(spec.argv.end(), launch_.extra_args.begin(), launch_.extra_args.end());
  spec.env = launch_.env;
  spec.cwd = launch_.cwd;
  std::weak_ptr<int> alive = alive_;
  auto pid = runner_.spawn(
      spec, [](os::OutputStream, std::string_view) {},
      [this, alive](const os::ExitInfo& e) {
        if (!alive.expired()) exited(e.pid);
      });
  if (!pid.ok()) return pid.error();
  pid_ = *pid;
  priority_ = priority;
  stopping_ = false;
  state_ = sm::ProcessState::Running;
  return Status::Ok();
}

Status ProcessOpensmControl::adopt(int pid, std::uint8_t priority) {
  if (pid_) return make_error("running", "OpenSM already runs as pid " + std::to_string(*pid_));
  std::weak_ptr<int> alive = alive_;
  auto st = runner_.adopt(pid, [this, alive](const os::ExitInfo& e) {
    if (!alive.expired()) exited(e.pid);
  });
  if (!st.ok()) return st;
  pid_ = pid;
  priority_ = priority;
  stopping_ = false;
  state_ = sm::ProcessState::Running;
  return Status::Ok();
}

Status ProcessOpensmControl::stop(bool force) {
  start_after_exit_.reset();
  if (!pid_) {
    state_ = sm::ProcessState::Stopped;
    return Status::Ok();
  }
  stopping_ = true;
  state_ = sm::ProcessState::Stopped;
  if (auto st = runner_.kill(*pid_, force ? SIGKILL : SIGTERM); !st.ok()) return st;
  if (!force) {
    const int pid = *pid_;
    std::weak_ptr<int> alive = alive_;
    if (kill_timer_) sched_.cancel(*kill_timer_);
    kill_timer_ = sched_.schedule_at(sched_.now() + launch_.stop_timeout, [this, alive, pid] {
      if (alive.expired()) return;
      kill_timer_.reset();
      if (pid_ && *pid_ == pid) (void)runner_.kill(pid, SIGKILL);
    });
  }
  return Status::Ok();
}

Status ProcessOpensmControl::restart(std::uint8_t priority, bool force) {
  if (!pid_) return start(priority);
  if (auto st = stop(force); !st.ok()) return st;
  start_after_exit_ = priority;
  state_ = sm::ProcessState::Running;  // as far as the engine is concerned, it is being replaced
  return Status::Ok();
}

Status ProcessOpensmControl::set_priority(std::uint8_t priority) {
  if (auto st = write_conf(priority); !st.ok()) return st;
  priority_ = priority;
  if (pid_ && !stopping_) return runner_.kill(*pid_, SIGHUP);
  if (start_after_exit_) start_after_exit_ = priority;
  return Status::Ok();
}

void ProcessOpensmControl::exited(int pid) {
  if (!pid_ || *pid_ != pid) return;
  pid_.reset();
  if (kill_timer_) {
    sched_.cancel(*kill_timer_);
    kill_timer_.reset();
  }
  const bool asked = stopping_;
  stopping_ = false;
  if (start_after_exit_) {
    const auto prio = *start_after_exit_;
    start_after_exit_.reset();
    if (auto st = start(prio); st.ok()) return;
    state_ = sm::ProcessState::Exited;
    if (on_exit_) on_exit_();
    return;
  }
  if (asked) {
    state_ = sm::ProcessState::Stopped;
    return;
  }
  state_ = sm::ProcessState::Exited;
  if (on_exit_) on_exit_();
}

}  // namespace smha::agent
