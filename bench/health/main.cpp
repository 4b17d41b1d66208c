// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// bench_health: what fabric health (degraded links, doc/health.md) costs on a
// large fabric, beside iblinkinfo over the same fabric in the same run, and
// whether the two agree.
//
// Each run starts ibsim on topologies/fattree-1000.net (1000 HCAs, 42 leaves,
// 24 spines) with --degraded HCA links annotated `lid 0 1xSDR` on both ends
// (every 97th HCA from Hca7: they train at 1X among 4X), one smhad at its
// defaults on Hca1 running its OpenSM (its configured peer head02 is not
// started), and measures
//   - the time from smhad's start to its first assessed census walk (the walk
//     waits 3 s after start, census first_walk_delay), the walk's MADs and
//     time, the NodeDescription reads health added, and which links
//     `smctl health` names;
//   - smhad's RSS and CPU over --seconds once the picture is there;
//   - iblinkinfo at Hca3 (infiniband-diags, its own discovery of the fabric):
//     its run time and the links it prints at 1X.
// The run fails (exit status 1) when the two disagree on the degraded links.
// Median of --runs runs. Every process is stopped by PID (the fabric;
// OsmGuard for the OpenSM).
//
//   bench_health [--runs R (3)] [--degraded K (10)] [--seconds S (10)]
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "ibsim_harness.hpp"
#include "proc_sample.hpp"
#include "smhad_heads.hpp"

namespace {

using namespace std::chrono_literals;
using namespace smha::testing;
using nlohmann::json;
using smha::bench::median;
using Clock = std::chrono::steady_clock;
using Link = std::pair<std::uint64_t, int>;  // switch GUID, port

// fattree-1000.net with `k` HCA links at 1X (both ends annotated); the HCAs' ids.
std::string degraded_net(const std::string& dir, int k, std::set<std::string>* ids) {
  std::ifstream in(topology_path("fattree-1000.net"));
  std::stringstream all;
  all << in.rdbuf();
  for (int i = 0; i < k; ++i) ids->insert("Hca" + std::to_string(7 + 97 * i));
  std::ostringstream out;
  std::string line, record;
  std::istringstream lines(all.str());
  while (std::getline(lines, line)) {
    if (line.rfind("Hca", 0) == 0) {
      const auto q = line.find('"');
      record = line.substr(q + 1, line.find('"', q + 1) - q - 1);
    } else if (line.empty()) {
      record.clear();
    }
    if (line.rfind('[', 0) == 0) {
      const auto q = line.find('"');
      const std::string remote = line.substr(q + 1, line.find('"', q + 1) - q - 1);
      if (ids->count(remote)) line += "\t# \"" + remote + "\" lid 0 1xSDR";  // the switch's end
      else if (ids->count(record)) line += "\t# lid 0 1xSDR";                  // the HCA's end
    }
    out << line << "\n";
  }
  const std::string path = dir + "/fattree-1000-degraded.net";
  std::ofstream(path) << out.str();
  return path;
}

struct Run {
  double picture_s = 0;    // smhad start -> first assessed walk
  double walk_ms = 0;      // the walk itself
  double walk_mads = 0;
  double name_mads = 0;    // NodeDescription reads health added
  double rss = 0, cpu = 0; // smhad, once the picture is there
  double iblinkinfo_s = 0;
  std::set<Link> smha, iblinkinfo;
};

std::set<Link> iblinkinfo_1x(IbsimFabric& f, double* seconds) {
  const auto t0 = Clock::now();
  auto links = iblinkinfo_links(f, "Hca3", "1X", 300s);
  *seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return links;
}

Run run_once(int degraded, int seconds) {
  char tmpl[] = "/tmp/smha-bench-health-XXXXXX";
  if (!::mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
  const std::string dir = tmpl;
  std::set<std::string> ids;
  Run r;
  {
    IbsimFabric f(degraded_net(dir, degraded, &ids));
    OsmGuard guard;
    const auto p1 = f.node_port("Hca1");
    if (!p1) throw std::runtime_error("no port at Hca1");
    const auto p2 = f.node_port("Hca2");
    if (!p2) throw std::runtime_error("no port at Hca2");
    SmhadHead h{"head01", "Hca1", p1->port_guid, f.scratch_dir() + "/head01"};
    // A peer head02 on Hca2 as the configuration needs one; it is not started
    // (head01 alone is MASTER; the health work is the same on every head).
    write_smhad_config(h, {{"head02", p2->port_guid, 0}});
    const auto t0 = Clock::now();
    start_smhad(f, h, SMHA_SMHAD, {}, &guard);
    json health;
    const bool ok = wait_for([&] {
      if (!f.process_running(h.pidx)) throw std::runtime_error("smhad exited: " + smhad_log(f, h));
      auto rep = smhad_call(h, "health", json::object());
      if (!rep || !rep->is_ok()) return false;
      health = rep->data["health"];
      return health.value("assessed", false);
    }, 300s);
    if (!ok) throw std::runtime_error("no assessed walk within 300 s: " + smhad_log(f, h));
    r.picture_s = std::chrono::duration<double>(Clock::now() - t0).count();
    r.name_mads = health.value("description_mads", 0.0);
    for (const auto& d : health["degraded"])
      r.smha.emplace(std::stoull(d["a"].value("guid", "0"), nullptr, 16), d["a"].value("port", 0));
    auto sms = smhad_call(h, "sms", json::object());
    if (sms && sms->is_ok() && sms->data["census"].contains("last_walk")) {
      r.walk_ms = sms->data["census"]["last_walk"].value("elapsed_ms", 0.0);
      r.walk_mads = sms->data["census"]["last_walk"].value("mads", 0.0);
    }
    const int pid = f.process_pid(h.pidx);
    const auto before = smha::bench::proc_sample(pid);
    std::this_thread::sleep_for(std::chrono::seconds(seconds));
    const auto after = smha::bench::proc_sample(pid);
    r.rss = after.rss_mib;
    r.cpu = (after.cpu_ticks - before.cpu_ticks) / (seconds * static_cast<double>(::sysconf(_SC_CLK_TCK))) * 100.0;
    r.iblinkinfo = iblinkinfo_1x(f, &r.iblinkinfo_s);
    f.stop_process(h.pidx);
  }
  std::system(("rm -rf " + dir).c_str());
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 3, degraded = 10, seconds = 10;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--runs")) runs = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--degraded")) degraded = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--seconds")) seconds = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: bench_health [--runs R] [--degraded K] [--seconds S]\n");
      return 2;
    }
  }
  if (runs < 1 || degraded < 1 || degraded > 10 || seconds < 1) {
    std::fprintf(stderr, "bench_health: --runs >= 1, --degraded 1..10, --seconds >= 1\n");
    return 2;
  }
  std::vector<double> picture, walk_ms, walk_mads, name_mads, rss, cpu, ibl;
  int failed = 0, disagree = 0;
  for (int i = 0; i < runs; ++i) {
    try {
      const Run r = run_once(degraded, seconds);
      picture.push_back(r.picture_s);
      walk_ms.push_back(r.walk_ms);
      walk_mads.push_back(r.walk_mads);
      name_mads.push_back(r.name_mads);
      rss.push_back(r.rss);
      cpu.push_back(r.cpu);
      ibl.push_back(r.iblinkinfo_s);
      const bool agree = r.smha == r.iblinkinfo && static_cast<int>(r.smha.size()) == degraded;
      if (!agree) ++disagree;
      std::fprintf(stderr, "run %d: picture %.2f s (walk %.0f ms, %.0f MADs, %.0f name reads), smhad %.1f MiB %.2f %%; "
                   "iblinkinfo %.2f s; 1X links: smctl health %zu, iblinkinfo %zu, %s\n",
                   i + 1, r.picture_s, r.walk_ms, r.walk_mads, r.name_mads, r.rss, r.cpu, r.iblinkinfo_s,
                   r.smha.size(), r.iblinkinfo.size(), agree ? "the same links" : "DISAGREE");
    } catch (const std::exception& e) {
      ++failed;
      std::fprintf(stderr, "run %d failed: %s\n", i + 1, e.what());
    }
  }
  std::printf("\nfabric health on ibsim fattree-1000 (1000 HCAs, 66 switches) with %d HCA links at 1X among 4X; "
              "%d run(s), median (%d failed, %d disagreed)\n", degraded, runs, failed, disagree);
  std::printf("| what | smhad (census walk + health) | iblinkinfo at Hca3 |\n|---|---:|---:|\n");
  std::printf("| time to the whole picture, s | %.2f (3 s start delay + walk) | %.2f |\n", median(picture), median(ibl));
  std::printf("| the walk itself, ms | %.0f | - |\n", median(walk_ms));
  std::printf("| MADs of the walk | %.0f | - |\n", median(walk_mads));
  std::printf("| MADs health added (NodeDescription reads) | %.0f | - |\n", median(name_mads));
  std::printf("| smhad RSS MiB / CPU %% over %d s after | %.1f / %.2f | - |\n", seconds, median(rss), median(cpu));
  std::printf("| degraded links found | %d of %d, the same as iblinkinfo's 1X links in %d of %d runs | - |\n",
              degraded, degraded, runs - failed - disagree, runs);
  return failed || disagree ? 1 : 0;
}
