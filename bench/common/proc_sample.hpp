// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// What the idle benches read of a process: its CPU time (utime + stime from
// /proc/<pid>/stat, in clock ticks) and its resident memory (VmRSS from
// /proc/<pid>/status), and the median they print.
#pragma once

#include <algorithm>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace smha::bench {

struct ProcSample {
  double cpu_ticks = 0;
  double rss_mib = 0;
};

inline ProcSample proc_sample(int pid) {
  ProcSample s;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) throw std::runtime_error("process " + std::to_string(pid) + " is gone");
  std::istringstream rest(line.substr(line.rfind(')') + 2));
  std::string skip;
  for (int i = 3; i <= 13; ++i) rest >> skip;  // state .. cmajflt
  double utime = 0, stime = 0;
  rest >> utime >> stime;
  s.cpu_ticks = utime + stime;
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  while (std::getline(status, line))
    if (line.rfind("VmRSS:", 0) == 0) s.rss_mib = std::stod(line.substr(6)) / 1024.0;
  return s;
}

inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

}  // namespace smha::bench
