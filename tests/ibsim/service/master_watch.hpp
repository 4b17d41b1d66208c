// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// The heads' SMInfo watched from Hca3 for a whole drill: bench_failover_probe
// (SMHA_PROBE) polls each head's LID every kWatchIntervalMs; verdict() reads
// its output as "did two heads answer MASTER, each after the other had" (a
// planned handover's old master answering MASTER just before it hands over is
// not two masters; a hung master waking up as MASTER is). Stopped by the
// fabric, also on failure.
#pragma once

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "ibsim_harness.hpp"

namespace smha::testing {

// The probe's SMInfo polling of the heads (each LID in turn).
inline constexpr int kWatchIntervalMs = 20;

// bench_failover_probe output (`<ns> <lid> <STATE|error:code>`, every answer)
// read as "did two heads answer MASTER, each after the other had".
class MasterWatch {
 public:
  MasterWatch(IbsimFabric& f, std::vector<int> lids) : f_(f), lids_(std::move(lids)) {
    std::vector<std::string> argv{SMHA_PROBE, "--interval-ms", std::to_string(kWatchIntervalMs), "--every", "1"};
    for (int lid : lids_) {
      argv.push_back("--lid");
      argv.push_back(std::to_string(lid));
    }
    pidx_ = f_.spawn("Hca3", argv);
  }
  ~MasterWatch() { stop(); }
  MasterWatch(const MasterWatch&) = delete;
  MasterWatch& operator=(const MasterWatch&) = delete;

  void stop() {
    if (pidx_ >= 0 && f_.process_running(pidx_)) f_.stop_process(pidx_);
  }
  bool running() { return f_.process_running(pidx_); }

  struct Verdict {
    int answers = 0;          // successful answers seen
    int confirmed_dual = 0;   // overlaps where both answered MASTER in turn
    std::string first_dual;   // the lines around the first one
    std::map<int, std::string> last;  // latest successful answer per LID
  };
  Verdict verdict() const {
    Verdict v;
    std::istringstream in(f_.process_stdout(pidx_));
    std::map<int, std::string> state;
    int dual_started_by = -1;  // the LID whose answer made both MASTER
    std::vector<std::string> recent;
    for (std::string line; std::getline(in, line);) {
      long long ns = 0;
      int lid = 0;
      char what[64] = {};
      if (std::sscanf(line.c_str(), "%lld %d %63s", &ns, &lid, what) != 3) continue;
      recent.push_back(line);
      if (recent.size() > 8) recent.erase(recent.begin());
      if (std::string(what).rfind("error:", 0) == 0) continue;  // lost: keep the last state
      ++v.answers;
      state[lid] = what;
      const bool dual = std::count_if(state.begin(), state.end(),
                                      [](const auto& kv) { return kv.second == "MASTER"; }) >= 2;
      if (!dual) {
        dual_started_by = -1;
      } else if (dual_started_by < 0) {
        dual_started_by = lid;
      } else if (lid != dual_started_by && std::string(what) == "MASTER") {
        if (v.confirmed_dual++ == 0)
          for (const auto& r : recent) v.first_dual += r + "\n";
        dual_started_by = lid;
      }
    }
    v.last = state;
    return v;
  }

 private:
  IbsimFabric& f_;
  std::vector<int> lids_;
  int pidx_ = -1;
};

}  // namespace smha::testing
