// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// OpensmControl over the ProcessRunner + FileSystem seams: renders opensm.conf
// (through a replaceable renderer), spawns `opensm -F <conf> -g <guid>`, SIGHUPs
// it on a priority change, stops it with SIGTERM escalating to SIGKILL. The same
// class drives the simulated OpenSM (lib/sim) and, with the real renderer and
// runner, the real one.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "smha/agent/seams.hpp"
#include "smha/os/file_system.hpp"
#include "smha/os/process_runner.hpp"

namespace smha::agent {

// Renders the whole opensm.conf for a given sm_priority.
using ConfRenderer = std::function<std::string(std::uint8_t priority)>;

// The smallest opensm.conf smha needs: sm_priority and OpenSM's own polling keys.
struct MinimalConf {
  std::uint32_t sminfo_polling_timeout_ms = 10000;
  std::uint32_t polling_retry_number = 4;
  std::uint32_t sweep_interval_s = 10;
  std::uint64_t sm_key = 1;
};
std::string render_minimal_conf(const MinimalConf& conf, std::uint8_t priority);

struct OpensmLaunch {
  std::string binary = "/usr/sbin/opensm";
  std::string conf_path = "/run/smha/opensm.conf";
  Guid guid;                                   // -g
  std::vector<std::string> extra_args;         // appended to argv
  std::vector<std::pair<std::string, std::string>> env;
  std::string cwd;
  Duration stop_timeout = seconds(5);          // SIGTERM -> SIGKILL
};

class ProcessOpensmControl final : public OpensmControl {
 public:
  // References must outlive this object. It owns at most one OpenSM process.
  ProcessOpensmControl(os::ProcessRunner& runner, os::FileSystem& fs, Scheduler& sched,
                       OpensmLaunch launch, ConfRenderer render);
  ~ProcessOpensmControl() override;

  Status start(std::uint8_t priority) override;
  Status stop(bool force) override;
  Status restart(std::uint8_t priority, bool force) override;
  Status set_priority(std::uint8_t priority) override;
  // Takes over a running OpenSM this object did not start (smhad restarted),
  // rendered at `priority`. Error if the runner does not know the pid.
  Status adopt(int pid, std::uint8_t priority);
  sm::ProcessState state() const override { return state_; }
  void set_exit_handler(ExitHandler h) override { on_exit_ = std::move(h); }

  std::optional<int> pid() const { return pid_; }
  std::uint8_t priority() const { return priority_; }

 private:
  Status write_conf(std::uint8_t priority);
  void exited(int pid);

  os::ProcessRunner& runner_;
  os::FileSystem& fs_;
  Scheduler& sched_;
  OpensmLaunch launch_;
  ConfRenderer render_;
  ExitHandler on_exit_;
  std::optional<int> pid_;
  bool stopping_ = false;                       // the coming exit was asked for
  std::optional<std::uint8_t> start_after_exit_;
  std::optional<Scheduler::TimerId> kill_timer_;
  sm::ProcessState state_ = sm::ProcessState::Stopped;
  std::uint8_t priority_ = 0;
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
};

}  // namespace smha::agent
