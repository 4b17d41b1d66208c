// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/platform/hooks.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "smha/platform/logging.hpp"

namespace smha::platform {
namespace {

constexpr mode_t kOthersWrite = S_IWGRP | S_IWOTH;

std::string octal(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

bool owner_allowed(uid_t uid, const std::vector<uid_t>& allowed) {
  return std::find(allowed.begin(), allowed.end(), uid) != allowed.end();
}

std::vector<uid_t> effective_owners(const std::vector<uid_t>& allowed) {
  if (!allowed.empty()) return allowed;
  return {0, ::geteuid()};
}

}  // namespace

const char* to_string(HookEvent event) {
  switch (event) {
    case HookEvent::Transition: return "TRANSITION";
    case HookEvent::Alarm: return "ALARM";
    case HookEvent::OpensmRestart: return "OPENSM_RESTART";
    case HookEvent::Reload: return "RELOAD";
  }
  return "unknown";
}

const char* to_string(HookOutcome outcome) {
  switch (outcome) {
    case HookOutcome::Ok: return "ok";
    case HookOutcome::Failed: return "failed";
    case HookOutcome::TimedOut: return "timeout";
    case HookOutcome::Refused: return "refused";
    case HookOutcome::SpawnError: return "spawn_error";
    case HookOutcome::Dropped: return "dropped";
  }
  return "unknown";
}

std::vector<std::string> hook_argv(const std::string& path, const HookCall& call) {
  return {path, to_string(call.event), call.new_state, call.old_state,
          std::to_string(call.priority)};
}

std::vector<std::pair<std::string, std::string>> hook_env(const std::string& node,
                                                          const HookCall& call, const std::string& fabric) {
  return {{"SMHA_NODE", node},
          {"SMHA_EVENT", to_string(call.event)},
          {"SMHA_NEW_STATE", call.new_state},
          {"SMHA_OLD_STATE", call.old_state},
          {"SMHA_PRIORITY", std::to_string(call.priority)},
          {"SMHA_PEER", call.peer},
          {"SMHA_REASON", call.reason},
          {"SMHA_FABRIC", fabric},
          {"SMHA_HOOK_API", "1"},
          {"NOTIFY_SOCKET", ""}};
}

Status check_hook_security(const std::string& path, const std::vector<uid_t>& allowed_owners) {
  if (path.empty() || path[0] != '/') {
    return make_error(Errc::Invalid, "hook '" + path + "': path must be absolute");
  }
  const std::vector<uid_t> owners = effective_owners(allowed_owners);
  char resolved[PATH_MAX];
  if (::realpath(path.c_str(), resolved) == nullptr) {
    return make_error(Errc::NotFound, "hook '" + path + "': " + std::strerror(errno));
  }
  struct stat st {};
  if (::stat(resolved, &st) != 0) {
    return make_error(Errc::NotFound, "hook '" + path + "': " + std::strerror(errno));
  }
  const std::string shown = std::string(resolved) == path
                                ? "hook '" + path + "'"
                                : "hook '" + path + "' (-> " + resolved + ")";
  if (!S_ISREG(st.st_mode)) return make_error(Errc::Insecure, shown + ": not a regular file");
  if ((st.st_mode & S_IXUSR) == 0) return make_error(Errc::Insecure, shown + ": not executable");
  if (!owner_allowed(st.st_uid, owners)) {
    return make_error(Errc::Insecure, shown + ": owned by uid " + std::to_string(st.st_uid) +
                                      ", must be root or the daemon's user");
  }
  if ((st.st_mode & kOthersWrite) != 0) {
    return make_error(Errc::Insecure, shown + ": writable by group or others (mode " +
                                      octal(st.st_mode) + ")");
  }
  std::string dir(resolved);
  while (dir.size() > 1) {
    dir.resize(dir.rfind('/'));
    if (dir.empty()) dir = "/";
    struct stat ds {};
    if (::stat(dir.c_str(), &ds) != 0) {
      return make_error(Errc::NotFound, shown + ": directory " + dir + ": " + std::strerror(errno));
    }
    if (!owner_allowed(ds.st_uid, owners)) {
      return make_error(Errc::Insecure, shown + ": directory " + dir + " owned by uid " +
                                        std::to_string(ds.st_uid));
    }
    if ((ds.st_mode & kOthersWrite) != 0 && (ds.st_mode & S_ISVTX) == 0) {
      return make_error(Errc::Insecure, shown + ": directory " + dir +
                                        " writable by group or others (mode " +
                                        octal(ds.st_mode) + ")");
    }
  }
  return Status::Ok();
}

Status check_hooks(const HookOptions& options) {
  for (const auto& path : options.paths) {
    if (Status s = check_hook_security(path, options.allowed_owners); !s) return s;
  }
  return Status::Ok();
}

HookRunner::HookRunner(Scheduler& sched, os::ProcessRunner& runner, HookOptions options)
    : sched_(sched), runner_(runner), options_(std::move(options)) {
  if (!options_.logger) options_.logger = module_logger("svc");
}

HookRunner::~HookRunner() {
  *alive_ = false;
  if (timer_) sched_.cancel(*timer_);
  if (running_pid_ != 0) (void)runner_.kill(running_pid_, SIGKILL);
}

void HookRunner::run(const HookCall& call) { run(call, options_.paths); }

void HookRunner::run(const HookCall& call, const std::vector<std::string>& paths) {
  for (const auto& path : paths) {
    if (queue_.size() >= options_.max_queued) {
      Job dropped = std::move(queue_.front());
      queue_.pop_front();
      HookResult result{dropped.path, dropped.call, HookOutcome::Dropped, {},
                        "more than " + std::to_string(options_.max_queued) + " executions waiting"};
      log_event(*options_.logger, kHookDropped,
                {{"hook", dropped.path}, {"event", to_string(dropped.call.event)},
                 {"new_state", dropped.call.new_state}, {"reason", result.message}},
                spdlog::level::warn);
      if (options_.on_result) options_.on_result(result);
    }
    queue_.push_back(Job{path, call});
  }
  if (running_pid_ == 0 && !start_posted_ && !queue_.empty()) {
    start_posted_ = true;
    sched_.post([this, alive = std::weak_ptr<bool>(alive_)] {
      if (alive.expired()) return;
      start_posted_ = false;
      start_next();
    });
  }
}

void HookRunner::start_next() {
  while (running_pid_ == 0 && !queue_.empty()) {
    Job job = std::move(queue_.front());
    queue_.pop_front();
    const LogFields base{{"hook", job.path}, {"event", to_string(job.call.event)},
                         {"new_state", job.call.new_state}, {"old_state", job.call.old_state}};

    if (Status s = check_hook_security(job.path, options_.allowed_owners); !s) {
      LogFields fields = base;
      fields.emplace_back("error", s.error().message);
      log_event(*options_.logger, kHookRefused, fields, spdlog::level::err);
      if (options_.on_result) {
        options_.on_result(HookResult{job.path, job.call, HookOutcome::Refused, {},
                                      s.error().message});
      }
      continue;
    }

    os::ProcessSpec spec;
    spec.path = job.path;
    spec.argv = hook_argv(job.path, job.call);
    spec.env = hook_env(options_.node, job.call, options_.fabric);
    spec.cwd = "/";
    auto logger = options_.logger;
    const std::string path = job.path;
    std::weak_ptr<bool> alive = alive_;
    auto on_output = [logger, path](os::OutputStream, std::string_view line) {
      logger->info("hook {}: {}", path, line);
    };
    auto on_exit = [this, alive, job](const os::ExitInfo& info) {
      if (alive.expired()) return;
      HookResult result{job.path, job.call, HookOutcome::Ok, info, {}};
      if (timed_out_) {
        result.outcome = HookOutcome::TimedOut;
      } else if (info.signaled || info.status != 0) {
        result.outcome = HookOutcome::Failed;
      }
      finish(std::move(result));
    };
    Result<int> pid = runner_.spawn(spec, on_output, on_exit);
    if (!pid) {
      LogFields fields = base;
      fields.emplace_back("error", pid.error().message);
      log_event(*options_.logger, kHookFailed, fields, spdlog::level::err);
      if (options_.on_result) {
        options_.on_result(HookResult{job.path, job.call, HookOutcome::SpawnError, {},
                                      pid.error().message});
      }
      continue;
    }
    running_pid_ = *pid;
    timed_out_ = false;
    if (timer_) sched_.cancel(*timer_);
    timer_ = sched_.schedule_at(sched_.now() + options_.timeout, [this, alive, pid = *pid] {
      if (alive.expired()) return;
      timer_.reset();
      if (running_pid_ != pid) return;
      timed_out_ = true;
      (void)runner_.kill(pid, SIGKILL);
    });
  }
}

void HookRunner::finish(HookResult result) {
  if (timer_) sched_.cancel(*timer_);
  timer_.reset();
  running_pid_ = 0;
  timed_out_ = false;
  const LogFields base{{"hook", result.path}, {"event", to_string(result.call.event)},
                       {"new_state", result.call.new_state},
                       {"old_state", result.call.old_state}};
  if (result.outcome == HookOutcome::TimedOut) {
    LogFields fields = base;
    fields.emplace_back("timeout_ms", std::to_string(options_.timeout.count()));
    log_event(*options_.logger, kHookTimeout, fields, spdlog::level::err);
  } else if (result.outcome == HookOutcome::Failed) {
    LogFields fields = base;
    fields.emplace_back(result.exit.signaled ? "signal" : "exit_status",
                        std::to_string(result.exit.status));
    log_event(*options_.logger, kHookFailed, fields, spdlog::level::err);
  } else {
    options_.logger->debug("hook {} {} ended with status 0", result.path,
                           to_string(result.call.event));
  }
  if (options_.on_result) options_.on_result(result);
  start_next();
}

}  // namespace smha::platform
