// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// The hooks: HookDispatcher running real scripts, and the head's event sink
// (HeadEventSink) driving them.
#include <catch2/catch.hpp>

#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include "smha/core/limits.hpp"
#include "smha/head/head_events.hpp"
#include "smha/head/head_status.hpp"
#include "smha/service/check_config.hpp"
#include "smha/service/hook_dispatcher.hpp"
#include "smha/service/systemd_reporter.hpp"
#include "smha/service/service.hpp"
#include "smha/os/posix_process_runner.hpp"

#include "fake_transport.hpp"
#include "sample_config.hpp"
#include "temp_dir.hpp"

using namespace smha;
using namespace smha::service;
using namespace smha::head;
using namespace std::chrono_literals;
using smha::test::FakeTransport;
using smha::test::TempDir;
using smha::test::slurp;

namespace {

// The hook runner smhad's system adapters give: fork/exec on `io`.
HookDispatcher::MakeProcesses posix_processes(boost::asio::io_context& io) {
  return [&io] { return std::make_unique<os::PosixProcessRunner>(io); };
}

}  // namespace

TEST_CASE("HookDispatcher: each event runs the hooks of its key with the documented argv") {
  TempDir dir;
  const std::string out = dir.path() + "/out";
  auto script = [&](const std::string& name) {
    const std::string p = dir.path() + "/" + name;
    std::ofstream(p) << "#!/bin/sh\necho \"" << name << " $* peer=$SMHA_PEER reason=$SMHA_REASON\" >> " << out << "\n";
    REQUIRE(::chmod(p.c_str(), 0755) == 0);
    return p;
  };
  config::Config c = smha::test::two_heads();
  c.hooks["master"] = {script("m")};
  c.hooks["standby"] = {script("s")};
  c.hooks["fault"] = {script("f")};
  c.hooks["opensm_restart"] = {script("o")};
  c.hooks["reload"] = {script("r")};
  c.hooks["unknown_sm"] = {script("u")};
  REQUIRE(HookDispatcher::check(c).ok());
  boost::asio::io_context io;
  SteadyClock clock;
  os::AsioScheduler sched(io, clock);
  std::vector<platform::HookResult> results;
  HookDispatcher d(sched, posix_processes(io), c, [&](const platform::HookResult& r) { results.push_back(r); });
  d.transition(SmState::Standby, SmState::Master, 11, "head02", "takeover_started: lost");
  d.transition(SmState::Master, SmState::NotActive, 11, "head02", "observed");
  d.transition(SmState::NotActive, SmState::Standby, 10, "head02", "observed");
  d.alarm("STANDBY", 10, "two_masters: x");
  d.opensm_restart("STANDBY", 10, "respawned after 1 crash(es): pid 5");
  d.reload("STANDBY", 10, "HA policy unchanged");
  d.unknown_sm("STANDBY", 10, "unknown_sm: SM not a configured head: 0x100009 STANDBY");
  // HookRunner posts each start on the io_context: run until all seven ended.
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (results.size() < 7 && std::chrono::steady_clock::now() < deadline) io.run_for(20ms);
  REQUIRE(results.size() == 7);
  for (const auto& r : results) CHECK(r.outcome == platform::HookOutcome::Ok);
  CHECK(slurp(out) ==
        "m TRANSITION MASTER STANDBY 11 peer=head02 reason=takeover_started: lost\n"
        "f TRANSITION NOTACTIVE MASTER 11 peer=head02 reason=observed\n"
        "s TRANSITION STANDBY NOTACTIVE 10 peer=head02 reason=observed\n"
        "f ALARM STANDBY STANDBY 10 peer= reason=two_masters: x\n"
        "o OPENSM_RESTART STANDBY STANDBY 10 peer= reason=respawned after 1 crash(es): pid 5\n"
        "r RELOAD STANDBY STANDBY 10 peer= reason=HA policy unchanged\n"
        "u ALARM STANDBY STANDBY 10 peer= reason=unknown_sm: SM not a configured head: 0x100009 STANDBY\n");
}

TEST_CASE("HookDispatcher::check names the key of an insecure hook") {
  TempDir dir;
  const std::string p = dir.path() + "/hook";
  std::ofstream(p) << "#!/bin/sh\n";
  REQUIRE(::chmod(p.c_str(), 0775) == 0);
  config::Config c = smha::test::two_heads();
  c.hooks["standby"] = {p};
  auto st = HookDispatcher::check(c);
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().code == Errc::Insecure);
  CHECK(st.error().message == "hooks.standby: hook '" + p + "': writable by group or others (mode 0775)");
  REQUIRE(::chmod(p.c_str(), 0755) == 0);
  CHECK(HookDispatcher::check(c).ok());
}

TEST_CASE("HeadEventSink passes state changes and alarms and suppresses repeats beyond a burst") {
  config::Config c = smha::test::two_heads();
  boost::asio::io_context io;
  SteadyClock clock;
  os::AsioScheduler sched(io, clock);
  HookDispatcher hooks(sched, posix_processes(io), c);
  LogEventSink log(1000);
  int changed = 0;
  HeadEventSink sink(log, hooks, [] { return HeadEventSink::Snapshot{"STANDBY", 10, "head02"}; },
                       [&] { ++changed; });
  const TimePoint t0{};
  const sm::RecordEvent lf{sm::EventKind::LocalFailure, "OpenSM exited", "role recovering"};
  for (int i = 0; i < 10; ++i) {
    sink.event(lf, t0 + std::chrono::seconds(i));
    sink.error(Error{Errc::Failed, "OpenSM supervision failed"}, t0 + std::chrono::seconds(i));
    sink.event({sm::EventKind::StateChanged, "STANDBY->MASTER", ""}, t0 + std::chrono::seconds(i));
  }
  sink.alarm({AlarmKind::NoMaster, "x"}, t0);
  auto count = [&](const std::string& kind) {
    return std::count_if(log.events().begin(), log.events().end(),
                         [&](const EventRecord& e) { return e.kind == kind; });
  };
  CHECK(count("local_failure") == HeadEventSink::kRepeatBurst);
  CHECK(count("error") == HeadEventSink::kRepeatBurst);
  CHECK(count("transition") == 10);  // never suppressed
  CHECK(count("alarm") == 1);
  CHECK(sink.suppressed_total() == 2 * (10 - HeadEventSink::kRepeatBurst));

  // After the window: passed on again, saying how many were suppressed.
  sink.event(lf, t0 + HeadEventSink::kRepeatWindow + std::chrono::seconds(1));
  CHECK(count("local_failure") == HeadEventSink::kRepeatBurst + 1);
  CHECK(log.events().back().evidence == "role recovering [7 repeats suppressed]");
}

TEST_CASE("HeadEventSink: a transition's reason is its own step's cause or unknown, never an old event") {
  TempDir dir;
  const std::string out = dir.path() + "/out";
  const std::string hook = dir.path() + "/m";
  std::ofstream(hook) << "#!/bin/sh\necho \"$1 $2 reason=$SMHA_REASON\" >> " << out << "\n";
  REQUIRE(::chmod(hook.c_str(), 0755) == 0);
  config::Config c = smha::test::two_heads();
  c.hooks["master"] = {hook};
  c.hooks["standby"] = {hook};
  boost::asio::io_context io;
  SteadyClock clock;
  os::AsioScheduler sched(io, clock);
  std::vector<platform::HookResult> results;
  HookDispatcher hooks(sched, posix_processes(io), c, [&](const platform::HookResult& r) { results.push_back(r); });
  LogEventSink log(1000);
  HeadEventSink sink(log, hooks, [] { return HeadEventSink::Snapshot{"MASTER", 11, "head02"}; }, [] {});
  const TimePoint t0{};
  // A peer_route event, then 44 s later the local SM becomes MASTER in a step
  // that recorded nothing else (the agent leaves the evidence empty).
  sink.event({sm::EventKind::PeerRoute, "head01 (0x10) \"head01\": found", "lid 1, dr 0,1"}, t0);
  sink.event({sm::EventKind::StateChanged, "STANDBY->MASTER", "", {}, SmState::Standby, SmState::Master},
             t0 + std::chrono::seconds(44));
  sink.hook({"transition", SmState::Master, SmState::Standby, 11}, t0 + std::chrono::seconds(44));
  CHECK(log.events().back().kind == "transition");
  CHECK(log.events().back().evidence == "unknown");
  // With the cause of its step.
  sink.event({sm::EventKind::StateChanged, "MASTER->STANDBY", "handover_done: head01 answers MASTER", {},
              SmState::Master, SmState::Standby},
             t0 + std::chrono::seconds(50));
  sink.hook({"transition", SmState::Standby, SmState::Master, 10}, t0 + std::chrono::seconds(50));
  CHECK(log.events().back().evidence == "handover_done: head01 answers MASTER");
  REQUIRE(log.last_transition());
  CHECK(log.last_transition()->evidence == "handover_done: head01 answers MASTER");
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (results.size() < 2 && std::chrono::steady_clock::now() < deadline) io.run_for(20ms);
  REQUIRE(results.size() == 2);
  CHECK(slurp(out) == "TRANSITION MASTER reason=unknown\nTRANSITION STANDBY reason=handover_done: head01 answers MASTER\n");
}
