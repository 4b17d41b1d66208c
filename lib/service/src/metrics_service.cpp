// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/service/metrics_service.hpp"

#include <cctype>

#include <spdlog/spdlog.h>

#include "smha/service/event_journal.hpp"
#include "smha/sm/ha_machine.hpp"

namespace smha::service {

using nlohmann::json;

namespace {

std::optional<SmState> sm_state(const json& j) {
  if (!j.is_string()) return std::nullopt;
  const auto s = j.get<std::string>();
  for (auto st : {SmState::NotActive, SmState::Discovering, SmState::Standby, SmState::Master})
    if (s == to_string(st)) return st;
  return std::nullopt;
}

}  // namespace

void FailoverStats::observe(const EventRecord& e) {
  using sm::EventKind;
  const auto k = e.type == EventType::Engine ? e.engine_kind : std::nullopt;
  if (k == EventKind::TakeoverStarted || k == EventKind::HandoverStarted) {
    started_ = e.at;
    episode_ = k == EventKind::TakeoverStarted ? "takeover" : e.preempt ? "preempt" : "handover";
    change_ = MastershipChange{episode_, e.evidence.empty() ? e.reason : e.reason + ": " + e.evidence, "running",
                               e.wall, std::nullopt};
    change_at_ = e.at;
    return;
  }
  const bool ended = k == EventKind::TakeoverDone || k == EventKind::HandoverDone;
  const bool failed = k == EventKind::TakeoverAborted || k == EventKind::HandoverRolledBack;
  if ((ended || failed) && change_ && change_->outcome == "running") {
    change_->outcome = ended ? "done" : k == EventKind::TakeoverAborted ? "aborted" : "rolled_back";
    if (e.at >= change_at_) change_->duration_s = std::chrono::duration<double>(e.at - change_at_).count();
  }
  if (failed) {
    started_.reset();
    episode_.clear();
    return;
  }
  if (e.type != EventType::Transition) return;
  if (e.to == SmState::Master) {
    ++by_reason_[episode_.empty() ? "start" : episode_];
    if (started_ && e.at >= *started_) last_ = std::chrono::duration<double>(e.at - *started_).count();
  }
  started_.reset();
  episode_.clear();
}

control::MetricsSnapshot metrics_snapshot(const json& s, const PollStats& polls, const FailoverStats& failovers) {
  control::MetricsSnapshot m;
  m.node = s.value("node", std::string());
  m.role = s.value("role", std::string("init"));
  m.roles = {"init", "starting", "standby", "master", "taking_over", "recovering", "handing_over"};
  const json local = s.value("local", json::object());
  if (local.contains("guid")) {
    control::SmMetrics sm;
    sm.node = m.node;
    sm.guid = parse_guid(local.value("guid", std::string())).value_or(Guid{});
    const auto st = sm_state(local.value("state", json()));
    sm.answered = st.has_value();
    if (st) {
      sm.state = *st;
      sm.priority = local.value("priority", std::uint8_t{0});
    }
    m.sms.push_back(sm);
  }
  for (const auto& p : s.value("peers", json::array())) {
    control::SmMetrics sm;
    sm.node = p.value("name", std::string());
    sm.guid = parse_guid(p.value("guid", std::string())).value_or(Guid{});
    const auto st = sm_state(p.value("state", json()));
    sm.answered = st.has_value();
    if (st) {
      sm.state = *st;
      sm.priority = p.value("priority", std::uint8_t{0});
    }
    m.sms.push_back(sm);
  }
  for (const auto& x : s.value("sms", json::array())) {
    if (!x.is_object() || !x.contains("state") || !x["state"].is_string()) continue;
    std::string st = x["state"].get<std::string>();
    for (auto& ch : st) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    ++m.fabric_sms[st];
  }
  if (const json lc = s.value("lid_continuity", json::object()); lc.is_object() && lc.value("enabled", false)) {
    control::MetricsSnapshot::LidContinuity l;
    l.entries = lc.value("entries", std::uint64_t{0});
    l.writes = lc.value("writes", std::uint64_t{0});
    l.write_errors = lc.value("write_errors", std::uint64_t{0});
    if (lc.contains("rejected") && lc["rejected"].is_object()) {
      const json& rejected = lc["rejected"];
      for (auto it = rejected.begin(); it != rejected.end(); ++it)
        if (it->is_number_unsigned()) l.rejected[it.key()] = it->get<std::uint64_t>();
    }
    m.lid_continuity = l;
  }
  m.failovers_by_reason = failovers.by_reason();
  for (const char* r : {"takeover", "handover", "preempt", "start"}) m.failovers_by_reason.emplace(r, 0);
  m.last_takeover_seconds = failovers.last_takeover_seconds();
  m.poll_rtt.bounds.assign(std::begin(PollStats::kBounds), std::end(PollStats::kBounds));
  m.poll_rtt.counts.assign(std::begin(polls.buckets), std::end(polls.buckets));
  m.poll_rtt.count = polls.answered;
  m.poll_rtt.sum = polls.rtt_sum_s;
  m.missed_polls = polls.missed;
  if (s.contains("opensm")) m.opensm_restarts = s["opensm"].value("restarts", std::uint64_t{0});
  for (const auto& a : s.value("alarms", json::array())) m.active_alarms.push_back(a.value("kind", std::string()));
  m.hold_active = s.value("hold", json::object()).value("held", false);
  for (int k = 0;; ++k) {  // every engine alarm, then smhad's own
    const auto name = sm::to_string(static_cast<sm::AlarmKind>(k));
    if (name == "unknown") break;
    m.known_alarms.emplace_back(name);
  }
  for (const auto a : kDaemonAlarms) m.known_alarms.emplace_back(to_string(a));
  if (s.contains("drift") && s["drift"].is_object()) {
    const auto& d = s["drift"];
    if (d.contains("own") && d["own"].is_object())
      for (const auto& [k, v] : d["own"].items())
        if (v.is_string()) m.config_digests.emplace_back(k, v.get<std::string>());
    for (const auto& p : d.value("peers", json::array()))
      if (p.is_object()) m.drift_peers.emplace_back(p.value("name", std::string()), p.value("state", std::string()));
    const auto rej = d.value("rejected", json::object());
    for (const char* r : {"foreign", "bad_digest"}) m.drift_rejected[r] = rej.value(r, std::uint64_t{0});
  }
  m.version = s.value("smhad_version", std::string());
  auto unix_time = [&](const char* key) -> std::optional<double> {
    if (!s.contains(key) || !s[key].is_string()) return std::nullopt;
    auto t = parse_utc(s[key].get<std::string>());
    if (!t) return std::nullopt;
    return std::chrono::duration<double>(t->time_since_epoch()).count();
  };
  m.start_time = unix_time("started_at");
  m.last_reload_success = unix_time("config_loaded_at");
  return m;
}

MetricsService::MetricsService(boost::asio::io_context& io, config::MetricsSettings settings, os::FileSystem& fs,
                               Render render)
    : io_(io), settings_(std::move(settings)), fs_(fs), render_(std::move(render)) {}

MetricsService::~MetricsService() { stop(); }

Status MetricsService::attach(control::ControlServer& server) {
  return server.register_method(control::method::kMetrics, control::Access::ReadOnly, [this](const control::Call&) {
    return control::Reply::ok(json{{"content_type", "text/plain; version=0.0.4"}, {"text", render_()}});
  });
}

std::string MetricsService::textfile_path() const {
  return settings_.textfile_dir.empty() ? std::string() : settings_.textfile_dir + "/" + kTextfileName;
}

Status MetricsService::start() {
  if (!settings_.listen_address.empty()) {
    control::MetricsHttpOptions o;
    o.address = settings_.listen_address;
    o.port = static_cast<std::uint16_t>(settings_.listen_port);
    http_ = std::make_unique<control::MetricsHttpServer>(io_, o, render_);
    if (auto st = http_->start(); !st.ok()) {
      http_.reset();
      return st;
    }
    spdlog::info("metrics: serving http://{}:{}/metrics", settings_.listen_address, http_->port());
  }
  if (!settings_.textfile_dir.empty()) {
    timer_ = std::make_unique<boost::asio::steady_timer>(io_);
    timer_->expires_after(std::chrono::seconds(0));  // the first write once the loop runs
    timer_->async_wait([this](const boost::system::error_code& ec) {
      if (ec) return;
      (void)write_textfile();
      arm_textfile();
    });
  }
  return Status::Ok();
}

void MetricsService::stop() {
  if (http_) http_->stop();
  if (timer_) timer_->cancel();
}

Status MetricsService::write_textfile() {
  auto st = fs_.write_atomic(textfile_path(), render_(), 0644);
  // Logged once when the writes start failing and once when they work again: the
  // message itself may differ per attempt (it names the temporary file).
  if (!st.ok() && !textfile_failing_) {
    spdlog::warn("metrics: cannot write {}: {} (retried every {}s; logged again when it works)",
                 textfile_path(), st.error().message, settings_.textfile_interval.count());
  } else if (st.ok() && textfile_failing_) {
    spdlog::info("metrics: writing {} again", textfile_path());
  }
  textfile_failing_ = !st.ok();
  return st;
}

void MetricsService::arm_textfile() {
  timer_->expires_after(settings_.textfile_interval);
  timer_->async_wait([this](const boost::system::error_code& ec) {
    if (ec) return;
    (void)write_textfile();
    arm_textfile();
  });
}

}  // namespace smha::service
