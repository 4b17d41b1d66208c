// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// bench_instances: what one smhad instance costs a head that runs several
// (one per fabric, smhad@NAME), idle at the default poll interval (100 ms).
//
// Each run brings up F fabrics, each its own ibsim (two-switch-4hca) with two
// heads (head01 at Hca1, head02 at Hca2: an smhad each, each running its own
// OpenSM under umad2sim); head01's smhad of every fabric is an instance of the
// same head (`fabric: fabK`). Once every head01 is MASTER and its head02
// STANDBY, it waits 3 s, reads each head01 smhad's utime+stime and VmRSS
// (/proc) and its polls answered (smha_poll_rtt_seconds_count, from its
// metrics), waits --seconds, reads them again. The baseline, in the same run:
// one fabric alone. Printed per instance (median over instances and runs) and
// for the head (the sum of its instances, median over runs). Exit status 3 if
// the target (<= 16 MiB and <= 1 % of a core per instance) is missed. Every
// process is stopped by PID (the fabric; OsmGuard for the OpenSMs).
//
//   bench_instances [--instances N (8)] [--runs R (3)] [--seconds S (10)]
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
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

struct Sample {
  smha::bench::ProcSample proc;
  double polls = 0;
};

double polls_answered(const SmhadHead& h) {
  auto r = smhad_call(h, "metrics", json::object());
  if (!r || !r->is_ok()) throw std::runtime_error(h.name + ": no metrics");
  std::istringstream in(r->data.value("text", ""));
  for (std::string line; std::getline(in, line);)
    if (line.rfind("smha_poll_rtt_seconds_count", 0) == 0) return std::stod(line.substr(line.rfind(' ') + 1));
  throw std::runtime_error(h.name + ": no smha_poll_rtt_seconds_count");
}

Sample sample(int pid, const SmhadHead& h) { return Sample{smha::bench::proc_sample(pid), polls_answered(h)}; }

// One fabric: its ibsim, its two heads, the guard of their OpenSMs.
struct Fabric {
  explicit Fabric(int k) : ib(topology_path("two-switch-4hca.net")) {
    const int boot = ib.start_opensm("Hca3", 0);
    if (!ib.wait_subnet_up(boot, 60s)) throw std::runtime_error("fabric " + std::to_string(k) + ": no SUBNET UP");
    const auto p1 = ib.node_port("Hca1");
    const auto p2 = ib.node_port("Hca2");
    if (!p1 || !p2) throw std::runtime_error("fabric " + std::to_string(k) + ": no ports");
    ib.stop_opensm(boot);
    h1 = SmhadHead{"head01", "Hca1", p1->port_guid, ib.scratch_dir() + "/head01"};
    h2 = SmhadHead{"head02", "Hca2", p2->port_guid, ib.scratch_dir() + "/head02"};
    SmhadOptions o;  // the defaults: 100 ms polls, 3 misses
    o.extra = "fabric: fab" + std::to_string(k) + "\n";
    write_smhad_config(h1, {{"head02", p2->port_guid, 0}}, o);
    write_smhad_config(h2, {{"head01", p1->port_guid, 0}}, o);
  }
  ~Fabric() {
    for (auto* h : {&h1, &h2})
      if (h->pidx >= 0 && ib.process_running(h->pidx)) ib.stop_process(h->pidx);
  }
  void start() {
    json s;
    start_smhad(ib, h1, SMHA_SMHAD);
    if (!wait_status(ib, h1, guard, local_master, 60s, &s)) throw std::runtime_error("head01 never MASTER");
    start_smhad(ib, h2, SMHA_SMHAD);
    if (!wait_status(ib, h2, guard, [](const json& j) { return j["role"] == "standby"; }, 60s, &s))
      throw std::runtime_error("head02 never STANDBY");
  }
  IbsimFabric ib;
  OsmGuard guard;
  SmhadHead h1, h2;
};

struct Result {
  std::vector<double> rss, cpu, polls;  // per instance
  double head_rss = 0, head_cpu = 0;    // the head's sum
};

Result run_once(int fabrics, int seconds) {
  std::vector<std::unique_ptr<Fabric>> fs;
  for (int k = 0; k < fabrics; ++k) fs.push_back(std::make_unique<Fabric>(k));
  for (auto& f : fs) f->start();
  std::this_thread::sleep_for(3s);  // start-up work (first sweeps, census) done
  std::vector<Sample> before;
  for (auto& f : fs) before.push_back(sample(f->ib.process_pid(f->h1.pidx), f->h1));
  std::this_thread::sleep_for(std::chrono::seconds(seconds));
  const double ticks = static_cast<double>(::sysconf(_SC_CLK_TCK));
  Result r;
  for (std::size_t i = 0; i < fs.size(); ++i) {
    const Sample after = sample(fs[i]->ib.process_pid(fs[i]->h1.pidx), fs[i]->h1);
    const double cpu = (after.proc.cpu_ticks - before[i].proc.cpu_ticks) / (seconds * ticks) * 100.0;
    r.rss.push_back(after.proc.rss_mib);
    r.cpu.push_back(cpu);
    r.polls.push_back((after.polls - before[i].polls) / seconds);
    r.head_rss += after.proc.rss_mib;
    r.head_cpu += cpu;
  }
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  int instances = 8, runs = 3, seconds = 10;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--instances")) instances = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--runs")) runs = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--seconds")) seconds = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: bench_instances [--instances N] [--runs R] [--seconds S]\n");
      return 2;
    }
  }
  if (instances < 1 || instances > 16 || runs < 1 || seconds < 1) {
    std::fprintf(stderr, "bench_instances: --instances 1..16, --runs >= 1, --seconds >= 1\n");
    return 2;
  }
  struct Row {
    int fabrics;
    std::vector<double> rss, cpu, polls, head_rss, head_cpu;
  };
  std::vector<Row> rows{{1, {}, {}, {}, {}, {}}, {instances, {}, {}, {}, {}, {}}};
  int failed = 0;
  for (int r = 0; r < runs; ++r)
    for (auto& row : rows) {
      try {
        const Result res = run_once(row.fabrics, seconds);
        row.rss.insert(row.rss.end(), res.rss.begin(), res.rss.end());
        row.cpu.insert(row.cpu.end(), res.cpu.begin(), res.cpu.end());
        row.polls.insert(row.polls.end(), res.polls.begin(), res.polls.end());
        row.head_rss.push_back(res.head_rss);
        row.head_cpu.push_back(res.head_cpu);
        std::fprintf(stderr, "run %d, %d fabric(s): per instance %.1f MiB %.2f %% %.1f polls/s; head %.1f MiB %.2f %%\n",
                     r + 1, row.fabrics, median(res.rss), median(res.cpu), median(res.polls), res.head_rss,
                     res.head_cpu);
      } catch (const std::exception& e) {
        ++failed;
        std::fprintf(stderr, "run %d, %d fabric(s) failed: %s\n", r + 1, row.fabrics, e.what());
      }
    }
  std::printf("\nsmhad instances on one head, idle at 100 ms polls, each fabric ibsim two-switch-4hca with a "
              "standby peer; %d run(s) x %d s, median (%d failed)\n", runs, seconds, failed);
  std::printf("%-22s %14s %16s %18s %14s %16s\n", "head runs", "RSS MiB/inst", "CPU %/inst", "SMInfo polls/s/inst",
              "head RSS MiB", "head CPU %");
  for (const auto& row : rows)
    std::printf("%-22s %14.1f %16.2f %18.1f %14.1f %16.2f\n",
                (std::to_string(row.fabrics) + (row.fabrics == 1 ? " instance (baseline)" : " instances")).c_str(),
                median(row.rss), median(row.cpu), median(row.polls), median(row.head_rss), median(row.head_cpu));
  const Row& many = rows.back();
  if (many.rss.empty()) return 1;
  const bool met = median(many.rss) <= 16.0 && median(many.cpu) <= 1.0;
  std::printf("target (per instance <= 16 MiB RSS, <= 1 %% of a core): %s\n", met ? "met" : "MISSED");
  return met ? 0 : 3;
}
