// smhad end to end under ibsim: smhad (under umad2sim) starts the real OpenSM,
// restarts it after kill -9, is restarted itself without moving mastership,
// applies a priority-only reload by SIGHUP to OpenSM, and two smhad run the
// kill -9 failover drill. Every process is stopped by PID, also on failure:
// smhad by the fabric, the OpenSMs it started by OsmGuard (they outlive smhad by
// design).
#include <catch2/catch.hpp>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "smhad_harness.hpp"
#include "smha/control/client.hpp"

using namespace smha;
using namespace smha::testing;
using namespace std::chrono_literals;
using nlohmann::json;


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
  // The peer is configured but absent (no SM at that LID): it never answers.
  write_config(h, 12, {{"head02", hca2->port_guid, 0xbff0}});
  start_smhad(fabric, h, {}, &guard);

  // (a) OpenSM started by smhad reaches MASTER, seen from a third node.
  json s;
  if (!wait_status(fabric, h, guard, local_master, 30s, &s))
    FAIL("no local MASTER; status: " << s.dump() << "\nsmhad:\n" << smhad_log(fabric, h));
  const int first = s["opensm"]["pid"];
  MasterView m;
  REQUIRE(wait_for([&] { m = query_master(fabric, "Hca3"); return m.state == 3; }, 20s));
  CHECK(m.guid == hca1->port_guid);
  CHECK(s["role"] == "master");

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
  REQUIRE(running(second));
  start_smhad(fabric, h, {}, &guard);
  if (!wait_status(fabric, h, guard, [&](const json& j) { return local_master(j); }, 30s, &s))
    FAIL("no MASTER after the smhad restart; status: " << s.dump() << "\nsmhad:\n" << smhad_log(fabric, h));
  CHECK(s["opensm"]["pid"] == second);
  CHECK(s["opensm"]["adopted"] == true);
  CHECK(s["opensm"]["spawns"] == 0);
  m = query_master(fabric, "Hca3");
  CHECK(m.state == 3);
  CHECK(m.guid == hca1->port_guid);

  // (e) a reload that changes only the priority: OpenSM gets SIGHUP, same PID, and
  // the master's SMInfo shows the new rendered priority (sm_priority is the
  // engine's base: master renders base + 1, so 12 -> 13 before, 8 -> 9 after).
  const int before_prio = m.priority;
  CHECK(before_prio == 13);
  write_config(h, 8, {{"head02", hca2->port_guid, 0xbff0}});
  {
    auto c = control::ControlClient::connect(h.socket());
    REQUIRE(c);
    auto r = c.value().call("reload", json::object(), 10s);
    REQUIRE(r);
    INFO(r.value().text);
    REQUIRE(r.value().is_ok());
    CHECK(r.value().data["opensm_action"] != "restarted");
  }
  REQUIRE(wait_for([&] { m = query_master(fabric, "Hca3"); return m.priority == 9; }, 15s));
  CHECK(m.state == 3);
  CHECK(m.guid == hca1->port_guid);
  REQUIRE(wait_status(fabric, h, guard, local_master, 5s, &s));
  CHECK(s["opensm"]["pid"] == second);
  CHECK(running(second));

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
    CHECK(std::count(kinds.begin(), kinds.end(), "RELOAD") == 1);
    CHECK(std::count(kinds.begin(), kinds.end(), "HOLD") == 1);
    CHECK(std::count(kinds.begin(), kinds.end(), "RELEASE") == 1);
    r = c.value().call("status", json::object(), 5s);
    REQUIRE(r);
    CHECK(r.value().data["hold"]["held"] == false);
  }

  fabric.stop_process(h.pidx, SIGTERM);
  CHECK(fabric.process_exit_code(h.pidx) == 0);
}

TEST_CASE("HA drill: kill -9 of the master OpenSM under two smhad", "[ibsim][smhad][drill]") {
  IbsimFabric fabric(topology_path("two-switch-4hca.net"));
  OsmGuard guard;
  // LIDs: let a plain OpenSM assign them once; later masters keep a port's LID.
  const int boot = fabric.start_opensm("Hca3", 0);
  REQUIRE(fabric.wait_subnet_up(boot, 20s));
  const auto hca1 = fabric.node_port("Hca1");
  const auto hca2 = fabric.node_port("Hca2");
  REQUIRE(hca1);
  REQUIRE(hca2);
  REQUIRE(hca1->lid != 0);
  REQUIRE(hca2->lid != 0);
  fabric.stop_opensm(boot);

  Head h1{"head01", "Hca1", hca1->port_guid, fabric.scratch_dir() + "/head01"};
  Head h2{"head02", "Hca2", hca2->port_guid, fabric.scratch_dir() + "/head02"};
  // The same sm_priority on both heads, as the engine requires (sticky failback
  // rests on standby = base < master = base + 1); head01 starts first and masters.
  write_config(h1, 10, {{"head02", hca2->port_guid, hca2->lid}});
  write_config(h2, 10, {{"head01", hca1->port_guid, hca1->lid}});
  start_smhad(fabric, h1, {}, &guard);
  json s1, s2;
  if (!wait_status(fabric, h1, guard, local_master, 30s, &s1))
    FAIL("head01 not MASTER: " << s1.dump() << "\n" << smhad_log(fabric, h1));
  start_smhad(fabric, h2, {}, &guard);
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

  // (f) kill -9 of the master OpenSM: head02 becomes MASTER; time from the kill to
  // the first SMInfo from Hca3 that shows it.
  const int victim = s1["opensm"]["pid"];
  const auto t0 = std::chrono::steady_clock::now();
  REQUIRE(::kill(victim, SIGKILL) == 0);
  MasterView m;
  REQUIRE(wait_for([&] {
    m = query_master(fabric, "Hca3");
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
  m = query_master(fabric, "Hca3");
  CHECK(m.state == 3);
  CHECK(m.guid == hca2->port_guid);
  int masters = 0;
  for (const json* s : {&s1, &s2}) masters += (*s)["local"]["state"] == "MASTER";
  CHECK(masters == 1);

  fabric.stop_process(h1.pidx, SIGTERM);
  fabric.stop_process(h2.pidx, SIGTERM);
}
