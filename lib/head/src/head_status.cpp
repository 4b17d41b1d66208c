// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/head/head_status.hpp"

#include <algorithm>

#include "smha/agent/agent.hpp"
#include "smha/config/config.hpp"
#include "smha/core/text.hpp"
#include "smha/platform/notify.hpp"

namespace smha::head {

using nlohmann::json;

std::optional<SmState> SmView::state() const {
  if (seen == SmSeen::Answered && answer) return answer->state;
  return std::nullopt;
}

std::string SmView::shown() const {
  switch (seen) {
    case SmSeen::Unknown: return "unknown";
    case SmSeen::Resolving: return "resolving";
    case SmSeen::NotFound: return "not found (" + searched + ")";
    case SmSeen::Unreachable: return "unreachable";
    case SmSeen::Unaddressed: return "unaddressed";
    case SmSeen::Answered: return answer ? std::string(to_string(answer->state)) : "unknown";
  }
  return "unknown";
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
  j["state"] = p.shown();
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
  if (p.answer) p.seen = SmSeen::Answered;
  const bool searching = route && !route->found &&
                         (route->state == agent::RouteState::Resolving || route->state == agent::RouteState::NotFound);
  if (searching && !peer.lid) {
    // Unknown, never absent.
    if (route->state == agent::RouteState::Resolving) {
      p.seen = SmSeen::Resolving;
    } else {
      p.seen = SmSeen::NotFound;
      p.searched = route->searched;
    }
  } else if (p.lid) {
    if (auto q = mad.last_query(mad::Target{*p.lid})) {
      p.last_poll_answered = q->answered;
      p.last_poll_age_s = seconds_between(q->at, now);
      if (!q->answered) p.seen = SmSeen::Unreachable;
    }
  } else if (p.dr) {
    // Found, but no LID yet (no SM has swept): polled by DR only. Not a live
    // standby yet (no last_poll_answered): a drill's mastership window names
    // a head's sweep by its LID.
    if (auto q = mad.last_query(mad::Target{*p.dr}); q && !q->answered) p.seen = SmSeen::Unreachable;
  } else {
    p.seen = SmSeen::Unaddressed;
  }
  return p;
}

std::string systemd_status_line(const HeadStatus& h, const opensm::SupervisorStatus* opensm) {
  std::string line = h.local.state() ? h.local.shown() : std::string("no answer from local SM");
  if (h.peers.empty()) line += "; no peer";
  bool first = true;
  for (const auto& p : h.peers) {
    line += first ? "; " : ", ";
    first = false;
    if (p.state() && p.answer) {
      // role_status_line's peer part: "peer <name> <state> prio <n>"
      const std::string full = platform::role_status_line("", p.name, p.shown(), p.answer->priority);
      line += full.substr(2);
    } else {
      line += "peer " + p.name + " " + p.shown();
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

// ---- The fabric blocks of the status reply --------------------------------

json census_json(const fabric::Census& census, const std::function<std::string(Guid)>& head_name, TimePoint now) {
  json sms = json::array();
  std::vector<const fabric::CensusEntry*> order;
  for (const auto& [g, e] : census.entries()) order.push_back(&e);
  std::stable_sort(order.begin(), order.end(),
                   [](const fabric::CensusEntry* a, const fabric::CensusEntry* b) { return a->head && !b->head; });
  for (const auto* e : order) {
    json x;
    x["guid"] = to_string(e->guid);
    x["head"] = e->head ? json(head_name(e->guid)) : json(nullptr);
    x["local"] = e->local;
    x["node_description"] = e->description.empty() ? json(nullptr) : json(printable(e->description));
    x["lid"] = e->lid.value != 0 ? json(e->lid.value) : json(nullptr);
    x["state"] = census.state_text(*e, now);
    x["priority"] = e->info ? json(e->info->priority) : json(nullptr);
    x["act_count"] = e->info ? json(e->info->act_count) : json(nullptr);
    x["dr_path"] = e->path ? json(to_string(*e->path)) : json(nullptr);
    x["switch_guid"] = e->neighbour ? json(to_string(*e->neighbour)) : json(nullptr);
    x["switch_port"] = e->neighbour ? json(e->neighbour_port) : json(nullptr);
    x["is_sm"] = e->is_sm;
    x["sa_listed"] = e->sa_listed;
    x["sources"] = fabric::census_sources_text(e->sources);
    x["last_answer_age_s"] = e->answered_at ? json(seconds_between(*e->answered_at, now)) : json(nullptr);
    x["first_seen_age_s"] = seconds_between(e->first_seen, now);
    sms.push_back(x);
  }
  return sms;
}

json census_sa_json(const fabric::CensusStats& st, Duration sa_interval, TimePoint now) {
  json s;
  s["interval_s"] = std::chrono::duration<double>(sa_interval).count();
  s["sa_lid"] = st.sa_lid.value != 0 ? json(st.sa_lid.value) : json(nullptr);
  s["queries"] = st.sa_queries;
  s["tables"] = st.sa_tables;
  s["mads"] = st.sa_mads;
  s["truncated_tables"] = st.sa_truncated;
  s["last_age_s"] = st.sa_last_at ? json(seconds_between(*st.sa_last_at, now)) : json(nullptr);
  s["records"] = st.sa_last_at ? json(st.sa_records) : json(nullptr);
  s["claimed"] = st.sa_claimed ? json(*st.sa_claimed) : json(nullptr);
  s["truncated"] = st.sa_last_truncated;
  s["last_error"] = st.sa_last_error.empty() ? json(nullptr) : json(printable(st.sa_last_error));
  // The IsSM PortInfoRecord table asked alongside (doc/census.md, source 6).
  json p;
  p["queries"] = st.ism_queries;
  p["tables"] = st.ism_tables;
  p["mads"] = st.ism_mads;
  p["truncated_tables"] = st.ism_truncated;
  p["found"] = st.ism_found;
  p["resolve_mads"] = st.ism_resolve_mads;
  p["last_age_s"] = st.ism_last_at ? json(seconds_between(*st.ism_last_at, now)) : json(nullptr);
  p["records"] = st.ism_last_at ? json(st.ism_records) : json(nullptr);
  p["truncated"] = st.ism_last_truncated;
  p["last_error"] = st.ism_last_error.empty() ? json(nullptr) : json(printable(st.ism_last_error));
  s["is_sm_ports"] = p;
  return s;
}

json census_stats_json(const fabric::Census& census, const fabric::CensusStats& st,
                       const fabric::CensusConfig& config, TimePoint now) {
  json c;
  c["enabled"] = config.enabled;
  c["walks"] = st.walks;
  c["walk_mads"] = st.walk_mads;
  c["query_mads"] = st.query_mads;
  c["dropped"] = census.dropped();
  c["sa"] = census_sa_json(st, config.sa_interval, now);
  c["last_walk_age_s"] = st.last_walk_at ? json(seconds_between(*st.last_walk_at, now)) : json(nullptr);
  c["next_walk_in_s"] = st.next_walk_at ? json(seconds_between(now, *st.next_walk_at)) : json(nullptr);
  if (st.last_walk) {
    const auto& w = *st.last_walk;
    c["last_walk"] = {{"nodes", w.nodes}, {"ports", w.ports}, {"requests", w.requests}, {"mads", w.mads},
                      {"timeouts", w.timeouts}, {"sm_ports", w.sm_ports.size()},
                      {"bounded", w.request_bound || w.hop_bound},
                      {"elapsed_ms", std::chrono::duration<double, std::milli>(w.elapsed).count()}};
  }
  return c;
}

json lid_continuity_json(const fabric::LidContinuity* lc, bool honor_guid2lid_file, TimePoint now) {
  json j;
  j["enabled"] = lc != nullptr;
  j["honor_guid2lid_file"] = honor_guid2lid_file;
  if (lc == nullptr) return j;
  const auto& st = lc->status();
  j["path"] = st.path;
  j["state"] = st.state;
  j["fabric_ports"] = st.fabric;
  j["entries"] = st.entries;
  j["kept"] = st.kept;
  j["dropped_overlap"] = st.dropped_overlap;
  j["conflicts"] = st.conflicts;
  j["conflicts_total"] = st.conflicts_total;
  json cd = json::array();
  for (const auto& c : st.conflict_details) cd.push_back(printable(c));
  j["conflict_details"] = cd;
  j["file_skipped"] = st.file_skipped;
  json fp = json::array();
  for (const auto& p : st.file_problems) fp.push_back(printable(p));
  j["file_problems"] = fp;
  j["rejected"] = {{"bad_lid", st.rejected.bad_lid},
                   {"duplicate_lid", st.rejected.duplicate_lid},
                   {"conflict", st.rejected.conflict}};
  j["unassigned"] = st.unassigned;
  json rs = json::array();
  for (const auto& r : st.reasons) rs.push_back(printable(r));
  j["reasons"] = rs;
  j["writes"] = st.writes;
  j["write_errors"] = st.write_errors;
  j["unchanged"] = st.unchanged;
  j["last_written_age_s"] = st.last_written_at ? json(seconds_between(*st.last_written_at, now)) : json(nullptr);
  j["last_checked_age_s"] = st.last_checked_at ? json(seconds_between(*st.last_checked_at, now)) : json(nullptr);
  j["last_error"] = st.last_error.empty() ? json(nullptr) : json(printable(st.last_error));
  return j;
}

json drift_json(const fabric::DriftMonitor& d, TimePoint now) {
  const auto& st = d.stats();
  auto digests = [](const fabric::ConfigDigests& c) {
    json o = json::object();
    for (std::size_t i = 0; i < fabric::kDriftComponents; ++i)
      o[std::string(fabric::to_string(static_cast<fabric::DriftComponent>(i)))] = fabric::to_hex(c.digest[i]);
    return o;
  };
  json j;
  j["gid"] = mad::to_string(d.own_gid());
  j["own"] = d.own() ? digests(*d.own()) : json(nullptr);
  j["sa_lid"] = st.sa_lid.value != 0 ? json(st.sa_lid.value) : json(nullptr);
  j["registered_age_s"] = st.registered_at ? json(seconds_between(*st.registered_at, now)) : json(nullptr);
  j["register_error"] = st.last_register_error.empty() ? json(nullptr) : json(printable(st.last_register_error));
  j["registrations"] = st.registrations;
  j["reads"] = st.reads;
  j["records"] = st.records;
  j["absent"] = st.absent;
  j["read_errors"] = st.read_errors;
  j["mads"] = st.mads;
  j["rejected"] = {{"foreign", st.rejected_foreign}, {"bad_digest", st.rejected_data}};
  json peers = json::array();
  for (const auto& p : d.peers()) {
    json x;
    x["name"] = p.name;
    x["guid"] = to_string(p.guid);
    x["state"] = std::string(fabric::to_string(p.state));
    x["detail"] = printable(p.detail);
    json diff = json::array();
    for (auto c : p.differing) diff.push_back(std::string(fabric::to_string(c)));
    x["differing"] = diff;
    x["digests"] = p.digests ? digests(*p.digests) : json(nullptr);
    x["read_age_s"] = p.read_at ? json(seconds_between(*p.read_at, now)) : json(nullptr);
    x["last_error"] = p.last_error.empty() ? json(nullptr) : json(printable(p.last_error));
    peers.push_back(x);
  }
  j["peers"] = peers;
  return j;
}

json opensm_json(const opensm::SupervisorStatus& st, const std::string& conf_path, const std::string& version,
                 TimePoint now) {
  json o;
  o["supervisor"] = std::string(opensm::to_string(st.state));
  o["pid"] = st.pid;
  o["adopted"] = st.adopted;
  o["uptime_s"] = st.started_at ? json(seconds_between(*st.started_at, now)) : json(nullptr);
  o["spawns"] = st.spawns;
  o["crashes"] = st.crashes;
  o["restarts"] = st.restarts;
  o["crash_loop_retries"] = st.crash_loop_retries;
  // Failed by a crash loop, or in a retry's backoff: when OpenSM is started again.
  o["next_start_in_s"] = st.next_start_at ? json(std::max(0.0, seconds_between(now, *st.next_start_at))) : json(nullptr);
  o["reason"] = st.reason;
  o["conf_path"] = conf_path;
  o["version"] = version;
  return o;
}

}  // namespace smha::head
