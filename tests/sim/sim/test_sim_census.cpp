// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// The SM census (doc/census.md) in the sim: the census walk over multi-switch
// topologies (lib/sim/topology) finds every port with IsSM and where it is
// cabled; in a two-head cluster (lib/sim/cluster) a third OpenSM on a compute
// node raises unknown_sm naming it, is listed by every head's census, causes
// no takeover, and is cleared once it stops.
#include <catch2/catch.hpp>

#include <csignal>
#include <fstream>
#include <set>
#include <sstream>

#include "smha/fabric/discovery.hpp"
#include "smha/fabric/health.hpp"
#include "smha/fabric/port_errors.hpp"
#include "smha/sim/cluster.hpp"
#include "smha/sim/fabric.hpp"
#include "smha/sim/topology.hpp"
#include "load_net.hpp"

using namespace smha;
using namespace smha::sim;
using fabric::Discovery;
using fabric::DiscoveryResult;

namespace {

using smha::sim::testing::load_net;

DiscoveryResult survey(const Topology& t, const std::string& from, fabric::DiscoveryLimits limits = {}) {
  EventQueue q;
  TopologyTransport mad(q, t, *t.find(from), 1);
  Discovery d(q, mad, limits);
  std::optional<DiscoveryResult> out;
  d.survey([&out](const DiscoveryResult& r) { out = r; });
  REQUIRE_FALSE(out);
  q.run_until(q.now() + seconds(600), [&out] { return out.has_value(); });
  REQUIRE(out);
  return *out;
}

const fabric::SmPort* find_port(const DiscoveryResult& r, Guid g) {
  for (const auto& p : r.sm_ports)
    if (p.port_guid == g) return &p;
  return nullptr;
}

int count_records(const Cluster& c, int head, const std::string& what, const std::string& kind) {
  int n = 0;
  for (const auto& r : c.records(head))
    if (r.what == what && r.kind == kind) ++n;
  return n;
}

}  // namespace

TEST_CASE("Census walk: every IsSM port, its NodeDescription and the switch port it is cabled to",
          "[census][sim]") {
  // Sw1 - Sw2 - Sw3; Hca1 (us) on Sw1 port 3, Hca2 on Sw3 port 4, Node2 on Sw3 port 5.
  Topology t;
  const int sw1 = t.add_switch("Sw1", 8), sw2 = t.add_switch("Sw2", 8), sw3 = t.add_switch("Sw3", 8);
  const int h1 = t.add_ca("Hca1", 1, "head01"), h2 = t.add_ca("Hca2", 1, "head02");
  const int n2 = t.add_ca("Node2", 1, "node02 HCA-1");
  const int n3 = t.add_ca("Node3", 1, "node03 HCA-1");
  REQUIRE(t.link(sw1, 2, sw2, 1).ok());
  REQUIRE(t.link(sw2, 2, sw3, 1).ok());
  REQUIRE(t.link(sw1, 6, sw2, 6).ok());  // a loop
  REQUIRE(t.link(h1, 1, sw1, 3).ok());
  REQUIRE(t.link(h2, 1, sw3, 4).ok());
  REQUIRE(t.link(n2, 1, sw3, 5).ok());
  REQUIRE(t.link(n3, 1, sw2, 5).ok());
  t.assign_lids();
  const Guid g1 = t.node(h1).ports[1].guid, g2 = t.node(h2).ports[1].guid, gn2 = t.node(n2).ports[1].guid;
  REQUIRE(t.set_is_sm(g1, true));
  REQUIRE(t.set_is_sm(g2, true));
  REQUIRE(t.set_is_sm(gn2, true));
  REQUIRE(t.set_is_sm(t.node(sw2).guid, true));  // a switch-embedded SM (port 0)
  REQUIRE_FALSE(t.set_is_sm(Guid{0xdead}, true));

  auto r = survey(t, "Hca1");
  CHECK(r.sm_ports.size() == 4);
  const auto* own = find_port(r, g1);
  REQUIRE(own);
  CHECK(own->path.hops.empty());
  REQUIRE(own->neighbour);
  CHECK(*own->neighbour == t.node(sw1).guid);
  CHECK(own->neighbour_port == 3);
  const auto* n = find_port(r, gn2);
  REQUIRE(n);
  CHECK(n->description == "node02 HCA-1");
  CHECK(n->description_known);
  CHECK(n->lid == t.node(n2).ports[1].lid);
  REQUIRE(n->neighbour);
  CHECK(*n->neighbour == t.node(sw3).guid);
  CHECK(n->neighbour_port == 5);
  const auto* s = find_port(r, t.node(sw2).guid);
  REQUIRE(s);
  CHECK(s->port_num == 0);
  CHECK(s->node_type == mad::NodeType::Switch);
  CHECK_FALSE(s->neighbour);
  CHECK(find_port(r, g2));
  CHECK(r.nodes == 7);
  CHECK_FALSE(r.request_bound);
}

TEST_CASE("Census walk cost on the lab and fat-tree fabrics", "[census][sim]") {
  for (const char* f : {"two-switch-4hca.net", "fattree-324.net", "fattree-1000.net"}) {
    auto t = load_net(f);
    auto r = survey(t, "Hca1");
    INFO(f);
    CHECK(r.sm_ports.empty());  // no IsSM set in the file
    CHECK_FALSE(r.request_bound);
    CHECK(r.nodes == t.size());
    // Full search + one PortInfo per CA port and per switch (port 0).
    WARN(f << ": " << r.requests << " requests, " << r.mads << " MADs, " << r.nodes << " nodes");
  }
}

TEST_CASE("A third OpenSM at priority 0 on a compute node: unknown_sm names it, no takeover, cleared when it stops",
          "[census][sim]") {
  ClusterParams p;
  p.peer_addressing = PeerAddressing::GuidOnly;
  p.census.enabled = true;  // smhad's defaults: walks >= 60 s apart, rechecks and SMInfo every 5 s
  Cluster c(83, p);
  const TimePoint t_start = c.now();
  c.start_all_smhad();
  REQUIRE(c.run_until([&] { return c.observed_masters().size() == 1; }, seconds(3)));
  c.run_for(seconds(20));
  for (int i = 0; i < c.heads(); ++i) {
    CHECK(count_records(c, i, "alarm", "unknown_sm") == 0);
    // Both heads are in the census, as heads.
    const auto& e = c.agent(i)->census().entries();
    REQUIRE(e.size() == 2);
    for (const auto& [g, x] : e) {
      CHECK(x.head);
      // Named and located (the walk's ports, discovery's and our own NodeDescription).
      const int h = c.head_of(g);
      REQUIRE(h >= 0);
      CHECK(x.description == c.fabric().name(c.head(h)));
      CHECK(x.neighbour.has_value());
    }
  }
  const auto master_before = c.observed_masters();

  // The third OpenSM, on node01 (the observer), priority 0, sweep 10 s.
  const NodeId node = c.observer();
  const Guid third = c.fabric().guid(node);
  const std::string conf = "/etc/opensm/opensm.conf";
  REQUIRE(c.fabric().fs(node).write_atomic(conf, sim::render_opensm_keys({}, 0), 0644).ok());
  os::ProcessSpec spec;
  spec.path = "/usr/sbin/opensm";
  spec.argv = {spec.path, "-F", conf};
  auto pid = c.fabric().runner(node).spawn(spec, {}, {});
  REQUIRE(pid.ok());
  const TimePoint started = c.now();
  // The simulated OpenSM's own start shows a sub-millisecond overlap of
  // masters while it sweeps (with the census off as well): not the census's.
  c.run_for(seconds(1));
  c.reset_dual_master_stats();
  // Within two of its sweeps (sweep_interval 10 s) on both heads, counted
  // from its start.
  REQUIRE(c.run_until([&] {
    return count_records(c, 0, "alarm", "unknown_sm") == 1 && count_records(c, 1, "alarm", "unknown_sm") == 1;
  }, seconds(20)));
  WARN("unknown_sm on both heads " << std::chrono::duration<double>(c.now() - started).count()
                                   << " s after the third OpenSM started");
  for (int i = 0; i < c.heads(); ++i) {
    for (const auto& r : c.records(i))
      if (r.what == "alarm" && r.kind == "unknown_sm") {
        INFO(r.detail);
        CHECK(r.detail.find(to_string(third)) != std::string::npos);
        CHECK(r.detail.find("\"node01\"") != std::string::npos);
        CHECK(r.detail.find("STANDBY") != std::string::npos);
        CHECK(r.detail.find("lid 100") != std::string::npos);
      }
    const auto& e = c.agent(i)->census().entries();
    REQUIRE(e.count(third));
    const auto& x = e.at(third);
    CHECK_FALSE(x.head);
    CHECK(x.description == "node01");
    REQUIRE(x.info);
    CHECK(x.info->priority == 0);
    CHECK(x.sources & fabric::kFromIsSm);
  }
  c.run_for(seconds(10));
  CHECK(c.observed_masters() == master_before);

  // It stops: cleared within the expiry (15 s) plus a query interval.
  REQUIRE(c.fabric().signal_opensm(node, SIGTERM));
  const TimePoint stopped = c.now();
  REQUIRE(c.run_until([&] {
    return count_records(c, 0, "clear", "unknown_sm") == 1 && count_records(c, 1, "clear", "unknown_sm") == 1;
  }, seconds(25)));
  WARN("cleared " << std::chrono::duration<double>(c.now() - stopped).count() << " s after it stopped");
  // Gone from the census once a recheck sees IsSM cleared and the master's SA
  // no longer lists it (its next sweep forgets it, the next table shows that).
  REQUIRE(c.run_until([&] {
    return !c.agent(0)->census().entries().count(third) && !c.agent(1)->census().entries().count(third);
  }, seconds(50)));
  for (int i = 0; i < c.heads(); ++i) {
    CHECK(c.count_events(i, "takeover_started") == 0);
    CHECK(count_records(c, i, "alarm", "no_master") == 0);
  }
  CHECK(c.observed_masters() == master_before);
  CHECK(c.dual_master_total() == Duration{0});
  // What the census cost head01: walks and SMInfo queries, MADs per second.
  const auto& st = c.agent(0)->census_stats();
  CHECK(st.walks >= 1);
  const double secs = std::chrono::duration<double>(c.now() - t_start).count();
  const double rate =
      static_cast<double>(st.walk_mads + st.recheck_mads + st.query_mads + st.sa_mads) / secs;
  WARN("census: " << st.walks << " walks, " << st.walk_mads << " walk MADs, " << st.recheck_mads
                  << " recheck MADs, " << st.query_mads << " query MADs, " << st.sa_mads << " SA MADs in "
                  << secs << " s: " << rate << " MAD/s");
  CHECK(st.sa_tables >= 1);
  CHECK(rate <= 2.0);
}

TEST_CASE("The master's SA lists an SM on a compute node: its two tables alone raise unknown_sm and clear",
          "[census][sim][sa]") {
  ClusterParams p;
  p.peer_addressing = PeerAddressing::GuidOnly;
  p.census.enabled = true;
  // No walk and so no rechecks: the SA's tables (SMInfoRecords, IsSM
  // PortInfoRecords) are the only way to the third SM.
  p.census.first_walk_delay = seconds(3600);
  p.census.sa_interval = seconds(5);
  Cluster c(84, p);
  c.start_all_smhad();
  REQUIRE(c.run_until([&] { return c.observed_masters().size() == 1; }, seconds(3)));
  c.run_for(seconds(10));
  const auto master_before = c.observed_masters();
  for (int i = 0; i < c.heads(); ++i) {
    CHECK(count_records(c, i, "alarm", "unknown_sm") == 0);
    const auto& st = c.agent(i)->census_stats();
    INFO("SA: queries " << st.sa_queries << " last error " << st.sa_last_error << " lid " << st.sa_lid.value);
    CHECK(st.sa_tables >= 1);
    CHECK(st.sa_records == 2);  // the master and the standby head
    CHECK_FALSE(st.sa_last_truncated);
    CHECK(st.sa_last_error.empty());
    for (const auto& [g, x] : c.agent(i)->census().entries()) CHECK(x.head);
  }

  const NodeId node = c.observer();
  const Guid third = c.fabric().guid(node);
  const std::string conf = "/etc/opensm/opensm.conf";
  REQUIRE(c.fabric().fs(node).write_atomic(conf, sim::render_opensm_keys({}, 0), 0644).ok());
  os::ProcessSpec spec;
  spec.path = "/usr/sbin/opensm";
  spec.argv = {spec.path, "-F", conf};
  REQUIRE(c.fabric().runner(node).spawn(spec, {}, {}).ok());
  const TimePoint started = c.now();
  // The master's next light sweep (10 s) finds it; the next table lists it.
  REQUIRE(c.run_until([&] {
    return count_records(c, 0, "alarm", "unknown_sm") == 1 && count_records(c, 1, "alarm", "unknown_sm") == 1;
  }, seconds(20)));
  WARN("unknown_sm from the SA's tables alone " << std::chrono::duration<double>(c.now() - started).count()
                                             << " s after the third OpenSM started");
  // The IsSM table names it at once; the SMInfoRecord table once the
  // master's next light sweep (10 s) read its SMInfo.
  REQUIRE(c.run_until([&] {
    for (int i = 0; i < c.heads(); ++i) {
      const auto& e = c.agent(i)->census().entries();
      if (!e.count(third) || !e.at(third).sa_listed) return false;
    }
    return true;
  }, seconds(20)));
  for (int i = 0; i < c.heads(); ++i) {
    const auto& e = c.agent(i)->census().entries();
    REQUIRE(e.count(third));
    const auto& x = e.at(third);
    CHECK((x.sources & fabric::kFromSa) != 0);
    CHECK((x.sources & fabric::kFromSaIsSm) != 0);
    CHECK(x.sa_listed);
    CHECK(x.is_sm);       // the IsSM table listed its port
    CHECK_FALSE(x.path);  // no walk: asked by LID
    CHECK(x.description == c.fabric().name(node));
    CHECK(c.agent(i)->census_stats().ism_found == 1);
    CHECK(c.agent(i)->census_stats().ism_records == 3);
    CHECK(x.lid == c.fabric().lid(node));
    REQUIRE(x.info);
    CHECK(x.info->state == SmState::Standby);
    CHECK(x.info->priority == 0);
    CHECK(c.agent(i)->census_stats().sa_records == 3);
    for (const auto& r : c.records(i))
      if (r.what == "alarm" && r.kind == "unknown_sm") {
        INFO(r.detail);
        CHECK(r.detail.find(to_string(third)) != std::string::npos);
        CHECK(r.detail.find("lid " + std::to_string(c.fabric().lid(node).value)) != std::string::npos);
      }
  }
  // While it runs the master keeps hearing from it: the alarm stays up.
  c.run_for(seconds(30));
  for (int i = 0; i < c.heads(); ++i) CHECK(count_records(c, i, "clear", "unknown_sm") == 0);

  // It stops. The master forgets it at its next sweep; until then its record
  // stands still and is no sign of life: cleared within expiry + a table.
  REQUIRE(c.fabric().signal_opensm(node, SIGTERM));
  const TimePoint stopped = c.now();
  REQUIRE(c.run_until([&] {
    return count_records(c, 0, "clear", "unknown_sm") == 1 && count_records(c, 1, "clear", "unknown_sm") == 1;
  }, seconds(25)));
  WARN("cleared " << std::chrono::duration<double>(c.now() - stopped).count() << " s after it stopped");
  REQUIRE(c.run_until([&] {
    return !c.agent(0)->census().entries().count(third) && !c.agent(1)->census().entries().count(third);
  }, seconds(30)));
  for (int i = 0; i < c.heads(); ++i) CHECK(c.count_events(i, "takeover_started") == 0);
  CHECK(c.observed_masters() == master_before);
}

TEST_CASE("The sim's SA: one MAD of records, cut beyond six as under ibsim, refused without an SM",
          "[census][sim][sa]") {
  Fabric f(7);
  std::vector<NodeId> n;
  for (int i = 0; i < 9; ++i)
    n.push_back(f.add_node("n" + std::to_string(i), Guid{0x100 + static_cast<std::uint64_t>(i)},
                           Lid{static_cast<std::uint16_t>(i + 1)}));
  auto ask = [&](NodeId from, Lid lid) {
    std::optional<Result<mad::SmInfoRecordsReply>> got;
    f.transport(from).get_sminfo_records(lid, mad::RequestOptions{milliseconds(200), 0, 0},
                                         [&got](Result<mad::SmInfoRecordsReply> r) { got = std::move(r); });
    f.queue().run_until(f.queue().now() + seconds(1), [&got] { return got.has_value(); });
    REQUIRE(got);
    return *got;
  };
  // No SM at LID 1: the GSI MAD is refused.
  auto none = ask(n[8], Lid{1});
  REQUIRE_FALSE(none.ok());
  CHECK(none.error().code == mad::kErrMadStatus);
  // Eight OpenSMs, the one at n0 with the highest priority.
  for (int i = 0; i < 8; ++i) {
    const std::string conf = "/c";
    REQUIRE(f.fs(n[i]).write_atomic(conf, "sm_priority " + std::to_string(i == 0 ? 15 : 1) + "\n", 0644).ok());
    os::ProcessSpec spec;
    spec.path = "/usr/sbin/opensm";
    spec.argv = {spec.path, "-F", conf};
    REQUIRE(f.runner(n[i]).spawn(spec, {}, {}).ok());
  }
  f.queue().run_until(f.queue().now() + seconds(25), [] { return false; });
  REQUIRE(f.active_masters() == std::vector<NodeId>{n[0]});
  auto t = ask(n[8], Lid{1});
  REQUIRE(t.ok());
  CHECK(t->info.records.size() == 6);
  CHECK_FALSE(t->info.claimed);
  CHECK(t->info.truncated);
  CHECK(t->info.records[0].info.guid == Guid{0x100});
  CHECK(t->info.records[0].info.state == SmState::Master);
  CHECK(t->info.records[0].info.sm_key == 0);
  CHECK(t->info.records[1].info.state == SmState::Standby);
  // A standby's SA: busy.
  auto standby = ask(n[8], Lid{2});
  REQUIRE_FALSE(standby.ok());
  CHECK(standby.error().message.find("busy") != std::string::npos);
}

// Fabric health (doc/health.md) over the census walk: the walk's PortInfo
// answers carry each port's link, the sim's topology trains each cable at what
// both ends enable (ibsim's rule, its `lid N 1xSDR` annotations).
TEST_CASE("Fabric health from the census walk: the one 1X link, and none on the fat trees", "[census][sim][health]") {
  auto degraded = survey(load_net("two-switch-4hca-degraded.net"), "Hca1");
  auto a = fabric::assess_links(degraded, {});
  CHECK(a.links == 6);
  CHECK(a.unknown == 0);
  REQUIRE(a.degraded.size() == 1);
  CHECK(a.degraded[0].why == fabric::DegradedWhy::BelowTier);
  CHECK(a.degraded[0].active == LinkRate{1, 1});
  CHECK(a.degraded[0].a.port == 2);
  CHECK(a.degraded[0].a.type == mad::NodeType::Switch);
  CHECK(a.degraded[0].b.type == mad::NodeType::Ca);

  for (const char* f : {"two-switch-4hca.net", "fattree-1000.net"}) {
    INFO(f);
    auto t = load_net(f);
    auto r = survey(t, "Hca1");
    a = fabric::assess_links(r, {});
    CHECK(a.degraded.empty());
    CHECK(a.unknown == 0);
    CHECK(a.links == t.cas() + (std::string(f) == "fattree-1000.net" ? 42 * 24 : 2));
    CHECK(a.by_kind[fabric::LinkKind::SwitchCa] == t.cas());
    // An expectation the fabric does not meet names every link of that kind.
    fabric::HealthExpectation e;
    e.switch_switch = LinkRate{4, 3};
    CHECK(fabric::assess_links(r, e).degraded.size() == a.by_kind[fabric::LinkKind::SwitchSwitch]);
  }
}

// Error counters (doc/health.md) over the census walk's ports on the 1000-HCA
// fat tree: one pass reads each end of every link once, at the configured
// rate; the ports whose counters were raised meanwhile are found in the next
// pass and no other; a PMA answering for another port is unknown.
TEST_CASE("Error counters on the 1000-HCA fat tree: a pass reads both ends of every link once, the erroring ports found",
          "[census][sim][health]") {
  auto t = load_net("fattree-1000.net");
  const auto r = survey(t, "Hca1");
  EventQueue q;
  TopologyTransport mad(q, t, *t.find("Hca1"), 1);
  struct Sink : AlarmSink {
    std::vector<std::string> raised;
    int cleared = 0;
    void alarm(const RaiseAlarm& a, TimePoint) override { raised.push_back(a.detail); }
    void clear(const ClearAlarm&, TimePoint) override { ++cleared; }
  } sink;
  fabric::ErrorsConfig cfg;
  cfg.reads_per_second = 1000;
  fabric::PortErrors e(cfg, q, mad, sink);
  e.on_walk(r);
  // Both ends of each HCA link and of each leaf-spine link: 4 016.
  const std::size_t ports = 2 * t.cas() + 2 * 42 * 24;
  CHECK(e.snapshot().ports == ports);
  e.set_reading(true);
  // (Simulated time: a pass is 4 016 reads at 1 000 a second.)
  q.run_until(q.now() + milliseconds(4100));
  auto s = e.snapshot();
  REQUIRE(s.passes == 1);
  CHECK(s.read == ports);
  CHECK(mad.pma_mads_sent() >= ports);  // the pass: once each (the next one has begun)
  CHECK(mad.pma_mads_sent() <= ports + 100);
  CHECK(s.with_errors == 0);

  // Symbol errors on 10 leaf ports toward HCAs and a downed link at a spine.
  std::set<std::pair<Guid, std::uint8_t>> bad;
  for (int i = 0; i < 10; ++i) {
    const int hca = *t.find("Hca" + std::to_string(11 + 89 * i));
    const auto& p = t.node(hca).ports[1];
    mad::at(t.errors(p.peer, p.peer_port), mad::ErrorCounter::SymbolErrors) = 25;
    bad.emplace(t.node(p.peer).guid, p.peer_port);
  }
  const int spine = *t.find("Spine01");
  mad::at(t.errors(spine, 7), mad::ErrorCounter::LinkDowned) = 2;
  bad.emplace(t.node(spine).guid, 7);
  const TimePoint set_at = q.now();
  q.run_until(q.now() + seconds(9));  // two more passes
  s = e.snapshot();
  CHECK(s.over == 11);
  CHECK(s.rising == 11);
  std::set<std::pair<Guid, std::uint8_t>> found;
  for (const auto& p : s.listed) found.emplace(p.where.node, p.where.port);
  CHECK(found == bad);
  for (const auto& p : s.listed) {
    REQUIRE(p.since);
    CHECK(*p.since - set_at <= milliseconds(4100));  // within a pass
  }
  // Raised at the first port found, refreshed as the others were.
  REQUIRE(sink.raised.size() >= 2);
  CHECK(sink.raised.front().rfind("1 port with error counters rising", 0) == 0);
  CHECK(sink.raised.back().rfind("11 ports with error counters rising", 0) == 0);

  // A leaf whose PMA answers for the wrong port: its ports are unknown, not errors.
  const int leaf = *t.find("Leaf02");
  mad.misport(t.node(leaf).lid);
  q.run_until(q.now() + seconds(5));
  s = e.snapshot();
  CHECK(s.wrong_port >= 48);  // Leaf02's 48 cabled ports, once each
  CHECK(s.unknown >= 24);
  CHECK(s.over <= 11);
}
