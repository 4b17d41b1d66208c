// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// Notify hooks: operator executables run on role changes and alarms, like
// keepalived's notify scripts.
//
// Contract (doc/hooks.md; stable):
//   argv:  <hook> EVENT NEW_STATE OLD_STATE PRIORITY
//          EVENT      TRANSITION (the local role changed), ALARM, OPENSM_RESTART
//                     or RELOAD
//          NEW_STATE  role after the event (MASTER, STANDBY, NOTACTIVE, DOWN, ...)
//          OLD_STATE  role before it (the same as NEW_STATE except for TRANSITION)
//          PRIORITY   this node's SM priority, 0..15
//   env:   the daemon's environment, plus SMHA_NODE, SMHA_EVENT, SMHA_NEW_STATE,
//          SMHA_OLD_STATE, SMHA_PRIORITY, SMHA_PEER (may be empty), SMHA_REASON
//          (free text, may be empty), SMHA_FABRIC (the instance's fabric, empty
//          on a one-fabric head), SMHA_HOOK_API=1; NOTIFY_SOCKET is emptied.
//          cwd is "/", stdin /dev/null; each stdout/stderr line is logged
//          (logger "svc", "hook <path>: <line>").
//   Runs in its own process group. If it has not ended after `timeout`, the whole
//   group gets SIGKILL (HOOK_TIMEOUT). Exit status other than 0 is HOOK_FAILED.
//
// Security: a hook must be an absolute path to a regular executable file owned by
// root or the daemon's user, not writable by group or others, in directories
// (every ancestor of the resolved path) owned by root or the daemon's user and
// not writable by group or others unless sticky. check_hook_security() is run at
// configuration time (reject the config) and again right before each run (refuse
// that run: HOOK_REFUSED). Between that check and execve a race remains; the
// directory rule is what makes it unexploitable by other users.
//
// Scheduling: run() never blocks and never fails. Calls are queued and executed
// one at a time in order (each call runs every configured hook in order), so a
// hook sees events in the order they happened. At most `max_queued` executions
// wait; beyond that the oldest waiting one is dropped (HOOK_DROPPED).
//
// One thread: use from the scheduler's event loop only.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <spdlog/logger.h>

#include "smha/core/result.hpp"
#include "smha/core/scheduler.hpp"
#include "smha/os/process_runner.hpp"

namespace smha::platform {

// TRANSITION: the local role changed. ALARM: an alarm was raised.
// OPENSM_RESTART: smhad restarted a crashed OpenSM (or gave up: SMHA_REASON).
// RELOAD: the configuration was reloaded.
enum class HookEvent { Transition, Alarm, OpensmRestart, Reload };
// "TRANSITION", "ALARM", "OPENSM_RESTART", "RELOAD"
const char* to_string(HookEvent event);

struct HookCall {
  HookEvent event = HookEvent::Transition;
  std::string new_state;
  std::string old_state;
  int priority = 0;
  std::string peer;
  std::string reason;
};

enum class HookOutcome { Ok, Failed, TimedOut, Refused, SpawnError, Dropped };
const char* to_string(HookOutcome outcome);

struct HookResult {
  std::string path;
  HookCall call;
  HookOutcome outcome = HookOutcome::Ok;
  os::ExitInfo exit;  // Ok, Failed, TimedOut
  std::string message;    // Refused, SpawnError, Dropped: why
};

struct HookOptions {
  std::vector<std::string> paths;
  std::chrono::milliseconds timeout{10000};
  std::string node;    // SMHA_NODE
  std::string fabric;  // SMHA_FABRIC (empty on a one-fabric head)
  // Owners a hook (and its directories) may have; empty: root and geteuid().
  std::vector<uid_t> allowed_owners;
  std::size_t max_queued = 32;
  std::shared_ptr<spdlog::logger> logger;  // null: module_logger("svc")
  // Called on the event loop after each execution ends (tests, metrics).
  std::function<void(const HookResult&)> on_result;
};

// The argv and environment additions for one execution (pure).
std::vector<std::string> hook_argv(const std::string& path, const HookCall& call);
std::vector<std::pair<std::string, std::string>> hook_env(const std::string& node,
                                                          const HookCall& call,
                                                          const std::string& fabric = {});

// Checks `path` as described above. Errors: "invalid" (not absolute),
// "not_found" (missing or unresolvable), "insecure" (message names the file or
// directory and the rule it breaks).
Status check_hook_security(const std::string& path, const std::vector<uid_t>& allowed_owners);

// check_hook_security() for every path of `options` (configuration time); the
// first error, naming the hook.
Status check_hooks(const HookOptions& options);

class HookRunner {
 public:
  // `sched` times the hooks out and runs queued executions; `runner` runs
  // them. Both must outlive the runner.
  HookRunner(Scheduler& sched, os::ProcessRunner& runner, HookOptions options);
  // Drops queued executions and SIGKILLs the process group of a running hook.
  ~HookRunner();
  HookRunner(const HookRunner&) = delete;
  HookRunner& operator=(const HookRunner&) = delete;

  // Queues one execution of every hook of options.paths for `call`; returns at once.
  void run(const HookCall& call);
  // The same for `paths` (e.g. the config's hooks for this event: config `hooks`
  // maps master/standby/fault/opensm_restart/reload/unknown_sm to executables). Each path
  // must have passed check_hook_security() at configuration time; it is checked
  // again before it runs.
  void run(const HookCall& call, const std::vector<std::string>& paths);

  // Executions waiting plus the one running.
  std::size_t pending() const { return queue_.size() + (running_pid_ != 0 ? 1 : 0); }

 private:
  struct Job {
    std::string path;
    HookCall call;
  };
  void start_next();
  void finish(HookResult result);

  Scheduler& sched_;
  os::ProcessRunner& runner_;
  HookOptions options_;
  std::deque<Job> queue_;
  int running_pid_ = 0;
  bool timed_out_ = false;
  bool start_posted_ = false;
  std::optional<Scheduler::TimerId> timer_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace smha::platform
