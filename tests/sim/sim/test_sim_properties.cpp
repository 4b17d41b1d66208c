// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// Property tests: seeded random fault schedules on the simulated fabric, with the
// HA invariants checked after every simulated event, and the outcomes of OpenSM
// supervision (smhad's SupervisedOpensmControl over the simulated processes):
// a respawn waits for the engine, a restarted smhad adopts the running OpenSM,
// a crash loop ends in the opensm_failed alarm and no spin.
//
// Replay one seed:   SMHA_SIM_SEED=<seed> build/tests/sim/sim/test_sim_properties "[replay]"
// Change the count:  SMHA_SIM_COUNT=<n per block> (default 2500 per block, 4 blocks)
#include <catch2/catch.hpp>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "smha/sim/cluster.hpp"

using namespace smha;
using namespace smha::sim;

namespace {

enum class FaultKind { KillMaster, KillStandby, HangMaster, LinkFlap, LossBurst, SmhadCrash, Handover };

const char* name(FaultKind k) {
  switch (k) {
    case FaultKind::KillMaster: return "kill-9-master";
    case FaultKind::KillStandby: return "kill-9-standby";
    case FaultKind::HangMaster: return "sigstop-master";
    case FaultKind::LinkFlap: return "link-flap";
    case FaultKind::LossBurst: return "loss-burst";
    case FaultKind::SmhadCrash: return "smhad-crash";
    case FaultKind::Handover: return "handover-request";
  }
  return "?";
}

struct Outcome {
  bool ok = true;
  std::string why;
  std::string trace;
};

// Bounds checked by the invariants (see doc/ha-engine.md "Invariants").
struct Bounds {
  Duration dual;        // two active MASTERs at most this long
  Duration no_master;   // no MASTER at most this long while a healthy SM + smhad exist
};

Outcome run_schedule(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto uni = [&](double a, double b) { return std::uniform_real_distribution<double>(a, b)(rng); };
  auto pick = [&](int n) { return static_cast<int>(std::uniform_int_distribution<int>(0, n - 1)(rng)); };
  auto dur = [&](double lo_ms, double hi_ms) {
    return std::chrono::duration_cast<Duration>(std::chrono::duration<double, std::milli>(uni(lo_ms, hi_ms)));
  };

  ClusterParams p;
  p.heads = pick(5) == 0 ? 3 : 2;
  p.failback = pick(3) == 0 ? sm::FailbackMode::Preempt : sm::FailbackMode::Sticky;
  p.preempt_hold_down = seconds(2);
  p.observer_interval = Duration{0};
  // Half the schedules configure different sm_priority values per head (0..15,
  // repeats allowed), e.g. head01 15 / head02 14.
  if (pick(2) == 0)
    for (int i = 0; i < p.heads; ++i) p.priorities.push_back(static_cast<std::uint8_t>(pick(16)));
  Cluster c(seed ^ 0x9e3779b97f4a7c15ULL, p);
  const auto sweep = p.fabric.sm.discover_full;
  // Two masters: one poll interval plus the sweep when the lower-ranked master's
  // smhad is up (it yields at first sight); one more interval when only the
  // higher-ranked one's smhad can act (it waits one interval for the other).
  const Duration dual_bound_one = p.poll_interval + sweep + milliseconds(5);
  const Duration dual_bound_two = 2 * p.poll_interval + sweep + milliseconds(5);
  // No master: loss-adapted detection (at most 4 x misses rounds of up to 1.3
  // intervals each) + takeover bound + fallback restart and its sweep.
  const Duration no_master_bound =
      4 * p.misses * (p.poll_interval * 13 / 10) + p.takeover_bound + 2 * sweep + p.start_grace / 2;

  Outcome out;
  std::ostringstream trace;
  auto fail = [&](const std::string& why) {
    if (!out.ok) return;
    out.ok = false;
    out.why = why + " at t=" + std::to_string(to_ms(c.now().time_since_epoch())) + "ms";
  };

  // Per-node fault bookkeeping for the invariants.
  const int n = c.heads();
  std::vector<TimePoint> last_fault(n, TimePoint{} - seconds(100));
  TimePoint last_handover_request = TimePoint{} - seconds(100);
  std::vector<bool> hung(n, false), link_down(n, false);
  int lossy = 0;

  std::vector<NodeId> masters_before;
  std::vector<NodeId> dual_origin;  // the masters before the current dual master began
  std::optional<TimePoint> dual_since, none_since;
  bool started = false;

  auto healthy = [&](int i) {
    auto sm = c.fabric().sm(c.head(i));
    return sm && !sm->stopped && c.fabric().link_up(c.head(i)) && c.smhad_up(i);
  };
  auto check = [&]() -> bool {
    if (c.queue().executed() > 3'000'000) {
      fail("event storm: more than 3 000 000 simulated events");
      return true;
    }
    if (!started) return false;
    const auto now = c.now();
    auto masters = c.fabric().active_masters();
    // Invariant 1: never two MASTERs for longer than the bound.
    if (masters.size() >= 2) {
      if (!dual_since) dual_since = now;
      bool lower_smhad_up = false;
      for (auto m : masters) {
        // The lowest-ranked active master: if its smhad runs, it must yield at first sight.
        // Rank as the engine does: observed priority, then configured priority
        // when the observed ones are equal, then the lower GUID.
        auto configured = [&](Guid g) {
          const int h = c.head_of(g);
          return h >= 0 && h < static_cast<int>(p.priorities.size()) ? p.priorities[h] : p.base_priority;
        };
        auto above = [&](const Fabric::SmView& x, const Fabric::SmView& y) {
          if (x.priority == y.priority && configured(x.guid) != configured(y.guid))
            return configured(x.guid) > configured(y.guid);
          return outranks(x.priority, x.guid, y.priority, y.guid);
        };
        bool lowest = true;
        auto a = *c.fabric().sm(m);
        for (auto o : masters) {
          auto b = *c.fabric().sm(o);
          if (o != m && above(a, b)) lowest = false;
        }
        if (lowest && c.smhad_up(c.head_of(a.guid))) lower_smhad_up = true;
      }
      const auto bound = lower_smhad_up ? dual_bound_one : dual_bound_two;
      if (now - *dual_since > bound)
        fail("two MASTERs for more than " + std::to_string(to_ms(bound)) + " ms");
    } else {
      dual_since.reset();
    }
    // Invariant 2: a MASTER within the bound whenever a healthy SM (with its smhad) exists.
    bool any_healthy = false;
    for (int i = 0; i < n; ++i) any_healthy = any_healthy || healthy(i);
    if (masters.empty() && any_healthy && lossy == 0) {
      if (!none_since) none_since = now;
      if (now - *none_since > no_master_bound)
        fail("no MASTER for more than " + std::to_string(to_ms(no_master_bound)) +
             " ms while a healthy SM exists");
    } else {
      none_since.reset();
    }
    // Invariants 3 and 4: a new MASTER appears only if the old one was faulted
    // (or a handover was asked for, or preempt failback is configured): no
    // takeover of a healthy master, and sticky never moves mastership back.
    // A second MASTER beside a master that still answers MASTER is a dual
    // master, bounded by invariant 1 (OpenSM's own election can make one: an
    // OpenSM restarted during a loss burst that misses the master's answers
    // becomes MASTER and hands over to a higher standby). Mastership has moved
    // only when the old master is no longer MASTER; when a dual master
    // resolves, the survivor must be one of the masters before it began.
    auto moved = [&](NodeId old, NodeId m) {
      const int oi = c.head_of(c.fabric().guid(old));
      const int ni = c.head_of(c.fabric().guid(m));
      // A head that itself just had a fault may race the takeover through a
      // concurrent discovery; the split-brain guard resolves that (invariant 1).
      const bool old_faulted = now - last_fault[oi] < seconds(3) || now - last_fault[ni] < seconds(3);
      const bool requested = now - last_handover_request < seconds(6);
      const bool preempt = p.failback == sm::FailbackMode::Preempt;
      if (!old_faulted && !requested && !preempt)
        fail("mastership moved from healthy " + c.fabric().name(old) + " to " + c.fabric().name(m));
    };
    auto still = [&](NodeId x) { return std::find(masters.begin(), masters.end(), x) != masters.end(); };
    // (From no master straight to two: either may survive.)
    if (masters.size() >= 2 && dual_origin.empty()) dual_origin = masters_before.empty() ? masters : masters_before;
    if (masters.size() == 1 && !dual_origin.empty()) {
      if (std::find(dual_origin.begin(), dual_origin.end(), masters[0]) == dual_origin.end())
        for (auto old : dual_origin) moved(old, masters[0]);
    } else if (masters.size() == 1) {
      for (auto old : masters_before)
        if (old != masters[0] && !still(old)) moved(old, masters[0]);
    }
    if (masters.size() <= 1) dual_origin.clear();
    masters_before = masters;
    return !out.ok;
  };

  c.start_all_smhad();
  if (!c.run_until([&] { return c.fabric().active_masters().size() == 1 || c.queue().executed() > 3'000'000; }, seconds(3)))
    fail("no single MASTER 3 s after start");
  c.run_for(seconds(1));
  masters_before = c.fabric().active_masters();
  started = true;

  const int faults = 1 + pick(3);
  for (int k = 0; k < faults && out.ok; ++k) {
    c.run_until(check, dur(300, 2500));
    if (!out.ok) break;
    auto masters = c.fabric().active_masters();
    const int mi = masters.empty() ? pick(n) : c.head_of(c.fabric().guid(masters[0]));
    int si = pick(n);
    if (si == mi) si = (si + 1) % n;
    const auto kind = static_cast<FaultKind>(pick(7));
    const auto span = dur(50, 3000);
    trace << "t=" << to_ms(c.now().time_since_epoch()) << "ms " << name(kind) << " master=" << mi
          << " other=" << si << " span=" << to_ms(span) << "ms\n";
    switch (kind) {
      case FaultKind::KillMaster:
        last_fault[mi] = c.now();
        c.fabric().signal_opensm(c.head(mi), SIGKILL);
        break;
      case FaultKind::KillStandby:
        last_fault[si] = c.now();
        c.fabric().signal_opensm(c.head(si), SIGKILL);
        break;
      case FaultKind::HangMaster: {
        last_fault[mi] = c.now();
        hung[mi] = true;
        c.fabric().signal_opensm(c.head(mi), SIGSTOP);
        c.run_until(check, span);
        last_fault[mi] = c.now();
        c.fabric().signal_opensm(c.head(mi), SIGCONT);
        hung[mi] = false;
        break;
      }
      case FaultKind::LinkFlap: {
        const int who = pick(2) ? mi : si;
        last_fault[who] = c.now();
        c.fabric().set_link(c.head(who), false);
        c.run_until(check, span);
        last_fault[who] = c.now();
        c.fabric().set_link(c.head(who), true);
        break;
      }
      case FaultKind::LossBurst: {
        const double loss = uni(0.05, 0.3);
        trace << "  loss " << loss << " on all heads\n";
        ++lossy;
        for (int i = 0; i < n; ++i) c.fabric().set_loss(c.head(i), loss);
        c.run_until(check, span * 3);
        for (int i = 0; i < n; ++i) c.fabric().set_loss(c.head(i), 0);
        --lossy;
        break;
      }
      case FaultKind::SmhadCrash: {
        c.crash_smhad(si);
        c.run_until(check, span);
        const auto before = c.fabric().process(c.head(si));
        c.start_smhad(si);
        // The OpenSM that ran on is adopted, not replaced by a second one.
        c.run_until(check, seconds(1));
        const auto after = c.fabric().process(c.head(si));
        const auto* sup = c.supervisor(si);
        if (out.ok && before && after && after->pid == before->pid &&
            (!sup || sup->pid != before->pid || !sup->adopted))
          fail("restarted smhad did not adopt OpenSM pid " + std::to_string(before->pid));
        break;
      }
      case FaultKind::Handover:
        last_handover_request = c.now();
        if (c.agent(mi)) c.agent(mi)->request_handover(std::nullopt);
        break;
    }
  }
  // Settle: exactly one MASTER at the end, and never a Set to a master.
  if (out.ok) c.run_until(check, seconds(5));
  if (out.ok && c.fabric().active_masters().size() != 1)
    fail("ended with " + std::to_string(c.fabric().active_masters().size()) + " MASTERs");
  if (out.ok && c.fabric().sets_to_master() != 0) fail("smhad sent a SubnSet(SMInfo) to a MASTER");
  // Supervision: no respawn the engine did not ask for; nothing gave up.
  for (int i = 0; i < n && out.ok; ++i)
    for (const auto& r : c.records(i))
      if (r.kind == "respawn_without_engine" || r.kind == "opensm_failed")
        fail(c.fabric().name(c.head(i)) + ": " + r.kind + " " + r.detail);
  if (!out.ok) {
    trace << "heads=" << n << " failback=" << sm::to_string(p.failback) << " priorities=";
    for (auto v : p.priorities) trace << int(v) << " ";
    trace << "\n";
    for (int i = 0; i < n; ++i)
      for (const auto& r : c.records(i))
        trace << "  " << c.fabric().name(c.head(i)) << " " << to_ms(r.at.time_since_epoch()) << "ms "
              << r.what << " " << r.kind << " " << r.detail << "\n";
  }
  out.trace = trace.str();
  return out;
}

std::uint64_t env_u64(const char* name, std::uint64_t dflt) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoull(v, nullptr, 10) : dflt;
}

void run_block(std::uint64_t first) {
  const std::uint64_t count = env_u64("SMHA_SIM_COUNT", 2500);
  const auto t0 = std::chrono::steady_clock::now();
  int failures = 0;
  for (std::uint64_t s = first; s < first + count; ++s) {
    auto o = run_schedule(s);
    if (o.ok) continue;
    ++failures;
    std::printf("FAILED seed %llu: %s\nreplay: SMHA_SIM_SEED=%llu build/tests/sim/sim/test_sim_properties \"[replay]\"\n",
                static_cast<unsigned long long>(s), o.why.c_str(), static_cast<unsigned long long>(s));
    if (failures <= 1) std::printf("%s", o.trace.c_str());
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("seeds %llu..%llu: %d failures in %.1f s\n", static_cast<unsigned long long>(first),
              static_cast<unsigned long long>(first + count - 1), failures, secs);
  CHECK(failures == 0);
}

// A crash loop on one head: its OpenSM is killed each time it is back, until
// supervision gives up. Then: the opensm_failed alarm, no further spawn (no
// spin), and the other head is the one MASTER.
Outcome run_crash_loop(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto pick = [&](int n) { return static_cast<int>(std::uniform_int_distribution<int>(0, n - 1)(rng)); };
  ClusterParams p;
  p.failback = pick(2) == 0 ? sm::FailbackMode::Preempt : sm::FailbackMode::Sticky;
  p.observer_interval = Duration{0};
  if (pick(2) == 0)
    for (int i = 0; i < p.heads; ++i) p.priorities.push_back(static_cast<std::uint8_t>(pick(16)));
  Cluster c(seed ^ 0x5bd1e995ULL, p);
  Outcome out;
  std::ostringstream trace;
  auto fail = [&](const std::string& why) {
    if (!out.ok) return;
    out.ok = false;
    out.why = why + " at t=" + std::to_string(to_ms(c.now().time_since_epoch())) + "ms";
  };
  c.start_all_smhad();
  if (!c.run_until([&] { return c.fabric().active_masters().size() == 1; }, seconds(3)))
    fail("no single MASTER 3 s after start");
  c.run_for(seconds(1));
  const int v = pick(2);
  const int other = 1 - v;
  trace << "victim head " << v << (c.fabric().active_masters() == std::vector<NodeId>{c.head(v)} ? " (master)" : "")
        << "\n";
  const int limit = p.supervision.crash_loop_count;
  int kills = 0;
  while (out.ok && kills < limit + 2) {
    const auto* sup = c.supervisor(v);
    if (!sup || sup->state == opensm::SupervisorState::Failed) break;
    const auto proc = c.fabric().process(c.head(v));
    if (!proc) {
      fail("no OpenSM on the victim head to kill");
      break;
    }
    c.run_for(std::chrono::milliseconds(pick(400)));
    c.fabric().signal_opensm(c.head(v), SIGKILL);
    ++kills;
    trace << "t=" << to_ms(c.now().time_since_epoch()) << "ms kill " << kills << " pid " << proc->pid << "\n";
    // Back (a new pid, running) or given up.
    c.run_until([&] {
      const auto* s = c.supervisor(v);
      const auto now_proc = c.fabric().process(c.head(v));
      return s->state == opensm::SupervisorState::Failed ||
             (s->state == opensm::SupervisorState::Running && now_proc && now_proc->pid != proc->pid);
    }, seconds(120));
  }
  const auto* sup = c.supervisor(v);
  if (out.ok && (!sup || sup->state != opensm::SupervisorState::Failed))
    fail("supervision did not give up after " + std::to_string(kills) + " kills");
  if (out.ok && kills != limit)
    fail("gave up after " + std::to_string(kills) + " kills, not crash_loop_count " + std::to_string(limit));
  if (out.ok && c.count_events(v, "opensm_failed") != 1) fail("no opensm_failed alarm");
  // No spin: nothing spawns any more; the other head is MASTER.
  const int spawns = c.opensm_spawns(v);
  const auto events = c.queue().executed();
  c.run_for(seconds(60));
  if (out.ok && c.opensm_spawns(v) != spawns) fail("OpenSM spawned again after supervision gave up");
  if (out.ok && c.queue().executed() - events > 200'000) fail("event storm after supervision gave up");
  if (out.ok && c.fabric().active_masters() != std::vector<NodeId>{c.head(other)})
    fail("the other head is not the one MASTER");
  if (out.ok && c.fabric().sets_to_master() != 0) fail("smhad sent a SubnSet(SMInfo) to a MASTER");
  if (!out.ok)
    for (int i = 0; i < 2; ++i)
      for (const auto& r : c.records(i))
        trace << "  " << c.fabric().name(c.head(i)) << " " << to_ms(r.at.time_since_epoch()) << "ms " << r.what
              << " " << r.kind << " " << r.detail << "\n";
  out.trace = trace.str();
  return out;
}

}  // namespace

TEST_CASE("Supervision: a crash loop ends in opensm_failed, no spin, the peer masters", "[sim][properties]") {
  const std::uint64_t count = env_u64("SMHA_SIM_CRASH_LOOPS", 200);
  int failures = 0;
  for (std::uint64_t s = 1; s <= count; ++s) {
    auto o = run_crash_loop(s);
    if (o.ok) continue;
    if (++failures <= 1) std::printf("FAILED crash-loop seed %llu: %s\n%s", static_cast<unsigned long long>(s),
                                     o.why.c_str(), o.trace.c_str());
  }
  CHECK(failures == 0);
}

// Four blocks of 2 500 seeds (10 000 in all) so ctest -j can spread them.
TEST_CASE("Properties: seeds block 1", "[sim][properties]") { run_block(1); }
TEST_CASE("Properties: seeds block 2", "[sim][properties]") { run_block(100001); }
TEST_CASE("Properties: seeds block 3", "[sim][properties]") { run_block(200001); }
TEST_CASE("Properties: seeds block 4", "[sim][properties]") { run_block(300001); }

TEST_CASE("Replay one seed from SMHA_SIM_SEED", "[replay][.]") {
  const auto seed = env_u64("SMHA_SIM_SEED", 0);
  REQUIRE(seed != 0);
  auto o = run_schedule(seed);
  std::printf("%s", o.trace.c_str());
  INFO(o.why);
  CHECK(o.ok);
}
