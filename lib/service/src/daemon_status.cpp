// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// Daemon::status_json and its parts: what `smctl status --json` returns
// (doc/control-protocol.md, "status").

#include "daemon_impl.hpp"

namespace smha::service {

namespace method = control::method;
namespace param = control::param;
using control::ResultCode;
using head::format_utc;
using head::HeadStatus;

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
  local["state"] = h.local.state() ? json(h.local.shown()) : json(nullptr);
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
  const auto& census = head_->census();
  j["sms"] = head::census_json(census.census(), [this](Guid g) { return head_->head_name(g); }, now);
  j["census_sa"] = head::census_sa_json(census.stats(), census.config().sa_interval, now);
  j["lid_continuity"] =
      head::lid_continuity_json(head_->lid_continuity(), head_->config().opensm.honor_guid2lid_file, now);
  j["drift"] = head::drift_json(head_->watchers().drift(), now);
  j["health"] = head::health_json(head_->watchers(), now, head::kMetricsWorstLinks, head::kMetricsWorstLinks);
  if (continuity_) {
    const peer::ContinuityStatus cs = continuity_->status();
    j["continuity"] = peer::continuity_json(&cs, clock_.wall_now());
  } else {
    j["continuity"] = peer::continuity_json(nullptr, clock_.wall_now());
  }
  const auto& pol = head_->agent().config().policy;
  j["policy"] = {{"poll_interval_ms", std::chrono::duration_cast<std::chrono::milliseconds>(pol.poll_interval).count()},
                 {"misses", pol.misses},
                 {"required_rounds", es.required_rounds},
                 {"failback", std::string(sm::to_string(pol.failback))},
                 {"base_priority", pol.base_priority}};
  json alarms = json::array();
  for (const auto& a : h.alarms) alarms.push_back({{"kind", std::string(to_string(a.kind))}, {"detail", a.detail}});
  j["alarms"] = alarms;
  j["last_transition"] = head_->log().last_transition() ? event_to_json(*head_->log().last_transition()) : json(nullptr);
  j["last_takeover"] = head_->log().last_takeover() ? event_to_json(*head_->log().last_takeover()) : json(nullptr);
  json hold{{"held", h.held}};
  if (h.held) {
    hold["reason"] = h.hold_reason;
    hold["expires_in_s"] = h.hold_expires_in_s ? json(*h.hold_expires_in_s) : json(nullptr);
  }
  j["hold"] = hold;
  if (const opensm::SupervisorStatus* osm = head_->opensm())
    j["opensm"] = head::opensm_json(*osm, head_->config().opensm.conf_path, head_->caps().version, now);
  return j;
}

}  // namespace smha::service
