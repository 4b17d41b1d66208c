// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// PosixProcessRunner: the real ProcessRunner (Linux). Spawns with fork + execve
// (no shell), watches exits through pidfd_open(2) (Linux >= 5.3) on the caller's
// boost::asio::io_context, and reads the child's stdout/stderr through pipes.
//
// Child set-up, in order: own process group (setpgid(0, 0)); PR_SET_PDEATHSIG if
// spec.parent_death_signal != 0 (note: the kernel sends it when the *thread* that
// called spawn() exits, not the process, so call spawn() only from a long-lived
// thread such as the io_context thread); every signal disposition reset to default
// and the signal mask cleared, then SIGPIPE set to SIG_IGN (inherited through
// exec: an OpenSM whose supervisor died must get EPIPE on stdout, not die of
// SIGPIPE at its next log line); stdin from /dev/null; stdout and stderr to pipes;
// every other descriptor marked close-on-exec (close_range), so nothing of the
// parent leaks into the child.
//
// spawn() returns only after execve succeeded or failed (a close-on-exec error
// pipe reports the child's errno), so an exec error is a Result error and
// /proc/<pid>/exe already names the new program when spawn() returns.
//
// Handlers run on the io_context. For a spawned child, every output line is
// delivered before its on_exit (the pipes are drained; a grandchild that keeps
// the pipe open delays on_exit by at most `drain_timeout`). The exit is noticed as
// soon as the pidfd becomes readable.
//
// Nobody else in the process may reap children with waitpid(-1) or ignore
// SIGCHLD: the runner reaps its own children with waitpid(pid).
//
// One thread: use it only from the io_context's thread.
#pragma once

#include <chrono>
#include <map>
#include <memory>

#include <boost/asio/io_context.hpp>

#include "smha/os/process_runner.hpp"

namespace smha::os {

class PosixProcessRunner final : public ProcessRunner {
 public:
  struct Options {
    // How long on_exit waits for the pipes to reach EOF after the process ended.
    std::chrono::milliseconds drain_timeout{200};
    // Longer lines are delivered in pieces of this size.
    std::size_t max_line = 8192;
  };

  explicit PosixProcessRunner(boost::asio::io_context& io);
  PosixProcessRunner(boost::asio::io_context& io, Options options);
  // Stops watching. Never signals a process: what was running keeps running (a
  // child that exits later stays a zombie until someone adopts and reaps it, or
  // until this process exits).
  ~PosixProcessRunner() override;

  PosixProcessRunner(const PosixProcessRunner&) = delete;
  PosixProcessRunner& operator=(const PosixProcessRunner&) = delete;

  // Errors: "invalid" (empty path/argv), "failed" (pipe/fork/pidfd failed;
  // the message names the call and errno), "exec" (execve failed in the child:
  // message names the path and errno; the child has been reaped), "resources"
  // (any of these failed with EMFILE, ENFILE, EAGAIN or ENOMEM: transient).
  Result<int> spawn(const ProcessSpec& spec, OutputHandler on_output,
                    ExitHandler on_exit) override;

  // Sends `signal` to the process group of `pid` (a spawned child always leads its
  // group; an adopted process is signalled as a group only if it leads one).
  // SIGHUP and SIGUSR1 go to the main thread of `pid` only (tgkill): OpenSM's
  // main loop wakes for them only if its own thread takes the signal.
  // Errors: "not_found" if the runner saw `pid` exit (its PID may be reused), or
  // the process does not exist; "failed" for other errno.
  Status kill(int pid, int signal) override;

  // Watches `pid` through a pidfd. If the process happens to be a child of this
  // process (it was spawned by an earlier runner), it is reaped and the real status
  // reported; otherwise ExitInfo.status is -1. No output is captured.
  // Errors: "not_found" (no such process), "busy" (already watched), "failed"
  // (pidfd_open failed for another reason).
  Status adopt(int pid, ExitHandler on_exit) override;

  // Number of processes currently watched (tests).
  std::size_t watched() const { return procs_.size(); }

 private:
  struct Proc;
  void watch_exit(const std::shared_ptr<Proc>& proc);
  void read_stream(const std::shared_ptr<Proc>& proc, int index);
  void maybe_finish(const std::shared_ptr<Proc>& proc);
  void finish(const std::shared_ptr<Proc>& proc);

  boost::asio::io_context& io_;
  Options options_;
  std::map<int, std::shared_ptr<Proc>> procs_;
};

// Whether a spawn that failed with `err` (from fork, pipe2, pidfd_open or the
// child's set-up) may work later: out of descriptors (EMFILE, ENFILE), processes
// (EAGAIN) or memory (ENOMEM). Such errors are Errc::Resources, retried with
// backoff by the supervisor; every other one is Errc::Failed or Errc::Exec.
bool transient_spawn_errno(int err);

}  // namespace smha::os
