// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// The shared HA drill table (tests/drills/ha_drills.hpp) on the in-process
// simulated fabric: the same faults and the same expected outcome as the ibsim
// drills in tests/ibsim/service/test_ha_drills_ibsim.cpp. Virtual time; the
// observer (a third node) polls both heads' SMInfo every 5 ms.
#include <catch2/catch.hpp>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <functional>
#include <string>

#include "ha_drills.hpp"
#include "smha/sim/cluster.hpp"

using namespace smha;
using namespace smha::sim;
using smha::testing::DrillFailback;
using smha::testing::DrillHead;
using smha::testing::DrillOp;
using smha::testing::DrillScenario;
using smha::testing::DrillStart;

namespace {

// The ibsim drills poll at the default 100 ms (tests/ibsim/service); so does this runner.
const Duration kPollInterval = milliseconds(100);
// Bound of every Await step (virtual time).
const Duration kAwaitBound = seconds(30);

class SimDrill {
 public:
  // `tweak` changes the cluster's parameters beyond the drill's (e.g. the
  // fabric's switches and how peers are addressed).
  explicit SimDrill(const DrillScenario& d, std::uint64_t seed,
                    const std::function<void(ClusterParams&)>& tweak = {})
      : d_(d), c_(seed, params(d, tweak)) {}

  static ClusterParams params(const DrillScenario& d, const std::function<void(ClusterParams&)>& tweak) {
    ClusterParams p;
    p.poll_interval = kPollInterval;
    p.failback = d.failback == DrillFailback::Preempt ? sm::FailbackMode::Preempt : sm::FailbackMode::Sticky;
    p.preempt_hold_down = seconds(d.preempt_holddown_s);
    if (tweak) tweak(p);
    return p;
  }

  // `started` runs once both heads are up, before the first step.
  void run(const std::function<void(Cluster&)>& started = {}) {
    start();
    if (started) started(c_);
    for (const auto& s : d_.steps) step(s.op, s.arg);
    check_outcome();
  }

 private:
  Fabric::LossCount loss_at_on_;
  int loss_percent_ = 0;
  static constexpr int kA = 0;  // head01: the lower GUID
  static constexpr int kB = 1;

  // Event kinds recorded by head i's smhad since it last started, in the
  // table's vocabulary.
  std::vector<std::string> kinds(int i) const {
    std::vector<std::string> out;
    const auto& recs = c_.records(i);
    for (std::size_t k = since_[i]; k < recs.size(); ++k) {
      const auto& r = recs[k];
      if (r.what == "event") out.push_back(r.kind);
      if (r.what == "alarm") out.push_back("alarm:" + r.kind);
    }
    return out;
  }

  // Every record of both heads, for failure messages.
  std::string dump() const {
    std::string out = timeline_;
    for (int i = 0; i < 2; ++i)
      for (const auto& r : c_.records(i))
        out += c_.fabric().name(c_.head(i)) + " " + std::to_string(to_ms(r.at.time_since_epoch())) + "ms " +
               r.what + " " + r.kind + " " + r.detail + "\n";
    return out;
  }

  bool only_master(int i) const {
    const auto m = c_.observed_masters();
    return m.size() == 1 && c_.head_of(m[0]) == i;
  }

  void await(const char* what, const std::function<bool()>& pred) {
    const auto t0 = c_.now();
    const bool ok = c_.run_until(pred, kAwaitBound);
    timeline_ += std::string(what) + ": " + std::to_string(to_ms(t0.time_since_epoch())) + " -> " +
                 std::to_string(to_ms(c_.now().time_since_epoch())) + " ms\n";
    if (!ok) {
      FAIL(dump() << d_.name << ": " << what << " not reached within " << to_ms(kAwaitBound) << " ms");
    }
  }

  std::optional<sm::Role> smhad_role(int i) {
    if (!c_.smhad_up(i)) return std::nullopt;
    return c_.agent(i)->status().role;
  }

  void start_smhad(int i) {
    since_[i] = c_.records(i).size();
    c_.start_smhad(i);
  }

  void start() {
    if (d_.start == DrillStart::Together) {
      start_smhad(kA);
      start_smhad(kB);
      return;
    }
    // As the ibsim runner: A's smhad reports MASTER before B starts, and B's
    // smhad reports STANDBY with A as the master before the first step.
    start_smhad(kA);
    a_started_ = c_.now();
    await("A's smhad MASTER", [&] {
      return only_master(kA) && c_.agent(kA)->status().role == sm::Role::Master;
    });
    start_smhad(kB);
    await("B's smhad STANDBY seeing A MASTER", [&] {
      const auto st = c_.agent(kB)->status();
      return st.role == sm::Role::Standby && st.master == c_.fabric().guid(c_.head(kA));
    });
    if (d_.past_start_grace) {
      const auto ready = a_started_ + c_.params().start_grace + kPollInterval;
      await("A's OpenSM past the start grace", [&] { return c_.now() >= ready; });
    }
    c_.reset_dual_master_stats();
  }

  void step(DrillOp op, int arg) {
    Fabric& f = c_.fabric();
    const NodeId a = c_.head(kA);
    switch (op) {
      case DrillOp::KillOpensm: REQUIRE(f.signal_opensm(a, SIGKILL)); break;
      case DrillOp::StopOpensm: REQUIRE(f.signal_opensm(a, SIGSTOP)); break;
      case DrillOp::ContOpensm: f.signal_opensm(a, SIGCONT); break;  // may be fenced already
      case DrillOp::Unlink: f.set_link(a, false); break;
      case DrillOp::Relink: f.set_link(a, true); break;
      case DrillOp::CrashHead:
        c_.crash_smhad(kA);
        REQUIRE(f.signal_opensm(a, SIGKILL));
        break;
      case DrillOp::RestartSmhad: start_smhad(kA); break;
      case DrillOp::LossOn:
        for (int i = 0; i < 2; ++i) f.set_loss(c_.head(i), arg / 100.0);
        loss_at_on_ = f.loss_count();
        loss_percent_ = arg;
        break;
      case DrillOp::LossOff: {
        for (int i = 0; i < 2; ++i) f.set_loss(c_.head(i), 0);
        // As on ibsim: the loss was really injected, at about its rate.
        const auto now = f.loss_count();
        const auto trials = now.trials - loss_at_on_.trials;
        const auto lost = now.lost - loss_at_on_.lost;
        std::printf("sim drill table %-16s lost %llu of %llu port traversals at %d %%\n",
                    std::string(d_.name).c_str(), static_cast<unsigned long long>(lost),
                    static_cast<unsigned long long>(trials), loss_percent_);
        CHECK(trials >= 1000);
        CHECK(lost * 100 >= trials * static_cast<std::uint64_t>(std::max(loss_percent_ - 6, 1)));
        CHECK(lost * 100 <= trials * static_cast<std::uint64_t>(loss_percent_ + 6));
        break;
      }
      case DrillOp::Soak: {
        const auto before = c_.observed_masters();
        const auto dual = c_.dual_master_total();
        bool changed = false;
        c_.run_until([&] {
          const auto m = c_.observed_masters();
          changed = changed || (!m.empty() && m != before);
          return false;
        }, seconds(arg));
        CHECK(c_.dual_master_total() == dual);
        CHECK_FALSE(changed);
        break;
      }
      case DrillOp::AwaitBMaster:
        await("B the only MASTER", [&] { return only_master(kB) && smhad_role(kB) == sm::Role::Master; });
        break;
      case DrillOp::AwaitAMaster:
        await("A the only MASTER", [&] { return only_master(kA) && smhad_role(kA) == sm::Role::Master; });
        break;
      case DrillOp::AwaitAStandby:
        await("A STANDBY", [&] {
          const auto sm = f.sm(a);
          return c_.smhad_up(kA) && sm && !sm->stopped && sm->state == SmState::Standby;
        });
        break;
      case DrillOp::AwaitOneMaster:
        await("one MASTER", [&] { return c_.observed_masters().size() == 1; });
        break;
    }
  }

 public:
  Cluster& cluster() { return c_; }

 private:
  void check_outcome() {
    // A few poll rounds more: nothing may change after the last condition.
    c_.run_for(kPollInterval * 5);
    INFO("drill " << d_.name);
    INFO(dump());
    REQUIRE(c_.observed_masters().size() == 1);
    CHECK(c_.fabric().active_masters().size() == 1);
    if (d_.final_master != DrillHead::Any)
      CHECK(c_.head_of(c_.observed_masters()[0]) == (d_.final_master == DrillHead::A ? kA : kB));
    CHECK(c_.fabric().sets_to_master() == 0);
    int takeovers = 0;
    for (int i = 0; i < 2; ++i) {
      const auto k = kinds(i);
      takeovers += static_cast<int>(std::count(k.begin(), k.end(), "takeover_done"));
    }
    CHECK(takeovers == d_.takeovers);
    const auto ka = kinds(kA);
    const auto kb = kinds(kB);
    if (!d_.b_takeover_evidence.empty()) {
      bool found = false;
      for (const auto& r : c_.records(kB))
        if (r.what == "event" && r.kind == "takeover_started" &&
            r.detail.find(d_.b_takeover_evidence) != std::string::npos)
          found = true;
      INFO(dump());
      CHECK(found);
    }
    const auto problems = smha::testing::drill_event_problems(d_, ka, kb);
    INFO("event problems:\n" << problems);
    CHECK(problems.empty());
    std::string summary;
    for (int i = 0; i < 2; ++i) {
      summary += i ? " | head02:" : "head01:";
      for (const auto& k : kinds(i)) summary += " " + k;
    }
    std::printf("sim drill table %-16s master %s, takeovers %d; %s\n", std::string(d_.name).c_str(),
                c_.fabric().name(c_.head(c_.head_of(c_.observed_masters()[0]))).c_str(), takeovers,
                summary.c_str());
  }

  const DrillScenario& d_;
  Cluster c_;
  std::size_t since_[2] = {0, 0};
  std::string timeline_;
  TimePoint a_started_{};
};

}  // namespace

TEST_CASE("Drill table on the simulated fabric (the same table as the ibsim drills)", "[sim][drill][table]") {
  std::uint64_t seed = 100;
  for (const auto& d : smha::testing::ha_drills()) {
    DYNAMIC_SECTION(d.name) {
      SimDrill(d, seed).run();
    }
    ++seed;
  }
}

// Heads 1 to 4 switches apart (a chain of switches, FabricParams::switches),
// GUID-only configs (name + port_guid): each head finds the other's directed
// route through every switch between them by discovery, exactly one MASTER,
// and the kill -9 drill of the table is taken over.
TEST_CASE("Drill kill9 with GUID-only configs, heads 1 to 4 switches apart (table)",
          "[sim][drill][discovery]") {
  const DrillScenario* kill9 = nullptr;
  for (const auto& d : smha::testing::ha_drills())
    if (d.name == std::string_view("kill9")) kill9 = &d;
  REQUIRE(kill9);
  for (int k = 1; k <= 4; ++k) {
    DYNAMIC_SECTION(k << " switch(es) apart") {
      SimDrill drill(*kill9, 400 + static_cast<std::uint64_t>(k), [k](ClusterParams& p) {
        p.fabric.switches = k;
        p.peer_addressing = PeerAddressing::GuidOnly;
      });
      TimePoint fault{};
      Guid old;
      std::string paths;
      drill.run([&](Cluster& c) {
        REQUIRE(c.fabric().switch_of(c.head(0)) == 0);
        REQUIRE(c.fabric().switch_of(c.head(1)) == k - 1);
        // Both peers resolved, through every switch between the heads.
        for (int i = 0; i < 2; ++i) {
          INFO("head0" << i + 1);
          const auto& routes = c.agent(i)->routes();
          REQUIRE(routes.size() == 1);
          const NodeId self = c.head(i), other = c.head(1 - i);
          CHECK(routes[0].found);
          CHECK(routes[0].state == agent::RouteState::Resolved);
          CHECK(routes[0].lid == c.fabric().lid(other));
          CHECK(routes[0].description == c.fabric().name(other));
          REQUIRE(routes[0].dr);
          CHECK(routes[0].dr->hops.size() == static_cast<std::size_t>(k + 1));
          CHECK(*routes[0].dr == c.fabric().dr_path(self, other));
          paths += (i ? ", " : "") + to_string(*routes[0].dr);
        }
        const auto m = c.observed_masters();
        REQUIRE(m.size() == 1);
        CHECK(c.head_of(m[0]) == 0);
        old = m[0];
        fault = c.now();  // the drill's first step (kill -9 of head01's OpenSM) follows at once
      });
      auto& c = drill.cluster();
      const auto seen = c.first_new_master_seen(fault, old);
      REQUIRE(seen);
      std::printf("sim GUID-only, heads %d switch(es) apart: routes %s; kill -9 of the master OpenSM, new "
                  "MASTER seen after %.1f ms\n",
                  k, paths.c_str(), to_ms(*seen - fault));
      CHECK(c.dual_master_total() == Duration{0});
    }
  }
}
