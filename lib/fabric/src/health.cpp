// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/fabric/health.hpp"

#include <algorithm>
#include <array>
#include <functional>
#include <tuple>
#include <set>

#include "smha/core/text.hpp"

namespace smha::fabric {

namespace {

template <std::size_t N>
int exact(std::uint8_t bits, const std::array<std::pair<std::uint8_t, int>, N>& table) {
  for (const auto& [bit, value] : table)
    if (bits == bit) return value;
  return 0;
}

template <std::size_t N>
int best(std::uint8_t mask, const std::array<std::pair<std::uint8_t, int>, N>& table) {
  for (const auto& [bit, value] : table)
    if (mask & bit) return value;
  return 0;
}

// What an end enables and supports; an Enabled field of all ones means "what
// is supported" (IBA 14.2.5.6).
std::uint8_t width_capable(const mad::LinkInfo& l) {
  return static_cast<std::uint8_t>((l.width_enabled == 0xff ? l.width_supported : l.width_enabled) &
                                   l.width_supported);
}
std::uint8_t speed_capable(const mad::LinkInfo& l) {
  return static_cast<std::uint8_t>((l.speed_enabled == 0xf ? l.speed_supported : l.speed_enabled) &
                                   l.speed_supported & 0x7);
}
std::uint8_t ext_capable(const mad::LinkInfo& l) {
  return static_cast<std::uint8_t>((l.ext_enabled == 0x1f ? l.ext_supported : l.ext_enabled) &
                                   l.ext_supported & 0xf);
}

// The best both (or the one known) ends can run at; a part is 0 when the
// masks share nothing (an answer that does not decode).
LinkRate capable_rate(const std::vector<const mad::LinkInfo*>& ends) {
  std::uint8_t width = 0xff;
  std::uint8_t speed = 0xff;
  std::uint8_t ext = 0xff;
  bool all_ext = true;
  for (const auto* l : ends) {
    width &= width_capable(*l);
    speed &= speed_capable(*l);
    if (l->ext_supported == 0) all_ext = false;
    ext &= ext_capable(*l);
  }
  LinkRate r;
  r.lanes = best(width, kLinkWidths);
  r.speed = all_ext ? best(ext, kLinkExtSpeeds) : 0;
  if (r.speed == 0) r.speed = best(speed, kLinkSpeeds);
  return r;
}

using PortKey = std::pair<Guid, std::uint8_t>;

bool below(const LinkRate& active, const LinkRate& target) {
  return (target.lanes > 0 && active.lanes < target.lanes) || (target.speed > 0 && active.speed < target.speed);
}

// What a link below `target` should run at: each part the better of the
// target's (when set) and its own, so that it is never asked to slow down.
LinkRate filled(const LinkRate& target, const LinkRate& active) {
  return LinkRate{std::max(target.lanes, active.lanes), std::max(target.speed, active.speed)};
}


}  // namespace

LinkRate active_rate(const mad::LinkInfo& l) {
  LinkRate r;
  r.lanes = exact(l.width_active, kLinkWidths);
  r.speed = l.ext_active != 0 ? exact(l.ext_active, kLinkExtSpeeds) : exact(l.speed_active, kLinkSpeeds);
  return r;
}

std::string_view to_string(LinkKind k) {
  switch (k) {
    case LinkKind::SwitchSwitch: return "switch-switch";
    case LinkKind::SwitchCa: return "switch-ca";
    case LinkKind::Other: return "other";
  }
  return "other";
}

std::string_view to_string(DegradedWhy w) {
  switch (w) {
    case DegradedWhy::BelowEnds: return "below_ends";
    case DegradedWhy::BelowExpected: return "below_expected";
    case DegradedWhy::BelowTier: return "below_tier";
  }
  return "below_ends";
}

LinkAssessment assess_links(const DiscoveryResult& walk, const HealthExpectation& expect) {
  std::map<PortKey, const LinkEnd*> ends;
  std::map<Guid, mad::NodeType> types;
  std::map<Guid, DrPath> paths;
  for (const auto& e : walk.link_ends) {
    ends.emplace(PortKey{e.node_guid, e.port_num}, &e);
    types.emplace(e.node_guid, e.node_type);
    paths.emplace(e.node_guid, e.path);
  }
  for (const auto& c : walk.cables) {
    types.emplace(c.b_node, c.b_type);
    paths.emplace(c.b_node, c.b_path);
  }

  struct Link {
    LinkEndRef a, b;
    LinkKind kind = LinkKind::Other;
    LinkRate active;
    LinkRate capable;
  };
  std::vector<Link> links;
  LinkAssessment out;
  std::set<std::pair<PortKey, PortKey>> seen;
  for (const auto& c : walk.cables) {
    PortKey x{c.a_node, c.a_port};
    PortKey y{c.b_node, c.b_port};
    if (y < x) std::swap(x, y);
    if (!seen.insert({x, y}).second) continue;  // crossed both ways, or parallel reads
    auto ref = [&](const PortKey& k) {
      LinkEndRef r;
      r.node = k.first;
      r.port = k.second;
      if (auto t = types.find(k.first); t != types.end()) r.type = t->second;
      if (auto p = paths.find(k.first); p != paths.end()) r.path = p->second;
      return r;
    };
    Link l{ref(x), ref(y), LinkKind::Other, LinkRate{}, LinkRate{}};
    // The switch end first (two switches: the lower GUID, as keyed).
    if (l.b.type == mad::NodeType::Switch && l.a.type != mad::NodeType::Switch) std::swap(l.a, l.b);
    const bool sa = l.a.type == mad::NodeType::Switch;
    const bool sb = l.b.type == mad::NodeType::Switch;
    l.kind = sa && sb ? LinkKind::SwitchSwitch
             : sa && (l.b.type == mad::NodeType::Ca) ? LinkKind::SwitchCa
                                                    : LinkKind::Other;
    std::vector<const mad::LinkInfo*> infos;
    std::optional<LinkRate> active;
    bool down = false;
    for (const auto* end : {&l.a, &l.b}) {
      auto it = ends.find(PortKey{end->node, end->port});
      if (it == ends.end()) continue;
      const LinkEnd& e = *it->second;
      down = down || e.state == mad::PortState::Down;
      if (e.state == mad::PortState::Down || e.state == mad::PortState::Unknown) continue;
      infos.push_back(&e.link);
      const LinkRate r = active_rate(e.link);
      if (r.known() && !active) active = r;
    }
    if (!active || infos.empty()) {
      // Down (neither counted nor judged), or an answer whose Active fields do not decode.
      if (!down) ++out.unknown;
      continue;
    }
    l.active = *active;
    l.capable = capable_rate(infos);
    // Running faster or wider than its ends enable: the answers contradict
    // each other, so the link is not judged (counted, never an alarm).
    if (l.capable.known() && (l.active.lanes > l.capable.lanes || l.active.speed > l.capable.speed)) {
      ++out.unknown;
      continue;
    }
    ++out.links;
    ++out.by_kind[l.kind];
    links.push_back(std::move(l));
  }

  // What most links of each kind run at (more than half of at least three).
  std::map<LinkKind, LinkRate> tier;
  std::map<LinkKind, std::pair<std::string, std::string>> tier_text;  // lanes, speed "N of M"
  for (LinkKind kind : {LinkKind::SwitchSwitch, LinkKind::SwitchCa}) {
    std::map<int, std::size_t> lanes, speeds;
    std::size_t n = 0;
    for (const auto& l : links)
      if (l.kind == kind) ++n, ++lanes[l.active.lanes], ++speeds[l.active.speed];
    if (n < 3) continue;
    LinkRate t;
    for (const auto& [v, c] : lanes)
      if (2 * c > n) t.lanes = v, tier_text[kind].first = std::to_string(c) + " of " + std::to_string(n);
    for (const auto& [v, c] : speeds)
      if (2 * c > n) t.speed = v, tier_text[kind].second = std::to_string(c) + " of " + std::to_string(n);
    tier[kind] = t;
  }

  for (const auto& l : links) {
    DegradedLink d;
    d.a = l.a;
    d.b = l.b;
    d.kind = l.kind;
    d.active = l.active;
    const std::optional<LinkRate>& want = l.kind == LinkKind::SwitchSwitch ? expect.switch_switch
                                          : l.kind == LinkKind::SwitchCa     ? expect.switch_ca
                                                                             : std::nullopt;
    if (l.capable.known() && below(l.active, l.capable)) {
      d.why = DegradedWhy::BelowEnds;
      d.should = l.capable;
      d.detail = to_string(l.capable) + " enabled and supported at " +
                 (l.a.type == mad::NodeType::Unknown || l.b.type == mad::NodeType::Unknown ? "the end read"
                                                                                           : "both ends");
    } else if (want) {
      if (!below(l.active, *want)) continue;
      d.why = DegradedWhy::BelowExpected;
      d.should = filled(*want, l.active);
      d.detail = "smha.yaml expects " + std::string(to_string(l.kind)) + " links at " + to_string(d.should);
    } else if (auto t = tier.find(l.kind); t != tier.end() && below(l.active, t->second)) {
      d.why = DegradedWhy::BelowTier;
      d.should = filled(t->second, l.active);
      // "3 of 4 switch-ca links run at 4X" (the part it falls short in; both if both).
      const auto& [lanes_of, speed_of] = tier_text[l.kind];
      const bool short_lanes = t->second.lanes > 0 && l.active.lanes < t->second.lanes;
      const bool short_speed = t->second.speed > 0 && l.active.speed < t->second.speed;
      const std::string kind(to_string(l.kind));
      if (short_lanes)
        d.detail = lanes_of + " " + kind + " links run at " + std::to_string(t->second.lanes) + "X";
      if (short_speed)
        d.detail += (short_lanes ? ", " + speed_of + " at " : speed_of + " " + kind + " links run at ") +
                    kLinkSpeedNames[static_cast<std::size_t>(t->second.speed)];
    } else {
      continue;
    }
    const double should = gbps(d.should);
    d.fraction = should > 0 ? gbps(d.active) / should : 1;
    out.degraded.push_back(std::move(d));
  }
  std::stable_sort(out.degraded.begin(), out.degraded.end(), [](const DegradedLink& x, const DegradedLink& y) {
    if (x.fraction != y.fraction) return x.fraction < y.fraction;
    return std::tie(x.a.node, x.a.port) < std::tie(y.a.node, y.a.port);
  });
  return out;
}

std::string end_text(const LinkEndRef& e) {
  std::string s = e.description_known ? "\"" + printable(e.description) + "\" " : std::string();
  return s + to_string(e.node) + " port " + std::to_string(e.port);
}

std::string label_text(const LinkEndRef& e) {
  return (e.description_known ? e.description + " " : std::string()) + to_string(e.node) + " port " +
         std::to_string(e.port);
}

// ---- LinkHealth

struct LinkHealth::Pending {
  LinkAssessment assessment;
  TimePoint walk_at{};
  std::vector<std::pair<Guid, DrPath>> to_name;  // nodes whose NodeDescription is read
  std::size_t next = 0;
};

LinkHealth::LinkHealth(HealthConfig cfg, Scheduler& sched, mad::MadTransport& mad, AlarmSink& sink)
    : cfg_(cfg), sched_(sched), mad_(mad), sink_(sink) {}

LinkHealth::~LinkHealth() { pending_.reset(); }

void LinkHealth::stop() {
  pending_.reset();
  set_alarm(sink_, AlarmKind::LinkDegraded, "", alarm_detail_, sched_.now());
}

void LinkHealth::on_walk(const DiscoveryResult& walk) {
  if (!cfg_.enabled) return;
  auto p = std::make_shared<Pending>();
  p->assessment = assess_links(walk, cfg_.expect);
  p->walk_at = sched_.now();
  // The names the walk already read (the SM ports').
  for (const auto& sm : walk.sm_ports)
    if (sm.description_known) names_[sm.node_guid] = sm.description;
  std::set<Guid> asked;
  for (const auto& d : p->assessment.degraded)
    for (const auto* e : {&d.a, &d.b})
      if (e->path && !names_.count(e->node) && p->to_name.size() < cfg_.max_descriptions && asked.insert(e->node).second)
        p->to_name.emplace_back(e->node, *e->path);
  pending_ = p;
  read_next(p);
}

// The names are read one at a time: a handful of MADs once per walk.
void LinkHealth::read_next(const std::shared_ptr<Pending>& p) {
  if (pending_ != p) return;  // a newer walk, or stopped
  if (p->next >= p->to_name.size()) {
    publish(*p);
    pending_.reset();
    return;
  }
  const Guid node = p->to_name[p->next].first;
  const DrPath path = p->to_name[p->next].second;
  ++p->next;
  ++snapshot_.description_mads;
  std::weak_ptr<Pending> weak = p;
  mad_.get_node_description(path, cfg_.request, [this, weak, node](Result<mad::NodeDescriptionReply> r) {
    auto q = weak.lock();
    if (!q) return;
    if (r) {
      if (names_.size() >= 4 * cfg_.max_links + 64) names_.clear();  // bounded
      names_[node] = r->info;
    }
    read_next(q);
  });
}

void LinkHealth::publish(Pending& p) {
  std::map<std::pair<PortKey, PortKey>, TimePoint> since;
  for (const auto& e : snapshot_.degraded)
    since[{PortKey{e.link.a.node, e.link.a.port}, PortKey{e.link.b.node, e.link.b.port}}] = e.since;
  HealthSnapshot s;
  s.assessed = true;
  s.walk_at = p.walk_at;
  s.links = p.assessment.links;
  s.by_kind = p.assessment.by_kind;
  s.unknown = p.assessment.unknown;
  s.degraded_total = p.assessment.degraded.size();
  for (const auto& d : p.assessment.degraded) ++s.degraded_by_kind[d.kind];
  s.walks = snapshot_.walks + 1;
  s.description_mads = snapshot_.description_mads;
  for (auto& d : p.assessment.degraded) {
    if (s.degraded.size() >= cfg_.max_links) break;
    for (auto* e : {&d.a, &d.b})
      if (auto n = names_.find(e->node); n != names_.end()) e->description = n->second, e->description_known = true;
    const auto key = std::make_pair(PortKey{d.a.node, d.a.port}, PortKey{d.b.node, d.b.port});
    const auto it = since.find(key);
    s.degraded.push_back(HealthSnapshot::Entry{std::move(d), it != since.end() ? it->second : p.walk_at});
  }
  snapshot_ = std::move(s);
  update_alarm();
}

void LinkHealth::update_alarm() {
  std::string detail;
  if (cfg_.alarm && snapshot_.degraded_total >= std::max<std::size_t>(1, cfg_.alarm_min_links) &&
      !snapshot_.degraded.empty()) {
    const auto& w = snapshot_.degraded.front().link;
    detail = std::to_string(snapshot_.degraded_total) + " degraded link" + (snapshot_.degraded_total == 1 ? "" : "s") +
             "; worst: " + end_text(w.a) + " <-> " + end_text(w.b) + " runs at " + to_string(w.active) +
             ", should run at " + to_string(w.should) + " (" + std::string(to_string(w.why)) + ": " + w.detail + ")";
  }
  set_alarm(sink_, AlarmKind::LinkDegraded, detail, alarm_detail_, sched_.now());
}

}  // namespace smha::fabric
