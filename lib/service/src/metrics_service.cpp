// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/service/metrics_service.hpp"

#include <cctype>

#include <spdlog/spdlog.h>

#include "smha/head/event_journal.hpp"
#include "smha/sm/ha_machine.hpp"

namespace smha::service {

using head::FailoverStats;
using head::HeadStatus;
using head::PollStats;
using head::SmView;

using nlohmann::json;

control::ContinuityMetrics continuity_metrics(const peer::Continuity& c) {
  control::ContinuityMetrics m;
  m.sending = c.sending();
  m.sa_copy_age_s = c.copy_age_s(peer::FrameKind::SaDump);
  m.guid2lid_copy_age_s = c.copy_age_s(peer::FrameKind::Guid2Lid);
  if (const auto& h = c.store().held(peer::FrameKind::SaDump)) {
    m.sa_groups = h->sa.groups.size();
    m.sa_members = h->sa.members;
    m.sa_services = h->sa.services;
    m.sa_subscriptions = h->sa.informs;
  }
  m.received = c.store().received();
  m.applied = c.store().applied();
  for (std::size_t i = 0; i < peer::kRefuseReasons; ++i)
    m.refused[std::string(peer::to_string(static_cast<peer::RefuseReason>(i)))] = c.store().refused()[i];
  m.sent = c.sender().sent();
  const auto& k = c.channel().counters();
  m.handshake_failed = k.handshake_failed;
  m.unknown_identity = k.unknown_identity;
  m.protocol_errors = k.protocol_errors;
  m.rejected_source_limit = k.rejected_source_limit;
  m.rejected_rate = k.rejected_rate;
  m.rejected_memory = k.rejected_memory;
  m.preauth_timeouts = k.preauth_timeouts;
  for (const auto& l : c.channel().links()) m.peer_up[l.name] = l.outbound == peer::LinkState::Up;
  return m;
}

control::MetricsSnapshot metrics_snapshot(const HeadStatus& s, const PollStats& polls, const FailoverStats& failovers) {
  control::MetricsSnapshot m;
  m.node = s.node;
  m.fabric = s.fabric;
  m.role = std::string(sm::to_string(s.role));
  m.roles = {"init", "starting", "standby", "master", "taking_over", "recovering", "handing_over"};
  auto sm_metrics = [](const std::string& node, const SmView& v) {
    control::SmMetrics sm;
    sm.node = node;
    sm.guid = v.guid;
    const auto st = v.state();
    sm.answered = st.has_value();
    if (st) {
      sm.state = *st;
      sm.priority = v.answer ? v.answer->priority : 0;
    }
    return sm;
  };
  m.sms.push_back(sm_metrics(m.node, s.local));
  for (const auto& p : s.peers) m.sms.push_back(sm_metrics(p.name, p));
  m.fabric_sms = s.fabric_sms;
  if (s.lid_continuity) {
    control::MetricsSnapshot::LidContinuity l;
    l.entries = s.lid_continuity->entries;
    l.writes = s.lid_continuity->writes;
    l.write_errors = s.lid_continuity->write_errors;
    l.rejected = s.lid_continuity->rejected;
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
  m.opensm_restarts = s.opensm_restarts.value_or(0);
  for (const auto& a : s.alarms) m.active_alarms.emplace_back(to_string(a.kind));
  m.hold_active = s.held;
  for (const AlarmKind k : kAlarmKinds) m.known_alarms.emplace_back(to_string(k));
  m.config_digests = s.drift.own;
  m.drift_peers = s.drift.peers;
  m.drift_rejected = s.drift.rejected;
  if (s.health) {
    control::MetricsSnapshot::Health h;
    h.links_by_kind = {s.health->links_by_kind.begin(), s.health->links_by_kind.end()};
    h.degraded_by_kind = {s.health->degraded_by_kind.begin(), s.health->degraded_by_kind.end()};
    h.degraded = s.health->degraded;
    h.unknown = s.health->unknown;
    for (const auto& x : s.health->worst) h.worst.push_back({x.a, x.b, x.active, x.should, x.why, x.fraction});
    m.health = std::move(h);
  }
  m.errors = s.errors;
  m.version = s.version;
  auto unix_time = [](WallTime t) -> std::optional<double> {
    if (t == WallTime{}) return std::nullopt;
    return std::chrono::duration<double>(t.time_since_epoch()).count();
  };
  m.start_time = unix_time(s.started);
  m.last_reload_success = unix_time(s.config_loaded);
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
  return settings_.textfile_dir.empty() ? std::string() : settings_.textfile_dir + "/" + settings_.textfile_name;
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
