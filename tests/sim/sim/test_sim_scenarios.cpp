// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// The drills the ibsim tier runs, on the simulated fabric. Each ends with exactly
// one MASTER seen from a third node; the takeover times are printed (virtual time).
#include <catch2/catch.hpp>

#include <csignal>
#include <algorithm>
#include <array>
#include <cstdio>
#include <random>

#include "smha/head/event_journal.hpp"
#include "smha/sim/cluster.hpp"

using namespace smha;
using namespace smha::sim;


namespace {

// Both smhad started; waits until exactly one MASTER is seen from the observer.
Cluster& settle(Cluster& c) {
  c.start_all_smhad();
  REQUIRE(c.run_until([&] { return c.observed_masters().size() == 1; }, seconds(3)));
  c.run_for(seconds(2));
  REQUIRE(c.observed_masters().size() == 1);
  c.reset_dual_master_stats();
  return c;
}

int master_head(Cluster& c) {
  auto m = c.observed_masters();
  REQUIRE(m.size() == 1);
  return c.head_of(m[0]);
}

void dump(const Cluster& c) {
  for (int i = 0; i < c.heads(); ++i)
    for (const auto& r : c.records(i))
      UNSCOPED_INFO(c.fabric().name(c.head(i))
                    << " " << to_ms(r.at.time_since_epoch()) << "ms " << r.what << " " << r.kind
                    << " " << r.detail);
}

void report(const char* drill, double ms) {
  std::printf("sim drill %-32s new MASTER seen from a third node %.1f ms after the fault\n", drill, ms);
}

// Fault at now; returns ms until the observer first saw a MASTER other than `old`.
double takeover_ms(Cluster& c, TimePoint fault, Guid old, Duration limit = seconds(5)) {
  const bool ok = c.run_until([&] { return c.first_new_master_seen(fault, old).has_value(); }, limit);
  if (!ok) dump(c);
  REQUIRE(ok);
  return to_ms(*c.first_new_master_seen(fault, old) - fault);
}

void ends_with_one_master(Cluster& c) {
  c.run_for(seconds(3));
  if (c.observed_masters().size() != 1 || c.fabric().active_masters().size() != 1) dump(c);
  CHECK(c.observed_masters().size() == 1);
  CHECK(c.fabric().active_masters().size() == 1);
  CHECK(c.fabric().sets_to_master() == 0);
}

}  // namespace

TEST_CASE("Drill: both smhad started at the same moment", "[sim][drill]") {
  Cluster c(1);
  c.start_all_smhad();
  const auto t0 = c.now();
  REQUIRE(c.run_until([&] { return c.observed_masters().size() == 1; }, seconds(3)));
  report("both smhad started together", to_ms(c.now() - t0));
  ends_with_one_master(c);
  // The lowest GUID wins OpenSM's election and the winner renders the master priority.
  CHECK(master_head(c) == 0);
  CHECK(c.fabric().sm(c.head(0))->priority == 11);
  CHECK(c.fabric().sm(c.head(1))->priority == 10);
}

TEST_CASE("Drill: kill -9 of the master OpenSM", "[sim][drill]") {
  Cluster c(2);
  settle(c);
  const int m = master_head(c);
  const Guid old = c.fabric().guid(c.head(m));
  const auto fault = c.now();
  REQUIRE(c.fabric().signal_opensm(c.head(m), SIGKILL));
  const double ms = takeover_ms(c, fault, old);
  report("kill -9 of master OpenSM", ms);
  CHECK(ms < 600);
  ends_with_one_master(c);
  // Sticky: the killed head came back as STANDBY.
  CHECK(master_head(c) != m);
  CHECK(c.fabric().sm(c.head(m))->state == SmState::Standby);
  CHECK(c.count_events(1 - m, "takeover_started") == 1);
}

TEST_CASE("Hold: a master lost while both heads hold is not taken over until the hold ends", "[sim][hold]") {
  Cluster c(3);
  settle(c);
  const int m = master_head(c);
  const int s = 1 - m;
  const Guid old = c.fabric().guid(c.head(m));
  // The hold as `smctl hold` sets it: on each head (head::Head::hold).
  for (int i = 0; i < c.heads(); ++i) c.smhad(i)->hold(seconds(3600), "maintenance", 0);
  REQUIRE(c.smhad(s)->status(false).held);
  const auto fault = c.now();
  REQUIRE(c.fabric().signal_opensm(c.head(m), SIGKILL));
  // Both engines see the loss and decide; neither moves mastership: no
  // DISCOVER to the standby's SM, from its own smhad (without the hold it
  // takes over within 600 ms) or from the master's. (The dead OpenSM's own
  // restart is not held; once it runs, OpenSM's election may move mastership,
  // so this looks before the master's recovery delay ends.)
  c.run_for(seconds(1));
  if (c.first_new_master_seen(fault, old)) dump(c);
  CHECK_FALSE(c.first_new_master_seen(fault, old));
  CHECK(c.count_events(s, "takeover_started") == 1);
  CHECK(c.count_events(s, "action_held") >= 1);  // its DISCOVER
  CHECK(c.count_events(m, "action_held") >= 1);  // the master's DISCOVER to the standby
  CHECK(c.fabric().sm(c.head(s))->state == SmState::Standby);
  // Released: one MASTER again, never two.
  for (int i = 0; i < c.heads(); ++i) CHECK(c.smhad(i)->release());
  REQUIRE(c.run_until([&] { return c.observed_masters().size() == 1; }, seconds(10)));
  ends_with_one_master(c);
  CHECK(c.dual_master_total() == Duration{});
}

TEST_CASE("Hold: it expires on the head's clock, and automatic transitions resume", "[sim][hold]") {
  Cluster c(13);
  settle(c);
  const int m = master_head(c);
  const Guid old = c.fabric().guid(c.head(m));
  for (int i = 0; i < c.heads(); ++i) c.smhad(i)->hold(seconds(2), "short window", 0);
  const auto fault = c.now();
  REQUIRE(c.fabric().signal_opensm(c.head(m), SIGKILL));
  c.run_for(milliseconds(1500));
  CHECK_FALSE(c.first_new_master_seen(fault, old));
  // 2 s after it was set the hold is gone (HOLD_EXPIRED), with nothing done by hand.
  REQUIRE(c.run_until([&] { return !c.smhad(1 - m)->status(false).held; }, seconds(1)));
  CHECK(c.smhad(1 - m)->log().events().back().kind == "HOLD_EXPIRED");
  REQUIRE(c.run_until([&] { return c.observed_masters().size() == 1; }, seconds(10)));
  ends_with_one_master(c);
  CHECK(c.dual_master_total() == Duration{});
}

TEST_CASE("Head: the event history survives an smhad restart (state_dir/events.jsonl)", "[sim][head]") {
  Cluster c(14);
  settle(c);
  const int s = 1 - master_head(c);
  c.smhad(s)->hold(seconds(60), "before the restart", 0);
  const std::vector<head::EventRecord> before(c.smhad(s)->log().events().begin(), c.smhad(s)->log().events().end());
  REQUIRE(before.size() >= 2);
  REQUIRE(before.back().kind == "HOLD");
  c.crash_smhad(s);
  c.start_smhad(s);
  c.run_for(seconds(2));
  const auto& after = c.smhad(s)->log().events();
  // The earlier run's events first, as they were; the new run's continue their numbers.
  REQUIRE(after.size() > before.size());
  for (std::size_t i = 0; i < before.size(); ++i) {
    INFO("event " << i);
    CHECK(after[i].seq == before[i].seq);
    CHECK(after[i].kind == before[i].kind);
    CHECK(after[i].reason == before[i].reason);
    CHECK(head::format_utc(after[i].wall) == head::format_utc(before[i].wall));
  }
  CHECK(after[before.size()].seq == before.back().seq + 1);
  CHECK(c.smhad(s)->status(false).held == false);  // a hold is not carried over a restart
  CHECK(c.fabric().fs(c.head(s)).read("/var/lib/smha/events.jsonl").ok());
  ends_with_one_master(c);
}

TEST_CASE("Head: supervision giving up raises opensm_failed through the head's own watch", "[sim][head]") {
  Cluster c(15);
  settle(c);
  const int v = master_head(c);
  const int other = 1 - v;
  // Killed each time it is back, until supervision gives up (crash_loop_count).
  for (int kills = 0; kills < 10 && c.supervisor(v)->state != opensm::SupervisorState::Failed; ++kills) {
    const auto proc = c.fabric().process(c.head(v));
    REQUIRE(proc);
    c.fabric().signal_opensm(c.head(v), SIGKILL);
    c.run_until([&] {
      const auto* st = c.supervisor(v);
      const auto now_proc = c.fabric().process(c.head(v));
      return st->state == opensm::SupervisorState::Failed ||
             (st->state == opensm::SupervisorState::Running && now_proc && now_proc->pid != proc->pid);
    }, seconds(120));
  }
  REQUIRE(c.supervisor(v)->state == opensm::SupervisorState::Failed);
  // The alarm the head's OpensmWatch raised: in its alarms, its status and its events.
  const head::HeadStatus st = c.smhad(v)->status(false);
  const bool alarmed = std::any_of(st.alarms.begin(), st.alarms.end(),
                                   [](const auto& a) { return a.kind == AlarmKind::OpensmFailed; });
  CHECK(alarmed);
  CHECK(c.smhad(v)->log().alarm_active(AlarmKind::OpensmFailed));
  const auto& ev = c.smhad(v)->log().events();
  CHECK(std::count_if(ev.begin(), ev.end(), [](const head::EventRecord& e) {
          return e.type == head::EventType::Alarm && e.reason == "opensm_failed";
        }) == 1);
  REQUIRE(c.run_until([&] { return c.fabric().active_masters() == std::vector<NodeId>{c.head(other)}; },
                      seconds(10)));
  CHECK(c.dual_master_total() == Duration{});
}

// The failback is a pull: its trap 144 may be lost, but the standby OpenSM sends
// it again at each poll of the lower master (sminfo_polling_timeout, 2 s as
// smhad renders it by default), well inside handover_bound.
TEST_CASE("Head: a drill through a burst of MAD loss never makes two masters and passes", "[sim][head]") {
  for (std::uint64_t seed = 21; seed <= 60; ++seed) {
    INFO("seed " << seed);
    Cluster c(seed);
    settle(c);
    const int m = master_head(c);
    std::optional<control::Reply> reply;
    int replies = 0;
    c.smhad(m)->drill().start(nlohmann::json::object(), 0, [&](control::Reply r) {
      ++replies;
      reply = std::move(r);
    });
    // 30 % of every MAD to and from the master's port lost for 400 ms, from
    // a point inside the drill's first leg.
    c.run_for(milliseconds(50 + 40 * static_cast<int>(seed % 5)));
    c.fabric().set_loss(c.head(m), 0.3);
    c.run_for(milliseconds(400));
    c.fabric().set_loss(c.head(m), 0);
    REQUIRE(c.run_until([&] { return reply.has_value(); }, seconds(40)));
    c.run_for(seconds(1));
    CHECK(replies == 1);
    const std::string verdict = reply->data.value("verdict", "");
    INFO(reply->data.dump());
    CHECK(verdict == "pass");
    CHECK(reply->is_ok());
    CHECK(c.observed_masters() == std::vector<Guid>{c.fabric().guid(c.head(m))});
    CHECK(c.count_events(m, "handover_rolled_back") == 0);
    ends_with_one_master(c);
    CHECK(c.dual_master_total() == Duration{});
  }
}

TEST_CASE("Drill: SIGSTOP of the master, then SIGCONT", "[sim][drill]") {
  Cluster c(3);
  settle(c);
  const int m = master_head(c);
  const Guid old = c.fabric().guid(c.head(m));
  const auto fault = c.now();
  REQUIRE(c.fabric().signal_opensm(c.head(m), SIGSTOP));
  const double ms = takeover_ms(c, fault, old);
  report("SIGSTOP of master OpenSM", ms);
  CHECK(ms < 1000);
  c.fabric().signal_opensm(c.head(m), SIGCONT);  // fenced already: nothing to continue
  ends_with_one_master(c);
  CHECK(c.count_events(m, "fence_local") == 1);
  CHECK(c.dual_master_longest() == Duration{0});
}

TEST_CASE("Drill: SIGSTOP of the master with its smhad down, then SIGCONT", "[sim][drill]") {
  Cluster c(4);
  settle(c);
  const int m = master_head(c);
  const Guid old = c.fabric().guid(c.head(m));
  c.crash_smhad(m);
  const auto fault = c.now();
  REQUIRE(c.fabric().signal_opensm(c.head(m), SIGSTOP));
  const double ms = takeover_ms(c, fault, old);
  report("SIGSTOP, smhad beside it down", ms);
  c.run_for(seconds(2));
  c.fabric().signal_opensm(c.head(m), SIGCONT);  // wakes up as a second MASTER
  c.start_smhad(m);
  ends_with_one_master(c);
  INFO("longest dual-master stretch " << to_ms(c.dual_master_longest()) << " ms");
  CHECK(c.dual_master_longest() <= c.params().poll_interval + c.params().fabric.sm.discover_full);
}

TEST_CASE("Drill: master HCA link removed and restored", "[sim][drill]") {
  Cluster c(5);
  settle(c);
  const int m = master_head(c);
  const Guid old = c.fabric().guid(c.head(m));
  const auto fault = c.now();
  c.fabric().set_link(c.head(m), false);
  const double ms = takeover_ms(c, fault, old);
  report("master link removed", ms);
  CHECK(ms < 800);
  c.run_for(seconds(2));
  c.fabric().set_link(c.head(m), true);
  ends_with_one_master(c);
  CHECK(master_head(c) != m);  // sticky: no failback
}

TEST_CASE("Drill: old master restarted under sticky stays STANDBY", "[sim][drill]") {
  Cluster c(6);
  settle(c);
  const int m = master_head(c);
  c.crash_smhad(m);
  REQUIRE(c.fabric().signal_opensm(c.head(m), SIGKILL));
  c.run_for(seconds(3));
  REQUIRE(master_head(c) != m);
  const auto handovers = c.fabric().handovers();
  c.start_smhad(m);  // smhad and OpenSM come back on the old master
  c.run_for(seconds(30));
  ends_with_one_master(c);
  CHECK(master_head(c) != m);
  CHECK(c.fabric().handovers() == handovers);
}

TEST_CASE("Drill: old master restarted under preempt takes mastership back after the hold-down",
          "[sim][drill]") {
  ClusterParams p;
  p.failback = sm::FailbackMode::Preempt;
  Cluster c(7, p);
  settle(c);
  const int m = master_head(c);
  REQUIRE(m == 0);  // the preferred head (lowest GUID)
  c.crash_smhad(m);
  REQUIRE(c.fabric().signal_opensm(c.head(m), SIGKILL));
  c.run_for(seconds(3));
  REQUIRE(master_head(c) == 1);
  const auto back = c.now();
  c.start_smhad(m);
  REQUIRE(c.run_until([&] { return c.observed_masters().size() == 1 && master_head(c) == 0; },
                      seconds(20)));
  const double ms = to_ms(c.now() - back);
  report("preempt: failback after restart", ms);
  CHECK(ms >= to_ms(p.preempt_hold_down));
  ends_with_one_master(c);
  CHECK(master_head(c) == 0);
  CHECK(c.dual_master_longest() == Duration{0});
}

TEST_CASE("Drill: a minute of 20% MAD loss on the heads' ports, no takeover", "[sim][drill]") {
  Cluster c(8);
  settle(c);
  const int m = master_head(c);
  for (int i = 0; i < c.heads(); ++i) c.fabric().set_loss(c.head(i), 0.20);
  c.run_for(seconds(60));
  for (int i = 0; i < c.heads(); ++i) c.fabric().set_loss(c.head(i), 0);
  ends_with_one_master(c);
  CHECK(master_head(c) == m);
  CHECK(c.count_events(1 - m, "takeover_done") == 0);
  CHECK(c.dual_master_total() == Duration{0});
  std::printf("sim drill %-32s DISCOVER kicks: %d, takeovers: %d, required rounds now %d\n",
              "20% loss for 60 s", c.count_events(1 - m, "takeover_started"),
              c.count_events(1 - m, "takeover_done"), c.agent(1 - m)->status().required_rounds);
}

TEST_CASE("Drill: planned handover by request, and rollback when the peer cannot take over",
          "[sim][drill]") {
  Cluster c(9);
  settle(c);
  const int m = master_head(c);
  const auto t = c.now();
  // Whoever asks gets the engine's outcome once (no polling of the event log).
  std::vector<sm::EventKind> outcomes;
  auto note = [&](const sm::RecordEvent& e) { outcomes.push_back(e.kind); };
  c.agent(m)->request_handover(std::nullopt, note);
  REQUIRE(c.run_until([&] { return c.observed_masters().size() == 1 && master_head(c) != m; },
                      seconds(5)));
  report("planned handover (push)", to_ms(c.now() - t));
  ends_with_one_master(c);
  CHECK(c.dual_master_longest() == Duration{0});
  REQUIRE(c.run_until([&] { return !outcomes.empty(); }, seconds(5)));
  CHECK(outcomes == std::vector<sm::EventKind>{sm::EventKind::HandoverDone});
  const int m2 = master_head(c);
  // A standby asked to push is refused at once.
  c.agent(1 - m2)->request_handover(c.fabric().guid(c.head(m2)), note);
  CHECK(outcomes.back() == sm::EventKind::HandoverRejected);
  c.fabric().signal_opensm(c.head(1 - m2), SIGSTOP);  // target frozen: cannot take over
  c.crash_smhad(1 - m2);
  c.agent(m2)->request_handover(std::nullopt, note);
  c.run_for(seconds(8));
  CHECK(master_head(c) == m2);
  CHECK(c.count_events(m2, "handover_rolled_back") == 1);
  CHECK(outcomes == std::vector<sm::EventKind>{sm::EventKind::HandoverDone, sm::EventKind::HandoverRejected,
                                               sm::EventKind::HandoverRolledBack});
}

TEST_CASE("Drill: three heads, master killed: the highest-ranked standby takes over", "[sim][drill]") {
  ClusterParams p;
  p.heads = 3;
  Cluster c(10, p);
  settle(c);
  REQUIRE(master_head(c) == 0);
  const auto fault = c.now();
  c.fabric().signal_opensm(c.head(0), SIGKILL);
  const double ms = takeover_ms(c, fault, c.fabric().guid(c.head(0)));
  report("3 heads: kill -9 of master", ms);
  ends_with_one_master(c);
  CHECK(master_head(c) == 1);
  CHECK(c.count_events(2, "takeover_started") == 0);
}

// `smctl handover` run on a STANDBY pulls mastership to that head, whichever
// standby it is (the master pushes only to the best one).
TEST_CASE("Head: three heads, a handover run on the lower-ranked standby pulls mastership to it", "[sim][head]") {
  ClusterParams p;
  p.heads = 3;
  Cluster c(11, p);
  settle(c);
  REQUIRE(master_head(c) == 0);
  std::vector<control::Reply> replies;
  auto keep = [&](control::Reply r) { replies.push_back(std::move(r)); };
  // On the master, to head03 (not the best standby): refused, naming where to run it.
  c.smhad(0)->handover(std::string("head03"), 0, keep);
  c.run_until([&] { return replies.size() == 1; }, seconds(1));
  REQUIRE(replies.size() == 1);
  CHECK(replies[0].result == control::ResultCode::Error);
  CHECK_THAT(replies[0].text, Catch::Contains("run the handover on the target head"));
  // On head03 naming another head: refused, this head can only pull to itself.
  c.smhad(2)->handover(std::string("head02"), 0, keep);
  REQUIRE(replies.size() == 2);
  CHECK(replies[1].result == control::ResultCode::Conflict);
  CHECK_THAT(replies[1].text, Catch::Contains("it can only pull mastership to itself"));
  // On head03, to itself (by name): the pull.
  c.smhad(2)->handover(std::string("head03"), 0, keep);
  REQUIRE(c.run_until([&] { return replies.size() == 3; }, seconds(10)));
  INFO(replies[2].text << " " << replies[2].data.dump());
  CHECK(replies[2].is_ok());
  CHECK(replies[2].data.value("outcome", "") == "done");
  ends_with_one_master(c);
  CHECK(master_head(c) == 2);
  CHECK(c.dual_master_total() == Duration{});
  // The master asked to pull to itself: nothing to do.
  c.smhad(2)->handover(std::string("head03"), 0, keep);
  REQUIRE(replies.size() == 4);
  CHECK(replies[3].text == "handover: this head is MASTER already");
}

// A head under maintenance (held) renders the yield value as STANDBY: when the
// master is lost, neither the old master's smhad (its DISCOVER to the best
// standby) nor OpenSM's election picks it; the other standby takes over.
TEST_CASE("Head: three heads, the master lost while the best standby is held: the other one takes over", "[sim][head]") {
  for (std::uint64_t seed = 31; seed <= 38; ++seed) {
    INFO("seed " << seed);
    ClusterParams p;
    p.heads = 3;
    Cluster c(seed, p);
    settle(c);
    REQUIRE(master_head(c) == 0);
    c.smhad(1)->hold(seconds(3600), "maintenance", 0);
    REQUIRE(c.run_until([&] { return c.fabric().sm(c.head(1))->priority == 9; }, seconds(2)));
    c.fabric().signal_opensm(c.head(0), SIGKILL);
    REQUIRE(c.run_until([&] { return c.observed_masters() == std::vector<Guid>{c.fabric().guid(c.head(2))}; },
                        seconds(5)));
    ends_with_one_master(c);
    CHECK(master_head(c) == 2);
    CHECK(c.fabric().sm(c.head(1))->state == SmState::Standby);
    for (int i = 0; i < 3; ++i) {
      CHECK(c.count_events(i, "priority_mismatch") == 0);
      CHECK(c.count_events(i, "priority_not_applied") == 0);
    }
    CHECK(c.dual_master_total() == Duration{});
  }
}

TEST_CASE("Drill: head01 15 / head02 14 (prefer head01), sticky and preempt", "[sim][drill][priority]") {
  for (auto mode : {sm::FailbackMode::Sticky, sm::FailbackMode::Preempt}) {
    INFO("failback " << sm::to_string(mode));
    ClusterParams p;
    p.heads = 3;
    p.priorities = {14, 15, 13};  // head02 (the higher GUID of the first two) is preferred
    p.failback = mode;
    Cluster c(7, p);
    // The preferred head starts first (in a simultaneous start the simulated
    // OpenSMs all become MASTER and the handovers race the re-rendering); the
    // others join as standby.
    c.start_smhad(1);
    REQUIRE(c.run_until([&] { return c.observed_masters().size() == 1; }, seconds(3)));
    settle(c);
    // The preferred head is MASTER despite its higher GUID; it renders
    // the master value 14 above every standby value (head01 12, head03 11; head02 13).
    REQUIRE(master_head(c) == 1);
    CHECK(c.fabric().sm(c.head(1))->priority == 14);
    CHECK(c.fabric().sm(c.head(0))->priority == 12);
    CHECK(c.fabric().sm(c.head(2))->priority == 11);
    // The preferred head dies: the next preferred (head01, 14) takes over, not head03.
    const auto fault = c.now();
    c.fabric().signal_opensm(c.head(1), SIGKILL);
    takeover_ms(c, fault, c.fabric().guid(c.head(1)));
    c.run_for(seconds(1));
    CHECK(master_head(c) == 0);
    CHECK(c.count_events(2, "takeover_started") == 0);
    // head02 comes back (its smhad restarts it at its standby value 13 < master 14).
    c.run_for(seconds(3));
    REQUIRE(c.fabric().sm(c.head(1)));
    CHECK(c.fabric().sm(c.head(1))->priority == 13);
    c.run_for(seconds(6));  // past the 5 s preempt hold-down
    if (mode == sm::FailbackMode::Sticky) {
      CHECK(master_head(c) == 0);  // sticky: no failback on its own
    } else {
      CHECK(master_head(c) == 1);  // preempt: the preferred head pulled it back
      CHECK(c.count_events(1, "handover_done") == 1);
    }
    ends_with_one_master(c);
    for (int i = 0; i < c.heads(); ++i) CHECK(c.count_events(i, "takeover_aborted") == 0);
  }
}

TEST_CASE("Takeover times over random fault phases (median and max of 21 runs)", "[sim][drill][timing]") {
  enum class F { Kill, Hang, Link };
  for (F f : {F::Kill, F::Hang, F::Link}) {
    std::vector<double> ms;
    for (int run = 0; run < 21; ++run) {
      Cluster c(1000 + static_cast<std::uint64_t>(run));
      settle(c);
      // Fault at a random phase of the poll cycle.
      c.run_for(microseconds(std::uniform_int_distribution<int>(0, 99'999)(c.fabric().rng())));
      const int m = master_head(c);
      const Guid old = c.fabric().guid(c.head(m));
      const auto fault = c.now();
      if (f == F::Kill) c.fabric().signal_opensm(c.head(m), SIGKILL);
      if (f == F::Hang) c.fabric().signal_opensm(c.head(m), SIGSTOP);
      if (f == F::Link) c.fabric().set_link(c.head(m), false);
      ms.push_back(takeover_ms(c, fault, old));
      ends_with_one_master(c);
    }
    std::sort(ms.begin(), ms.end());
    const char* what = f == F::Kill ? "kill -9" : f == F::Hang ? "SIGSTOP" : "link removed";
    std::printf("sim timing %-14s median %.1f ms, min %.1f ms, max %.1f ms (21 runs)\n", what,
                ms[ms.size() / 2], ms.front(), ms.back());
    // kill -9: the dead SM's port refuses the queries (no SM bound): 3 rounds (the
    // first within one interval, then back to back) + the sweep.
    // SIGSTOP: silence until the smhad beside it fences it (misses rounds and
    // hang_timeout 400 ms), then refused: the rounds are already there + the sweep.
    // Link removed: silence and nobody to fence it: the peer waits hang_timeout +
    // 2 polls + the query window (650 ms) after the last answer, + the sweep.
    const double median_bound = f == F::Kill ? 300 : f == F::Hang ? 700 : 900;
    const double max_bound = f == F::Kill ? 400 : 1000;
    CHECK(ms[ms.size() / 2] <= median_bound);
    CHECK(ms.back() <= max_bound);
  }
}

// A smhad restart beside a MASTER (kill -9 and systemd's restart, an upgrade's
// try-restart) on a busy machine: its first queries to its own SM get no answer
// in time. The OpenSM it takes over must keep the master value from the first
// write and stay MASTER — here on the higher-GUID head, so a dip to the standby
// value would lose OpenSM's election to the lower-GUID standby at once.
TEST_CASE("Drill: smhad restarted beside the MASTER, its first local answers lost: mastership stays",
          "[sim][drill][adopt]") {
  for (int lost : {3, 6, 15}) {  // a round makes 3 attempts: 3 lose the whole first round
    DYNAMIC_SECTION(lost << " local SMInfo answers lost") {
      Cluster c(40 + static_cast<std::uint64_t>(lost));
      settle(c);
      // Mastership to the higher-GUID head (head 1).
      REQUIRE(master_head(c) == 0);
      c.agent(0)->request_handover(std::nullopt);
      REQUIRE(c.run_until([&] { return c.observed_masters().size() == 1 && master_head(c) == 1; },
                          seconds(5)));
      c.run_for(seconds(2));
      const int m = 1;
      const Guid own = c.fabric().guid(c.head(m));
      int min_priority = 16, answers = 0, dropped = 0;
      std::uint8_t master_value = 0;
      Cluster::Tap tap;
      tap.sminfo = [&](const SmInfo& info, TimePoint, TimePoint, const std::string& via) {
        if (info.guid != own || via.rfind("dr:", 0) != 0) return;
        if (master_value == 0) master_value = info.priority;  // before the restart
        ++answers;
        min_priority = std::min<int>(min_priority, info.priority);
      };
      c.set_tap(m, tap);
      c.run_for(milliseconds(500));
      REQUIRE(master_value > 0);
      const auto handovers = c.fabric().handovers();
      const int started = c.count_events(m, "opensm_started");
      const int state_changes = c.count_events(m, "state_changed");
      const int priority_changes = c.count_events(m, "priority_changed");
      const int spawns = c.opensm_spawns(m);
      c.crash_smhad(m);
      c.run_for(milliseconds(300));
      tap.drop_sminfo = [&](const mad::Target& t) {
        const auto* dr = std::get_if<DrPath>(&t);
        if (dr == nullptr || !dr->hops.empty() || dropped >= lost) return false;
        ++dropped;
        return true;
      };
      c.set_tap(m, tap);
      answers = 0;
      c.start_smhad(m);
      c.run_for(seconds(10));
      CHECK(dropped == lost);
      CHECK(answers > 0);
      CHECK(min_priority == master_value);  // never below the master value
      CHECK(master_head(c) == m);
      CHECK(c.fabric().handovers() == handovers);
      CHECK(c.count_events(m, "adopted") >= 1);
      CHECK(c.count_events(m, "opensm_started") == started);
      CHECK(c.count_events(m, "state_changed") == state_changes);  // an adoption is no role change
      CHECK(c.count_events(m, "priority_changed") == priority_changes);
      CHECK(c.opensm_spawns(m) == spawns);  // taken over, none started
      ends_with_one_master(c);
      CHECK(c.dual_master_total() == Duration{0});
    }
  }
}

// The takeover report (doc/takeover-report.md) in the sim: the simulated
// OpenSM's log lines go through opensm::parse_log_event as smhad's log
// follower's do; the census walks and MasterSMLID are the fabric's.
TEST_CASE("Takeover report: kill -9 of the master, then a planned handover back", "[sim][drill][report]") {
  ClusterParams p;
  p.census.enabled = true;  // as in smhad
  Cluster c(31, p);
  settle(c);
  // A census walk has run on the standby (first_walk_delay 3 s): LIDs before.
  c.run_for(seconds(2));
  const int m = master_head(c);
  const int s = 1 - m;
  REQUIRE(c.agent(s)->census_stats().walks >= 1);
  REQUIRE_FALSE(c.watchers(s)->last_takeover());  // the cold start's two masters for a round are no takeover
  REQUIRE(c.fabric().signal_opensm(c.head(m), SIGKILL));
  REQUIRE(c.run_until([&] { return c.watchers(s)->last_takeover().has_value(); }, seconds(10)));
  const fabric::TakeoverReport r = *c.watchers(s)->last_takeover();
  INFO(fabric::summary(r));
  CHECK(r.kind == fabric::TakeoverReport::Kind::Takeover);
  CHECK(r.previous_master == c.fabric().guid(c.head(m)));
  REQUIRE(r.detection);
  REQUIRE(r.to_master);
  REQUIRE(r.master_to_subnet_up);
  // The takeover as a whole stays within the drill's bound (kill -9 < 600 ms).
  CHECK(*r.detection + *r.to_master < milliseconds(600));
  CHECK(r.routing_engine == "minhop");
  CHECK_FALSE(r.routing_fallback);
  // The sim keeps every LID; its master's heavy sweep points every linked port at it.
  REQUIRE(r.ports_compared);
  CHECK(*r.ports_compared >= 2);
  CHECK(r.lids_changed == 0);
  CHECK(r.master_lid == c.fabric().lid(c.head(s)));
  REQUIRE(r.ports_sampled);
  CHECK(*r.ports_sampled >= 2);
  CHECK(r.ports_on_new_master == *r.ports_sampled);
  CHECK(r.incomplete.empty());
  CHECK(c.count_events(s, "takeover_started") == 1);
  // The old master's head reports nothing: it never became MASTER again.
  CHECK_FALSE(c.watchers(m)->last_takeover());

  // The killed head is STANDBY again (sticky); a planned handover moves
  // mastership to it, and it reports a handover.
  REQUIRE(c.run_until([&] { return c.fabric().sm(c.head(m)) && c.fabric().sm(c.head(m))->state == SmState::Standby; },
                      seconds(10)));
  c.run_for(seconds(1));
  c.agent(s)->request_handover(std::nullopt);
  REQUIRE(c.run_until([&] { return c.watchers(m)->last_takeover().has_value(); }, seconds(40)));
  const fabric::TakeoverReport h = *c.watchers(m)->last_takeover();
  INFO(fabric::summary(h));
  CHECK(h.kind == fabric::TakeoverReport::Kind::Handover);
  CHECK(h.previous_master == c.fabric().guid(c.head(s)));
  CHECK_FALSE(h.detection);
  CHECK(h.master_to_subnet_up);
  REQUIRE(h.ports_sampled);
  CHECK(h.ports_on_new_master == *h.ports_sampled);
  int reports = 0;
  for (const auto& rec : c.records(m)) reports += rec.what == "report";
  CHECK(reports == 1);
}

// The master dies while the standby's smhad has just started its OpenSM
// again (engine `starting`: it has not yet polled its SM STANDBY) and the
// master's smhad has seen that SM STANDBY: it sends our SM DISCOVER, ours
// becomes MASTER without the engine starting a takeover, and the takeover is
// still reported. The standby's own SMInfo polls are held back (a drop tap)
// to keep its engine `starting` until its SM answers MASTER.
TEST_CASE("Takeover report: the master lost while the standby's smhad is starting", "[sim][drill][report]") {
  ClusterParams p;
  p.census.enabled = true;
  Cluster c(33, p);
  std::array<bool, 2> hold{false, false};          // drop head i's polls of its own SM
  std::array<bool, 2> peer_standby{false, false};  // head i saw the other head's SM STANDBY
  for (int i = 0; i < 2; ++i) {
    Cluster::Tap tap;
    tap.sminfo = [&, i](const SmInfo& info, TimePoint, TimePoint, const std::string&) {
      if (info.guid != c.fabric().guid(c.head(i)) && info.state == SmState::Standby) peer_standby[i] = true;
    };
    tap.drop_sminfo = [&, i](const mad::Target& t) {
      const auto* dr = std::get_if<DrPath>(&t);
      return hold[i] && dr && dr->hops.size() <= 1;
    };
    c.set_tap(i, tap);
  }
  settle(c);
  c.run_for(seconds(2));
  const int m = master_head(c);
  const int s = 1 - m;
  const Guid old = c.fabric().guid(c.head(m));
  // The standby's OpenSM dies; its smhad starts it again after the backoff.
  const int spawns = c.opensm_spawns(s);
  REQUIRE(c.fabric().signal_opensm(c.head(s), SIGKILL));
  REQUIRE(c.run_until([&] { return c.opensm_spawns(s) > spawns; }, seconds(10)));
  REQUIRE(c.agent(s)->status().role == sm::Role::Starting);
  hold[s] = true;
  peer_standby[m] = false;
  REQUIRE(c.run_until([&] { return peer_standby[m]; }, seconds(2)));
  REQUIRE(c.agent(s)->status().role == sm::Role::Starting);
  const TimePoint fault = c.now();
  REQUIRE(c.fabric().signal_opensm(c.head(m), SIGKILL));
  takeover_ms(c, fault, old);
  CHECK(c.count_events(m, "peer_discover") == 1);
  hold[s] = false;
  REQUIRE(c.run_until([&] { return c.watchers(s)->last_takeover().has_value(); }, seconds(10)));
  const fabric::TakeoverReport r = *c.watchers(s)->last_takeover();
  INFO(fabric::summary(r));
  CHECK(r.kind == fabric::TakeoverReport::Kind::Takeover);
  CHECK(r.previous_master == old);
  CHECK(r.cause.find("->MASTER without our DISCOVER") != std::string::npos);
  CHECK(r.to_master);
  CHECK(r.master_to_subnet_up);
  CHECK(r.incomplete.empty());
  // The engine started no takeover: the report is what records it.
  CHECK(c.count_events(s, "takeover_started") == 0);
  ends_with_one_master(c);
}
