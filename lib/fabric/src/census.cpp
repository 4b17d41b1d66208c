// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/fabric/census.hpp"

#include <algorithm>
#include <cctype>
#include <set>

#include "smha/core/text.hpp"

namespace smha::fabric {

std::string census_sources_text(unsigned sources) {
  std::string s;
  auto add = [&](unsigned bit, const char* name) {
    if (!(sources & bit)) return;
    if (!s.empty()) s += ",";
    s += name;
  };
  add(kFromPoll, "poll");
  add(kFromMasterSmLid, "master_sm_lid");
  add(kFromIsSm, "is_sm");
  add(kFromSa, "sa");
  add(kFromSaIsSm, "sa_is_sm");
  return s;
}

void Census::set_heads(Guid own, const std::vector<Guid>& peers) {
  own_ = own;
  peers_ = peers;
  for (auto& [g, e] : entries_) {
    e.local = g == own_;
    e.head = e.local || std::find(peers_.begin(), peers_.end(), g) != peers_.end();
  }
}

CensusEntry* Census::entry(Guid guid, TimePoint now) {
  auto it = entries_.find(guid);
  if (it != entries_.end()) return &it->second;
  if (entries_.size() >= limits_.max_sms) {
    ++dropped_;
    return nullptr;
  }
  CensusEntry e;
  e.guid = guid;
  e.first_seen = now;
  e.local = guid == own_;
  e.head = e.local || std::find(peers_.begin(), peers_.end(), guid) != peers_.end();
  annotate(e);
  return &entries_.emplace(guid, std::move(e)).first->second;
}

void Census::known_ports(const std::vector<SmPort>& ports) {
  known_ports_.clear();
  for (const auto& p : ports) known_ports_[p.port_guid] = p;
  for (auto& [g, e] : entries_) annotate(e);
}

void Census::annotate(CensusEntry& e) const {
  auto it = known_ports_.find(e.guid);
  if (it == known_ports_.end()) return;
  const SmPort& p = it->second;
  if (!e.path) e.path = p.path;
  if (e.lid.value == 0) e.lid = p.lid;
  if (!e.neighbour && p.neighbour) {
    e.neighbour = p.neighbour;
    e.neighbour_port = p.neighbour_port;
  }
  if (e.description.empty() && p.description_known) e.description = p.description;
}

void Census::walked(const std::vector<SmPort>& ports, bool complete, TimePoint now) {
  std::set<Guid> seen;
  for (const auto& p : ports) {
    seen.insert(p.port_guid);
    CensusEntry* e = entry(p.port_guid, now);
    if (!e) continue;
    e->is_sm = true;
    e->sources |= kFromIsSm;
    e->path = p.path;
    if (p.lid.value != 0) e->lid = p.lid;
    if (p.description_known) e->description = p.description;
    e->neighbour = p.neighbour;
    e->neighbour_port = p.neighbour_port;
  }
  if (!complete) return;
  for (auto& [g, e] : entries_)
    if (!seen.count(g)) e.is_sm = false;
}

void Census::rechecked(const SmPort& port, bool is_sm, TimePoint now) {
  if (!is_sm) {
    auto it = entries_.find(port.port_guid);
    if (it != entries_.end()) it->second.is_sm = false;
    return;
  }
  CensusEntry* e = entry(port.port_guid, now);
  if (!e) return;
  e->is_sm = true;
  e->sources |= kFromIsSm;
  e->path = port.path;
  if (port.lid.value != 0) e->lid = port.lid;
  if (port.description_known) e->description = port.description;
  e->neighbour = port.neighbour;
  e->neighbour_port = port.neighbour_port;
}

void Census::sa_is_sm(Guid port, Lid lid, TimePoint now) {
  CensusEntry* e = entry(port, now);
  if (!e) return;
  e->is_sm = true;
  e->sources |= kFromSaIsSm;
  if (lid.value != 0) e->lid = lid;
}

void Census::sa_is_sm_table(const std::vector<Lid>& lids) {
  for (auto& [g, e] : entries_)
    if (e.is_sm && !e.path && (e.sources & kFromSaIsSm) && std::find(lids.begin(), lids.end(), e.lid) == lids.end())
      e.is_sm = false;
}

const CensusEntry* Census::by_lid(Lid lid) const {
  if (lid.value == 0) return nullptr;
  for (const auto& [g, e] : entries_)
    if (e.lid == lid) return &e;
  return nullptr;
}

void Census::described(Guid guid, const std::string& description) {
  auto it = entries_.find(guid);
  if (it != entries_.end() && !description.empty()) it->second.description = description;
}

bool Census::is_head(Guid g) const {
  return g == own_ || std::find(peers_.begin(), peers_.end(), g) != peers_.end();
}

bool Census::answered_at(Guid port, const SmInfo& info, Lid lid, TimePoint now) {
  if (info.guid != port && is_head(info.guid)) {
    auto [it, fresh] = impostors_.try_emplace(port);
    Impostor& imp = it->second;
    imp.port = port;
    imp.info = info;
    if (fresh) imp.first_seen = now;
    imp.last_seen = now;
    auto e = entries_.find(port);
    imp.where = e != entries_.end() ? where(e->second) : to_string(port);
    if (imp.where.empty()) imp.where = to_string(port);
    return true;
  }
  impostors_.erase(port);
  answered(info, kFromIsSm, info.guid == port ? lid : Lid{}, now);
  return false;
}

std::vector<Impostor> Census::impostors(TimePoint now) const {
  std::vector<Impostor> out;
  for (const auto& [port, imp] : impostors_) {
    if (now - imp.last_seen > 4 * limits_.expiry) continue;
    auto e = entries_.find(port);
    if (e == entries_.end() || !e->second.is_sm) continue;  // the port no longer claims to be an SM
    out.push_back(imp);
  }
  return out;
}

std::string Census::impostor_text(TimePoint now) const {
  std::string out;
  for (const auto& imp : impostors(now)) {
    std::string name = to_string(imp.info.guid);
    std::string head_at = "not seen by the census";
    if (auto h = entries_.find(imp.info.guid); h != entries_.end()) {
      if (const std::string w = where(h->second); !w.empty()) head_at = w;
    }
    out += (out.empty() ? "" : "; ") + std::string("SM at ") + imp.where + " answers as head " + name + " " +
           std::string(to_string(imp.info.state)) + " prio " + std::to_string(imp.info.priority) +
           "; that head is at " + head_at;
  }
  return out;
}

void Census::answered(const SmInfo& info, unsigned source, Lid lid, TimePoint now) {
  CensusEntry* e = entry(info.guid, now);
  if (!e) return;
  e->info = info;
  e->answered_at = now;
  e->answer_from_sa = false;
  e->sources |= source;
  if (lid.value != 0) e->lid = lid;
  ++e->answers;
  e->misses = 0;
}

void Census::sa_table(const std::vector<mad::SmInfoRecord>& records, bool complete, TimePoint now) {
  std::set<Guid> listed;
  for (const auto& r : records) {
    listed.insert(r.info.guid);
    CensusEntry* e = entry(r.info.guid, now);
    if (!e) continue;
    e->sources |= kFromSa;
    e->sa_listed = true;
    if (r.lid.value != 0) e->lid = r.lid;
    const bool changed = !e->sa_info || e->sa_info->act_count != r.info.act_count ||
                         e->sa_info->state != r.info.state || e->sa_info->priority != r.info.priority;
    e->sa_info = r.info;
    // A direct SMInfo answer within expiry is fresher than a sweep-old record.
    if (!changed || (live(*e, now) && !e->answer_from_sa)) continue;
    // The master heard from it since the last table: as good as an answer,
    // a sweep old. The SA hides SM_Key: keep the one a direct answer gave.
    SmInfo info = r.info;
    if (e->info) info.sm_key = e->info->sm_key;
    e->info = info;
    e->answered_at = now;
    e->answer_from_sa = true;
    ++e->answers;
  }
  if (!complete) return;
  for (auto& [g, e] : entries_)
    if (!listed.count(g)) e.sa_listed = false;
}

void Census::missed(Guid guid) {
  auto it = entries_.find(guid);
  if (it != entries_.end()) ++it->second.misses;
}

bool Census::live(const CensusEntry& e, TimePoint now) const {
  return e.answered_at && now - *e.answered_at <= limits_.expiry;
}

void Census::expire(TimePoint now) {
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (live(it->second, now) || it->second.is_sm || it->second.sa_listed) {
      ++it;
      continue;
    }
    impostors_.erase(it->first);  // its port no longer claims to be an SM
    it = entries_.erase(it);
  }
}

std::string Census::state_text(const CensusEntry& e, TimePoint now) const {
  if (live(e, now)) return std::string(to_string(e.info->state));
  return e.info ? "silent" : "unknown";
}

std::string Census::where(const CensusEntry& e) {
  std::string s;
  auto add = [&](const std::string& part) {
    if (!s.empty()) s += " ";
    s += part;
  };
  if (!e.description.empty()) add("\"" + printable(e.description) + "\"");
  if (e.lid.value != 0) add("lid " + std::to_string(e.lid.value));
  if (e.neighbour) add("at " + to_string(*e.neighbour) + " port " + std::to_string(e.neighbour_port));
  return s;
}

std::vector<sm::OtherSm> Census::others(TimePoint now) const {
  std::vector<sm::OtherSm> out;
  for (const auto& [g, e] : entries_)
    if (!e.head && live(e, now)) out.push_back(sm::OtherSm{*e.info, where(e)});
  return out;
}

std::map<std::string, std::size_t> Census::count_by_state(TimePoint now) const {
  std::map<std::string, std::size_t> out;
  for (const auto& [g, e] : entries_) {
    std::string s = state_text(e, now);
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
    ++out[s];
  }
  return out;
}

}  // namespace smha::fabric
