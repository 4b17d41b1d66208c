// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/client/render.hpp"

#include <sstream>

#include <fmt/format.h>

#include "smha/core/text.hpp"

namespace smha::client {

namespace {

// Every field shown goes through terminal_safe(): names, reasons and evidence may
// carry what the fabric or OpenSM wrote (ANSI escapes, bytes that are not UTF-8).
std::string str(const nlohmann::json& j, const char* key, const char* dflt = "-") {
  if (!j.contains(key) || j[key].is_null()) return dflt;
  if (j[key].is_string()) return terminal_safe(j[key].get<std::string>());
  return terminal_safe(j[key].dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

std::string age_text(const nlohmann::json& j, const char* key) {
  if (!j.contains(key) || j[key].is_null() || !j[key].is_number()) return "never";
  return human_duration(j[key].get<double>()) + " ago";
}

// A duration field in seconds for people, "-" when absent.
std::string duration_field(const nlohmann::json& j, const char* key) {
  if (!j.contains(key) || !j[key].is_number()) return "-";
  return human_duration(j[key].get<double>());
}

}  // namespace

std::string human_duration(double seconds) {
  if (!(seconds >= 0)) return "-";  // also NaN
  if (seconds < 1) return fmt::format("{:.0f}ms", seconds * 1000);
  if (seconds < 10) return fmt::format("{:.1f}s", seconds);
  auto s = static_cast<long long>(seconds);
  if (s < 60) return fmt::format("{}s", s);
  if (s < 3600) return fmt::format("{}m{:02}s", s / 60, s % 60);
  if (s < 86400) return fmt::format("{}h{:02}m", s / 3600, s % 3600 / 60);
  return fmt::format("{}d{:02}h", s / 86400, s % 86400 / 3600);
}

std::string human_ms(double ms) {
  if (!(ms >= 0)) return "-";
  if (ms < 10) return fmt::format("{:.2f} ms", ms);
  if (ms < 100) return fmt::format("{:.1f} ms", ms);
  return fmt::format("{:.0f} ms", ms);
}

std::string render_status_text(const nlohmann::json& s) {
  std::ostringstream o;
  const auto& local = s.value("local", nlohmann::json::object());
  const std::string role = str(s, "role");
  // An instance names its fabric as its unit does (smhad@NAME).
  const auto fabric = s.find("fabric");
  const bool instance = fabric != s.end() && fabric->is_string() && !fabric->get<std::string>().empty();
  o << (role == "master" ? "\u25cf " : "\u25cb ") << "smhad" << (instance ? "@" + fabric->get<std::string>() : "")
    << " " << str(s, "node") << " - "
    << (s.value("observe", false) ? "observing" : "managing") << " OpenSM\n";
  if (s.contains("smhad_version") || s.contains("uptime_s"))
    o << "    smhad: " << str(s, "smhad_version") << ", up " << duration_field(s, "uptime_s") << "\n";
  o << "     Role: " << role;
  if (s.contains("hold") && s["hold"].value("held", false)) o << " (HOLD: " << str(s["hold"], "reason") << ")";
  o << "\n";
  if (s.contains("mastership") && s["mastership"].is_object()) {
    const auto& m = s["mastership"];
    if (m.contains("guid") && m["guid"].is_string()) {
      const std::string node = str(m, "node", "");
      o << "   Master: " << (node.empty() ? "unknown SM" : node) << " (" << str(m, "guid") << ") since "
        << (m.value("exact", false) ? "" : "at least ") << str(m, "since") << ", "
        << duration_field(m, "for_s") << "\n";
    } else {
      o << "   Master: none since " << str(m, "since") << ", " << duration_field(m, "for_s");
      if (m.contains("last_node") && m["last_node"].is_string())
        o << " (last: " << str(m, "last_node") << ", no longer answering)";
      o << "\n";
    }
  }
  if (s.contains("last_change") && s["last_change"].is_object()) {
    const auto& c = s["last_change"];
    o << "  Changed: " << str(c, "kind") << " (" << str(c, "reason") << ") at " << str(c, "time") << ", "
      << str(c, "outcome");
    if (c.contains("duration_s") && c["duration_s"].is_number()) o << " in " << duration_field(c, "duration_s");
    o << "\n";
  }
  o << " Local SM: " << str(local, "state") << "  prio " << str(local, "priority") << "  guid "
    << str(local, "guid") << "  lid " << str(local, "lid") << "  actcount " << str(local, "act_count")
    << "  (" << age_text(local, "last_poll_age_s") << ")\n";
  if (local.contains("port_state"))
    o << "     Port: " << str(local, "port_state") << "  (" << str(local, "port_state_source", "sysfs")
      << (str(local, "port_state_source", "") == "smp" ? ", PortInfo " + age_text(local, "port_state_age_s")
                                                          : std::string())
      << ")\n";
  if (s.contains("opensm")) {
    const auto& osm = s["opensm"];
    o << "   OpenSM: " << str(osm, "supervisor") << "  pid " << str(osm, "pid") << "  uptime "
      << duration_field(osm, "uptime_s") << "  restarts " << str(osm, "restarts")
      << (osm.value("adopted", false) ? "  (adopted)" : "");
    if (!str(osm, "reason", "").empty()) o << "\n           " << str(osm, "reason");
    o << "\n";
  }
  o << "    Peers:\n";
  for (const auto& p : s.value("peers", nlohmann::json::array())) {
    o << "           " << str(p, "name") << "  " << str(p, "state") << "  prio " << str(p, "priority")
      << "  guid " << str(p, "guid") << "  lid " << str(p, "lid") << "  rtt "
      << (p.contains("rtt_ms") && p["rtt_ms"].is_number() ? human_ms(p["rtt_ms"].get<double>()) : "-")
      << "  (" << age_text(p, "last_answer_age_s") << ")";
    // NodeDescription next to the GUID (escaped by smhad), and the route found.
    if (!str(p, "node_description", "").empty()) o << "  \"" << str(p, "node_description") << "\"";
    if (!str(p, "dr_path", "").empty()) o << "  dr " << str(p, "dr_path");
    o << "\n";
  }
  // Every SM on the fabric (the census), heads and others.
  if (s.contains("sms") && s["sms"].is_array() && !s["sms"].empty()) {
    o << "      SMs:\n";
    for (const auto& x : s["sms"]) {
      const std::string head = str(x, "head", "");
      o << "           " << (x.value("local", false) ? "this node" : head.empty() ? "NOT A HEAD" : head) << "  "
        << str(x, "state") << "  prio " << str(x, "priority") << "  guid " << str(x, "guid") << "  lid "
        << str(x, "lid");
      if (!str(x, "node_description", "").empty()) o << "  \"" << str(x, "node_description") << "\"";
      if (!str(x, "switch_guid", "").empty())
        o << "  at " << str(x, "switch_guid") << " port " << str(x, "switch_port");
      o << "\n";
    }
  }
  // LID continuity (doc/lid-continuity.md): the guid2lid kept for our OpenSM.
  if (s.contains("lid_continuity") && s["lid_continuity"].is_object()) {
    const auto& l = s["lid_continuity"];
    if (!l.value("enabled", false)) {
      o << " guid2lid: not kept by smhad (honor_guid2lid_file "
        << (l.value("honor_guid2lid_file", false) ? "TRUE" : "FALSE") << ")\n";
    } else {
      const auto& r = l.value("rejected", nlohmann::json::object());
      o << " guid2lid: " << str(l, "entries") << " entries (" << str(l, "kept") << " kept for ports not seen now), "
        << str(l, "state") << ", written " << str(l, "writes") << "x, last "
        << age_text(l, "last_written_age_s") << "; " << str(l, "path") << "\n";
      o << "           refused: " << str(r, "bad_lid") << " bad LID, " << str(r, "duplicate_lid")
        << " duplicate LID, " << str(r, "conflict") << " conflicting; file records skipped "
        << str(l, "file_skipped");
      if (!str(l, "last_error", "").empty()) o << "; error: " << str(l, "last_error");
      o << "\n";
    }
  }
  // The peer channel (doc/continuity.md): the copies held and each peer's link.
  if (s.contains("continuity") && s["continuity"].is_object() && s["continuity"].value("enabled", false)) {
    const auto& k = s["continuity"];
    o << "Continuity: " << str(k, "role") << ", listening on " << str(k, "listen") << "\n";
    const auto& copies = k.value("copies", nlohmann::json::object());
    const auto& sa = copies.value("sa_dump", nlohmann::json());
    if (sa.is_object())
      o << "  SA copy: from " << str(sa, "from") << " generation " << str(sa, "generation") << ": "
        << str(sa, "groups") << " groups (" << str(sa, "members") << " members), " << str(sa, "services")
        << " ServiceRecords, " << str(sa, "subscriptions") << " subscriptions; confirmed " << age_text(sa, "age_s")
        << " (bound " << str(k, "max_copy_age_s") << "s)"
        << (sa.contains("content_age_s") ? ", content written " + age_text(sa, "content_age_s") : std::string()) << "; "
        << str(k, "sa_db_file") << "\n";
    else
      o << "  SA copy: none held\n";
    if (sa.is_object() && !str(sa, "stale", "").empty()) o << "           stale: " << str(sa, "stale") << "\n";
    const auto& ns = k.value("not_sent", nlohmann::json::object()).value("sa_dump", nlohmann::json());
    if (ns.is_object())
      o << "           master " << str(ns, "from") << " did not send its SA: " << str(ns, "problem") << "\n";
    const auto& g = copies.value("guid2lid", nlohmann::json());
    if (g.is_object())
      o << " guid2lid copy: from " << str(g, "from") << " generation " << str(g, "generation") << ": "
        << str(g, "entries") << " entries; confirmed " << age_text(g, "age_s") << "\n";
    for (const auto& p : k.value("peers", nlohmann::json::array())) {
      o << "           " << str(p, "name") << ": outbound " << str(p, "outbound");
      if (!str(p, "last_error", "").empty()) o << " (" << str(p, "last_error") << ")";
      const auto& answers = p.value("answers", nlohmann::json::object());
      for (const char* kind : {"sa_dump", "guid2lid"}) {
        const auto& a = answers.value(kind, nlohmann::json());
        if (!a.is_object()) continue;
        o << "; " << kind << " " << (a.value("applied", false) ? "applied" : "refused: " + str(a, "reason"))
          << " " << age_text(a, "age_s");
      }
      o << "; inbound " << str(p, "inbound") << ", last copy " << age_text(p, "last_copy_age_s") << "\n";
    }
    const auto& t = k.value("at_takeover", nlohmann::json());
    if (t.is_object()) {
      const auto& c = t.value("sa_copy", nlohmann::json());
      if (c.is_object())
        o << "  at takeover: SA copy from " << str(c, "from") << " generation " << str(c, "generation") << " ("
          << str(c, "groups") << " groups, " << str(c, "members") << " members, " << str(c, "services")
          << " ServiceRecords, " << str(c, "subscriptions") << " subscriptions), confirmed "
          << human_duration(c.value("age_s", 0.0)) << " before\n";
      else
        o << "  at takeover: no SA copy (no group, ServiceRecord or subscription restored)\n";
    }
    const auto& r = k.value("received", nlohmann::json::object());
    if (!str(r, "last_refusal", "").empty()) o << "           last refused: " << str(r, "last_refusal") << "\n";
    const auto& sent = k.value("sent", nlohmann::json::object());
    if (!str(sent, "sa_dump_problem", "").empty())
      o << "           not sent: " << str(sent, "sa_dump_problem") << "\n";
  }
  if (s.contains("policy")) {
    const auto& pol = s["policy"];
    o << "   Policy: poll " << str(pol, "poll_interval_ms") << "ms x " << str(pol, "misses")
      << " misses, failback " << str(pol, "failback") << ", base priority "
      << str(pol, "base_priority") << "\n";
  }
  // Config drift between heads (doc/drift.md): each peer's verdict.
  if (s.contains("drift") && s["drift"].is_object() && !s["drift"].value("peers", nlohmann::json::array()).empty()) {
    const auto& d = s["drift"];
    o << "    Drift: " << (d.contains("own") && d["own"].is_object() ? "" : "(own digests not computed) ");
    bool first = true;
    for (const auto& p : d["peers"]) {
      o << (first ? "" : "\n           ") << str(p, "name") << " " << str(p, "state") << " (" << str(p, "detail") << ")";
      first = false;
    }
    o << "\n";
  }
  // Fabric health (doc/health.md): the links of the last assessed walk.
  if (s.contains("health") && s["health"].is_object() && s["health"].value("assessed", false)) {
    const auto& h = s["health"];
    o << "   Health: " << str(h, "links") << " links, " << str(h, "degraded_total") << " degraded";
    const auto& list = h.value("degraded", nlohmann::json::array());
    if (!list.empty())
      o << " (worst: " << str(list[0], "active") << " instead of " << str(list[0], "should") << "; smctl health)";
    if (h.contains("errors") && h["errors"].is_object() && str(h["errors"], "state", "off") == "reading")
      o << "; ports with error counters rising: " << str(h["errors"], "rising");
    o << "\n";
  }
  o << "   Alarms: ";
  const auto alarms = s.value("alarms", nlohmann::json::array());
  if (alarms.empty()) o << "none";
  for (const auto& a : alarms) o << str(a, "kind") << " (" << str(a, "detail") << ") ";
  o << "\n";
  if (s.contains("last_transition") && !s["last_transition"].is_null()) {
    const auto& t = s["last_transition"];
    const std::string kind = str(t, "kind", "transition");
    o << "     Last: " << (kind == "transition" ? std::string() : kind + ": ") << str(t, "reason") << " ("
      << str(t, "evidence") << ") at " << str(t, "time") << "\n";
  }
  // The last takeover report (doc/takeover-report.md): its summary sentence.
  if (s.contains("last_takeover") && s["last_takeover"].is_object()) {
    const auto& t = s["last_takeover"];
    o << " Takeover: " << str(t, "reason") << " at " << str(t, "time") << "\n";
  }
  return o.str();
}

std::string render_sms_text(const nlohmann::json& j) {
  // Like `chronyc sources`: a legend, a header, one line per SM.
  std::ostringstream o;
  o << "H = head (* this node, + peer, ! not a configured head)\n";
  o << fmt::format("{:<1} {:<18} {:<11} {:>4} {:>5} {:<24} {:<14} {:>7}  {}\n", "H", "Port GUID", "State", "Prio",
                   "LID", "Cabled at (switch port)", "Head", "Answer", "NodeDescription");
  o << std::string(110, '=') << "\n";
  for (const auto& x : j.value("sms", nlohmann::json::array())) {
    const std::string head = str(x, "head", "");
    const char* mark = x.value("local", false) ? "*" : head.empty() ? "!" : "+";
    std::string at = "-";
    if (!str(x, "switch_guid", "").empty()) at = str(x, "switch_guid") + " " + str(x, "switch_port");
    std::string ago = "never";
    if (x.contains("last_answer_age_s") && x["last_answer_age_s"].is_number())
      ago = human_duration(x["last_answer_age_s"].get<double>());
    o << fmt::format("{:<1} {:<18} {:<11} {:>4} {:>5} {:<24} {:<14} {:>7}  {}\n", mark, str(x, "guid"),
                     str(x, "state"), str(x, "priority"), str(x, "lid"), at, head.empty() ? "-" : head, ago,
                     str(x, "node_description"));
  }
  if (j.contains("census") && j["census"].is_object()) {
    const auto& c = j["census"];
    o << "\nCensus: " << (c.value("enabled", true) ? "" : "disabled, ") << str(c, "walks") << " walks ("
      << str(c, "walk_mads") << " MADs), " << str(c, "query_mads") << " SMInfo MADs";
    if (c.contains("last_walk") && c["last_walk"].is_object()) {
      const auto& w = c["last_walk"];
      o << "; last walk " << age_text(c, "last_walk_age_s") << ": " << str(w, "nodes") << " nodes, "
        << str(w, "ports") << " ports, " << str(w, "mads") << " MADs, " << str(w, "sm_ports") << " IsSM ports"
        << (w.value("bounded", false) ? " (cut by a bound)" : "");
    }
    if (c.contains("next_walk_in_s") && c["next_walk_in_s"].is_number())
      o << "; next in " << duration_field(c, "next_walk_in_s");
    if (c.value("dropped", 0) > 0) o << "; " << str(c, "dropped") << " SMs not kept (limit)";
    o << "\n";
    if (c.contains("sa") && c["sa"].is_object()) {
      const auto& sa = c["sa"];
      o << "SA table: ";
      if (sa.value("queries", 0) == 0 && str(sa, "last_error", "").empty()) {
        o << "not asked yet";
      } else {
        o << "lid " << str(sa, "sa_lid") << ", " << str(sa, "tables") << " of " << str(sa, "queries")
          << " answered (" << str(sa, "mads") << " MADs)";
        if (sa.contains("last_age_s") && sa["last_age_s"].is_number()) {
          o << "; last " << age_text(sa, "last_age_s") << ": " << str(sa, "records") << " records";
          if (sa.contains("claimed") && sa["claimed"].is_number()) o << " of " << str(sa, "claimed");
          if (sa.value("truncated", false)) o << ", TRUNCATED";
        }
        if (!str(sa, "last_error", "").empty()) o << "; last error: " << str(sa, "last_error");
      }
      o << "\n";
      if (sa.contains("is_sm_ports") && sa["is_sm_ports"].is_object()) {
        const auto& p = sa["is_sm_ports"];
        o << "SA IsSM ports: ";
        if (p.value("queries", 0) == 0) {
          o << "not asked yet";
        } else {
          o << str(p, "tables") << " of " << str(p, "queries") << " answered (" << str(p, "mads") << " MADs)";
          if (p.contains("last_age_s") && p["last_age_s"].is_number()) {
            o << "; last " << age_text(p, "last_age_s") << ": " << str(p, "records") << " ports";
            if (p.value("truncated", false)) o << ", TRUNCATED";
          }
          o << "; found first " << str(p, "found");
          if (!str(p, "last_error", "").empty()) o << "; last error: " << str(p, "last_error");
        }
        o << "\n";
      }
    }
  }
  return o.str();
}

std::string render_events_text(const nlohmann::json& j) {
  std::ostringstream o;
  for (const auto& e : j.value("events", nlohmann::json::array())) {
    o << str(e, "time") << "  " << str(e, "kind") << "  " << str(e, "reason");
    if (!str(e, "evidence", "").empty()) o << "  [" << str(e, "evidence") << "]";
    // The SMs it is about, with the names people know (NodeDescription).
    std::string about;
    for (const auto& n : e.value("nodes", nlohmann::json::array())) {
      if (!n.is_object()) continue;
      if (!about.empty()) about += "; ";
      if (!str(n, "name", "").empty()) about += str(n, "name") + " ";
      about += str(n, "guid");
      if (!str(n, "node_description", "").empty()) about += " \"" + str(n, "node_description") + "\"";
    }
    if (!about.empty()) o << "  (" << about << ")";
    o << "\n";
  }
  return o.str();
}

namespace {

// "an end" as health replies name it: "\"desc\" GUID port N".
std::string end_text(const nlohmann::json& e) {
  std::string s;
  if (e.contains("node_description") && e["node_description"].is_string())
    s = "\"" + str(e, "node_description") + "\" ";
  return s + str(e, "guid") + " port " + str(e, "port");
}

// The error counters' part of `smctl health` (health.errors).
void render_errors(std::ostringstream& o, const nlohmann::json& e) {
  const std::string state = str(e, "state", "off");
  if (state == "off") {
    o << "Error counters: not read (off: health.counter_reads_per_second is 0, or the census is off)\n";
    return;
  }
  std::string window = "-";
  if (e.contains("window_s") && e["window_s"].is_number()) window = human_duration(e["window_s"].get<double>());
  if (state == "reading") {
    o << "Error counters: read by this head (its OpenSM is MASTER), " << str(e, "reads_per_second") << " MADs/s; ";
  } else if (state == "waiting") {
    o << "Error counters: this head's OpenSM became MASTER; reading starts shortly; ";
  } else {
    o << "Error counters: not read by this head (" << state << "; the MASTER's head reads them); ";
  }
  o << str(e, "ports") << " ports, " << str(e, "read") << " read, " << str(e, "unknown") << " unknown";
  if (e.contains("last_pass_s") && e["last_pass_s"].is_number())
    o << "; a pass takes " << human_duration(e["last_pass_s"].get<double>());
  o << "\n";
  o << "Ports with errors: " << str(e, "with_errors") << "; rising within " << window << ": " << str(e, "rising")
    << ", over threshold: " << str(e, "over_threshold") << "\n";
  const auto& list = e.value("listed", nlohmann::json::array());
  if (list.empty()) return;
  // The IBA's names (perfquery's, ibqueryerrors'), where the reply gives them.
  const auto names = e.value("counter_names", nlohmann::json::object());
  o << fmt::format("{:<5} {:>7} {:>9}  {}\n", "Over", "For", "Per hour", "Port: counter +rise within the window (value)");
  o << std::string(100, '=') << "\n";
  for (const auto& p : list) {
    std::string since = "-";
    if (p.contains("rising_for_s") && p["rising_for_s"].is_number()) since = human_duration(p["rising_for_s"].get<double>());
    std::string counters;
    const auto& value = p.value("counters", nlohmann::json::object());
    const auto& rise = p.value("rise", nlohmann::json::object());
    for (const auto& [k, v] : value.items()) {
      const auto r = rise.value(k, std::uint64_t{0});
      if (!v.is_number() || (v.get<double>() == 0 && r == 0)) continue;
      counters += (counters.empty() ? "" : ", ") + str(names, k.c_str(), k.c_str()) +
                  (r > 0 ? " +" + std::to_string(r) : std::string()) + " (" + v.dump() + ")";
    }
    if (p.contains("unknown") && p["unknown"].is_string())
      counters += (counters.empty() ? "" : "; ") + std::string("unknown: ") + str(p, "unknown");
    std::string per_hour = "-";
    if (p.contains("per_hour") && p["per_hour"].is_number() && p["per_hour"].get<double>() > 0)
      per_hour = fmt::format("{:.1f}", p["per_hour"].get<double>());
    o << fmt::format("{:<5} {:>7} {:>9}  {}: {}\n", p.value("over_threshold", false) ? "yes" : "-", since, per_hour,
                     end_text(p.value("port", nlohmann::json::object())), counters);
  }
}

}  // namespace

std::string render_health_text(const nlohmann::json& reply) {
  const auto& h = reply.value("health", nlohmann::json::object());
  std::ostringstream o;
  if (!h.value("enabled", false)) {
    o << "Fabric health is off: it reads the census walks, and the census is off (observe mode).\n";
    return o.str();
  }
  if (!h.value("assessed", false)) {
    o << "No census walk assessed yet (the first one runs a few seconds after smhad starts).\n";
    return o.str();
  }
  o << "Links: " << str(h, "links") << " assessed";
  if (h.contains("links_by_kind") && h["links_by_kind"].is_object()) {
    std::string kinds;
    for (const auto& [k, v] : h["links_by_kind"].items())
      if (v.is_number() && v.get<double>() > 0) kinds += (kinds.empty() ? "" : ", ") + k + " " + v.dump();
    if (!kinds.empty()) o << " (" << kinds << ")";
  }
  o << ", " << str(h, "unknown") << " not decoded; census walk " << age_text(h, "walk_age_s") << "\n";
  const auto& list = h.value("degraded", nlohmann::json::array());
  const auto total = h.value("degraded_total", std::uint64_t{0});
  const auto errors = h.value("errors", nlohmann::json::object());
  if (total == 0) {
    o << "Degraded links: none\n";
    render_errors(o, errors);
    return o.str();
  }
  o << "Degraded links: " << total << (list.size() < total ? " (the worst " + std::to_string(list.size()) + " shown)" : "")
    << ", worst first\n";
  o << fmt::format("{:<8} {:<8} {:<14} {:>7}  {}\n", "Runs at", "Should", "Why", "For", "Link (and why)");
  o << std::string(100, '=') << "\n";
  for (const auto& d : list) {
    std::string since = "-";
    if (d.contains("degraded_for_s") && d["degraded_for_s"].is_number())
      since = human_duration(d["degraded_for_s"].get<double>());
    o << fmt::format("{:<8} {:<8} {:<14} {:>7}  {} <-> {}\n", str(d, "active"), str(d, "should"), str(d, "why"),
                     since, end_text(d.value("a", nlohmann::json::object())),
                     end_text(d.value("b", nlohmann::json::object())));
    o << fmt::format("{:<42}({}: {})\n", "", str(d, "kind"), str(d, "detail"));
  }
  render_errors(o, errors);
  return o.str();
}

}  // namespace smha::client
