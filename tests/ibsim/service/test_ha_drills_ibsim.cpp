// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// The HA drills of issue 4 on real OpenSM: two smhad (head01 on Hca1, head02 on
// Hca2), each running its own OpenSM under umad2sim with the umad timeout shim,
// observed from Hca3. The drills, their faults and their expected outcomes are
// the shared table tests/drills/ha_drills.hpp; tests/sim/sim/
// test_sim_drill_table.cpp runs the same table on the simulated fabric.
//
// Observation from Hca3: `sminfo <lid>` for the condition waits and the final
// count of MASTERs, plus bench_failover_probe polling both heads' SMInfo every
// kWatchIntervalMs for the whole drill (only B while A's OpenSM is SIGSTOPped:
// a frozen SM's socket queue must not be filled, doc/lab.md quirk 5). Two
// MASTERs are counted only when each head answered MASTER after the other had
// (a planned handover's old master answering MASTER just before it hands over
// is not two masters; a hung master waking up as MASTER is).
//
// Every process is stopped by PID, also on failure: smhad, ibsim and the probe by
// the fabric, the OpenSMs smhad started by OsmGuard.
#include <catch2/catch.hpp>

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "ha_drills.hpp"
#include "ibsim_harness.hpp"
#include "master_watch.hpp"
#include "smhad_heads.hpp"

using namespace smha;
using namespace smha::testing;
using namespace std::chrono_literals;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

// smhad's failover.poll_interval_ms in every drill: the default.
constexpr int kPollIntervalMs = 100;
// smhad's start grace: no hang verdict on an OpenSM younger than this.
constexpr double kStartGraceS = 5.0;
// Bound of every Await step and of the final settling.
constexpr auto kAwaitBound = 30s;

// Event kinds smhad recorded, in the drill table's vocabulary
// (tests/drills/ha_drills.hpp): alarms as "alarm:<kind>", transitions as
// "state_changed", daemon notes (RELOAD, HOLD ...) as they are.
std::vector<std::string> table_kinds(const json& events) {
  std::vector<std::string> out;
  for (const auto& e : events) {
    const std::string kind = e.value("kind", "");
    if (kind == "alarm") out.push_back("alarm:" + e.value("reason", ""));
    else if (kind == "transition") out.push_back("state_changed");
    else if (kind != "alarm_cleared") out.push_back(kind);
  }
  return out;
}

// The reasons of the priority_changed events ("11->10 as master", ...).
std::vector<std::string> priority_changes(const json& events) {
  std::vector<std::string> out;
  for (const auto& e : events)
    if (e.value("kind", "") == "priority_changed") out.push_back(e.value("reason", ""));
  return out;
}

// "F->T as ROLE" with T < F: the head re-rendered itself to a lower priority.
bool lowered(const std::string& reason) {
  unsigned from = 0, to = 0;
  char role[16] = {};
  if (std::sscanf(reason.c_str(), "%u->%u as %15s", &from, &to, role) != 3) return false;
  return to < from;
}

std::string events_text(const json& events) {
  std::string out;
  for (const auto& e : events)
    out += "  " + e.value("time", "") + " " + e.value("kind", "") + " " + e.value("reason", "") + " | " +
           e.value("evidence", "") + "\n";
  return out;
}

// The LID a master's sweep gave `node`'s port (ibstat until it is not 0):
// the observer's; smhad's configs name none.
int assigned_lid(IbsimFabric& fabric, const std::string& node) {
  std::optional<NodePort> p;
  const bool have = wait_for([&] {
    p = fabric.node_port(node);
    return p && p->lid != 0;
  }, 10s);
  REQUIRE(have);
  return p->lid;
}

class IbsimDrill {
 public:
  explicit IbsimDrill(const DrillScenario& d) : d_(d), fabric_(topology_path("two-switch-4hca.net")) {}

  void run() {
    t_begin_ = Clock::now();
    setup();
    start();
    t_faults_ = Clock::now();
    for (const auto& s : d_.steps) step(s.op, s.arg);
    check_outcome();
    fabric_.stop_process(a_.pidx);
    fabric_.stop_process(b_.pidx);
  }

 private:
  // LIDs: a plain OpenSM on Hca3 assigns them once (later masters keep a port's
  // LID) and is stopped before smhad starts, so the configs can name them.
  void setup() {
    const int boot = fabric_.start_opensm("Hca3", 0);
    REQUIRE(fabric_.wait_subnet_up(boot, 20s));
    // Read both heads' ports until they show their LIDs (an ibstat can fail
    // while the machine is busy).
    std::optional<NodePort> p1, p2;
    const bool have_lids = wait_for([&] {
      p1 = fabric_.node_port("Hca1");
      p2 = fabric_.node_port("Hca2");
      return p1 && p2 && p1->lid != 0 && p2->lid != 0;
    }, 10s);
    REQUIRE(have_lids);
    fabric_.stop_opensm(boot);
    a_ = SmhadHead{"head01", "Hca1", p1->port_guid, fabric_.scratch_dir() + "/head01"};
    b_ = SmhadHead{"head02", "Hca2", p2->port_guid, fabric_.scratch_dir() + "/head02"};
    a_.lid = p1->lid;
    b_.lid = p2->lid;
    // The table's roles: A is the lower GUID (the preferred head under preempt,
    // and OpenSM's tie-break winner).
    REQUIRE(a_.guid < b_.guid);
    SmhadOptions o;
    o.poll_interval_ms = kPollIntervalMs;
    o.failback = d_.failback == DrillFailback::Preempt ? "preempt" : "sticky";
    o.preempt_holddown_s = d_.preempt_holddown_s;
    // GUID-only configs (name + port_guid): each smhad finds the other head's
    // directed route (0,1,3,1 in two-switch-4hca.net) and LID by discovery
    // (doc/discovery.md), and then also reads the PortInfo of the switch port
    // the peer hangs on. The LIDs above are only the observer's.
    write_smhad_config(a_, {{b_.name, b_.guid, 0}}, o);
    write_smhad_config(b_, {{a_.name, a_.guid, 0}}, o);
    guard_.add_pidfile(a_.pidfile());
    guard_.add_pidfile(b_.pidfile());
    // A drill with MAD loss runs both smhad (and the OpenSMs they start, which
    // inherit the environment) under the SMInfo loss shim, at 0 % until LossOn.
    for (const auto& s : d_.steps)
      if (s.op == DrillOp::LossOn && !loss_) loss_ = std::make_unique<SmInfoLoss>(fabric_.scratch_dir() + "/loss");
  }

  void start_head(SmhadHead& h) {
    if (loss_) start_smhad(fabric_, h, SMHA_SMHAD, loss_->env());
    else start_smhad(fabric_, h, SMHA_SMHAD, {{"LD_PRELOAD", umad_timeout_shim_preload()}});
  }

  void start() {
    if (d_.start == DrillStart::Together) {
      start_head(a_);
      start_head(b_);
      watch_ = std::make_unique<MasterWatch>(fabric_, std::vector<int>{a_.lid, b_.lid});
      return;
    }
    start_head(a_);
    json s;
    if (!wait_status(fabric_, a_, guard_, [](const json& j) {
          return local_master(j) && j["role"] == "master";
        }, kAwaitBound, &s))
      FAIL("head01 not MASTER: " << s.dump() << "\n" << smhad_log(fabric_, a_));
    start_head(b_);
    if (!wait_status(fabric_, b_, guard_, [](const json& j) {
          return j["local"]["state"] == "STANDBY" && j["peers"][0]["state"] == "MASTER";
        }, kAwaitBound, &s))
      FAIL("head02 not STANDBY seeing head01 MASTER: " << s.dump() << "\n" << smhad_log(fabric_, b_));
    if (d_.past_start_grace) {
      // smhad's start grace (HaPolicy default 5 s; not configurable) from
      // OpenSM's uptime in status, plus a poll round.
      if (!wait_status(fabric_, a_, guard_, [](const json& j) {
            return j["opensm"].value("uptime_s", 0.0) > kStartGraceS + kPollIntervalMs / 1000.0;
          }, kAwaitBound, &s))
        FAIL("head01's OpenSM uptime never passed the start grace: " << s.dump());
    }
    watch_ = std::make_unique<MasterWatch>(fabric_, std::vector<int>{a_.lid, b_.lid});
  }

  int a_opensm_pid() {
    json s;
    REQUIRE(wait_status(fabric_, a_, guard_, [](const json& j) { return j["opensm"].value("pid", 0) > 0; },
                        kAwaitBound, &s));
    return s["opensm"]["pid"];
  }

  // The observer's view of one head: MASTER (3), STANDBY (2) ... or -1.
  int state_at(const SmhadHead& h, std::chrono::milliseconds timeout = 2s) {
    const auto v = query_sm(fabric_, "Hca3", h.lid, timeout);
    return v.guid == h.guid ? v.state : -1;
  }

  // The state h answers from Hca3, asking again while nothing answers (a
  // loaded machine can starve one `sminfo` past its timeout): only an answer
  // counts; -1 if none came within the await bound.
  int answered_state_at(const SmhadHead& h) {
    int st = -1;
    wait_for([&] { return (st = state_at(h)) >= 0; }, kAwaitBound);
    return st;
  }

  void await(const char* what, const std::function<bool()>& pred) {
    const auto t0 = Clock::now();
    if (!wait_for(pred, kAwaitBound))
      FAIL(d_.name << ": " << what << " not reached within " << kAwaitBound.count() << " s\n"
                   << diagnostics());
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
    timeline_ += "  " + std::string(what) + " after " + std::to_string(ms) + " ms\n";
  }

  void step(DrillOp op, int arg) {
    timeline_ += "  step " + std::to_string(static_cast<int>(op)) + " at " +
                 std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t_faults_).count()) +
                 " ms\n";
    switch (op) {
      case DrillOp::KillOpensm: {
        const int pid = a_opensm_pid();
        fault_ = Clock::now();
        REQUIRE(::kill(pid, SIGKILL) == 0);
        break;
      }
      case DrillOp::StopOpensm: {
        // A frozen SM must not be polled by the probe: watch B only meanwhile.
        watch_.reset();
        stopped_pid_ = a_opensm_pid();
        stopped_start_ = proc_stat(stopped_pid_)->start;
        fault_ = Clock::now();
        REQUIRE(::kill(stopped_pid_, SIGSTOP) == 0);
        watch_ = std::make_unique<MasterWatch>(fabric_, std::vector<int>{b_.lid});
        break;
      }
      case DrillOp::ContOpensm: {
        // SIGCONT only if it is still the process we stopped (smhad fences it).
        const auto st = proc_stat(stopped_pid_);
        const bool alive = st && st->start == stopped_start_ && st->state != 'Z';
        timeline_ += std::string("  hung OpenSM ") + (alive ? "still alive at SIGCONT\n" : "already fenced\n");
        if (alive) ::kill(stopped_pid_, SIGCONT);
        watch_ = std::make_unique<MasterWatch>(fabric_, std::vector<int>{a_.lid, b_.lid});
        break;
      }
      case DrillOp::Unlink:
        fault_ = Clock::now();
        fabric_.console("Unlink \"Hca1\"[1]");
        break;
      case DrillOp::Relink: fabric_.console("ReLink \"Hca1\"[1]"); break;
      case DrillOp::CrashHead: {
        const int pid = a_opensm_pid();
        fault_ = Clock::now();
        fabric_.stop_process(a_.pidx, SIGKILL);
        REQUIRE(::kill(pid, SIGKILL) == 0);
        break;
      }
      case DrillOp::RestartSmhad: start_head(a_); break;
      case DrillOp::LossOn:
        // Loss of the SMInfo MADs (attribute 0x20), the HA protocol's traffic,
        // that both heads' smhad and OpenSM send off-node, by the loss shim:
        // ibsim's `Error "HcaN"[1] R 32` drops no SMInfo at all, and with loss
        // of every attribute real OpenSM 3.3.23 under ibsim loses its own port
        // ("SM port is down"); doc/ha-engine.md, "Drills".
        loss_->set_percent(arg);
        loss_percent_ = arg;
        break;
      case DrillOp::LossOff: {
        loss_->set_percent(0);
        const auto c = loss_->counts();
        timeline_ += "  SMInfo loss at " + std::to_string(loss_percent_) + " %: " + std::to_string(c.dropped) +
                     " of " + std::to_string(c.seen) + " dropped by " + std::to_string(c.processes) +
                     " processes\n";
        std::cout << "ibsim drill " << d_.name << ": SMInfo loss shim dropped " << c.dropped << " of " << c.seen
                  << " off-node SMInfo MADs (" << c.processes << " processes)" << std::endl;
        INFO(c.text);
        // Both smhad and both OpenSMs sent SMInfo off-node, about 80 a second
        // in all; the share dropped is the rate, within a few binomial sigma.
        CHECK(c.processes >= 4);
        CHECK(c.seen >= 1000);
        CHECK(c.dropped * 100 >= c.seen * static_cast<unsigned long long>(std::max(loss_percent_ - 6, 1)));
        CHECK(c.dropped * 100 <= c.seen * static_cast<unsigned long long>(loss_percent_ + 6));
        break;
      }
      case DrillOp::Soak: soak(std::chrono::seconds(arg)); break;
      case DrillOp::AwaitBMaster:
        await("B MASTER seen from Hca3, B's smhad master", [&] {
          if (state_at(b_) != 3) return false;
          auto s = smhad_status(b_);
          return s && (*s)["role"] == "master";
        });
        if (fault_) {
          const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - *fault_).count();
          std::cout << "ibsim drill " << d_.name << ": head02 MASTER seen from Hca3 " << ms
                    << " ms after the fault (sminfo polling, upper bound)" << std::endl;
        }
        break;
      case DrillOp::AwaitAMaster:
        await("A the only MASTER seen from Hca3, A's smhad master", [&] {
          if (state_at(a_) != 3 || state_at(b_) == 3) return false;
          auto s = smhad_status(a_);
          return s && (*s)["role"] == "master";
        });
        break;
      case DrillOp::AwaitAStandby:
        await("A's smhad reports its SM STANDBY", [&] {
          auto s = smhad_status(a_);
          if (!s) return false;
          if (s->contains("opensm")) guard_.add((*s)["opensm"].value("pid", 0));
          return (*s)["local"]["state"] == "STANDBY" && (*s)["opensm"]["supervisor"] == "running";
        });
        break;
      case DrillOp::AwaitOneMaster:
        await("exactly one MASTER seen from Hca3", [&] { return (state_at(a_) == 3) + (state_at(b_) == 3) == 1; });
        break;
    }
    fabric_.free_dead_clients();
  }

  // `duration` of fixed length (the drill's definition), polling meanwhile:
  // the probe's verdict (two MASTERs in turn) and the master seen from Hca3.
  void soak(std::chrono::seconds duration) {
    // sminfo from Hca3 is not under the loss shim, but the heads' answers are:
    // ask until one head answers MASTER.
    int master_before = -1;
    const bool seen = wait_for([&] {
      master_before = state_at(a_) == 3 ? 0 : state_at(b_) == 3 ? 1 : -1;
      return master_before >= 0;
    }, kAwaitBound);
    INFO(diagnostics());
    REQUIRE(seen);
    const auto end = Clock::now() + duration;
    int checks = 0;
    while (Clock::now() < end) {
      const auto v = watch_->verdict();
      if (v.confirmed_dual > 0) FAIL("two MASTERs during the soak:\n" << v.first_dual << diagnostics());
      REQUIRE(watch_->running());
      const SmhadHead& other = master_before == 0 ? b_ : a_;
      // sminfo itself loses MADs here: only an answer counts.
      const auto o = query_sm(fabric_, "Hca3", other.lid, 2s);
      if (o.guid == other.guid && o.state == 3) FAIL("mastership moved during the soak\n" << diagnostics());
      ++checks;
      // An OpenSM smhad killed keeps its ibsim slot (10 slots): free it, or a
      // restarted OpenSM could not attach and the drill would test ibsim.
      if (checks % 10 == 0) fabric_.free_dead_clients();
      std::this_thread::sleep_for(std::chrono::milliseconds(kPollIntervalMs));
    }
    const auto v = watch_->verdict();
    timeline_ += "  soak: " + std::to_string(checks) + " sminfo checks, " + std::to_string(v.answers) +
                 " probe answers\n";
    CHECK(v.answers > 100);
  }

  std::string diagnostics() {
    std::string out = "timeline:\n" + timeline_;
    for (const SmhadHead* h : {&a_, &b_}) {
      if (h->pidx < 0) continue;
      if (auto e = smhad_events(*h)) out += h->name + " events:\n" + events_text(*e);
      out += h->name + " smhad log tail:\n" + smhad_log(fabric_, *h) + "\n";
    }
    if (watch_) {
      const auto v = watch_->verdict();
      for (const auto& [lid, st] : v.last) out += "probe: lid " + std::to_string(lid) + " last " + st + "\n";
    }
    return out;
  }

  void check_outcome() {
    // DrillHead::Any: whichever head Hca3 sees as MASTER once one is.
    bool a_wins = d_.final_master == DrillHead::A;
    if (d_.final_master == DrillHead::Any) {
      REQUIRE(wait_for([&] { return state_at(a_) == 3 || state_at(b_) == 3; }, kAwaitBound));
      a_wins = state_at(a_) == 3;
    }
    const SmhadHead& want = a_wins ? a_ : b_;
    const SmhadHead& other = a_wins ? b_ : a_;
    // Settled: Hca3 sees exactly the expected master and both smhad agree.
    json sw, so;
    // (Hca3's port names the master that swept last: after a handover the new
    // master reprograms it in its sweep, so this is a wait too.)
    const bool settled = wait_for([&] {
      if (state_at(want) != 3 || state_at(other) == 3) return false;
      const auto named = query_sm(fabric_, "Hca3", std::nullopt, 2s);
      if (named.guid != want.guid || named.state != 3) return false;
      auto s1 = smhad_status(want);
      auto s2 = smhad_status(other);
      if (!s1 || !s2) return false;
      sw = *s1;
      so = *s2;
      return local_master(sw) && so["local"]["state"] == "STANDBY";
    }, kAwaitBound);
    INFO(diagnostics());
    REQUIRE(settled);
    // Exactly one MASTER from Hca3: each head by LID, and the master Hca3's port names.
    CHECK(answered_state_at(want) == 3);
    CHECK(answered_state_at(other) == 2);
    MasterView m;
    wait_for([&] { return (m = query_sm(fabric_, "Hca3")).state >= 0; }, kAwaitBound);
    CHECK(m.state == 3);
    CHECK(m.guid == want.guid);
    const auto v = watch_->verdict();
    INFO("probe lines around the first two-MASTER overlap:\n" << v.first_dual);
    CHECK(v.confirmed_dual == 0);

    const auto ea = smhad_events(a_);
    const auto eb = smhad_events(b_);
    REQUIRE(ea);
    REQUIRE(eb);
    const auto ka = table_kinds(*ea);
    const auto kb = table_kinds(*eb);
    const int takeovers = static_cast<int>(std::count(ka.begin(), ka.end(), "takeover_done") +
                                           std::count(kb.begin(), kb.end(), "takeover_done"));
    CHECK(takeovers == d_.takeovers);
    const auto problems = smha::testing::drill_event_problems(d_, ka, kb);
    INFO("event problems:\n" << problems);
    CHECK(problems.empty());
    const auto pa = priority_changes(*ea);
    if (d_.name == "link_down_up") {
      // Its own port down, head01 renders a lower priority so it cannot come
      // back outranking head02: as master, when its smhad sees the port down
      // first, or as standby, when OpenSM's own sweep (the SIGHUP of a fresh
      // master's first priority change starts one) noticed the port first and
      // left MASTER by itself.
      const bool yielded = std::any_of(pa.begin(), pa.end(), lowered);
      INFO("head01 priority changes: " << pa.size() << (yielded ? std::string() : "\n" + diagnostics()));
      CHECK(yielded);
    }
    if (!d_.b_takeover_evidence.empty()) {
      bool found = false;
      for (const auto& e : *eb)
        if (e.value("kind", "") == "takeover_started" &&
            e.value("evidence", "").find(d_.b_takeover_evidence) != std::string::npos)
          found = true;
      INFO("head02 events:\n" << events_text(*eb));
      CHECK(found);
    }
    // Events name their SMs as people know them (NodeDescription: the net
    // file gives Hca1 "head01", Hca2 "head02"): this head first; head02's
    // takeover names the master it lost.
    auto text = [](const nlohmann::json& n, const char* k) {
      return n.contains(k) && n[k].is_string() ? n[k].get<std::string>() : std::string("(none)");
    };
    auto named = [&](const nlohmann::json& e, const std::string& name) {
      for (const auto& n : e["nodes"])
        if (text(n, "name") == name && text(n, "node_description") == name) return true;
      return false;
    };
    for (const auto* ev : {&*ea, &*eb}) {
      const bool on_a = ev == &*ea;
      for (const auto& e : *ev) {
        const std::string kind = e.value("kind", "");
        // The drill's events, after both heads settled (events at start may
        // come before the census read our own NodeDescription).
        if (kind.rfind("takeover_", 0) != 0 && kind.rfind("handover_", 0) != 0 && kind != "fence_local" &&
            kind != "split_brain_yield")
          continue;
        INFO((on_a ? "head01 " : "head02 ") << e.dump());
        REQUIRE(e.contains("nodes"));
        REQUIRE(e["nodes"].is_array());
        CHECK(named(e, on_a ? "head01" : "head02"));
        CHECK(text(e["nodes"][0], "name") == (on_a ? "head01" : "head02"));
        if (!on_a && kind == "takeover_started") CHECK(named(e, "head01"));
      }
    }
    std::string summary = "head01:";
    for (const auto& k : ka) summary += " " + k;
    summary += " | head02:";
    for (const auto& k : kb) summary += " " + k;
    const auto total = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t_begin_).count();
    std::cout << "ibsim drill table " << d_.name << ": master " << want.name << ", takeovers " << takeovers
              << ", " << total << " ms in all; " << summary << std::endl;
    std::string changes;
    for (const auto& r : pa) changes += (changes.empty() ? "" : ", ") + r;
    std::cout << "ibsim drill table " << d_.name << ": head01 priority_changed: " << changes << std::endl;
  }

  const DrillScenario& d_;
  IbsimFabric fabric_;
  OsmGuard guard_;  // after the fabric: the OpenSMs go before ibsim
  SmhadHead a_, b_;
  std::unique_ptr<MasterWatch> watch_;
  std::unique_ptr<SmInfoLoss> loss_;
  int loss_percent_ = 0;
  Clock::time_point t_begin_, t_faults_;
  std::optional<Clock::time_point> fault_;
  int stopped_pid_ = -1;
  unsigned long long stopped_start_ = 0;
  std::string timeline_;
};

void run_drill(const char* name) { IbsimDrill(ha_drill(name)).run(); }

}  // namespace

// One test case per drill (ctest runs them in parallel and names each).
TEST_CASE("HA drill (ibsim, two smhad): SIGSTOP of the master OpenSM, SIGCONT later", "[ibsim][smhad][drill]") {
  run_drill("hung_master");
}

TEST_CASE("HA drill (ibsim, two smhad): master's HCA link down and up", "[ibsim][smhad][drill]") {
  run_drill("link_down_up");
}

TEST_CASE("HA drill (ibsim, two smhad): kill -9 of the master smhad + OpenSM, sticky restart",
          "[ibsim][smhad][drill]") {
  run_drill("sticky_restart");
}

TEST_CASE("HA drill (ibsim, two smhad): kill -9 of the master smhad + OpenSM, preempt failback",
          "[ibsim][smhad][drill]") {
  run_drill("preempt_restart");
}

TEST_CASE("HA drill (ibsim, two smhad): a minute of 20% SMInfo loss on both heads' ports", "[ibsim][smhad][drill]") {
  run_drill("loss_soak");
}

TEST_CASE("HA drill (ibsim, two smhad): both smhad started at the same moment", "[ibsim][smhad][drill]") {
  run_drill("start_together");
}

TEST_CASE("HA drill (ibsim, two smhad): kill -9 of the master OpenSM (table)", "[ibsim][smhad][drill]") {
  run_drill("kill9");
}

// A restart of smhad under a running MASTER never moves mastership: the
// adopted MASTER keeps the master priority from the first write. The
// lower-GUID head is the standby, so a single dip of the master to its standby
// value (equal, the standby's GUID lower) would hand mastership over.
TEST_CASE("HA drill (ibsim, two smhad): repeated kill -9 of the master's smhad never moves "
          "mastership (lower-GUID head standby)",
          "[ibsim][smhad][drill]") {
  IbsimFabric fabric(topology_path("two-switch-4hca.net"));
  OsmGuard guard;  // after the fabric: the OpenSMs go before ibsim
  // GUID-only configs and no OpenSM before smhad: the port GUIDs from ibstat;
  // the observer's LIDs are read once head02's OpenSM has assigned them.
  const auto p1 = fabric.node_port("Hca1");
  const auto p2 = fabric.node_port("Hca2");
  REQUIRE(p1);
  REQUIRE(p2);
  SmhadHead a{"head01", "Hca1", p1->port_guid, fabric.scratch_dir() + "/head01"};
  SmhadHead b{"head02", "Hca2", p2->port_guid, fabric.scratch_dir() + "/head02"};
  REQUIRE(a.guid < b.guid);
  SmhadOptions o;
  o.poll_interval_ms = kPollIntervalMs;
  write_smhad_config(a, {{b.name, b.guid, 0}}, o);
  write_smhad_config(b, {{a.name, a.guid, 0}}, o);
  guard.add_pidfile(a.pidfile());
  guard.add_pidfile(b.pidfile());
  const std::vector<std::pair<std::string, std::string>> env{{"LD_PRELOAD", umad_timeout_shim_preload()}};

  // head02 first: MASTER; head01 (lower GUID) joins as STANDBY.
  start_smhad(fabric, b, SMHA_SMHAD, env);
  json s;
  if (!wait_status(fabric, b, guard, [](const json& j) { return local_master(j) && j["role"] == "master"; },
                   kAwaitBound, &s))
    FAIL("head02 not MASTER: " << s.dump() << "\n" << smhad_log(fabric, b));
  const int osm = s["opensm"]["pid"];
  start_smhad(fabric, a, SMHA_SMHAD, env);
  if (!wait_status(fabric, a, guard, [](const json& j) {
        return j["local"]["state"] == "STANDBY" && j["peers"][0]["state"] == "MASTER";
      }, kAwaitBound, &s))
    FAIL("head01 not STANDBY seeing head02 MASTER: " << s.dump() << "\n" << smhad_log(fabric, a));
  auto eb = smhad_events(b, 1000);
  REQUIRE(eb);
  const auto transitions_before = std::count_if(eb->begin(), eb->end(), [](const json& e) {
    return e.value("kind", "") == "transition";
  });
  const auto priority_changes_before = priority_changes(*eb).size();

  a.lid = assigned_lid(fabric, "Hca1");
  b.lid = assigned_lid(fabric, "Hca2");
  MasterWatch watch(fabric, {a.lid, b.lid});
  constexpr int kRestarts = 4;
  for (int i = 0; i < kRestarts; ++i) {
    fabric.stop_process(b.pidx, SIGKILL);  // OpenSM keeps running (no parent-death signal)
    REQUIRE(pid_running(osm));
    start_smhad(fabric, b, SMHA_SMHAD, env);
    if (!wait_status(fabric, b, guard, [&](const json& j) {
          return local_master(j) && j["role"] == "master" && j["opensm"]["pid"] == osm &&
                 j["opensm"]["adopted"] == true;
        }, kAwaitBound, &s))
      FAIL("restart " << i << ": head02 did not adopt its MASTER: " << s.dump() << "\n" << smhad_log(fabric, b));
    // A few poll rounds of both heads after the adoption.
    REQUIRE(wait_status(fabric, a, guard, [](const json& j) {
      return j["local"]["state"] == "STANDBY" && j["peers"][0]["state"] == "MASTER" &&
             j["peers"][0]["last_poll_answered"] == true;
    }, kAwaitBound, &s));
  }
  watch.stop();
  auto v = watch.verdict();
  INFO("watch (first overlap):\n" << v.first_dual << "\nhead02 smhad:\n" << smhad_log(fabric, b));
  CHECK(v.answers > 0);
  CHECK(v.confirmed_dual == 0);
  CHECK(v.last[b.lid] == "MASTER");
  CHECK(v.last[a.lid] == "STANDBY");
  // head02 recorded adoptions, no role change; head01 never acted.
  eb = smhad_events(b, 1000);
  REQUIRE(eb);
  INFO("head02 events:\n" << events_text(*eb));
  const auto kb = table_kinds(*eb);
  CHECK(std::count(kb.begin(), kb.end(), "adopted") == kRestarts);
  // Never rendered anything but the master value: no start at the standby
  // value, no priority change at all across the restarts.
  CHECK(std::count(kb.begin(), kb.end(), "opensm_started") == 1);
  CHECK(priority_changes(*eb).size() == priority_changes_before);
  CHECK(std::count_if(eb->begin(), eb->end(), [](const json& e) { return e.value("kind", "") == "transition"; }) ==
        transitions_before);
  auto ea = smhad_events(a, 1000);
  REQUIRE(ea);
  const auto ka = table_kinds(*ea);
  for (const char* k : {"takeover_started", "handover_started", "split_brain_yield", "alarm:two_masters"}) {
    CHECK(std::count(ka.begin(), ka.end(), k) == 0);
    CHECK(std::count(kb.begin(), kb.end(), k) == 0);
  }
  fabric.stop_process(a.pidx);
  fabric.stop_process(b.pidx);
}

namespace {

// Two smhad whose peers the configuration does not address (`peer_lid` 0: no
// lid, GUID only; otherwise a `lid` override nobody has: the one ibsim test
// that configures a peer's lid, on purpose) and, with `foreign_sm`, an OpenSM at
// priority 0 on Hca3 that is MASTER before either head starts. No head may
// act against a master that answers: no DISCOVER, no fallback restart, no
// no_master alarm; exactly one MASTER, never two, seen from a third node.
void no_takeover_while_master_answers(int peer_lid, bool foreign_sm) {
  IbsimFabric fabric(topology_path("two-switch-4hca.net"));
  OsmGuard guard;  // after the fabric: the OpenSMs go before ibsim
  // The foreign SM on Hca3, MASTER before either head starts; without it no
  // OpenSM runs before smhad (the observer's LIDs are read once the heads run).
  int foreign = -1;
  if (foreign_sm) {
    foreign = fabric.start_opensm("Hca3", 0);
    REQUIRE(fabric.wait_subnet_up(foreign, 20s));
  }
  const auto p1 = fabric.node_port("Hca1");
  const auto p2 = fabric.node_port("Hca2");
  REQUIRE(p1);
  REQUIRE(p2);
  SmhadHead a{"head01", "Hca1", p1->port_guid, fabric.scratch_dir() + "/head01"};
  SmhadHead b{"head02", "Hca2", p2->port_guid, fabric.scratch_dir() + "/head02"};
  SmhadOptions o;
  o.poll_interval_ms = kPollIntervalMs;
  write_smhad_config(a, {{b.name, b.guid, peer_lid}}, o);
  write_smhad_config(b, {{a.name, a.guid, peer_lid}}, o);
  guard.add_pidfile(a.pidfile());
  guard.add_pidfile(b.pidfile());
  const std::vector<std::pair<std::string, std::string>> env{{"LD_PRELOAD", umad_timeout_shim_preload()}};
  start_smhad(fabric, a, SMHA_SMHAD, env);
  json s;
  // Without a foreign SM head01 becomes MASTER; beside one, OpenSM's own
  // election decides (a higher standby's trap 144 makes the master hand over,
  // in its own time): head01 answers MASTER or STANDBY.
  const auto up = [&](const json& j) {
    return j["local"]["state"] == "MASTER" || (foreign_sm && j["local"]["state"] == "STANDBY");
  };
  if (!wait_status(fabric, a, guard, up, kAwaitBound, &s))
    FAIL("head01 not up: " << s.dump() << "\n" << smhad_log(fabric, a));
  start_smhad(fabric, b, SMHA_SMHAD, env);
  if (!wait_status(fabric, b, guard, [](const json& j) { return j["local"]["state"] == "STANDBY"; }, kAwaitBound, &s))
    FAIL("head02 not STANDBY: " << s.dump() << "\n" << smhad_log(fabric, b));
  a.lid = assigned_lid(fabric, "Hca1");
  b.lid = assigned_lid(fabric, "Hca2");
  std::vector<int> lids{a.lid, b.lid};
  if (foreign_sm) lids.push_back(assigned_lid(fabric, "Hca3"));
  MasterWatch watch(fabric, lids);
  // Long enough for the old loop (no_master rounds, DISCOVER, a fallback
  // restart after the 1 s takeover bound, no_master) to show several times.
  std::this_thread::sleep_for(8s);
  watch.stop();
  auto v = watch.verdict();
  auto ea = smhad_events(a, 1000);
  auto eb = smhad_events(b, 1000);
  REQUIRE(ea);
  REQUIRE(eb);
  INFO("head01 events:\n" << events_text(*ea) << "head02 events:\n" << events_text(*eb) << "watch:\n"
                           << v.first_dual);
  for (const auto* k : {&*ea, &*eb}) {
    const auto kinds = table_kinds(*k);
    for (const char* bad : {"takeover_fallback", "alarm:no_master", "alarm:two_masters", "split_brain_yield"})
      CHECK(std::count(kinds.begin(), kinds.end(), bad) == 0);
    // With the foreign SM, OpenSM's own election hands mastership to head01
    // (priority 10 over 0): while the foreign SM has sent its HANDOVER and
    // answers STANDBY no master answers, and a DISCOVER then is harmless.
    if (!foreign_sm) CHECK(std::count(kinds.begin(), kinds.end(), "takeover_started") == 0);
  }
  CHECK(v.answers > 0);
  CHECK(v.confirmed_dual == 0);
  CHECK(std::count_if(v.last.begin(), v.last.end(), [](const auto& kv) { return kv.second == "MASTER"; }) == 1);
  if (!foreign_sm) {
    CHECK(v.last[a.lid] == "MASTER");
    CHECK(v.last[b.lid] == "STANDBY");
  } else {
    // head01 saw the foreign master at its port's MasterSMLID.
    const auto ka = table_kinds(*ea);
    CHECK(std::count(ka.begin(), ka.end(), "alarm:unknown_sm") >= 1);
    fabric.stop_opensm(foreign);
  }
  fabric.stop_process(a.pidx);
  fabric.stop_process(b.pidx);
}

}  // namespace

TEST_CASE("HA drill (ibsim, two smhad): peers without a lid, no takeover while the master answers",
          "[ibsim][smhad][drill]") {
  no_takeover_while_master_answers(0, false);
}

TEST_CASE("HA drill (ibsim, two smhad): peers at a stale LID, no takeover while the master answers",
          "[ibsim][smhad][drill]") {
  no_takeover_while_master_answers(0xbff0, false);
}

TEST_CASE("HA drill (ibsim, two smhad): an OpenSM at priority 0 on a compute node is MASTER when the "
          "heads start",
          "[ibsim][smhad][drill]") {
  no_takeover_while_master_answers(0, true);
}
