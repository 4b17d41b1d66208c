// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// The drill/handover verdict (lib/service MastershipWindow) fed by a simulated
// head exactly as smhad feeds it: every SMInfo and local PortInfo answer its
// poller gets. A planned failover and failback passes; a stray HANDOVER that
// makes the peer MASTER for ~25 ms between two poll rounds (it sweeps, finds
// the master higher and hands back) fails it, although this head's own
// inputs of the old verdict (its state changes, a two_masters alarm) show
// nothing: only the peer's ActCount between two STANDBY answers does.
#include <catch2/catch.hpp>

#include <csignal>
#include <cstdio>
#include <memory>

#include "smha/head/mastership_window.hpp"
#include "smha/sim/cluster.hpp"

using namespace smha;
using namespace smha::sim;
using namespace std::chrono_literals;
using head::MastershipWindow;

namespace {

struct Drill {
  Cluster c;
  int m = 0, s = 1;  // the master head and the standby
  std::shared_ptr<MastershipWindow> window;
  head::ActCountRates rates[2];
  bool inject_after_peer_answer = false;
  std::optional<TimePoint> injected;

  explicit Drill(std::uint64_t seed) : c(seed, params()) {
    for (int i = 0; i < 2; ++i) c.set_tap(i, tap(i));
  }
  // What head i's smhad would feed its window (only the drill's head m has one).
  Cluster::Tap tap(int i) {
    Cluster::Tap tap;
    tap.sminfo = [this, i](const SmInfo& info, TimePoint sent, TimePoint received, const std::string& via) {
      if (i != m || !window) {
        rates[i].record(info, received);  // smhad's ActCountRates, always fed
        if (i != m) return;
      } else {
        window->sminfo(info, sent, received, via);
      }
      // Right after this round's answer from the peer by LID: the peer's
      // mastership falls between two rounds.
      if (inject_after_peer_answer && via.rfind("lid:", 0) == 0 && info.guid == c.fabric().guid(c.head(s))) {
        inject_after_peer_answer = false;
        c.queue().schedule_in(1ms, [this] {
          REQUIRE(c.fabric().stray_handover(c.head(s)));
          injected = c.now();
        });
      }
    };
    tap.local_port = [this, i](const mad::PortInfo& pi, TimePoint sent, TimePoint received) {
      if (i == m && window) window->local_port(pi.lid, pi.sm_lid, sent, received);
    };
    return tap;
  }
  static ClusterParams params() {
    ClusterParams p;
    p.heads = 2;
    p.observer_interval = Duration{0};  // only the smhad poll the SMs, as on a quiet fabric
    return p;
  }
  bool settled(int master) {
    const int other = 1 - master;
    const auto a = c.fabric().sm(c.head(master));
    const auto b = c.fabric().sm(c.head(other));
    return a && b && a->state == SmState::Master && b->state == SmState::Standby &&
           c.agent(master)->status().role == sm::Role::Master && c.agent(other)->status().role == sm::Role::Standby;
  }
  // Start, then a drill on the master head up to the end of its failback.
  void run_drill() {
    c.start_all_smhad();
    REQUIRE(c.run_until([&] { return settled(0) || settled(1); }, 10s));
    m = settled(0) ? 0 : 1;
    s = 1 - m;
    c.run_for(1s);  // the ActCount rates of a quiet fabric
    const Guid own = c.fabric().guid(c.head(m)), peer = c.fabric().guid(c.head(s));
    window = std::make_shared<MastershipWindow>(own, c.fabric().name(c.head(m)),
                                                std::vector<MastershipWindow::Head>{
                                                    {peer, c.fabric().name(c.head(s)), c.fabric().lid(c.head(s))}},
                                                c.now(), rates[m]);
    c.agent(m)->request_handover(peer);
    const auto target = c.agent(m)->status().handover_target;
    REQUIRE(target);
    CHECK(*target == peer);
    window->set_target(*target);
    REQUIRE(c.run_until([&] { return settled(s); }, 5s));
    window->plan_failback(c.now());
    c.agent(m)->request_handover(std::nullopt);
    REQUIRE(c.run_until([&] { return settled(m); }, 5s));
    c.run_for(1s);
  }
};

}  // namespace

TEST_CASE("Verdict: a planned failover and failback passes on every head's evidence", "[sim][drill][verdict]") {
  for (std::uint64_t seed : {1u, 2u, 3u}) {
    Drill d(seed);
    d.run_drill();
    INFO("seed " << seed << ": " << d.window->summary().dump());
    CHECK_FALSE(d.window->violation());
    // The masters in the order this head saw them: the peer, then this head.
    // (The handover is done before the next round, so this head's own MASTER
    // answer may not be in the window.)
    const auto seen = d.window->summary()["masters_seen"];
    REQUIRE(seen.size() >= 2);
    CHECK(seen[seen.size() - 2]["name"] == d.c.fabric().name(d.c.head(d.s)));
    CHECK(seen.back()["guid"] == to_string(d.c.fabric().guid(d.c.head(d.m))));
    d.c.run_for(2s);
    CHECK_FALSE(d.window->violation());
  }
}

TEST_CASE("Verdict: the peer MASTER for 25 ms between two rounds fails the drill", "[sim][drill][verdict]") {
  for (std::uint64_t seed : {1u, 2u, 3u}) {
    Drill d(seed);
    d.run_drill();
    REQUIRE_FALSE(d.window->violation());
    const int handovers = static_cast<int>(d.c.fabric().handovers());
    const auto changes = d.c.count_events(d.m, "state_changed");
    const auto dual_alarms = d.c.count_events(d.m, "two_masters");
    const auto dual_before = d.c.dual_master_total();
    d.inject_after_peer_answer = true;
    d.c.run_for(1s);
    REQUIRE(d.injected);
    // The peer was MASTER and handed mastership back, in the fabric's truth...
    CHECK(static_cast<int>(d.c.fabric().handovers()) == handovers + 1);
    CHECK(d.c.dual_master_total() > dual_before);
    CHECK(d.settled(d.m));
    // ... which this head's own state changes and alarms never showed (the old
    // verdict's only inputs)...
    CHECK(d.c.count_events(d.m, "state_changed") == changes);
    CHECK(d.c.count_events(d.m, "two_masters") == dual_alarms);
    // ... but the window did: the peer's ActCount between two STANDBY answers.
    INFO("seed " << seed << ": " << d.window->summary().dump());
    REQUIRE(d.window->violation());
    CHECK_THAT(*d.window->violation(), Catch::Contains(d.c.fabric().name(d.c.head(d.s)) +
                                                       " swept between two STANDBY answers") &&
                                           Catch::Contains("it was MASTER or DISCOVERING in between"));
    std::printf("sim verdict (seed %llu): %s\n", static_cast<unsigned long long>(seed), d.window->violation()->c_str());
  }
}

TEST_CASE("Verdict: the failover target handing mastership on to a third head fails the drill",
          "[sim][drill][verdict]") {
  ClusterParams p;
  p.heads = 3;
  p.observer_interval = Duration{0};
  Cluster c(7, p);
  std::shared_ptr<MastershipWindow> window;
  head::ActCountRates rates;
  int m = -1;
  for (int i = 0; i < 3; ++i) {
    Cluster::Tap tap;
    tap.sminfo = [&, i](const SmInfo& info, TimePoint sent, TimePoint received, const std::string& via) {
      if (i != m) return;
      if (window) window->sminfo(info, sent, received, via);
      else rates.record(info, received);
    };
    tap.local_port = [&, i](const mad::PortInfo& pi, TimePoint sent, TimePoint received) {
      if (i == m && window) window->local_port(pi.lid, pi.sm_lid, sent, received);
    };
    c.set_tap(i, tap);
  }
  auto role = [&](int i) { return c.agent(i)->status().role; };
  auto state = [&](int i) { return c.fabric().sm(c.head(i))->state; };
  c.start_all_smhad();
  REQUIRE(c.run_until([&] {
    int masters = 0, standbys = 0;
    for (int i = 0; i < 3; ++i) {
      if (!c.fabric().sm(c.head(i))) return false;
      masters += state(i) == SmState::Master && role(i) == sm::Role::Master;
      standbys += state(i) == SmState::Standby && role(i) == sm::Role::Standby;
    }
    return masters == 1 && standbys == 2;
  }, 10s));
  for (int i = 0; i < 3; ++i)
    if (state(i) == SmState::Master) m = i;
  c.run_for(1s);
  std::vector<MastershipWindow::Head> peers;
  for (int i = 0; i < 3; ++i)
    if (i != m) peers.push_back({c.fabric().guid(c.head(i)), c.fabric().name(c.head(i)), c.fabric().lid(c.head(i))});
  window = std::make_shared<MastershipWindow>(c.fabric().guid(c.head(m)), c.fabric().name(c.head(m)), peers, c.now(),
                                              rates);
  c.agent(m)->request_handover(std::nullopt);  // the engine picks the best standby
  const auto target = c.agent(m)->status().handover_target;
  REQUIRE(target);
  window->set_target(*target);
  const int t = c.head_of(*target);
  const int third = 3 - m - t;
  REQUIRE(c.run_until([&] { return state(t) == SmState::Master && role(m) == sm::Role::Standby; }, 5s));
  CHECK_FALSE(window->violation());
  // The third head's OpenSM is raised above the new master behind its smhad's
  // back (its smhad is down): the new master's next light sweep finds it higher
  // and hands mastership on.
  c.crash_smhad(third);
  REQUIRE(c.fabric().fs(c.head(third)).write_atomic("/etc/opensm/opensm.conf",
                                                    sim::render_opensm_keys(c.opensm_keys(third), 15), 0644).ok());
  REQUIRE(c.fabric().signal_opensm(c.head(third), SIGHUP));
  REQUIRE(c.run_until([&] { return state(third) == SmState::Master; }, 15s));
  c.run_for(500ms);
  INFO(window->summary().dump());
  REQUIRE(window->violation());
  CHECK_THAT(*window->violation(), Catch::Contains(c.fabric().name(c.head(third)) + " was MASTER") &&
                                       Catch::Contains("the planned master then was " +
                                                       c.fabric().name(c.head(t))));
  std::printf("sim verdict, bounce to a third head: %s\n", window->violation()->c_str());
}
