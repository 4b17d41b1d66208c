// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// bench_discovery: what finding the peers by port GUID alone costs (issue #14
// item 7, doc/performance.md "Discovery").
//
// 1. First resolution of both peers at 4, 324 and 1000 HCAs (topologies/*.net,
//    the files ibsim runs): smha's directed-route discovery (lib/agent
//    discovery, default limits) from head01 (Hca1) for head02's port GUID and
//    from head02 (Hca2) for head01's. In the sim (sim::TopologyTransport on
//    the same file): requests and MADs, and the engine's own CPU time (wall
//    time of the in-process run, the simulated answers cost ~nothing). With
//    --ibsim: the same search under ibsim (tests/ibsim/mad/discover_probe over
//    umad2sim, one process per run), wall time from the first request to the
//    result; median of --runs per direction. "Both" is the slower direction:
//    two smhad starting together resolve their peers in parallel.
// 2. Steady state: two smhad (sim::Cluster, virtual time) with GUID-only
//    configs, heads 4 switches apart, for --steady-minutes after they settled,
//    every request they send counted by attribute; beside the same cluster
//    with lid + dr_path configured, and beside the GUID-only cluster with
//    the SM census on (as smhad ships; off in the sim cluster by default).
//    The differences are what route upkeep (background re-resolution) and
//    the census add beyond the SMInfo polls.
//
//   bench_discovery [--runs N] [--ibsim] [--steady-minutes M]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "smha/fabric/discovery.hpp"
#include "smha/sim/cluster.hpp"
#include "smha/sim/topology.hpp"
#ifdef SMHA_BENCH_IBSIM
#include "ibsim_harness.hpp"
#endif

using namespace smha;
using namespace smha::sim;

namespace {

struct Fabric {
  const char* file;
  int hcas;
};
const Fabric kFabrics[] = {{"two-switch-4hca.net", 4}, {"fattree-324.net", 324}, {"fattree-1000.net", 1000}};

Topology load(const std::string& file) {
  const std::string path = std::string(SMHA_TOPOLOGIES) + "/" + file;
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path + ": cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  auto t = Topology::parse_ibsim(ss.str(), path);
  if (!t.ok()) throw std::runtime_error(t.error().message);
  t->assign_lids();
  return std::move(*t);
}

Guid port1(const Topology& t, const std::string& id) {
  auto n = t.find(id);
  if (!n) throw std::runtime_error("no node " + id);
  return t.node(*n).ports.at(1).guid;
}

struct SimRun {
  fabric::DiscoveryResult result;
  double cpu_ms = 0;
};

SimRun sim_search(const Topology& t, const std::string& from, Guid target) {
  EventQueue q;
  TopologyTransport mad(q, t, *t.find(from), 1);
  fabric::Discovery d(q, mad);
  std::optional<fabric::DiscoveryResult> out;
  const auto t0 = std::chrono::steady_clock::now();
  d.start({target}, [&out](const fabric::DiscoveryResult& r) { out = r; });
  q.run_until(q.now() + seconds(600), [&out] { return out.has_value(); });
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (!out || !out->complete()) throw std::runtime_error("sim: " + from + " did not find its peer");
  return {*out, ms};
}

double median(std::vector<double> v) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  const auto n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::string number(double v, const char* f = "%.1f") {
  if (v < 0) return "-";
  char b[32];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

#ifdef SMHA_BENCH_IBSIM
// One discover_probe at `node` for `target`: wall ms and MADs; nullopt if it
// did not find it.
struct ProbeRun {
  double wall_ms;
  std::uint64_t mads;
};
std::optional<ProbeRun> ibsim_search(smha::testing::IbsimFabric& f, const std::string& node, Guid target) {
  char g[24];
  std::snprintf(g, sizeof g, "0x%016llx", static_cast<unsigned long long>(target.value));
  const auto r = f.run(node, {SMHA_DISCOVER_PROBE, g}, std::chrono::milliseconds{60000});
  if (r.exit_code != 0) {
    std::fprintf(stderr, "discover_probe at %s: exit %d: %s\n", node.c_str(), r.exit_code, r.err.c_str());
    return std::nullopt;
  }
  const auto j = nlohmann::json::parse(r.out);
  if (j["targets"][g].value("missing", false)) {
    std::fprintf(stderr, "discover_probe at %s: %s\n", node.c_str(), r.out.c_str());
    return std::nullopt;
  }
  return ProbeRun{j["wall_ms"].get<double>(), j["mads"].get<std::uint64_t>()};
}
#endif

// Requests per second by attribute, both heads together, over `minutes` of
// virtual time after the cluster settled.
std::map<std::string, double> steady(PeerAddressing addressing, bool census, int minutes,
                                     std::uint64_t* discoveries) {
  ClusterParams p;
  p.fabric.switches = 4;
  p.peer_addressing = addressing;
  p.census.enabled = census;
  p.observer_interval = Duration{0};
  Cluster c(9001, p);
  std::map<std::string, std::uint64_t> n;
  bool counting = false;
  for (int i = 0; i < 2; ++i) {
    Cluster::Tap tap;
    tap.request = [&n, &counting](const char* what) {
      if (counting) ++n[what];
    };
    c.set_tap(i, tap);
  }
  c.start_all_smhad();
  c.run_for(seconds(10));  // started, resolved, one MASTER, settled
  if (c.fabric().active_masters().size() != 1) throw std::runtime_error("steady: no single master");
  const std::uint64_t d0 = c.agent(0)->discoveries() + c.agent(1)->discoveries();
  counting = true;
  c.run_for(seconds(60) * minutes);
  counting = false;
  *discoveries = c.agent(0)->discoveries() + c.agent(1)->discoveries() - d0;
  std::map<std::string, double> rate;
  for (const auto& [k, v] : n) rate[k] = static_cast<double>(v) / (60.0 * minutes);
  return rate;
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 5;
  int steady_minutes = 30;
  bool ibsim = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--runs" && i + 1 < argc) runs = std::max(1, std::atoi(argv[++i]));
    else if (a == "--steady-minutes" && i + 1 < argc) steady_minutes = std::max(1, std::atoi(argv[++i]));
    else if (a == "--ibsim") ibsim = true;
    else {
      std::fprintf(stderr, "usage: bench_discovery [--runs N] [--ibsim] [--steady-minutes M]\n");
      return 2;
    }
  }
#ifndef SMHA_BENCH_IBSIM
  if (ibsim) {
    std::fprintf(stderr, "bench_discovery: built without the ibsim harness (SMHA_TESTS=OFF)\n");
    return 2;
  }
#endif
  try {
    std::printf("First resolution of both peers (default limits: 16 in flight, 100 ms x 2 per request)\n\n");
    std::printf("| fabric | HCAs | nodes | requests (h1->h2, h2->h1) | MADs (h1->h2, h2->h1) | sim engine CPU ms, median of %d | "
                "ibsim wall ms h1->h2, median of %d | ibsim wall ms h2->h1 | ibsim both (slower) |\n",
                runs, runs);
    std::printf("|---|---:|---:|---|---|---:|---:|---:|---:|\n");
    for (const auto& fab : kFabrics) {
      const Topology t = load(fab.file);
      const Guid g1 = port1(t, "Hca1"), g2 = port1(t, "Hca2");
      std::vector<double> cpu;
      SimRun a, b;
      for (int r = 0; r < runs; ++r) {
        a = sim_search(t, "Hca1", g2);
        b = sim_search(t, "Hca2", g1);
        cpu.push_back(std::max(a.cpu_ms, b.cpu_ms));
      }
      double w12 = -1, w21 = -1;
#ifdef SMHA_BENCH_IBSIM
      if (ibsim) {
        smha::testing::IbsimFabric f(smha::testing::topology_path(fab.file));
        std::vector<double> x, y;
        for (int r = 0; r < runs; ++r) {
          if (auto p = ibsim_search(f, "Hca1", g2)) {
            x.push_back(p->wall_ms);
            if (p->mads != a.result.mads)
              std::fprintf(stderr, "%s: ibsim h1->h2 %llu MADs, sim %llu\n", fab.file,
                           static_cast<unsigned long long>(p->mads),
                           static_cast<unsigned long long>(a.result.mads));
          }
          if (auto p = ibsim_search(f, "Hca2", g1)) y.push_back(p->wall_ms);
        }
        w12 = median(x);
        w21 = median(y);
        if (static_cast<int>(x.size()) < runs || static_cast<int>(y.size()) < runs)
          std::fprintf(stderr, "%s: %zu + %zu of %d ibsim runs found the peer\n", fab.file, x.size(), y.size(),
                       runs);
      }
#endif
      std::printf("| %s | %d | %zu | %llu, %llu | %llu, %llu | %s | %s | %s | %s |\n", fab.file, fab.hcas, t.size(),
                  static_cast<unsigned long long>(a.result.requests), static_cast<unsigned long long>(b.result.requests),
                  static_cast<unsigned long long>(a.result.mads), static_cast<unsigned long long>(b.result.mads),
                  number(median(cpu)).c_str(), number(w12).c_str(), number(w21).c_str(),
                  number(w12 < 0 || w21 < 0 ? -1 : std::max(w12, w21)).c_str());
      std::fflush(stdout);
    }

    std::printf("\nSteady state: two smhad, heads 4 switches apart, %d min of virtual time after settling "
                "(requests per second, both heads together)\n\n",
                steady_minutes);
    std::uint64_t dg = 0, dl = 0, dc = 0;
    const auto guid_only = steady(PeerAddressing::GuidOnly, false, steady_minutes, &dg);
    const auto lid = steady(PeerAddressing::Lid, false, steady_minutes, &dl);
    const auto shipped = steady(PeerAddressing::GuidOnly, true, steady_minutes, &dc);
    std::printf("| attribute | lid + dr_path configured | GUID-only (discovery) | GUID-only + census (as shipped) "
                "| added by route upkeep | added by the census | added in all |\n");
    std::printf("|---|---:|---:|---:|---:|---:|---:|\n");
    std::map<std::string, int> keys;
    for (const auto* m : {&guid_only, &lid, &shipped})
      for (const auto& kv : *m) keys[kv.first];
    auto at = [](const std::map<std::string, double>& m, const std::string& k) { return m.count(k) ? m.at(k) : 0.0; };
    double tl = 0, tg = 0, tc = 0;
    for (const auto& [k, unused] : keys) {
      (void)unused;
      const double l = at(lid, k), g = at(guid_only, k), c = at(shipped, k);
      tl += l;
      tg += g;
      tc += c;
      std::printf("| %s | %s | %s | %s | %s | %s | %s |\n", k.c_str(), number(l, "%.3f").c_str(),
                  number(g, "%.3f").c_str(), number(c, "%.3f").c_str(), number(g - l, "%.3f").c_str(),
                  number(c - g, "%.3f").c_str(), number(c - l, "%.3f").c_str());
    }
    std::printf("| total | %s | %s | %s | %s | %s | %s |\n", number(tl, "%.3f").c_str(), number(tg, "%.3f").c_str(),
                number(tc, "%.3f").c_str(), number(tg - tl, "%.3f").c_str(), number(tc - tg, "%.3f").c_str(),
                number(tc - tl, "%.3f").c_str());
    std::printf("\ndiscoveries in the window: GUID-only %llu, configured %llu, GUID-only + census %llu\n",
                static_cast<unsigned long long>(dg), static_cast<unsigned long long>(dl),
                static_cast<unsigned long long>(dc));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_discovery: %s\n", e.what());
    return 1;
  }
  return 0;
}
