// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// The simulated OpenSM answers SubnSet(SMInfo) as internals §2.2-2.3 describe.
#include <catch2/catch.hpp>

#include <csignal>

#include "smha/agent/process_opensm_control.hpp"
#include "smha/sim/fabric.hpp"

using namespace smha;
using namespace smha::sim;

namespace {

struct Two {
  Fabric f{42};
  NodeId a = f.add_node("a", Guid{0x10}, Lid{1});
  NodeId b = f.add_node("b", Guid{0x20}, Lid{2});
  NodeId obs = f.add_node("obs", Guid{0x90}, Lid{9});

  int spawn(NodeId n, int prio) {
    (void)f.fs(n).write_atomic("/c", "sm_priority " + std::to_string(prio) + "\n", 0644);
    auto pid = f.runner(n).spawn({"/usr/sbin/opensm", {"opensm", "-F", "/c"}, {}, {}},
                                 [](os::OutputStream, std::string_view) {},
                                 [](const os::ExitInfo&) {});
    REQUIRE(pid.ok());
    return *pid;
  }
  Result<mad::SmInfoReply> call(NodeId from, mad::Target t, std::optional<SmInfoModifier> mod,
                                SmState payload_state = SmState::Master) {
    std::optional<Result<mad::SmInfoReply>> out;
    SmInfo p;
    p.state = payload_state;
    if (mod)
      f.transport(from).set_sminfo(t, *mod, p, {}, [&](Result<mad::SmInfoReply> r) { out = r; });
    else
      f.transport(from).get_sminfo(t, {}, [&](Result<mad::SmInfoReply> r) { out = r; });
    f.queue().run_until(f.queue().now() + seconds(1), [&] { return out.has_value(); });
    REQUIRE(out);
    return *out;
  }
};

}  // namespace

TEST_CASE("Simulated OpenSM: election, DISCOVER, HANDOVER, rejections", "[sim][fabric]") {
  Two t;
  t.spawn(t.a, 10);
  t.f.queue().run_until(t.f.queue().now() + milliseconds(200));
  t.spawn(t.b, 10);
  t.f.queue().run_until(t.f.queue().now() + milliseconds(200));
  REQUIRE(t.f.sm(t.a)->state == SmState::Master);
  REQUIRE(t.f.sm(t.b)->state == SmState::Standby);

  // A master rejects DISCOVER/STANDBY/DISABLE with status 0x0700 and stays MASTER.
  for (auto mod : {SmInfoModifier::Discover, SmInfoModifier::Standby, SmInfoModifier::Disable}) {
    auto r = t.call(t.obs, Lid{1}, mod);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == mad::kErrMadStatus);
    CHECK(r.error().message.find("0x0700") != std::string::npos);
  }
  CHECK(t.f.sm(t.a)->state == SmState::Master);
  CHECK(t.f.sets_to_master() == 3);

  // Payload state must be MASTER.
  auto bad = t.call(t.obs, Lid{2}, SmInfoModifier::Discover, SmState::Standby);
  CHECK_FALSE(bad.ok());
  CHECK(t.f.sm(t.b)->state == SmState::Standby);

  // DISCOVER to the standby with a live master: back to STANDBY (~45 ms).
  auto d = t.call(t.b, DrPath{}, SmInfoModifier::Discover);
  REQUIRE(d.ok());
  CHECK(d->info.state == SmState::Standby);  // pre-transition payload
  t.f.queue().run_until(t.f.queue().now() + milliseconds(5));
  CHECK(t.f.sm(t.b)->state == SmState::Discovering);
  t.f.queue().run_until(t.f.queue().now() + milliseconds(60));
  CHECK(t.f.sm(t.b)->state == SmState::Standby);

  // Master killed; DISCOVER: MASTER ~90 ms later.
  t.f.signal_opensm(t.a, SIGKILL);
  REQUIRE(t.call(t.b, DrPath{}, SmInfoModifier::Discover).ok());
  t.f.queue().run_until(t.f.queue().now() + milliseconds(80));
  CHECK(t.f.sm(t.b)->state == SmState::Discovering);
  t.f.queue().run_until(t.f.queue().now() + milliseconds(20));
  CHECK(t.f.sm(t.b)->state == SmState::Master);
}

TEST_CASE("Simulated OpenSM: HANDOVER to a standby while the master lives, then OpenSM resolves",
          "[sim][fabric]") {
  Two t;
  t.spawn(t.a, 10);
  t.f.queue().run_until(t.f.queue().now() + milliseconds(200));
  t.spawn(t.b, 10);
  t.f.queue().run_until(t.f.queue().now() + milliseconds(200));
  REQUIRE(t.call(t.obs, Lid{2}, SmInfoModifier::Handover).ok());
  t.f.queue().run_until(t.f.queue().now() + milliseconds(1));
  CHECK(t.f.active_masters().size() == 2);  // instant MASTER, two masters
  // b (higher GUID) hands back to a at the end of its first master sweep (~25 ms).
  t.f.queue().run_until(t.f.queue().now() + milliseconds(30));
  CHECK(t.f.active_masters() == std::vector<NodeId>{t.a});
}

TEST_CASE("Simulated OpenSM: SIGHUP re-reads sm_priority; a raised standby preempts", "[sim][fabric]") {
  Two t;
  t.spawn(t.a, 10);
  t.f.queue().run_until(t.f.queue().now() + milliseconds(200));
  const int pb = t.spawn(t.b, 10);
  t.f.queue().run_until(t.f.queue().now() + milliseconds(200));
  (void)t.f.fs(t.b).write_atomic("/c", "sm_priority 12\n", 0644);
  REQUIRE(t.f.runner(t.b).kill(pb, SIGHUP).ok());
  t.f.queue().run_until(t.f.queue().now() + milliseconds(100));
  CHECK(t.f.sm(t.b)->priority == 12);
  CHECK(t.f.active_masters() == std::vector<NodeId>{t.b});
  CHECK(t.f.sm(t.a)->state == SmState::Standby);
}

TEST_CASE("Simulated OpenSM: SIGSTOP freezes answers; native polling takes over after its timeout",
          "[sim][fabric]") {
  Two t;
  t.spawn(t.a, 10);
  t.f.queue().run_until(t.f.queue().now() + milliseconds(200));
  t.spawn(t.b, 10);
  t.f.queue().run_until(t.f.queue().now() + milliseconds(200));
  t.f.signal_opensm(t.a, SIGSTOP);
  auto r = t.call(t.obs, Lid{1}, std::nullopt);
  CHECK_FALSE(r.ok());
  CHECK(r.error().code == mad::kErrTimeout);
  // Defaults 10000 ms x 4: (4 + 2) x 10 s after the last answered poll, at most.
  t.f.queue().run_until(t.f.queue().now() + seconds(45));
  CHECK(t.f.sm(t.b)->state == SmState::Standby);
  t.f.queue().run_until(t.f.queue().now() + seconds(16));
  CHECK(t.f.sm(t.b)->state == SmState::Master);
}

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
