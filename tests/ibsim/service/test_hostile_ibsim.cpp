// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// A hostile or broken fabric under two smhad on real OpenSM (ibsim): faults a
// compute node can cause that must never leave the fabric without a subnet
// manager. Every process is stopped by PID, also on failure: smhad by the
// fabric, the OpenSMs it started by OsmGuard.
#include <catch2/catch.hpp>

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <regex>
#include <string>

#include <nlohmann/json.hpp>

#include "smhad_heads.hpp"

using namespace smha;
using namespace smha::testing;
using namespace std::chrono_literals;
using nlohmann::json;

namespace {

using Head = SmhadHead;

bool has_alarm(const json& s, const std::string& kind) {
  if (!s.contains("alarms")) return false;
  for (const auto& a : s["alarms"])
    if (a.value("kind", "") == kind) return true;
  return false;
}

int count_events(const Head& h, const std::string& kind) {
  int n = 0;
  if (auto ev = smhad_events(h, 1000))
    for (const auto& e : *ev) n += e.value("kind", "") == kind;
  return n;
}

// The node GUID `tool` (ibswitches or ibhosts, run at Hca4) lists for the node
// whose description is `desc` (the first one listed when `desc` is empty).
std::string node_guid(IbsimFabric& fabric, const std::string& tool, const std::string& desc) {
  const auto r = fabric.run("Hca4", {tool}, 10s);
  REQUIRE(r.exit_code == 0);
  const std::regex line(R"(:\s+(0x[0-9a-f]+) ports \d+ \"([^\"]*)\")");
  for (auto it = std::sregex_iterator(r.out.begin(), r.out.end(), line); it != std::sregex_iterator(); ++it)
    if (desc.empty() || (*it)[2] == desc) return (*it)[1];
  FAIL("no node " << desc << " in " << tool << ":\n" << r.out);
  return {};
}

// ibsim renames a node's GUID; OpenSM sees it once the node's link bounces.
void set_node_guid(IbsimFabric& fabric, const std::string& node, const std::string& guid) {
  fabric.console("Guid \"" + node + "\" " + guid);
  fabric.console("Unlink \"" + node + "\"");
  fabric.console("ReLink \"" + node + "\"");
}

// head01 on Hca1 and head02 on Hca2 (port GUIDs as the fabric reads them),
// each naming the other, smha.yaml at its defaults.
struct Heads {
  Head h1, h2;
};
Heads configured_heads(IbsimFabric& fabric) {
  const auto hca1 = fabric.node_port("Hca1");
  const auto hca2 = fabric.node_port("Hca2");
  REQUIRE(hca1);
  REQUIRE(hca2);
  Heads hs{{"head01", "Hca1", hca1->port_guid, fabric.scratch_dir() + "/head01"},
           {"head02", "Hca2", hca2->port_guid, fabric.scratch_dir() + "/head02"}};
  write_smhad_config(hs.h1, {{hs.h2.name, hs.h2.guid, 0}});
  write_smhad_config(hs.h2, {{hs.h1.name, hs.h1.guid, 0}});
  return hs;
}

// head01 started first and MASTER, then head02 STANDBY seeing head01 MASTER,
// both with the written configs, watched by the guard; their last status in s1 and s2.
void start_pair(IbsimFabric& fabric, OsmGuard& guard, Head& h1, Head& h2, json& s1, json& s2) {
  const std::string failed = start_master_standby(fabric, guard, h1, h2, s1, s2, SMHA_SMHAD, true);
  if (!failed.empty()) FAIL(failed);
}

}  // namespace

// issue: a compute node carrying a switch's node GUID makes OpenSM 3.3.23 die
// of SIGSEGV at every sweep, on both heads. Both crash-loop; no SM answers.
// Once the GUID is restored, supervision's retry (crash_loop_retry_no_master_s,
// 60 s by default) must bring a MASTER back with no operator action.
TEST_CASE("Duplicate GUID drill: both heads crash-loop, no_master is raised, and a MASTER is back within "
          "5 minutes of the fault's end at default settings",
          "[ibsim][smhad][hostile]") {
  IbsimFabric fabric(topology_path("two-switch-4hca.net"));
  OsmGuard guard;
  // The supervision settings are the defaults (5 crashes within 300 s, retry
  // 600 s with a master elsewhere, 60 s without one).
  Heads hs = configured_heads(fabric);
  Head& h1 = hs.h1;
  Head& h2 = hs.h2;
  json s1, s2;
  start_pair(fabric, guard, h1, h2, s1, s2);

  const std::string switch_guid = node_guid(fabric, "ibswitches", "Switch2");
  const std::string hca3_guid = node_guid(fabric, "ibhosts", "Hca3");
  set_node_guid(fabric, "Hca3", switch_guid);

  // Every OpenSM that dies keeps its ibsim client slot (10 in all): free them
  // as they go, or a respawn could not attach.
  auto failed = [&](const json& j) {
    fabric.free_dead_clients();
    return j["opensm"]["supervisor"] == "failed";
  };
  if (!wait_status(fabric, h1, guard, failed, 90s, &s1))
    FAIL("head01 did not crash-loop: " << s1.dump() << "\n" << smhad_log(fabric, h1));
  if (!wait_status(fabric, h2, guard, failed, 90s, &s2))
    FAIL("head02 did not crash-loop: " << s2.dump() << "\n" << smhad_log(fabric, h2));
  for (const json* s : {&s1, &s2}) {
    INFO(s->dump());
    CHECK(std::string((*s)["opensm"]["reason"]).find("crash loop: 5 crashes within 300s") == 0);
    CHECK(std::string((*s)["opensm"]["reason"]).find("killed by signal 11 (SEGV)") != std::string::npos);
    CHECK(has_alarm(*s, "opensm_failed"));
  }
  // Nobody answers MASTER: no_master on both, and status shows no master
  // rather than the last one.
  auto masterless = [&](const json& j) {
    fabric.free_dead_clients();
    return has_alarm(j, "no_master") && j["mastership"].is_object() && j["mastership"]["guid"].is_null();
  };
  if (!wait_status(fabric, h1, guard, masterless, 30s, &s1)) FAIL("head01: " << s1.dump());
  if (!wait_status(fabric, h2, guard, masterless, 30s, &s2)) FAIL("head02: " << s2.dump());
  CHECK(s1["master"].is_null());
  CHECK(s2["master"].is_null());
  {
    const auto r = fabric.run("Hca4", {SMHA_SMCTL, "status", "--socket", h2.socket()}, 10s);
    INFO(r.out);
    CHECK(r.out.find("Master: none since") != std::string::npos);
  }
  const int spawns_failed = s1["opensm"]["spawns"].get<int>() + s2["opensm"]["spawns"].get<int>();

  // The fault ends: no operator action from here on.
  set_node_guid(fabric, "Hca3", hca3_guid);
  const auto t0 = std::chrono::steady_clock::now();
  MasterView m;
  const bool back = wait_for([&] {
    fabric.free_dead_clients();
    m = query_sm(fabric, "Hca4", std::nullopt, 2s);
    return m.state == 3 && (m.guid == h1.guid || m.guid == h2.guid);
  }, 300s);
  const auto secs = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - t0);
  std::cout << "Duplicate GUID drill: MASTER again " << secs.count() << " s after the GUID was restored"
            << std::endl;
  if (!back) FAIL("no MASTER within 5 minutes\n" << smhad_log(fabric, h1) << "\n" << smhad_log(fabric, h2));

  // no_master clears on both. The head whose retry brought the MASTER back
  // runs it; the other's OpenSM is MASTER or STANDBY too if its own retry
  // came first, else it waits for its next retry (crash_loop_retry_s, 600 s,
  // now that a master answers). The retries were events, and the restart
  // rate stayed at one start per retry.
  auto settled = [&](const json& j) {
    fabric.free_dead_clients();
    if (has_alarm(j, "no_master")) return false;
    if (j["local"]["state"] == "MASTER" || j["local"]["state"] == "STANDBY") return true;
    return j["opensm"]["supervisor"] == "failed" &&
           std::string(j["opensm"]["reason"]).find("(an SM is MASTER elsewhere)") != std::string::npos &&
           j["opensm"]["next_start_in_s"].get<double>() > 300;
  };
  if (!wait_status(fabric, h1, guard, settled, 60s, &s1)) FAIL("head01: " << s1.dump() << "\n" << smhad_log(fabric, h1));
  if (!wait_status(fabric, h2, guard, settled, 60s, &s2)) FAIL("head02: " << s2.dump() << "\n" << smhad_log(fabric, h2));
  int masters = 0;
  for (const json* s : {&s1, &s2}) masters += (*s)["local"]["state"] == "MASTER";
  CHECK(masters == 1);
  const int retries = s1["opensm"]["crash_loop_retries"].get<int>() + s2["opensm"]["crash_loop_retries"].get<int>();
  CHECK(retries >= 1);
  CHECK(s1["opensm"]["spawns"].get<int>() + s2["opensm"]["spawns"].get<int>() - spawns_failed <= retries);
  CHECK(count_events(h1, "opensm_retry") + count_events(h2, "opensm_retry") == retries);

  fabric.stop_process(h1.pidx, SIGTERM);
  fabric.stop_process(h2.pidx, SIGTERM);
}

namespace {

std::string guid2lid_line(std::uint64_t guid, int lid) {
  char b[64];
  std::snprintf(b, sizeof b, "0x%016llx 0x%04x 0x%04x\n\n", static_cast<unsigned long long>(guid), lid, lid);
  return b;
}

}  // namespace

// issue: without M_Key any node can set its own PortInfo LID. A node reset
// (Hca3, LID 0) and another (Hca4) re-asserting Hca3's LID every second must
// not move Hca3's LID in head02's guid2lid: after a takeover Hca3 gets its
// LID back and Hca4 keeps its own.
TEST_CASE("LID claim drill: a port claiming a reset node's LID is a conflict, the file keeps the holder's LID "
          "across a takeover",
          "[ibsim][smhad][hostile][lidcont]") {
  IbsimFabric fabric(topology_path("two-switch-4hca.net"));
  OsmGuard guard;
  Heads hs = configured_heads(fabric);
  Head& h1 = hs.h1;
  Head& h2 = hs.h2;
  json s1, s2;
  start_smhad(fabric, h1, SMHA_SMHAD, {}, &guard);
  if (!wait_status(fabric, h1, guard, local_master, 30s, &s1))
    FAIL("head01 not MASTER: " << s1.dump() << "\n" << smhad_log(fabric, h1));
  REQUIRE(wait_for([&] {
    return fabric.node_port("Hca3").value_or(NodePort{}).lid != 0 &&
           fabric.node_port("Hca4").value_or(NodePort{}).lid != 0;
  }, 20s));
  const NodePort p3 = *fabric.node_port("Hca3"), p4 = *fabric.node_port("Hca4");
  start_smhad(fabric, h2, SMHA_SMHAD, {}, &guard);
  if (!wait_status(fabric, h2, guard, [](const json& j) {
        return j["local"]["state"] == "STANDBY" && j["peers"][0]["state"] == "MASTER";
      }, 30s, &s2))
    FAIL("head02 not STANDBY seeing head01 MASTER: " << s2.dump() << "\n" << smhad_log(fabric, h2));
  const std::string file = h2.dir + "/cache/guid2lid";
  const std::string line3 = guid2lid_line(p3.port_guid, p3.lid), line4 = guid2lid_line(p4.port_guid, p4.lid);
  if (!wait_status(fabric, h2, guard, [&](const json&) {
        const std::string t = read_file(file);
        return t.find(line3) != std::string::npos && t.find(line4) != std::string::npos;
      }, 30s, &s2))
    FAIL("head02 wrote no guid2lid with Hca3 and Hca4: " << s2["lid_continuity"].dump() << "\n" << read_file(file));

  // Hca3 reboots; Hca4 keeps claiming Hca3's LID (the master's sweeps set it back).
  fabric.console("Clear \"Hca3\"");
  REQUIRE(wait_for([&] { return fabric.node_port("Hca3").value_or(NodePort{1, 1, 0}).lid == 0; }, 10s));
  auto last_claim = std::chrono::steady_clock::now() - 2s;
  auto claim = [&] {
    if (std::chrono::steady_clock::now() - last_claim < 1s) return;
    fabric.console("Baselid \"Hca4\"[1] " + std::to_string(p3.lid));
    last_claim = std::chrono::steady_clock::now();
  };
  // LID continuity reads the census walks: the claim is seen by the first walk
  // that reads Hca4 while it claims (the master's sweeps set Hca4 back every
  // 10 s, so that may be the walk after next). Walks are the walk's MADs / 0.5
  // per second apart, at least 60 s: the bound is taken from head02's own
  // schedule, two walks and the walk's own time.
  auto sms = smhad_call(h2, "sms", json::object());
  REQUIRE(sms);
  REQUIRE(sms->data["census"]["next_walk_in_s"].is_number());
  const double next_walk_s = std::max(0.0, sms->data["census"]["next_walk_in_s"].get<double>());
  const auto walk_bound = std::chrono::seconds(static_cast<long>(next_walk_s) + 2 * 60 + 30);
  if (!wait_status(fabric, h2, guard, [&](const json& j) {
        claim();
        return j["lid_continuity"].value("conflicts_total", 0) >= 1;
      }, walk_bound, &s2))
    FAIL("no conflict seen within " << walk_bound.count() << " s: " << s2["lid_continuity"].dump() << "\n"
                                    << read_file(file));
  INFO(s2["lid_continuity"].dump());
  REQUIRE(s2["lid_continuity"]["conflict_details"].size() >= 1);
  CHECK(s2["lid_continuity"]["conflict_details"][0] ==
        hex_guid(p4.port_guid) + " claims LID " + [&] {
          char b[8];
          std::snprintf(b, sizeof b, "0x%04x", p3.lid);
          return std::string(b);
        }() + ", held for " + hex_guid(p3.port_guid) + " in guid2lid");
  // Later rechecks see the claim again: still one event.
  const auto more = std::chrono::steady_clock::now();
  REQUIRE(wait_status(fabric, h2, guard, [&](const json&) {
    claim();
    return std::chrono::steady_clock::now() - more >= 12s;
  }, 20s, &s2));
  {
    const std::string t = read_file(file);
    INFO(t);
    CHECK(t.find(line3) != std::string::npos);  // the holder keeps its LID
    CHECK(t.find(line4) != std::string::npos);  // the claimant keeps its own
  }
  int conflict_events = 0;
  if (auto ev = smhad_events(h2, 1000))
    for (const auto& e : *ev) conflict_events += e.value("kind", "") == "lid_conflict";
  CHECK(conflict_events == 1);

  // kill -9 of the master's OpenSM while the claim goes on: head02 takes over.
  REQUIRE(wait_status(fabric, h1, guard, local_master, 10s, &s1));
  const int victim = s1["opensm"]["pid"];
  REQUIRE(::kill(victim, SIGKILL) == 0);
  if (!wait_status(fabric, h2, guard, [&](const json& j) {
        claim();
        return local_master(j);
      }, 30s, &s2))
    FAIL("head02 did not take over: " << s2.dump() << "\n" << smhad_log(fabric, h2));
  free_ibsim_slot(fabric, victim);
  // The reset node comes back: it gets its LID again, and the claimant its own.
  fabric.console("ReLink \"Hca3\"");
  REQUIRE(wait_for([&] { return fabric.node_port("Hca3").value_or(NodePort{}).lid != 0; }, 30s));
  const bool settled = wait_for([&] { return fabric.node_port("Hca4").value_or(NodePort{}).lid == p4.lid; }, 30s);
  const int lid3 = fabric.node_port("Hca3")->lid, lid4 = fabric.node_port("Hca4")->lid;
  std::cout << "LID claim drill: Hca3 " << p3.lid << " -> " << lid3 << ", Hca4 " << p4.lid << " -> " << lid4
            << std::endl;
  CHECK(lid3 == p3.lid);
  CHECK(settled);
  CHECK(lid4 == p4.lid);
  fabric.stop_process(h1.pidx, SIGTERM);
  fabric.stop_process(h2.pidx, SIGTERM);
}

// issue: a compute node registered a second `smha` ServiceRecord for each
// head's port under another ServiceID (infinite lease); both heads' reads by
// ServiceGID + name then got SA status 0x0400 (too many records), showed
// unknown, and a real ha_policy drift raised nothing. The read names the
// ServiceID too, so the forged records cannot match.
TEST_CASE("Extra record drill: forged ServiceRecords under another ServiceID do not hide a real drift",
          "[ibsim][smhad][hostile][drift]") {
  IbsimFabric fabric(topology_path("two-switch-4hca.net"));
  OsmGuard guard;
  Heads hs = configured_heads(fabric);
  Head& h1 = hs.h1;
  Head& h2 = hs.h2;
  json s1, s2;
  start_pair(fabric, guard, h1, h2, s1, s2);
  auto peer_drift = [](const json& j) {
    const auto peers = j.value("drift", json::object()).value("peers", json::array());
    return peers.empty() ? std::string() : peers[0].value("state", std::string());
  };
  for (Head* h : {&h1, &h2}) {
    json& s = h == &h1 ? s1 : s2;
    if (!wait_status(fabric, *h, guard, [&](const json& j) { return peer_drift(j) == "match"; }, 60s, &s))
      FAIL(h->name << ": no match: " << s["drift"].dump() << "\n" << smhad_log(fabric, *h));
  }
  const int sa_lid = s1["local"]["lid"];
  // A reload of the unchanged file keeps the engine: head02's route, found by
  // discovery, is not a change of the file (the engine and a census walk
  // used to restart). Its reload event says so, and its rounds go on.
  {
    const int rounds = s2["rounds"];
    REQUIRE(fabric.signal_process(h2.pidx, SIGHUP));
    std::string reload_text;
    REQUIRE(wait_for([&] {
      if (auto ev = smhad_events(h2, 1000))
        for (const auto& e : *ev)
          if (e.value("kind", "") == "RELOAD") reload_text = e.value("reason", "");
      return !reload_text.empty();
    }, 20s));
    INFO(reload_text);
    CHECK(reload_text.find("HA policy unchanged") != std::string::npos);
    REQUIRE(wait_status(fabric, h2, guard, [&](const json& j) { return j["rounds"].get<int>() > rounds; }, 10s, &s2));
  }
  // Hca3 forges a record for each head's port: same name and GID, another
  // ServiceID, infinite lease.
  for (std::uint64_t g : {h1.guid, h2.guid}) {
    const auto r = fabric.run("Hca3",
                              {SMHA_MAD_PROBE, "sr-set", std::to_string(sa_lid), hex_guid(g), "7", "4294967295",
                               "2000", "0x0200534d48410002"},
                              10s);
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    REQUIRE(nlohmann::json::parse(r.out)["ok"] == true);
  }
  // Two more reads on each head: still a verdict, no SA error.
  const int reads1 = s1["drift"]["reads"], errors1 = s1["drift"]["read_errors"];
  if (!wait_status(fabric, h1, guard, [&](const json& j) { return j["drift"]["reads"].get<int>() >= reads1 + 2; },
                   60s, &s1))
    FAIL("head01 read no more: " << s1["drift"].dump());
  INFO(s1["drift"].dump());
  CHECK(peer_drift(s1) == "match");
  CHECK(s1["drift"]["read_errors"] == errors1);
  CHECK_FALSE(has_alarm(s1, "drift_unknown"));
  // A real drift on head02 (another misses_before_takeover, reloaded) is seen.
  SmhadOptions o;
  o.misses = 4;
  write_smhad_config(h2, {{h1.name, h1.guid, 0}}, o);
  REQUIRE(fabric.signal_process(h2.pidx, SIGHUP));
  if (!wait_status(fabric, h1, guard, [](const json& j) { return has_alarm(j, "config_drift"); }, 90s, &s1))
    FAIL("head01: no config_drift: " << s1["drift"].dump() << "\n" << smhad_log(fabric, h1));
  CHECK(s1["drift"]["peers"][0]["differing"] == json::array({"ha_policy"}));
  fabric.stop_process(h1.pidx, SIGTERM);
  fabric.stop_process(h2.pidx, SIGTERM);
}

namespace {

// The detail of alarm `kind` in a status, or nullopt when it is not raised.
std::optional<std::string> alarm_detail(const json& s, const std::string& kind) {
  if (!s.contains("alarms")) return std::nullopt;
  for (const auto& a : s["alarms"])
    if (a.value("kind", "") == kind) return a.value("detail", std::string());
  return std::nullopt;
}

}  // namespace

// issue: a rogue SM at a compute node answering SMInfo with head02's port GUID
// (MASTER, priority 15) cleared unknown_sm and raised nothing. The census
// knows where each head is cabled and its LID: an answer carrying a head's
// GUID from another port is an impostor, alarmed naming both places, and
// never taken as the head's answer. The impostor is sm_impostor (a libibumad
// SM that opens the port's issm and forges SMInfo answers) at Hca3.
TEST_CASE("Impostor drill: an SM at a compute node answering with head02's GUID raises impostor_sm on both "
          "heads naming both places, head02 stays STANDBY in the census",
          "[ibsim][smhad][hostile][census]") {
  IbsimFabric fabric(topology_path("two-switch-4hca.net"));
  OsmGuard guard;
  Heads hs = configured_heads(fabric);
  Head& h1 = hs.h1;
  Head& h2 = hs.h2;
  json s1, s2;
  start_pair(fabric, guard, h1, h2, s1, s2);
  // Both heads located by the census (their first walk) before the impostor.
  for (Head* h : {&h1, &h2}) {
    json s;
    if (!wait_status(fabric, *h, guard, [](const json& j) {
          if (j["sms"].size() != 2) return false;
          for (const auto& x : j["sms"])
            if (x["head"].is_null() || !x["switch_guid"].is_string()) return false;
          return true;
        }, 30s, &s))
      FAIL(h->name << ": heads not located by the census: " << s.dump());
  }
  const auto hca3 = fabric.node_port("Hca3");
  REQUIRE(hca3);

  const std::string ready = fabric.scratch_dir() + "/impostor.ready";
  const auto t0 = std::chrono::steady_clock::now();
  const int imp = fabric.spawn("Hca3", {SMHA_SM_IMPOSTOR, hex_guid(h2.guid), "15", "3", ready});
  REQUIRE(wait_for([&] { return std::ifstream(ready).good() || !fabric.process_running(imp); }, 10s));
  REQUIRE(fabric.process_running(imp));
  for (Head* h : {&h1, &h2}) {
    json s;
    std::string detail;
    if (!wait_status(fabric, *h, guard, [&](const json& j) {
          auto d = alarm_detail(j, "impostor_sm");
          if (d) detail = *d;
          return d && d->find("\"Hca3\"") != std::string::npos;
        }, 60s, &s))
      FAIL(h->name << ": no impostor_sm naming Hca3: " << s.dump() << "\n"
                   << fabric.process_stderr(imp) << "\n" << smhad_log(fabric, *h));
    INFO(detail);
    // Both places: the port that answered (Hca3, its LID) and where head02 is.
    CHECK(detail.find("lid " + std::to_string(hca3->lid)) != std::string::npos);
    CHECK(detail.find("answers as head " + hex_guid(h2.guid) + " MASTER prio 15") != std::string::npos);
    CHECK(detail.find("that head is at \"head02\"") != std::string::npos);
    // head02 in the census is what head02 answers, not the impostor's claim.
    bool seen = false;
    for (const auto& x : s["sms"])
      if (x["guid"] == hex_guid(h2.guid)) {
        seen = true;
        CHECK(x["state"] == "STANDBY");
        CHECK(x["priority"] != 15);
      }
    CHECK(seen);
  }
  const auto found_ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
  std::cout << "Impostor drill: impostor_sm on both heads " << found_ms.count() << " ms after the impostor started"
            << std::endl;
  // Nothing acted on its answers: same master, no takeover.
  REQUIRE(wait_status(fabric, h1, guard, local_master, 5s, &s1));
  REQUIRE(wait_status(fabric, h2, guard, [](const json& j) { return j["local"]["state"] == "STANDBY"; }, 5s, &s2));
  for (Head* h : {&h1, &h2}) CHECK(count_events(*h, "takeover_started") == 0);

  // It stops (its port loses IsSM): cleared on both heads once a recheck
  // reads that (seconds), long before the impostor record's own expiry (60 s).
  const auto t1 = std::chrono::steady_clock::now();
  fabric.stop_process(imp, SIGTERM);
  for (Head* h : {&h1, &h2}) {
    json s;
    if (!wait_status(fabric, *h, guard, [](const json& j) { return !alarm_detail(j, "impostor_sm"); }, 45s, &s))
      FAIL(h->name << ": impostor_sm not cleared: " << s.dump());
  }
  std::cout << "Impostor drill: impostor_sm cleared on both heads "
            << std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t1).count()
            << " ms after the impostor stopped" << std::endl;
  fabric.stop_process(h1.pidx, SIGTERM);
  fabric.stop_process(h2.pidx, SIGTERM);
}
