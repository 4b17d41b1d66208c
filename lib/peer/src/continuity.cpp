// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/peer/continuity.hpp"

#include <cstdio>

#include <spdlog/spdlog.h>

namespace smha::peer {

namespace {


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
  TakeoverCopies t;
  t.at = clock_.wall_now();
  t.sa_copy = copy_status(FrameKind::SaDump);
  t.guid2lid_copy = copy_status(FrameKind::Guid2Lid);
  if (!t.sa_copy) {
    spdlog::warn("continuity: this head's OpenSM became MASTER with no SA database copy: no multicast group, "
                 "ServiceRecord or subscription was restored");
  } else {
    const auto& h = store_.held(FrameKind::SaDump);
    if (t.sa_copy->current)
      spdlog::info("continuity: this head's OpenSM became MASTER with the SA database copy from {} generation {} ({}), "
                   "its content written {:.0f} s before, confirmed {:.0f} s before",
                   h->from, h->generation, opensm::summary_text(h->sa), *content_age_s(), *copy_age_s());
    else
      spdlog::warn("continuity: this head's OpenSM became MASTER with a stale SA database copy from {} generation {} "
                   "({}), its content written {:.0f} s before: {}",
                   h->from, h->generation, opensm::summary_text(h->sa), *content_age_s(), t.sa_copy->stale);
  }
  at_takeover_ = std::move(t);
}

std::optional<CopyStatus> Continuity::copy_status(FrameKind kind) const {
  const auto& h = store_.held(kind);
  if (!h) return std::nullopt;
  CopyStatus c;
  c.generation = h->generation;
  c.from = h->from;
  c.master_guid = h->master_guid;
  c.bytes = h->bytes;
  c.received = h->received;
  c.confirmed = h->confirmed;
  c.written = h->written;
  if (kind == FrameKind::SaDump) {
    c.sa = SaCounts{h->sa.groups.size(), h->sa.members, h->sa.services, h->sa.informs};
    c.trimmed = h->trimmed;
    c.current = sa_copy_current(&c.stale);
  } else {
    c.guid2lid_entries = h->guid2lid_entries;
  }
  return c;
}

ContinuityStatus Continuity::status() const {
  ContinuityStatus s;
  s.sending = decisions_.master();
  s.listening = channel_->listening();
  if (!cfg_.channel.listen_host.empty())
    s.listen = cfg_.channel.listen_host + ":" + std::to_string(cfg_.channel.listen_port);
  s.sa_db_file = cfg_.store.sa_path;
  s.max_copy_age = cfg_.max_copy_age;
  for (FrameKind kind : {FrameKind::SaDump, FrameKind::Guid2Lid}) {
    s.copies[kind_index(kind)] = copy_status(kind);
    s.not_sent[kind_index(kind)] = store_.notice(kind);
    s.send_problem[kind_index(kind)] = sender_.problem(kind);
  }
  s.stale = alarm_;
  s.received = store_.received();
  s.applied = store_.applied();
  s.confirmed = store_.confirmed();
  s.refused = store_.refused();
  s.last_refusal = store_.last_refusal();
  s.sent = sender_.sent();
  s.sent_generation = sender_.generation();
  s.sent_trimmed = sender_.trimmed();
  s.channel = channel_->counters();
  s.peers = channel_->links();
  s.at_takeover = at_takeover_;
  return s;
}

}  // namespace smha::peer
