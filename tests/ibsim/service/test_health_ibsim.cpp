// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// Fabric health on real OpenSM (doc/health.md): two smhad at their defaults
// on the lab's fabric, once as it is (every link 4X SDR) and once with Hca4's
// link trained at 1X (topologies/two-switch-4hca-degraded.net). What `smctl
// health` reports must agree with iblinkinfo run at Hca3 on the same fabric;
// the link_degraded alarm and the metrics follow. Error counters: set with
// ibsim's PerformanceSet, read by the MASTER's head only, and what it reports
// agrees with ibqueryerrors on the same fabric.
//
// Every process is stopped by PID, also on failure: smhad and ibsim by the
// fabric, the OpenSMs smhad started by OsmGuard.
#include <catch2/catch.hpp>

#include <csignal>
#include <functional>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "ibsim_harness.hpp"
#include "smhad_heads.hpp"

using namespace smha;
using namespace smha::testing;
using namespace std::chrono_literals;
using nlohmann::json;

namespace {

// head01 on Hca1 MASTER, head02 on Hca2 STANDBY, each naming the other by GUID.
void start_pair(IbsimFabric& fabric, OsmGuard& guard, SmhadHead& h1, SmhadHead& h2, const SmhadOptions& o = {}) {
  const auto hca1 = fabric.node_port("Hca1");
  const auto hca2 = fabric.node_port("Hca2");
  REQUIRE(hca1);
  REQUIRE(hca2);
  h1 = SmhadHead{"head01", "Hca1", hca1->port_guid, fabric.scratch_dir() + "/head01"};
  h2 = SmhadHead{"head02", "Hca2", hca2->port_guid, fabric.scratch_dir() + "/head02"};
  write_smhad_config(h1, {{h2.name, h2.guid, 0}}, o);
  write_smhad_config(h2, {{h1.name, h1.guid, 0}}, o);
  json s1, s2;
  const std::string failed = start_master_standby(fabric, guard, h1, h2, s1, s2, SMHA_SMHAD, true);
  if (!failed.empty()) FAIL(failed);
}

// The `health` reply once `pred` holds for it (bounded).
json health_when(const SmhadHead& h, const std::function<bool(const json&)>& pred, std::chrono::seconds timeout = 30s) {
  json health;
  const bool ok = wait_for([&] {
    auto r = smhad_call(h, "health", json::object());
    if (!r || !r->is_ok()) return false;
    health = r->data.at("health");
    return pred(health);
  }, timeout);
  INFO(h.name << ": " << health.dump());
  REQUIRE(ok);
  return health;
}

// The `health` reply once a census walk has been assessed.
json assessed_health(const SmhadHead& h) {
  return health_when(h, [](const json& health) { return health.value("assessed", false); });
}

}  // namespace

TEST_CASE("Fabric health, every link at 4X: smctl health finds no degraded link and agrees with iblinkinfo",
          "[ibsim][smhad][health]") {
  IbsimFabric fabric(topology_path("two-switch-4hca.net"));
  OsmGuard guard;
  SmhadHead h1, h2;
  start_pair(fabric, guard, h1, h2);
  for (const auto* h : {&h1, &h2}) {
    const json health = assessed_health(*h);
    INFO(h->name << ": " << health.dump());
    CHECK(health["links"] == 6);
    CHECK(health["links_by_kind"]["switch-ca"] == 4);
    CHECK(health["links_by_kind"]["switch-switch"] == 2);
    CHECK(health["degraded_total"] == 0);
    CHECK(health["unknown"] == 0);
  }
  CHECK(iblinkinfo_links(fabric, "Hca3", "1X").empty());
  CHECK(iblinkinfo_links(fabric, "Hca3", "4X").size() == 8);  // 4 CA links + 2 inter-switch links seen from both switches
  const auto st = smhad_status(h1);
  REQUIRE(st);
  for (const auto& a : (*st)["alarms"]) CHECK(a.value("kind", "") != "link_degraded");
}

TEST_CASE("Fabric health, Hca4 at 1X: both heads name the link, raise link_degraded, and agree with iblinkinfo",
          "[ibsim][smhad][health]") {
  IbsimFabric fabric(topology_path("two-switch-4hca-degraded.net"));
  OsmGuard guard;
  SmhadHead h1, h2;
  start_pair(fabric, guard, h1, h2);
  const auto hca4 = fabric.node_port("Hca4");
  REQUIRE(hca4);

  const auto narrow = iblinkinfo_links(fabric, "Hca3", "1X");
  REQUIRE(narrow.size() == 1);
  const auto [switch_guid, switch_port] = *narrow.begin();
  CHECK(switch_port == 2);

  for (const auto* h : {&h1, &h2}) {
    const json health = assessed_health(*h);
    INFO(h->name << ": " << health.dump());
    CHECK(health["links"] == 6);
    REQUIRE(health["degraded_total"] == 1);
    const auto& d = health["degraded"].at(0);
    CHECK(d["a"]["guid"] == hex_guid(switch_guid));
    CHECK(d["a"]["port"] == switch_port);
    CHECK(d["a"]["type"] == "switch");
    CHECK(d["a"]["node_description"] == "Switch2");
    CHECK(d["b"]["port"] == 1);
    CHECK(d["b"]["type"] == "CA");
    CHECK(d["b"]["node_description"] == "Hca4");
    CHECK(d["active"] == "1X SDR");
    CHECK(d["should"] == "4X SDR");
    CHECK(d["why"] == "below_tier");
    CHECK(d["detail"] == "3 of 4 switch-ca links run at 4X");
    CHECK(d["kind"] == "switch-ca");

    // The alarm names the link; the metrics count it and name it once.
    json st;
    REQUIRE(wait_for([&] {
      auto s = smhad_status(*h);
      if (!s) return false;
      st = *s;
      for (const auto& a : st["alarms"])
        if (a.value("kind", "") == "link_degraded") return true;
      return false;
    }, 10s));
    std::string detail;
    for (const auto& a : st["alarms"])
      if (a.value("kind", "") == "link_degraded") detail = a.value("detail", "");
    CHECK(detail.find("1 degraded link; worst: \"Switch2\" " + hex_guid(switch_guid) + " port 2 <-> \"Hca4\"") == 0);
    CHECK(detail.find("runs at 1X SDR, should run at 4X SDR") != std::string::npos);
    CHECK(st["health"]["degraded_total"] == 1);

    auto m = smhad_call(*h, "metrics", json::object());
    REQUIRE(m);
    const std::string text = m->data.value("text", "");
    CHECK(text.find("smha_fabric_links_degraded{kind=\"switch-ca\"} 1\n") != std::string::npos);
    CHECK(text.find("smha_fabric_links{kind=\"switch-ca\"} 4\n") != std::string::npos);
    CHECK(text.find("smha_alarm_active{alarm=\"link_degraded\"} 1\n") != std::string::npos);
    CHECK(text.find("smha_fabric_link_degraded_ratio{rank=\"1\",a=\"Switch2 " + hex_guid(switch_guid) +
                    " port 2\",b=\"Hca4 ") != std::string::npos);
  }
}

namespace {

// health.errors once `pred` holds for it (bounded).
json errors_when(const SmhadHead& h, const std::function<bool(const json&)>& pred) {
  return health_when(h, [&](const json& health) { return pred(health.at("errors")); }).at("errors");
}

}  // namespace

TEST_CASE("Error counters: the MASTER's head reads them, the standby does not, and they agree with ibqueryerrors",
          "[ibsim][smhad][health]") {
  IbsimFabric fabric(topology_path("two-switch-4hca.net"));
  OsmGuard guard;
  SmhadHead h1, h2;
  SmhadOptions o;
  o.extra = "health:\n  counter_start_after_s: 0\n  counter_reads_per_second: 50\n";
  // Old errors, there before smhad's first read: shown, not rising.
  fabric.console("PerformanceSet \"Hca4\"[1] PortCounters.LinkDownedCounter=3");
  start_pair(fabric, guard, h1, h2, o);

  // head01 (MASTER) has read every active port once at least: the lab's 4
  // CA ports and the switches' 8 cabled ones (12).
  json e1 = errors_when(h1, [](const json& e) {
    return e.value("state", "") == "reading" && e.value("read", 0) == 12 && e.value("passes", 0) >= 1;
  });
  CHECK(e1["ports"] == 12);
  CHECK(e1["with_errors"] == 1);
  CHECK(e1["rising"] == 0);
  CHECK(e1["unknown"] == 0);
  json e2 = errors_when(h2, [](const json& e) { return e.value("state", "") == "standby"; });
  CHECK(e2["reads"] == 0);

  // Symbol errors on Switch2's port to Hca4 (a dirty fibre), receive errors
  // on an inter-switch port, both beyond their thresholds (10).
  fabric.console("PerformanceSet \"Switch2\"[2] PortCounters.SymbolErrorCounter=25");
  fabric.console("PerformanceSet \"Switch1\"[3] PortCounters.PortRcvErrors=12");
  // (Each listed port named by its node's NodeDescription, read a moment later.)
  e1 = errors_when(h1, [](const json& e) {
    if (e.value("over_threshold", 0) != 2 || e.value("with_errors", 0) != 3) return false;
    for (const auto& p : e["listed"])
      if (!p["port"]["node_description"].is_string()) return false;
    return true;
  });
  CHECK(e1["rising"] == 2);
  CHECK(e1["failures"] == 0);
  CHECK(e1["wrong_port"] == 0);

  // What smhad lists with a non-zero counter is what ibqueryerrors prints.
  const CounterReport theirs = ibqueryerrors_ports(fabric, "Hca3");
  CounterReport ours;
  for (const auto& p : e1["listed"]) {
    auto& counters = ours[{p["port"].value("node_description", ""), p["port"].value("port", 0)}];
    for (const auto& [key, v] : p["counters"].items())
      if (v.get<std::uint64_t>() > 0) counters[e1["counter_names"][key].get<std::string>()] = v.get<std::uint64_t>();
  }
  CHECK(ours == theirs);
  CHECK(theirs.size() == 3);
  CHECK(theirs.at({"Switch2", 2}).at("SymbolErrorCounter") == 25);
  CHECK(theirs.at({"Hca4", 1}).at("LinkDownedCounter") == 3);

  // The worst first: over its threshold, rising since a moment ago.
  const auto& worst = e1["listed"].at(0);
  CHECK(worst["over_threshold"] == true);
  CHECK(worst["rise"]["symbol_errors"] == 25);
  CHECK(worst["port"]["node_description"] == "Switch2");
  const auto& old = e1["listed"].at(2);
  CHECK(old["port"]["node_description"] == "Hca4");
  CHECK(old["rise"]["link_downed"] == 0);
  CHECK(old["rising_for_s"].is_null());

  // link_errors on the reading head only; the metrics count and name.
  json st;
  REQUIRE(wait_for([&] {
    auto s = smhad_status(h1);
    if (!s) return false;
    st = *s;
    // (Refreshed once the port's node is named, at its next read.)
    for (const auto& a : st["alarms"])
      if (a.value("kind", "") == "link_errors" && a.value("detail", "").find("\"Switch2\"") != std::string::npos)
        return true;
    return false;
  }, 10s));
  std::string detail;
  for (const auto& a : st["alarms"])
    if (a.value("kind", "") == "link_errors") detail = a.value("detail", "");
  CHECK(detail.find("2 ports with error counters rising; worst: \"Switch2\" ") == 0);
  CHECK(detail.find("port 2: SymbolErrorCounter +25 within 1h") != std::string::npos);
  const auto st2 = smhad_status(h2);
  REQUIRE(st2);
  for (const auto& a : (*st2)["alarms"]) CHECK(a.value("kind", "") != "link_errors");
  auto m = smhad_call(h1, "metrics", json::object());
  REQUIRE(m);
  const std::string text = m->data.value("text", "");
  CHECK(text.find("smha_fabric_counters_reading 1\n") != std::string::npos);
  CHECK(text.find("smha_fabric_error_ports{state=\"over_threshold\"} 2\n") != std::string::npos);
  CHECK(text.find("smha_fabric_error_ports_rising{counter=\"symbol_errors\"} 1\n") != std::string::npos);
  CHECK(text.find("smha_alarm_active{alarm=\"link_errors\"} 1\n") != std::string::npos);
  CHECK(text.find("smha_fabric_port_error_rise{rank=\"1\",port=\"Switch2 ") != std::string::npos);

  // Cleared by ibqueryerrors -k: smhad counts the clear and keeps what rose.
  const auto cleared = fabric.run("Hca3", {"ibqueryerrors", "-k"}, 60s);
  REQUIRE(cleared.exit_code <= 1);  // 1: it found (and cleared) errors
  e1 = errors_when(h1, [](const json& e) { return e.value("resets", 0) >= 3 && e.value("with_errors", 0) == 0; });
  CHECK(e1["over_threshold"] == 2);
  CHECK(ibqueryerrors_ports(fabric, "Hca3").empty());

  // kill -9 of head01's OpenSM: head02 takes over and reads from then on
  // (afresh: a rise is one between two of its own reads); head01 stops.
  json s1, s2;
  REQUIRE(wait_status(fabric, h1, guard, local_master, 10s, &s1));
  const int victim = s1["opensm"]["pid"];
  REQUIRE(::kill(victim, SIGKILL) == 0);
  if (!wait_status(fabric, h2, guard, local_master, 30s, &s2))
    FAIL("head02 did not take over: " << s2.dump() << "\n" << smhad_log(fabric, h2));
  free_ibsim_slot(fabric, victim);
  e2 = errors_when(h2, [](const json& e) { return e.value("state", "") == "reading" && e.value("read", 0) == 12; });
  CHECK(e2["rising"] == 0);
  fabric.console("PerformanceSet \"Hca2\"[1] PortCounters.LinkErrorRecoveryCounter=4");
  e2 = errors_when(h2, [](const json& e) { return e.value("over_threshold", 0) == 1; });
  CHECK(e2["listed"].at(0)["rise"]["link_error_recovery"] == 4);
  e1 = errors_when(h1, [](const json& e) { return e.value("state", "") == "standby"; });
  // While head02 makes two more passes, head01 (standby) sends no read.
  const auto reads = e1["reads"].get<std::uint64_t>();
  const auto passes = e2["passes"].get<std::uint64_t>();
  errors_when(h2, [&](const json& e) { return e.value("passes", std::uint64_t{0}) >= passes + 2; });
  e1 = errors_when(h1, [](const json&) { return true; });
  CHECK(e1["reads"] == reads);
}
