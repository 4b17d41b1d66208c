// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// bench_health: what fabric health (degraded links and error counters,
// doc/health.md) costs on a large fabric, beside iblinkinfo and ibqueryerrors
// over the same fabric in the same run, and whether they agree.
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
//   - error counters, read by smhad (its OpenSM is MASTER) at --reads PMA
//     MADs a second from its start (health.counter_start_after_s 0): the time
//     to its first full pass over every active port; then SymbolErrorCounter
//     set to 25 through ibsim's console at port 1 of --erroring
//     HCAs (every 89th from Hca11), and the time until smhad has them all
//     over their threshold (at most one pass);
//   - smhad's RSS and CPU over --seconds once the picture is there (reading);
//   - iblinkinfo at Hca3 (infiniband-diags, its own discovery of the fabric):
//     its run time and the links it prints at 1X;
//   - ibqueryerrors at Hca3: its run time and the ports it prints.
// The run fails (exit status 1) when smhad and the tools disagree on the
// degraded links or on the ports with errors.
// Median of --runs runs. Every process is stopped by PID (the fabric;
// OsmGuard for the OpenSM).
//
//   bench_health [--runs R (3)] [--degraded K (10)] [--erroring E (10)]
//                [--reads N (200)] [--seconds S (10)]
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
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
  double ports = 0;        // active ports smhad reads
  double first_pass_s = 0; // smhad start -> first full pass of PortCounters reads
  double detect_s = 0;     // errors set -> all over their threshold at smhad
  double pma_reads = 0;    // PortCounters MADs sent by then
  double ibqueryerrors_s = 0;
  std::set<std::pair<std::string, int>> smha_errors, ibqueryerrors;  // (node description, port)
  std::set<std::string> erring;  // the NodeDescriptions of the HCAs whose port counters were set
};

// health.errors, once `pred` holds (bounded); throws with smhad's log.
json errors_when(IbsimFabric& f, const SmhadHead& h, const std::function<bool(const json&)>& pred,
                 std::chrono::seconds timeout) {
  json e;
  const bool ok = wait_for([&] {
    if (!f.process_running(h.pidx)) throw std::runtime_error("smhad exited: " + smhad_log(f, h));
    auto rep = smhad_call(h, "health", json::object());
    if (!rep || !rep->is_ok()) return false;
    e = rep->data["health"]["errors"];
    return pred(e);
  }, timeout);
  if (!ok) throw std::runtime_error("error counters: condition not met within " + std::to_string(timeout.count()) +
                                    " s: " + e.dump().substr(0, 2000));
  return e;
}

std::set<Link> iblinkinfo_1x(IbsimFabric& f, double* seconds) {
  const auto t0 = Clock::now();
  auto links = iblinkinfo_links(f, "Hca3", "1X", 300s);
  *seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return links;
}

Run run_once(int degraded, int erroring, int reads, int seconds) {
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
    SmhadOptions o;
    o.extra = "health:\n  counter_start_after_s: 0\n  counter_reads_per_second: " + std::to_string(reads) + "\n";
    write_smhad_config(h, {{"head02", p2->port_guid, 0}}, o);
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
    // Error counters: a full pass, then errors at `erroring` HCAs' switch
    // ports (the far end of their cable), found within a pass.
    json e = errors_when(f, h, [](const json& e) { return e.value("passes", 0) >= 1; }, 600s);
    r.first_pass_s = std::chrono::duration<double>(Clock::now() - t0).count();
    r.ports = e.value("ports", 0.0);
    std::set<std::string>& erring = r.erring;
    for (int i = 0; i < erroring; ++i) {
      const int n = 11 + 89 * i;
      const std::string hca = "Hca" + std::to_string(n);
      char desc[16];
      std::snprintf(desc, sizeof desc, "node%04d", n);  // its NodeDescription in fattree-1000.net
      erring.insert(desc);
      f.console("PerformanceSet \"" + hca + "\"[1] PortCounters.SymbolErrorCounter=25");
    }
    const auto t_set = Clock::now();
    e = errors_when(f, h, [&](const json& e) {
      if (e.value("over_threshold", 0) < erroring) return false;
      for (const auto& p : e["listed"])
        if (!p["port"]["node_description"].is_string()) return false;  // named within the pass
      return true;
    }, 600s);
    r.detect_s = std::chrono::duration<double>(Clock::now() - t_set).count();
    r.pma_reads = e.value("reads", 0.0);
    for (const auto& p : e["listed"])
      r.smha_errors.emplace(p["port"].value("node_description", ""), p["port"].value("port", 0));
    const int pid = f.process_pid(h.pidx);
    const auto before = smha::bench::proc_sample(pid);
    std::this_thread::sleep_for(std::chrono::seconds(seconds));
    const auto after = smha::bench::proc_sample(pid);
    r.rss = after.rss_mib;
    r.cpu = (after.cpu_ticks - before.cpu_ticks) / (seconds * static_cast<double>(::sysconf(_SC_CLK_TCK))) * 100.0;
    r.iblinkinfo = iblinkinfo_1x(f, &r.iblinkinfo_s);
    const auto t_q = Clock::now();
    for (const auto& [where, counters] : ibqueryerrors_ports(f, "Hca3", 300s)) r.ibqueryerrors.insert(where);
    r.ibqueryerrors_s = std::chrono::duration<double>(Clock::now() - t_q).count();
    f.stop_process(h.pidx);
  }
  std::system(("rm -rf " + dir).c_str());
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 3, degraded = 10, erroring = 10, reads = 200, seconds = 10;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--runs")) runs = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--degraded")) degraded = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--erroring")) erroring = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--reads")) reads = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--seconds")) seconds = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: bench_health [--runs R] [--degraded K] [--erroring E] [--reads N] [--seconds S]\n");
      return 2;
    }
  }
  if (runs < 1 || degraded < 1 || degraded > 10 || erroring < 1 || erroring > 11 || reads < 1 || reads > 1000 ||
      seconds < 1) {
    std::fprintf(stderr, "bench_health: --runs >= 1, --degraded 1..10, --erroring 1..11, --reads 1..1000, --seconds >= 1\n");
    return 2;
  }
  std::vector<double> picture, walk_ms, walk_mads, name_mads, rss, cpu, ibl, ports, first_pass, detect, pma, ibq;
  int failed = 0, disagree = 0;
  for (int i = 0; i < runs; ++i) {
    try {
      const Run r = run_once(degraded, erroring, reads, seconds);
      picture.push_back(r.picture_s);
      walk_ms.push_back(r.walk_ms);
      walk_mads.push_back(r.walk_mads);
      name_mads.push_back(r.name_mads);
      rss.push_back(r.rss);
      cpu.push_back(r.cpu);
      ibl.push_back(r.iblinkinfo_s);
      ports.push_back(r.ports);
      first_pass.push_back(r.first_pass_s);
      detect.push_back(r.detect_s);
      pma.push_back(r.pma_reads);
      ibq.push_back(r.ibqueryerrors_s);
      // Every port set erroring is found; a port ibsim's own traffic gave an
      // error (a VL15Dropped) may come on top, and must be on both sides.
      std::string extra;
      int injected = 0;
      for (const auto& [desc, port] : r.smha_errors) {
        if (r.erring.count(desc) && port == 1) ++injected;
        else extra += " \"" + desc + "\"[" + std::to_string(port) + "]";
      }
      const bool agree = r.smha == r.iblinkinfo && static_cast<int>(r.smha.size()) == degraded &&
                         r.smha_errors == r.ibqueryerrors && injected == erroring;
      if (!extra.empty()) std::fprintf(stderr, "run %d: errors beyond those set (both tools):%s\n", i + 1, extra.c_str());
      if (!agree) ++disagree;
      std::fprintf(stderr, "run %d: picture %.2f s (walk %.0f ms, %.0f MADs, %.0f name reads), smhad %.1f MiB %.2f %%; "
                   "iblinkinfo %.2f s; 1X links: smctl health %zu, iblinkinfo %zu; error counters: %.0f ports, first "
                   "pass %.1f s, %zu erroring ports found in %.1f s (%.0f reads), ibqueryerrors %.2f s %zu ports; %s\n",
                   i + 1, r.picture_s, r.walk_ms, r.walk_mads, r.name_mads, r.rss, r.cpu, r.iblinkinfo_s,
                   r.smha.size(), r.iblinkinfo.size(), r.ports, r.first_pass_s, r.smha_errors.size(), r.detect_s,
                   r.pma_reads, r.ibqueryerrors_s, r.ibqueryerrors.size(), agree ? "agree" : "DISAGREE");
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
  std::printf("\nerror counters, %d erroring ports; smhad at %d PortCounters MADs/s (%.0f an hour)\n", erroring, reads,
              reads * 3600.0);
  std::printf("| what | smhad (PMA reads, MASTER's head) | ibqueryerrors at Hca3 |\n|---|---:|---:|\n");
  std::printf("| active ports read | %.0f | - |\n", median(ports));
  std::printf("| time to the whole picture, s | %.1f (start to first full pass) | %.2f |\n", median(first_pass),
              median(ibq));
  std::printf("| errors set -> all over threshold, s | %.1f | - |\n", median(detect));
  std::printf("| PortCounters MADs sent by then | %.0f | - |\n", median(pma));
  std::printf("| ports with errors found | %d of %d, the same as ibqueryerrors' in %d of %d runs | - |\n", erroring,
              erroring, runs - failed - disagree, runs);
  return failed || disagree ? 1 : 0;
}
