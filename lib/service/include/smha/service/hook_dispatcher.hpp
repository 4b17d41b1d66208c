// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// HookDispatcher: the config's `hooks` -> platform::HookRunner executions
// (doc/hooks.md), as the head's head::Hooks. Runs on the daemon's io_context
// thread.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "smha/config/config.hpp"
#include "smha/core/result.hpp"
#include "smha/core/scheduler.hpp"
#include "smha/head/head_events.hpp"
#include "smha/os/process_runner.hpp"
#include "smha/platform/hooks.hpp"

namespace smha::service {

// Runs the configured hooks (config `hooks`: master, standby, fault,
// opensm_restart, reload, unknown_sm) with the contract of doc/hooks.md:
//   TRANSITION to MASTER      -> hooks.master
//   TRANSITION to STANDBY     -> hooks.standby
//   TRANSITION to any other   -> hooks.fault
//   ALARM raised              -> hooks.fault
//   OPENSM_RESTART            -> hooks.opensm_restart (a crashed OpenSM was
//                                respawned, or supervision gave up)
//   RELOAD                    -> hooks.reload
// Never blocks: HookRunner queues and runs one at a time on the event loop.
class HookDispatcher final : public head::Hooks {
 public:
  // `processes` makes the runner the hooks' processes start through (once,
  // when a hook is first configured; smhad: DaemonAdapters::hook_runner),
  // `sched` times them out.
  using MakeProcesses = std::function<std::unique_ptr<os::ProcessRunner>()>;
  HookDispatcher(Scheduler& sched, MakeProcesses processes, const config::Config& config,
                 std::function<void(const platform::HookResult&)> on_result = {});

  // Security check of every configured hook (doc/hooks.md): the first error
  // names the YAML key, e.g. "hooks.master: hook '/x': writable by group ...".
  static Status check(const config::Config& config);

  // Takes the hooks and timeout of a reloaded configuration (check() it first).
  // A changed timeout applies to executions that start afterwards.
  void configure(const config::Config& config);

  // `priority`: this node's rendered SM priority.
  void transition(SmState old_state, SmState new_state, int priority, const std::string& peer,
                  const std::string& reason) override;
  void alarm(const std::string& state, int priority, const std::string& reason) override;
  void opensm_restart(const std::string& state, int priority, const std::string& reason) override;
  // hooks.unknown_sm, EVENT ALARM: an SM that is not a configured head was
  // found on the fabric (alarm unknown_sm raised; doc/census.md).
  void unknown_sm(const std::string& state, int priority, const std::string& reason) override;
  void reload(const std::string& state, int priority, const std::string& reason) override;

  std::size_t pending() const { return runner_ ? runner_->pending() : 0; }

 private:
  void run(const char* key, const platform::HookCall& call);
  void make_runner();

  MakeProcesses make_processes_;
  Scheduler& sched_;
  std::function<void(const platform::HookResult&)> on_result_;
  std::string node_;
  std::string fabric_;
  std::map<std::string, std::vector<std::string>> hooks_;
  std::chrono::seconds timeout_{10};
  std::unique_ptr<os::ProcessRunner> processes_;
  std::unique_ptr<platform::HookRunner> runner_;
};

}  // namespace smha::service
