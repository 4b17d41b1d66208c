// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/peer/continuity.hpp"

#include <cstdio>

#include <spdlog/spdlog.h>

namespace smha::peer {

namespace {

using nlohmann::json;

double seconds_between(WallTime a, WallTime b) { return std::chrono::duration<double>(b - a).count(); }

std::string secs(double s) { return std::to_string(static_cast<long long>(std::max(0.0, s))) + " s"; }

}  // namespace

Continuity::Continuity(boost::asio::io_context& io, ContinuityConfig cfg, os::FileSystem& fs, const Clock& clock,
                       Scheduler& sched, Facts facts, AlarmSink& alarms)
    : cfg_(std::move(cfg)),
      clock_(clock),
      sched_(sched),
      facts_(std::move(facts)),
      alarms_(alarms),
      store_(cfg_.store, fs, clock),
      sender_(cfg_.sender, fs, clock),
      decisions_(cfg_.own_guid, cfg_.tick, cfg_.max_copy_age) {
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
  channel_->on_notice([this](const NoticeMeta& n, const std::string& tls_peer) {
    const auto v = store_.notice(n, tls_peer, facts_());
    const std::string line = v.applied ? v.text : std::string(to_string(v.reason)) + ": " + v.text;
    if (line != logged_notice_) spdlog::warn("continuity: {}", v.applied ? line : "notice refused (" + line + ")");
    logged_notice_ = line;
  });
}

Continuity::~Continuity() { stop(); }

Status Continuity::start() {
  store_.load();
  if (auto st = channel_->start(); !st.ok()) return st;
  decisions_.start(clock_.now(), clock_.wall_now());
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

std::optional<double> Continuity::content_age_s(FrameKind kind) const {
  const auto& h = store_.held(kind);
  if (!h) return std::nullopt;
  return std::max(0.0, seconds_between(h->written, clock_.wall_now()));
}

bool Continuity::sa_copy_current(std::string* ret_why) const {
  const auto& h = store_.held(FrameKind::SaDump);
  const auto& n = store_.notice(FrameKind::SaDump);
  std::string why;
  if (!h) why = "no copy";
  else if (n && n->received >= h->confirmed) why = "not sent: " + n->problem;
  else if (const double bound = std::chrono::duration<double>(cfg_.max_copy_age).count(); *copy_age_s() > bound)
    why = "last confirmed " + secs(*copy_age_s()) + " before (bound " + secs(bound) + ")";
  if (ret_why) *ret_why = why;
  return why.empty();
}

std::optional<fabric::SaCopyInfo> Continuity::sa_copy_info() const {
  const auto& h = store_.held(FrameKind::SaDump);
  if (!h) return std::nullopt;
  fabric::SaCopyInfo c;
  c.generation = h->generation;
  c.sender = h->from;
  c.age_s = copy_age_s();
  c.content_age_s = content_age_s();
  c.groups = h->sa.groups.size();
  c.members = h->sa.members;
  c.services = h->sa.services;
  c.informs = h->sa.informs;
  c.current = sa_copy_current(&c.stale);
  // What the copy missed, where the old master's notice says it.
  if (const auto& n = store_.notice(FrameKind::SaDump); !c.current && n && n->received >= h->confirmed) {
    c.missed_s = std::max(0.0, seconds_between(h->written, n->since));
    if (n->counts) {
      auto more = [](std::uint64_t unsent, std::size_t copy) { return unsent > copy ? std::size_t(unsent - copy) : 0; };
      c.lost = fabric::SaCopyInfo::Counts{more(n->counts->groups, c.groups), more(n->counts->members, c.members),
                                          more(n->counts->services, c.services),
                                          more(n->counts->subscriptions, c.informs)};
    }
  }
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
  const auto step = decisions_.step(f, clock_.now(), clock_.wall_now());
  const bool master = step.master;
  if (step.changed) {
    channel_->set_outbound(master);
    if (!master) sender_.reset();
    else sender_.set_master_since(step.master_since);
    if (step.note_takeover) note_takeover();
  }
  if (master) {
    follow_answers();
    for (auto& out : sender_.poll(store_.highest_generation())) {
      if (out.notice) {
        NoticeMeta n{out.kind, cfg_.fabric, cfg_.own_name, cfg_.own_guid, out.age_ms, out.problem, out.counts};
        const std::string line = std::string(to_string(out.kind)) + " not sent: " + out.problem;
        if (line != logged_notice_) spdlog::warn("continuity: {}", line);
        logged_notice_ = line;
        channel_->send_notice(n);
        continue;
      }
      CopyMeta m;
      m.fabric = cfg_.fabric;
      m.from = cfg_.own_name;
      m.master_guid = cfg_.own_guid;
      m.generation = out.generation;
      if (out.kind == FrameKind::SaDump) m.trimmed = sender_.trimmed();
      m.age_ms = out.age_ms;
      channel_->send(out.kind, m, out.body);
    }
  }
  auto ptr = [](const auto& o) { return o ? &*o : nullptr; };
  const SaCopyFacts copy{ptr(store_.held(FrameKind::SaDump)), ptr(store_.notice(FrameKind::SaDump)),
                         ptr(store_.refusal(FrameKind::SaDump))};
  set_alarm(alarms_, AlarmKind::SaCopyStale, decisions_.stale_detail(f, copy, clock_.now(), clock_.wall_now()), alarm_,
            clock_.now());
  set_alarm(alarms_, AlarmKind::SaCopyTrimmed, decisions_.trimmed_detail(sender_.trimmed(), copy.held), trim_alarm_,
            clock_.now());
}

void Continuity::follow_answers() {
  for (const auto& l : channel_->links())
    for (FrameKind kind : {FrameKind::SaDump, FrameKind::Guid2Lid}) {
      const auto& a = l.answers[kind_index(kind)];
      if (!a || a->applied || a->reason != to_string(RefuseReason::Older) || a->generation != sender_.generation(kind))
        continue;
      if (sender_.continue_above(kind, a->held))
        spdlog::warn("continuity: {} holds {} generation {}, above ours ({}): this head's clock stepped back; "
                     "sending it again above that",
                     l.name, to_string(kind), a->held, a->generation);
    }
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
    std::string stale;
    const bool current = sa_copy_current(&stale);
    t["sa_copy"] = {{"generation", h->generation}, {"from", h->from}, {"age_s", age},
                    {"content_age_s", *content_age_s()}, {"current", current},
                    {"stale", current ? json(nullptr) : json(stale)},
                    {"groups", h->sa.groups.size()}, {"members", h->sa.members}, {"services", h->sa.services},
                    {"subscriptions", h->sa.informs}};
    if (current)
      spdlog::info("continuity: this head's OpenSM became MASTER with the SA database copy from {} generation {} ({}), "
                   "its content written {:.0f} s before, confirmed {:.0f} s before",
                   h->from, h->generation, opensm::summary_text(h->sa), *content_age_s(), age);
    else
      spdlog::warn("continuity: this head's OpenSM became MASTER with a stale SA database copy from {} generation {} "
                   "({}), its content written {:.0f} s before: {}",
                   h->from, h->generation, opensm::summary_text(h->sa), *content_age_s(), stale);
  }
  const auto& g = store_.held(FrameKind::Guid2Lid);
  t["guid2lid_copy"] = g ? json{{"generation", g->generation}, {"from", g->from}, {"entries", g->guid2lid_entries}}
                         : json(nullptr);
  at_takeover_ = std::move(t);
}

json continuity_off_json() { return json{{"enabled", false}}; }

json Continuity::status_json() const {
  json j;
  j["enabled"] = true;
  j["role"] = decisions_.master() ? "sending" : "receiving";
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
           {"confirmed_age_s", *copy_age_s(kind)},
           {"content_age_s", *content_age_s(kind)},
           {"written_age_s", std::max(0.0, seconds_between(h->received, now))}};
    if (kind == FrameKind::SaDump) {
      std::string why;
      c["current"] = sa_copy_current(&why);
      c["stale"] = why.empty() ? json(nullptr) : json(why);
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
  // The master's last word that its current file was not sent (null: none since the last copy).
  auto notice = [&](FrameKind kind) -> json {
    const auto& n = store_.notice(kind);
    if (!n) return nullptr;
    json o{{"from", n->from},
           {"problem", n->problem},
           {"age_s", std::max(0.0, seconds_between(n->received, now))},
           {"moved_on_age_s", std::max(0.0, seconds_between(n->since, now))},
           {"counts", nullptr}};
    if (n->counts)
      o["counts"] = {{"groups", n->counts->groups}, {"members", n->counts->members},
                     {"services", n->counts->services}, {"subscriptions", n->counts->subscriptions}};
    return o;
  };
  j["not_sent"] = {{"sa_dump", notice(FrameKind::SaDump)}, {"guid2lid", notice(FrameKind::Guid2Lid)}};
  j["stale"] = alarm_.empty() ? json(nullptr) : json(alarm_);
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
                  {"rejected_source_limit", c.rejected_source_limit},
                  {"rejected_rate", c.rejected_rate},
                  {"rejected_memory", c.rejected_memory},
                  {"preauth_timeouts", c.preauth_timeouts},
                  {"accept_pauses", c.accept_pauses},
                  {"replaced", c.replaced},
                  {"pending", c.pending},
                  {"buffered_bytes", c.buffered_bytes},
                  {"buffered_peak", c.buffered_peak},
                  {"frames_in", c.frames_in},
                  {"frames_out", c.frames_out},
                  {"last_inbound_error", c.last_inbound_error}};
  json peers = json::array();
  for (const auto& l : channel_->links()) {
    json p{{"name", l.name}, {"outbound", std::string(to_string(l.outbound))}, {"last_error", l.last_error},
           {"inbound", l.inbound}, {"connects", l.connects}, {"failures", l.failures}};
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
