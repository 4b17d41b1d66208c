// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/peer/copy_store.hpp"

#include <openssl/evp.h>

#include <algorithm>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "smha/core/text.hpp"
#include "smha/opensm/guid2lid.hpp"

namespace smha::peer {

namespace {

using nlohmann::json;


std::int64_t unix_ms(WallTime t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

WallTime from_unix_ms(std::int64_t ms) { return WallTime{std::chrono::milliseconds(ms)}; }

std::uint64_t wall_ms(WallTime t) { return static_cast<std::uint64_t>(std::max<std::int64_t>(0, unix_ms(t))); }

// An age in ms from the wire as a duration (bounded: ten years at most).
WallTime::duration age(std::uint64_t ms) {
  return std::chrono::duration_cast<WallTime::duration>(
      std::chrono::milliseconds(std::min<std::uint64_t>(ms, 10ULL * 365 * 86400 * 1000)));
}

std::uint64_t ms_between(WallTime from, WallTime to) {
  return to > from ? static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(to - from).count())
                   : 0;
}

WallTime mtime_of(const os::FileSystem::Stamp& s) {
  return WallTime{std::chrono::duration_cast<WallTime::duration>(std::chrono::nanoseconds(s.mtime_ns))};
}


// Checks `body` as OpenSM reads the file of `kind`; fills the summary.
Status validate(FrameKind kind, std::string_view body, std::size_t max_bytes, HeldCopy& into) {
  if (kind == FrameKind::SaDump) {
    auto d = opensm::parse_sa_dump(body, max_bytes);
    if (!d) return d.error();
    into.sa = std::move(*d);
    return Status::Ok();
  }
  auto g = opensm::parse_guid2lid(body, opensm::kMaxGuid2LidEntries, std::min(max_bytes, opensm::kMaxGuid2LidBytes));
  if (!g) return g.error();
  if (g->skipped != 0)
    return make_error(Errc::Parse, "guid2lid: " + std::to_string(g->skipped) + " record(s) OpenSM would not take" +
                                       (g->problems.empty() ? "" : " (" + g->problems.front() + ")"));
  into.guid2lid_entries = g->entries.size();
  return Status::Ok();
}

// What a copy file's mode is: OpenSM writes its SA dump 0600 and guid2lid 0644.
unsigned mode_of(FrameKind kind) { return kind == FrameKind::SaDump ? 0600 : 0644; }

}  // namespace

std::string_view to_string(RefuseReason r) {
  switch (r) {
    case RefuseReason::Identity: return "identity";
    case RefuseReason::NotAPeer: return "not_a_peer";
    case RefuseReason::WrongFabric: return "wrong_fabric";
    case RefuseReason::NotMaster: return "not_master";
    case RefuseReason::LocalMaster: return "local_master";
    case RefuseReason::Older: return "older";
    case RefuseReason::Replayed: return "replayed";
    case RefuseReason::TooLarge: return "too_large";
    case RefuseReason::Malformed: return "malformed";
    case RefuseReason::WriteFailed: return "write_failed";
    case RefuseReason::Future: return "future";
  }
  return "?";
}

bool plausible_generation(std::uint64_t generation, WallTime now) {
  return generation <= wall_ms(now) + kMaxGenerationAheadMs;
}

SaCounts rough_counts(std::string_view dump) {
  SaCounts c;
  std::size_t pos = 0;
  while (pos < dump.size()) {
    std::size_t end = dump.find('\n', pos);
    if (end == std::string_view::npos) end = dump.size();
    const std::string_view line = dump.substr(pos, end - pos);
    if (line.starts_with("MC Group ")) ++c.groups;
    else if (line.starts_with("mcm_port:")) ++c.members;
    else if (line.starts_with("Service Record:")) ++c.services;
    else if (line.starts_with("InformInfo Record:")) ++c.subscriptions;
    pos = end + 1;
  }
  return c;
}

SaCounts counts_of(const opensm::SaDump& d) { return SaCounts{d.groups.size(), d.members, d.services, d.informs}; }

std::array<std::uint8_t, 32> sha256(std::string_view data) {
  std::array<std::uint8_t, 32> out{};
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), out.data(), &len, EVP_sha256(), nullptr);
  return out;
}

CopyStore::CopyStore(CopyStoreConfig cfg, os::FileSystem& fs, const Clock& clock)
    : cfg_(std::move(cfg)), fs_(fs), clock_(clock) {}

const std::string& CopyStore::path(FrameKind kind) const {
  return kind == FrameKind::Guid2Lid ? cfg_.guid2lid_path : cfg_.sa_path;
}

void CopyStore::load() {
  for (FrameKind kind : {FrameKind::SaDump, FrameKind::Guid2Lid}) {
    auto side = fs_.read_tail(path(kind) + ".smha", 0, 4096);
    if (!side || side->size > 4096) continue;
    const json j = json::parse(side->text, nullptr, false);
    if (!j.is_object()) continue;
    auto file = fs_.read_tail(path(kind), 0, cfg_.max_bytes);
    if (!file || file->size > cfg_.max_bytes) continue;
    HeldCopy h;
    try {
      h.generation = j.at("generation").get<std::uint64_t>();
      h.from = j.at("from").get<std::string>();
      auto g = parse_guid(j.at("master_guid").get<std::string>());
      if (!g) continue;
      h.master_guid = *g;
      h.received = from_unix_ms(j.at("received_unix_ms").get<std::int64_t>());
      h.confirmed = from_unix_ms(j.at("confirmed_unix_ms").get<std::int64_t>());
      h.trimmed = j.value("trimmed", std::string());
      // Records written before the content's age was kept: no better than when it arrived.
      h.written = j.contains("written_unix_ms") ? from_unix_ms(j.at("written_unix_ms").get<std::int64_t>()) : h.received;
      h.sha256 = sha256(file->text);
      if (j.at("sha256").get<std::string>() != hex_string(h.sha256)) continue;  // not the copy the record is of
    } catch (const json::exception&) {
      continue;
    }
    h.bytes = file->text.size();
    if (!validate(kind, file->text, cfg_.max_bytes, h).ok()) continue;
    held_[kind_index(kind)] = std::move(h);
  }
}

std::uint64_t CopyStore::highest_generation() const {
  std::uint64_t g = 0;
  for (const auto& h : held_)
    if (h) g = std::max(g, h->generation);
  return g;
}

Verdict CopyStore::refuse(RefuseReason r, std::string text, const std::string& peer) {
  ++refused_[static_cast<std::size_t>(r)];
  last_refusal_ = (peer.empty() ? std::string("?") : peer) + ": " + text;
  Verdict v;
  v.reason = r;
  v.text = std::move(text);
  return v;
}

std::optional<Verdict> CopyStore::check_sender(const std::string& what, const std::string& from, Guid master_guid,
                                               const std::string& fabric, const std::string& tls_peer,
                                               const InBandFacts& facts) {
  if (from != tls_peer)
    return refuse(RefuseReason::Identity,
                  what + " says it is from \"" + from + "\" but the certificate names \"" + tls_peer + "\"", tls_peer);
  const auto peer = cfg_.peers.find(from);
  if (peer == cfg_.peers.end() || from == cfg_.own_name)
    return refuse(RefuseReason::NotAPeer, what + " from \"" + from + "\", which is not a configured peer", tls_peer);
  if (peer->second != master_guid)
    return refuse(RefuseReason::NotAPeer,
                  what + " names SM port " + to_string(master_guid) + "; peer " + from + " is " + to_string(peer->second),
                  tls_peer);
  if (fabric != cfg_.fabric)
    return refuse(RefuseReason::WrongFabric,
                  what + " is of fabric \"" + fabric + "\"; this head serves \"" + cfg_.fabric + "\"", tls_peer);
  if (!facts.master || *facts.master != master_guid)
    return refuse(RefuseReason::NotMaster,
                  what + ": " + from + "'s SM is not MASTER in this head's own polling (" +
                      (facts.master ? "MASTER is " + to_string(*facts.master) : std::string("no MASTER seen")) + ")",
                  tls_peer);
  if (!facts.local_state || (*facts.local_state != SmState::Standby && *facts.local_state != SmState::NotActive))
    return refuse(RefuseReason::LocalMaster,
                  what + ": this head's own SM is " +
                      (facts.local_state ? std::string(to_string(*facts.local_state)) : std::string("not answering")) +
                      " (copies are written only while it is STANDBY or NOTACTIVE)",
                  tls_peer);
  return std::nullopt;
}

Verdict CopyStore::offer(FrameKind kind, const CopyMeta& meta, std::string_view body, const std::string& tls_peer,
                         const InBandFacts& facts) {
  ++received_;
  Verdict v = judge(kind, meta, body, tls_peer, facts);
  const std::size_t i = kind_index(kind);
  if (v.applied) {
    notices_[i].reset();
    refusals_[i].reset();
  } else {
    refusals_[i] = Refusal{v.reason, tls_peer, v.text, clock_.wall_now()};
  }
  v.held = held_[i] ? held_[i]->generation : 0;
  return v;
}

Verdict CopyStore::notice(const NoticeMeta& meta, const std::string& tls_peer, const InBandFacts& facts) {
  const std::string what = "notice of " + std::string(to_string(meta.kind));
  if (auto refused = check_sender(what, meta.from, meta.master_guid, meta.fabric, tls_peer, facts)) return *refused;
  const WallTime now = clock_.wall_now();
  notices_[kind_index(meta.kind)] = MasterNotice{meta.from, now, now - age(meta.age_ms), meta.problem, meta.counts};
  Verdict v;
  v.applied = true;
  v.text = what + " from " + meta.from + ": not sent: " + meta.problem;
  return v;
}

Verdict CopyStore::judge(FrameKind kind, const CopyMeta& meta, std::string_view body, const std::string& tls_peer,
                         const InBandFacts& facts) {
  const std::string what = std::string(to_string(kind)) + " generation " + std::to_string(meta.generation);
  if (auto refused = check_sender(what, meta.from, meta.master_guid, meta.fabric, tls_peer, facts)) return *refused;
  const WallTime now = clock_.wall_now();
  if (!plausible_generation(meta.generation, now))
    return refuse(RefuseReason::Future,
                  what + " is more than a day ahead of this head's clock (" + std::to_string(wall_ms(now)) +
                      " ms): generations are the sender's clock in ms, so this one is forged or its clock is wrong",
                  tls_peer);
  auto& held = held_[kind_index(kind)];
  // A generation held that is itself implausible (a record from before this
  // head's clock stepped back, or one a forger left) blocks nothing.
  if (held && meta.generation < held->generation && plausible_generation(held->generation, now))
    return refuse(RefuseReason::Older,
                  what + " is older than the generation " + std::to_string(held->generation) + " held", tls_peer);
  if (body.size() > cfg_.max_bytes)
    return refuse(RefuseReason::TooLarge,
                  what + " is " + std::to_string(body.size()) + " bytes; the cap is " + std::to_string(cfg_.max_bytes),
                  tls_peer);
  const auto digest = sha256(body);
  if (held && meta.generation == held->generation) {
    if (digest != held->sha256)
      return refuse(RefuseReason::Replayed, what + " is the generation held, with other content", tls_peer);
    held->confirmed = now;
    held->written = now - age(meta.age_ms);
    held->trimmed = meta.trimmed;  // the same copy may have been cut from a dump grown since
    ++confirmed_;
    Verdict v;
    v.applied = true;
    v.confirmed = true;
    v.text = what + " confirmed (unchanged)";
    return v;
  }
  HeldCopy h;
  if (auto st = validate(kind, body, cfg_.max_bytes, h); !st.ok())
    return refuse(RefuseReason::Malformed, what + ": " + st.error().message, tls_peer);
  h.generation = meta.generation;
  h.from = meta.from;
  h.trimmed = meta.trimmed;
  h.master_guid = meta.master_guid;
  h.received = h.confirmed = now;
  h.written = now - age(meta.age_ms);
  h.bytes = body.size();
  h.sha256 = digest;
  if (auto st = fs_.write_atomic(path(kind), body, mode_of(kind)); !st.ok())
    return refuse(RefuseReason::WriteFailed, what + ": " + path(kind) + ": " + st.error().message, tls_peer);
  const json side{{"generation", h.generation},
                  {"from", h.from},
                  {"master_guid", to_string(h.master_guid)},
                  {"received_unix_ms", unix_ms(h.received)},
                  {"confirmed_unix_ms", unix_ms(h.confirmed)},
                  {"written_unix_ms", unix_ms(h.written)},
                  {"sha256", hex_string(h.sha256)},
                  {"trimmed", h.trimmed}};
  // The record follows the copy: a crash between the two leaves an older
  // record, which a later copy replaces (its generation is higher).
  (void)fs_.write_atomic(path(kind) + ".smha", side.dump(-1, ' ', false, json::error_handler_t::replace) + "\n", 0600);
  held = std::move(h);
  ++applied_;
  Verdict v;
  v.applied = true;
  v.text = what + " written to " + path(kind);
  return v;
}

CopySender::CopySender(CopySenderConfig cfg, os::FileSystem& fs, const Clock& clock)
    : cfg_(std::move(cfg)), fs_(fs), clock_(clock) {}

void CopySender::reset() {
  for (auto& l : last_) l.reset();
  trimmed_.clear();
  for (auto& b : bad_stamp_) b.reset();
  for (auto& n : noticed_at_) n.reset();
  master_since_.reset();
}

bool CopySender::continue_above(FrameKind kind, std::uint64_t held) {
  const std::size_t i = kind_index(kind);
  if (!last_[i] || held <= last_[i]->generation || held == UINT64_MAX ||
      !plausible_generation(held, clock_.wall_now()))
    return false;
  above_ = std::max(above_, held);
  regenerate_[i] = true;
  return true;
}

std::uint64_t CopySender::next_generation(std::uint64_t floor) {
  const WallTime now = clock_.wall_now();
  const std::uint64_t wall = wall_ms(now);
  // One past `g`, when `g` is plausible (2^64-1 never is: no overflow).
  auto past = [&](std::uint64_t g) { return plausible_generation(g, now) ? g + 1 : 0; };
  last_generation_ = std::max({past(last_generation_), past(floor), past(above_), wall});
  return last_generation_;
}

void CopySender::not_sent(std::vector<Outgoing>& out, FrameKind kind, std::string problem, std::uint64_t age_ms,
                          std::optional<SaCounts> counts) {
  const std::size_t i = kind_index(kind);
  const TimePoint now = clock_.now();
  problem_[i] = problem;
  if (noticed_at_[i] && noticed_[i] == problem && now - *noticed_at_[i] < cfg_.refresh) return;
  noticed_at_[i] = now;
  noticed_[i] = problem;
  Outgoing o;
  o.kind = kind;
  o.read_at = clock_.wall_now();
  o.age_ms = age_ms;
  o.notice = true;
  o.problem = std::move(problem);
  o.counts = counts;
  out.push_back(std::move(o));
}

std::vector<Outgoing> CopySender::poll(std::uint64_t floor) {
  std::vector<Outgoing> out;
  const TimePoint now = clock_.now();
  const WallTime wall = clock_.wall_now();
  // Not a file of this mastership: how long this master's SA has been moving on.
  const std::uint64_t since_master = master_since_ ? ms_between(*master_since_, wall) : 0;
  for (FrameKind kind : {FrameKind::SaDump, FrameKind::Guid2Lid}) {
    const std::size_t i = kind_index(kind);
    const std::string& path = kind == FrameKind::SaDump ? cfg_.sa_dump_path : cfg_.guid2lid_path;
    auto& last = last_[i];
    auto stamp = fs_.stamp(path);
    const std::uint64_t file_age = stamp ? ms_between(mtime_of(*stamp), wall) : 0;
    // An SA dump from before this head's OpenSM became MASTER is not this
    // master's SA (doc/continuity.md, "current").
    if (kind == FrameKind::SaDump && master_since_ && (!stamp || mtime_of(*stamp) < *master_since_)) {
      if (!stamp) not_sent(out, kind, path + ": " + stamp.error().message, since_master, std::nullopt);
      else
        not_sent(out, kind,
                 "waiting for this master's first dump (" + path + " was written " +
                     std::to_string(ms_between(mtime_of(*stamp), *master_since_) / 1000) +
                     " s before this head's OpenSM became MASTER)",
                 since_master, std::nullopt);
      continue;
    }
    if (stamp && last && last->stamp && *last->stamp == *stamp) {
      // The file as last read: only a refresh is due, with what was read.
      if (regenerate_[i]) last->generation = next_generation(floor);
      else if (now - last->sent_at < cfg_.refresh && !noticed_at_[i]) continue;
      regenerate_[i] = false;
      noticed_at_[i].reset();
      last->sent_at = now;
      out.push_back(Outgoing{kind, last->generation, last->body, wall, file_age, false, {}, std::nullopt});
      ++sent_;
      continue;
    }
    // A file that was not sendable is read (and parsed) again only once changed.
    if (stamp && bad_stamp_[i] && *bad_stamp_[i] == *stamp) {
      not_sent(out, kind, problem_[i], file_age, bad_counts_[i]);
      continue;
    }
    auto file = fs_.read_tail(path, 0, cfg_.max_bytes);
    if (!file) {
      not_sent(out, kind, path + ": " + file.error().message, since_master, std::nullopt);
      continue;
    }
    bad_stamp_[i] = stamp ? std::optional(*stamp) : std::nullopt;
    bad_counts_[i] = kind == FrameKind::SaDump ? std::optional(rough_counts(file->text)) : std::nullopt;
    if (file->size > cfg_.max_bytes) {
      bad_counts_[i].reset();
      not_sent(out, kind,
               path + " is " + std::to_string(file->size) + " bytes; the cap is " + std::to_string(cfg_.max_bytes),
               file_age, std::nullopt);
      continue;
    }
    if (kind == FrameKind::SaDump) {
      // What OpenSM could not load back, or would take too long to, stays
      // out of the copy; the rest flows (doc/continuity.md).
      auto t = opensm::trim_sa_dump(file->text, cfg_.bounds);
      trimmed_ = opensm::trim_summary(t, cfg_.bounds);
      if (t.any()) file->text = std::move(t.text);
    }
    HeldCopy scratch;
    if (auto st = validate(kind, file->text, cfg_.max_bytes, scratch); !st.ok()) {
      not_sent(out, kind, path + ": " + st.error().message, file_age, bad_counts_[i]);
      continue;
    }
    bad_stamp_[i].reset();
    problem_[i].clear();
    const auto sha = sha256(file->text);
    const bool changed = !last || last->sha != sha || regenerate_[i];
    if (!changed && now - last->sent_at < cfg_.refresh && !noticed_at_[i]) {
      last->stamp = stamp ? std::optional(*stamp) : std::nullopt;
      continue;
    }
    if (changed) {
      last = Last{sha, next_generation(floor), now, std::nullopt, {}};
    } else {
      last->sent_at = now;
    }
    regenerate_[i] = false;
    noticed_at_[i].reset();
    last->stamp = stamp ? std::optional(*stamp) : std::nullopt;
    last->body = file->text;
    out.push_back(Outgoing{kind, last->generation, std::move(file->text), wall, file_age, false, {}, std::nullopt});
    ++sent_;
  }
  return out;
}

}  // namespace smha::peer
