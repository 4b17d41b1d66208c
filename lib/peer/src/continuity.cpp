// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/peer/continuity.hpp"

#include <cstdio>

#include <spdlog/spdlog.h>

namespace smha::peer {

namespace {

using nlohmann::json;

double seconds_between(WallTime a, WallTime b) { return std::chrono::duration<double>(b - a).count(); }


}  // namespace

Continuity::Continuity(boost::asio::io_context& io, ContinuityConfig cfg, os::FileSystem& fs, const Clock& clock,
                       Scheduler& sched, Facts facts, fabric::AlarmSink& alarms)
    : cfg_(std::move(cfg)),
      clock_(clock),
      sched_(sched),
      facts_(std::move(facts)),
      alarms_(alarms),
      store_(cfg_.store, fs, clock),
      sender_(cfg_.sender, fs, clock) {
  channel_ = std::make_unique<PeerChannel>(
      io, cfg_.channel, clock,
      [this](FrameKind kind, const CopyMeta& meta, std::string_view body, const std::string& tls_peer) {
        auto v = store_.offer(kind, meta, body, tls_peer, facts_());
        // One line per change of what is refused (a master re-sends every
        // refresh interval: the same refusal is counted, not logged again).
        const std::string line = v.applied ? std::string() : std::string(to_string(v.reason)) + ": " + v.text;
        if (!line.empty() && line != logged_refusal_)
          spdlog::warn("continuity: copy from {} refused ({})", tls_peer, line);
        else if (v.applied && !v.confirmed)
          spdlog::info("continuity: {} from {}", v.text, tls_peer);
        logged_refusal_ = line;
        return v;
      });
}

Continuity::~Continuity() { stop(); }

Status Continuity::start() {
  store_.load();
  if (auto st = channel_->start(); !st.ok()) return st;
  started_ = clock_.now();
  timer_ = sched_.schedule_in(cfg_.tick, [this] { tick(); });
  return Status::Ok();
}

void Continuity::stop() {
  if (timer_) sched_.cancel(*timer_);
  timer_.reset();
  if (channel_) channel_->stop();
}

std::optional<double> Continuity::copy_age_s(FrameKind kind) const {
  const auto& h = store_.held(kind);
  if (!h) return std::nullopt;
  return std::max(0.0, seconds_between(h->confirmed, clock_.wall_now()));
}

std::optional<fabric::SaCopyInfo> Continuity::sa_copy_info() const {
  const auto& h = store_.held(FrameKind::SaDump);
  if (!h) return std::nullopt;
  fabric::SaCopyInfo c;
  c.generation = h->generation;
  c.sender = h->from;
  c.age_s = copy_age_s();
  c.groups = h->sa.groups.size();
  c.members = h->sa.members;
  c.services = h->sa.services;
  c.informs = h->sa.informs;
  for (const auto& g : h->sa.groups) {
    if (c.checkable.size() >= fabric::kReportGroupsChecked) break;
    if (g.full_member_guid == 0) continue;  // OpenSM keeps it only when well known; no member to ask by
    c.checkable.push_back({mad::Gid{g.mgid_prefix, Guid{g.mgid_id}}, Lid{g.mlid},
                           mad::Gid{g.full_member_prefix, Guid{g.full_member_guid}}});
  }
  return c;
}

void Continuity::tick() {
  timer_ = sched_.schedule_in(cfg_.tick, [this] { tick(); });
  const InBandFacts f = facts_();
  const bool master = f.master && *f.master == cfg_.own_guid && f.local_state == SmState::Master;
  if (master != sending_) {
    sending_ = master;
    channel_->set_outbound(master);
    if (!master) sender_.reset();
    // What this head's OpenSM had to restore when it became MASTER: the
    // copy in its sa_db_file then (OpenSM read it on that first master sweep).
    if (master && clock_.now() - started_ > cfg_.tick * 2) note_takeover();
  }
  std::string detail;
  if (master) {
    for (auto& out : sender_.poll(store_.highest_generation())) {
      CopyMeta m;
      m.fabric = cfg_.fabric;
      m.from = cfg_.own_name;
      m.master_guid = cfg_.own_guid;
      m.generation = out.generation;
      if (out.kind == FrameKind::SaDump) m.trimmed = sender_.trimmed();
      channel_->send(out.kind, m, out.body);
    }
  } else if (f.master && clock_.now() - started_ >= cfg_.max_copy_age) {
    const auto age = copy_age_s();
    const double bound = std::chrono::duration<double>(cfg_.max_copy_age).count();
    char buf[256];
    if (!age)
      std::snprintf(buf, sizeof buf,
                    "no SA database copy from the master (SM %s) has arrived: a takeover by this head now restores no "
                    "multicast group, ServiceRecord or subscription",
                    to_string(*f.master).c_str());
    else if (*age > bound)
      std::snprintf(buf, sizeof buf,
                    "the SA database copy from %s was last confirmed %.0f s ago (bound %.0f s): a takeover by this head "
                    "now restores it as it was then",
                    store_.held(FrameKind::SaDump)->from.c_str(), *age, bound);
    else
      buf[0] = '\0';
    detail = buf;
  }
  fabric::set_alarm(alarms_, sm::AlarmKind::SaCopyStale, detail, alarm_, clock_.now());
  // What the master leaves out of the SA copy: on the master as it trims, on
  // a standby as the copy it holds says.
  const auto& held = store_.held(FrameKind::SaDump);
  const std::string trimmed =
      master ? (sender_.trimmed().empty() ? "" : "the SA copy sent to the standbys leaves out " + sender_.trimmed())
             : (held && !held->trimmed.empty() ? "the SA copy from " + held->from + " leaves out " + held->trimmed : "");
  fabric::set_alarm(alarms_, sm::AlarmKind::SaCopyTrimmed, trimmed, trim_alarm_, clock_.now());
}

void Continuity::note_takeover() {
  json t{{"at", std::chrono::duration_cast<std::chrono::milliseconds>(clock_.wall_now().time_since_epoch()).count()}};
  const auto& h = store_.held(FrameKind::SaDump);
  if (!h) {
    t["sa_copy"] = nullptr;
    spdlog::warn("continuity: this head's OpenSM became MASTER with no SA database copy: no multicast group, "
                 "ServiceRecord or subscription was restored");
  } else {
    const double age = *copy_age_s(FrameKind::SaDump);
    t["sa_copy"] = {{"generation", h->generation}, {"from", h->from}, {"age_s", age},
                    {"groups", h->sa.groups.size()}, {"members", h->sa.members}, {"services", h->sa.services},
                    {"subscriptions", h->sa.informs}};
    spdlog::info("continuity: this head's OpenSM became MASTER with the SA database copy from {} generation {} ({}), "
                 "confirmed {:.0f} s before",
                 h->from, h->generation, opensm::summary_text(h->sa), age);
  }
  const auto& g = store_.held(FrameKind::Guid2Lid);
  t["guid2lid_copy"] = g ? json{{"generation", g->generation}, {"from", g->from}, {"entries", g->guid2lid_entries}}
                         : json(nullptr);
  at_takeover_ = std::move(t);
}

json Continuity::status_json() const {
  json j;
  j["enabled"] = true;
  j["role"] = sending_ ? "sending" : "receiving";
  j["listening"] = channel_->listening();
  j["listen"] = cfg_.channel.listen_host.empty()
                    ? json(nullptr)
                    : json(cfg_.channel.listen_host + ":" + std::to_string(cfg_.channel.listen_port));
  j["sa_db_file"] = cfg_.store.sa_path;
  j["max_copy_age_s"] = std::chrono::duration<double>(cfg_.max_copy_age).count();
  const WallTime now = clock_.wall_now();
  auto held = [&](FrameKind kind) -> json {
    const auto& h = store_.held(kind);
    if (!h) return nullptr;
    json c{{"generation", h->generation},
           {"from", h->from},
           {"master_guid", to_string(h->master_guid)},
           {"bytes", h->bytes},
           {"age_s", *copy_age_s(kind)},
           {"written_age_s", std::max(0.0, seconds_between(h->received, now))}};
    if (kind == FrameKind::SaDump) {
      c["groups"] = h->sa.groups.size();
      c["members"] = h->sa.members;
      c["services"] = h->sa.services;
      c["subscriptions"] = h->sa.informs;
      c["trimmed"] = h->trimmed;
    } else {
      c["entries"] = h->guid2lid_entries;
    }
    return c;
  };
  j["copies"] = {{"sa_dump", held(FrameKind::SaDump)}, {"guid2lid", held(FrameKind::Guid2Lid)}};
  json refused = json::object();
  for (std::size_t i = 0; i < kRefuseReasons; ++i)
    refused[std::string(to_string(static_cast<RefuseReason>(i)))] = store_.refused()[i];
  j["received"] = {{"copies", store_.received()},
                   {"applied", store_.applied()},
                   {"confirmed", store_.confirmed()},
                   {"refused", refused},
                   {"last_refusal", store_.last_refusal()}};
  j["sent"] = {{"copies", sender_.sent()},
               {"generation", sender_.generation()},
               {"sa_dump_problem", sender_.problem(FrameKind::SaDump)},
               {"sa_dump_trimmed", sender_.trimmed()},
               {"guid2lid_problem", sender_.problem(FrameKind::Guid2Lid)}};
  const auto& c = channel_->counters();
  j["channel"] = {{"accepted", c.accepted},
                  {"rejected_busy", c.rejected_busy},
                  {"handshake_failed", c.handshake_failed},
                  {"unknown_identity", c.unknown_identity},
                  {"protocol_errors", c.protocol_errors},
                  {"frames_in", c.frames_in},
                  {"frames_out", c.frames_out},
                  {"last_inbound_error", c.last_inbound_error}};
  json peers = json::array();
  for (const auto& l : channel_->links()) {
    json p{{"name", l.name}, {"outbound", l.outbound}, {"last_error", l.last_error}, {"inbound", l.inbound},
           {"connects", l.connects}, {"failures", l.failures}};
    p["last_copy_age_s"] = l.last_copy_at ? json(std::max(0.0, seconds_between(*l.last_copy_at, now))) : json(nullptr);
    for (FrameKind kind : {FrameKind::SaDump, FrameKind::Guid2Lid}) {
      const auto& a = l.answers[kind_index(kind)];
      p["answers"][std::string(to_string(kind))] =
          a ? json{{"generation", a->generation}, {"applied", a->applied}, {"reason", a->reason}, {"text", a->text},
                   {"age_s", std::max(0.0, seconds_between(l.answered_at[kind_index(kind)], now))}}
            : json(nullptr);
    }
    peers.push_back(p);
  }
  j["peers"] = peers;
  // The copies this head's OpenSM had when it last became MASTER (null: not since start).
  j["at_takeover"] = at_takeover_;
  return j;
}

}  // namespace smha::peer
