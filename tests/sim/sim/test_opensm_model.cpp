// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// The simulated OpenSM (lib/sim/src/opensm_model.cpp): its election, its
// answers to SubnSet(SMInfo) as internals §2.2-2.3 describe, the timings
// calibrated on real OpenSM under ibsim, its signals and its process.
#include <catch2/catch.hpp>

#include <algorithm>
#include <csignal>

#include "smha/sim/fabric.hpp"
#include "two_heads.hpp"

using namespace smha;
using namespace smha::sim;
using smha::sim::test::Two;

TEST_CASE("Simulated OpenSM: election, DISCOVER, HANDOVER, rejections", "[sim][opensm_model]") {
  Two t;
  t.spawn(t.a, 10);
  t.f.queue().run_until(t.f.queue().now() + milliseconds(200));
  t.spawn(t.b, 10);
  t.f.queue().run_until(t.f.queue().now() + milliseconds(200));
  REQUIRE(t.f.sm(t.a)->state == SmState::Master);
  REQUIRE(t.f.sm(t.b)->state == SmState::Standby);

  // A master rejects DISCOVER/STANDBY/DISABLE with status 0x0700 and stays MASTER.
  for (auto mod : {SmInfoModifier::Discover, SmInfoModifier::Standby, SmInfoModifier::Disable}) {
    auto r = t.call(t.obs, Lid{1}, mod);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == mad::kErrMadStatus);
    CHECK(r.error().message.find("0x0700") != std::string::npos);
  }
  CHECK(t.f.sm(t.a)->state == SmState::Master);
  CHECK(t.f.sets_to_master() == 3);

  // Payload state must be MASTER.
  auto bad = t.call(t.obs, Lid{2}, SmInfoModifier::Discover, SmState::Standby);
  CHECK_FALSE(bad.ok());
  CHECK(t.f.sm(t.b)->state == SmState::Standby);

  // DISCOVER to the standby with a live master: back to STANDBY (~45 ms).
  auto d = t.call(t.b, DrPath{}, SmInfoModifier::Discover);
  REQUIRE(d.ok());
  CHECK(d->info.state == SmState::Standby);  // pre-transition payload
  t.f.queue().run_until(t.f.queue().now() + milliseconds(5));
  CHECK(t.f.sm(t.b)->state == SmState::Discovering);
  t.f.queue().run_until(t.f.queue().now() + milliseconds(60));
  CHECK(t.f.sm(t.b)->state == SmState::Standby);

  // Master killed; DISCOVER: MASTER ~90 ms later.
  t.f.signal_opensm(t.a, SIGKILL);
  REQUIRE(t.call(t.b, DrPath{}, SmInfoModifier::Discover).ok());
  t.f.queue().run_until(t.f.queue().now() + milliseconds(80));
  CHECK(t.f.sm(t.b)->state == SmState::Discovering);
  t.f.queue().run_until(t.f.queue().now() + milliseconds(20));
  CHECK(t.f.sm(t.b)->state == SmState::Master);
}

TEST_CASE("Simulated OpenSM: HANDOVER to a standby while the master lives, then OpenSM resolves",
          "[sim][opensm_model]") {
  Two t;
  t.spawn(t.a, 10);
  t.f.queue().run_until(t.f.queue().now() + milliseconds(200));
  t.spawn(t.b, 10);
  t.f.queue().run_until(t.f.queue().now() + milliseconds(200));
  REQUIRE(t.call(t.obs, Lid{2}, SmInfoModifier::Handover).ok());
  t.f.queue().run_until(t.f.queue().now() + milliseconds(1));
  CHECK(t.f.active_masters().size() == 2);  // instant MASTER, two masters
  // b (higher GUID) hands back to a at the end of its first master sweep (~25 ms).
  t.f.queue().run_until(t.f.queue().now() + milliseconds(30));
  CHECK(t.f.active_masters() == std::vector<NodeId>{t.a});
}

TEST_CASE("Simulated OpenSM: SIGHUP re-reads sm_priority, a raised standby preempts", "[sim][opensm_model]") {
  Two t;
  t.spawn(t.a, 10);
  t.f.queue().run_until(t.f.queue().now() + milliseconds(200));
  const int pb = t.spawn(t.b, 10);
  t.f.queue().run_until(t.f.queue().now() + milliseconds(200));
  (void)t.f.fs(t.b).write_atomic("/c", "sm_priority 12\n", 0644);
  REQUIRE(t.f.runner(t.b).kill(pb, SIGHUP).ok());
  t.f.queue().run_until(t.f.queue().now() + milliseconds(100));
  CHECK(t.f.sm(t.b)->priority == 12);
  CHECK(t.f.active_masters() == std::vector<NodeId>{t.b});
  CHECK(t.f.sm(t.a)->state == SmState::Standby);
}

TEST_CASE("Simulated OpenSM: SIGSTOP freezes answers, native polling takes over after its timeout",
          "[sim][opensm_model]") {
  Two t;
  t.spawn(t.a, 10);
  t.f.queue().run_until(t.f.queue().now() + milliseconds(200));
  t.spawn(t.b, 10);
  t.f.queue().run_until(t.f.queue().now() + milliseconds(200));
  t.f.signal_opensm(t.a, SIGSTOP);
  auto r = t.call(t.obs, Lid{1}, std::nullopt);
  CHECK_FALSE(r.ok());
  CHECK(r.error().code == mad::kErrTimeout);
  // Defaults 10000 ms x 4: (4 + 2) x 10 s after the last answered poll, at most.
  t.f.queue().run_until(t.f.queue().now() + seconds(45));
  CHECK(t.f.sm(t.b)->state == SmState::Standby);
  t.f.queue().run_until(t.f.queue().now() + seconds(16));
  CHECK(t.f.sm(t.b)->state == SmState::Master);
}

TEST_CASE("Simulated OpenSM: calibrated start-up: answers after startup, MASTER after discover_full",
          "[sim][opensm_model]") {
  Two t;
  const auto& timing = t.f.params().sm;
  t.spawn(t.a, 10);
  // Silent while it starts (no answer, not a refusal: the port has an SM).
  t.run_for(timing.startup / 2);
  CHECK(t.f.sm(t.a)->state == SmState::Discovering);
  t.run_for(timing.discover_full - timing.startup / 2 - milliseconds(1));
  CHECK(t.f.sm(t.a)->state == SmState::Discovering);
  t.run_for(milliseconds(2));
  CHECK(t.f.sm(t.a)->state == SmState::Master);
  // A second SM finds the master within discover_check and stays STANDBY.
  t.spawn(t.b, 10);
  t.run_for(timing.discover_check + milliseconds(1));
  CHECK(t.f.sm(t.b)->state == SmState::Standby);
  t.run_for(seconds(30));
  CHECK(t.f.active_masters() == std::vector<NodeId>{t.a});
}

TEST_CASE("Simulated OpenSM: a second OpenSM on a held port exits 0 at once (bind failure)",
          "[sim][opensm_model]") {
  Two t;
  const int first = t.spawn(t.a, 10);
  t.run_for(milliseconds(200));
  std::optional<os::ExitInfo> exit;
  const int second = t.spawn(t.a, 12, &exit);
  CHECK(second != first);
  t.run_for(milliseconds(10));
  REQUIRE(exit);
  CHECK(exit->pid == second);
  CHECK_FALSE(exit->signaled);
  CHECK(exit->status == 0);
  // The first one holds the port, untouched.
  CHECK(t.f.sm(t.a)->pid == first);
  CHECK(t.f.sm(t.a)->state == SmState::Master);
}

TEST_CASE("Simulated OpenSM: only opensm runs, -g must name the node's port", "[sim][opensm_model]") {
  Two t;
  auto none = [](os::OutputStream, std::string_view) {};
  std::optional<os::ExitInfo> exit;
  auto on_exit = [&](const os::ExitInfo& e) { exit = e; };
  CHECK_FALSE(t.f.runner(t.a).spawn({"/bin/sh", {"sh"}, {}, {}}, none, on_exit).ok());
  // Another port's GUID: it cannot bind, exits 0.
  auto pid = t.f.runner(t.a).spawn({"/usr/sbin/opensm", {"opensm", "-g", "0x20"}, {}, {}}, none, on_exit);
  REQUIRE(pid.ok());
  t.run_for(milliseconds(10));
  REQUIRE(exit);
  CHECK(exit->status == 0);
  CHECK_FALSE(t.f.sm(t.a));
}

TEST_CASE("Simulated OpenSM: opensm.conf keys it knows, unknown keys and bad values ignored",
          "[sim][opensm_model]") {
  Two t;
  (void)t.f.fs(t.a).write_atomic("/c", "# header\nfoo_bar 1\nsm_priority 7\nsm_key 0x42\n"
                                        "sweep_interval oops\n", 0600);
  auto pid = t.f.runner(t.a).spawn({"/usr/sbin/opensm", {"opensm", "-F", "/c"}, {}, {}},
                                   [](os::OutputStream, std::string_view) {},
                                   [](const os::ExitInfo&) {});
  REQUIRE(pid.ok());
  t.run_for(milliseconds(200));
  auto r = t.call(t.obs, Lid{1}, std::nullopt);
  REQUIRE(r.ok());
  CHECK(r->info.priority == 7);
  CHECK(r->info.sm_key == 0x42);
  // sm_priority above 15 is clamped.
  (void)t.f.fs(t.a).write_atomic("/c", "sm_priority 99\n", 0600);
  REQUIRE(t.f.runner(t.a).kill(*pid, SIGHUP).ok());
  t.run_for(milliseconds(100));
  CHECK(t.f.sm(t.a)->priority == 15);
}

TEST_CASE("Simulated OpenSM: a SIGHUP during a master's heavy sweep is absorbed, the file not read",
          "[sim][opensm_model]") {
  Two t;
  const int pa = t.spawn(t.a, 10);
  t.run_for(milliseconds(200));
  REQUIRE(t.f.sm(t.a)->state == SmState::Master);
  // The first HUP reads the file and starts a heavy sweep; a second one within
  // that sweep is taken by it (OpenSM 3.3.23's do_sweep()).
  (void)t.f.fs(t.a).write_atomic("/c", "sm_priority 11\n", 0644);
  REQUIRE(t.f.runner(t.a).kill(pa, SIGHUP).ok());
  CHECK(t.f.sm(t.a)->priority == 11);
  (void)t.f.fs(t.a).write_atomic("/c", "sm_priority 12\n", 0644);
  REQUIRE(t.f.runner(t.a).kill(pa, SIGHUP).ok());
  CHECK(t.f.hups_absorbed() == 1);
  CHECK(t.f.sm(t.a)->priority == 11);
  // After the sweep a HUP is read again.
  t.run_for(t.f.params().sm.handover_sweep + milliseconds(1));
  REQUIRE(t.f.runner(t.a).kill(pa, SIGHUP).ok());
  CHECK(t.f.sm(t.a)->priority == 12);
  CHECK(t.f.hups_absorbed() == 1);
}

TEST_CASE("Simulated OpenSM: SIGTERM to a stopped OpenSM waits for SIGCONT, SIGKILL does not",
          "[sim][opensm_model]") {
  Two t;
  std::optional<os::ExitInfo> exit_a, exit_b;
  const int pa = t.spawn(t.a, 10, &exit_a);
  const int pb = t.spawn(t.b, 10, &exit_b);
  t.run_for(milliseconds(200));
  REQUIRE(t.f.runner(t.a).kill(pa, SIGSTOP).ok());
  REQUIRE(t.f.runner(t.a).kill(pa, SIGTERM).ok());
  t.run_for(milliseconds(50));
  CHECK_FALSE(exit_a);
  REQUIRE(t.f.sm(t.a));
  CHECK(t.f.sm(t.a)->stopped);
  REQUIRE(t.f.runner(t.a).kill(pa, SIGCONT).ok());
  t.run_for(milliseconds(1));
  REQUIRE(exit_a);
  CHECK_FALSE(exit_a->signaled);
  CHECK(exit_a->status == 0);
  CHECK_FALSE(t.f.sm(t.a));
  // The port has no SM now: the kernel refuses SMInfo with a MAD status.
  auto r = t.call(t.obs, Lid{1}, std::nullopt);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.find("0x000c") != std::string::npos);
  // SIGKILL ends a stopped one at once.
  REQUIRE(t.f.runner(t.b).kill(pb, SIGSTOP).ok());
  REQUIRE(t.f.runner(t.b).kill(pb, SIGKILL).ok());
  t.run_for(milliseconds(1));
  REQUIRE(exit_b);
  CHECK(exit_b->signaled);
  CHECK(exit_b->status == SIGKILL);
  // Signals to a gone process fail.
  CHECK_FALSE(t.f.runner(t.b).kill(pb, SIGTERM).ok());
}

// osm_sm_state_mgr_signal_master_is_alive: a STANDBY keeps polling the SM it
// found as master; once that SM has handed over and answers STANDBY, its
// answers still count as alive while it ranks above the poller, and count as
// misses otherwise (then the poller rediscovers and finds the new master).
TEST_CASE("Simulated OpenSM: a standby polling a master that handed over", "[sim][opensm_model]") {
  for (const bool poller_below : {true, false}) {
    INFO((poller_below ? "poller ranks below the old master" : "poller ranks above the old master"));
    Two t;
    const NodeId c = t.f.add_node("c", Guid{poller_below ? 0x30u : 0x05u}, Lid{3});
    std::vector<std::string> c_log;
    t.f.set_opensm_log([&](NodeId n, std::string_view line) {
      if (n == c) c_log.emplace_back(line);
    });
    t.spawn(t.a, 10);
    t.run_for(milliseconds(200));
    const int pb = t.spawn(t.b, 10);
    t.spawn(c, 10);
    t.run_for(milliseconds(200));
    REQUIRE(t.f.active_masters() == std::vector<NodeId>{t.a});
    REQUIRE(t.f.sm(c)->state == SmState::Standby);
    // b preempts: a hands over and answers STANDBY; c still polls a.
    (void)t.f.fs(t.b).write_atomic("/c", "sm_priority 12\n", 0644);
    REQUIRE(t.f.runner(t.b).kill(pb, SIGHUP).ok());
    t.run_for(milliseconds(100));
    REQUIRE(t.f.active_masters() == std::vector<NodeId>{t.b});
    c_log.clear();
    // Past OpenSM's own polling timeout, (4 + 2) x 10 s at the defaults.
    t.run_for(seconds(75));
    const bool rediscovered = std::find(c_log.begin(), c_log.end(), "Entering DISCOVERING state") != c_log.end();
    CHECK(rediscovered == !poller_below);
    CHECK(t.f.sm(c)->state == SmState::Standby);
    CHECK(t.f.active_masters() == std::vector<NodeId>{t.b});
  }
}
