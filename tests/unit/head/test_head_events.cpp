// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// OpensmWatch through the head's HeadEventSink: supervision's failure is an
// alarm like every other (fault hooks once per raise) beside the
// opensm_restart hooks.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "smha/core/clock.hpp"
#include "smha/head/head_events.hpp"

using namespace smha;
using namespace smha::head;

namespace {

struct RecordingHooks final : Hooks {
  std::vector<std::string> calls;  // "<kind> <reason>"
  void transition(SmState, SmState, int, const std::string&, const std::string& reason) override {
    calls.push_back("transition " + reason);
  }
  void alarm(const std::string&, int, const std::string& reason) override { calls.push_back("fault " + reason); }
  void opensm_restart(const std::string&, int, const std::string& reason) override {
    calls.push_back("opensm_restart " + reason);
  }
  void unknown_sm(const std::string&, int, const std::string& reason) override {
    calls.push_back("unknown_sm " + reason);
  }
  void reload(const std::string&, int, const std::string& reason) override { calls.push_back("reload " + reason); }
};

opensm::SupervisorStatus status(opensm::SupervisorState state, const std::string& reason, int spawns = 1) {
  opensm::SupervisorStatus st;
  st.state = state;
  st.reason = reason;
  st.spawns = spawns;
  st.pid = state == opensm::SupervisorState::Running ? 100 + spawns : 0;
  return st;
}

}  // namespace

TEST_CASE("OpensmWatch: a failed OpenSM runs the fault hooks once and the opensm_restart hooks, and clears") {
  ManualClock clock;
  LogEventSink log;
  RecordingHooks hooks;
  int changes = 0;
  const auto snapshot = [] { return HeadEventSink::Snapshot{"STANDBY", 10, ""}; };
  HeadEventSink events(log, hooks, snapshot, [&] { ++changes; });
  OpensmWatch watch(log, events, clock, hooks, snapshot, [&] { ++changes; });

  using S = opensm::SupervisorState;
  watch.on_change(status(S::Running, ""));
  CHECK(hooks.calls.empty());
  watch.on_change(status(S::Failed, "exec failed: No such file or directory"));
  CHECK(hooks.calls == std::vector<std::string>{"fault opensm_failed: exec failed: No such file or directory",
                                                "opensm_restart failed: exec failed: No such file or directory"});
  CHECK(log.alarm_active(AlarmKind::OpensmFailed));
  // A new reason while Failed refreshes the alarm's detail: no hook again.
  watch.on_change(status(S::Failed, "exec failed: Permission denied"));
  CHECK(hooks.calls.size() == 2);
  REQUIRE(log.alarms().size() == 1);
  CHECK(log.alarms().at(AlarmKind::OpensmFailed) == "exec failed: Permission denied");
  // A reload started OpenSM again: the alarm clears, and a later failure is a
  // new raise with its hooks.
  watch.on_change(status(S::Running, "", 2));
  CHECK_FALSE(log.alarm_active(AlarmKind::OpensmFailed));
  watch.on_change(status(S::Failed, "crash loop: 5 crashes in 60 s", 2));
  CHECK(hooks.calls.size() == 4);
  CHECK(hooks.calls[2] == "fault opensm_failed: crash loop: 5 crashes in 60 s");
  CHECK(changes > 0);
}
