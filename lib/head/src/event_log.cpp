// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/head/event_log.hpp"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "smha/core/logger.hpp"
#include "smha/core/text.hpp"
#include "smha/platform/logging.hpp"
#include "smha/head/takeover_report_json.hpp"

namespace smha::head {

namespace {

std::shared_ptr<spdlog::logger> sm_log() { return named_logger("sm"); }

}  // namespace

LogEventSink::LogEventSink(std::size_t capacity, const Clock& clock) : capacity_(capacity), clock_(clock) {}

void LogEventSink::push(EventRecord r) {
  r.seq = ++seq_;
  r.wall = clock_.wall_now();
  events_.push_back(std::move(r));
  while (events_.size() > capacity_) events_.pop_front();
  for (const auto& l : listeners_) l(events_.back());
}

void LogEventSink::restore(const std::vector<EventRecord>& earlier) {
  std::deque<EventRecord> merged(earlier.begin(), earlier.end());
  for (auto& e : events_) merged.push_back(e);
  while (merged.size() > capacity_) merged.pop_front();
  events_ = std::move(merged);
  for (const auto& e : earlier) {
    seq_ = std::max(seq_, e.seq);
    if (e.type == EventType::Transition && (!last_transition_ || e.seq > last_transition_->seq)) last_transition_ = e;
    if (e.type == EventType::TakeoverReport && e.report && (!last_takeover_ || e.seq > last_takeover_->seq))
      last_takeover_ = e;
  }
}

std::vector<EventNode> LogEventSink::nodes_of(const sm::RecordEvent& e) const {
  std::vector<EventNode> out;
  if (!namer_) return out;
  auto add = [&](Guid g) {
    if (out.size() >= kMaxEventNodes) return;
    for (const auto& n : out)
      if (n.guid == g) return;
    out.push_back(namer_(g));
  };
  add(self_);
  for (Guid g : e.nodes) add(g);
  return out;
}

namespace {
// "head02 0x0002c90300000002 "head02 HCA-1"; ..." for the log line.
std::string nodes_text(const std::vector<EventNode>& nodes) {
  std::string out;
  for (const auto& n : nodes) {
    if (!out.empty()) out += "; ";
    if (!n.name.empty()) out += printable(n.name) + " ";
    out += to_string(n.guid);
    if (!n.description.empty()) out += " \"" + printable(n.description) + "\"";
  }
  return out;
}
}  // namespace

void LogEventSink::event(const sm::RecordEvent& e, TimePoint at) {
  auto log = sm_log();
  const auto nodes = nodes_of(e);
  if (e.kind == sm::EventKind::StateChanged) {
    auto name = [](const std::optional<SmState>& s) { return s ? std::string(to_string(*s)) : std::string("?"); };
    const std::string cause = e.evidence.empty() ? "unknown" : e.evidence;
    platform::log_event(*log, platform::kSmTransition,
                        {{"from", name(e.from)}, {"to", name(e.to)}, {"reason", cause}});
    EventRecord r{0, {}, "transition", e.reason, cause, at, nodes};
    r.type = EventType::Transition;
    r.from = e.from;
    r.to = e.to;
    push(std::move(r));
    last_transition_ = events_.back();
    return;
  }
  platform::LogFields fields{{"kind", std::string(sm::to_string(e.kind))}, {"reason", e.reason},
                             {"evidence", e.evidence}};
  if (!nodes.empty()) fields.emplace_back("nodes", nodes_text(nodes));
  platform::log_event(*log, platform::kSmEvent, fields);
  EventRecord r{0, {}, std::string(sm::to_string(e.kind)), e.reason, e.evidence, at, nodes};
  r.type = EventType::Engine;
  r.engine_kind = e.kind;
  r.preempt = e.preempt;
  push(std::move(r));
  if (e.kind == sm::EventKind::Adopted) last_transition_ = events_.back();
}

void LogEventSink::takeover_report(const fabric::TakeoverReport& r, TimePoint at) {
  const std::string kind(fabric::to_string(r.kind));
  const std::string text = fabric::summary(r);
  platform::LogFields fields{{"kind", kind}, {"summary", text}};
  for (auto& f : takeover_report_fields(r)) fields.push_back(std::move(f));
  platform::log_event(*sm_log(), platform::kSmTakeoverReport, fields);
  sm::RecordEvent about{sm::EventKind::TakeoverDone, {}, {}};
  if (r.previous_master) about.nodes.push_back(*r.previous_master);
  EventRecord e{0, {}, "takeover_report", text, kind, at, nodes_of(about)};
  e.type = EventType::TakeoverReport;
  e.report = r;
  push(std::move(e));
  last_takeover_ = events_.back();
}

void LogEventSink::alarm(const RaiseAlarm& a, TimePoint) {
  const std::string kind(to_string(a.kind));
  if (a.refresh && alarms_.count(a.kind) != 0) {  // the active alarm's new detail: no new event
    alarms_[a.kind] = a.detail;
    return;
  }
  platform::log_event(*sm_log(), platform::kSmAlarm, {{"kind", kind}, {"detail", a.detail}},
                      spdlog::level::warn);
  alarms_[a.kind] = a.detail;
  EventRecord r{0, {}, "alarm", kind, a.detail};
  r.type = EventType::Alarm;
  r.alarm = a.kind;
  push(std::move(r));
}

void LogEventSink::clear(const ClearAlarm& a, TimePoint) {
  const std::string kind(to_string(a.kind));
  if (alarms_.erase(a.kind) == 0) return;
  platform::log_event(*sm_log(), platform::kSmAlarmCleared, {{"kind", kind}});
  EventRecord r{0, {}, "alarm_cleared", kind, {}};
  r.type = EventType::AlarmCleared;
  r.alarm = a.kind;
  push(std::move(r));
}

void LogEventSink::role_changed(const sm::RoleChange& change, TimePoint) {
  platform::log_event(*sm_log(), platform::kSmRole,
                      {{"from", std::string(sm::to_string(change.from))},
                       {"to", std::string(sm::to_string(change.to))},
                       {"reason", cap_event_text(change.why)}});
}

void LogEventSink::hook(const sm::RunHook& h, TimePoint) {
  sm_log()->debug("hook {} {} {} {}", h.event, to_string(h.new_state), to_string(h.old_state),
                  h.priority);
}

void LogEventSink::error(const Error& e, TimePoint) {
  platform::log_event(*sm_log(), platform::kSmActionFailed,
                      {{"code", std::string(to_string(e.code))}, {"message", e.message}}, spdlog::level::warn);
  EventRecord r{0, {}, "error", std::string(to_string(e.code)), e.message};
  r.type = EventType::Error;
  push(std::move(r));
}

std::optional<SmState> sm_state_named(std::string_view name) {
  for (auto st : {SmState::NotActive, SmState::Discovering, SmState::Standby, SmState::Master})
    if (name == to_string(st)) return st;
  return std::nullopt;
}

namespace {

template <typename Enum>
std::optional<Enum> enum_named(std::string_view name) {
  for (int k = 0;; ++k) {
    const auto v = static_cast<Enum>(k);
    const auto text = sm::to_string(v);
    if (text == "unknown") return std::nullopt;
    if (text == name) return v;
  }
}

}  // namespace

void set_type_from_kind(EventRecord& e) {
  e.engine_kind.reset();
  e.alarm.reset();
  if (e.kind == "transition") {
    e.type = EventType::Transition;
  } else if (e.kind == "alarm" || e.kind == "alarm_cleared") {
    e.type = e.kind == "alarm" ? EventType::Alarm : EventType::AlarmCleared;
    e.alarm = alarm_kind_named(e.reason);
  } else if (e.kind == "error") {
    e.type = EventType::Error;
  } else if (e.kind == "opensm_state") {
    e.type = EventType::OpensmState;
  } else if (e.kind == "takeover_report") {
    e.type = EventType::TakeoverReport;
  } else if (auto k = enum_named<sm::EventKind>(e.kind); k && *k != sm::EventKind::StateChanged) {
    e.type = EventType::Engine;
    e.engine_kind = k;
  } else {
    e.type = EventType::Note;
  }
}

std::string cap_event_text(std::string text) {
  if (text.size() <= kMaxEventTextBytes) return text;
  const std::size_t cut = text.size() - kMaxEventTextBytes;
  text.resize(kMaxEventTextBytes);
  while (!text.empty() && (static_cast<unsigned char>(text.back()) & 0xC0) == 0x80) text.pop_back();  // whole UTF-8
  if (!text.empty() && (static_cast<unsigned char>(text.back()) & 0x80)) text.pop_back();
  return text + "... (" + std::to_string(cut) + " more bytes not kept)";
}

void LogEventSink::note(std::string kind, std::string reason, std::string evidence) {
  reason = cap_event_text(std::move(reason));
  evidence = cap_event_text(std::move(evidence));
  log_note(kind, reason, evidence);
  push(EventRecord{0, {}, std::move(kind), std::move(reason), std::move(evidence)});
}

void LogEventSink::opensm_state(const std::string& from, const std::string& to, std::string evidence) {
  const std::string reason = cap_event_text(from + "->" + to);
  evidence = cap_event_text(std::move(evidence));
  log_note("opensm_state", reason, evidence);
  EventRecord r{0, {}, "opensm_state", reason, std::move(evidence)};
  r.type = EventType::OpensmState;
  r.from = sm_state_named(from);
  r.to = sm_state_named(to);
  push(std::move(r));
}

void LogEventSink::log_note(const std::string& kind, const std::string& reason, const std::string& evidence) {
  const std::string name = "SMHAD_" + kind;
  const auto id = platform::find_message_id(name);
  platform::LogFields fields{{"reason", reason}};
  if (!evidence.empty()) fields.emplace_back("evidence", evidence);
  if (id) {
    platform::log_event(*sm_log(), *id, fields);
  } else {
    fields.insert(fields.begin(), {"kind", kind});
    platform::log_event(*sm_log(), platform::MessageId{name, platform::kSmhadNote.id}, fields);
  }
}

}  // namespace smha::head
