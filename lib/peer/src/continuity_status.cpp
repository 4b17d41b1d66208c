// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/peer/continuity_status.hpp"

#include <algorithm>
#include <chrono>

namespace smha::peer {

namespace {

using nlohmann::json;

// Seconds from `a` to `b`, never negative (a clock step back shows 0).
double age(WallTime a, WallTime b) { return std::max(0.0, std::chrono::duration<double>(b - a).count()); }

json text_or_null(const std::string& s) { return s.empty() ? json(nullptr) : json(s); }

json sa_counts(const SaCounts& c) {
  return {{"groups", c.groups}, {"members", c.members}, {"services", c.services}, {"subscriptions", c.subscriptions}};
}

json held_json(const std::optional<CopyStatus>& c, FrameKind kind, WallTime now) {
  if (!c) return nullptr;
  json j{{"generation", c->generation},
         {"from", c->from},
         {"master_guid", to_string(c->master_guid)},
         {"bytes", c->bytes},
         {"age_s", age(c->confirmed, now)},
         {"confirmed_age_s", age(c->confirmed, now)},
         {"content_age_s", age(c->written, now)},
         {"written_age_s", age(c->received, now)}};
  if (kind == FrameKind::SaDump) {
    j.update(sa_counts(c->sa));
    j["current"] = c->current;
    j["stale"] = text_or_null(c->stale);
    j["trimmed"] = c->trimmed;
  } else {
    j["entries"] = c->guid2lid_entries;
  }
  return j;
}

// The master's last word that its current file was not sent (null: none since the last copy).
json notice_json(const std::optional<MasterNotice>& n, WallTime now) {
  if (!n) return nullptr;
  return {{"from", n->from},
          {"problem", n->problem},
          {"age_s", age(n->received, now)},
          {"moved_on_age_s", age(n->since, now)},
          {"counts", n->counts ? sa_counts(*n->counts) : json(nullptr)}};
}

json channel_json(const ChannelCounters& c) {
  return {{"accepted", c.accepted},
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
}

json link_json(const PeerLink& l, WallTime now) {
  json p{{"name", l.name}, {"outbound", std::string(to_string(l.outbound))}, {"last_error", l.last_error},
         {"inbound", l.inbound}, {"connects", l.connects}, {"failures", l.failures}};
  p["last_copy_age_s"] = l.last_copy_at ? json(age(*l.last_copy_at, now)) : json(nullptr);
  for (FrameKind kind : {FrameKind::SaDump, FrameKind::Guid2Lid}) {
    const auto& a = l.answers[kind_index(kind)];
    p["answers"][std::string(to_string(kind))] =
        a ? json{{"generation", a->generation}, {"applied", a->applied}, {"reason", a->reason}, {"text", a->text},
                 {"age_s", age(l.answered_at[kind_index(kind)], now)}}
          : json(nullptr);
  }
  return p;
}

// What this head's OpenSM had when it became MASTER, ages as of that moment.
json takeover_json(const TakeoverCopies& t) {
  json j{{"at", std::chrono::duration_cast<std::chrono::milliseconds>(t.at.time_since_epoch()).count()}};
  if (const auto& c = t.sa_copy) {
    j["sa_copy"] = {{"generation", c->generation}, {"from", c->from},
                    {"age_s", age(c->confirmed, t.at)}, {"content_age_s", age(c->written, t.at)},
                    {"current", c->current}, {"stale", text_or_null(c->stale)}};
    j["sa_copy"].update(sa_counts(c->sa));
  } else {
    j["sa_copy"] = nullptr;
  }
  const auto& g = t.guid2lid_copy;
  j["guid2lid_copy"] =
      g ? json{{"generation", g->generation}, {"from", g->from}, {"entries", g->guid2lid_entries}} : json(nullptr);
  return j;
}

}  // namespace

json continuity_json(const ContinuityStatus* s, WallTime now) {
  if (!s) return json{{"enabled", false}};
  json j;
  j["enabled"] = true;
  j["role"] = s->sending ? "sending" : "receiving";
  j["listening"] = s->listening;
  j["listen"] = text_or_null(s->listen);
  j["sa_db_file"] = s->sa_db_file;
  j["max_copy_age_s"] = std::chrono::duration<double>(s->max_copy_age).count();
  j["copies"] = {{"sa_dump", held_json(s->copies[kind_index(FrameKind::SaDump)], FrameKind::SaDump, now)},
                 {"guid2lid", held_json(s->copies[kind_index(FrameKind::Guid2Lid)], FrameKind::Guid2Lid, now)}};
  j["not_sent"] = {{"sa_dump", notice_json(s->not_sent[kind_index(FrameKind::SaDump)], now)},
                   {"guid2lid", notice_json(s->not_sent[kind_index(FrameKind::Guid2Lid)], now)}};
  j["stale"] = text_or_null(s->stale);
  json refused = json::object();
  for (std::size_t i = 0; i < kRefuseReasons; ++i)
    refused[std::string(to_string(static_cast<RefuseReason>(i)))] = s->refused[i];
  j["received"] = {{"copies", s->received},
                   {"applied", s->applied},
                   {"confirmed", s->confirmed},
                   {"refused", refused},
                   {"last_refusal", s->last_refusal}};
  j["sent"] = {{"copies", s->sent},
               {"generation", s->sent_generation},
               {"sa_dump_problem", s->send_problem[kind_index(FrameKind::SaDump)]},
               {"sa_dump_trimmed", s->sent_trimmed},
               {"guid2lid_problem", s->send_problem[kind_index(FrameKind::Guid2Lid)]}};
  j["channel"] = channel_json(s->channel);
  json peers = json::array();
  for (const auto& l : s->peers) peers.push_back(link_json(l, now));
  j["peers"] = peers;
  // The copies this head's OpenSM had when it last became MASTER (null: not since start).
  j["at_takeover"] = s->at_takeover ? takeover_json(*s->at_takeover) : json(nullptr);
  return j;
}

}  // namespace smha::peer
