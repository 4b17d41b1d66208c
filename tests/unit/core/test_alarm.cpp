// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include <catch2/catch.hpp>

#include <set>
#include <string>
#include <vector>

#include "smha/core/alarm.hpp"

using namespace smha;

TEST_CASE("alarm registry: every kind has a name of its own, and the name gives the kind back", "[alarm]") {
  std::set<std::string> names;
  for (const AlarmKind k : kAlarmKinds) {
    const std::string name(to_string(k));
    INFO(name);
    CHECK(name != "unknown");
    CHECK(names.insert(name).second);
    REQUIRE(alarm_kind_named(name).has_value());
    CHECK(*alarm_kind_named(name) == k);
  }
  CHECK_FALSE(alarm_kind_named("unknown").has_value());
  CHECK_FALSE(alarm_kind_named("").has_value());
  CHECK_FALSE(alarm_kind_named("Two_Masters").has_value());
}

TEST_CASE("alarm registry: the list holds every enumerator once, in order", "[alarm]") {
  // Every value up to the first without a name is an enumerator: the list
  // must hold exactly those, in the enumeration's order.
  std::vector<AlarmKind> enumerators;
  for (int k = 0; k < 256; ++k) {
    const auto v = static_cast<AlarmKind>(k);
    if (to_string(v) == "unknown") break;
    enumerators.push_back(v);
  }
  CHECK(std::vector<AlarmKind>(std::begin(kAlarmKinds), std::end(kAlarmKinds)) == enumerators);
  CHECK(to_string(static_cast<AlarmKind>(enumerators.size())) == "unknown");
}

TEST_CASE("alarm registry: the names on the wire", "[alarm]") {
  // Status, events, the journal, metrics labels and hooks carry these: never change one.
  std::vector<std::string> names;
  for (const AlarmKind k : kAlarmKinds) names.emplace_back(to_string(k));
  CHECK(names == std::vector<std::string>{"two_masters", "sm_key_mismatch", "ignore_other_sm", "unknown_sm",
                                          "local_sm_hung", "no_master", "handover_failed", "priority_mismatch",
                                          "priority_not_applied", "config_drift", "drift_unknown", "impostor_sm",
                                          "link_degraded", "link_errors", "sa_copy_stale", "sa_copy_trimmed",
                                          "opensm_failed"});
}

namespace {
struct Recorder final : AlarmSink {
  std::vector<std::string> calls;
  void alarm(const RaiseAlarm& a, TimePoint) override {
    calls.push_back(std::string(a.refresh ? "refresh " : "raise ") + std::string(to_string(a.kind)) + ": " + a.detail);
  }
  void clear(const ClearAlarm& a, TimePoint) override { calls.push_back("clear " + std::string(to_string(a.kind))); }
};
}  // namespace

TEST_CASE("set_alarm: raised once, refreshed on a new detail, cleared once", "[alarm]") {
  Recorder sink;
  std::string current;
  set_alarm(sink, AlarmKind::LinkErrors, "", current, TimePoint{});
  set_alarm(sink, AlarmKind::LinkErrors, "a", current, TimePoint{});
  set_alarm(sink, AlarmKind::LinkErrors, "a", current, TimePoint{});
  set_alarm(sink, AlarmKind::LinkErrors, "b", current, TimePoint{});
  set_alarm(sink, AlarmKind::LinkErrors, "", current, TimePoint{});
  set_alarm(sink, AlarmKind::LinkErrors, "", current, TimePoint{});
  CHECK(sink.calls == std::vector<std::string>{"raise link_errors: a", "refresh link_errors: b", "clear link_errors"});
  CHECK(current.empty());
}
