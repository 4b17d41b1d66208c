// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/service/hook_dispatcher.hpp"

#include <algorithm>

namespace smha::service {

namespace {

std::string upper_state(SmState s) { return std::string(to_string(s)); }

}  // namespace

HookDispatcher::HookDispatcher(Scheduler& sched, MakeProcesses processes, const config::Config& config,
                               std::function<void(const platform::HookResult&)> on_result)
    : make_processes_(std::move(processes)), sched_(sched), on_result_(std::move(on_result)) {
  configure(config);
}

Status HookDispatcher::check(const config::Config& config) {
  for (const auto& [event, paths] : config.hooks) {
    for (const auto& path : paths) {
      if (auto st = platform::check_hook_security(path, {}); !st.ok()) {
        return make_error(st.error().code, "hooks." + event + ": " + st.error().message);
      }
    }
  }
  return Status::Ok();
}

void HookDispatcher::configure(const config::Config& config) {
  node_ = config.node_name;
  fabric_ = config.fabric;
  hooks_ = config.hooks;
  const bool any = std::any_of(hooks_.begin(), hooks_.end(),
                               [](const auto& kv) { return !kv.second.empty(); });
  if (!any) return;  // the runner (and its process runner) is made on first need
  if (!runner_ || timeout_ != config.hook_timeout) {
    timeout_ = config.hook_timeout;
    // A runner with pending work keeps it: a new timeout applies to new runners
    // only when nothing is queued (HookRunner's timeout is fixed per instance).
    if (!runner_ || runner_->pending() == 0) make_runner();
  }
}

void HookDispatcher::make_runner() {
  if (!processes_) processes_ = make_processes_();
  platform::HookOptions o;
  o.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(timeout_);
  o.node = node_;
  o.fabric = fabric_;
  o.on_result = on_result_;
  runner_.reset();
  runner_ = std::make_unique<platform::HookRunner>(sched_, *processes_, std::move(o));
}

void HookDispatcher::run(const char* key, const platform::HookCall& call) {
  auto it = hooks_.find(key);
  if (it == hooks_.end() || it->second.empty()) return;
  if (!runner_) make_runner();
  runner_->run(call, it->second);
}

void HookDispatcher::transition(SmState old_state, SmState new_state, int priority,
                                const std::string& peer, const std::string& reason) {
  platform::HookCall call{platform::HookEvent::Transition, upper_state(new_state),
                          upper_state(old_state), priority, peer, reason};
  const char* key = new_state == SmState::Master    ? "master"
                    : new_state == SmState::Standby ? "standby"
                                                    : "fault";
  run(key, call);
}

void HookDispatcher::alarm(const std::string& state, int priority, const std::string& reason) {
  run("fault", platform::HookCall{platform::HookEvent::Alarm, state, state, priority, {}, reason});
}

void HookDispatcher::opensm_restart(const std::string& state, int priority,
                                    const std::string& reason) {
  run("opensm_restart",
      platform::HookCall{platform::HookEvent::OpensmRestart, state, state, priority, {}, reason});
}

void HookDispatcher::unknown_sm(const std::string& state, int priority, const std::string& reason) {
  run("unknown_sm", platform::HookCall{platform::HookEvent::Alarm, state, state, priority, {}, reason});
}

void HookDispatcher::reload(const std::string& state, int priority, const std::string& reason) {
  run("reload", platform::HookCall{platform::HookEvent::Reload, state, state, priority, {}, reason});
}

}  // namespace smha::service
