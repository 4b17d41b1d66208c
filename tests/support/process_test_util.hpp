// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// Test helpers for real-process tests: scratch directories, fake "opensm" shell
// scripts, waiting on conditions while running the io_context, and a guard that
// SIGKILLs (by PID, only if still our child) every process a test saw.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <string>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

namespace smha::testing {

class ScratchDir {
 public:
  ScratchDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "smha-test-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Writes an executable /bin/sh script and returns its path.
inline std::string write_script(const ScratchDir& dir, const std::string& name, const std::string& body) {
  std::string path = dir / name;
  std::ofstream(path) << "#!/bin/sh\n" << body << "\n";
  ::chmod(path.c_str(), 0755);
  return path;
}

inline std::string read_text(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Runs `io` until `pred` holds or `timeout` passes. Returns pred().
inline bool run_until(boost::asio::io_context& io, const std::function<bool()>& pred,
                      std::chrono::milliseconds timeout = std::chrono::milliseconds(5000)) {
  auto work = boost::asio::make_work_guard(io);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= deadline) return pred();
    if (io.stopped()) io.restart();
    io.run_one_for(std::chrono::milliseconds(5));
  }
  return true;
}

// Runs `io` for `d` (to check that something does NOT happen within d).
inline void run_for(boost::asio::io_context& io, std::chrono::milliseconds d) {
  run_until(io, [] { return false; }, d);
}

inline int parent_of(int pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return -1;
  auto close = line.rfind(')');
  if (close == std::string::npos) return -1;
  int ppid = -1;
  char state = 0;
  if (std::sscanf(line.c_str() + close + 1, " %c %d", &state, &ppid) != 2) return -1;
  return ppid;
}

inline bool alive(int pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  auto close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] != 'Z';
}

// Every process a test starts is stopped by its PID, also when the test fails.
class ProcessGuard {
 public:
  void add(int pid) {
    if (pid > 0) pids_.insert(pid);
  }
  ~ProcessGuard() {
    for (int pid : pids_) {
      if (parent_of(pid) != ::getpid()) continue;  // reaped already (PID may be reused): leave it
      ::kill(-pid, SIGKILL);
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }

 private:
  std::set<int> pids_;
};

}  // namespace smha::testing
