// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/head/head_status.hpp"

#include "smha/core/text.hpp"
#include "smha/platform/notify.hpp"

namespace smha::head {

using nlohmann::json;

std::optional<SmState> SmView::state() const {
  if (answer && shown == to_string(answer->state)) return answer->state;
  return std::nullopt;
}

json to_json(const SmView& p) {
  json j;
  j["name"] = p.name;
  j["guid"] = to_string(p.guid);
  j["lid"] = p.lid ? json(p.lid->value) : json(nullptr);
  j["dr_path"] = p.dr ? json(to_string(*p.dr)) : json(nullptr);
  j["configured_lid"] = p.configured_lid ? json(p.configured_lid->value) : json(nullptr);
  j["configured_dr_path"] = p.configured_dr ? json(to_string(*p.configured_dr)) : json(nullptr);
  j["addressed"] = p.lid.has_value() || p.dr.has_value();
  j["node_description"] = p.node_description.empty() ? json(nullptr) : json(printable(p.node_description));
  j["route"] = p.route ? json(*p.route) : json(nullptr);
  j["state"] = p.shown;
  if (p.answer) {
    j["priority"] = p.answer->priority;
    j["act_count"] = p.answer->act_count;
    j["rtt_ms"] = p.answer->rtt_ms;
    j["last_answer_age_s"] = p.answer->age_s;
  }
  if (p.last_poll_answered) j["last_poll_answered"] = *p.last_poll_answered;
  if (p.last_poll_age_s) j["last_poll_age_s"] = *p.last_poll_age_s;
  return j;
}

namespace {

double seconds_between(TimePoint then, TimePoint now) { return std::chrono::duration<double>(now - then).count(); }

}  // namespace

std::optional<SmView::Answer> last_answer(const RecordingTransport& mad, Guid guid, TimePoint now) {
  auto seen = mad.last_seen(guid);
  if (!seen) return std::nullopt;
  return SmView::Answer{seen->info.state, seen->info.priority, seen->info.act_count,
                        std::chrono::duration<double, std::milli>(seen->rtt).count(), seconds_between(seen->at, now)};
}

SmView peer_view(const config::Peer& peer, const agent::PeerRoute* route, const RecordingTransport& mad,
                 TimePoint now) {
  SmView p;
  p.name = peer.name;
  p.guid = peer.port_guid;
  // The addresses polled: the configured overrides, else what discovery found.
  p.lid = peer.lid;
  if (route && route->lid.value != 0) p.lid = route->lid;
  p.dr = peer.dr_path;
  if (route && route->dr) p.dr = route->dr;
  p.configured_lid = peer.lid;
  p.configured_dr = peer.dr_path;
  if (route) {
    p.node_description = route->description;
    p.route = route->status();
  }
  p.answer = last_answer(mad, peer.port_guid, now);
  if (p.answer) p.shown = std::string(to_string(p.answer->state));
  const bool searching = route && !route->found &&
                         (route->state == agent::RouteState::Resolving || route->state == agent::RouteState::NotFound);
  if (searching && !peer.lid) {
    p.shown = route->status();  // "resolving" or "not found (searched N nodes, M ports)": unknown, never absent
  } else if (p.lid) {
    if (auto q = mad.last_query(mad::Target{*p.lid})) {
      p.last_poll_answered = q->answered;
      p.last_poll_age_s = seconds_between(q->at, now);
      if (!q->answered) p.shown = "unreachable";
    }
  } else if (p.dr) {
    // Found, but no LID yet (no SM has swept): polled by DR only. Not a live
    // standby yet (no last_poll_answered): a drill's mastership window names
    // a head's sweep by its LID.
    if (auto q = mad.last_query(mad::Target{*p.dr}); q && !q->answered) p.shown = "unreachable";
  } else {
    p.shown = "unaddressed";
  }
  return p;
}

std::string systemd_status_line(const HeadStatus& h, const opensm::SupervisorStatus* opensm) {
  std::string line = h.local.state() ? h.local.shown : std::string("no answer from local SM");
  if (h.peers.empty()) line += "; no peer";
  bool first = true;
  for (const auto& p : h.peers) {
    line += first ? "; " : ", ";
    first = false;
    if (p.state() && p.answer) {
      // role_status_line's peer part: "peer <name> <state> prio <n>"
      const std::string full = platform::role_status_line("", p.name, p.shown, p.answer->priority);
      line += full.substr(2);
    } else {
      line += "peer " + p.name + " " + p.shown;
    }
  }
  if (h.held) line += "; HOLD";
  if (opensm != nullptr && opensm->state != opensm::SupervisorState::Running) {
    line += "; OpenSM " + std::string(opensm::to_string(opensm->state));
    if (!opensm->reason.empty() && (opensm->state == opensm::SupervisorState::Failed ||
                                    opensm->state == opensm::SupervisorState::Backoff)) {
      std::string reason = opensm->reason;
      if (reason.size() > 160) reason = reason.substr(0, 157) + "...";
      line += ": " + reason;
    }
  }
  return line;
}

namespace {

json end_json(const fabric::LinkEndRef& e) {
  return json{{"guid", to_string(e.node)},
              {"type", std::string(mad::to_string(e.type))},
              {"port", e.port},
              {"node_description", e.description_known ? json(printable(e.description)) : json(nullptr)},
              {"dr_path", e.path ? json(to_string(*e.path)) : json(nullptr)}};
}

double age_s(TimePoint then, TimePoint now) { return std::chrono::duration<double>(now - then).count(); }

}  // namespace

json health_json(const fabric::LinkHealth& health, TimePoint now, std::size_t limit) {
  const auto& s = health.snapshot();
  const auto& cfg = health.config();
  json j;
  j["enabled"] = cfg.enabled;
  j["assessed"] = s.assessed;
  j["walk_age_s"] = s.walk_at ? json(age_s(*s.walk_at, now)) : json(nullptr);
  j["walks"] = s.walks;
  j["links"] = s.links;
  json kinds = json::object();
  for (auto k : fabric::kLinkKinds) {
    const auto it = s.by_kind.find(k);
    kinds[std::string(fabric::to_string(k))] = it == s.by_kind.end() ? 0 : it->second;
  }
  j["links_by_kind"] = kinds;
  j["unknown"] = s.unknown;
  j["degraded_total"] = s.degraded_total;
  j["description_mads"] = s.description_mads;
  j["expect"] = {{"switch-switch", cfg.expect.switch_switch ? json(to_string(*cfg.expect.switch_switch)) : json(nullptr)},
                 {"switch-ca", cfg.expect.switch_ca ? json(to_string(*cfg.expect.switch_ca)) : json(nullptr)}};
  j["alarm"] = {{"enabled", cfg.alarm}, {"min_links", cfg.alarm_min_links}};
  json list = json::array();
  for (const auto& e : s.degraded) {
    if (list.size() >= limit) break;
    const auto& d = e.link;
    list.push_back(json{{"a", end_json(d.a)},
                        {"b", end_json(d.b)},
                        {"kind", std::string(fabric::to_string(d.kind))},
                        {"active", to_string(d.active)},
                        {"should", to_string(d.should)},
                        {"active_gbps", gbps(d.active)},
                        {"should_gbps", gbps(d.should)},
                        {"why", std::string(fabric::to_string(d.why))},
                        {"detail", d.detail},
                        {"degraded_for_s", age_s(e.since, now)}});
  }
  j["degraded"] = list;
  return j;
}

namespace {

json counts_json(const mad::ErrorCounts& c) {
  json j = json::object();
  for (auto k : mad::kErrorCounters) j[std::string(mad::counter_key(k))] = mad::at(c, k);
  return j;
}

// The counter furthest past its threshold (none risen: nullopt).
std::optional<mad::ErrorCounter> worst_counter(const fabric::ErrorPort& p, const mad::ErrorCounts& thresholds) {
  std::optional<mad::ErrorCounter> worst;
  double most = 0;
  for (auto k : mad::kErrorCounters) {
    const double r = static_cast<double>(mad::at(p.rise, k)) / std::max<std::uint32_t>(1, mad::at(thresholds, k));
    if (r > most) most = r, worst = k;
  }
  return worst;
}

}  // namespace

json errors_json(const fabric::PortErrors& errors, TimePoint now, std::size_t limit) {
  const auto s = errors.snapshot();
  const auto& cfg = errors.config();
  json j;
  j["state"] = s.state;
  j["reads_per_second"] = cfg.reads_per_second;
  j["window_s"] = std::chrono::duration<double>(cfg.window).count();
  j["thresholds"] = counts_json(cfg.thresholds);
  json names = json::object();
  for (auto k : mad::kErrorCounters) names[std::string(mad::counter_key(k))] = std::string(mad::counter_name(k));
  j["counter_names"] = names;
  j["alarm"] = {{"enabled", cfg.alarm}, {"min_ports", cfg.alarm_min_ports}};
  j["ports"] = s.ports;
  j["read"] = s.read;
  j["unknown"] = s.unknown;
  j["with_errors"] = s.with_errors;
  j["rising"] = s.rising;
  j["over_threshold"] = s.over;
  j["reads"] = s.reads;
  j["failures"] = s.failures;
  j["wrong_port"] = s.wrong_port;
  j["resets"] = s.resets;
  j["passes"] = s.passes;
  j["last_pass_s"] = s.last_pass ? json(std::chrono::duration<double>(*s.last_pass).count()) : json(nullptr);
  j["description_mads"] = s.description_mads;
  json list = json::array();
  for (const auto& p : s.listed) {
    if (list.size() >= limit) break;
    json saturated = json::array();
    for (auto k : mad::kErrorCounters)
      if (p.saturated[static_cast<std::size_t>(k)]) saturated.push_back(std::string(mad::counter_key(k)));
    list.push_back(json{{"port", end_json(p.where)},
                        {"lid", p.lid.value},
                        {"counters", counts_json(p.value)},
                        {"rise", counts_json(p.rise)},
                        {"saturated", saturated},
                        {"per_hour", p.per_hour},
                        {"over_threshold", p.over},
                        {"rising_for_s", p.since ? json(age_s(*p.since, now)) : json(nullptr)},
                        {"read_age_s", p.read_at ? json(age_s(*p.read_at, now)) : json(nullptr)},
                        {"unknown", p.unknown ? json(p.why_unknown) : json(nullptr)},
                        {"resets", p.resets}});
  }
  j["listed"] = list;
  return j;
}

json health_json(const fabric::Watchers& watchers, TimePoint now, std::size_t links, std::size_t ports) {
  json j = health_json(watchers.health(), now, links);
  j["errors"] = errors_json(watchers.errors(), now, ports);
  return j;
}

control::ErrorCounterMetrics error_metrics(const fabric::PortErrors& errors) {
  const auto s = errors.snapshot();
  control::ErrorCounterMetrics m;
  m.reading = s.state == "reading";
  m.ports = {{"read", s.read}, {"unknown", s.unknown}, {"with_errors", s.with_errors}, {"rising", s.rising},
             {"over_threshold", s.over}};
  for (auto k : mad::kErrorCounters) {
    const auto it = s.rising_by_counter.find(k);
    m.rising_by_counter[std::string(mad::counter_key(k))] = it == s.rising_by_counter.end() ? 0 : it->second;
  }
  m.reads = s.reads;
  m.failures = s.failures;
  m.wrong_port = s.wrong_port;
  m.resets = s.resets;
  for (const auto& p : s.listed) {
    if (m.worst.size() == kMetricsWorstLinks) break;
    const auto k = worst_counter(p, errors.config().thresholds);
    if (!k) continue;
    m.worst.push_back({fabric::label_text(p.where), std::string(mad::counter_name(*k)),
                       static_cast<double>(mad::at(p.rise, *k))});
  }
  return m;
}

}  // namespace smha::head
