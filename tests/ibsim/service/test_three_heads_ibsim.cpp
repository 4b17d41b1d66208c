// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// Three heads on real OpenSM: head01 (Hca1), head02 (Hca2) and head03 (Hca4),
// each an smhad running its own OpenSM under umad2sim, configured as the README
// says (peers by name and port GUID only, the same sm_priority), observed from
// Hca3 by `sminfo` and by bench_failover_probe polling all three for the whole
// test (master_watch.hpp).
//
// With equal priorities the heads rank by port GUID (OpenSM's order: priority,
// then the lower GUID), so when the master is lost the lower-GUID standby must
// take over and the other must stay STANDBY; never two masters.
//
// Every process is stopped by PID, also on failure: smhad, ibsim and the probe
// by the fabric, the OpenSMs smhad started by OsmGuard.
#include <catch2/catch.hpp>

#include <signal.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <functional>
#include <iostream>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "ibsim_harness.hpp"
#include "master_watch.hpp"
#include "smhad_heads.hpp"

using namespace smha;
using namespace smha::testing;
using namespace std::chrono_literals;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

constexpr auto kBound = 30s;

class ThreeHeads {
 public:
  ThreeHeads() : fabric_(topology_path("two-switch-4hca.net")) {
    // LIDs: a plain OpenSM on Hca3 assigns them once and is stopped before
    // smhad starts (later masters keep a port's LID); only the observer uses them.
    const int boot = fabric_.start_opensm("Hca3", 0);
    REQUIRE(fabric_.wait_subnet_up(boot, 20s));
    const std::array<std::pair<const char*, const char*>, 3> where{
        {{"head01", "Hca1"}, {"head02", "Hca2"}, {"head03", "Hca4"}}};
    for (std::size_t i = 0; i < 3; ++i) {
      std::optional<NodePort> p;
      REQUIRE(wait_for([&] { return (p = fabric_.node_port(where[i].second)) && p->lid != 0; }, 10s));
      h_[i] = SmhadHead{where[i].first, where[i].second, p->port_guid, fabric_.scratch_dir() + "/" + where[i].first};
      h_[i].lid = p->lid;
    }
    fabric_.stop_opensm(boot);
    for (std::size_t i = 0; i < 3; ++i) {
      std::vector<PeerCfg> peers;
      for (std::size_t j = 0; j < 3; ++j)
        if (j != i) peers.push_back({h_[j].name, h_[j].guid, 0});
      write_smhad_config(h_[i], peers);
      guard_.add_pidfile(h_[i].pidfile());
    }
  }

  ~ThreeHeads() {
    watch_.reset();
    for (auto& h : h_)
      if (h.pidx >= 0 && fabric_.process_running(h.pidx)) fabric_.stop_process(h.pidx);
  }

  SmhadHead& head(int i) { return h_[static_cast<std::size_t>(i)]; }

  // head01 first (MASTER), then the two others (STANDBY, each seeing a MASTER peer).
  void start() {
    start_smhad(fabric_, h_[0], SMHA_SMHAD);
    json s;
    if (!wait_status(fabric_, h_[0], guard_, [](const json& j) { return local_master(j) && j["role"] == "master"; },
                     kBound, &s))
      FAIL("head01 not MASTER: " << s.dump() << "\n" << smhad_log(fabric_, h_[0]));
    for (int i : {1, 2}) {
      start_smhad(fabric_, head(i), SMHA_SMHAD);
      if (!wait_status(fabric_, head(i), guard_, [](const json& j) {
            return j["local"]["state"] == "STANDBY" && j["role"] == "standby";
          }, kBound, &s))
        FAIL(head(i).name << " not STANDBY: " << s.dump() << "\n" << smhad_log(fabric_, head(i)));
    }
    watch_ = std::make_unique<MasterWatch>(fabric_, std::vector<int>{h_[0].lid, h_[1].lid, h_[2].lid});
  }

  // The observer's view of head i: 3 MASTER, 2 STANDBY ..., -1 no answer.
  int state_at(int i, std::chrono::milliseconds timeout = 2s) {
    const auto v = query_sm(fabric_, "Hca3", head(i).lid, timeout);
    return v.guid == head(i).guid ? v.state : -1;
  }

  std::string role(int i) {
    auto s = smhad_status(head(i));
    return s ? (*s)["role"].get<std::string>() : std::string("(no answer)");
  }

  // Of the heads in `among`, the one OpenSM's election and smha's ranking pick
  // at equal priorities: the lowest port GUID.
  int best_of(std::initializer_list<int> among) {
    return *std::min_element(among.begin(), among.end(),
                             [&](int a, int b) { return head(a).guid < head(b).guid; });
  }

  int opensm_pid(int i) {
    json s;
    REQUIRE(wait_status(fabric_, head(i), guard_, [](const json& j) { return j["opensm"].value("pid", 0) > 0; },
                        kBound, &s));
    return s["opensm"]["pid"];
  }

  // Waits until Hca3 sees exactly head `m` as MASTER and its smhad says so, the
  // others' smhad STANDBY. `cut_off`: a head whose port is down; its smhad may
  // only not be master (if its OpenSM was slow to leave MASTER, smhad restarted
  // it as standby, and it cannot answer STANDBY before its link is back).
  void await_master(int m, const std::string& what, int cut_off = -1) {
    const auto t0 = Clock::now();
    const bool ok = wait_for([&] {
      for (int i = 0; i < 3; ++i) {
        const int st = state_at(i);
        if (i == m ? st != 3 : st == 3) return false;
      }
      if (role(m) != "master") return false;
      for (int i = 0; i < 3; ++i) {
        if (i == m) continue;
        if (i == cut_off ? role(i) == "master" : role(i) != "standby") return false;
      }
      return true;
    }, kBound);
    if (!ok) FAIL(what << ": " << head(m).name << " not the one MASTER within " << kBound.count() << " s\n"
                       << diagnostics());
    std::cout << "three heads: " << what << ": " << head(m).name << " the one MASTER after "
              << std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count() << " ms"
              << std::endl;
  }

  // Two MASTERs in turn, seen by the probe over the whole test.
  void check_never_two_masters() {
    const auto v = watch_->verdict();
    INFO(diagnostics());
    CHECK(v.answers >= 10);  // the probe ran
    CHECK(v.confirmed_dual == 0);
  }

  std::string diagnostics() {
    std::string out;
    for (auto& h : h_) {
      if (h.pidx < 0) continue;
      if (auto e = smhad_events(h)) {
        out += h.name + " events:\n";
        for (const auto& ev : *e)
          out += "  " + ev.value("time", "") + " " + ev.value("kind", "") + " " + ev.value("reason", "") + "\n";
      }
      out += h.name + " smhad log tail:\n" + smhad_log(fabric_, h) + "\n";
    }
    if (watch_) {
      const auto v = watch_->verdict();
      if (!v.first_dual.empty()) out += "probe, first two masters:\n" + v.first_dual;
    }
    return out;
  }

  IbsimFabric fabric_;
  OsmGuard guard_;

 private:
  std::array<SmhadHead, 3> h_;
  std::unique_ptr<MasterWatch> watch_;
};

enum class Fault { Kill, Hang, Unlink };

void master_lost(Fault fault) {
  ThreeHeads t;
  t.start();
  const int next = t.best_of({1, 2});
  const int third = next == 1 ? 2 : 1;
  const int pid = t.opensm_pid(0);
  switch (fault) {
    case Fault::Kill: REQUIRE(::kill(pid, SIGKILL) == 0); break;
    case Fault::Hang: REQUIRE(::kill(pid, SIGSTOP) == 0); break;
    case Fault::Unlink: t.fabric_.console("Unlink \"Hca1\"[1]"); break;
  }
  // The hung master's own smhad fences it; the unlinked one is silent. Only
  // the best standby takes over; the third head stays STANDBY.
  t.await_master(next, "master lost", fault == Fault::Unlink ? 0 : -1);
  CHECK(t.role(third) == "standby");
  auto ev = smhad_events(t.head(third));
  REQUIRE(ev);
  for (const auto& e : *ev) CHECK(e.value("kind", "") != "takeover_started");
  if (fault == Fault::Hang) {
    // If smhad has not killed it, let the frozen OpenSM go: it must not come back as MASTER.
    const auto st = proc_stat(pid);
    if (st && st->state != 'Z') ::kill(pid, SIGCONT);
  }
  if (fault == Fault::Unlink) t.fabric_.console("ReLink \"Hca1\"[1]");
  t.fabric_.free_dead_clients();
  // Sticky: head01 comes back as STANDBY, mastership stays where it went.
  REQUIRE(wait_status(t.fabric_, t.head(0), t.guard_, [](const json& j) {
    return j["local"]["state"] == "STANDBY" && j["role"] == "standby";
  }, kBound));
  t.await_master(next, "head01 back");
  t.check_never_two_masters();
}

}  // namespace

TEST_CASE("Three heads (ibsim): kill -9 of the master OpenSM, the best standby takes over, sticky",
          "[ibsim][smhad][three]") {
  master_lost(Fault::Kill);
}

TEST_CASE("Three heads (ibsim): SIGSTOP of the master OpenSM, the best standby takes over, sticky",
          "[ibsim][smhad][three]") {
  master_lost(Fault::Hang);
}

TEST_CASE("Three heads (ibsim): the master's link lost, the best standby takes over, sticky",
          "[ibsim][smhad][three]") {
  master_lost(Fault::Unlink);
}

TEST_CASE("Three heads (ibsim): a handover to a named one of two standbys, then a drill among three",
          "[ibsim][smhad][three]") {
  ThreeHeads t;
  t.start();
  const int worse = t.head(1).guid < t.head(2).guid ? 2 : 1;
  // The master hands over only to the best standby: asked for the other, it
  // refuses and says where to run it; run on the named head, it pulls.
  auto r = smhad_call(t.head(0), "handover", json{{"to", t.head(worse).name}});
  REQUIRE(r);
  CHECK_FALSE(r->is_ok());
  CHECK_THAT(r->text, Catch::Contains("run the handover on the target head"));
  r = smhad_call(t.head(worse), "handover", json::object(), 20s);
  REQUIRE(r);
  INFO(r->text << " " << r->data.dump());
  CHECK(r->is_ok());
  t.await_master(worse, "handover to " + t.head(worse).name);
  // The drill from the new master: to the best standby and back.
  r = smhad_call(t.head(worse), "drill", json::object(), 60s);
  REQUIRE(r);
  INFO(r->text << " " << r->data.dump());
  CHECK(r->data.value("verdict", "") == "pass");
  t.await_master(worse, "drill back");
  t.check_never_two_masters();
}

TEST_CASE("Three heads (ibsim): the master lost while the best standby is held: the other standby takes over",
          "[ibsim][smhad][three]") {
  ThreeHeads t;
  t.start();
  const int held = t.best_of({1, 2});
  const int other = held == 1 ? 2 : 1;
  auto r = smhad_call(t.head(held), "hold", json{{"duration_s", 600}, {"reason", "maintenance"}});
  REQUIRE(r);
  REQUIRE(r->is_ok());
  REQUIRE(::kill(t.opensm_pid(0), SIGKILL) == 0);
  t.await_master(other, "master lost, best standby held");
  auto s = smhad_status(t.head(held));
  REQUIRE(s);
  CHECK((*s)["hold"]["held"] == true);
  CHECK((*s)["local"]["state"] == "STANDBY");
  t.check_never_two_masters();
}

// The census and the drift check across three heads: each head's census knows
// all three SMs as heads (one MASTER, two STANDBY) and no other, and each
// head's drift check finds both peers' configuration digests matching (their
// ServiceRecords at the master's SA).
TEST_CASE("Three heads (ibsim): every head's census knows the three heads, drift matches both peers",
          "[ibsim][smhad][three]") {
  ThreeHeads t;
  t.start();
  for (int i = 0; i < 3; ++i) {
    json s;
    const bool seen = wait_status(t.fabric_, t.head(i), t.guard_, [](const json& j) {
      const auto& sms = j["sms"];
      if (!sms.is_array() || sms.size() != 3) return false;
      int masters = 0, standbys = 0;
      for (const auto& e : sms) {
        if (e["head"].is_null()) return false;
        masters += e["state"] == "MASTER";
        standbys += e["state"] == "STANDBY";
      }
      if (masters != 1 || standbys != 2) return false;
      const auto& peers = j["drift"]["peers"];
      if (!peers.is_array() || peers.size() != 2) return false;
      for (const auto& p : peers)
        if (p["state"] != "match") return false;
      return true;
    }, 60s, &s);
    INFO(t.head(i).name << ": " << s["sms"].dump() << "\n" << s["drift"].dump());
    CHECK(seen);
    for (const auto& a : s["alarms"]) CHECK(a.value("kind", "") != "config_drift");
  }
  t.check_never_two_masters();
}
