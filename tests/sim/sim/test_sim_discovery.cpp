// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// Directed-route discovery (lib/agent/discovery) on simulated multi-switch
// fabrics (lib/sim/topology): the lab's ibsim topology, fat trees of 324 and
// 1000 HCAs (topologies/*.net, the files ibsim runs), and chains that put the
// heads 1 to 4 switches apart.
#include <catch2/catch.hpp>

#include <csignal>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "smha/fabric/discovery.hpp"
#include "smha/mad/smp.hpp"
#include "smha/sim/cluster.hpp"
#include "smha/sim/fabric.hpp"
#include "smha/sim/topology.hpp"
#include "load_net.hpp"

using namespace smha;
using namespace smha::sim;
using fabric::Discovery;
using fabric::DiscoveryLimits;
using fabric::DiscoveryResult;

namespace {

using smha::sim::testing::load_net;

Guid port1(const Topology& t, const std::string& id) {
  auto n = t.find(id);
  REQUIRE(n);
  return t.node(*n).ports.at(1).guid;
}

struct Search {
  EventQueue q;
  const Topology& topo;
  TopologyTransport mad;
  Search(const Topology& t, const std::string& from, Duration hop = microseconds(1))
      : topo(t), mad(q, t, *t.find(from), 1, hop) {}
  DiscoveryResult run(std::vector<Guid> targets, DiscoveryLimits limits = {}) {
    Discovery d(q, mad, limits);
    std::optional<DiscoveryResult> out;
    d.start(std::move(targets), [&out](const DiscoveryResult& r) { out = r; });
    REQUIRE_FALSE(out);  // never from inside start()
    q.run_until(q.now() + seconds(600), [&out] { return out.has_value(); });
    REQUIRE(out);
    return *out;
  }
};

// k switches in a row (Sw1 port 2 -> Sw2 port 1, ...), head01 on Sw1 port 3,
// head02 on Swk port 4, a bystander HCA on every switch's port 5, and (k > 1)
// a second cable Sw1 port 6 <-> Sw2 port 6: a loop, so a search that did not
// remember visited nodes would go round it forever.
Topology chain(int k) {
  Topology t;
  std::vector<int> sw;
  for (int i = 1; i <= k; ++i) sw.push_back(t.add_switch("Sw" + std::to_string(i), 8));
  const int h1 = t.add_ca("Hca1", 1, "head01");
  const int h2 = t.add_ca("Hca2", 1, "head02");
  for (int i = 0; i + 1 < k; ++i) REQUIRE(t.link(sw[i], 2, sw[i + 1], 1).ok());
  REQUIRE(t.link(h1, 1, sw[0], 3).ok());
  REQUIRE(t.link(h2, 1, sw[k - 1], 4).ok());
  for (int i = 0; i < k; ++i) {
    const int b = t.add_ca("Node" + std::to_string(i), 1);
    REQUIRE(t.link(b, 1, sw[i], 5).ok());
  }
  if (k > 1) REQUIRE(t.link(sw[0], 6, sw[1], 6).ok());
  t.assign_lids();
  return t;
}

}  // namespace

TEST_CASE("Discovery on the lab topology finds head02 behind the second switch", "[discovery]") {
  auto t = load_net("two-switch-4hca.net");
  CHECK(t.switches() == 2);
  CHECK(t.cas() == 4);
  // GUIDs as ibsim gives them (tests/unit/mad/data/nodeinfo_dr_hca2.txt).
  CHECK(port1(t, "Hca1") == Guid{0x100001});
  CHECK(port1(t, "head02") == Guid{0x100004});
  Search s(t, "Hca1");
  auto r = s.run({Guid{0x100004}});
  REQUIRE(r.complete());
  const auto& p = r.found.at(Guid{0x100004});
  CHECK(to_string(p.path) == to_string(DrPath{{1, 3, 1}}));
  CHECK(p.node_guid == Guid{0x100003});
  CHECK(p.port_num == 1);
  CHECK(p.lid_known);
  CHECK(p.lid == t.node(*t.find("Hca2")).ports[1].lid);
  CHECK(p.description == "head02");
  CHECK(r.malformed == 0);
  CHECK(r.request_bound == false);
  CHECK(r.mads == s.mad.mads_sent());
  Search full(t, "Hca1");
  auto all = full.run({Guid{0xdead}});
  WARN("two-switch-4hca.net: found head02 with " << r.requests << " requests (" << r.mads
       << " MADs); full search " << all.requests << " requests, " << all.nodes << " nodes, "
       << all.ports << " ports");
}

TEST_CASE("Discovery: heads 1 to 4 switches apart, with a loop in the fabric", "[discovery]") {
  for (int k = 1; k <= 4; ++k) {
    INFO(k << " switches");
    auto t = chain(k);
    Search s(t, "Hca1");
    const Guid g = port1(t, "Hca2");
    auto r = s.run({g});
    REQUIRE(r.complete());
    const auto& p = r.found.at(g);
    CHECK(p.path.hops.size() == static_cast<std::size_t>(k + 1));
    CHECK(p.description == "head02");
    CHECK(p.lid == t.node(*t.find("Hca2")).ports[1].lid);
    // The path really leads there.
    auto end = t.walk(*t.find("Hca1"), 1, p.path);
    REQUIRE(end);
    CHECK(end->node == *t.find("Hca2"));
  }
}

TEST_CASE("Discovery: a port GUID on no port searches everything once and says how much",
          "[discovery]") {
  auto t = chain(4);
  Search s(t, "Hca1");
  auto r = s.run({Guid{0xdead}});
  CHECK_FALSE(r.complete());
  REQUIRE(r.missing.size() == 1);
  CHECK(r.missing[0] == Guid{0xdead});
  CHECK(r.nodes == t.size());           // every node, each expanded once
  CHECK(r.revisits >= 1);               // the loop brought one back
  CHECK(fabric::not_found_text(r) ==
        "not found (searched " + std::to_string(r.nodes) + " nodes, " + std::to_string(r.ports) + " ports)");
  CHECK_FALSE(r.hop_bound);
  CHECK_FALSE(r.request_bound);
}

TEST_CASE("Discovery is bounded in hops and in requests", "[discovery]") {
  auto t = chain(4);
  const Guid g = port1(t, "Hca2");
  {
    Search s(t, "Hca1");
    DiscoveryLimits l;
    l.max_hops = 3;  // head02 is 5 hops away
    auto r = s.run({g}, l);
    CHECK_FALSE(r.complete());
    CHECK(r.hop_bound);
    for (auto& [guid, p] : r.found) CHECK(p.path.hops.size() <= 3);
  }
  {
    Search s(t, "Hca1");
    DiscoveryLimits l;
    l.max_requests = 10;
    auto r = s.run({g}, l);
    CHECK_FALSE(r.complete());
    CHECK(r.request_bound);
    CHECK(r.requests == 10);
    CHECK(s.mad.mads_sent() <= 10 * 2);  // 1 retry each at most
  }
  // max_hops above the DR limit is clamped to 63.
  EventQueue q;
  TopologyTransport m(q, t, 0, 1);
  Discovery d(q, m, DiscoveryLimits{1000, 10, 1, {}});
  CHECK(d.limits().max_hops == 63);
}

TEST_CASE("Discovery: a malformed answer is counted and skipped, a dead end times out",
          "[discovery]") {
  auto t = load_net("two-switch-4hca.net");
  Search s(t, "Hca1");
  s.mad.corrupt(DrPath{{1, 3}});  // Switch2 by the first inter-switch link answers garbage
  auto r = s.run({Guid{0x100004}});
  REQUIRE(r.complete());
  CHECK(r.malformed == 1);
  // Found through the second link instead.
  CHECK(to_string(r.found.at(Guid{0x100004}).path) == to_string(DrPath{{1, 5, 1}}));

  // A cable pulled while PortInfo said it was up: the NodeInfo times out.
  auto t2 = load_net("two-switch-4hca.net");
  t2.unlink(*t2.find("Hca2"), 1);
  Search s2(t2, "Hca1");
  auto r2 = s2.run({Guid{0x100004}});
  CHECK_FALSE(r2.complete());
  CHECK(fabric::not_found_text(r2).find("not found (searched 5 nodes") == 0);
}

TEST_CASE("Discovery at 324 and 1000 HCAs: both heads' peers resolved, early stop", "[discovery]") {
  for (const char* file : {"fattree-324.net", "fattree-1000.net"}) {
    INFO(file);
    auto t = load_net(file);
    const Guid g = port1(t, "Hca2");
    Search s(t, "Hca1", microseconds(1));
    DiscoveryLimits l;
    l.request = mad::RequestOptions{milliseconds(100), 1, 0};
    auto r = s.run({g}, l);
    REQUIRE(r.complete());
    CHECK(r.found.at(g).path.hops.size() == 4);  // leaf, spine, leaf, HCA
    CHECK(r.found.at(g).description == "head02");
    // Early stop: far fewer requests than a full search.
    Search full(t, "Hca1");
    auto all = full.run({Guid{0xdead}}, l);
    CHECK(all.nodes == t.size());
    CHECK(r.requests < all.requests);
    WARN(file << ": found head02 with " << r.requests << " requests (" << r.mads << " MADs) in "
              << to_ms(r.elapsed) << " ms sim time; full search " << all.requests << " requests, "
              << all.nodes << " nodes, " << all.ports << " ports, " << to_ms(all.elapsed) << " ms");
  }
}

TEST_CASE("The one-switch Fabric answers NodeInfo and NodeDescription, so discovery runs there",
          "[discovery]") {
  Fabric f(7);
  const NodeId a = f.add_node("head01", Guid{0x10}, Lid{1});
  f.add_node("node2", Guid{0x20}, Lid{2});
  const NodeId b = f.add_node("head02", Guid{0x30}, Lid{3});
  Discovery d(f.queue(), f.transport(a));
  std::optional<DiscoveryResult> out;
  d.start({Guid{0x30}}, [&out](const DiscoveryResult& r) { out = r; });
  f.queue().run_until(f.queue().now() + seconds(5), [&out] { return out.has_value(); });
  REQUIRE(out);
  REQUIRE(out->complete());
  const auto& p = out->found.at(Guid{0x30});
  CHECK(p.path == f.dr_path(b));
  CHECK(p.lid == Lid{3});
  CHECK(p.description == "head02");
  // The link down: not found, and bounded (the switch still answers).
  f.set_link(b, false);
  out.reset();
  d.start({Guid{0x30}}, [&out](const DiscoveryResult& r) { out = r; });
  f.queue().run_until(f.queue().now() + seconds(5), [&out] { return out.has_value(); });
  REQUIRE(out);
  CHECK_FALSE(out->complete());
  CHECK(out->nodes == 3);  // us, the switch, node2
}

namespace {

Cluster& settle_guid_only(Cluster& c) {
  c.start_all_smhad();
  REQUIRE(c.run_until([&] { return c.observed_masters().size() == 1; }, seconds(3)));
  c.run_for(seconds(2));
  REQUIRE(c.observed_masters().size() == 1);
  c.reset_dual_master_stats();
  return c;
}

int master_of(Cluster& c) {
  auto m = c.observed_masters();
  REQUIRE(m.size() == 1);
  return c.head_of(m[0]);
}

int takeovers(const Cluster& c) {
  int n = 0;
  for (int i = 0; i < c.heads(); ++i) n += c.count_events(i, "takeover_started");
  return n;
}

}  // namespace

TEST_CASE("GUID-only config in the sim: both peers resolved by discovery, failover works",
          "[discovery][sim]") {
  ClusterParams p;
  p.peer_addressing = PeerAddressing::GuidOnly;
  Cluster c(71, p);
  settle_guid_only(c);
  for (int i = 0; i < 2; ++i) {
    const auto& routes = c.agent(i)->routes();
    REQUIRE(routes.size() == 1);
    const NodeId other = c.head(1 - i);
    CHECK(routes[0].found);
    CHECK(routes[0].state == agent::RouteState::Resolved);
    CHECK(routes[0].status() == "resolved");
    CHECK(routes[0].lid == c.fabric().lid(other));
    REQUIRE(routes[0].dr);
    CHECK(*routes[0].dr == c.fabric().dr_path(other));
    CHECK(routes[0].description == c.fabric().name(other));
    // The event names the peer with its GUID and NodeDescription.
    int route_events = 0;
    for (const auto& r : c.records(i))
      if (r.what == "event" && r.kind == "peer_route") {
        ++route_events;
        CHECK(r.detail.find(c.fabric().name(other) + " (" + to_string(c.fabric().guid(other)) + ") \"" +
                            c.fabric().name(other) + "\": resolved") != std::string::npos);
      }
    CHECK(route_events >= 1);
  }
  const int m = master_of(c);
  const Guid old = c.fabric().guid(c.head(m));
  const auto fault = c.now();
  REQUIRE(c.fabric().signal_opensm(c.head(m), SIGKILL));
  REQUIRE(c.run_until([&] { return c.first_new_master_seen(fault, old).has_value(); }, seconds(5)));
  const double ms = to_ms(*c.first_new_master_seen(fault, old) - fault);
  std::printf("sim GUID-only: kill -9 of master OpenSM, new MASTER seen %.1f ms after the fault\n", ms);
  CHECK(ms < 600);
}

TEST_CASE("GUID-only: the master's LID changes while both run: re-resolved in a few rounds, no "
          "takeover", "[discovery][sim]") {
  ClusterParams p;
  p.peer_addressing = PeerAddressing::GuidOnly;
  Cluster c(73, p);
  settle_guid_only(c);
  const int m = master_of(c);
  const int s = 1 - m;
  const NodeId mn = c.head(m);
  const Lid moved{static_cast<std::uint16_t>(c.fabric().lid(mn).value + 100)};
  const auto before = c.agent(s)->discoveries();
  const auto t0 = c.now();
  c.fabric().set_lid(mn, moved);
  REQUIRE(c.run_until([&] { return c.agent(s)->routes()[0].lid == moved; }, seconds(2)));
  const auto rounds = (c.now() - t0) / p.poll_interval;
  std::printf("sim GUID-only: master moved to LID %u, re-resolved after %.1f ms (%lld rounds)\n",
              moved.value, to_ms(c.now() - t0), static_cast<long long>(rounds));
  CHECK(rounds <= 5);
  CHECK(c.agent(s)->discoveries() > before);
  c.run_for(seconds(10));
  CHECK(takeovers(c) == 0);
  CHECK(master_of(c) == m);
  CHECK(c.dual_master_total() == Duration{0});
}

TEST_CASE("GUID-only: a peer that is on no reachable port is 'not found (searched ...)'",
          "[discovery][sim]") {
  // head02's cable is out and its smhad never starts.
  ClusterParams p;
  p.peer_addressing = PeerAddressing::GuidOnly;
  Cluster c(79, p);
  c.fabric().set_link(c.head(1), false);  // head02 unreachable: not found
  c.start_smhad(0);
  c.run_for(seconds(3));
  const auto& r = c.agent(0)->routes()[0];
  CHECK_FALSE(r.found);
  CHECK(r.state == agent::RouteState::NotFound);
  CHECK(r.status().rfind("not found (searched ", 0) == 0);
}

TEST_CASE("Discovery: re-resolving with the last path as a hint costs a few MADs", "[discovery]") {
  auto t = load_net("fattree-1000.net");
  const Guid g = port1(t, "Hca2");
  Search first(t, "Hca1");
  auto r = first.run({g});
  REQUIRE(r.complete());
  const DrPath last = r.found.at(g).path;
  // Still there: confirmed through the hint.
  EventQueue q;
  TopologyTransport m(q, t, *t.find("Hca1"), 1);
  Discovery d(q, m);
  std::optional<DiscoveryResult> out;
  d.start({g}, [&out](const DiscoveryResult& x) { out = x; }, {last});
  q.run_until(q.now() + seconds(60), [&out] { return out.has_value(); });
  REQUIRE(out);
  REQUIRE(out->complete());
  CHECK(out->found.at(g).path == last);
  CHECK(out->requests <= 8);
  WARN("re-resolution through the hint: " << out->requests << " requests");
  // Moved (the hint leads elsewhere): the full search still finds it.
  auto t2 = load_net("fattree-1000.net");
  const int leaf = t2.node(*t2.find("Hca2")).ports[1].peer;
  const std::uint8_t old_port = t2.node(*t2.find("Hca2")).ports[1].peer_port;
  t2.unlink(*t2.find("Hca2"), 1);
  // The leaf has a free port? Re-cable to the port of a bystander we unplug.
  const int by = t2.node(leaf).ports[old_port == 2 ? 3 : 2].peer;
  const std::uint8_t by_port = old_port == 2 ? 3 : 2;
  t2.unlink(leaf, by_port);
  REQUIRE(t2.link(*t2.find("Hca2"), 1, leaf, by_port).ok());
  (void)by;
  EventQueue q2;
  TopologyTransport m2(q2, t2, *t2.find("Hca1"), 1);
  Discovery d2(q2, m2);
  out.reset();
  d2.start({g}, [&out](const DiscoveryResult& x) { out = x; }, {last});
  q2.run_until(q2.now() + seconds(60), [&out] { return out.has_value(); });
  REQUIRE(out);
  REQUIRE(out->complete());
  CHECK(out->found.at(g).path.hops.back() == by_port);  // the leaf's new port
  CHECK_FALSE(out->found.at(g).path == last);
}

TEST_CASE("A configured lid that discovery contradicts: route_mismatch, polled by DR, no takeover, "
          "no search storm", "[discovery][sim]") {
  ClusterParams p;
  p.peer_addressing = PeerAddressing::GuidWrongLid;
  Cluster c(83, p);
  settle_guid_only(c);
  const int m = master_of(c);
  c.run_for(seconds(10));
  for (int i = 0; i < 2; ++i) {
    int mismatches = 0;
    for (const auto& r : c.records(i))
      if (r.what == "error" && r.kind == "route_mismatch") {
        ++mismatches;
        CHECK(r.detail.find("but its configured lid is") != std::string::npos);
      }
    CHECK(mismatches >= 1);
    const auto& route = c.agent(i)->routes()[0];
    CHECK(route.found);
    CHECK(route.lid == Lid{static_cast<std::uint16_t>(c.fabric().lid(c.head(1 - i)).value + 50)});
    REQUIRE(route.dr);
    // Start, a few local-port changes while the master settles, no more: the
    // silent override does not make it search every round.
    CHECK(c.agent(i)->discoveries() <= 4);
  }
  CHECK(takeovers(c) == 0);
  CHECK(master_of(c) == m);
}

TEST_CASE("GUID-only: our own port's LID changes: re-resolved at once, no takeover", "[discovery][sim]") {
  ClusterParams p;
  p.peer_addressing = PeerAddressing::GuidOnly;
  Cluster c(89, p);
  settle_guid_only(c);
  const int m = master_of(c);
  const int s = 1 - m;
  c.run_for(seconds(1));
  const auto before = c.agent(s)->discoveries();
  c.fabric().set_lid(c.head(s), Lid{static_cast<std::uint16_t>(c.fabric().lid(c.head(s)).value + 200)});
  REQUIRE(c.run_until([&] { return c.agent(s)->discoveries() > before; }, milliseconds(500)));
  c.run_for(seconds(5));
  CHECK(c.agent(s)->routes()[0].state == agent::RouteState::Resolved);
  CHECK(takeovers(c) == 0);
  CHECK(master_of(c) == m);
}
