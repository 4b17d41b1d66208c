// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// The simulated fabric: links, directed routes, switches and the SMAs' answers.
// The simulated OpenSM has its own tests (test_opensm_model.cpp).
#include <catch2/catch.hpp>

#include <csignal>

#include "smha/sim/fabric.hpp"
#include "two_heads.hpp"

using namespace smha;
using namespace smha::sim;
using smha::sim::test::Two;

TEST_CASE("Simulated links: a MAD to a node whose link is down times out", "[sim][fabric]") {
  Two t;
  t.spawn(t.a, 10);
  t.f.queue().run_until(t.f.queue().now() + milliseconds(200));
  CHECK(t.call(t.obs, Lid{1}, std::nullopt).ok());
  CHECK(t.call(t.obs, t.f.dr_path(t.a), std::nullopt).ok());
  t.f.set_link(t.a, false);
  CHECK_FALSE(t.call(t.obs, Lid{1}, std::nullopt).ok());
  // DR hop 0 on the node itself does not need the link.
  CHECK(t.call(t.a, DrPath{}, std::nullopt).ok());
}

// A chain of switches (FabricParams::switches): directed routes go from switch
// to switch by ports 2 (onwards) and 1 (back), nodes hang on port i + 3 of
// their switch; a route through a CA or to a port of another switch ends
// nowhere (silence), switch ports show whether they are cabled.
TEST_CASE("Simulated chain of switches: DR routes, switch NodeInfo and PortInfo", "[sim][fabric]") {
  FabricParams p;
  p.switches = 3;
  Fabric f(5, p);
  const NodeId a = f.add_node("a", Guid{0x10}, Lid{1}, 0);
  const NodeId b = f.add_node("b", Guid{0x20}, Lid{2}, 2);
  const NodeId c = f.add_node("c", Guid{0x30}, Lid{3}, 1);
  CHECK(f.switch_of(b) == 2);
  CHECK(f.dr_path(a, b) == DrPath{{1, 2, 2, 4}});
  CHECK(f.dr_path(b, a) == DrPath{{1, 1, 1, 3}});
  CHECK(f.dr_path(b, c) == DrPath{{1, 1, 5}});
  CHECK(f.dr_path(a, a) == DrPath{{1, 3}});  // out to our switch and back
  auto node_info = [&](NodeId from, const DrPath& path) {
    std::optional<Result<mad::NodeInfoReply>> out;
    f.transport(from).get_node_info(path, {milliseconds(50), 0, 0}, [&](Result<mad::NodeInfoReply> r) { out = r; });
    f.queue().run_until(f.queue().now() + seconds(1), [&] { return out.has_value(); });
    REQUIRE(out);
    return *out;
  };
  auto port_info = [&](NodeId from, const DrPath& path, std::uint8_t port) {
    std::optional<Result<mad::PortInfoReply>> out;
    f.transport(from).get_port_info(path, port, {milliseconds(50), 0, 0},
                                    [&](Result<mad::PortInfoReply> r) { out = r; });
    f.queue().run_until(f.queue().now() + seconds(1), [&] { return out.has_value(); });
    REQUIRE(out);
    return *out;
  };
  // Each route to a node ends there; the route back from it too.
  for (auto [from, to] : {std::pair{a, b}, std::pair{b, a}, std::pair{b, c}, std::pair{c, a}}) {
    auto r = node_info(from, f.dr_path(from, to));
    REQUIRE(r.ok());
    CHECK(r->info.port_guid == f.guid(to));
  }
  // The middle switch, entered from switch 0 by its port 1.
  auto sw = node_info(a, DrPath{{1, 2}});
  REQUIRE(sw.ok());
  CHECK(sw->info.type == mad::NodeType::Switch);
  CHECK(sw->info.local_port == 1);
  CHECK(sw->info.num_ports == 5);  // 3 nodes + the two chain ports
  CHECK(sw->info.node_guid != node_info(a, DrPath{{1}})->info.node_guid);
  // Its ports: 1 and 2 cabled (both neighbours), c's port up, a's and b's
  // ports (on other switches) down; beyond the last port: refused.
  CHECK(port_info(a, DrPath{{1, 2}}, 1)->info.state == mad::PortState::Active);
  CHECK(port_info(a, DrPath{{1, 2}}, 2)->info.state == mad::PortState::Active);
  CHECK(port_info(a, DrPath{{1, 2}}, 5)->info.state == mad::PortState::Active);
  CHECK(port_info(a, DrPath{{1, 2}}, 3)->info.state == mad::PortState::Down);
  CHECK(port_info(a, DrPath{{1, 2}}, 4)->info.state == mad::PortState::Down);
  CHECK_FALSE(port_info(a, DrPath{{1, 2}}, 6).ok());
  // The ends of the chain: switch 0 has no port-1 neighbour.
  CHECK(port_info(a, DrPath{{1}}, 1)->info.state == mad::PortState::Down);
  // Nowhere: b's port asked on the wrong switch, past the chain's end, through a CA.
  CHECK_FALSE(node_info(a, DrPath{{1, 4}}).ok());
  CHECK_FALSE(node_info(a, DrPath{{1, 1}}).ok());
  CHECK_FALSE(node_info(a, DrPath{{1, 2, 5, 1}}).ok());
  // An answer from further along the chain takes longer (a delay per cable).
  auto far = node_info(a, DrPath{{1, 2, 2, 4}});
  auto near = node_info(a, DrPath{{1, 3}});
  REQUIRE(far.ok());
  REQUIRE(near.ok());
  CHECK(far->rtt > near->rtt);
}
