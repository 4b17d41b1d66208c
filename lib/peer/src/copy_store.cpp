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
  }
  return "?";
}

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

Verdict CopyStore::offer(FrameKind kind, const CopyMeta& meta, std::string_view body, const std::string& tls_peer,
                         const InBandFacts& facts) {
  ++received_;
  const std::string what = std::string(to_string(kind)) + " generation " + std::to_string(meta.generation);
  if (meta.from != tls_peer)
    return refuse(RefuseReason::Identity,
                  what + " says it is from \"" + meta.from + "\" but the certificate names \"" + tls_peer + "\"",
                  tls_peer);
  const auto peer = cfg_.peers.find(meta.from);
  if (peer == cfg_.peers.end() || meta.from == cfg_.own_name)
    return refuse(RefuseReason::NotAPeer, what + " from \"" + meta.from + "\", which is not a configured peer", tls_peer);
  if (peer->second != meta.master_guid)
    return refuse(RefuseReason::NotAPeer,
                  what + " names SM port " + to_string(meta.master_guid) + "; peer " + meta.from + " is " +
                      to_string(peer->second),
                  tls_peer);
  if (meta.fabric != cfg_.fabric)
    return refuse(RefuseReason::WrongFabric,
                  what + " is of fabric \"" + meta.fabric + "\"; this head serves \"" + cfg_.fabric + "\"", tls_peer);
  if (!facts.master || *facts.master != meta.master_guid)
    return refuse(RefuseReason::NotMaster,
                  what + ": " + meta.from + "'s SM is not MASTER in this head's own polling (" +
                      (facts.master ? "MASTER is " + to_string(*facts.master) : std::string("no MASTER seen")) + ")",
                  tls_peer);
  if (!facts.local_state || (*facts.local_state != SmState::Standby && *facts.local_state != SmState::NotActive))
    return refuse(RefuseReason::LocalMaster,
                  what + ": this head's own SM is " +
                      (facts.local_state ? std::string(to_string(*facts.local_state)) : std::string("not answering")) +
                      " (copies are written only while it is STANDBY or NOTACTIVE)",
                  tls_peer);
  auto& held = held_[kind_index(kind)];
  if (held && meta.generation < held->generation)
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
    held->confirmed = clock_.wall_now();
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
  h.received = h.confirmed = clock_.wall_now();
  h.bytes = body.size();
  h.sha256 = digest;
  if (auto st = fs_.write_atomic(path(kind), body, mode_of(kind)); !st.ok())
    return refuse(RefuseReason::WriteFailed, what + ": " + path(kind) + ": " + st.error().message, tls_peer);
  const json side{{"generation", h.generation},
                  {"from", h.from},
                  {"master_guid", to_string(h.master_guid)},
                  {"received_unix_ms", unix_ms(h.received)},
                  {"confirmed_unix_ms", unix_ms(h.confirmed)},
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
}

std::vector<Outgoing> CopySender::poll(std::uint64_t floor) {
  std::vector<Outgoing> out;
  const TimePoint now = clock_.now();
  for (FrameKind kind : {FrameKind::SaDump, FrameKind::Guid2Lid}) {
    const std::size_t i = kind_index(kind);
    const std::string& path = kind == FrameKind::SaDump ? cfg_.sa_dump_path : cfg_.guid2lid_path;
    auto& last = last_[i];
    auto stamp = fs_.stamp(path);
    if (stamp && last && last->stamp && *last->stamp == *stamp) {
      // The file as last read: only a refresh is due, with what was read.
      if (now - last->sent_at < cfg_.refresh) continue;
      last->sent_at = now;
      out.push_back(Outgoing{kind, last->generation, last->body, clock_.wall_now()});
      ++sent_;
      continue;
    }
    auto file = fs_.read_tail(path, 0, cfg_.max_bytes);
    if (!file) {
      problem_[i] = path + ": " + file.error().message;
      continue;
    }
    if (file->size > cfg_.max_bytes) {
      problem_[i] = path + " is " + std::to_string(file->size) + " bytes; the cap is " + std::to_string(cfg_.max_bytes);
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
      problem_[i] = path + ": " + st.error().message;
      continue;
    }
    problem_[i].clear();
    const auto sha = sha256(file->text);
    const bool changed = !last || last->sha != sha;
    if (!changed && now - last->sent_at < cfg_.refresh) {
      last->stamp = stamp ? std::optional(*stamp) : std::nullopt;
      continue;
    }
    if (changed) {
      const auto wall = static_cast<std::uint64_t>(std::max<std::int64_t>(0, unix_ms(clock_.wall_now())));
      last_generation_ = std::max({last_generation_ + 1, floor + 1, wall});
      last = Last{sha, last_generation_, now, std::nullopt, {}};
    } else {
      last->sent_at = now;
    }
    last->stamp = stamp ? std::optional(*stamp) : std::nullopt;
    last->body = file->text;
    out.push_back(Outgoing{kind, last->generation, std::move(file->text), clock_.wall_now()});
    ++sent_;
  }
  return out;
}

}  // namespace smha::peer
