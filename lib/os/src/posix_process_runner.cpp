// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/os/posix_process_runner.hpp"

#include <fcntl.h>
#include <linux/close_range.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <optional>
#include <set>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>

extern char** environ;  // NOLINT(readability-identifier-naming)

namespace smha::os {

namespace asio = boost::asio;

namespace {

std::string errno_text(int err) { return std::error_code(err, std::system_category()).message(); }

// Resources for what may work later, else `otherwise` (Failed for the parent's
// calls, Exec for the child's set-up).
Errc spawn_code(int err, Errc otherwise = Errc::Failed) {
  return transient_spawn_errno(err) ? Errc::Resources : otherwise;
}

int open_pidfd(int pid) { return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)); }

// Everything the child needs, prepared before fork(): after fork() the child may
// only call async-signal-safe functions.
struct ChildSetup {
  const char* path = nullptr;
  char* const* argv = nullptr;
  char* const* envp = nullptr;
  const char* cwd = nullptr;  // nullptr: inherit
  int parent_death_signal = 0;
  pid_t parent = 0;
  int stdout_fd = -1;
  int stderr_fd = -1;
  int error_fd = -1;  // close-on-exec; gets errno if set-up or exec fails
  int max_fd = 1024;  // fallback when close_range() is not available
};

// What the child reports when its set-up or exec fails: the call and errno.
enum class ChildCall : int { Setup = 0, Chdir = 1, Exec = 2 };
struct ChildError {
  ChildCall call;
  int err;
};

[[noreturn]] void report_and_exit(int error_fd, int err, ChildCall call = ChildCall::Setup) {
  const ChildError e{call, err};
  ssize_t n = ::write(error_fd, &e, sizeof e);
  (void)n;
  ::_exit(127);
}

[[noreturn]] void run_child(const ChildSetup& s) {
  // Move every descriptor we still need above 2 first: if the parent had closed
  // its stdio, pipe2() may have returned 0..2 and the dup2()s below would clobber them.
  int error_fd = ::fcntl(s.error_fd, F_DUPFD_CLOEXEC, 3);
  if (error_fd < 0) ::_exit(127);
  if (::setpgid(0, 0) != 0) report_and_exit(error_fd, errno);
  if (s.parent_death_signal != 0) {
    if (::prctl(PR_SET_PDEATHSIG, s.parent_death_signal) != 0) report_and_exit(error_fd, errno);
    // The parent may have died between fork() and prctl(): then nobody would tell us.
    if (::getppid() != s.parent) ::_exit(127);
  }
  struct sigaction sa {};
  sigemptyset(&sa.sa_mask);
  sa.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig == SIGKILL || sig == SIGSTOP) continue;
    ::sigaction(sig, &sa, nullptr);  // fails harmlessly for signals glibc reserves
  }
  sa.sa_handler = SIG_IGN;
  ::sigaction(SIGPIPE, &sa, nullptr);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);

  int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (devnull < 0) report_and_exit(error_fd, errno);
  const int sources[3] = {::fcntl(devnull, F_DUPFD_CLOEXEC, 3), ::fcntl(s.stdout_fd, F_DUPFD_CLOEXEC, 3),
                          ::fcntl(s.stderr_fd, F_DUPFD_CLOEXEC, 3)};
  for (int target = 0; target < 3; ++target) {
    if (sources[target] < 0) report_and_exit(error_fd, errno);
    if (::dup2(sources[target], target) < 0) report_and_exit(error_fd, errno);  // clears CLOEXEC
  }
  if (::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) != 0) {
    for (int fd = 3; fd < s.max_fd; ++fd) ::fcntl(fd, F_SETFD, FD_CLOEXEC);
  }
  if (s.cwd != nullptr && ::chdir(s.cwd) != 0) report_and_exit(error_fd, errno, ChildCall::Chdir);
  ::execve(s.path, s.argv, s.envp);
  report_and_exit(error_fd, errno, ChildCall::Exec);
}

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

}  // namespace

bool transient_spawn_errno(int err) { return err == EMFILE || err == ENFILE || err == EAGAIN || err == ENOMEM; }

struct PosixProcessRunner::Proc {
  int pid = 0;
  bool spawned = false;
  std::optional<asio::posix::stream_descriptor> pidfd;
  std::array<std::optional<asio::posix::stream_descriptor>, 2> pipes;  // stdout, stderr
  std::array<std::array<char, 4096>, 2> buf{};
  std::array<std::string, 2> partial;
  std::array<bool, 2> open{false, false};
  std::optional<asio::steady_timer> drain_timer;
  OutputHandler on_output;
  ExitHandler on_exit;
  bool exited = false;
  bool done = false;  // on_exit delivered, or the runner went away
  ExitInfo info;
};

PosixProcessRunner::PosixProcessRunner(asio::io_context& io) : PosixProcessRunner(io, Options{}) {}

PosixProcessRunner::PosixProcessRunner(asio::io_context& io, Options options)
    : io_(io), options_(options) {}

PosixProcessRunner::~PosixProcessRunner() {
  for (auto& [pid, proc] : procs_) {
    proc->done = true;
    boost::system::error_code ignored;
    if (proc->pidfd) proc->pidfd->close(ignored);
    for (auto& pipe : proc->pipes)
      if (pipe) pipe->close(ignored);
    if (proc->drain_timer) proc->drain_timer->cancel();
  }
}

Result<int> PosixProcessRunner::spawn(const ProcessSpec& spec, OutputHandler on_output,
                                      ExitHandler on_exit) {
  if (spec.path.empty() || spec.argv.empty())
    return make_error(Errc::Invalid, "spawn: empty executable path or argv");

  std::vector<char*> argv;
  for (const auto& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);

  std::set<std::string> overridden;
  std::vector<std::string> env_strings;
  for (const auto& [name, value] : spec.env) {
    overridden.insert(name);
    env_strings.push_back(name + "=" + value);
  }
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string_view entry(*e);
    auto eq = entry.find('=');
    if (overridden.count(std::string(entry.substr(0, eq)))) continue;
    env_strings.emplace_back(entry);
  }
  std::vector<char*> envp;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);

  int out[2] = {-1, -1}, err[2] = {-1, -1}, errp[2] = {-1, -1};
  auto close_all = [&] {
    for (int* p : {out, err, errp}) {
      close_fd(p[0]);
      close_fd(p[1]);
    }
  };
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0 || ::pipe2(errp, O_CLOEXEC) != 0) {
    int e = errno;
    close_all();
    return make_error(spawn_code(e), "spawn " + spec.path + ": pipe2: " + errno_text(e));
  }

  ChildSetup setup;
  setup.path = spec.path.c_str();
  setup.argv = argv.data();
  setup.envp = envp.data();
  setup.cwd = spec.cwd.empty() ? nullptr : spec.cwd.c_str();
  setup.parent_death_signal = spec.parent_death_signal;
  setup.parent = ::getpid();
  setup.stdout_fd = out[1];
  setup.stderr_fd = err[1];
  setup.error_fd = errp[1];
  struct rlimit rl {};
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
    setup.max_fd = static_cast<int>(std::min<rlim_t>(rl.rlim_cur, 65536));

  pid_t pid = ::fork();
  if (pid < 0) {
    int e = errno;
    close_all();
    return make_error(spawn_code(e), "spawn " + spec.path + ": fork: " + errno_text(e));
  }
  if (pid == 0) run_child(setup);

  close_fd(out[1]);
  close_fd(err[1]);
  close_fd(errp[1]);
  ChildError child{};
  ssize_t n;
  do {
    n = ::read(errp[0], &child, sizeof child);
  } while (n < 0 && errno == EINTR);
  close_fd(errp[0]);
  if (n == static_cast<ssize_t>(sizeof child)) {
    while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    close_all();
    const std::string what = child.call == ChildCall::Chdir ? "cannot change to directory " + spec.cwd + " for " + spec.path
                             : child.call == ChildCall::Exec ? "cannot execute " + spec.path
                                                             : "cannot set up the child for " + spec.path;
    return make_error(spawn_code(child.err, Errc::Exec), what + ": " + errno_text(child.err));
  }

  int pidfd = open_pidfd(pid);
  if (pidfd < 0) {
    int e = errno;
    ::kill(-pid, SIGKILL);
    while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    close_all();
    return make_error(spawn_code(e), "spawn " + spec.path + ": pidfd_open (needs Linux >= 5.3): " +
                                         errno_text(e));
  }

  auto proc = std::make_shared<Proc>();
  proc->pid = pid;
  proc->spawned = true;
  proc->on_output = std::move(on_output);
  proc->on_exit = std::move(on_exit);
  proc->info.pid = pid;
  proc->pidfd.emplace(io_, pidfd);
  proc->pipes[0].emplace(io_, out[0]);
  proc->pipes[1].emplace(io_, err[0]);
  proc->open = {true, true};
  procs_[pid] = proc;
  watch_exit(proc);
  read_stream(proc, 0);
  read_stream(proc, 1);
  return static_cast<int>(pid);
}

void PosixProcessRunner::read_stream(const std::shared_ptr<Proc>& proc, int index) {
  auto& pipe = *proc->pipes[index];
  pipe.async_read_some(
      asio::buffer(proc->buf[index]), [this, proc, index](const boost::system::error_code& ec, std::size_t n) {
        if (proc->done || ec == asio::error::operation_aborted) return;
        const auto stream = index == 0 ? OutputStream::Stdout : OutputStream::Stderr;
        auto& partial = proc->partial[index];
        if (!ec) {
          partial.append(proc->buf[index].data(), n);
          std::size_t start = 0;
          for (;;) {
            auto nl = partial.find('\n', start);
            if (nl == std::string::npos) break;
            std::string_view line(partial.data() + start, nl - start);
            if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
            if (proc->on_output) proc->on_output(stream, line);
            if (proc->done) return;
            start = nl + 1;
          }
          partial.erase(0, start);
          while (partial.size() >= options_.max_line) {
            if (proc->on_output) proc->on_output(stream, std::string_view(partial).substr(0, options_.max_line));
            if (proc->done) return;
            partial.erase(0, options_.max_line);
          }
          read_stream(proc, index);
          return;
        }
        // EOF (or a read error, which ends the stream just the same).
        if (!partial.empty() && proc->on_output) proc->on_output(stream, partial);
        partial.clear();
        if (proc->done) return;
        boost::system::error_code ignored;
        proc->pipes[index]->close(ignored);
        proc->open[index] = false;
        maybe_finish(proc);
      });
}

void PosixProcessRunner::watch_exit(const std::shared_ptr<Proc>& proc) {
  proc->pidfd->async_wait(asio::posix::descriptor_base::wait_read, [this, proc](const boost::system::error_code& ec) {
    if (proc->done || ec == asio::error::operation_aborted) return;
    int status = 0;
    pid_t r;
    do {
      // A spawned child is ours to reap; an adopted process usually is not a child
      // (ECHILD) unless an earlier runner in this process spawned it.
      r = ::waitpid(proc->pid, &status, proc->spawned ? 0 : WNOHANG);
    } while (r < 0 && errno == EINTR);
    if (r == proc->pid) {
      proc->info.signaled = WIFSIGNALED(status);
      proc->info.status = proc->info.signaled ? WTERMSIG(status) : WEXITSTATUS(status);
    } else {
      proc->info.signaled = false;
      proc->info.status = -1;
    }
    proc->exited = true;
    boost::system::error_code ignored;
    proc->pidfd->close(ignored);
    if (proc->open[0] || proc->open[1]) {
      proc->drain_timer.emplace(io_, options_.drain_timeout);
      proc->drain_timer->async_wait([this, proc](const boost::system::error_code& tec) {
        if (proc->done || tec == asio::error::operation_aborted) return;
        for (auto& partial : proc->partial) partial.clear();
        finish(proc);
      });
    }
    maybe_finish(proc);
  });
}

void PosixProcessRunner::maybe_finish(const std::shared_ptr<Proc>& proc) {
  if (proc->exited && !proc->open[0] && !proc->open[1]) finish(proc);
}

void PosixProcessRunner::finish(const std::shared_ptr<Proc>& proc) {
  if (proc->done) return;
  proc->done = true;
  boost::system::error_code ignored;
  for (auto& pipe : proc->pipes)
    if (pipe) pipe->close(ignored);
  if (proc->drain_timer) proc->drain_timer->cancel();
  procs_.erase(proc->pid);
  auto on_exit = std::move(proc->on_exit);
  if (on_exit) on_exit(proc->info);
}

Status PosixProcessRunner::kill(int pid, int signal) {
  if (pid <= 0) return make_error(Errc::Invalid, "kill: bad pid " + std::to_string(pid));
  int target = pid;
  auto it = procs_.find(pid);
  if (it != procs_.end() && it->second->exited)
    return make_error(Errc::NotFound, "kill: process " + std::to_string(pid) + " has exited");
  if (signal == SIGHUP || signal == SIGUSR1) {
    // OpenSM acts on these in its main loop, which sleeps in
    // cl_thread_suspend(10000) between checks: a signal taken by one of its other
    // threads leaves it asleep for up to 10 s (measured under ibsim: a planned
    // handover's SIGHUP sometimes ignored for > 5 s). tgkill() to the main
    // thread (tid == pid) interrupts that sleep.
    if (::syscall(SYS_tgkill, pid, pid, signal) != 0) {
      int e = errno;
      if (e == ESRCH) return make_error(Errc::NotFound, "kill: no process " + std::to_string(pid));
      return make_error(Errc::Failed, "tgkill " + std::to_string(pid) + ": " + errno_text(e));
    }
    return Status::Ok();
  }
  if (it != procs_.end() && it->second->spawned) {
    target = -pid;
  } else if (::getpgid(pid) == pid) {
    target = -pid;
  }
  if (::kill(target, signal) != 0) {
    int e = errno;
    if (e == ESRCH) return make_error(Errc::NotFound, "kill: no process " + std::to_string(pid));
    return make_error(Errc::Failed, "kill " + std::to_string(target) + ": " + errno_text(e));
  }
  return Status::Ok();
}

Status PosixProcessRunner::adopt(int pid, ExitHandler on_exit) {
  if (pid <= 0) return make_error(Errc::Invalid, "adopt: bad pid " + std::to_string(pid));
  if (procs_.count(pid)) return make_error(Errc::Busy, "adopt: process " + std::to_string(pid) + " is already watched");
  int fd = open_pidfd(pid);
  if (fd < 0) {
    int e = errno;
    if (e == ESRCH) return make_error(Errc::NotFound, "adopt: no process " + std::to_string(pid));
    return make_error(Errc::Failed, "adopt " + std::to_string(pid) + ": pidfd_open: " + errno_text(e));
  }
  auto proc = std::make_shared<Proc>();
  proc->pid = pid;
  proc->spawned = false;
  proc->on_exit = std::move(on_exit);
  proc->info.pid = pid;
  proc->pidfd.emplace(io_, fd);
  procs_[pid] = proc;
  watch_exit(proc);
  return Status::Ok();
}

}  // namespace smha::os
