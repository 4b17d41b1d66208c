// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/head/head_events.hpp"

#include <iterator>
#include <utility>

namespace smha::head {

// ---- HeadEventSink -------------------------------------------------------

HeadEventSink::HeadEventSink(LogEventSink& log, Hooks& hooks,
                                 std::function<Snapshot()> snapshot, std::function<void()> changed)
    : log_(log), hooks_(hooks), snapshot_(std::move(snapshot)), changed_(std::move(changed)) {}

bool HeadEventSink::repeat(const std::string& key, TimePoint at, int& suppressed) {
  suppressed = 0;
  auto it = repeats_.find(key);
  if (it != repeats_.end() && at - it->second.window_start < kRepeatWindow) {
    if (it->second.passed < kRepeatBurst) {
      ++it->second.passed;
      return false;
    }
    ++it->second.suppressed;
    ++suppressed_total_;
    return true;
  }
  if (it != repeats_.end()) suppressed = it->second.suppressed;
  if (repeats_.size() > 256) {  // forget keys that are out of their window
    for (auto i = repeats_.begin(); i != repeats_.end();)
      i = at - i->second.window_start >= kRepeatWindow ? repeats_.erase(i) : std::next(i);
  }
  repeats_[key] = Repeat{at, 1, 0};
  return false;
}

namespace {
std::string with_suppressed(std::string text, int suppressed) {
  if (suppressed > 0) text += " [" + std::to_string(suppressed) + " repeats suppressed]";
  return text;
}
}  // namespace

void HeadEventSink::event(const sm::RecordEvent& e, TimePoint at) {
  if (e.kind == sm::EventKind::StateChanged) {
    // Its cause, from the same engine step (agent::EventSink::event), for the
    // hooks of the RunHook that follows it in that step.
    transition_cause_ = e.evidence.empty() ? "unknown" : e.evidence;
    log_.event(e, at);
    changed_();
    return;
  }
  int suppressed = 0;
  if (repeat("event\n" + std::string(sm::to_string(e.kind)) + ": " + e.reason, at, suppressed)) return;
  sm::RecordEvent copy = e;
  copy.evidence = with_suppressed(copy.evidence, suppressed);
  log_.event(copy, at);
  changed_();
}

void HeadEventSink::takeover_report(const fabric::TakeoverReport& r, TimePoint at) {
  log_.takeover_report(r, at);
  changed_();
}

void HeadEventSink::alarm(const RaiseAlarm& a, TimePoint at) {
  const bool already = log_.alarm_active(a.kind);
  log_.alarm(a, at);
  if (!already) {
    const Snapshot s = snapshot_();
    hooks_.alarm(s.state, s.priority, std::string(to_string(a.kind)) + ": " + a.detail);
    if (a.kind == AlarmKind::UnknownSm)
      hooks_.unknown_sm(s.state, s.priority, std::string(to_string(a.kind)) + ": " + a.detail);
  }
  changed_();
}

void HeadEventSink::clear(const ClearAlarm& a, TimePoint at) {
  log_.clear(a, at);
  changed_();
}

void HeadEventSink::hook(const sm::RunHook& h, TimePoint at) {
  log_.hook(h, at);
  const Snapshot s = snapshot_();
  hooks_.transition(h.old_state, h.new_state, h.priority, s.peer, transition_cause_);
  changed_();
}

void HeadEventSink::error(const Error& e, TimePoint at) {
  int suppressed = 0;
  if (repeat("error\n" + std::string(to_string(e.code)) + "\n" + e.message, at, suppressed)) return;
  Error copy = e;
  copy.message = with_suppressed(copy.message, suppressed);
  log_.error(copy, at);
  changed_();
}

// ---- OpensmWatch -----------------------------------------------------------

OpensmWatch::OpensmWatch(LogEventSink& log, AlarmSink& alarms, const Clock& clock, Hooks& hooks,
                         std::function<HeadEventSink::Snapshot()> snapshot,
                         std::function<void()> changed)
    : log_(log),
      alarms_(alarms),
      clock_(clock),
      hooks_(hooks),
      snapshot_(std::move(snapshot)),
      changed_(std::move(changed)) {}

void OpensmWatch::raise(const std::string& detail) {
  if (alarm_ == detail) return;
  alarms_.alarm(RaiseAlarm{AlarmKind::OpensmFailed, detail, alarm_.has_value()}, clock_.now());
  alarm_ = detail;
}

void OpensmWatch::on_change(const opensm::SupervisorStatus& st) {
  using S = opensm::SupervisorState;
  const S before = std::exchange(last_, st.state);
  const int spawns_before = std::exchange(last_spawns_, st.spawns);
  const int retries_before = std::exchange(last_retries_, st.crash_loop_retries);
  const bool was_retrying = std::exchange(last_retrying_, st.retrying);
  if (st.crash_loop_retries > retries_before)
    log_.note("opensm_retry", "crash loop: retry " + std::to_string(st.crash_loop_retries), st.reason);
  // A crash loop's retry is on probation until it ran restart_stable_s: the
  // alarm stays up until then, and each outcome is an event of its own.
  if (st.state == S::Failed && before != S::Failed) {
    if (was_retrying)
      log_.note("opensm_retry_failed", "crash loop: retry " + std::to_string(st.crash_loop_retries) + " failed",
                st.reason);
    raise(st.reason);
    const auto s = snapshot_();
    hooks_.opensm_restart(s.state, s.priority, "failed: " + st.reason);
  } else if (st.state == S::Failed) {
    raise(st.reason);  // a new retry time: the detail only
  } else if (!st.retrying && alarm_) {
    if (was_retrying)
      log_.note("opensm_retry_ok",
                "crash loop over: OpenSM pid " + std::to_string(st.pid) + " runs since retry " +
                    std::to_string(st.crash_loop_retries));
    alarms_.clear(ClearAlarm{AlarmKind::OpensmFailed}, clock_.now());
    alarm_.reset();
  }
  if (st.state == S::Running && st.spawns > spawns_before && st.crashes > 0 && before != S::Failed) {
    const auto s = snapshot_();
    hooks_.opensm_restart(s.state, s.priority,
                          "respawned after " + std::to_string(st.crashes) + " crash(es): pid " +
                              std::to_string(st.pid));
  }
  if (st.state != before) changed_();
}

}  // namespace smha::head
