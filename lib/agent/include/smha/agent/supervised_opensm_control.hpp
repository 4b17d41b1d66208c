// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// agent::OpensmControl over opensm::OpensmSupervisor: the one path through which
// smha drives OpenSM, in smhad (PosixProcessRunner, PosixFileSystem,
// AsioScheduler) and in the simulated fabric (its simulated processes and
// files on its virtual clock).
//
// The priority the engine asks for is rendered into sm_priority.
// adopt_running() (smhad start) or else start() adopts a running OpenSM named by
// the supervisor's pidfile and applies the difference between its file and ours
// (SIGHUP or restart, as a reload would; adopt_running() at the priority its
// file holds, which the engine then changes if it must). The agent's exit handler runs only for exits nobody asked for
// (crash or permanent failure). state(): Running while the supervisor runs a
// process (or is restarting it on request); Exited after an unexpected exit
// (Backoff); Failed once supervision gave up; else Stopped. In Failed, start()
// refuses (no respawn loop); only a reload with a new file retries.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "smha/agent/seams.hpp"
#include "smha/core/scheduler.hpp"
#include "smha/opensm/conf.hpp"
#include "smha/opensm/supervisor.hpp"
#include "smha/os/file_system.hpp"
#include "smha/os/process_runner.hpp"

namespace smha::agent {

// Renders opensm.conf for an effective sm_priority (the engine's choice).
using PriorityRenderer = std::function<Result<std::string>(std::uint8_t priority)>;

class SupervisedOpensmControl final : public OpensmControl {
 public:
  // References must outlive this object. (A maintenance hold is the engine's:
  // sm::HoldChanged.)
  SupervisedOpensmControl(Scheduler& sched, os::ProcessRunner& runner, os::FileSystem& fs,
                          opensm::OpensmSupervisor::SpecFactory spec,
                          opensm::SupervisorOptions options, PriorityRenderer render);
  ~SupervisedOpensmControl() override;

  Status start(std::uint8_t priority) override;
  Status stop(bool force) override;
  Status restart(std::uint8_t priority, bool force) override;
  Status set_priority(std::uint8_t priority) override;
  sm::ProcessState state() const override;
  void set_exit_handler(ExitHandler h) override { on_exit_ = std::move(h); }
  bool adopt_running() override;
  void fabric_master(bool answers) override { sup_->set_no_master(!answers); }

  // Config reload: takes the new renderer, re-renders at the current priority and
  // applies the change (SIGHUP or restart, classified against the file on disk).
  // `decision` receives the classification. On error the old renderer stays.
  Result<opensm::ReloadAction> reload(PriorityRenderer render, opensm::ReloadDecision& decision);

  const opensm::SupervisorStatus& supervisor_status() const { return sup_->status(); }
  // opensm.log_file of a reload, before reload() restarts OpenSM with it.
  void set_log_file(std::string path) { sup_->set_log_file(std::move(path)); }
  std::uint8_t priority() const { return priority_; }

 private:
  Status write_and_apply(std::uint8_t priority, opensm::ConfChangeKind kind);
  // An adopted OpenSM runs the file the previous smhad wrote: applies `text`
  // to it as a reload would (nothing if equal).
  Status apply_to_adopted(const std::string& text);
  void changed(const opensm::SupervisorStatus& st);

  void kill_now();  // force: SIGKILL the running OpenSM at once (fencing a hung one)

  os::ProcessRunner& runner_;
  os::FileSystem& fs_;
  std::string conf_path_;
  PriorityRenderer render_;
  std::unique_ptr<opensm::OpensmSupervisor> sup_;
  ExitHandler on_exit_;
  // start() was called while the supervisor waits out its restart backoff:
  // state() reports Running (the respawn is on its way), not Exited again.
  bool respawn_requested_ = false;
  std::uint8_t priority_ = 0;
  bool stop_requested_ = false;
  opensm::SupervisorState last_state_ = opensm::SupervisorState::Stopped;
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
};

}  // namespace smha::agent
