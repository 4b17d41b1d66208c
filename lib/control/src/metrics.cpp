// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/control/metrics.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "smha/core/text.hpp"

namespace smha::control {
namespace {

// The exposition format's escapes (\\, \", \n) over printable(): a label value
// is valid UTF-8 without control characters, whatever the fabric named.
std::string escape_label(const std::string& raw) {
  const std::string v = printable(raw);
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  // Shortest round-trip text, fixed notation down to 1e-4 ("0.0005", not "5e-04").
  auto res = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::general);
  return std::string(buf, res.ptr);
}

std::string number(uint64_t v) { return std::to_string(v); }

class Writer {
 public:
  explicit Writer(std::string fabric) : fabric_(std::move(fabric)) {}
  void family(const char* name, const char* type, const char* help) {
    out_ += "# HELP ";
    out_ += name;
    out_ += ' ';
    out_ += help;
    out_ += "\n# TYPE ";
    out_ += name;
    out_ += ' ';
    out_ += type;
    out_ += '\n';
  }
  template <typename V>
  void sample(const std::string& name, std::initializer_list<std::pair<const char*, std::string>> labels, V value) {
    labelled(name, labels, value);
  }
  // Labels known at run time (the config digests).
  template <typename V>
  void sample(const std::string& name, const std::vector<std::pair<std::string, std::string>>& labels, V value) {
    labelled(name, labels, value);
  }
  std::string take() { return std::move(out_); }

 private:
  template <typename L, typename V>
  void labelled(const std::string& name, const L& labels, V value) {
    out_ += name;
    if (labels.size() > 0 || !fabric_.empty()) {
      out_ += '{';
      bool first = true;
      if (!fabric_.empty()) {
        out_ += "fabric=\"";
        out_ += escape_label(fabric_);
        out_ += '"';
        first = false;
      }
      for (const auto& [k, v] : labels) {
        if (!first) out_ += ',';
        first = false;
        out_ += k;
        out_ += "=\"";
        out_ += escape_label(v);
        out_ += '"';
      }
      out_ += '}';
    }
    out_ += ' ';
    out_ += number(value);
    out_ += '\n';
  }
  std::string fabric_;
  std::string out_;
};

}  // namespace

std::string render_prometheus(const MetricsSnapshot& s) {
  Writer w(s.fabric);
  std::vector<std::string> roles = s.roles;
  if (std::find(roles.begin(), roles.end(), s.role) == roles.end()) roles.push_back(s.role);
  w.family("smha_role", "gauge", "1 for this head's current role, 0 for the other roles.");
  for (const auto& r : roles) w.sample("smha_role", {{"node", s.node}, {"role", r}}, r == s.role ? 1.0 : 0.0);

  w.family("smha_sm_up", "gauge", "1 if the SM answered its last SMInfo poll, 0 if not.");
  for (const auto& sm : s.sms)
    w.sample("smha_sm_up", {{"node", sm.node}, {"guid", to_string(sm.guid)}}, sm.answered ? 1.0 : 0.0);

  w.family("smha_sm_state", "gauge",
           "SMInfo SMState of each known SM: 0 not-active, 1 discovering, 2 standby, 3 master.");
  for (const auto& sm : s.sms) {
    if (!sm.answered) continue;
    w.sample("smha_sm_state", {{"node", sm.node}, {"guid", to_string(sm.guid)}},
             static_cast<double>(static_cast<unsigned>(sm.state)));
  }
  w.family("smha_sm_priority", "gauge", "SMInfo priority of each known SM.");
  for (const auto& sm : s.sms) {
    if (!sm.answered) continue;
    w.sample("smha_sm_priority", {{"node", sm.node}, {"guid", to_string(sm.guid)}},
             static_cast<double>(sm.priority));
  }
  w.family("smha_sm_master", "gauge", "1 if the SM is MASTER.");
  for (const auto& sm : s.sms) {
    if (!sm.answered) continue;
    w.sample("smha_sm_master", {{"node", sm.node}, {"guid", to_string(sm.guid)}},
             sm.state == SmState::Master ? 1.0 : 0.0);
  }

  w.family("smha_fabric_sms", "gauge",
           "SMs on the fabric the census knows (configured heads included), by SMInfo state; "
           "silent: answered before but not lately, unknown: IsSM port that never answered.");
  {
    std::vector<std::string> states = s.fabric_sm_states;
    for (const auto& [st, n] : s.fabric_sms)
      if (std::find(states.begin(), states.end(), st) == states.end()) states.push_back(st);
    for (const auto& st : states) {
      auto it = s.fabric_sms.find(st);
      w.sample("smha_fabric_sms", {{"state", st}}, static_cast<double>(it == s.fabric_sms.end() ? 0 : it->second));
    }
  }

  if (s.lid_continuity) {
    const auto& l = *s.lid_continuity;
    w.family("smha_lid_continuity_entries", "gauge", "Entries in the guid2lid smhad last wrote for its OpenSM.");
    w.sample("smha_lid_continuity_entries", {}, static_cast<double>(l.entries));
    w.family("smha_lid_continuity_writes_total", "counter", "guid2lid files smhad wrote for its OpenSM.");
    w.sample("smha_lid_continuity_writes_total", {}, l.writes);
    w.family("smha_lid_continuity_write_errors_total", "counter", "Failed reads or writes of that guid2lid.");
    w.sample("smha_lid_continuity_write_errors_total", {}, l.write_errors);
    w.family("smha_lid_continuity_rejected_total", "counter",
             "Fabric answers not written into guid2lid, by reason (bad_lid, duplicate_lid, conflict).");
    std::map<std::string, uint64_t> r = l.rejected;
    for (const char* k : {"bad_lid", "duplicate_lid", "conflict"}) r.emplace(k, 0);
    for (const auto& [reason, n] : r) w.sample("smha_lid_continuity_rejected_total", {{"reason", reason}}, n);
  }

  w.family("smha_failovers_total", "counter", "Times the local SM became MASTER, by cause (takeover, handover, start, ...).");
  for (const auto& [reason, n] : s.failovers_by_reason) w.sample("smha_failovers_total", {{"reason", reason}}, n);

  if (s.last_takeover_seconds) {
    w.family("smha_last_takeover_duration_seconds", "gauge",
             "Duration of the last takeover or pulled handover, from the engine's decision to the local SM answering MASTER.");
    w.sample("smha_last_takeover_duration_seconds", {}, *s.last_takeover_seconds);
  }

  if (s.last_report) {
    const auto& r = *s.last_report;
    if (r.sa_outage_seconds) {
      w.family("smha_last_takeover_sa_outage_seconds", "gauge",
               "Last takeover report: the old master's last MASTER answer to the new master's SA answering again.");
      w.sample("smha_last_takeover_sa_outage_seconds", {}, *r.sa_outage_seconds);
    }
    if (r.lft_entries_changed) {
      w.family("smha_last_takeover_lft_entries_changed", "gauge",
               "Last takeover report: switch LFT entries that differ from the last census walk before it.");
      w.sample("smha_last_takeover_lft_entries_changed", {}, static_cast<double>(*r.lft_entries_changed));
    }
    w.family("smha_last_takeover_sa_restored", "gauge",
             "Last takeover report: 1 when the new master had an SA database copy to restore, else 0.");
    w.sample("smha_last_takeover_sa_restored", {}, r.sa_restored ? 1.0 : 0.0);
    if (r.groups_lost) {
      w.family("smha_last_takeover_groups_lost", "gauge",
               "Last takeover report: multicast groups of the SA copy the new master's SA did not answer at their MLID.");
      w.sample("smha_last_takeover_groups_lost", {}, static_cast<double>(*r.groups_lost));
    }
  }

  w.family("smha_poll_rtt_seconds", "histogram", "Round-trip time of SMInfo polls.");
  std::size_t n = std::min(s.poll_rtt.bounds.size(), s.poll_rtt.counts.size());
  for (std::size_t i = 0; i < n; ++i) {
    w.sample("smha_poll_rtt_seconds_bucket", {{"le", number(s.poll_rtt.bounds[i])}}, s.poll_rtt.counts[i]);
  }
  w.sample("smha_poll_rtt_seconds_bucket", {{"le", "+Inf"}}, s.poll_rtt.count);
  w.sample("smha_poll_rtt_seconds_sum", {}, s.poll_rtt.sum);
  w.sample("smha_poll_rtt_seconds_count", {}, s.poll_rtt.count);

  w.family("smha_missed_polls_total", "counter", "SMInfo queries that got no answer (after the transport's retries).");
  w.sample("smha_missed_polls_total", {}, s.missed_polls);
  w.family("smha_opensm_restarts_total", "counter", "OpenSM restarts by the supervisor.");
  w.sample("smha_opensm_restarts_total", {}, s.opensm_restarts);

  w.family("smha_alarm_active", "gauge", "1 for each active alarm, 0 for the others.");
  std::vector<std::string> alarms = s.known_alarms;
  for (const auto& a : s.active_alarms)
    if (std::find(alarms.begin(), alarms.end(), a) == alarms.end()) alarms.push_back(a);
  for (const auto& a : alarms) {
    const bool on = std::find(s.active_alarms.begin(), s.active_alarms.end(), a) != s.active_alarms.end();
    w.sample("smha_alarm_active", {{"alarm", a}}, on ? 1.0 : 0.0);
  }
  w.family("smha_alarms_active", "gauge", "Number of active alarms.");
  w.sample("smha_alarms_active", {}, static_cast<double>(s.active_alarms.size()));
  w.family("smha_hold_active", "gauge", "1 while a maintenance hold freezes automatic transitions.");
  w.sample("smha_hold_active", {}, s.hold_active ? 1.0 : 0.0);
  if (!s.version.empty()) {
    w.family("smha_build_info", "gauge", "1, labelled with smhad's version.");
    w.sample("smha_build_info", {{"version", s.version}}, 1.0);
  }
  if (!s.config_digests.empty()) {
    w.family("smha_config_digest_info", "gauge",
             "1, labelled with this head's configuration digests per component (doc/drift.md): heads that "
             "disagree on a label have drifted.");
    std::vector<std::pair<std::string, std::string>> labels{{"node", s.node}};
    // Never a key-derived value: the text is served to any local user and
    // written world-readable for node_exporter (metrics.hpp).
    for (const auto& d : s.config_digests)
      if (d.first != kUnexposedDigest) labels.push_back(d);
    w.sample("smha_config_digest_info", labels, 1.0);
  }
  if (!s.drift_peers.empty()) {
    w.family("smha_config_drift_peer_state", "gauge",
             "1 for each peer's config drift state (unknown, match, drift), 0 for the others.");
    for (const auto& [peer, state] : s.drift_peers)
      for (const char* st : {"unknown", "match", "drift"})
        w.sample("smha_config_drift_peer_state", {{"peer", peer}, {"state", st}}, state == st ? 1.0 : 0.0);
  }
  w.family("smha_config_drift_rejected_total", "counter",
           "Peer ServiceRecords rejected: for a port that is no configured head (foreign), or with ServiceData "
           "that does not parse (bad_digest).");
  for (const char* r : {"foreign", "bad_digest"}) {
    auto it = s.drift_rejected.find(r);
    w.sample("smha_config_drift_rejected_total", {{"reason", r}}, it == s.drift_rejected.end() ? uint64_t{0} : it->second);
  }
  if (s.health) {
    const auto& h = *s.health;
    w.family("smha_fabric_links", "gauge", "Cabled links with a known rate in the last assessed census walk, by kind.");
    for (const auto& [kind, n] : h.links_by_kind) w.sample("smha_fabric_links", {{"kind", kind}}, n);
    w.family("smha_fabric_links_degraded", "gauge",
             "Links running below their width or speed (doc/health.md), by kind.");
    for (const auto& [kind, n] : h.degraded_by_kind) w.sample("smha_fabric_links_degraded", {{"kind", kind}}, n);
    w.family("smha_fabric_links_unknown", "gauge", "Cabled links whose PortInfo rate did not decode (not assessed).");
    w.sample("smha_fabric_links_unknown", {}, h.unknown);
    w.family("smha_fabric_link_degraded_ratio", "gauge",
             "The worst degraded links (at most 10, rank 1 the worst): the rate they run at over the rate they "
             "should, with both ends and both rates as labels.");
    for (std::size_t i = 0; i < h.worst.size(); ++i) {
      const auto& l = h.worst[i];
      w.sample("smha_fabric_link_degraded_ratio",
               {{"rank", std::to_string(i + 1)}, {"a", l.a}, {"b", l.b}, {"active", l.active}, {"should", l.should},
                {"why", l.why}},
               l.fraction);
    }
  }
  if (s.errors) {
    const auto& e = *s.errors;
    w.family("smha_fabric_counters_reading", "gauge",
             "1 while this head reads the ports' error counters (its OpenSM is MASTER), else 0.");
    w.sample("smha_fabric_counters_reading", {}, e.reading ? 1.0 : 0.0);
    w.family("smha_fabric_error_ports", "gauge",
             "Ports by what their error counters show (doc/health.md): read, unknown, with_errors (some counter "
             "non-zero), rising (risen within the window), over_threshold.");
    for (const auto& [state, n] : e.ports) w.sample("smha_fabric_error_ports", {{"state", state}}, n);
    w.family("smha_fabric_error_ports_rising", "gauge", "Ports whose counter rose within the window, by counter.");
    for (const auto& [counter, n] : e.rising_by_counter)
      w.sample("smha_fabric_error_ports_rising", {{"counter", counter}}, n);
    w.family("smha_fabric_counter_reads_total", "counter", "PMA PortCounters reads sent.");
    w.sample("smha_fabric_counter_reads_total", {}, e.reads);
    w.family("smha_fabric_counter_read_failures_total", "counter",
             "PortCounters reads without a usable answer: failed (no answer, a status, malformed) or wrong_port "
             "(the answer was for another port).");
    w.sample("smha_fabric_counter_read_failures_total", {{"reason", "failed"}}, e.failures);
    w.sample("smha_fabric_counter_read_failures_total", {{"reason", "wrong_port"}}, e.wrong_port);
    w.family("smha_fabric_counter_resets_total", "counter", "Error counters seen going down (cleared by someone).");
    w.sample("smha_fabric_counter_resets_total", {}, e.resets);
    w.family("smha_fabric_port_error_rise", "gauge",
             "The worst erroring ports (at most 10, rank 1 the worst): the rise within the window of the counter "
             "furthest past its threshold, with the port and the counter as labels.");
    for (std::size_t i = 0; i < e.worst.size(); ++i)
      w.sample("smha_fabric_port_error_rise",
               {{"rank", std::to_string(i + 1)}, {"port", e.worst[i].port}, {"counter", e.worst[i].counter}},
               e.worst[i].rise);
  }
  if (s.continuity) {
    const auto& k = *s.continuity;
    w.family("smha_continuity_sending", "gauge",
             "1 while this head sends copies of its OpenSM's SA dump and guid2lid (its OpenSM is MASTER), else 0.");
    w.sample("smha_continuity_sending", {}, k.sending ? 1.0 : 0.0);
    w.family("smha_continuity_copy_age_seconds", "gauge",
             "Seconds since the master last confirmed the copy held here, by file (absent: none held).");
    if (k.sa_copy_age_s) w.sample("smha_continuity_copy_age_seconds", {{"file", "sa_dump"}}, *k.sa_copy_age_s);
    if (k.guid2lid_copy_age_s)
      w.sample("smha_continuity_copy_age_seconds", {{"file", "guid2lid"}}, *k.guid2lid_copy_age_s);
    w.family("smha_continuity_sa_copy_records", "gauge",
             "What the SA database copy held here restores at a takeover: groups, members, services, subscriptions.");
    w.sample("smha_continuity_sa_copy_records", {{"kind", "groups"}}, k.sa_groups);
    w.sample("smha_continuity_sa_copy_records", {{"kind", "members"}}, k.sa_members);
    w.sample("smha_continuity_sa_copy_records", {{"kind", "services"}}, k.sa_services);
    w.sample("smha_continuity_sa_copy_records", {{"kind", "subscriptions"}}, k.sa_subscriptions);
    w.family("smha_continuity_copies_received_total", "counter", "Copies that arrived over the peer channel.");
    w.sample("smha_continuity_copies_received_total", {}, k.received);
    w.family("smha_continuity_copies_applied_total", "counter", "Copies written where this head's OpenSM reads them.");
    w.sample("smha_continuity_copies_applied_total", {}, k.applied);
    w.family("smha_continuity_copies_refused_total", "counter",
             "Copies refused, by reason (identity, not_a_peer, wrong_fabric, not_master, local_master, older, "
             "replayed, too_large, malformed, write_failed).");
    for (const auto& [reason, n] : k.refused) w.sample("smha_continuity_copies_refused_total", {{"reason", reason}}, n);
    w.family("smha_continuity_copies_sent_total", "counter", "Copies this head sent (each to every peer).");
    w.sample("smha_continuity_copies_sent_total", {}, k.sent);
    w.family("smha_continuity_connections_refused_total", "counter",
             "Inbound connections refused: handshake (TLS failed: another CA, no certificate, timeout), identity "
             "(a certificate naming no configured peer), protocol (bad frames, flooding, slow), source_limit (too many "
             "unauthenticated from one address), rate (over the handshake rate), memory (over the buffered-bytes budget), "
             "preauth_timeout (not authenticated in time).");
    w.sample("smha_continuity_connections_refused_total", {{"reason", "handshake"}}, k.handshake_failed);
    w.sample("smha_continuity_connections_refused_total", {{"reason", "identity"}}, k.unknown_identity);
    w.sample("smha_continuity_connections_refused_total", {{"reason", "protocol"}}, k.protocol_errors);
    w.sample("smha_continuity_connections_refused_total", {{"reason", "source_limit"}}, k.rejected_source_limit);
    w.sample("smha_continuity_connections_refused_total", {{"reason", "rate"}}, k.rejected_rate);
    w.sample("smha_continuity_connections_refused_total", {{"reason", "memory"}}, k.rejected_memory);
    w.sample("smha_continuity_connections_refused_total", {{"reason", "preauth_timeout"}}, k.preauth_timeouts);
    w.family("smha_continuity_peer_up", "gauge", "1 while this head's outbound link to the peer is up, else 0.");
    for (const auto& [peer, up] : k.peer_up) w.sample("smha_continuity_peer_up", {{"peer", peer}}, up ? 1.0 : 0.0);
  }
  if (s.start_time) {
    w.family("smha_start_time_seconds", "gauge", "When smhad started, Unix time in seconds.");
    w.sample("smha_start_time_seconds", {}, *s.start_time);
  }
  if (s.last_reload_success) {
    w.family("smha_config_last_reload_success_timestamp_seconds", "gauge",
             "When smhad last loaded its configuration successfully (start or reload), Unix time in seconds.");
    w.sample("smha_config_last_reload_success_timestamp_seconds", {}, *s.last_reload_success);
  }
  return w.take();
}

}  // namespace smha::control
