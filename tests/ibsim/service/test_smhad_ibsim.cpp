// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// smhad end to end under ibsim: smhad (under umad2sim) starts the real OpenSM,
// restarts it after kill -9, is restarted itself without moving mastership,
// applies a priority-only reload by SIGHUP to OpenSM, and two smhad run the
// kill -9 failover drill. Every process is stopped by PID, also on failure:
// smhad by the fabric, the OpenSMs it started by OsmGuard (they outlive smhad by
// design).
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>

#include <nlohmann/json.hpp>

#include "ibsim_harness.hpp"
#include "prometheus_parse.hpp"
#include "smhad_heads.hpp"
#include "smha/control/client.hpp"

using namespace smha;
using namespace smha::testing;
using namespace std::chrono_literals;
using nlohmann::json;
using smha::testing::parse_with_prometheus_client;
using smha::testing::sample_value;

namespace {

using Head = SmhadHead;

// This file's configs: the given base priority, the default failover policy,
// `extra` appended (e.g. a metrics section).
void write_config(const Head& h, int priority, const std::vector<PeerCfg>& peers,
                  const std::string& extra = {}, const std::string& opensm_extra = {}) {
  SmhadOptions o;
  o.sm_priority = priority;
  o.extra = extra;
  o.opensm_extra = opensm_extra;
  write_smhad_config(h, peers, o);
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::trunc);
  f << text;
  REQUIRE(f.good());
}

// The LID a master's sweep gave `node`'s port (read with ibstat until it is
// not 0): what a third node's `sminfo <lid>` needs; smhad's configs name none.
json call(const Head& h, const std::string& method, const json& params = json::object()) {
  auto c = control::ControlClient::connect(h.socket());
  REQUIRE(c);
  auto r = c.value().call(method, params, 10s);
  REQUIRE(r);
  return json{{"result", std::string(control::to_string(r.value().result))}, {"text", r.value().text},
              {"data", r.value().data}};
}

int assigned_lid(IbsimFabric& fabric, const std::string& node) {
  std::optional<NodePort> p;
  const bool have = wait_for([&] {
    p = fabric.node_port(node);
    return p && p->lid != 0;
  }, 10s);
  REQUIRE(have);
  return p->lid;
}

// Two heads configured by port GUID alone, each naming the other: head01
// started first and MASTER, then head02 STANDBY seeing head01 MASTER; their
// last status in s1 and s2.
void start_guid_only_pair(IbsimFabric& fabric, OsmGuard& guard, Head& h1, Head& h2, json& s1, json& s2) {
  write_config(h1, 10, {{h2.name, h2.guid, 0}});
  write_config(h2, 10, {{h1.name, h1.guid, 0}});
  const std::string failed = start_master_standby(fabric, guard, h1, h2, s1, s2, SMHA_SMHAD, false);
  if (!failed.empty()) FAIL(failed);
}

}  // namespace


TEST_CASE("smhad runs OpenSM: MASTER, restart after kill -9, adoption across a smhad restart, "
          "priority reload by SIGHUP",
          "[ibsim][smhad]") {
  IbsimFabric fabric(topology_path("two-switch-4hca.net"));
  OsmGuard guard;  // after the fabric: OpenSM goes before ibsim
  const auto hca1 = fabric.node_port("Hca1");
  const auto hca2 = fabric.node_port("Hca2");
  REQUIRE(hca1);
  REQUIRE(hca2);
  Head h{"head01", "Hca1", hca1->port_guid, fabric.scratch_dir() + "/head01"};
  // The peer is configured by GUID only but absent (no SM on its port):
  // discovery finds its port, and it never answers SMInfo.
  // opensm.conf names a partitions file (step f edits it).
  std::filesystem::create_directories(h.dir);
  const std::string partitions = h.dir + "/partitions.conf";
  write_text(partitions, "Default=0x7fff, ipoib : ALL=full;\n");
  const std::string osm_extra = "  extra:\n    partition_config_file: " + partitions + "\n";
  write_config(h, 12, {{"head02", hca2->port_guid, 0}}, {}, osm_extra);
  start_smhad(fabric, h, SMHA_SMHAD);

  // (a) OpenSM started by smhad reaches MASTER, seen from a third node.
  json s;
  if (!wait_status(fabric, h, guard, local_master, 30s, &s))
    FAIL("no local MASTER; status: " << s.dump() << "\nsmhad:\n" << smhad_log(fabric, h));
  const int first = s["opensm"]["pid"];
  MasterView m;
  REQUIRE(wait_for([&] { m = query_sm(fabric, "Hca3"); return m.state == 3; }, 20s));
  CHECK(m.guid == hca1->port_guid);
  CHECK(s["role"] == "master");
  // The local SM's LID as the fabric assigned it (not the 0 umad2sim's sysfs
  // snapshot still shows), and who is master since when.
  {
    const auto now_port = fabric.node_port("Hca1");
    REQUIRE(now_port);
    REQUIRE(now_port->lid != 0);
    if (!wait_status(fabric, h, guard, [&](const json& j) { return j["local"].value("lid", 0) != 0; }, 10s, &s))
      FAIL("no local LID in status: " << s.dump());
    CHECK(s["local"]["lid"] == now_port->lid);
    REQUIRE(s["mastership"].is_object());
    CHECK(s["mastership"]["node"] == "head01");
  }

  // (b) kill -9 of OpenSM: smhad starts a new one, which becomes MASTER again.
  REQUIRE(::kill(first, SIGKILL) == 0);
  if (!wait_status(fabric, h, guard, [&](const json& j) {
        return local_master(j) && j["opensm"]["pid"] != first;
      }, 30s, &s))
    FAIL("no restart to MASTER; status: " << s.dump() << "\nsmhad:\n" << smhad_log(fabric, h));
  const int second = s["opensm"]["pid"];
  CHECK(s["opensm"]["crashes"].get<int>() >= 1);
  free_ibsim_slot(fabric, first);

  // (d) smhad stopped (SIGTERM: exits 0, leaves OpenSM running) and started again:
  // the same OpenSM is adopted and mastership does not move.
  fabric.stop_process(h.pidx, SIGTERM);
  CHECK(fabric.process_exit_code(h.pidx) == 0);
  REQUIRE(pid_running(second));
  start_smhad(fabric, h, SMHA_SMHAD);
  if (!wait_status(fabric, h, guard, [&](const json& j) { return local_master(j); }, 30s, &s))
    FAIL("no MASTER after the smhad restart; status: " << s.dump() << "\nsmhad:\n" << smhad_log(fabric, h));
  CHECK(s["opensm"]["pid"] == second);
  CHECK(s["opensm"]["adopted"] == true);
  CHECK(s["opensm"]["spawns"] == 0);
  // An adopted OpenSM's uptime counts from its real start, before this smhad's;
  // the last transition is the adoption, not the previous run's start.
  CHECK(s["opensm"]["uptime_s"].get<double>() > s["uptime_s"].get<double>());
  CHECK(s["last_transition"]["kind"] == "adopted");
  CHECK(s["mastership"]["node"] == "head01");
  CHECK(s["mastership"]["exact"] == false);  // already MASTER at the first answer
  m = query_sm(fabric, "Hca3");
  CHECK(m.state == 3);
  CHECK(m.guid == hca1->port_guid);

  // (e) a reload that changes only the priority: OpenSM gets SIGHUP, same PID, and
  // the master's SMInfo shows the new rendered priority (sm_priority is the
  // engine's base: master renders base + 1, so 12 -> 13 before, 8 -> 9 after).
  const int before_prio = m.priority;
  CHECK(before_prio == 13);
  write_config(h, 8, {{"head02", hca2->port_guid, 0}}, {}, osm_extra);
  {
    auto c = control::ControlClient::connect(h.socket());
    REQUIRE(c);
    auto r = c.value().call("reload", json::object(), 10s);
    REQUIRE(r);
    INFO(r.value().text);
    REQUIRE(r.value().is_ok());
    CHECK(r.value().data["opensm_action"] != "restarted");
  }
  REQUIRE(wait_for([&] { m = query_sm(fabric, "Hca3"); return m.priority == 9; }, 15s));
  CHECK(m.state == 3);
  CHECK(m.guid == hca1->port_guid);
  REQUIRE(wait_status(fabric, h, guard, local_master, 5s, &s));
  CHECK(s["opensm"]["pid"] == second);
  CHECK(pid_running(second));

  // (f) the partitions file edited in place (opensm.conf unchanged but for the
  // header's content hash): the reload SIGHUPs OpenSM, which re-reads the file
  // in the heavy sweep that forces; a second reload finds nothing to do.
  write_text(partitions, "Default=0x7fff, ipoib : ALL=full;\nstorage=0x8001 : ALL=full;\n");
  {
    auto c = control::ControlClient::connect(h.socket());
    REQUIRE(c);
    auto r = c.value().call("reload", json::object(), 10s);
    REQUIRE(r);
    INFO(r.value().text);
    REQUIRE(r.value().is_ok());
    CHECK(r.value().data["opensm_change"] == "sighup");
    CHECK(r.value().data["opensm_action"] == "signalled");
    CHECK(r.value().data["changed_keys"] == json::array({"partition_config_file (content)"}));
    r = c.value().call("reload", json::object(), 10s);
    REQUIRE(r);
    CHECK(r.value().data["opensm_action"] == "unchanged");
  }
  REQUIRE(wait_status(fabric, h, guard, local_master, 5s, &s));
  CHECK(s["opensm"]["pid"] == second);

  // (g) keys that take effect only when smhad restarts (the control socket's
  // group, OpenSM's restart backoff and crash-loop limits): the reload is
  // refused naming each of them, and nothing changes (same OpenSM, the next
  // reload of the unchanged file does nothing).
  {
    write_config(h, 8, {{"head02", hca2->port_guid, 0}}, {},
                 osm_extra + "  restart_backoff_initial_ms: 700\n  restart_backoff_max_s: 30\n"
                             "  crash_loop_count: 9\n  crash_loop_window_s: 100\n");
    std::string yaml = read_file(h.yaml());
    const auto at = yaml.find("  group: root\n");
    REQUIRE(at != std::string::npos);
    yaml.replace(at, 14, "  group: daemon\n");
    write_text(h.yaml(), yaml);
    auto c = control::ControlClient::connect(h.socket());
    REQUIRE(c);
    auto r = c.value().call("reload", json::object(), 10s);
    REQUIRE(r);
    INFO(r.value().text);
    CHECK(r.value().result == control::ResultCode::Conflict);
    // In the key table's order (config::key_table): the node, the peers, opensm, control, ...
    const json want = json::array({"opensm.restart_backoff_initial_ms", "opensm.restart_backoff_max_s",
                                   "opensm.crash_loop_count", "opensm.crash_loop_window_s", "control.group"});
    CHECK(r.value().data["restart_keys"] == want);
    for (const auto& k : want) CHECK_THAT(r.value().text, Catch::Contains(k.get<std::string>()));
    CHECK_THAT(r.value().text, Catch::Contains("nothing changed"));
    // Back to the running file: the reload finds nothing to do.
    write_config(h, 8, {{"head02", hca2->port_guid, 0}}, {}, osm_extra);
    r = c.value().call("reload", json::object(), 10s);
    REQUIRE(r);
    INFO(r.value().text);
    REQUIRE(r.value().is_ok());
    CHECK(r.value().data["opensm_action"] == "unchanged");
  }
  REQUIRE(wait_status(fabric, h, guard, local_master, 5s, &s));
  CHECK(s["opensm"]["pid"] == second);

  // hold / release show in status and events; during a hold a handover is
  // refused (conflict) and nothing changes.
  {
    auto c = control::ControlClient::connect(h.socket());
    REQUIRE(c);
    auto r = c.value().call("hold", json{{"duration_s", 600}, {"reason", "test"}}, 5s);
    REQUIRE(r);
    CHECK(r.value().is_ok());
    r = c.value().call("status", json::object(), 5s);
    REQUIRE(r);
    CHECK(r.value().data["hold"]["held"] == true);
    CHECK(r.value().data["hold"]["reason"] == "test");
    r = c.value().call("handover", json{{"to", "nosuch"}}, 5s);
    REQUIRE(r);
    CHECK(r.value().result == control::ResultCode::Conflict);
    r = c.value().call("release", json::object(), 5s);
    REQUIRE(r);
    CHECK(r.value().is_ok());
    r = c.value().call("events", json{{"n", 50}}, 5s);
    REQUIRE(r);
    std::vector<std::string> kinds;
    for (const auto& e : r.value().data["events"]) kinds.push_back(e["kind"]);
    CHECK(std::count(kinds.begin(), kinds.end(), "RELOAD") == 4);  // (e), (f), (f)'s and (g)'s no-op
    CHECK(std::count(kinds.begin(), kinds.end(), "HOLD") == 1);
    CHECK(std::count(kinds.begin(), kinds.end(), "RELEASE") == 1);
    r = c.value().call("status", json::object(), 5s);
    REQUIRE(r);
    CHECK(r.value().data["hold"]["held"] == false);

    // smhad dispatches exactly the protocol's method table, with its access.
    r = c.value().call(control::method::kListMethods, json::object(), 5s);
    REQUIRE(r);
    std::set<std::pair<std::string, std::string>> listed, table;
    for (const auto& m : r.value().data["methods"]) listed.emplace(m["name"], m["access"]);
    for (const auto& m : control::kMethods) table.emplace(m.name, control::to_string(m.access));
    CHECK(listed == table);
  }

  fabric.stop_process(h.pidx, SIGTERM);
  CHECK(fabric.process_exit_code(h.pidx) == 0);
}

TEST_CASE("HA drill: kill -9 of the master OpenSM under two smhad", "[ibsim][smhad][drill]") {
  IbsimFabric fabric(topology_path("two-switch-4hca.net"));
  OsmGuard guard;
  // GUID-only configs (name + port_guid), no OpenSM before smhad: the port
  // GUIDs come from ibstat, each head finds the other by discovery.
  const auto hca1 = fabric.node_port("Hca1");
  const auto hca2 = fabric.node_port("Hca2");
  REQUIRE(hca1);
  REQUIRE(hca2);

  Head h1{"head01", "Hca1", hca1->port_guid, fabric.scratch_dir() + "/head01"};
  Head h2{"head02", "Hca2", hca2->port_guid, fabric.scratch_dir() + "/head02"};
  // The same sm_priority on both heads, as the engine requires (sticky failback
  // rests on standby = base < master = base + 1); head01 starts first and masters.
  write_config(h1, 10, {{"head02", hca2->port_guid, 0}});
  write_config(h2, 10, {{"head01", hca1->port_guid, 0}});
  start_smhad(fabric, h1, SMHA_SMHAD);
  json s1, s2;
  if (!wait_status(fabric, h1, guard, local_master, 30s, &s1))
    FAIL("head01 not MASTER: " << s1.dump() << "\n" << smhad_log(fabric, h1));
  start_smhad(fabric, h2, SMHA_SMHAD);
  if (!wait_status(fabric, h2, guard, [](const json& j) {
        return j["local"]["state"] == "STANDBY" && j["peers"][0]["state"] == "MASTER";
      }, 30s, &s2))
    FAIL("head02 not STANDBY seeing head01 MASTER: " << s2.dump() << "\n" << smhad_log(fabric, h2));

  // (g) status over the socket shows both heads with their real SM states.
  REQUIRE(wait_status(fabric, h1, guard, [](const json& j) {
    return j["local"]["state"] == "MASTER" && j["peers"][0]["state"] == "STANDBY";
  }, 10s, &s1));
  {
    // smctl itself, --json, against head02's socket.
    const auto r = fabric.run("Hca4", {SMHA_SMCTL, "status", "--json", "--socket", h2.socket()}, 10s);
    REQUIRE(r.exit_code == 0);
    const auto j = json::parse(r.out);
    CHECK(j["data"]["local"]["state"] == "STANDBY");
    CHECK(j["data"]["peers"][0]["name"] == "head01");
    CHECK(j["data"]["peers"][0]["state"] == "MASTER");
  }

  // The takeover report compares LIDs with head02's census walk before the kill.
  REQUIRE(wait_for([&] { return call(h2, "sms")["data"]["census"].value("walks", 0) >= 1; }, 20s));
  CHECK(s2["last_takeover"].is_null());

  // (f) kill -9 of the master OpenSM: head02 becomes MASTER; time from the kill to
  // the first SMInfo from Hca3 that shows it.
  const int victim = s1["opensm"]["pid"];
  const auto t0 = std::chrono::steady_clock::now();
  REQUIRE(::kill(victim, SIGKILL) == 0);
  MasterView m;
  REQUIRE(wait_for([&] {
    m = query_sm(fabric, "Hca3");
    return m.state == 3 && m.guid == hca2->port_guid;
  }, 20s));
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
  std::cout << "HA drill: kill -9 of the master OpenSM -> new MASTER seen from Hca3 after " << ms.count()
            << " ms" << std::endl;
  CHECK(ms < 5s);

  // In the end exactly one MASTER: head01's restarted OpenSM stays STANDBY (sticky).
  REQUIRE(wait_status(fabric, h1, guard, [&](const json& j) {
    return j["opensm"]["pid"] != victim && j["local"]["state"] == "STANDBY";
  }, 30s, &s1));
  REQUIRE(wait_status(fabric, h2, guard, local_master, 10s, &s2));
  free_ibsim_slot(fabric, victim);
  m = query_sm(fabric, "Hca3");
  CHECK(m.state == 3);
  CHECK(m.guid == hca2->port_guid);
  int masters = 0;
  for (const json* s : {&s1, &s2}) masters += (*s)["local"]["state"] == "MASTER";
  CHECK(masters == 1);

  // The takeover report on head02 (doc/takeover-report.md), from real OpenSM's
  // log and a census walk after SUBNET UP.
  if (!wait_status(fabric, h2, guard, [](const json& j) { return j["last_takeover"].is_object(); }, 30s, &s2))
    FAIL("no takeover report: " << s2.dump() << "\n" << smhad_log(fabric, h2));
  const json rep = s2["last_takeover"]["report"];
  INFO(rep.dump());
  std::cout << "HA drill: kill -9 takeover report: " << rep["summary"].get<std::string>() << std::endl;
  CHECK(rep["kind"] == "takeover");
  CHECK(rep["previous_master"] == hex_guid(hca1->port_guid));
  REQUIRE(rep["detection_ms"].is_number());
  REQUIRE(rep["to_master_ms"].is_number());
  REQUIRE(rep["master_to_subnet_up_ms"].is_number());
  CHECK(rep["master_to_subnet_up_ms"].get<double>() > 0);
  CHECK(rep["detection_ms"].get<double>() + rep["to_master_ms"].get<double>() < 5000);
  // ftree and updn cannot route the lab's two switches (OpenSM logs "cannot
  // build lid matrices"); minhop, OpenSM's fallback, does.
  CHECK(rep["routing"]["engine"] == "minhop");
  CHECK(rep["routing"]["fallback"] == true);
  REQUIRE(rep["routing"]["failures"].size() >= 1);
  CHECK(rep["routing"]["failures"][0] == "ftree: cannot build lid matrices");
  // LID continuity (on by default): no port changed LID.
  REQUIRE(rep["lids"]["compared"].is_number());
  CHECK(rep["lids"]["compared"].get<int>() >= 4);
  CHECK(rep["lids"]["changed"] == 0);
  REQUIRE(rep["master_sm_lid"]["sampled"].is_number());
  CHECK(rep["master_sm_lid"]["sampled"].get<int>() >= 4);
  CHECK(rep["master_sm_lid"]["on_new_master"] == rep["master_sm_lid"]["sampled"]);
  // head02 read both switches' LFTs before and after: minhop routes the same
  // LIDs the same way. Its SA answered again (no SA copy without the peer
  // channel: nothing restored).
  REQUIRE(rep["lfts"]["compared"].is_number());
  CHECK(rep["lfts"]["compared"].get<int>() >= 2 * 6);
  CHECK(rep["lfts"]["changed"] == 0);
  REQUIRE(rep["sa"]["after_master_ms"].is_number());
  REQUIRE(rep["sa"]["outage_ms"].is_number());
  CHECK(rep["sa"]["outage_ms"].get<double>() < 5000);
  CHECK(rep["sa"]["restored"] == false);
  CHECK(rep["incomplete"] == "");
  {
    const auto r = fabric.run("Hca4", {SMHA_SMCTL, "status", "--socket", h2.socket()}, 10s);
    REQUIRE(r.exit_code == 0);
    CHECK(r.out.find(" Takeover: takeover from " + hex_guid(hca1->port_guid)) != std::string::npos);
  }
  // The report is an event too, and head01 (which did not become MASTER again) has none.
  auto events = smhad_events(h2);
  REQUIRE(events);
  int reports = 0;
  for (const auto& e : *events) reports += e["kind"] == "takeover_report";
  CHECK(reports == 1);
  CHECK(s1["last_takeover"].is_null());

  fabric.stop_process(h1.pidx, SIGTERM);
  fabric.stop_process(h2.pidx, SIGTERM);
}

TEST_CASE("HA drill: GUID-only configs (name + port_guid), peers found by discovery, kill -9 of "
          "the master", "[ibsim][smhad][drill][discovery]") {
  // No LID anywhere and no OpenSM before smhad: each head finds the other by
  // its port GUID (ibsim's GUIDs: Hca1 port 0x100001, Hca2 port 0x100004).
  IbsimFabric fabric(topology_path("two-switch-4hca.net"));
  OsmGuard guard;
  const std::uint64_t g1 = 0x100001, g2 = 0x100004;
  Head h1{"head01", "Hca1", g1, fabric.scratch_dir() + "/head01"};
  Head h2{"head02", "Hca2", g2, fabric.scratch_dir() + "/head02"};
  json s1, s2;
  start_guid_only_pair(fabric, guard, h1, h2, s1, s2);
  // Both peers resolved: the route ibsim has, a LID, and the node description.
  REQUIRE(wait_status(fabric, h1, guard, [](const json& j) {
    return j["local"]["state"] == "MASTER" && j["peers"][0]["state"] == "STANDBY" &&
           j["peers"][0]["lid"].is_number();
  }, 15s, &s1));
  INFO(s1.dump() << "\n" << s2.dump());
  CHECK(s1["peers"][0]["route"] == "resolved");
  CHECK(s1["peers"][0]["dr_path"] == "0,1,3,1");
  CHECK(s1["peers"][0]["node_description"] == "head02");
  CHECK(s1["peers"][0]["configured_lid"].is_null());
  CHECK(s2["peers"][0]["route"] == "resolved");
  CHECK(s2["peers"][0]["dr_path"] == "0,1,3,1");
  CHECK(s2["peers"][0]["node_description"] == "head01");
  const auto hca1 = fabric.node_port("Hca1");
  REQUIRE(hca1);
  REQUIRE(wait_status(fabric, h2, guard, [&](const json& j) {
    return j["peers"][0]["lid"] == hca1->lid;
  }, 15s, &s2));

  // kill -9 of the master OpenSM: head02 takes over.
  const int victim = s1["opensm"]["pid"];
  const auto t0 = std::chrono::steady_clock::now();
  REQUIRE(::kill(victim, SIGKILL) == 0);
  MasterView m;
  REQUIRE(wait_for([&] {
    m = query_sm(fabric, "Hca3");
    return m.state == 3 && m.guid == g2;
  }, 20s));
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
  std::cout << "HA drill (GUID-only): kill -9 of the master OpenSM -> new MASTER seen from Hca3 after "
            << ms.count() << " ms" << std::endl;
  CHECK(ms < 5s);
  REQUIRE(wait_status(fabric, h1, guard, [&](const json& j) {
    return j["opensm"]["pid"] != victim && j["local"]["state"] == "STANDBY";
  }, 30s, &s1));
  REQUIRE(wait_status(fabric, h2, guard, local_master, 10s, &s2));
  free_ibsim_slot(fabric, victim);
  fabric.stop_process(h1.pidx, SIGTERM);
  fabric.stop_process(h2.pidx, SIGTERM);
}

namespace {

bool has_alarm(const json& status, const std::string& kind, std::string* detail = nullptr) {
  for (const auto& a : status.value("alarms", json::array()))
    if (a.value("kind", std::string()) == kind) {
      if (detail) *detail = a.value("detail", std::string());
      return true;
    }
  return false;
}

}  // namespace

TEST_CASE("Census: a third OpenSM at priority 0 on a compute node raises unknown_sm naming it, "
          "smctl sms lists it, cleared after it stops, no takeover", "[ibsim][smhad][census]") {
  // GUID-only heads on Hca1 and Hca2; the third OpenSM on Hca3 (ibsim GUIDs:
  // Hca1 port 0x100001, Hca2 0x100004; Hca3's read from the fabric).
  IbsimFabric fabric(topology_path("two-switch-4hca.net"));
  OsmGuard guard;
  const std::uint64_t g1 = 0x100001, g2 = 0x100004;
  Head h1{"head01", "Hca1", g1, fabric.scratch_dir() + "/head01"};
  Head h2{"head02", "Hca2", g2, fabric.scratch_dir() + "/head02"};
  json s1, s2;
  start_guid_only_pair(fabric, guard, h1, h2, s1, s2);
  // Both heads in each census, as heads; no unknown_sm.
  for (Head* h : {&h1, &h2}) {
    json s;
    REQUIRE(wait_status(fabric, *h, guard, [](const json& j) {
      return j["sms"].size() == 2 && !j["sms"][0]["head"].is_null() && !j["sms"][1]["head"].is_null();
    }, 30s, &s));
    CHECK_FALSE(has_alarm(s, "unknown_sm"));
  }
  const auto hca3 = fabric.node_port("Hca3");
  REQUIRE(hca3);
  const std::string third_guid = hex_guid(hca3->port_guid);

  // The third OpenSM: priority 0, OpenSM's default sweep_interval (10 s).
  const auto t0 = std::chrono::steady_clock::now();
  const int third = fabric.start_opensm("Hca3", 0);
  std::string detail;
  for (Head* h : {&h1, &h2}) {
    json s;
    const auto left = 20s - std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
    // The alarm may be raised before the census has read the SM's
    // NodeDescription (found first by SMInfo or the master's SA); its text is
    // updated once it has.
    if (!wait_status(fabric, *h, guard, [&](const json& j) {
          return has_alarm(j, "unknown_sm", &detail) && detail.find("\"Hca3\"") != std::string::npos;
        }, std::max<std::chrono::milliseconds>(left, 1ms), &s))
      FAIL(h->name << ": no unknown_sm naming Hca3 within two sweeps (20 s): " << s.dump() << "\n"
                   << smhad_log(fabric, *h));
    INFO(detail);
    CHECK(detail.find(third_guid) != std::string::npos);
    CHECK(detail.find("\"Hca3\"") != std::string::npos);
    CHECK(detail.find("lid " + std::to_string(hca3->lid)) != std::string::npos);
  }
  const auto found_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
  std::cout << "Census (ibsim): third OpenSM at priority 0 -> unknown_sm on both heads after " << found_ms.count()
            << " ms" << std::endl;
  {
    // smctl sms --json lists it, not a head, cabled at a switch port.
    const auto r = fabric.run("Hca4", {SMHA_SMCTL, "sms", "--json", "--socket", h1.socket()}, 10s);
    REQUIRE(r.exit_code == 0);
    const auto j = json::parse(r.out);
    INFO(j.dump(2));
    bool listed = false;
    for (const auto& x : j["data"]["sms"])
      if (x["guid"] == third_guid) {
        listed = true;
        CHECK(x["head"].is_null());
        CHECK(x["node_description"] == "Hca3");
        // STANDBY from its own SMInfo; DISCOVERING when the master's SA
        // table (what its sweep read while the SM started) came first.
        CHECK((x["state"] == "STANDBY" || x["state"] == "DISCOVERING"));
        CHECK(x["priority"] == 0);
        CHECK(x["switch_guid"].is_string());
        CHECK(x["switch_port"].is_number());
      }
    CHECK(listed);
    CHECK(j["data"]["census"]["walks"].get<int>() >= 1);
    // The heads: named (ibsim's NodeDescriptions) and located too.
    for (const auto& x : j["data"]["sms"]) {
      if (x["head"].is_null()) continue;
      CHECK(x["node_description"] == x["head"]);
      CHECK(x["switch_guid"].is_string());
    }
    // The table for people names it too.
    const auto t = fabric.run("Hca4", {SMHA_SMCTL, "sms", "--socket", h1.socket()}, 10s);
    REQUIRE(t.exit_code == 0);
    CHECK(t.out.find(third_guid) != std::string::npos);
    std::cout << t.out;
  }

  // It stops: cleared on both heads.
  const auto t1 = std::chrono::steady_clock::now();
  fabric.stop_opensm(third);
  for (Head* h : {&h1, &h2}) {
    json s;
    if (!wait_status(fabric, *h, guard, [](const json& j) { return !has_alarm(j, "unknown_sm"); }, 40s, &s))
      FAIL(h->name << ": unknown_sm not cleared: " << s.dump());
  }
  const auto cleared_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t1);
  std::cout << "Census (ibsim): unknown_sm cleared on both heads " << cleared_ms.count()
            << " ms after the third OpenSM stopped" << std::endl;
  // No takeover because of it: head01 still MASTER, head02 STANDBY.
  REQUIRE(wait_status(fabric, h1, guard, local_master, 5s, &s1));
  REQUIRE(wait_status(fabric, h2, guard, [](const json& j) { return j["local"]["state"] == "STANDBY"; }, 5s, &s2));
  for (Head* h : {&h1, &h2}) {
    auto ev = smhad_events(*h, 1000);
    REQUIRE(ev);
    for (const auto& e : *ev) CHECK(e.value("kind", std::string()) != "takeover_started");
  }
  fabric.stop_process(h1.pidx, SIGTERM);
  fabric.stop_process(h2.pidx, SIGTERM);
}

namespace {


// The body of GET /metrics from 127.0.0.1:port ("" if it cannot connect).
std::string scrape(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return {};
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string out;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
    const std::string req = "GET /metrics HTTP/1.0\r\n\r\n";
    if (::send(fd, req.data(), req.size(), 0) == static_cast<ssize_t>(req.size())) {
      char buf[4096];
      for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) out.append(buf, static_cast<std::size_t>(n));
    }
  }
  ::close(fd);
  const auto at = out.find("\r\n\r\n");
  return at == std::string::npos ? std::string() : out.substr(at + 4);
}


std::vector<std::string> event_kinds(const json& events) {
  std::vector<std::string> out;
  for (const auto& e : events) out.push_back(e["kind"]);
  return out;
}

}  // namespace

TEST_CASE("planned drill, metrics, persisted events and events --follow under two smhad",
          "[ibsim][smhad][drill]") {
  IbsimFabric fabric(topology_path("two-switch-4hca.net"));
  OsmGuard guard;
  // GUID-only configs (name + port_guid), no OpenSM before smhad: the port
  // GUIDs come from ibstat, each head finds the other by discovery.
  const auto hca1 = fabric.node_port("Hca1");
  const auto hca2 = fabric.node_port("Hca2");
  REQUIRE(hca1);
  REQUIRE(hca2);

  Head h1{"head01", "Hca1", hca1->port_guid, fabric.scratch_dir() + "/head01"};
  Head h2{"head02", "Hca2", hca2->port_guid, fabric.scratch_dir() + "/head02"};
  const int port = free_loopback_port();
  const std::string prom_dir = h1.dir + "/textfile";
  std::filesystem::create_directories(prom_dir);
  write_config(h1, 10, {{"head02", hca2->port_guid, 0}},
               "metrics:\n  listen: 127.0.0.1:" + std::to_string(port) + "\n  textfile_dir: " + prom_dir +
                   "\n  textfile_interval_s: 1\n");
  write_config(h2, 10, {{"head01", hca1->port_guid, 0}});
  // OpenSM gets the kernel's MAD timeouts (umad2sim has none): without them a
  // sweep that waits for an answer ibsim never sends blocks every later
  // sweep, and a rendered priority is never re-read (its SIGHUP only requests
  // a sweep). smhad verifies every priority change, so that would fail the drill.
  const std::vector<std::pair<std::string, std::string>> shim{{"LD_PRELOAD", umad_timeout_shim_preload()}};
  start_smhad(fabric, h1, SMHA_SMHAD, shim);
  json s1, s2;
  if (!wait_status(fabric, h1, guard, local_master, 30s, &s1))
    FAIL("head01 not MASTER: " << s1.dump() << "\n" << smhad_log(fabric, h1));
  start_smhad(fabric, h2, SMHA_SMHAD, shim);
  if (!wait_status(fabric, h1, guard, [](const json& j) {
        return local_master(j) && j["peers"][0]["state"] == "STANDBY" && j["peers"][0]["last_poll_answered"] == true;
      }, 30s, &s1))
    FAIL("head01 does not see head02 STANDBY: " << s1.dump() << "\n" << smhad_log(fabric, h2));
  REQUIRE(wait_status(fabric, h2, guard, [](const json& j) { return j["role"] == "standby"; }, 10s, &s2));

  // Refusals through smctl: on the standby head (not master), and during a hold.
  auto r = fabric.run("Hca4", {SMHA_SMCTL, "drill", "--json", "--socket", h2.socket()}, 20s);
  CHECK(r.exit_code == 1);
  CHECK(json::parse(r.out)["data"]["refused"] == "not_master");
  REQUIRE(call(h1, "hold", json{{"duration_s", 60}})["result"] == "ok");
  r = fabric.run("Hca4", {SMHA_SMCTL, "drill", "--socket", h1.socket()}, 20s);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("drill refused: a maintenance hold is active"));
  REQUIRE(call(h1, "release")["result"] == "ok");

  // Where each head's OpenSM log and event history stand before the drill.
  const std::size_t log_mark1 = read_file(h1.dir + "/opensm.log").size();
  const std::size_t log_mark2 = read_file(h2.dir + "/opensm.log").size();
  auto seq_now = [&](const Head& h) {
    const json ev = call(h, "events", json{{"n", 1}})["data"]["events"];
    return ev.empty() ? std::uint64_t{0} : ev.back()["seq"].get<std::uint64_t>();
  };
  const std::uint64_t seq_mark1 = seq_now(h1), seq_mark2 = seq_now(h2);

  // smctl events --follow on head01 while the drill runs.
  const int follower = fabric.spawn("Hca4", {SMHA_SMCTL, "events", "--follow", "-n", "1", "--socket", h1.socket()});

  // The drill: failover to head02 and failback, each leg timed; verdict pass.
  r = fabric.run("Hca4", {SMHA_SMCTL, "drill", "--json", "--to", "head02", "--socket", h1.socket()}, 60s);
  INFO(r.out << r.err << "\nsmhad:\n" << smhad_log(fabric, h1) << "\nhead01 opensm.log:\n"
              << read_file(h1.dir + "/opensm.log") << "\nhead02 smhad:\n" << smhad_log(fabric, h2));
  REQUIRE(r.exit_code == 0);
  const json drill = json::parse(r.out);
  CHECK(drill["data"]["verdict"] == "pass");
  REQUIRE(drill["data"]["legs"].size() == 2);
  std::cout << "planned drill under ibsim: failover " << drill["data"]["legs"][0]["duration_ms"].get<double>()
            << " ms, failback " << drill["data"]["legs"][1]["duration_ms"].get<double>() << " ms, total "
            << drill["data"]["total_ms"].get<double>() << " ms" << std::endl;
  // Each head recorded every state change its own OpenSM logged in the window,
  // in order, with OpenSM's time stamp: as many MASTER entries as the log has
  // `Entering MASTER state` lines (however short each mastership was).
  auto logged_states = [&](const Head& h, std::size_t mark) {
    std::vector<std::string> out;
    const std::string log = read_file(h.dir + "/opensm.log").substr(mark);
    for (std::size_t at = 0; (at = log.find("Entering ", at)) != std::string::npos; at += 9) {
      const auto end = log.find(" state", at);
      if (end != std::string::npos && log.find('\n', at) > end) out.push_back(log.substr(at + 9, end - at - 9));
    }
    return out;
  };
  auto recorded_states = [&](const Head& h, std::uint64_t seq_mark) {
    std::vector<std::string> out;
    const json reply = call(h, "events", json{{"n", 1000}});
    for (const auto& e : reply["data"]["events"]) {
      if (e["seq"].get<std::uint64_t>() <= seq_mark || e["kind"] != "opensm_state") continue;
      const std::string reason = e["reason"];
      out.push_back(reason.substr(reason.find("->") + 2));
      CHECK_THAT(e["evidence"].get<std::string>(), Catch::StartsWith("OpenSM log " + h.dir + "/opensm.log "));
    }
    return out;
  };
  for (const auto& [head, log_at, seq_at] :
       {std::tuple{&h1, log_mark1, seq_mark1}, std::tuple{&h2, log_mark2, seq_mark2}}) {
    // Plain copies: clang 14 cannot capture structured bindings in a lambda.
    const auto h = head;
    const auto log_mark = log_at;
    const auto seq_mark = seq_at;
    std::vector<std::string> logged, recorded;
    CHECK(wait_for([&] {
      logged = logged_states(*h, log_mark);
      recorded = recorded_states(*h, seq_mark);
      return !logged.empty() && recorded == logged;
    }, 5s));
    INFO(h->name << ": OpenSM logged " << logged.size() << " state change(s), smhad recorded " << recorded.size()
                 << "; events after seq " << seq_mark << ": "
                 << call(*h, "events", json{{"n", 50}})["data"]["events"].dump());
    CHECK(recorded == logged);
    CHECK(std::count(recorded.begin(), recorded.end(), "MASTER") == 1);
  }

  // Exactly one MASTER afterwards, each head's SM asked by LID from a third node.
  // (Not plain `sminfo` at Hca3: after a handover the ports keep pointing at the
  // old master's LID until the new master's next heavy sweep.)
  CHECK(query_sm(fabric, "Hca3", assigned_lid(fabric, "Hca1")).state == 3);
  CHECK(query_sm(fabric, "Hca3", assigned_lid(fabric, "Hca2")).state == 2);
  REQUIRE(wait_status(fabric, h2, guard, [](const json& j) { return j["local"]["state"] == "STANDBY"; }, 10s, &s2));

  // The follower printed the drill's handovers as they happened; SIGINT ends it with 0.
  CHECK(wait_for([&] {
    const auto out = fabric.process_stdout(follower);
    return out.find("handover_done") != std::string::npos && out.find("took over by request") != std::string::npos;
  }, 10s));
  fabric.stop_process(follower, SIGINT);
  CHECK(fabric.process_exit_code(follower) == 0);

  // Metrics over HTTP and in the textfile, read with a real exposition parser.
  std::string body;
  REQUIRE(wait_for([&] { body = scrape(port); return !body.empty(); }, 5s));
  auto doc = parse_with_prometheus_client(body);
  REQUIRE_FALSE(doc.contains("error"));
  CHECK(sample_value(doc["smha_role"], "smha_role", {{"node", "head01"}, {"role", "master"}}) == 1.0);
  CHECK(sample_value(doc["smha_sm_state"], "smha_sm_state", {{"node", "head01"}, {"guid", hex_guid(hca1->port_guid)}}) ==
        3.0);
  CHECK(sample_value(doc["smha_sm_state"], "smha_sm_state", {{"node", "head02"}, {"guid", hex_guid(hca2->port_guid)}}) ==
        2.0);
  CHECK(sample_value(doc["smha_failovers"], "smha_failovers_total", {{"reason", "handover"}}) == 1.0);
  CHECK(sample_value(doc["smha_last_takeover_duration_seconds"], "smha_last_takeover_duration_seconds",
                     json::object())
            .is_number());
  CHECK(sample_value(doc["smha_poll_rtt_seconds"], "smha_poll_rtt_seconds_count", json::object()).get<double>() > 0);
  CHECK(sample_value(doc["smha_hold_active"], "smha_hold_active", json::object()) == 0.0);
  // The textfile is rewritten periodically: a copy written while a poll of
  // head02 went unanswered (a loaded machine) says 0 until the next one.
  std::string file;
  json fdoc;
  const bool up_in_file = wait_for([&] {
    file = read_file(prom_dir + "/smha.prom");
    if (file.empty()) return false;
    fdoc = parse_with_prometheus_client(file);
    return !fdoc.contains("error") &&
           sample_value(fdoc["smha_sm_up"], "smha_sm_up", {{"node", "head02"}, {"guid", hex_guid(hca2->port_guid)}}) ==
               1.0;
  }, 15s);
  INFO("textfile:\n" << file);
  CHECK(up_in_file);
  REQUIRE_FALSE(fdoc.contains("error"));
  // The metrics method answers the same families.
  auto mm = call(h1, "metrics");
  CHECK(parse_with_prometheus_client(mm["data"]["text"].get<std::string>()).contains("smha_poll_rtt_seconds"));

  // Events survive a restart of smhad: the drill's events are still listed and
  // new events continue the sequence.
  const json before = call(h1, "events", json{{"n", 1000}})["data"];
  const auto last_seq = before["last_seq"].get<std::uint64_t>();
  fabric.stop_process(h1.pidx, SIGTERM);
  REQUIRE(fabric.process_exit_code(h1.pidx) == 0);
  // A follower of head02 exits 6 when head02's smhad goes away.
  const int follower2 = fabric.spawn("Hca4", {SMHA_SMCTL, "events", "--follow", "--socket", h2.socket()});
  REQUIRE(wait_for([&] { return !fabric.process_stdout(follower2).empty(); }, 10s));
  fabric.stop_process(h2.pidx, SIGTERM);
  REQUIRE(wait_for([&] { return !fabric.process_running(follower2); }, 10s));
  CHECK(fabric.process_exit_code(follower2) == 6);
  CHECK_THAT(fabric.process_stderr(follower2), Catch::Contains("smhad went away"));

  start_smhad(fabric, h1, SMHA_SMHAD, shim);
  REQUIRE(wait_status(fabric, h1, guard, [](const json& j) { return j["local"]["state"] == "MASTER"; }, 30s, &s1));
  const json after = call(h1, "events", json{{"n", 1000}})["data"];
  const auto kinds = event_kinds(after["events"]);
  CHECK(std::count(kinds.begin(), kinds.end(), "handover_done") == 2);
  CHECK(after["events"][0]["seq"] == before["events"][0]["seq"]);
  CHECK(after["last_seq"].get<std::uint64_t>() >= last_seq);
  CHECK(std::filesystem::exists(h1.state_dir() + "/events.jsonl"));
  fabric.stop_process(h1.pidx, SIGTERM);
}

// Issue 11 item 2: the drill's verdict covers every head. During the drill's
// stable phase (after the failback) a stray SubnSet(SMInfo, HANDOVER) from a
// third node (`sminfo -s 3 <lid> 1`) makes head02's STANDBY OpenSM MASTER at
// once; its sweep finds head01 higher and hands mastership back (~25 ms, less
// than a poll round; head01's OpenSM stays MASTER and logs no state change).
// The drill must fail, naming head02. Before, the verdict read only head01's
// own state changes and OpenSM log, which show nothing of it.
TEST_CASE("a drill fails on a mastership of the peer shorter than a poll round", "[ibsim][smhad][drill]") {
  IbsimFabric fabric(topology_path("two-switch-4hca.net"));
  OsmGuard guard;
  // GUID-only configs (name + port_guid), no OpenSM before smhad: the port
  // GUIDs come from ibstat, each head finds the other by discovery.
  const auto hca1 = fabric.node_port("Hca1");
  const auto hca2 = fabric.node_port("Hca2");
  REQUIRE(hca1);
  REQUIRE(hca2);

  Head h1{"head01", "Hca1", hca1->port_guid, fabric.scratch_dir() + "/head01"};
  Head h2{"head02", "Hca2", hca2->port_guid, fabric.scratch_dir() + "/head02"};
  write_config(h1, 10, {{"head02", hca2->port_guid, 0}});
  // head02's smhad polls once a second, so it (almost) never catches its own
  // OpenSM's few milliseconds as MASTER and restarts it as the lower-ranked of
  // two masters: what is left to see is on head01's side of the fabric.
  SmhadOptions slow;
  slow.poll_interval_ms = 1000;
  write_smhad_config(h2, {{"head01", hca1->port_guid, 0}}, slow);
  const std::vector<std::pair<std::string, std::string>> shim{{"LD_PRELOAD", umad_timeout_shim_preload()}};
  start_smhad(fabric, h1, SMHA_SMHAD, shim, &guard);
  json s1, s2;
  if (!wait_status(fabric, h1, guard, local_master, 30s, &s1))
    FAIL("head01 not MASTER: " << s1.dump() << "\n" << smhad_log(fabric, h1));
  start_smhad(fabric, h2, SMHA_SMHAD, shim, &guard);
  REQUIRE(wait_status(fabric, h1, guard, [](const json& j) {
    return local_master(j) && j["peers"][0]["state"] == "STANDBY" && j["peers"][0]["last_poll_answered"] == true;
  }, 30s, &s1));
  REQUIRE(wait_status(fabric, h2, guard, [](const json& j) { return j["role"] == "standby"; }, 10s, &s2));
  // A drill is refused while an alarm is active (e.g. the start's priority checks).
  REQUIRE(wait_status(fabric, h1, guard, [](const json& j) { return j["alarms"].empty(); }, 20s, &s1));
  // head01 knows head02's ActCount rate as STANDBY (10 rounds): a sweep is
  // judged against it (doc/ha-engine.md).
  const auto rounds0 = s1["rounds"].get<std::uint64_t>();
  REQUIRE(wait_status(fabric, h1, guard, [&](const json& j) { return j["rounds"].get<std::uint64_t>() >= rounds0 + 10; },
                      10s, &s1));

  auto done_pulls = [&](std::uint64_t after) {
    int n = 0;
    if (auto ev = smhad_events(h1, 200))
      for (const auto& e : *ev)
        n += e["seq"].get<std::uint64_t>() > after && e["kind"] == "handover_done" &&
             e["reason"] == "took over by request";
    return n;
  };
  std::uint64_t mark = 0;
  if (auto ev = smhad_events(h1, 1); ev && !ev->empty()) mark = ev->back()["seq"].get<std::uint64_t>();
  const int drill = fabric.spawn("Hca4", {SMHA_SMCTL, "drill", "--json", "--to", "head02", "--socket", h1.socket()});
  // Failover, then failback (the pull's handover_done), then head02 seen STANDBY again.
  const bool failed_back = wait_for([&] { return done_pulls(mark) == 1; }, 30s) &&
                           wait_status(fabric, h1, guard, [](const json& j) {
                             return local_master(j) && j["role"] == "master" && j["peers"][0]["state"] == "STANDBY";
                           }, 10s, &s1);
  if (!failed_back)
    FAIL("the drill did not get to its stable phase: " << s1.dump() << "\ndrill: " << fabric.process_stdout(drill)
                                                        << fabric.process_stderr(drill) << "\nhead01 smhad:\n"
                                                        << smhad_log(fabric, h1));
  REQUIRE(fabric.process_running(drill));  // in its stable phase (handover_bound + 1 s)
  const std::size_t mark1 = read_file(h1.opensm_log()).size();
  const std::size_t mark2 = read_file(h2.opensm_log()).size();
  const int lid2 = assigned_lid(fabric, "Hca2");
  const auto inject = fabric.run("Hca3", {"sminfo", "-s", "3", std::to_string(lid2), "1"}, 10s);
  INFO("sminfo: " << inject.out << inject.err);
  REQUIRE(inject.exit_code == 0);

  REQUIRE(wait_for([&] { return !fabric.process_running(drill); }, 30s));
  const std::string out = fabric.process_stdout(drill);
  INFO("drill: " << out << fabric.process_stderr(drill) << "\nhead01 smhad:\n" << smhad_log(fabric, h1)
                 << "\nhead02 opensm.log after the HANDOVER:\n" << read_file(h2.opensm_log()).substr(mark2));
  CHECK(fabric.process_exit_code(drill) == 1);
  const json reply = json::parse(out);
  CHECK(reply["data"]["verdict"] == "fail");
  const std::string reason = reply["data"].value("reason", "");
  CHECK_THAT(reason, Catch::Contains("head02"));
  std::cout << "drill with a stray HANDOVER to head02 in its stable phase: " << reason << "\n  mastership: "
            << reply["data"]["mastership"].dump() << std::endl;
  // head02's OpenSM really was MASTER and gave it back...
  CHECK(wait_for([&] {
    const std::string l = read_file(h2.opensm_log()).substr(mark2);
    const auto m = l.find("Entering MASTER state");
    return m != std::string::npos && l.find("Entering STANDBY state", m) != std::string::npos;
  }, 10s));
  // ... while head01's OpenSM logged no state change at all.
  CHECK(read_file(h1.opensm_log()).substr(mark1).find("Entering ") == std::string::npos);

  // `smctl handover` replies with the same verdict: a clean push to head02 is
  // done, and its data lists the plan and the masters seen.
  REQUIRE(wait_status(fabric, h1, guard, [](const json& j) {
    return local_master(j) && j["role"] == "master" && j["peers"][0]["state"] == "STANDBY";
  }, 20s, &s1));
  const auto ho = fabric.run("Hca4", {SMHA_SMCTL, "handover", "--json", "--to", "head02", "--socket", h1.socket()}, 30s);
  INFO("handover: " << ho.out << ho.err);
  CHECK(ho.exit_code == 0);
  const json hj = json::parse(ho.out);
  CHECK(hj["data"]["outcome"] == "done");
  CHECK(hj["data"]["mastership"]["plan"] == json::array({"head01 (this head)", "head02"}));
  CHECK(hj["data"]["mastership"]["masters_seen"].back()["name"] == "head02");

  fabric.stop_process(h1.pidx, SIGTERM);
  fabric.stop_process(h2.pidx, SIGTERM);
}

// OpenSM's log is read once per poll interval. A state change OpenSM logged
// just before `smctl handover` (here two lines appended to head01's log, as
// OpenSM writes them, right before the request) happened before the window:
// the reply must not call it a flip-back. Before the fix the window took every
// line read after the request, and failed the handover ("flip-back: this
// head's OpenSM was MASTER again") when a stray HANDOVER's aftermath was read
// late (stress run, 2026-12-04). head01 polls once a second, so the appended
// lines are not read by the regular timer before the request.
TEST_CASE("smctl handover does not count OpenSM log lines written before the request", "[ibsim][smhad][drill]") {
  IbsimFabric fabric(topology_path("two-switch-4hca.net"));
  OsmGuard guard;
  const std::uint64_t g1 = 0x100001, g2 = 0x100004;
  Head h1{"head01", "Hca1", g1, fabric.scratch_dir() + "/head01"};
  Head h2{"head02", "Hca2", g2, fabric.scratch_dir() + "/head02"};
  SmhadOptions slow;
  slow.poll_interval_ms = 1000;
  write_smhad_config(h1, {{"head02", g2, 0}}, slow);
  write_config(h2, 10, {{"head01", g1, 0}});
  // The heads' failover sections differ (poll interval): config_drift naming
  // ha_policy is right here (doc/drift.md); any other alarm is not.
  auto no_alarm_but_drift = [](const json& j) {
    for (const auto& a : j["alarms"])
      if (a.value("kind", std::string()) != "config_drift") return false;
    return true;
  };
  start_smhad(fabric, h1, SMHA_SMHAD, {}, &guard);
  json s1, s2;
  if (!wait_status(fabric, h1, guard, local_master, 30s, &s1))
    FAIL("head01 not MASTER: " << s1.dump() << "\n" << smhad_log(fabric, h1));
  start_smhad(fabric, h2, SMHA_SMHAD, {}, &guard);
  REQUIRE(wait_status(fabric, h1, guard, [&](const json& j) {
    return local_master(j) && j["role"] == "master" && j["peers"][0]["state"] == "STANDBY" && no_alarm_but_drift(j);
  }, 40s, &s1));
  REQUIRE(wait_status(fabric, h2, guard, [](const json& j) { return j["role"] == "standby"; }, 20s, &s2));
  // Past head02's arrival: head01's OpenSM sweeps when a new SM appears, and a
  // SIGHUP landing in a sweep is absorbed (the engine signals again a round
  // later, here a second): three quiet rounds with head02 STANDBY first.
  const auto rounds0 = s1["rounds"].get<std::uint64_t>();
  REQUIRE(wait_status(fabric, h1, guard, [&](const json& j) {
    return j["rounds"].get<std::uint64_t>() >= rounds0 + 3 && j["peers"][0]["state"] == "STANDBY" &&
           no_alarm_but_drift(j);
  }, 20s, &s1));

  {
    std::ofstream log(h1.opensm_log(), std::ios::app);
    log << "Dec 04 04:44:41 205341 [D2BBD6C0] 0x80 -> Entering STANDBY state\n"
        << "Dec 04 04:44:41 305341 [D2BBD6C0] 0x80 -> Entering MASTER state\n";
    REQUIRE(log.good());
  }
  const auto ho = fabric.run("Hca4", {SMHA_SMCTL, "handover", "--json", "--to", "head02", "--socket", h1.socket()}, 30s);
  INFO("handover: " << ho.out << ho.err << "\nhead01 smhad:\n" << smhad_log(fabric, h1));
  CHECK(ho.exit_code == 0);
  const json hj = json::parse(ho.out);
  CHECK(hj["data"]["outcome"] == "done");
  // The lines are on record, before the request.
  auto ev = smhad_events(h1, 200);
  REQUIRE(ev);
  std::uint64_t logged = 0, requested = 0;
  for (const auto& e : *ev) {
    const std::string evidence = e.value("evidence", "");
    if (e["kind"] == "opensm_state" && evidence.find("04:44:41 305341") != std::string::npos) logged = e["seq"];
    if (e["kind"] == "handover_started" && requested == 0) requested = e["seq"];
  }
  CHECK(logged != 0);
  CHECK(logged < requested);

  fabric.stop_process(h1.pidx, SIGTERM);
  fabric.stop_process(h2.pidx, SIGTERM);
}

// Issue 14 item 6: the peer's LID changes while both heads run. Both OpenSMs
// run with LMC 1, so the master's sweep gives every port two LIDs (base and
// base + 1) and programs the switches for both. ibsim's `Baselid` then moves
// head01's port to base + 1 alone (LMC 0): packets for the old LID still reach
// the port and are dropped there, the new LID is routed. head02's smhad sees
// its peer's LID silent while the DR path answers, re-resolves it (event
// peer_route with the new LID) within a few rounds, and nobody takes over.
TEST_CASE("GUID-only: the master's LID changes while both heads run: re-resolved, no takeover",
          "[ibsim][smhad][discovery]") {
  IbsimFabric fabric(topology_path("two-switch-4hca.net"));
  OsmGuard guard;
  const auto hca1 = fabric.node_port("Hca1");
  const auto hca2 = fabric.node_port("Hca2");
  REQUIRE(hca1);
  REQUIRE(hca2);
  Head h1{"head01", "Hca1", hca1->port_guid, fabric.scratch_dir() + "/head01"};
  Head h2{"head02", "Hca2", hca2->port_guid, fabric.scratch_dir() + "/head02"};
  const std::string lmc = "  extra:\n    lmc: 1\n";
  write_config(h1, 10, {{"head02", hca2->port_guid, 0}}, {}, lmc);
  write_config(h2, 10, {{"head01", hca1->port_guid, 0}}, {}, lmc);
  start_smhad(fabric, h1, SMHA_SMHAD, {}, &guard);
  json s1, s2;
  if (!wait_status(fabric, h1, guard, local_master, 30s, &s1))
    FAIL("head01 not MASTER: " << s1.dump() << "\n" << smhad_log(fabric, h1));
  start_smhad(fabric, h2, SMHA_SMHAD, {}, &guard);
  const int old_lid = assigned_lid(fabric, "Hca1");
  REQUIRE(old_lid % 2 == 0);  // LMC 1: base LIDs are even
  if (!wait_status(fabric, h2, guard, [&](const json& j) {
        return j["local"]["state"] == "STANDBY" && j["peers"][0]["state"] == "MASTER" &&
               j["peers"][0]["lid"] == old_lid && j["peers"][0]["last_poll_answered"] == true;
      }, 30s, &s2))
    FAIL("head02 not STANDBY polling head01 at LID " << old_lid << ": " << s2.dump() << "\n" << smhad_log(fabric, h2));
  // A few rounds of both heads first: head02 knows head01 as a live MASTER.
  const auto rounds0 = s2["rounds"].get<std::uint64_t>();
  REQUIRE(wait_status(fabric, h2, guard, [&](const json& j) { return j["rounds"].get<std::uint64_t>() >= rounds0 + 5; },
                      10s, &s2));
  std::uint64_t mark1 = 0, mark2 = 0;
  if (auto ev = smhad_events(h1, 1); ev && !ev->empty()) mark1 = ev->back()["seq"].get<std::uint64_t>();
  if (auto ev = smhad_events(h2, 1); ev && !ev->empty()) mark2 = ev->back()["seq"].get<std::uint64_t>();

  // head01's port moves to LID old + 1.
  const int new_lid = old_lid + 1;
  const auto t0 = std::chrono::steady_clock::now();
  const auto rounds_before = smhad_status(h2).value_or(json{{"rounds", 0}})["rounds"].get<std::uint64_t>();
  fabric.console("Baselid \"Hca1\"[1] " + std::to_string(new_lid) + " 0");
  // The fabric really moved it: a third node reaches head01's SM at the new
  // LID and not at the old one.
  CHECK(query_sm(fabric, "Hca3", new_lid, 5s).guid == hca1->port_guid);
  CHECK(query_sm(fabric, "Hca3", old_lid, 1s).state == -1);

  if (!wait_status(fabric, h2, guard, [&](const json& j) {
        return j["peers"][0]["lid"] == new_lid && j["peers"][0]["route"] == "resolved" &&
               j["peers"][0]["last_poll_answered"] == true;
      }, 10s, &s2))
    FAIL("head02 did not re-resolve head01 at LID " << new_lid << ": " << s2.dump() << "\n" << smhad_log(fabric, h2));
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
  const auto rounds = s2["rounds"].get<std::uint64_t>() - rounds_before;
  std::cout << "ibsim GUID-only: head01 moved from LID " << old_lid << " to " << new_lid
            << ", head02 polls it there after " << ms.count() << " ms (" << rounds << " rounds)" << std::endl;
  CHECK(rounds <= 10);
  auto ev2 = smhad_events(h2, 500);
  REQUIRE(ev2);
  bool route_event = false;
  for (const auto& e : *ev2)
    if (e["seq"].get<std::uint64_t>() > mark2 && e["kind"] == "peer_route" &&
        e["evidence"].get<std::string>().rfind("lid " + std::to_string(new_lid) + ",", 0) == 0)
      route_event = true;
  INFO("head02 events: " << ev2->dump());
  CHECK(route_event);

  // No takeover meanwhile, nor in the rounds after: head01 MASTER, head02
  // STANDBY, as seen by both smhad and from a third node.
  const auto r1 = s2["rounds"].get<std::uint64_t>();
  REQUIRE(wait_status(fabric, h2, guard, [&](const json& j) { return j["rounds"].get<std::uint64_t>() >= r1 + 20; },
                      20s, &s2));
  CHECK(s2["local"]["state"] == "STANDBY");
  CHECK(s2["peers"][0]["state"] == "MASTER");
  REQUIRE(wait_status(fabric, h1, guard, local_master, 5s, &s1));
  CHECK(query_sm(fabric, "Hca3", new_lid, 5s).state == 3);
  CHECK(query_sm(fabric, "Hca3", assigned_lid(fabric, "Hca2"), 5s).state == 2);
  for (const auto& [h, mark] : {std::pair{&h1, mark1}, std::pair{&h2, mark2}}) {
    auto ev = smhad_events(*h, 500);
    REQUIRE(ev);
    INFO(h->name << " events: " << ev->dump());
    for (const auto& e : *ev) {
      if (e["seq"].get<std::uint64_t>() <= mark) continue;
      for (const char* bad : {"takeover_started", "takeover_done", "handover_started", "split_brain_yield"})
        CHECK(e["kind"] != bad);
      CHECK_FALSE((e["kind"] == "alarm" && e["reason"] == "two_masters"));
    }
  }
  fabric.stop_process(h1.pidx, SIGTERM);
  fabric.stop_process(h2.pidx, SIGTERM);
}

TEST_CASE("Config drift: two smhad register their ServiceRecords with OpenSM's SA, another partitions "
          "file raises config_drift on both, a reload with the same file clears it",
          "[ibsim][smhad][drift]") {
  // doc/drift.md: each head registers its digests with the master's SA and
  // reads the other's record by ServiceGID and name, through real OpenSM.
  IbsimFabric fabric(topology_path("two-switch-4hca.net"));
  OsmGuard guard;
  const std::uint64_t g1 = 0x100001, g2 = 0x100004;  // ibsim's Hca1 and Hca2 port GUIDs
  Head h1{"head01", "Hca1", g1, fabric.scratch_dir() + "/head01"};
  Head h2{"head02", "Hca2", g2, fabric.scratch_dir() + "/head02"};
  const std::string same = "Default=0x7fff, ipoib : ALL=full;\n";
  std::string extra[2];
  for (Head* h : {&h1, &h2}) {
    std::filesystem::create_directories(h->dir);
    write_text(h->dir + "/partitions.conf", same);
    extra[h == &h1 ? 0 : 1] = "  extra:\n    partition_config_file: " + h->dir + "/partitions.conf\n";
  }
  // head02's file differs (another partition).
  write_text(h2.dir + "/partitions.conf", same + "storage=0x0002 : ALL=full;\n");
  write_config(h1, 10, {{h2.name, h2.guid, 0}}, {}, extra[0]);
  write_config(h2, 10, {{h1.name, h1.guid, 0}}, {}, extra[1]);
  start_smhad(fabric, h1, SMHA_SMHAD);
  json s1, s2;
  if (!wait_status(fabric, h1, guard, local_master, 30s, &s1))
    FAIL("head01 not MASTER: " << s1.dump() << "\n" << smhad_log(fabric, h1));
  start_smhad(fabric, h2, SMHA_SMHAD);

  auto drift_state = [](const json& j) {
    const auto& d = j.value("drift", json::object());
    const auto peers = d.value("peers", json::array());
    return peers.empty() ? std::string() : peers[0].value("state", std::string());
  };
  std::string detail;
  for (Head* h : {&h1, &h2}) {
    json s;
    if (!wait_status(fabric, *h, guard, [&](const json& j) { return has_alarm(j, "config_drift", &detail); },
                     60s, &s))
      FAIL(h->name << ": no config_drift: " << s.dump() << "\n" << smhad_log(fabric, *h));
    INFO(s.dump());
    CHECK(detail.find("partitions differ") != std::string::npos);
    CHECK(detail.find("opensm_conf") == std::string::npos);  // GUID, priority and paths are per head
    CHECK(drift_state(s) == "drift");
    CHECK(s["drift"]["peers"][0]["differing"] == json::array({"partitions"}));
    CHECK(s["drift"]["sa_lid"].is_number());
    CHECK(s["drift"]["rejected"]["foreign"] == 0);
    CHECK(s["drift"]["own"]["partitions"] != s["drift"]["peers"][0]["digests"]["partitions"]);
    CHECK(s["drift"]["own"]["opensm_conf"] == s["drift"]["peers"][0]["digests"]["opensm_conf"]);
  }
  // Both heads run one OpenSM master throughout: drift is no reason to fail over.
  CHECK(query_sm(fabric, "Hca3").guid == g1);

  // head02 gets the same file and reloads: both clear.
  write_text(h2.dir + "/partitions.conf", same);
  {
    auto c = control::ControlClient::connect(h2.socket());
    REQUIRE(c);
    auto r = c.value().call("reload", json::object(), 10s);
    REQUIRE(r);
    INFO(r.value().text);
    REQUIRE(r.value().is_ok());
  }
  for (Head* h : {&h1, &h2}) {
    json s;
    if (!wait_status(fabric, *h, guard, [&](const json& j) {
          return !has_alarm(j, "config_drift") && drift_state(j) == "match";
        }, 60s, &s))
      FAIL(h->name << ": config_drift not cleared: " << s.dump() << "\n" << smhad_log(fabric, *h));
  }
}

namespace {

// What one LID-continuity drill saw (doc/lid-continuity.md).
struct LidDrill {
  bool continuity = false;
  std::string first, second;         // the nodes in the order they came back
  int first_before = 0, first_after = 0;
  int second_before = 0, second_after = 0;
  std::uint64_t file_entries = 0;    // head02's guid2lid before the takeover (continuity on)
};

std::string read_text(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string guid2lid_line(std::uint64_t guid, int lid) {
  char b[64];
  std::snprintf(b, sizeof b, "0x%016llx 0x%04x 0x%04x\n\n", static_cast<unsigned long long>(guid), lid, lid);
  return b;
}

// Two GUID-only heads, head01 MASTER; Hca3 and Hca4 reset (ibsim `Clear`: LID
// 0, link down, as two rebooting compute nodes); head01's smhad and OpenSM
// killed; head02 takes over; the node with the higher LID comes back first
// (`ReLink`), then the other. With continuity off a new master gives a port
// that comes back with LID 0 the lowest free LID.
LidDrill lid_drill(bool continuity) {
  LidDrill d;
  d.continuity = continuity;
  IbsimFabric fabric(topology_path("two-switch-4hca.net"));
  OsmGuard guard;
  const std::uint64_t g1 = 0x100001, g2 = 0x100004;
  Head h1{"head01", "Hca1", g1, fabric.scratch_dir() + "/head01"};
  Head h2{"head02", "Hca2", g2, fabric.scratch_dir() + "/head02"};
  const std::string opensm_extra = continuity ? "" : "  lid_continuity: false\n";
  write_config(h1, 10, {{h2.name, h2.guid, 0}}, {}, opensm_extra);
  write_config(h2, 10, {{h1.name, h1.guid, 0}}, {}, opensm_extra);
  json s1, s2;
  start_smhad(fabric, h1, SMHA_SMHAD);
  if (!wait_status(fabric, h1, guard, local_master, 30s, &s1))
    FAIL("head01 not MASTER: " << s1.dump() << "\n" << smhad_log(fabric, h1));
  REQUIRE(wait_for([&] {
    return fabric.node_port("Hca3").value_or(NodePort{}).lid != 0 &&
           fabric.node_port("Hca4").value_or(NodePort{}).lid != 0;
  }, 20s));
  const NodePort p3 = *fabric.node_port("Hca3"), p4 = *fabric.node_port("Hca4");
  start_smhad(fabric, h2, SMHA_SMHAD);
  if (!wait_status(fabric, h2, guard, [](const json& j) {
        return j["local"]["state"] == "STANDBY" && j["peers"][0]["state"] == "MASTER";
      }, 30s, &s2))
    FAIL("head02 not STANDBY seeing head01 MASTER: " << s2.dump() << "\n" << smhad_log(fabric, h2));
  const std::string file = h2.dir + "/cache/guid2lid";
  if (continuity) {
    // head02's first census walk (3 s after start) wrote the fabric's LIDs.
    if (!wait_status(fabric, h2, guard, [&](const json& j) {
          const auto& l = j["lid_continuity"];
          return l.value("enabled", false) && l.value("writes", 0) >= 1 &&
                 read_text(file).find(guid2lid_line(p3.port_guid, p3.lid)) != std::string::npos &&
                 read_text(file).find(guid2lid_line(p4.port_guid, p4.lid)) != std::string::npos;
        }, 30s, &s2))
      FAIL("head02 wrote no guid2lid with Hca3 and Hca4: " << s2["lid_continuity"].dump() << "\n"
                                                            << read_text(file));
    d.file_entries = s2["lid_continuity"].value("entries", 0);
    CHECK(s2["lid_continuity"]["state"] == "writing");
    CHECK(s2["lid_continuity"]["rejected"]["bad_lid"] == 0);
    CHECK(s2["lid_continuity"]["rejected"]["duplicate_lid"] == 0);
    CHECK(s2["lid_continuity"]["rejected"]["conflict"] == 0);
    // head01 (MASTER) does not write: its OpenSM writes its own.
    REQUIRE(wait_status(fabric, h1, guard, [](const json& j) {
      return j["lid_continuity"].value("state", std::string()).rfind("paused: our OpenSM is MASTER", 0) == 0;
    }, 15s, &s1));
    CHECK(s1["lid_continuity"]["writes"] == 0);
    // head01's guid2lid, written by its MASTER OpenSM (osm_db_store), holds
    // the same records as head02's, written by smhad from the fabric: the
    // same format byte for byte (OpenSM lists them in hash order).
    auto records = [](const std::string& text) {
      std::set<std::string> r;
      for (std::size_t at = 0, end; (end = text.find("\n\n", at)) != std::string::npos; at = end + 2)
        r.insert(text.substr(at, end + 2 - at));
      return r;
    };
    const std::string osm_file = h1.dir + "/cache/guid2lid";
    REQUIRE(wait_for([&] { return records(read_text(osm_file)).size() == d.file_entries; }, 15s));
    CHECK(records(read_text(osm_file)) == records(read_text(file)));
    CHECK(read_text(file).size() == read_text(osm_file).size());
  } else {
    CHECK(s2["lid_continuity"]["enabled"] == false);
    CHECK(s2["lid_continuity"]["honor_guid2lid_file"] == false);
  }
  // Both compute nodes reset while head01 is master.
  fabric.console("Clear \"Hca3\"");
  fabric.console("Clear \"Hca4\"");
  REQUIRE(wait_for([&] {
    return fabric.node_port("Hca3").value_or(NodePort{1, 1, 0}).lid == 0 &&
           fabric.node_port("Hca4").value_or(NodePort{1, 1, 0}).lid == 0;
  }, 10s));
  // head01's smhad and OpenSM killed; head02 takes over.
  REQUIRE(wait_status(fabric, h1, guard, local_master, 10s, &s1));
  const int victim = s1["opensm"]["pid"];
  const std::size_t log_before = std::filesystem::file_size(h2.opensm_log());
  const int smhad1 = fabric.process_pid(h1.pidx);
  fabric.stop_process(h1.pidx, SIGKILL);
  REQUIRE(::kill(victim, SIGKILL) == 0);
  REQUIRE(wait_for([&] { return !pid_running(victim); }, 5s));
  free_ibsim_slot(fabric, victim);
  free_ibsim_slot(fabric, smhad1);
  if (!wait_status(fabric, h2, guard, local_master, 30s, &s2))
    FAIL("head02 did not take over: " << s2.dump() << "\n" << smhad_log(fabric, h2));
  REQUIRE(wait_for([&] { return read_text(h2.opensm_log()).find("SUBNET UP", log_before) != std::string::npos; },
                   30s));
  // The node with the higher LID first, then the other.
  const bool three_first = p3.lid > p4.lid;
  d.first = three_first ? "Hca3" : "Hca4";
  d.second = three_first ? "Hca4" : "Hca3";
  d.first_before = three_first ? p3.lid : p4.lid;
  d.second_before = three_first ? p4.lid : p3.lid;
  fabric.console("ReLink \"" + d.first + "\"");
  REQUIRE(wait_for([&] { return fabric.node_port(d.first).value_or(NodePort{}).lid != 0; }, 30s));
  d.first_after = fabric.node_port(d.first)->lid;
  fabric.console("ReLink \"" + d.second + "\"");
  REQUIRE(wait_for([&] { return fabric.node_port(d.second).value_or(NodePort{}).lid != 0; }, 30s));
  d.second_after = fabric.node_port(d.second)->lid;
  fabric.stop_process(h2.pidx, SIGTERM);
  return d;
}

}  // namespace

TEST_CASE("LID continuity: two compute nodes reset during a takeover get their LIDs back, without it they "
          "swap", "[ibsim][smhad][drill][lidcont]") {
  const LidDrill on = lid_drill(true);
  const LidDrill off = lid_drill(false);
  std::cout << "LID continuity drill (two-switch-4hca, Hca3 and Hca4 reset, head01 killed, head02 takes over,\n"
               "higher LID relinked first):\n"
            << "| lid_continuity | node | LID before | LID after | kept |\n|---|---|---|---|---|\n";
  for (const auto* d : {&on, &off}) {
    for (int k = 0; k < 2; ++k) {
      const std::string& node = k == 0 ? d->first : d->second;
      const int before = k == 0 ? d->first_before : d->second_before;
      const int after = k == 0 ? d->first_after : d->second_after;
      std::cout << "| " << (d->continuity ? "true" : "false") << " | " << node << " | " << before << " | "
                << after << " | " << (before == after ? "yes" : "NO") << " |\n";
    }
  }
  std::cout << "head02's guid2lid before the takeover: " << on.file_entries << " entries" << std::endl;
  CHECK(on.first_after == on.first_before);
  CHECK(on.second_after == on.second_before);
  // Without the file: the first back gets the lowest free LID (the other's).
  CHECK(off.first_after == off.second_before);
  CHECK(off.second_after == off.first_before);
}

TEST_CASE("LID continuity: a reload turns it on, OpenSM gets honor_guid2lid_file TRUE by SIGHUP, a master "
          "writes no guid2lid", "[ibsim][smhad][lidcont]") {
  IbsimFabric fabric(topology_path("two-switch-4hca.net"));
  OsmGuard guard;
  Head h{"head01", "Hca1", 0x100001, fabric.scratch_dir() + "/head01"};
  write_config(h, 10, {{"head02", 0x100004, 0}}, {}, "  lid_continuity: false\n");
  start_smhad(fabric, h, SMHA_SMHAD);
  json s;
  if (!wait_status(fabric, h, guard, local_master, 30s, &s))
    FAIL("head01 not MASTER: " << s.dump() << "\n" << smhad_log(fabric, h));
  CHECK(s["lid_continuity"]["enabled"] == false);
  CHECK(read_text(h.dir + "/opensm.conf").find("\nhonor_guid2lid_file FALSE\n") != std::string::npos);
  const int pid = s["opensm"]["pid"];
  write_config(h, 10, {{"head02", 0x100004, 0}});
  {
    auto c = control::ControlClient::connect(h.socket());
    REQUIRE(c);
    auto r = c.value().call("reload", json::object(), 10s);
    REQUIRE(r);
    INFO(r.value().text);
    REQUIRE(r.value().is_ok());
    CHECK(r.value().data["opensm_action"] != "restarted");
  }
  CHECK(read_text(h.dir + "/opensm.conf").find("\nhonor_guid2lid_file TRUE\n") != std::string::npos);
  // The census walk (3 s after start, then every 60 s) feeds it; a master does not write.
  REQUIRE(wait_status(fabric, h, guard, [](const json& j) {
    return j["lid_continuity"].value("enabled", false) && j["lid_continuity"]["honor_guid2lid_file"] == true;
  }, 10s, &s));
  CHECK(s["opensm"]["pid"] == pid);
  CHECK(s["lid_continuity"]["writes"] == 0);
  CHECK(s["lid_continuity"]["path"] == h.dir + "/cache/guid2lid");
  fabric.stop_process(h.pidx, SIGTERM);
}
