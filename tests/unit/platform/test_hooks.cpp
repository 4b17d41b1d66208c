// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <fstream>
#include <sstream>
#include <thread>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <spdlog/sinks/ostream_sink.h>

#include "smha/os/asio_scheduler.hpp"
#include "smha/os/posix_process_runner.hpp"
#include "smha/platform/hooks.hpp"
#include "test_util.hpp"

namespace fs = std::filesystem;
namespace platform = smha::platform;
using platform::HookCall;
using platform::HookEvent;
using platform::HookOutcome;
using platform::HookResult;
using platform::test::read_file;
using platform::test::TempDir;
using platform::test::write_file;

namespace {

constexpr auto kExec = fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                       fs::perms::others_read | fs::perms::others_exec;  // 0755

// Runs `io` until `done()` or a generous bound (a hang fails the test, not CI).
template <typename Pred>
bool run_until(boost::asio::io_context& io, Pred done,
               std::chrono::seconds bound = std::chrono::seconds(20)) {
  const auto deadline = std::chrono::steady_clock::now() + bound;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    io.restart();
    io.run_one_for(std::chrono::milliseconds(100));
  }
  return true;
}

struct Fixture {
  TempDir dir;
  boost::asio::io_context io;
  smha::SteadyClock clock;
  smha::os::AsioScheduler sched{io, clock};
  smha::os::PosixProcessRunner runner{io};
  std::ostringstream log_text;
  std::shared_ptr<spdlog::logger> logger = std::make_shared<spdlog::logger>(
      "hooktest", std::make_shared<spdlog::sinks::ostream_sink_mt>(log_text));
  std::vector<HookResult> results;

  Fixture() { logger->set_pattern("%l %v"); }

  platform::HookOptions options(std::vector<std::string> paths,
                                std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    platform::HookOptions o;
    o.paths = std::move(paths);
    o.timeout = timeout;
    o.node = "head01";
    o.logger = logger;
    o.on_result = [this](const HookResult& r) { results.push_back(r); };
    return o;
  }
  std::string script(const std::string& name, const std::string& body) {
    const fs::path path = dir.path() / name;
    write_file(path, "#!/bin/sh\n" + body, kExec);
    return path.string();
  }
};

HookCall transition() {
  HookCall call;
  call.event = HookEvent::Transition;
  call.new_state = "MASTER";
  call.old_state = "STANDBY";
  call.priority = 14;
  call.peer = "head02";
  call.reason = "peer lost";
  return call;
}

}  // namespace

TEST_CASE("hook gets the documented argv and environment", "[hooks]") {
  Fixture f;
  const std::string out = (f.dir.path() / "out").string();
  const std::string hook = f.script(
      "notify", "printf '%s\\n' \"$0\" \"$@\" > " + out + ".argv\n" +
                    "env | grep '^SMHA_' | sort > " + out + ".env\npwd > " + out + ".cwd\n" +
                    "echo \"NOTIFY_SOCKET=[$NOTIFY_SOCKET]\" > " + out + ".notify\n");
  REQUIRE(platform::check_hook_security(hook, {}).ok());
  platform::HookRunner hooks(f.sched, f.runner, f.options({hook}));
  hooks.run(transition());
  REQUIRE(run_until(f.io, [&] { return f.results.size() == 1; }));
  CHECK(f.results[0].outcome == HookOutcome::Ok);
  CHECK(read_file(out + ".argv") == hook + "\nTRANSITION\nMASTER\nSTANDBY\n14\n");
  CHECK(read_file(out + ".env") ==
        "SMHA_EVENT=TRANSITION\nSMHA_FABRIC=\nSMHA_HOOK_API=1\nSMHA_NEW_STATE=MASTER\nSMHA_NODE=head01\n"
        "SMHA_OLD_STATE=STANDBY\nSMHA_PEER=head02\nSMHA_PRIORITY=14\nSMHA_REASON=peer lost\n");
  CHECK(read_file(out + ".cwd") == "/\n");
  CHECK(read_file(out + ".notify") == "NOTIFY_SOCKET=[]\n");
}

TEST_CASE("hook_argv for an alarm", "[hooks]") {
  HookCall call;
  call.event = HookEvent::Alarm;
  call.new_state = "STANDBY";
  call.old_state = "STANDBY";
  call.priority = 3;
  CHECK(platform::hook_argv("/etc/smha/hook", call) ==
        std::vector<std::string>{"/etc/smha/hook", "ALARM", "STANDBY", "STANDBY", "3"});
}

TEST_CASE("a hook that overruns its timeout is killed with its process group", "[hooks]") {
  Fixture f;
  const std::string child_file = (f.dir.path() / "child").string();
  const std::string hook =
      f.script("slow", "sleep 60 &\necho $! > " + child_file + "\nexec sleep 60\n");
  platform::HookRunner hooks(f.sched, f.runner, f.options({hook}, std::chrono::milliseconds(300)));
  const auto start = std::chrono::steady_clock::now();
  hooks.run(transition());
  REQUIRE(run_until(f.io, [&] { return f.results.size() == 1; }));
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
  CHECK(f.results[0].outcome == HookOutcome::TimedOut);
  CHECK(f.results[0].exit.signaled);
  CHECK(f.results[0].exit.status == SIGKILL);
  CHECK_THAT(f.log_text.str(), Catch::Contains("error HOOK_TIMEOUT hook=" + hook));
  // The background child was in the hook's process group: it is gone too (or a
  // zombie waiting for init to reap it).
  const int child = std::stoi(read_file(child_file));
  const fs::path stat = "/proc/" + std::to_string(child) + "/stat";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  bool dead = false;
  while (!dead && std::chrono::steady_clock::now() < deadline) {
    const std::string text = read_file(stat);
    dead = text.empty() || text.find(") Z ") != std::string::npos;
    if (!dead) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (!dead) ::kill(child, SIGKILL);  // do not leak it when the check fails
  CHECK(dead);
}

TEST_CASE("a failing hook is logged and does not block the event loop", "[hooks]") {
  Fixture f;
  const std::string slow = f.script("slow-fail", "sleep 0.5\nexit 3\n");
  platform::HookRunner hooks(f.sched, f.runner, f.options({slow}));
  hooks.run(transition());
  // run() returned without starting anything: the spawn happens on the loop.
  CHECK(f.runner.watched() == 0);
  CHECK(hooks.pending() == 1);
  // While the hook runs, other work on the loop proceeds.
  bool timer_fired = false;
  std::size_t results_when_timer_fired = 99;
  boost::asio::steady_timer timer(f.io, std::chrono::milliseconds(50));
  timer.async_wait([&](const boost::system::error_code&) {
    timer_fired = true;
    results_when_timer_fired = f.results.size();
  });
  REQUIRE(run_until(f.io, [&] { return f.results.size() == 1; }));
  CHECK(timer_fired);
  CHECK(results_when_timer_fired == 0);
  CHECK(f.results[0].outcome == HookOutcome::Failed);
  CHECK_FALSE(f.results[0].exit.signaled);
  CHECK(f.results[0].exit.status == 3);
  CHECK_THAT(f.log_text.str(),
             Catch::Contains("error HOOK_FAILED hook=" + slow +
                             " event=TRANSITION new_state=MASTER old_state=STANDBY exit_status=3"));
  CHECK(hooks.pending() == 0);
}

TEST_CASE("hooks run one at a time, in order", "[hooks]") {
  Fixture f;
  const std::string out = (f.dir.path() / "order").string();
  const std::string a = f.script("a", "echo a $1 $2 >> " + out + "\n");
  const std::string b = f.script("b", "echo b $1 $2 >> " + out + "\n");
  platform::HookRunner hooks(f.sched, f.runner, f.options({a, b}));
  HookCall first = transition();
  HookCall second = transition();
  second.event = HookEvent::Alarm;
  second.new_state = "MASTER";
  hooks.run(first);
  hooks.run(second);
  REQUIRE(run_until(f.io, [&] { return f.results.size() == 4; }));
  CHECK(read_file(out) ==
        "a TRANSITION MASTER\nb TRANSITION MASTER\na ALARM MASTER\nb ALARM MASTER\n");
}

TEST_CASE("hook output is logged", "[hooks]") {
  Fixture f;
  const std::string hook = f.script("talk", "echo hello from hook\n");
  platform::HookRunner hooks(f.sched, f.runner, f.options({hook}));
  hooks.run(transition());
  REQUIRE(run_until(f.io, [&] { return f.results.size() == 1; }));
  CHECK_THAT(f.log_text.str(), Catch::Contains("info hook " + hook + ": hello from hook"));
}

TEST_CASE("insecure hooks are refused at config time", "[hooks]") {
  Fixture f;
  const std::string hook = f.script("h", "exit 0\n");
  REQUIRE(platform::check_hook_security(hook, {}).ok());

  SECTION("group-writable") {
    fs::permissions(hook, fs::perms::group_write, fs::perm_options::add);
    auto s = platform::check_hook_security(hook, {});
    REQUIRE_FALSE(s.ok());
    CHECK(s.error().code == smha::Errc::Insecure);
    CHECK_THAT(s.error().message, Catch::Contains("writable by group or others (mode 0775)"));
  }
  SECTION("world-writable") {
    fs::permissions(hook, fs::perms::others_write, fs::perm_options::add);
    CHECK_FALSE(platform::check_hook_security(hook, {}).ok());
  }
  SECTION("owned by someone else") {
    auto s = platform::check_hook_security(hook, {::geteuid() + 1});
    REQUIRE_FALSE(s.ok());
    CHECK_THAT(s.error().message, Catch::Contains("owned by uid " + std::to_string(::geteuid())));
  }
  SECTION("in a directory others can write") {
    fs::permissions(f.dir.path(), fs::perms::all, fs::perm_options::replace);
    auto s = platform::check_hook_security(hook, {});
    REQUIRE_FALSE(s.ok());
    CHECK_THAT(s.error().message, Catch::Contains("directory " + f.dir.path().string()));
  }
  SECTION("not executable") {
    fs::permissions(hook, fs::perms::owner_read | fs::perms::owner_write,
                    fs::perm_options::replace);
    CHECK_FALSE(platform::check_hook_security(hook, {}).ok());
  }
  SECTION("relative") {
    CHECK(platform::check_hook_security("hook.sh", {}).error().code == smha::Errc::Invalid);
  }
  SECTION("missing") {
    CHECK(platform::check_hook_security(f.dir.path().string() + "/none", {}).error().code ==
          smha::Errc::NotFound);
  }
  SECTION("check_hooks names the first bad hook") {
    auto o = f.options({hook, f.dir.path().string() + "/none"});
    auto s = platform::check_hooks(o);
    REQUIRE_FALSE(s.ok());
    CHECK_THAT(s.error().message, Catch::Contains("/none"));
  }
}

TEST_CASE("a hook made insecure after configuration is refused at run time", "[hooks]") {
  Fixture f;
  const std::string marker = (f.dir.path() / "ran").string();
  const std::string hook = f.script("h", "touch " + marker + "\n");
  auto options = f.options({hook});
  REQUIRE(platform::check_hooks(options).ok());
  platform::HookRunner hooks(f.sched, f.runner, options);
  fs::permissions(hook, fs::perms::others_write, fs::perm_options::add);
  hooks.run(transition());
  REQUIRE(run_until(f.io, [&] { return f.results.size() == 1; }));
  CHECK(f.results[0].outcome == HookOutcome::Refused);
  CHECK_FALSE(fs::exists(marker));
  CHECK_THAT(f.log_text.str(), Catch::Contains("error HOOK_REFUSED hook=" + hook));
}

TEST_CASE("the queue is bounded: the oldest waiting execution is dropped", "[hooks]") {
  Fixture f;
  const std::string out = (f.dir.path() / "seen").string();
  const std::string hook = f.script("h", "echo $3 >> " + out + "\n");
  auto options = f.options({hook});
  options.max_queued = 2;
  platform::HookRunner hooks(f.sched, f.runner, options);
  for (const char* state : {"A", "B", "C"}) {
    HookCall call = transition();
    call.old_state = state;
    hooks.run(call);
  }
  REQUIRE(run_until(f.io, [&] { return f.results.size() == 3; }));
  CHECK(f.results[0].outcome == HookOutcome::Dropped);
  CHECK(f.results[0].call.old_state == "A");
  CHECK(read_file(out) == "B\nC\n");
  CHECK_THAT(f.log_text.str(), Catch::Contains("warning HOOK_DROPPED"));
}
