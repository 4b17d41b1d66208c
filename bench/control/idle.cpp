// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// bench_control, part 2: smhad's resident memory and CPU while idle at 10 Hz
// polling, beside OpenSM's in the same run (the baseline).
//
// Each run builds a fresh ibsim fabric (two-switch-4hca), lets a plain OpenSM
// assign LIDs once, then starts two smhad heads (head01 at Hca1, head02 at Hca2,
// poll_interval_ms 100 = 10 Hz, each running its own OpenSM under umad2sim, the
// YAML as tests/ibsim/service writes it). Once head01 is MASTER and head02
// STANDBY, it waits `settle` and reads utime+stime (/proc/<pid>/stat) and VmRSS
// (/proc/<pid>/status) of the four processes, waits `seconds`, and reads them
// again. CPU % of one core = CPU ticks used / (seconds x CLK_TCK) x 100. Every
// process is stopped by PID (the fabric; OsmGuard for the OpenSMs smhad started).
#include "idle.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <thread>

#include "ibsim_harness.hpp"
#include "proc_sample.hpp"
#include "smhad_heads.hpp"

namespace {

using namespace std::chrono_literals;
using namespace smha::testing;
using nlohmann::json;
using smha::bench::median;
using smha::bench::proc_sample;
using Sample = smha::bench::ProcSample;

struct Row {
  std::vector<double> rss, cpu;
};

// One run; appends to rows[0..3]: smhad master, smhad standby, OpenSM master, OpenSM standby.
void run_once(int seconds, std::vector<Row>& rows) {
  IbsimFabric f(topology_path("two-switch-4hca.net"));
  OsmGuard guard;
  const int boot = f.start_opensm("Hca3", 0);
  if (!f.wait_subnet_up(boot, 30s)) throw std::runtime_error("boot OpenSM: no SUBNET UP");
  const auto p1 = f.node_port("Hca1");
  const auto p2 = f.node_port("Hca2");
  if (!p1 || !p2 || !p1->lid || !p2->lid) throw std::runtime_error("no LIDs for the heads");
  f.stop_opensm(boot);
  SmhadHead h1{"head01", "Hca1", p1->port_guid, f.scratch_dir() + "/head01"};
  SmhadHead h2{"head02", "Hca2", p2->port_guid, f.scratch_dir() + "/head02"};
  SmhadOptions ten_hz;  // the defaults: 100 ms polls, 3 misses
  ten_hz.poll_interval_ms = 100;
  write_smhad_config(h1, {{"head02", p2->port_guid, p2->lid}}, ten_hz);
  write_smhad_config(h2, {{"head01", p1->port_guid, p1->lid}}, ten_hz);
  start_smhad(f, h1, SMHA_SMHAD);
  json s1, s2;
  if (!wait_status(f, h1, guard, local_master, 30s, &s1)) throw std::runtime_error("head01 never MASTER");
  start_smhad(f, h2, SMHA_SMHAD);
  if (!wait_status(f, h2, guard, [](const json& j) {
        return j["local"]["state"] == "STANDBY" && j["role"] == "standby";
      }, 30s, &s2))
    throw std::runtime_error("head02 never STANDBY");
  if (!wait_status(f, h1, guard, [](const json& j) { return j["peers"][0]["state"] == "STANDBY"; }, 10s, &s1))
    throw std::runtime_error("head01 does not see head02");
  std::this_thread::sleep_for(3s);  // let start-up work (first sweeps, adoption) finish
  const std::vector<int> pids{f.process_pid(h1.pidx), f.process_pid(h2.pidx), s1["opensm"]["pid"].get<int>(),
                              s2["opensm"]["pid"].get<int>()};
  std::vector<Sample> before;
  for (int pid : pids) before.push_back(proc_sample(pid));
  std::this_thread::sleep_for(std::chrono::seconds(seconds));
  const double ticks = static_cast<double>(::sysconf(_SC_CLK_TCK));
  for (std::size_t i = 0; i < pids.size(); ++i) {
    const Sample after = proc_sample(pids[i]);
    rows[i].rss.push_back(after.rss_mib);
    rows[i].cpu.push_back((after.cpu_ticks - before[i].cpu_ticks) / (seconds * ticks) * 100.0);
  }
  f.stop_process(h1.pidx);
  f.stop_process(h2.pidx);
}

}  // namespace

int run_idle_bench(int runs, int seconds) {
  std::vector<Row> rows(4);
  int failed = 0;
  for (int r = 0; r < runs; ++r) {
    try {
      run_once(seconds, rows);
      std::fprintf(stderr, "idle run %d: smhad master %.1f MiB %.2f %%, OpenSM master %.1f MiB %.2f %%\n", r + 1,
                   rows[0].rss.back(), rows[0].cpu.back(), rows[2].rss.back(), rows[2].cpu.back());
    } catch (const std::exception& e) {
      ++failed;
      std::fprintf(stderr, "idle run %d failed: %s\n", r + 1, e.what());
    }
  }
  std::printf("\nidle at 10 Hz polling (poll_interval_ms 100), two heads on ibsim two-switch-4hca, "
              "%d run(s) x %d s, median (%d failed)\n", runs, seconds, failed);
  std::printf("%-26s %10s %18s\n", "process", "RSS MiB", "CPU % of one core");
  const char* names[] = {"smhad head01 (master)", "smhad head02 (standby)", "OpenSM head01 (master)",
                         "OpenSM head02 (standby)"};
  for (int i = 0; i < 4; ++i)
    std::printf("%-26s %10.1f %18.2f\n", names[i], median(rows[i].rss), median(rows[i].cpu));
  if (rows[0].rss.empty()) return 1;
  const bool met = std::max(median(rows[0].rss), median(rows[1].rss)) <= 16.0 &&
                   std::max(median(rows[0].cpu), median(rows[1].cpu)) <= 1.0;
  std::printf("target (smhad <= 16 MiB RSS, <= 1 %% of a core): %s\n", met ? "met" : "MISSED");
  return met ? 0 : 3;
}
