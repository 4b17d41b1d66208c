// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// The event log: EventRecord (what smhad recorded, text for people and typed
// fields for code) and LogEventSink, the agent's EventSink that logs every
// event and keeps the recent ones and the active alarms.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "smha/agent/seams.hpp"
#include "smha/core/alarm.hpp"
#include "smha/fabric/takeover_report.hpp"
#include "smha/core/clock.hpp"
#include "smha/core/types.hpp"
#include "smha/sm/ha_machine.hpp"

namespace smha::head {

// An SM an event is about, for people: its head name ("" for an SM that is
// not a configured head), port GUID and NodeDescription (raw; "" when not
// known), as smhad knew them when the event was recorded.
struct EventNode {
  std::string name;
  Guid guid;
  std::string description;
};
// Most nodes an event names (this head, a lost master, a handover's target...).
inline constexpr std::size_t kMaxEventNodes = 8;

// What an event is, for code (EventRecord::kind is its name on the wire).
enum class EventType : std::uint8_t {
  Note,          // a daemon note: reload, hold, handover request ... (kind: its name)
  Engine,        // an engine event other than a state change (engine_kind)
  Transition,    // the local SM's state changed (kind "transition"; from, to)
  Alarm,         // an alarm raised (kind "alarm"; alarm: which)
  AlarmCleared,  // kind "alarm_cleared"
  Error,         // an adapter error (kind "error")
  OpensmState,   // OpenSM's log showed a state change (kind "opensm_state"; from, to)
  TakeoverReport,  // how a takeover or handover to our SM went (kind "takeover_report"; report)
};

// One recorded event (engine event, alarm raise/clear, adapter error, note).
// `kind`, `reason` and `evidence` are what people and scripts read; code acts
// on the typed fields, never on the text.
struct EventRecord {
  std::uint64_t seq = 0;
  std::chrono::system_clock::time_point wall;
  std::string kind;      // engine EventKind, "alarm", "alarm_cleared", "error", "transition", a note's kind
  std::string reason;
  std::string evidence;
  TimePoint at{};  // steady time of engine events (not persisted; zero for restored ones)
  // Engine events: this head first, then sm::RecordEvent::nodes. Empty for
  // the others, and when no namer is set (LogEventSink::set_node_namer).
  std::vector<EventNode> nodes = {};
  EventType type = EventType::Note;
  std::optional<sm::EventKind> engine_kind = std::nullopt;  // Engine
  std::optional<AlarmKind> alarm = std::nullopt;        // Alarm, AlarmCleared
  // Transition, OpensmState: the state before and after (unset where not
  // known: OpenSM's first logged change after smhad started has no before).
  std::optional<SmState> from = std::nullopt;
  std::optional<SmState> to = std::nullopt;
  bool preempt = false;  // Engine handover_started by the preempt failback policy
  std::optional<fabric::TakeoverReport> report = std::nullopt;  // TakeoverReport
};

// The typed fields of an event from its kind name (the journal and replies
// carry the name): type, engine_kind, and alarm (from the reason of an
// "alarm"/"alarm_cleared" event, which is the alarm's name). from, to and
// preempt are not touched.
void set_type_from_kind(EventRecord& e);
// SmState by its name (to_string(SmState)); OpenSM's log says the same words.
std::optional<SmState> sm_state_named(std::string_view name);

// Events kept in memory and in the journal (event_journal.hpp).
inline constexpr std::size_t kEventHistory = 1000;

// Longest reason or evidence text a daemon note keeps (longer text is cut,
// saying how much was dropped): a refused reload of a file with 100 000
// errors must not fill the event ring, the journal or the log.
inline constexpr std::size_t kMaxEventTextBytes = 4096;
std::string cap_event_text(std::string text);

// agent::EventSink for the daemon: logs every engine event (logger "sm"), each
// local SM state change once at info as
//   SM_TRANSITION from=STANDBY to=MASTER reason=<the engine event that led to it>
// and keeps the last `capacity` events and the active alarms in memory.
class LogEventSink final : public agent::EventSink {
 public:
  // Event times (EventRecord::wall) are `clock`'s wall time; the default is
  // the system's (a process-wide SteadyClock).
  explicit LogEventSink(std::size_t capacity = kEventHistory, const Clock& clock = system_clock());
  void event(const sm::RecordEvent& e, TimePoint at) override;
  void alarm(const RaiseAlarm& a, TimePoint at) override;
  void clear(const ClearAlarm& a, TimePoint at) override;
  void hook(const sm::RunHook& h, TimePoint at) override;
  void error(const Error& e, TimePoint at) override;
  // A "takeover_report" event (reason: the report's summary), logged as
  // SM_TAKEOVER_REPORT with its figures.
  void takeover_report(const fabric::TakeoverReport& r, TimePoint at) override;
  // Logged as SM_ROLE from=<role> to=<role> reason=<why>; not recorded as an
  // event (the engine's events and SM_TRANSITION say what happened).
  void role_changed(const sm::RoleChange& change, TimePoint at) override;
  // Records a daemon-side event (reload, hold, handover request), logged as
  // SMHAD_<kind> reason=... [evidence=...] with its message id.
  // reason and evidence are kept and logged up to kMaxEventTextBytes each.
  void note(std::string kind, std::string reason, std::string evidence = {});
  // OpenSM's log showed its SM state change (`from`, `to`: OpenSM's words,
  // "MASTER", "STANDBY" ...; `from` "UNKNOWN" before the first line): an
  // "opensm_state" note "<from>-><to>" with the typed states.
  void opensm_state(const std::string& from, const std::string& to, std::string evidence);
  bool alarm_active(AlarmKind kind) const { return alarms_.count(kind) != 0; }

  const std::deque<EventRecord>& events() const { return events_; }
  // Active alarms: kind -> detail.
  const std::map<AlarmKind, std::string>& alarms() const { return alarms_; }
  // The last local SM transition; after an adoption at smhad start, the
  // `adopted` event (the state OpenSM was found in, not an earlier run's cause).
  std::optional<EventRecord> last_transition() const { return last_transition_; }
  // The last takeover report (also one restored from the journal).
  const std::optional<EventRecord>& last_takeover() const { return last_takeover_; }

  // Names the SMs engine events are about: `self` (this head's port GUID) and
  // each GUID in sm::RecordEvent::nodes go through `namer` when the event is
  // recorded, so the event keeps the NodeDescription smhad knew then.
  using NodeNamer = std::function<EventNode(Guid)>;
  void set_node_namer(Guid self, NodeNamer namer) {
    self_ = self;
    namer_ = std::move(namer);
  }

  // Called with every new event after it is recorded (journal, long polls, metrics).
  using Listener = std::function<void(const EventRecord&)>;
  void add_listener(Listener l) { listeners_.push_back(std::move(l)); }
  // Puts events from an earlier run (oldest first) in front of the history;
  // new events continue their sequence numbers. Call before any event.
  void restore(const std::vector<EventRecord>& earlier);

 private:
  void push(EventRecord r);
  void log_note(const std::string& kind, const std::string& reason, const std::string& evidence);
  std::size_t capacity_;
  const Clock& clock_;
  std::uint64_t seq_ = 0;
  std::deque<EventRecord> events_;
  std::map<AlarmKind, std::string> alarms_;
  std::optional<EventRecord> last_transition_;
  std::optional<EventRecord> last_takeover_;
  std::vector<Listener> listeners_;
  Guid self_;
  NodeNamer namer_;
  std::vector<EventNode> nodes_of(const sm::RecordEvent& e) const;
};

}  // namespace smha::head
