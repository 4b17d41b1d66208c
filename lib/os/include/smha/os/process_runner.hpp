// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// ProcessRunner: the seam through which smha starts, signals and watches OpenSM.
// Real implementation: PosixProcessRunner. Test implementations: the simulated
// fabric (lib/sim) and FakeProcessRunner.
#pragma once

#include <csignal>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "smha/core/result.hpp"

namespace smha::os {

struct ProcessSpec {
  std::string path;                                          // executable, absolute
  std::vector<std::string> argv;                             // argv[0] included; no shell
  std::vector<std::pair<std::string, std::string>> env;      // added to / overriding the inherited environment
  std::string cwd;                                           // empty: inherit
  // Signal the child gets when the thread that spawned it exits (PR_SET_PDEATHSIG);
  // 0: none. A supervisor that must survive its own restart (adoption) sets 0.
  int parent_death_signal = SIGTERM;
};

struct ExitInfo {
  int pid = 0;
  bool signaled = false;  // true: killed by `status` (a signal number); false: exited with `status`
  int status = 0;
};

enum class OutputStream { Stdout, Stderr };

class ProcessRunner {
 public:
  using ExitHandler = std::function<void(const ExitInfo&)>;
  using OutputHandler = std::function<void(OutputStream, std::string_view line)>;

  virtual ~ProcessRunner() = default;

  // Starts `spec` in its own process group. Returns the pid. `on_output` gets each
  // line the child writes; `on_exit` is called once when it ends. Both run on the
  // owner's event loop, never from inside this call. On failure nothing is running.
  virtual Result<int> spawn(const ProcessSpec& spec, OutputHandler on_output,
                            ExitHandler on_exit) = 0;

  // Sends `signal` to the process group of `pid`.
  virtual Status kill(int pid, int signal) = 0;

  // Watches a process this runner did not spawn (adoption after a smhad restart).
  // `on_exit` is called once when it is gone (exit status unknown: status = -1).
  virtual Status adopt(int pid, ExitHandler on_exit) = 0;
};

}  // namespace smha::os
