// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <thread>
#include <vector>

#include "process_test_util.hpp"
#include "smha/opensm/process_identity.hpp"
#include "smha/os/posix_process_runner.hpp"

using namespace smha;
using namespace smha::opensm;
using namespace smha::os;
using namespace smha::testing;
using namespace std::chrono_literals;

namespace {

struct Captured {
  std::vector<std::string> out, err;
  std::vector<std::string> all;  // "o:<line>" / "e:<line>" in delivery order
  std::optional<ExitInfo> exit;
  bool output_after_exit = false;
};

ProcessRunner::OutputHandler capture_output(Captured& c) {
  return [&c](OutputStream s, std::string_view line) {
    if (c.exit) c.output_after_exit = true;
    (s == OutputStream::Stdout ? c.out : c.err).emplace_back(line);
    c.all.push_back((s == OutputStream::Stdout ? "o:" : "e:") + std::string(line));
  };
}
ProcessRunner::ExitHandler capture_exit(Captured& c) {
  return [&c](const ExitInfo& e) { c.exit = e; };
}

}  // namespace

TEST_CASE("spawn passes argv exactly, without a shell, with env and cwd", "[runner]") {
  ScratchDir dir;
  boost::asio::io_context io;
  PosixProcessRunner runner(io);
  ProcessGuard guard;
  auto script = write_script(dir, "args",
                             "for a in \"$@\"; do printf '[%s]\\n' \"$a\"; done\n"
                             "echo \"env=$SMHA_TEST_VAR\"\n"
                             "echo \"cwd=$(pwd)\"\n"
                             "echo \"stdin=$(readlink /proc/$$/fd/0)\"\n");
  ProcessSpec spec{script, {"fake-opensm", "a b", "$(touch MARK)", "; echo injected", "*", "'q'", ""},
                   {{"SMHA_TEST_VAR", "v 1"}}, dir.path()};
  Captured c;
  auto pid = runner.spawn(spec, capture_output(c), capture_exit(c));
  REQUIRE(pid.ok());
  guard.add(*pid);
  REQUIRE(run_until(io, [&] { return c.exit.has_value(); }));
  CHECK(c.out == std::vector<std::string>{"[a b]", "[$(touch MARK)]", "[; echo injected]", "[*]", "['q']", "[]",
                                          "env=v 1", "cwd=" + dir.path(), "stdin=/dev/null"});
  CHECK_FALSE(std::filesystem::exists(dir / "MARK"));
  CHECK(c.exit->pid == *pid);
  CHECK_FALSE(c.exit->signaled);
  CHECK(c.exit->status == 0);
}

TEST_CASE("the child leads its own process group, kill signals the whole group", "[runner]") {
  ScratchDir dir;
  boost::asio::io_context io;
  PosixProcessRunner runner(io);
  ProcessGuard guard;
  auto script = write_script(dir, "grp", "sleep 30 &\necho \"child $!\"\nwait\n");
  Captured c;
  auto pid = runner.spawn(ProcessSpec{script, {"grp"}, {}, ""}, capture_output(c), capture_exit(c));
  REQUIRE(pid.ok());
  guard.add(*pid);
  REQUIRE(run_until(io, [&] { return !c.out.empty(); }));
  CHECK(::getpgid(*pid) == *pid);
  CHECK(::getpgid(*pid) != ::getpgid(0));
  int grandchild = std::stoi(c.out[0].substr(6));
  CHECK(::getpgid(grandchild) == *pid);

  REQUIRE(runner.kill(*pid, SIGTERM).ok());
  REQUIRE(run_until(io, [&] { return c.exit.has_value(); }));
  CHECK(c.exit->signaled);
  CHECK(c.exit->status == SIGTERM);
  CHECK(run_until(io, [&] { return !alive(grandchild); }));
  // The runner saw it exit: its PID may be reused, so no more signals.
  auto again = runner.kill(*pid, SIGTERM);
  REQUIRE_FALSE(again.ok());
  CHECK(again.error().code == Errc::NotFound);
}

TEST_CASE("no descriptor of the parent leaks into the child", "[runner]") {
  boost::asio::io_context io;
  PosixProcessRunner runner(io);
  ProcessGuard guard;
  // A descriptor opened without O_CLOEXEC, as a careless library would.
  int leaky = ::open("/dev/null", O_RDONLY);
  REQUIRE(leaky >= 3);
  Captured c;
  auto pid = runner.spawn(ProcessSpec{"/bin/ls", {"ls", "-1", "/proc/self/fd"}, {}, ""}, capture_output(c),
                          capture_exit(c));
  ::close(leaky);
  REQUIRE(pid.ok());
  guard.add(*pid);
  REQUIRE(run_until(io, [&] { return c.exit.has_value(); }));
  // 0, 1, 2 and the directory ls itself opened to list /proc/self/fd.
  CHECK(c.out == std::vector<std::string>{"0", "1", "2", "3"});
  CHECK(c.exit->status == 0);
}

TEST_CASE("stdout and stderr arrive line by line, all before the exit", "[runner]") {
  ScratchDir dir;
  boost::asio::io_context io;
  PosixProcessRunner runner(io);
  ProcessGuard guard;
  auto script = write_script(dir, "out",
                             "echo out1\necho err1 >&2\necho 'out 2'\n"
                             "i=0; while [ $i -lt 200 ]; do echo \"bulk $i\"; i=$((i+1)); done\n"
                             "printf 'tail-without-newline'\nexit 3\n");
  Captured c;
  auto pid = runner.spawn(ProcessSpec{script, {"out"}, {}, ""}, capture_output(c), capture_exit(c));
  REQUIRE(pid.ok());
  guard.add(*pid);
  REQUIRE(run_until(io, [&] { return c.exit.has_value(); }));
  REQUIRE(c.out.size() == 203);
  CHECK(c.out[0] == "out1");
  CHECK(c.out[1] == "out 2");
  CHECK(c.out[2] == "bulk 0");
  CHECK(c.out[201] == "bulk 199");
  CHECK(c.out[202] == "tail-without-newline");
  CHECK(c.err == std::vector<std::string>{"err1"});
  CHECK_FALSE(c.output_after_exit);
  CHECK_FALSE(c.exit->signaled);
  CHECK(c.exit->status == 3);
}

TEST_CASE("an exit is detected at once", "[runner]") {
  boost::asio::io_context io;
  PosixProcessRunner runner(io);
  ProcessGuard guard;
  Captured c;
  auto pid = runner.spawn(ProcessSpec{"/bin/sleep", {"sleep", "30"}, {}, ""}, capture_output(c), capture_exit(c));
  REQUIRE(pid.ok());
  guard.add(*pid);
  std::chrono::steady_clock::time_point seen;
  auto on_exit = [&] {
    if (c.exit && seen == std::chrono::steady_clock::time_point{}) seen = std::chrono::steady_clock::now();
    return c.exit.has_value();
  };
  const auto t0 = std::chrono::steady_clock::now();
  REQUIRE(::kill(*pid, SIGKILL) == 0);  // behind the runner's back
  REQUIRE(run_until(io, on_exit));
  const auto latency = std::chrono::duration<double, std::milli>(seen - t0).count();
  INFO("exit detected " << latency << " ms after SIGKILL");
  WARN("exit detection latency: " << latency << " ms");
  CHECK(latency < 100.0);
  CHECK(c.exit->signaled);
  CHECK(c.exit->status == SIGKILL);
}

TEST_CASE("exec failures are errors and leave nothing running", "[runner]") {
  ScratchDir dir;
  boost::asio::io_context io;
  PosixProcessRunner runner(io);
  Captured c;
  auto missing = runner.spawn(ProcessSpec{dir / "no-such-opensm", {"opensm"}, {}, ""}, capture_output(c),
                              capture_exit(c));
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().code == Errc::Exec);
  CHECK(missing.error().message.find("no-such-opensm") != std::string::npos);
  CHECK(missing.error().message.find("No such file") != std::string::npos);

  std::ofstream(dir / "not-executable") << "#!/bin/sh\n";
  auto noexec = runner.spawn(ProcessSpec{dir / "not-executable", {"x"}, {}, ""}, capture_output(c), capture_exit(c));
  REQUIRE_FALSE(noexec.ok());
  CHECK(noexec.error().code == Errc::Exec);
  CHECK(noexec.error().message.find("Permission denied") != std::string::npos);

  auto badcwd = runner.spawn(ProcessSpec{"/bin/true", {"true"}, {}, dir / "no-such-dir"}, capture_output(c),
                             capture_exit(c));
  REQUIRE_FALSE(badcwd.ok());
  // The message names the call that failed (chdir), not exec.
  CHECK(badcwd.error().message == "cannot change to directory " + (dir / "no-such-dir") +
                                      " for /bin/true: No such file or directory");
  std::ofstream(dir / "a-file") << "x";
  auto filecwd = runner.spawn(ProcessSpec{"/bin/true", {"true"}, {}, dir / "a-file/state"}, capture_output(c),
                              capture_exit(c));
  REQUIRE_FALSE(filecwd.ok());
  CHECK(filecwd.error().message == "cannot change to directory " + (dir / "a-file/state") +
                                       " for /bin/true: Not a directory");
  CHECK(runner.watched() == 0);
  // Nothing left to reap: every failed child was reaped by spawn().
  CHECK(::waitpid(-1, nullptr, WNOHANG) == -1);
  CHECK(errno == ECHILD);
  io.poll();
  CHECK_FALSE(c.exit.has_value());
}

TEST_CASE("spawn errors from running out of descriptors, processes or memory are transient, others are not",
          "[runner]") {
  // Errc::Resources (the supervisor retries with backoff) for what a busy or
  // attacked machine runs out of; the exhausted-descriptor path itself is
  // exercised in test_supervisor.
  for (int e : {EMFILE, ENFILE, EAGAIN, ENOMEM}) {
    INFO("errno " << e);
    CHECK(transient_spawn_errno(e));
  }
  for (int e : {0, ENOENT, EACCES, ENOTDIR, ENOEXEC, EPERM, EINVAL, ENOSYS}) {
    INFO("errno " << e);
    CHECK_FALSE(transient_spawn_errno(e));
  }
}

TEST_CASE("adopt watches a process spawned by an earlier runner, and a stranger", "[runner]") {
  ScratchDir dir;
  boost::asio::io_context io;
  ProcessGuard guard;
  int pid = 0;
  {
    PosixProcessRunner first(io);
    ProcessSpec spec{"/bin/sleep", {"sleep", "30"}, {}, ""};
    spec.parent_death_signal = 0;
    auto r = first.spawn(spec, {}, {});
    REQUIRE(r.ok());
    pid = *r;
    guard.add(pid);
  }  // the runner goes away; the process stays
  REQUIRE(alive(pid));
  PosixProcessRunner second(io);
  Captured c;
  REQUIRE(second.adopt(pid, capture_exit(c)).ok());
  CHECK(second.adopt(pid, capture_exit(c)).error().code == Errc::Busy);
  REQUIRE(second.kill(pid, SIGTERM).ok());
  REQUIRE(run_until(io, [&] { return c.exit.has_value(); }));
  // Still a child of this test process: reaped, real status.
  CHECK(c.exit->signaled);
  CHECK(c.exit->status == SIGTERM);

  // A process that is not our child: status unknown.
  Captured launcher;
  auto script = write_script(dir, "detach", "sleep 30 </dev/null >/dev/null 2>&1 &\necho $!\n");
  auto l = second.spawn(ProcessSpec{script, {"detach"}, {}, ""}, capture_output(launcher), capture_exit(launcher));
  REQUIRE(l.ok());
  guard.add(*l);
  REQUIRE(run_until(io, [&] { return launcher.exit.has_value(); }));
  REQUIRE(launcher.out.size() == 1);
  int stranger = std::stoi(launcher.out[0]);
  auto stranger_id = read_process_identity(stranger);
  REQUIRE(stranger_id.ok());
  struct KillStranger {  // stop it by PID also if the test fails (same start time only)
    ProcessIdentity id;
    ~KillStranger() {
      auto now = read_process_identity(id.pid);
      if (now.ok() && now->start_time == id.start_time) ::kill(id.pid, SIGKILL);
    }
  } kill_stranger{*stranger_id};
  Captured s;
  REQUIRE(second.adopt(stranger, capture_exit(s)).ok());
  REQUIRE(::kill(stranger, SIGKILL) == 0);
  REQUIRE(run_until(io, [&] { return s.exit.has_value(); }));
  CHECK(s.exit->pid == stranger);
  CHECK(s.exit->status == -1);
  CHECK(second.adopt(999999999, capture_exit(s)).error().code == Errc::NotFound);
}

TEST_CASE("a child whose output pipe broke gets EPIPE instead of dying of SIGPIPE", "[runner]") {
  // An OpenSM left running by a smhad that went away must survive its next log line.
  ScratchDir dir;
  boost::asio::io_context io;
  ProcessGuard guard;
  auto script = write_script(dir, "orphan",
                             "echo ready\n"
                             "while [ ! -e go ]; do sleep 0.02; done\n"
                             "i=0; while [ $i -lt 100 ]; do echo \"line $i\"; i=$((i+1)); done\n"
                             "touch survived\n"
                             "while :; do sleep 30; done\n");
  Captured c;
  int pid = 0;
  {
    PosixProcessRunner runner(io);
    ProcessSpec spec{script, {"orphan"}, {}, dir.path()};
    spec.parent_death_signal = 0;
    auto r = runner.spawn(spec, capture_output(c), capture_exit(c));
    REQUIRE(r.ok());
    pid = *r;
    guard.add(pid);
    REQUIRE(run_until(io, [&] { return c.out.size() == 1; }));
  }  // the runner closes its pipe ends
  std::ofstream(dir / "go") << "";
  REQUIRE(run_until(io, [&] { return std::filesystem::exists(dir / "survived"); }));
  CHECK(alive(pid));
}

TEST_CASE("parent_death_signal fires when the spawning thread exits", "[runner]") {
  ProcessGuard guard;
  int with_signal = 0, without = 0;
  std::thread spawner([&] {
    boost::asio::io_context io;
    PosixProcessRunner runner(io);
    ProcessSpec spec{"/bin/sleep", {"sleep", "30"}, {}, ""};
    spec.parent_death_signal = SIGTERM;
    auto a = runner.spawn(spec, {}, {});
    spec.parent_death_signal = 0;
    auto b = runner.spawn(spec, {}, {});
    if (a.ok()) with_signal = *a;
    if (b.ok()) without = *b;
  });
  spawner.join();
  REQUIRE(with_signal > 0);
  REQUIRE(without > 0);
  guard.add(with_signal);
  guard.add(without);
  int status = 0;
  boost::asio::io_context io;
  REQUIRE(run_until(io, [&] { return ::waitpid(with_signal, &status, WNOHANG) == with_signal; }));
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGTERM);
  CHECK(alive(without));
}
