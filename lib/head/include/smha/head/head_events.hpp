// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// What a head makes of its engine's and its OpenSM supervision's output:
//   Hooks            what a head tells the operator's hooks (doc/hooks.md);
//                    smhad's HookDispatcher runs them
//   HeadEventSink    agent::EventSink: LogEventSink plus hooks, a flood guard,
//                    and a status refresh on every engine event
//   OpensmWatch      supervision's changes as events, the opensm_failed alarm
//                    and the opensm_restart hooks
//   ObserveOnlyOpensmControl  the OpenSM control of `smhad --observe`
// Single-threaded (the head's Scheduler).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "smha/agent/seams.hpp"
#include "smha/core/alarm.hpp"
#include "smha/core/clock.hpp"
#include "smha/head/event_log.hpp"
#include "smha/opensm/supervisor.hpp"
#include "smha/sm/ha_machine.hpp"

namespace smha::head {

// The notify hooks a head runs (config `hooks`, doc/hooks.md). `state` is the
// local SM's state name, `priority` its rendered priority.
class Hooks {
 public:
  virtual ~Hooks() = default;
  virtual void transition(SmState old_state, SmState new_state, int priority, const std::string& peer,
                          const std::string& reason) = 0;
  virtual void alarm(const std::string& state, int priority, const std::string& reason) = 0;
  virtual void opensm_restart(const std::string& state, int priority, const std::string& reason) = 0;
  virtual void unknown_sm(const std::string& state, int priority, const std::string& reason) = 0;
  virtual void reload(const std::string& state, int priority, const std::string& reason) = 0;
};

// Hooks that run nothing.
class NoHooks final : public Hooks {
 public:
  void transition(SmState, SmState, int, const std::string&, const std::string&) override {}
  void alarm(const std::string&, int, const std::string&) override {}
  void opensm_restart(const std::string&, int, const std::string&) override {}
  void unknown_sm(const std::string&, int, const std::string&) override {}
  void reload(const std::string&, int, const std::string&) override {}
};

// The head's agent::EventSink: everything goes to LogEventSink (log lines,
// recent events, alarms); RunHook (the local role changed) and raised alarms
// also run hooks; every call ends with `changed()` (STATUS refresh).
// `snapshot` gives the current local state name and rendered priority for
// alarm hooks.
// Flood guard: of the engine events (other than state changes) and adapter
// errors equal in kind and reason, the first kRepeatBurst within kRepeatWindow
// are passed on, further ones in that window are not logged or recorded; the
// first one of the next window says how many were suppressed
// (" [<n> repeats suppressed]" appended to its evidence/message).
// This keeps a retry loop (e.g. the engine restarting an OpenSM whose
// supervision failed, every round) from flooding the journal and pushing the
// cause out of the event ring. State changes, alarms and hooks are never
// suppressed.
class HeadEventSink final : public agent::EventSink {
 public:
  struct Snapshot {
    std::string state;
    int priority = 0;
    std::string peer;
  };
  HeadEventSink(LogEventSink& log, Hooks& hooks, std::function<Snapshot()> snapshot,
                  std::function<void()> changed);
  void event(const sm::RecordEvent& e, TimePoint at) override;
  void alarm(const RaiseAlarm& a, TimePoint at) override;
  void clear(const ClearAlarm& a, TimePoint at) override;
  void hook(const sm::RunHook& h, TimePoint at) override;
  void error(const Error& e, TimePoint at) override;
  // Never suppressed (one per mastership).
  void takeover_report(const fabric::TakeoverReport& r, TimePoint at) override;
  // Never suppressed (one per change).
  void role_changed(const sm::RoleChange& change, TimePoint at) override { log_.role_changed(change, at); }

  static constexpr Duration kRepeatWindow = std::chrono::seconds(30);
  static constexpr int kRepeatBurst = 3;
  std::uint64_t suppressed_total() const { return suppressed_total_; }

 private:
  // True if `key` is to be suppressed at `at` (counted); otherwise false, with
  // `suppressed` = the count of the window that just ended (0 if none).
  bool repeat(const std::string& key, TimePoint at, int& suppressed);

  struct Repeat {
    TimePoint window_start{};
    int passed = 0;
    int suppressed = 0;
  };
  std::map<std::string, Repeat> repeats_;
  std::uint64_t suppressed_total_ = 0;
  LogEventSink& log_;
  Hooks& hooks_;
  std::function<Snapshot()> snapshot_;
  std::function<void()> changed_;
  std::string transition_cause_ = "unknown";  // the cause of the latest state change
};

// Watches OpenSM supervision for the head: a respawn after a crash runs the
// opensm_restart hooks; entering Failed (permanent failure or crash loop) logs
// OPENSM_FAILED, raises the alarm opensm_failed through `alarms` (with an
// "opensm_failed" event; a new reason while Failed refreshes its detail; the
// head passes its HeadEventSink, so the fault hooks run as for every alarm) and
// runs the opensm_restart hooks; leaving Failed clears the alarm, except for a
// crash loop's retry: that keeps it until the retried OpenSM has run
// restart_stable_s (events opensm_retry, then opensm_retry_ok or
// opensm_retry_failed, noted in `log`). Feed it every supervisor status
// (SupervisorOptions::on_change). `clock` dates the alarms.
class OpensmWatch {
 public:
  OpensmWatch(LogEventSink& log, AlarmSink& alarms, const Clock& clock, Hooks& hooks,
              std::function<HeadEventSink::Snapshot()> snapshot, std::function<void()> changed);
  void on_change(const opensm::SupervisorStatus& st);

 private:
  void raise(const std::string& detail);
  LogEventSink& log_;
  AlarmSink& alarms_;
  const Clock& clock_;
  std::optional<std::string> alarm_;  // the active opensm_failed's detail
  Hooks& hooks_;
  std::function<HeadEventSink::Snapshot()> snapshot_;
  std::function<void()> changed_;
  opensm::SupervisorState last_ = opensm::SupervisorState::Stopped;
  int last_spawns_ = 0;
  int last_retries_ = 0;
  bool last_retrying_ = false;
};


// OpensmControl for --observe: never touches OpenSM. Every call succeeds and
// does nothing; state() is always Running (the engine then only observes).
class ObserveOnlyOpensmControl final : public agent::OpensmControl {
 public:
  Status start(std::uint8_t) override { return Status::Ok(); }
  Status stop(bool) override { return Status::Ok(); }
  Status restart(std::uint8_t, bool) override { return Status::Ok(); }
  Status set_priority(std::uint8_t) override { return Status::Ok(); }
  sm::ProcessState state() const override { return sm::ProcessState::Running; }
  void set_exit_handler(ExitHandler) override {}
};

}  // namespace smha::head
