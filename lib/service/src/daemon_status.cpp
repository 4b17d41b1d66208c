// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// Daemon::status_json and its parts: what `smctl status --json` returns
// (doc/control-protocol.md, "status").

#include "daemon_impl.hpp"

namespace smha::service {

namespace method = control::method;
namespace param = control::param;
using control::ResultCode;

json Daemon::drift_json(TimePoint now) const {
  const auto& d = head_->watchers().drift();
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
  j["registered_age_s"] = st.registered_at ? json(seconds_since(*st.registered_at, now)) : json(nullptr);
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
    x["read_age_s"] = p.read_at ? json(seconds_since(*p.read_at, now)) : json(nullptr);
    x["last_error"] = p.last_error.empty() ? json(nullptr) : json(printable(p.last_error));
    peers.push_back(x);
  }
  j["peers"] = peers;
  return j;
}

json Daemon::lid_continuity_json(TimePoint now) const {
  json j;
  const fabric::LidContinuity* lc = head_->lid_continuity();
  j["enabled"] = lc != nullptr;
  j["honor_guid2lid_file"] = head_->config().opensm.honor_guid2lid_file;
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
  j["last_written_age_s"] = st.last_written_at ? json(seconds_since(*st.last_written_at, now)) : json(nullptr);
  j["last_checked_age_s"] = st.last_checked_at ? json(seconds_since(*st.last_checked_at, now)) : json(nullptr);
  j["last_error"] = st.last_error.empty() ? json(nullptr) : json(printable(st.last_error));
  return j;
}

// The local port as its SMA answered the agent's last PortInfo query (fresher
// than sysfs, which umad2sim never updates): port_state from that answer while
// the last query was answered, and its age.
void Daemon::add_smp_port_state(json& local, TimePoint now) const {
  const auto rec =
      head_->mad().last_port_info(DrPath{}, static_cast<std::uint8_t>(port_->local_port().port));
  if (!rec) return;
  local["port_state_answered"] = rec->answered;
  if (!rec->answered || !rec->info) return;
  local["port_state"] = std::string(mad::to_string(rec->info->state));
  local["port_state_source"] = "smp";
  // The port's LID and master SM LID as the SMA answers them now (sysfs may
  // still show 0 from before the SM assigned them).
  if (rec->info->lid.value != 0) {
    local["lid"] = rec->info->lid.value;
    local["sm_lid"] = rec->info->sm_lid.value;
  }
  local["port_state_age_s"] = seconds_since(rec->info_at, now);
}

// Every SM the census knows (doc/census.md), heads first, then by GUID.
json Daemon::census_json(TimePoint now) const {
  json sms = json::array();
  const auto& census = head_->census().census();
  std::vector<const fabric::CensusEntry*> order;
  for (const auto& [g, e] : census.entries()) order.push_back(&e);
  std::stable_sort(order.begin(), order.end(),
                   [](const fabric::CensusEntry* a, const fabric::CensusEntry* b) { return a->head && !b->head; });
  for (const auto* e : order) {
    json x;
    x["guid"] = to_string(e->guid);
    x["head"] = e->head ? json(head_->head_name(e->guid)) : json(nullptr);
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
    x["last_answer_age_s"] = e->answered_at ? json(seconds_since(*e->answered_at, now)) : json(nullptr);
    x["first_seen_age_s"] = seconds_since(e->first_seen, now);
    sms.push_back(x);
  }
  return sms;
}

// The SA table the census last asked for (doc/census.md, source 5).
json Daemon::census_sa_json(TimePoint now) const {
  const auto& st = head_->census().stats();
  json s;
  s["interval_s"] = std::chrono::duration<double>(head_->census().config().sa_interval).count();
  s["sa_lid"] = st.sa_lid.value != 0 ? json(st.sa_lid.value) : json(nullptr);
  s["queries"] = st.sa_queries;
  s["tables"] = st.sa_tables;
  s["mads"] = st.sa_mads;
  s["truncated_tables"] = st.sa_truncated;
  s["last_age_s"] = st.sa_last_at ? json(seconds_since(*st.sa_last_at, now)) : json(nullptr);
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
  p["last_age_s"] = st.ism_last_at ? json(seconds_since(*st.ism_last_at, now)) : json(nullptr);
  p["records"] = st.ism_last_at ? json(st.ism_records) : json(nullptr);
  p["truncated"] = st.ism_last_truncated;
  p["last_error"] = st.ism_last_error.empty() ? json(nullptr) : json(printable(st.ism_last_error));
  s["is_sm_ports"] = p;
  return s;
}

json Daemon::status_json() {
  const TimePoint now = clock_.now();
  const auto es = head_->agent().status();
  const HeadStatus h = head_->status(false);  // the fabric parts are the census, LID and drift JSON below
  json j;
  j["node"] = h.node;
  j["fabric"] = h.fabric.empty() ? json(nullptr) : json(h.fabric);
  j["observe"] = h.observe;
  j["role"] = std::string(sm::to_string(h.role));
  j["rounds"] = head_->agent().rounds();
  j["master"] = es.master ? json(to_string(*es.master)) : json(nullptr);
  j["uptime_s"] = seconds_since(head_->started_at(), now);
  j["smhad_version"] = h.version;
  j["started_at"] = format_utc(h.started);
  j["config_loaded_at"] = format_utc(h.config_loaded);
  if (const auto& m = head_->mad().master()) {
    json ms;
    if (m->guid && es.masterless_since && *es.masterless_since > m->since) {
      // The last master stopped answering (dead, not demoted): no SM answers
      // MASTER anywhere now, which is what status must say.
      const auto ago = std::chrono::duration_cast<std::chrono::system_clock::duration>(now - *es.masterless_since);
      ms["guid"] = nullptr;
      ms["node"] = nullptr;
      ms["since"] = format_utc(clock_.wall_now() - ago);
      ms["for_s"] = seconds_since(*es.masterless_since, now);
      ms["exact"] = true;
      ms["last_guid"] = to_string(*m->guid);
      ms["last_node"] = head_->head_name(*m->guid);
    } else {
      ms["guid"] = m->guid ? json(to_string(*m->guid)) : json(nullptr);
      ms["node"] = m->guid ? json(head_->head_name(*m->guid)) : json(nullptr);
      ms["since"] = format_utc(m->since_wall);
      ms["for_s"] = seconds_since(m->since, now);
      ms["exact"] = m->exact;
    }
    j["mastership"] = ms;
  } else {
    j["mastership"] = nullptr;
  }
  if (const auto& c = head_->failovers().last_change()) {
    j["last_change"] = {{"kind", c->kind},
                        {"reason", c->reason},
                        {"outcome", c->outcome},
                        {"time", format_utc(c->started)},
                        {"duration_s", c->duration_s ? json(*c->duration_s) : json(nullptr)}};
  } else {
    j["last_change"] = nullptr;
  }
  json local;
  local["guid"] = to_string(h.local.guid);
  local["rendered_priority"] = es.rendered_priority;
  local["state"] = h.local.state() ? json(h.local.shown) : json(nullptr);
  if (auto p = port_->refresh_local_port()) {
    local["lid"] = p.value().lid.value;
    local["sm_lid"] = p.value().sm_lid.value;
    local["port_state"] = std::string(mad::to_string(p.value().state));
    local["port_state_source"] = "sysfs";
  }
  add_smp_port_state(local, now);
  if (h.local_answered) {
    local["priority"] = h.local.answer->priority;
    local["act_count"] = h.local.answer->act_count;
    local["rtt_ms"] = h.local.answer->rtt_ms;
    local["last_poll_age_s"] = h.local.answer->age_s;
  }
  j["local"] = local;
  json peers = json::array();
  for (const auto& p : h.peers) peers.push_back(to_json(p));
  j["peers"] = peers;
  j["sms"] = census_json(now);
  j["census_sa"] = census_sa_json(now);
  j["lid_continuity"] = lid_continuity_json(now);
  j["drift"] = drift_json(now);
  j["health"] = head::health_json(head_->watchers(), now, head::kMetricsWorstLinks, head::kMetricsWorstLinks);
  j["continuity"] = continuity_ ? continuity_->status_json() : json{{"enabled", false}};
  const auto& pol = head_->agent().config().policy;
  j["policy"] = {{"poll_interval_ms", std::chrono::duration_cast<std::chrono::milliseconds>(pol.poll_interval).count()},
                 {"misses", pol.misses},
                 {"required_rounds", es.required_rounds},
                 {"failback", std::string(sm::to_string(pol.failback))},
                 {"base_priority", pol.base_priority}};
  json alarms = json::array();
  for (const auto& [kind, detail] : h.alarms) alarms.push_back({{"kind", kind}, {"detail", detail}});
  j["alarms"] = alarms;
  j["last_transition"] = head_->log().last_transition() ? event_to_json(*head_->log().last_transition()) : json(nullptr);
  j["last_takeover"] = head_->log().last_takeover() ? event_to_json(*head_->log().last_takeover()) : json(nullptr);
  json hold{{"held", h.held}};
  if (h.held) {
    hold["reason"] = h.hold_reason;
    hold["expires_in_s"] = h.hold_expires_in_s ? json(*h.hold_expires_in_s) : json(nullptr);
  }
  j["hold"] = hold;
  if (const opensm::SupervisorStatus* osm = head_->opensm()) {
    const auto& st = *osm;
    json o;
    o["supervisor"] = std::string(opensm::to_string(st.state));
    o["pid"] = st.pid;
    o["adopted"] = st.adopted;
    o["uptime_s"] = st.started_at ? json(seconds_since(*st.started_at, now)) : json(nullptr);
    o["spawns"] = st.spawns;
    o["crashes"] = st.crashes;
    o["restarts"] = st.restarts;
    o["crash_loop_retries"] = st.crash_loop_retries;
    // Failed by a crash loop, or in a retry's backoff: when OpenSM is started again.
    o["next_start_in_s"] = st.next_start_at ? json(std::max(0.0, seconds_since(now, *st.next_start_at))) : json(nullptr);
    o["reason"] = st.reason;
    o["conf_path"] = head_->config().opensm.conf_path;
    o["version"] = head_->caps().version;
    j["opensm"] = o;
  }
  return j;
}

}  // namespace smha::service
