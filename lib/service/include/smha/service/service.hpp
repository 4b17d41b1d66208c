// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// lib/service: the pieces smhad wires together (doc/architecture.md, "Daemon
// wiring"). Everything runs on one io_context thread; nothing here locks.
//   RecordingTransport       MadTransport decorator: remembers the last answer per
//                            SM (for status) and refuses Sets during a hold
//   LogEventSink             agent::EventSink: SM_TRANSITION/SM_EVENT/SM_ALARM log
//                            lines (platform::log_event, stable message ids),
//                            recent events and active alarms for status/events
//   map_config()             config::Config -> agent::AgentConfig (+ HaPolicy)
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <nlohmann/json.hpp>

#include "smha/agent/agent.hpp"
#include "smha/agent/seams.hpp"
#include "smha/agent/supervised_opensm_control.hpp"
#include "smha/config/config.hpp"
#include "smha/control/protocol.hpp"
#include "smha/mad/transport.hpp"
#include "smha/opensm/conf.hpp"
#include "smha/opensm/supervisor.hpp"
#include "smha/os/asio_scheduler.hpp"

namespace smha::service {

// Maintenance hold: while held, nothing smha does moves mastership (no Set to
// the local SM, no priority change, no stop/restart of OpenSM). Starting an
// OpenSM that is not running stays allowed. Expires on its own.
struct HoldState {
  bool held = false;
  std::optional<TimePoint> until;
  std::string reason;
  uid_t by_uid = 0;
};

using agent::PriorityRenderer;
using agent::SupervisedOpensmControl;

// The kernel shows process `pid` stopped (/proc/<pid>/stat state T or t:
// SIGSTOP or a tracer). False when it cannot be read.
bool process_stopped(int pid);

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

// The last SMInfo answer from one SM, as the poller saw it.
struct SmSighting {
  SmInfo info;
  Duration rtt{};
  TimePoint at{};
};
// Which SM answers MASTER and since when, from the SMInfo answers seen (smctl
// status "Master"). A change is stamped when the first answer shows it; so the
// time is exact to a poll interval unless the SM was already MASTER at its
// first answer after smhad started (`exact` false: "since at least").
struct MasterRecord {
  std::optional<Guid> guid;  // nullopt: the last master left MASTER, none since
  TimePoint since{};
  std::chrono::system_clock::time_point since_wall{};
  bool exact = false;
};
class MasterWatch {
 public:
  void observe(const SmInfo& info, TimePoint now, std::chrono::system_clock::time_point wall);
  const std::optional<MasterRecord>& current() const { return rec_; }

 private:
  std::optional<MasterRecord> rec_;
  std::set<std::uint64_t> seen_not_master_;  // SMs seen in another state first
};

// Every SMInfo Get the poller made, for metrics: answered ones by round-trip
// time (cumulative buckets, seconds), unanswered ones (after the transport's
// retries) counted as missed.
struct PollStats {
  static constexpr double kBounds[] = {0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25};
  std::uint64_t buckets[std::size(kBounds)] = {};  // answers with rtt <= kBounds[i]
  std::uint64_t answered = 0;
  double rtt_sum_s = 0;
  std::uint64_t missed = 0;
  void record(bool ok, Duration rtt);
};

// The last query to one target.
struct TargetRecord {
  bool answered = false;
  TimePoint at{};
  std::optional<Guid> guid;  // from the last answer
};

// The last PortInfo query of one port: when, whether it was answered, and the
// last answer (kept across later unanswered queries).
struct PortRecord {
  bool answered = false;
  TimePoint at{};
  std::optional<mad::PortInfo> info;
  TimePoint info_at{};
};

// MadTransport decorator: passes every call through, remembers the last answer
// per SM GUID, the last outcome per target and the last PortInfo per port, and
// (while `hold` is held, or always with `read_only`) refuses set_sminfo with
// Error "hold"/"observe".
class RecordingTransport final : public mad::MadTransport {
 public:
  RecordingTransport(mad::MadTransport& inner, const Clock& clock, const HoldState& hold,
                     bool read_only)
      : inner_(inner), clock_(clock), hold_(hold), read_only_(read_only) {}
  void get_sminfo(const mad::Target& target, const mad::RequestOptions& opts,
                  mad::SmInfoCallback done) override;
  void set_sminfo(const mad::Target& target, SmInfoModifier mod, const SmInfo& payload,
                  const mad::RequestOptions& opts, mad::SmInfoCallback done) override;
  void get_port_info(const mad::Target& target, std::uint8_t port, const mad::RequestOptions& opts,
                     mad::PortInfoCallback done) override;
  // Discovery reads pass straight through (nothing to remember).
  void get_node_info(const mad::Target& target, const mad::RequestOptions& opts,
                     mad::NodeInfoCallback done) override {
    inner_.get_node_info(target, opts, std::move(done));
  }
  void get_node_description(const mad::Target& target, const mad::RequestOptions& opts,
                            mad::NodeDescriptionCallback done) override {
    inner_.get_node_description(target, opts, std::move(done));
  }
  void get_sminfo_records(Lid sa_lid, const mad::RequestOptions& opts,
                          mad::SmInfoRecordsCallback done) override {
    inner_.get_sminfo_records(sa_lid, opts, std::move(done));
  }
  void set_service_record(Lid sa_lid, const mad::ServiceRecord& record, const mad::RequestOptions& opts,
                          mad::ServiceRecordCallback done) override {
    inner_.set_service_record(sa_lid, record, opts, std::move(done));
  }
  void get_service_record(Lid sa_lid, const mad::Gid& gid, const std::string& name,
                          const mad::RequestOptions& opts, mad::ServiceRecordCallback done) override {
    inner_.get_service_record(sa_lid, gid, name, opts, std::move(done));
  }
  void delete_service_record(Lid sa_lid, const mad::ServiceRecord& record, const mad::RequestOptions& opts,
                             mad::ServiceRecordCallback done) override {
    inner_.delete_service_record(sa_lid, record, opts, std::move(done));
  }
  std::optional<SmSighting> last_seen(Guid guid) const;
  std::optional<TargetRecord> last_query(const mad::Target& target) const;
  const PollStats& poll_stats() const { return *stats_; }
  std::optional<PortRecord> last_port_info(const mad::Target& target, std::uint8_t port) const;
  const std::optional<MasterRecord>& master() const { return master_->current(); }
  // Every SMInfo answer (via: "lid:N" or "dr:PATH") and every PortInfo answer
  // of a DR hop 0 query (our own port), with the time the query was sent and
  // the answer received. For MastershipWindow; empty functions: none.
  using SmInfoTap = std::function<void(const SmInfo&, TimePoint sent, TimePoint received, const std::string& via)>;
  using LocalPortTap = std::function<void(const mad::PortInfo&, TimePoint sent, TimePoint received)>;
  void set_taps(SmInfoTap sminfo, LocalPortTap local_port) {
    taps_->sminfo = std::move(sminfo);
    taps_->local_port = std::move(local_port);
  }

 private:
  struct Taps {
    SmInfoTap sminfo;
    LocalPortTap local_port;
  };
  std::shared_ptr<Taps> taps_ = std::make_shared<Taps>();
  mad::MadTransport& inner_;
  const Clock& clock_;
  const HoldState& hold_;
  bool read_only_;
  std::shared_ptr<std::map<std::uint64_t, SmSighting>> seen_ =
      std::make_shared<std::map<std::uint64_t, SmSighting>>();
  std::shared_ptr<std::map<std::string, TargetRecord>> targets_ =
      std::make_shared<std::map<std::string, TargetRecord>>();
  std::shared_ptr<PollStats> stats_ = std::make_shared<PollStats>();
  std::shared_ptr<MasterWatch> master_ = std::make_shared<MasterWatch>();
  std::shared_ptr<std::map<std::string, PortRecord>> ports_ =
      std::make_shared<std::map<std::string, PortRecord>>();
};

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

// One recorded event (engine event, alarm raise/clear, adapter error).
struct EventRecord {
  std::uint64_t seq = 0;
  std::chrono::system_clock::time_point wall;
  std::string kind;      // engine EventKind, "alarm", "alarm_cleared", "error", "transition"
  std::string reason;
  std::string evidence;
  TimePoint at{};  // steady time of engine events (not persisted; zero for restored ones)
  // Engine events: this head first, then sm::RecordEvent::nodes. Empty for
  // the others, and when no namer is set (LogEventSink::set_node_namer).
  std::vector<EventNode> nodes = {};
};

// Events kept in memory and in the journal (event_journal.hpp).
inline constexpr std::size_t kEventHistory = 1000;

// Longest reason or evidence text a daemon note keeps (longer text is cut,
// saying how much was dropped): a refused reload of a file with 100 000
// errors must not fill the event ring, the journal or the log.
inline constexpr std::size_t kMaxEventTextBytes = 4096;
std::string cap_event_text(std::string text);

class LogEventSink;
// Every reload path (SIGHUP, `smctl reload`) runs its work through this: any
// exception (std::bad_alloc from a huge file, or anything else thrown) becomes
// a refused reload ("reload failed, old configuration kept: ..."), recorded as a
// RELOAD_REFUSED note with `via` as evidence; smhad keeps running on the old
// configuration.
control::Reply guard_reload(const char* via, LogEventSink& sink, const std::function<control::Reply()>& body);

// agent::EventSink for the daemon: logs every engine event (logger "sm"), each
// local SM state change once at info as
//   SM_TRANSITION from=STANDBY to=MASTER reason=<the engine event that led to it>
// and keeps the last `capacity` events and the active alarms in memory.
class LogEventSink final : public agent::EventSink {
 public:
  explicit LogEventSink(std::size_t capacity = kEventHistory);
  void event(const sm::RecordEvent& e, TimePoint at) override;
  void alarm(const sm::RaiseAlarm& a, TimePoint at) override;
  void clear(const sm::ClearAlarm& a, TimePoint at) override;
  void hook(const sm::RunHook& h, TimePoint at) override;
  void error(const Error& e, TimePoint at) override;
  // Records a daemon-side event (reload, hold, handover request), logged as
  // SMHAD_<kind> reason=... [evidence=...] with its message id.
  // reason and evidence are kept and logged up to kMaxEventTextBytes each.
  void note(std::string kind, std::string reason, std::string evidence = {});
  // A daemon-side alarm (not from the engine, e.g. "opensm_failed"): shown with
  // the engine's alarms, recorded as an "alarm" event, logged as SM_ALARM.
  // Raising an active alarm again only updates its detail.
  void raise_daemon_alarm(const std::string& kind, const std::string& detail);
  void clear_daemon_alarm(const std::string& kind);

  const std::deque<EventRecord>& events() const { return events_; }
  // Active alarms: kind -> detail.
  const std::map<std::string, std::string>& alarms() const { return alarms_; }
  // The last local SM transition; after an adoption at smhad start, the
  // `adopted` event (the state OpenSM was found in, not an earlier run's cause).
  std::optional<EventRecord> last_transition() const { return last_transition_; }

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
  std::size_t capacity_;
  std::uint64_t seq_ = 0;
  std::deque<EventRecord> events_;
  std::map<std::string, std::string> alarms_;
  std::optional<EventRecord> last_transition_;
  std::string last_cause_;  // the latest non-transition event, as the transition's reason
  std::vector<Listener> listeners_;
  Guid self_;
  NodeNamer namer_;
  std::vector<EventNode> nodes_of(const sm::RecordEvent& e) const;
};

// Config -> the agent's configuration. `own_guid` is the local port GUID (from
// node.port_guid or the opened port). Every peer is found by directed-route
// discovery (PeerAddress::discover; a configured lid or dr_path is an
// override checked against it), so `unaddressed` stays empty (kept for
// callers). Errors: code "policy" (sm::validate),
// the message "<file>:<line>:<col>: <yaml key>: HA policy: ..." naming the
// YAML key the field comes from. smhad --check-config runs it too.
// The engine gets sm_priority and every peer's sm_priority (default: the same)
// and renders from them (doc/ha-engine.md "Rendered priorities"); a hung local
// OpenSM is fenced after (misses + 1) x poll_interval.
Result<agent::AgentConfig> map_config(const config::Config& config, Guid own_guid,
                                      std::vector<std::string>* unaddressed = nullptr);

// JSON of one status reply (doc/control-protocol.md, method status) rendered
// for humans, laid out like `systemctl status`.
std::string render_status_text(const nlohmann::json& status);
// Durations for people: "380ms", "4.2s", "42s", "7m05s", "2h13m", "3d04h"; "-" if
// negative. human_ms: "0.38 ms", "12.3 ms", "250 ms".
std::string human_duration(double seconds);
std::string human_ms(double milliseconds);
// The `sms` reply (doc/census.md) as a table like `chronyc sources`: one
// line per SM the census knows, then what the census walk cost.
std::string render_sms_text(const nlohmann::json& sms);
// One line per event of an `events` reply.
std::string render_events_text(const nlohmann::json& events);

}  // namespace smha::service
