// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/service/service.hpp"

#include <algorithm>
#include <csignal>
#include <fstream>
#include <iomanip>
#include <sstream>

#include <boost/asio/post.hpp>
#include <spdlog/spdlog.h>

#include "smha/core/text.hpp"
#include "smha/opensm/conf.hpp"
#include "smha/platform/logging.hpp"

namespace smha::service {

namespace {

std::shared_ptr<spdlog::logger> sm_log() {
  auto l = spdlog::get("sm");
  if (!l) {
    l = spdlog::default_logger()->clone("sm");
    spdlog::register_logger(l);
  }
  return l;
}

std::string target_key(const mad::Target& t) {
  if (const auto* lid = std::get_if<Lid>(&t)) return "lid:" + std::to_string(lid->value);
  return "dr:" + to_string(std::get<DrPath>(t));
}

std::string port_key(const mad::Target& t, std::uint8_t port) {
  return target_key(t) + " port " + std::to_string(port);
}

}  // namespace

// ---- SupervisedOpensmControl -----------------------------------------------

bool process_stopped(int pid) {
  if (pid <= 0) return false;
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return false;
  // "pid (comm) S ...": comm may hold spaces and parentheses; the state follows the last ')'.
  const auto close = line.rfind(')');
  if (close == std::string::npos || close + 2 >= line.size()) return false;
  const char state = line[close + 2];
  return state == 'T' || state == 't';
}

// ---- RecordingTransport ----------------------------------------------------

void PollStats::record(bool ok, Duration rtt) {
  if (!ok) {
    ++missed;
    return;
  }
  const double s = std::chrono::duration<double>(rtt).count();
  ++answered;
  rtt_sum_s += s;
  for (std::size_t i = 0; i < std::size(kBounds); ++i)
    if (s <= kBounds[i]) ++buckets[i];
}

void RecordingTransport::get_sminfo(const mad::Target& target, const mad::RequestOptions& opts,
                                    mad::SmInfoCallback done) {
  std::weak_ptr<std::map<std::uint64_t, SmSighting>> seen = seen_;
  std::weak_ptr<std::map<std::string, TargetRecord>> targets = targets_;
  std::weak_ptr<PollStats> stats = stats_;
  std::weak_ptr<MasterWatch> master = master_;
  std::weak_ptr<Taps> taps = taps_;
  const Clock* clock = &clock_;
  const TimePoint sent = clock_.now();
  inner_.get_sminfo(target, opts,
                    [seen, targets, stats, master, taps, clock, sent, key = target_key(target),
                     done = std::move(done)](Result<mad::SmInfoReply> r) {
                      auto s = seen.lock();
                      auto t = targets.lock();
                      if (s && t) {
                        const TimePoint now = clock->now();
                        if (auto tp = taps.lock(); tp && tp->sminfo && r.ok()) tp->sminfo(r.value().info, sent, now, key);
                        TargetRecord rec;
                        rec.at = now;
                        rec.answered = r.ok();
                        if (auto st = stats.lock()) st->record(r.ok(), r.ok() ? r.value().rtt : Duration{});
                        if (r.ok()) {
                          rec.guid = r.value().info.guid;
                          (*s)[r.value().info.guid.value] = SmSighting{r.value().info, r.value().rtt, now};
                          if (auto m = master.lock())
                            m->observe(r.value().info, now, std::chrono::system_clock::now());
                        }
                        (*t)[key] = rec;
                      }
                      done(std::move(r));
                    });
}

void RecordingTransport::set_sminfo(const mad::Target& target, SmInfoModifier mod,
                                    const SmInfo& payload, const mad::RequestOptions& opts,
                                    mad::SmInfoCallback done) {
  if (read_only_ || hold_.held) {
    done(make_error(read_only_ ? "observe" : "hold",
                    std::string("SubnSet(SMInfo) refused: ") +
                        (read_only_ ? "observe mode" : "maintenance hold")));
    return;
  }
  inner_.set_sminfo(target, mod, payload, opts, std::move(done));
}

void RecordingTransport::get_port_info(const mad::Target& target, std::uint8_t port,
                                       const mad::RequestOptions& opts,
                                       mad::PortInfoCallback done) {
  std::weak_ptr<std::map<std::string, PortRecord>> ports = ports_;
  std::weak_ptr<Taps> taps = taps_;
  const Clock* clock = &clock_;
  const TimePoint sent = clock_.now();
  const auto* dr = std::get_if<DrPath>(&target);
  const bool local = dr != nullptr && dr->hops.empty();
  inner_.get_port_info(target, port, opts,
                       [ports, taps, clock, sent, local, key = port_key(target, port),
                        done = std::move(done)](Result<mad::PortInfoReply> r) {
                         if (auto p = ports.lock()) {
                           PortRecord& rec = (*p)[key];
                           rec.at = clock->now();
                           if (auto tp = taps.lock(); tp && tp->local_port && local && r.ok())
                             tp->local_port(r.value().info, sent, rec.at);
                           rec.answered = r.ok();
                           if (r.ok()) {
                             rec.info = r.value().info;
                             rec.info_at = rec.at;
                           }
                         }
                         done(std::move(r));
                       });
}

std::optional<PortRecord> RecordingTransport::last_port_info(const mad::Target& target,
                                                             std::uint8_t port) const {
  auto it = ports_->find(port_key(target, port));
  if (it == ports_->end()) return std::nullopt;
  return it->second;
}

void MasterWatch::observe(const SmInfo& info, TimePoint now, std::chrono::system_clock::time_point wall) {
  if (info.state == SmState::Master) {
    if (rec_ && rec_->guid == info.guid) return;
    // Exact when something was known before (another master, or none after
    // one), or this SM was seen in another state first.
    const bool exact = rec_.has_value() || seen_not_master_.count(info.guid.value) != 0;
    rec_ = MasterRecord{info.guid, now, wall, exact};
    return;
  }
  if (seen_not_master_.size() < 4096) seen_not_master_.insert(info.guid.value);
  if (rec_ && rec_->guid == info.guid) rec_ = MasterRecord{std::nullopt, now, wall, true};
}

std::optional<SmSighting> RecordingTransport::last_seen(Guid guid) const {
  auto it = seen_->find(guid.value);
  if (it == seen_->end()) return std::nullopt;
  return it->second;
}

std::optional<TargetRecord> RecordingTransport::last_query(const mad::Target& target) const {
  auto it = targets_->find(target_key(target));
  if (it == targets_->end()) return std::nullopt;
  return it->second;
}

// ---- LogEventSink ----------------------------------------------------------

LogEventSink::LogEventSink(std::size_t capacity) : capacity_(capacity) {}

void LogEventSink::push(EventRecord r) {
  r.seq = ++seq_;
  r.wall = std::chrono::system_clock::now();
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
    if (e.kind == "transition" && (!last_transition_ || e.seq > last_transition_->seq)) last_transition_ = e;
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
    std::string from = e.reason, to;
    if (auto pos = e.reason.find("->"); pos != std::string::npos) {
      from = e.reason.substr(0, pos);
      to = e.reason.substr(pos + 2);
    }
    const std::string cause = last_cause_.empty() ? "observed" : last_cause_;
    platform::log_event(*log, platform::kSmTransition, {{"from", from}, {"to", to}, {"reason", cause}});
    EventRecord r{0, {}, "transition", e.reason, cause, at, nodes};
    push(r);
    last_transition_ = events_.back();
    return;
  }
  last_cause_ = std::string(sm::to_string(e.kind)) + (e.reason.empty() ? "" : ": " + e.reason);
  platform::LogFields fields{{"kind", std::string(sm::to_string(e.kind))}, {"reason", e.reason},
                             {"evidence", e.evidence}};
  if (!nodes.empty()) fields.emplace_back("nodes", nodes_text(nodes));
  platform::log_event(*log, platform::kSmEvent, fields);
  push(EventRecord{0, {}, std::string(sm::to_string(e.kind)), e.reason, e.evidence, at, nodes});
  if (e.kind == sm::EventKind::Adopted) last_transition_ = events_.back();
}

void LogEventSink::alarm(const sm::RaiseAlarm& a, TimePoint) {
  const std::string kind(sm::to_string(a.kind));
  platform::log_event(*sm_log(), platform::kSmAlarm, {{"kind", kind}, {"detail", a.detail}},
                      spdlog::level::warn);
  alarms_[kind] = a.detail;
  push(EventRecord{0, {}, "alarm", kind, a.detail});
}

void LogEventSink::clear(const sm::ClearAlarm& a, TimePoint) {
  const std::string kind(sm::to_string(a.kind));
  if (alarms_.erase(kind) == 0) return;
  platform::log_event(*sm_log(), platform::kSmAlarmCleared, {{"kind", kind}});
  push(EventRecord{0, {}, "alarm_cleared", kind, {}});
}

void LogEventSink::hook(const sm::RunHook& h, TimePoint) {
  sm_log()->debug("hook {} {} {} {}", h.event, to_string(h.new_state), to_string(h.old_state),
                  h.priority);
}

void LogEventSink::error(const Error& e, TimePoint) {
  platform::log_event(*sm_log(), platform::kSmActionFailed,
                      {{"code", e.code}, {"message", e.message}}, spdlog::level::warn);
  push(EventRecord{0, {}, "error", e.code, e.message});
}

std::string cap_event_text(std::string text) {
  if (text.size() <= kMaxEventTextBytes) return text;
  const std::size_t cut = text.size() - kMaxEventTextBytes;
  text.resize(kMaxEventTextBytes);
  while (!text.empty() && (static_cast<unsigned char>(text.back()) & 0xC0) == 0x80) text.pop_back();  // whole UTF-8
  if (!text.empty() && (static_cast<unsigned char>(text.back()) & 0x80)) text.pop_back();
  return text + "... (" + std::to_string(cut) + " more bytes not kept)";
}

control::Reply guard_reload(const char* via, LogEventSink& sink, const std::function<control::Reply()>& body) {
  std::string what;
  try {
    return body();
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
    what = "an exception that is not a std::exception";
  }
  try {
    sink.note("RELOAD_REFUSED", "reload failed: " + what, via);
  } catch (...) {
    // Out of memory again while recording it: the reply still says why.
  }
  return control::Reply::failure(control::ResultCode::Error, "reload failed, old configuration kept: " + what);
}

void LogEventSink::note(std::string kind, std::string reason, std::string evidence) {
  reason = cap_event_text(std::move(reason));
  evidence = cap_event_text(std::move(evidence));
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
  push(EventRecord{0, {}, std::move(kind), std::move(reason), std::move(evidence)});
}

void LogEventSink::raise_daemon_alarm(const std::string& kind, const std::string& detail) {
  const bool fresh = alarms_.count(kind) == 0;
  alarms_[kind] = detail;
  if (!fresh) return;
  platform::log_event(*sm_log(), platform::kSmAlarm, {{"kind", kind}, {"detail", detail}},
                      spdlog::level::warn);
  push(EventRecord{0, {}, "alarm", kind, detail});
}

void LogEventSink::clear_daemon_alarm(const std::string& kind) {
  if (alarms_.erase(kind) == 0) return;
  platform::log_event(*sm_log(), platform::kSmAlarmCleared, {{"kind", kind}});
  push(EventRecord{0, {}, "alarm_cleared", kind, {}});
}

// ---- map_config ------------------------------------------------------------

namespace {

// sm::validate names the HaPolicy field ("poll_interval: ...",
// "peers[head02].guid: ..."); the operator needs the YAML key that set it and
// its position. Derived bounds (hang_timeout, takeover_bound ...) point at the
// poll interval they follow from.
Error policy_error_at(const config::Config& c, const Error& e) {
  const std::string& m = e.message;
  const std::string field = m.substr(0, m.find_first_of(":[."));
  std::string key = "failover.poll_interval_ms";
  if (field == "misses") key = "failover.misses_before_takeover";
  else if (field == "base_priority" || field == "priority") key = "sm_priority";
  else if (field == "own_guid") key = "node.port_guid";
  else if (field == "preferred_master") key = "failover";
  else if (field == "peers") {
    key = "peers";
    const auto open = m.find('[');
    const auto close = m.find(']');
    if (open != std::string::npos && close != std::string::npos && close > open) {
      const std::string name = m.substr(open + 1, close - open - 1);
      for (std::size_t i = 0; i < c.peers.size(); ++i)
        if (c.peers[i].name == name)
          key = "peers[" + std::to_string(i) + "]" +
                (m.find("].priority", open) == close ? ".sm_priority" : ".port_guid");
    }
  }
  config::Diagnostic d{c.source_path, c.position_of(key), key, "HA policy: " + m};
  return Error{e.code, d.to_string()};
}

}  // namespace

Result<agent::AgentConfig> map_config(const config::Config& c, Guid own_guid,
                                      std::vector<std::string>* unaddressed) {
  agent::AgentConfig a;
  sm::HaPolicy& p = a.policy;
  p.node_name = c.node_name;
  p.own_guid = own_guid;
  for (const auto& peer : c.peers) {
    std::optional<std::uint8_t> prio;
    if (peer.sm_priority) prio = static_cast<std::uint8_t>(*peer.sm_priority);
    p.peers.push_back(sm::PeerSpec{peer.name, peer.port_guid, prio});
    // Every peer is found by its port GUID (doc/discovery.md); a configured
    // lid or dr_path is an override, checked against what discovery finds.
    a.peers.push_back(
        agent::PeerAddress{peer.port_guid, peer.lid.value_or(Lid{}), peer.dr_path, true});
    (void)unaddressed;  // no peer is unaddressed any more
  }
  p.poll_interval = c.failover.poll_interval;
  p.misses = c.failover.misses_before_takeover;
  p.failback = c.failover.failback == config::FailbackPolicy::Preempt ? sm::FailbackMode::Preempt
                                                                      : sm::FailbackMode::Sticky;
  p.preempt_hold_down = c.failover.preempt_holddown;
  p.base_priority = static_cast<std::uint8_t>(std::clamp(c.sm_priority, 0, 15));
  p.hang_timeout = (p.misses + 1) * p.poll_interval;
  // Bounds that must cover at least a round (sm::validate) follow a long
  // poll interval; at the default interval they keep the engine's defaults.
  p.takeover_bound = std::max(p.takeover_bound, p.poll_interval);
  p.handover_bound = std::max(p.handover_bound, p.poll_interval);
  p.unresponsive_timeout = std::max(p.unresponsive_timeout, p.hang_timeout);
  p.query_window = agent::query_window_for(a);  // what the agent will use
  if (auto st = sm::validate(p); !st.ok()) return policy_error_at(c, st.error());
  return a;
}

// ---- human rendering -------------------------------------------------------

namespace {

// Every field shown goes through printable(): names, reasons and evidence may
// carry what the fabric or OpenSM wrote (ANSI escapes, bytes that are not UTF-8).
std::string str(const nlohmann::json& j, const char* key, const char* dflt = "-") {
  if (!j.contains(key) || j[key].is_null()) return dflt;
  if (j[key].is_string()) return printable(j[key].get<std::string>());
  return printable(j[key].dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

std::string age_text(const nlohmann::json& j, const char* key) {
  if (!j.contains(key) || j[key].is_null() || !j[key].is_number()) return "never";
  return human_duration(j[key].get<double>()) + " ago";
}

// A duration field in seconds for people, "-" when absent.
std::string duration_field(const nlohmann::json& j, const char* key) {
  if (!j.contains(key) || !j[key].is_number()) return "-";
  return human_duration(j[key].get<double>());
}

}  // namespace

std::string human_duration(double seconds) {
  if (!(seconds >= 0)) return "-";  // also NaN
  if (seconds < 1) return fmt::format("{:.0f}ms", seconds * 1000);
  if (seconds < 10) return fmt::format("{:.1f}s", seconds);
  auto s = static_cast<long long>(seconds);
  if (s < 60) return fmt::format("{}s", s);
  if (s < 3600) return fmt::format("{}m{:02}s", s / 60, s % 60);
  if (s < 86400) return fmt::format("{}h{:02}m", s / 3600, s % 3600 / 60);
  return fmt::format("{}d{:02}h", s / 86400, s % 86400 / 3600);
}

std::string human_ms(double ms) {
  if (!(ms >= 0)) return "-";
  if (ms < 10) return fmt::format("{:.2f} ms", ms);
  if (ms < 100) return fmt::format("{:.1f} ms", ms);
  return fmt::format("{:.0f} ms", ms);
}

std::string render_status_text(const nlohmann::json& s) {
  std::ostringstream o;
  const auto& local = s.value("local", nlohmann::json::object());
  const std::string role = str(s, "role");
  o << (role == "master" ? "\u25cf " : "\u25cb ") << "smhad " << str(s, "node") << " - "
    << (s.value("observe", false) ? "observing" : "managing") << " OpenSM\n";
  if (s.contains("smhad_version") || s.contains("uptime_s"))
    o << "    smhad: " << str(s, "smhad_version") << ", up " << duration_field(s, "uptime_s") << "\n";
  o << "     Role: " << role;
  if (s.contains("hold") && s["hold"].value("held", false)) o << " (HOLD: " << str(s["hold"], "reason") << ")";
  o << "\n";
  if (s.contains("mastership") && s["mastership"].is_object()) {
    const auto& m = s["mastership"];
    if (m.contains("guid") && m["guid"].is_string()) {
      const std::string node = str(m, "node", "");
      o << "   Master: " << (node.empty() ? "unknown SM" : node) << " (" << str(m, "guid") << ") since "
        << (m.value("exact", false) ? "" : "at least ") << str(m, "since") << ", "
        << duration_field(m, "for_s") << "\n";
    } else {
      o << "   Master: none since " << str(m, "since") << ", " << duration_field(m, "for_s") << "\n";
    }
  }
  if (s.contains("last_change") && s["last_change"].is_object()) {
    const auto& c = s["last_change"];
    o << "  Changed: " << str(c, "kind") << " (" << str(c, "reason") << ") at " << str(c, "time") << ", "
      << str(c, "outcome");
    if (c.contains("duration_s") && c["duration_s"].is_number()) o << " in " << duration_field(c, "duration_s");
    o << "\n";
  }
  o << " Local SM: " << str(local, "state") << "  prio " << str(local, "priority") << "  guid "
    << str(local, "guid") << "  lid " << str(local, "lid") << "  actcount " << str(local, "act_count")
    << "  (" << age_text(local, "last_poll_age_s") << ")\n";
  if (local.contains("port_state"))
    o << "     Port: " << str(local, "port_state") << "  (" << str(local, "port_state_source", "sysfs")
      << (str(local, "port_state_source", "") == "smp" ? ", PortInfo " + age_text(local, "port_state_age_s")
                                                          : std::string())
      << ")\n";
  if (s.contains("opensm")) {
    const auto& osm = s["opensm"];
    o << "   OpenSM: " << str(osm, "supervisor") << "  pid " << str(osm, "pid") << "  uptime "
      << duration_field(osm, "uptime_s") << "  restarts " << str(osm, "restarts")
      << (osm.value("adopted", false) ? "  (adopted)" : "");
    if (!str(osm, "reason", "").empty()) o << "\n           " << str(osm, "reason");
    o << "\n";
  }
  o << "    Peers:\n";
  for (const auto& p : s.value("peers", nlohmann::json::array())) {
    o << "           " << str(p, "name") << "  " << str(p, "state") << "  prio " << str(p, "priority")
      << "  guid " << str(p, "guid") << "  lid " << str(p, "lid") << "  rtt "
      << (p.contains("rtt_ms") && p["rtt_ms"].is_number() ? human_ms(p["rtt_ms"].get<double>()) : "-")
      << "  (" << age_text(p, "last_answer_age_s") << ")";
    // NodeDescription next to the GUID (escaped by smhad), and the route found.
    if (!str(p, "node_description", "").empty()) o << "  \"" << str(p, "node_description") << "\"";
    if (!str(p, "dr_path", "").empty()) o << "  dr " << str(p, "dr_path");
    o << "\n";
  }
  // Every SM on the fabric (the census), heads and others.
  if (s.contains("sms") && s["sms"].is_array() && !s["sms"].empty()) {
    o << "      SMs:\n";
    for (const auto& x : s["sms"]) {
      const std::string head = str(x, "head", "");
      o << "           " << (x.value("local", false) ? "this node" : head.empty() ? "NOT A HEAD" : head) << "  "
        << str(x, "state") << "  prio " << str(x, "priority") << "  guid " << str(x, "guid") << "  lid "
        << str(x, "lid");
      if (!str(x, "node_description", "").empty()) o << "  \"" << str(x, "node_description") << "\"";
      if (!str(x, "switch_guid", "").empty())
        o << "  at " << str(x, "switch_guid") << " port " << str(x, "switch_port");
      o << "\n";
    }
  }
  if (s.contains("policy")) {
    const auto& pol = s["policy"];
    o << "   Policy: poll " << str(pol, "poll_interval_ms") << "ms x " << str(pol, "misses")
      << " misses, failback " << str(pol, "failback") << ", base priority "
      << str(pol, "base_priority") << "\n";
  }
  // Config drift between heads (doc/drift.md): each peer's verdict.
  if (s.contains("drift") && s["drift"].is_object() && !s["drift"].value("peers", nlohmann::json::array()).empty()) {
    const auto& d = s["drift"];
    o << "    Drift: " << (d.contains("own") && d["own"].is_object() ? "" : "(own digests not computed) ");
    bool first = true;
    for (const auto& p : d["peers"]) {
      o << (first ? "" : "\n           ") << str(p, "name") << " " << str(p, "state") << " (" << str(p, "detail") << ")";
      first = false;
    }
    o << "\n";
  }
  o << "   Alarms: ";
  const auto alarms = s.value("alarms", nlohmann::json::array());
  if (alarms.empty()) o << "none";
  for (const auto& a : alarms) o << str(a, "kind") << " (" << str(a, "detail") << ") ";
  o << "\n";
  if (s.contains("last_transition") && !s["last_transition"].is_null()) {
    const auto& t = s["last_transition"];
    const std::string kind = str(t, "kind", "transition");
    o << "     Last: " << (kind == "transition" ? std::string() : kind + ": ") << str(t, "reason") << " ("
      << str(t, "evidence") << ") at " << str(t, "time") << "\n";
  }
  return o.str();
}

std::string render_sms_text(const nlohmann::json& j) {
  // Like `chronyc sources`: a legend, a header, one line per SM.
  std::ostringstream o;
  o << "H = head (* this node, + peer, ! not a configured head)\n";
  o << fmt::format("{:<1} {:<18} {:<11} {:>4} {:>5} {:<24} {:<14} {:>7}  {}\n", "H", "Port GUID", "State", "Prio",
                   "LID", "Cabled at (switch port)", "Head", "Answer", "NodeDescription");
  o << std::string(110, '=') << "\n";
  for (const auto& x : j.value("sms", nlohmann::json::array())) {
    const std::string head = str(x, "head", "");
    const char* mark = x.value("local", false) ? "*" : head.empty() ? "!" : "+";
    std::string at = "-";
    if (!str(x, "switch_guid", "").empty()) at = str(x, "switch_guid") + " " + str(x, "switch_port");
    std::string ago = "never";
    if (x.contains("last_answer_age_s") && x["last_answer_age_s"].is_number())
      ago = human_duration(x["last_answer_age_s"].get<double>());
    o << fmt::format("{:<1} {:<18} {:<11} {:>4} {:>5} {:<24} {:<14} {:>7}  {}\n", mark, str(x, "guid"),
                     str(x, "state"), str(x, "priority"), str(x, "lid"), at, head.empty() ? "-" : head, ago,
                     str(x, "node_description"));
  }
  if (j.contains("census") && j["census"].is_object()) {
    const auto& c = j["census"];
    o << "\nCensus: " << (c.value("enabled", true) ? "" : "disabled, ") << str(c, "walks") << " walks ("
      << str(c, "walk_mads") << " MADs), " << str(c, "query_mads") << " SMInfo MADs";
    if (c.contains("last_walk") && c["last_walk"].is_object()) {
      const auto& w = c["last_walk"];
      o << "; last walk " << age_text(c, "last_walk_age_s") << ": " << str(w, "nodes") << " nodes, "
        << str(w, "ports") << " ports, " << str(w, "mads") << " MADs, " << str(w, "sm_ports") << " IsSM ports"
        << (w.value("bounded", false) ? " (cut by a bound)" : "");
    }
    if (c.contains("next_walk_in_s") && c["next_walk_in_s"].is_number())
      o << "; next in " << duration_field(c, "next_walk_in_s");
    if (c.value("dropped", 0) > 0) o << "; " << str(c, "dropped") << " SMs not kept (limit)";
    o << "\n";
    if (c.contains("sa") && c["sa"].is_object()) {
      const auto& sa = c["sa"];
      o << "SA table: ";
      if (sa.value("queries", 0) == 0 && str(sa, "last_error", "").empty()) {
        o << "not asked yet";
      } else {
        o << "lid " << str(sa, "sa_lid") << ", " << str(sa, "tables") << " of " << str(sa, "queries")
          << " answered (" << str(sa, "mads") << " MADs)";
        if (sa.contains("last_age_s") && sa["last_age_s"].is_number()) {
          o << "; last " << age_text(sa, "last_age_s") << ": " << str(sa, "records") << " records";
          if (sa.contains("claimed") && sa["claimed"].is_number()) o << " of " << str(sa, "claimed");
          if (sa.value("truncated", false)) o << ", TRUNCATED";
        }
        if (!str(sa, "last_error", "").empty()) o << "; last error: " << str(sa, "last_error");
      }
      o << "\n";
    }
  }
  return o.str();
}

std::string render_events_text(const nlohmann::json& j) {
  std::ostringstream o;
  for (const auto& e : j.value("events", nlohmann::json::array())) {
    o << str(e, "time") << "  " << str(e, "kind") << "  " << str(e, "reason");
    if (!str(e, "evidence", "").empty()) o << "  [" << str(e, "evidence") << "]";
    // The SMs it is about, with the names people know (NodeDescription).
    std::string about;
    for (const auto& n : e.value("nodes", nlohmann::json::array())) {
      if (!n.is_object()) continue;
      if (!about.empty()) about += "; ";
      if (!str(n, "name", "").empty()) about += str(n, "name") + " ";
      about += str(n, "guid");
      if (!str(n, "node_description", "").empty()) about += " \"" + str(n, "node_description") + "\"";
    }
    if (!about.empty()) o << "  (" << about << ")";
    o << "\n";
  }
  return o.str();
}

}  // namespace smha::service
