// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/fabric/lid_continuity.hpp"

#include <algorithm>
#include <cstdio>

namespace smha::fabric {

namespace {

constexpr std::size_t kMaxReasons = 8;
// Distinct conflicts remembered (each reported once); past this, new ones are
// still counted in the build but no longer reported.
constexpr std::size_t kMaxReportedConflicts = 4096;
constexpr unsigned kFileMode = 0644;  // as OpenSM's own (fopen under its umask)

std::string lid_text(std::uint16_t lid) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%04x", static_cast<unsigned>(lid));
  return buf;
}

bool overlaps(const opensm::Guid2LidEntry& a, const opensm::Guid2LidEntry& b) {
  return a.min_lid <= b.max_lid && b.min_lid <= a.max_lid;
}

void add_reason(FabricLids& f, std::string why) {
  if (f.reasons.size() < kMaxReasons) f.reasons.push_back(std::move(why));
}

}  // namespace

FabricLids check_fabric_lids(const std::vector<SmPort>& ports, unsigned lmc) {
  FabricLids f;
  lmc = std::min(lmc, opensm::kMaxLmc);
  std::map<Guid, opensm::Guid2LidEntry> answers;
  std::set<Guid> conflicting;
  for (const auto& p : ports) {
    if (p.lid.value == 0) {
      ++f.unassigned;
      continue;
    }
    const unsigned n = p.node_type == mad::NodeType::Switch ? 1u : (1u << lmc);
    const unsigned max = p.lid.value + n - 1;
    opensm::Guid2LidEntry e{p.port_guid, p.lid.value, static_cast<std::uint16_t>(std::min(max, 0xffffu))};
    auto why = opensm::guid2lid_entry_problem(e);
    if (why.empty() && max > 0xffffu) why = "LID range past 0xffff";
    if (!why.empty()) {
      ++f.rejected.bad_lid;
      add_reason(f, to_string(p.port_guid) + ": " + why);
      continue;
    }
    if (conflicting.count(p.port_guid)) continue;
    auto [it, fresh] = answers.emplace(p.port_guid, e);
    if (!fresh && !(it->second == e)) {
      ++f.rejected.conflict;
      add_reason(f, to_string(p.port_guid) + ": answered LID " + lid_text(it->second.min_lid) + " and LID " +
                        lid_text(e.min_lid));
      answers.erase(it);
      conflicting.insert(p.port_guid);
    }
  }
  // One LID, two ports: none of them is written, and neither is a file entry
  // for that LID (which of them owns it is not known).
  std::map<std::uint16_t, Guid> owner;
  std::set<Guid> duplicated;
  for (const auto& [g, e] : answers) {
    for (unsigned lid = e.min_lid; lid <= e.max_lid; ++lid) {
      auto [it, fresh] = owner.emplace(static_cast<std::uint16_t>(lid), g);
      if (fresh || it->second == g) continue;
      if (duplicated.insert(g).second) {
        ++f.rejected.duplicate_lid;
        add_reason(f, to_string(g) + ": LID " + lid_text(static_cast<std::uint16_t>(lid)) + " also claimed by " +
                          to_string(it->second));
      }
      if (duplicated.insert(it->second).second) {
        ++f.rejected.duplicate_lid;
        add_reason(f, to_string(it->second) + ": LID " + lid_text(static_cast<std::uint16_t>(lid)) +
                          " also claimed by " + to_string(g));
      }
    }
  }
  for (const auto& [g, e] : answers) {
    if (duplicated.count(g)) {
      for (unsigned lid = e.min_lid; lid <= e.max_lid; ++lid) f.contested.insert(static_cast<std::uint16_t>(lid));
    } else {
      f.entries.emplace(g, e);
    }
  }
  return f;
}

std::string describe(const LidConflict& c) {
  return to_string(c.claimant) + " claims LID " + lid_text(c.lid) + ", held for " + to_string(c.holder) +
         " in guid2lid";
}

Guid2LidBuild build_guid2lid(const std::map<Guid, opensm::Guid2LidEntry>& fabric,
                             const std::set<std::uint16_t>& contested,
                             const std::vector<opensm::Guid2LidEntry>& previous, std::size_t max_entries) {
  (void)contested;  // a contested LID has no fabric entry; a file entry holding it keeps it
  Guid2LidBuild b;
  // The file's record: the first valid entry of each GUID, each LID held once.
  std::map<Guid, opensm::Guid2LidEntry> held;
  std::map<std::uint16_t, Guid> holder;
  for (const auto& e : previous) {
    if (held.count(e.guid) || !opensm::guid2lid_entry_problem(e).empty()) continue;
    bool free = true;
    for (unsigned lid = e.min_lid; lid <= e.max_lid && free; ++lid) free = !holder.count(static_cast<std::uint16_t>(lid));
    if (!free) {
      ++b.dropped_overlap;
      continue;
    }
    held.emplace(e.guid, e);
    for (unsigned lid = e.min_lid; lid <= e.max_lid; ++lid) holder.emplace(static_cast<std::uint16_t>(lid), e.guid);
  }
  // A port's answer is taken when every LID it claims is free in the file,
  // held for itself, or held for a port whose own answer was taken (it moved
  // on). That last case can chain (A takes B's old LID after B moved), so
  // passes repeat while one takes something, a few at most in practice.
  std::map<Guid, opensm::Guid2LidEntry> taken;
  std::map<Guid, opensm::Guid2LidEntry> pending(fabric.begin(), fabric.end());
  auto blocker = [&](Guid g, const opensm::Guid2LidEntry& e) -> std::optional<std::pair<std::uint16_t, Guid>> {
    for (unsigned lid = e.min_lid; lid <= e.max_lid; ++lid) {
      auto h = holder.find(static_cast<std::uint16_t>(lid));
      if (h != holder.end() && h->second != g && !taken.count(h->second)) return std::make_pair(h->first, h->second);
    }
    return std::nullopt;
  };
  for (int pass = 0; pass < 16 && !pending.empty(); ++pass) {
    bool progress = false;
    for (auto it = pending.begin(); it != pending.end();) {
      if (blocker(it->first, it->second)) {
        ++it;
        continue;
      }
      taken.emplace(it->first, it->second);
      it = pending.erase(it);
      progress = true;
    }
    if (!progress) break;
  }
  for (const auto& [g, e] : pending)
    if (auto blk = blocker(g, e)) b.conflicts.push_back({g, blk->first, blk->second});
  for (const auto& [g, e] : taken) {
    if (b.entries.size() >= max_entries) {
      ++b.dropped_bound;
      continue;
    }
    b.entries.push_back(e);
    ++b.from_fabric;
  }
  for (const auto& [g, e] : held) {
    if (taken.count(g)) continue;
    if (b.entries.size() >= max_entries) {
      ++b.dropped_bound;
      continue;
    }
    b.entries.push_back(e);
    ++b.kept;
  }
  std::sort(b.entries.begin(), b.entries.end(),
            [](const opensm::Guid2LidEntry& x, const opensm::Guid2LidEntry& y) { return x.guid < y.guid; });
  return b;
}

LidContinuity::LidContinuity(LidContinuityConfig cfg, Scheduler& sched, os::FileSystem& fs, OwnState own_state,
                             ConflictHandler on_conflict)
    : cfg_(std::move(cfg)), sched_(sched), fs_(fs), own_state_(std::move(own_state)),
      on_conflict_(std::move(on_conflict)) {
  status_.path = cfg_.path;
}

LidContinuity::~LidContinuity() {
  if (timer_) sched_.cancel(*timer_);
}

void LidContinuity::observe(const std::vector<SmPort>& ports, bool complete) {
  FabricLids f = check_fabric_lids(ports, cfg_.lmc);
  status_.rejected.bad_lid += f.rejected.bad_lid;
  status_.rejected.duplicate_lid += f.rejected.duplicate_lid;
  status_.rejected.conflict += f.rejected.conflict;
  status_.unassigned += f.unassigned;
  if (complete) {
    fabric_ = std::move(f.entries);
    contested_ = std::move(f.contested);
    status_.reasons = f.reasons;
  } else {
    for (const auto& [g, e] : f.entries) {
      // Newest wins: another port that held one of these LIDs does not any more.
      for (auto it = fabric_.begin(); it != fabric_.end();) {
        if (it->first != g && overlaps(it->second, e)) it = fabric_.erase(it);
        else ++it;
      }
      for (unsigned lid = e.min_lid; lid <= e.max_lid; ++lid) contested_.erase(static_cast<std::uint16_t>(lid));
      fabric_[g] = e;
    }
    for (auto lid : f.contested) {
      contested_.insert(lid);
      for (auto it = fabric_.begin(); it != fabric_.end();) {
        if (it->second.min_lid <= lid && lid <= it->second.max_lid) it = fabric_.erase(it);
        else ++it;
      }
    }
    for (const auto& r : f.reasons)
      if (status_.reasons.size() < kMaxReasons) status_.reasons.push_back(r);
  }
  status_.fabric = fabric_.size();
  observed_ = true;
  dirty_ = true;
  maybe_write();
}

void LidContinuity::maybe_write() {
  if (!observed_ || !dirty_ || timer_) return;
  const auto st = own_state_ ? own_state_() : std::nullopt;
  if (!st) {
    status_.state = "paused: our OpenSM does not answer";
    return;
  }
  if (*st == SmState::Master || *st == SmState::Discovering) {
    status_.state = std::string("paused: our OpenSM is ") + std::string(to_string(*st)) +
                    (*st == SmState::Master ? " (it writes its own)" : "");
    return;
  }
  const TimePoint now = sched_.now();
  if (last_write_try_ && now < *last_write_try_ + cfg_.min_interval) {
    timer_ = sched_.schedule_at(*last_write_try_ + cfg_.min_interval, [this] {
      timer_.reset();
      maybe_write();
    });
    return;
  }
  write_now();
}

void LidContinuity::write_now() {
  const TimePoint now = sched_.now();
  last_write_try_ = now;
  status_.last_checked_at = now;
  dirty_ = false;
  std::vector<opensm::Guid2LidEntry> previous;
  std::string old_text;
  bool have_old = false;
  status_.file_skipped = 0;
  status_.file_problems.clear();
  // Bounded read: a file larger than any valid guid2lid is not read whole.
  auto old = fs_.read_tail(cfg_.path, 0, opensm::kMaxGuid2LidBytes + 1);
  if (old) {
    if (old->size > opensm::kMaxGuid2LidBytes) {
      status_.file_problems.push_back("the file has " + std::to_string(old->size) + " bytes, more than " +
                                      std::to_string(opensm::kMaxGuid2LidBytes) + ": not merged");
      status_.file_skipped = 1;
    } else if (auto parsed = opensm::parse_guid2lid(old->text, cfg_.max_entries)) {
      previous = std::move(parsed->entries);
      status_.file_skipped = parsed->skipped;
      status_.file_problems = std::move(parsed->problems);
      old_text = std::move(old->text);
      have_old = true;
    } else {
      status_.file_problems.push_back(parsed.error().message);
      status_.file_skipped = 1;
    }
  } else if (old.error().code != Errc::NotFound) {
    status_.last_error = "read " + cfg_.path + ": " + old.error().message;
    ++status_.write_errors;
    status_.state = "error";
    return;
  }
  Guid2LidBuild b = build_guid2lid(fabric_, contested_, previous, cfg_.max_entries);
  status_.dropped_overlap = b.dropped_overlap;
  status_.conflicts = b.conflicts.size();
  status_.conflict_details.clear();
  for (const auto& c : b.conflicts) {
    const std::string text = describe(c);
    if (status_.conflict_details.size() < kMaxReasons) status_.conflict_details.push_back(text);
    if (reported_.size() >= kMaxReportedConflicts || !reported_.insert(c).second) continue;
    ++status_.conflicts_total;
    if (on_conflict_) on_conflict_(c, text);
  }
  std::string text = opensm::render_guid2lid(b.entries);
  status_.state = "writing";
  if (have_old && text == old_text) {
    ++status_.unchanged;
    status_.entries = b.entries.size();
    status_.kept = b.kept;
    status_.last_error.clear();
    return;
  }
  auto st = fs_.write_atomic(cfg_.path, text, kFileMode);
  if (!st.ok()) {
    ++status_.write_errors;
    status_.last_error = "write " + cfg_.path + ": " + st.error().message;
    status_.state = "error";
    dirty_ = true;  // tried again at the next answer, min_interval later at the earliest
    return;
  }
  ++status_.writes;
  status_.entries = b.entries.size();
  status_.kept = b.kept;
  status_.last_written_at = now;
  status_.last_error.clear();
}

}  // namespace smha::fabric
