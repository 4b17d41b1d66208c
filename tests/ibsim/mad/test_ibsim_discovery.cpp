// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// Directed-route discovery over UmadTransport against ibsim's SMAs
// (discover_probe): the lab topology with a real OpenSM (LIDs assigned), a
// port GUID that is nowhere, and the 324-HCA fat tree. The path and LID are
// checked against what infiniband-diags `smpquery` reads on the same fabric.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <string>

#include <nlohmann/json.hpp>

#include "ibsim_harness.hpp"

using namespace std::chrono_literals;
using smha::testing::IbsimFabric;
using smha::testing::topology_path;

namespace {

// One discovery from `node`. Each SubnGet waits up to 1 s for its answer (the
// daemon's default is 100 ms, and it simply searches again): a one-shot probe
// on a loaded test machine, where ibsim itself may be starved for a while
// (a 100 ms probe from Hca2 once missed head01 in 10 loaded runs).
nlohmann::json probe(IbsimFabric& f, const std::string& node, std::vector<std::string> args) {
  std::vector<std::string> argv{SMHA_DISCOVER_PROBE, "--timeout-ms", "1000"};
  argv.insert(argv.end(), args.begin(), args.end());
  auto r = f.run(node, argv, 60s);
  INFO("discover_probe: exit " << r.exit_code << "\n" << r.out << r.err);
  REQUIRE(r.exit_code == 0);
  return nlohmann::json::parse(r.out);
}

}  // namespace

TEST_CASE("ibsim: discovery finds head02 from head01 on the lab fabric, LID as smpquery reads it",
          "[ibsim][discovery]") {
  IbsimFabric f(topology_path("two-switch-4hca.net"));
  const int sm = f.start_opensm("Hca1", 15);
  REQUIRE(f.wait_subnet_up(sm, 20s));
  auto j = probe(f, "Hca1", {"0x100004"});
  INFO(j.dump());
  const auto& t = j["targets"]["0x0000000000100004"];
  REQUIRE_FALSE(t.contains("missing"));
  CHECK(t["path"] == "0,1,3,1");
  CHECK(t["description"] == "head02");
  CHECK(t["node_guid"] == "0x0000000000100003");
  CHECK(t["lid_known"] == true);
  auto diag = f.run("Hca1", {"smpquery", "-D", "portinfo", "0,1,3,1", "1"}, 15s);
  REQUIRE(diag.exit_code == 0);
  const auto at = diag.out.find("\nLid:");
  REQUIRE(at != std::string::npos);
  const auto dots = diag.out.find_first_not_of('.', at + 5);
  CHECK(t["lid"] == std::stoi(diag.out.substr(dots)));
  CHECK(t["lid"] != 0);
  CHECK(j["malformed"] == 0);
  // The same from head02's side (both peers of a two-head config).
  auto back = probe(f, "Hca2", {"0x100001"});
  INFO(back.dump());
  CHECK(back["targets"]["0x0000000000100001"]["path"] == "0,1,3,1");
  CHECK(back["targets"]["0x0000000000100001"]["description"] == "head01");

  // A GUID on no port: the whole fabric (6 nodes) searched once, bounded.
  auto none = probe(f, "Hca1", {"0xdead"});
  CHECK(none["targets"]["0x000000000000dead"]["status"].get<std::string>().rfind(
            "not found (searched 6 nodes, ", 0) == 0);
  CHECK(none["nodes"] == 6);
  f.stop_opensm(sm);
}

TEST_CASE("ibsim: discovery on the 324-HCA fat tree resolves head02 well within a second",
          "[ibsim][discovery]") {
  IbsimFabric f(topology_path("fattree-324.net"));
  auto j = probe(f, "Hca1", {"0x100003"});  // Hca2's port: 1-port HCAs, node GUID + 1
  INFO(j.dump());
  const auto& t = j["targets"]["0x0000000000100003"];
  REQUIRE_FALSE(t.contains("missing"));
  CHECK(t["description"] == "head02");
  const std::string path = t["path"].get<std::string>();
  CHECK(std::count(path.begin(), path.end(), ',') == 4);
  CHECK(j["wall_ms"].get<double>() < 1000.0);
  WARN("fattree-324: " << j.dump());
}
