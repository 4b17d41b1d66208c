// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// Fabric health on real OpenSM (doc/health.md): two smhad at their defaults
// on the lab's fabric, once as it is (every link 4X SDR) and once with Hca4's
// link trained at 1X (topologies/two-switch-4hca-degraded.net). What `smctl
// health` reports must agree with iblinkinfo run at Hca3 on the same fabric;
// the link_degraded alarm and the metrics follow.
//
// Every process is stopped by PID, also on failure: smhad and ibsim by the
// fabric, the OpenSMs smhad started by OsmGuard.
#include <catch2/catch.hpp>

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
void start_pair(IbsimFabric& fabric, OsmGuard& guard, SmhadHead& h1, SmhadHead& h2) {
  const auto hca1 = fabric.node_port("Hca1");
  const auto hca2 = fabric.node_port("Hca2");
  REQUIRE(hca1);
  REQUIRE(hca2);
  h1 = SmhadHead{"head01", "Hca1", hca1->port_guid, fabric.scratch_dir() + "/head01"};
  h2 = SmhadHead{"head02", "Hca2", hca2->port_guid, fabric.scratch_dir() + "/head02"};
  write_smhad_config(h1, {{h2.name, h2.guid, 0}});
  write_smhad_config(h2, {{h1.name, h1.guid, 0}});
  json s1, s2;
  const std::string failed = start_master_standby(fabric, guard, h1, h2, s1, s2, SMHA_SMHAD, true);
  if (!failed.empty()) FAIL(failed);
}

// The `health` reply once a census walk has been assessed.
json assessed_health(const SmhadHead& h) {
  json health;
  const bool ok = wait_for([&] {
    auto r = smhad_call(h, "health", json::object());
    if (!r || !r->is_ok()) return false;
    health = r->data.at("health");
    return health.value("assessed", false);
  }, 30s);
  INFO(health.dump());
  REQUIRE(ok);
  return health;
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
