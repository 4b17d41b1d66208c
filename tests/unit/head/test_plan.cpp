// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// The plan of a head: config -> policy and agent config (map_config), OpenSM's
// spec and supervision, the renderer and the drift inputs (make_plan).
#include <catch2/catch.hpp>

#include "sample_config.hpp"
#include "smha/core/limits.hpp"
#include "smha/head/plan.hpp"
#include "smha/opensm/check.hpp"
#include "test_support.hpp"  // tests/unit/opensm: captured `opensm -c` output

using namespace smha;
using namespace smha::head;
using namespace std::chrono_literals;
using smha::test::two_heads;

TEST_CASE("map_config maps the failover policy, every peer is found by discovery, lid an override") {
  auto r = map_config(two_heads(), Guid{0x10});
  REQUIRE(r.ok());
  const auto& a = r.value();
  CHECK(a.policy.node_name == "head01");
  CHECK(a.policy.own_guid == Guid{0x10});
  REQUIRE(a.policy.peers.size() == 2);
  CHECK(a.policy.peers[1].name == "head03");
  CHECK(a.policy.poll_interval == 50ms);
  CHECK(a.policy.misses == 2);
  CHECK(a.policy.failback == sm::FailbackMode::Preempt);
  CHECK(a.policy.base_priority == 15);  // all 15: standby renders 13, master 14, claim 15
  CHECK(sm::priorities(a.policy).master == 14);
  CHECK_FALSE(a.policy.peers[0].priority.has_value());  // not given: the same as ours
  CHECK(a.policy.hang_timeout == 150ms);                 // (misses + 1) x poll interval
  REQUIRE(a.peers.size() == 2);
  CHECK(a.peers[0].guid == Guid{0x20});
  CHECK(a.peers[0].lid == Lid{7});
  CHECK(a.peers[0].discover);
  CHECK(a.peers[1].guid == Guid{0x30});
  CHECK(a.peers[1].lid == Lid{});  // none configured: discovery fills it in
  CHECK_FALSE(a.peers[1].dr);
  CHECK(a.peers[1].discover);
}

TEST_CASE("map_config passes each peer's configured priority") {
  auto c = two_heads();
  c.sm_priority = 15;
  c.peers[0].sm_priority = 14;
  auto r = map_config(c, Guid{0x10});
  REQUIRE(r.ok());
  REQUIRE(r.value().policy.peers[0].priority.has_value());
  CHECK(*r.value().policy.peers[0].priority == 14);
  const auto t = sm::priorities(r.value().policy);
  CHECK(t.standby == 13);
  CHECK(t.standby_for(Guid{0x20}) == 12);
}

TEST_CASE("map_config: a handover waits for two of OpenSM's trap 144 resends or a sweep") {
  auto c = two_heads();
  auto at = [&] {
    auto r = map_config(c, Guid{0x10});
    REQUIRE(r.ok());
    return std::chrono::duration_cast<std::chrono::milliseconds>(r.value().policy.handover_bound).count();
  };
  CHECK(at() == 5000);  // the defaults: 2 x 2 s polls + 1 s
  c.failover.opensm_polling_timeout = std::chrono::milliseconds(4000);
  CHECK(at() == 9000);
  c.opensm.sweep_interval_s = 5;  // the master's own sweep comes first
  CHECK(at() == 6000);
  c.failover.opensm_polling_timeout = std::chrono::milliseconds(500);
  CHECK(at() == 5000);  // never below the engine's default
}

TEST_CASE("map_config refuses a policy the engine would not accept") {
  auto c = two_heads();
  c.peers.clear();
  auto r = map_config(c, Guid{0x10});
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == Errc::Policy);
}

// One range table (smha/core/limits.hpp): whatever the loader accepts, the
// engine accepts. Before it, poll_interval_ms 5 loaded and then start-up
// refused it, and 2000 loaded but failed takeover_bound >= poll_interval.
TEST_CASE("every poll interval and miss count the loader accepts starts (range table corners)") {
  for (long long poll : {limits::kPollIntervalMs.min, 49LL, 100LL, 1001LL, 5001LL, limits::kPollIntervalMs.max})
    for (long long misses : {limits::kMisses.min, 3LL, limits::kMisses.max}) {
      const std::string yaml = "node:\n  name: head01\n  port_guid: 0x10\npeers:\n  - name: head02\n    port_guid: 0x20\n"
                               "failover:\n  poll_interval_ms: " + std::to_string(poll) +
                               "\n  misses_before_takeover: " + std::to_string(misses) +
                               "\n  opensm_polling_timeout_ms: 2147483647\n";
      INFO("poll " << poll << " misses " << misses);
      auto loaded = config::load_config_from_string(yaml, "t.yaml");
      INFO(loaded.error_text());
      REQUIRE(loaded.ok());
      auto r = map_config(loaded.value(), Guid{0x10});
      INFO((r ? std::string() : r.error().message));
      CHECK(r.ok());
    }
  for (long long poll : {limits::kPollIntervalMs.min - 1, limits::kPollIntervalMs.max + 1}) {
    const std::string yaml = "node:\n  name: head01\n  port_guid: 0x10\npeers:\n  - name: head02\n    port_guid: 0x20\n"
                             "failover:\n  poll_interval_ms: " + std::to_string(poll) + "\n";
    auto loaded = config::load_config_from_string(yaml, "t.yaml");
    REQUIRE_FALSE(loaded.ok());
    CHECK_THAT(loaded.error_text(), Catch::StartsWith("t.yaml:8:21: failover.poll_interval_ms: must be"));
  }
}

TEST_CASE("map_config's policy errors name the YAML key and its position") {
  auto c = two_heads();
  c.failover.poll_interval = 5ms;  // below the range (a Config not from the loader)
  auto r = map_config(c, Guid{0x10});
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == Errc::Policy);
  CHECK_THAT(r.error().message,
             Catch::StartsWith("t.yaml:12:21: failover.poll_interval_ms: HA policy: poll_interval: must be 10 .. 10000 ms"));
  c = two_heads();
  c.peers[1].port_guid = Guid{0x20};  // head03 reuses head02's GUID
  r = map_config(c, Guid{0x10});
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error().message, Catch::Contains("peers[1].port_guid: HA policy: peers[head03].guid:"));
  CHECK_THAT(r.error().message, Catch::StartsWith("t.yaml:9:16: "));
}

TEST_CASE("make_plan: OpenSM's command line, environment, supervision and directories from the config") {
  auto c = two_heads();
  c.state_dir = "/var/lib/smha-t";
  c.opensm.conf_path = "/etc/opensm/t.conf";
  c.opensm.cache_dir = "/var/cache/opensm-t";
  c.opensm.restart_backoff_initial = 3s;
  const opensm::Capabilities caps = opensm::test::caps_of("opensm-3.3.23", c.opensm.binary);
  struct NoFiles final : os::FileSystem {
    Status write_atomic(const std::string&, std::string_view, unsigned) override { return Status::Ok(); }
    Result<std::string> read(const std::string& p) const override { return make_error(Errc::NotFound, p); }
  } fs;
  auto mapped = map_config(c, Guid{0x10});
  REQUIRE(mapped.ok());
  auto plan = make_plan(c, mapped.value(), PlanInputs{Guid{0x10}, false, caps}, fs);
  INFO((plan ? std::string() : plan.error().message));
  REQUIRE(plan.ok());
  REQUIRE(plan->opensm);
  const auto& o = *plan->opensm;
  CHECK(o.spec.argv == std::vector<std::string>{c.opensm.binary, "-F", "/etc/opensm/t.conf", "-g", "0x0000000000000010"});
  CHECK(o.spec.cwd == "/var/lib/smha-t");
  CHECK(o.spec.parent_death_signal == 0);
  CHECK(o.supervisor.pidfile_path == "/var/lib/smha-t/opensm.pid");
  CHECK(o.supervisor.backoff_initial == 3s);
  CHECK(o.supervisor.respawn_on_request);
  CHECK(o.dirs == std::vector<std::string>{"/var/lib/smha-t", "/var/cache/opensm-t", "/var/log/"});
  REQUIRE(o.lid_continuity);
  CHECK(o.lid_continuity->path == "/var/cache/opensm-t/guid2lid");
  auto conf = o.render(13);
  REQUIRE(conf.ok());
  CHECK(conf.value().find("\nsm_priority 13\n") != std::string::npos);
  CHECK(o.drift.opensm == "3.3.23 upstream");
  CHECK(plan->agent.policy.base_priority == 15);
  CHECK_FALSE(plan->agent.policy.observe);
  // The takeover report's inputs from this OpenSM: its routing engines as rendered.
  CHECK(plan->watchers.routing_engines == opensm::rendered_routing_engines(c, caps));
  CHECK(plan->watchers.opensm_log == !c.opensm.log_file.empty());

  // Observing: no OpenSM of ours, nothing to start, render or keep.
  auto observe = make_plan(c, mapped.value(), PlanInputs{Guid{0x10}, true, caps}, fs);
  REQUIRE(observe.ok());
  CHECK_FALSE(observe->opensm);
  CHECK(observe->agent.policy.observe);
  CHECK(observe->watchers.routing_engines.empty());
  CHECK_FALSE(observe->watchers.opensm_log);

  // One rendering per plan: the drift input and every priority come from it.
  int renders = 0;
  ConfPreparer counting = [&renders](const config::Config& cc, const opensm::Capabilities& k, std::uint8_t p,
                                     std::optional<Guid> g, const os::FileSystem* f) {
    ++renders;
    return opensm::prepare_opensm_conf(cc, k, p, g, f);
  };
  c.opensm.extra.push_back({"no_clients_rereg", "TRUE", {}});
  auto counted = make_plan(c, mapped.value(), PlanInputs{Guid{0x10}, false, caps, counting}, fs);
  REQUIRE(counted.ok());
  CHECK(renders == 1);
  const auto& co = *counted->opensm;
  for (int p : {0, 11, 14, 15}) {
    const auto prio = static_cast<std::uint8_t>(p);
    auto at = co.render(prio);
    REQUIRE(at.ok());
    CHECK(at.value() == opensm::prepare_opensm_conf(c, caps, prio, Guid{0x10}, &fs).rendered);
  }
  CHECK(renders == 1);
  CHECK(co.drift.rendered_conf == opensm::prepare_opensm_conf(c, caps, 15, Guid{0x10}, &fs).rendered);
  REQUIRE(co.warnings.size() == 1);
  CHECK_THAT(co.warnings[0], Catch::Contains("no_clients_rereg: is TRUE"));
}

TEST_CASE("map_watchers: the error counters' settings reach the watchers, thresholds by counter key") {
  // smha.yaml's keys are the codec's, in the codec's order.
  REQUIRE(config::kErrorThresholdKeys.size() == mad::kErrorCounterCount);
  for (auto k : mad::kErrorCounters)
    CHECK(config::kErrorThresholdKeys[static_cast<std::size_t>(k)] == mad::counter_key(k));
  auto c = two_heads();
  c.health.counter_reads_per_second = 50;
  c.health.counter_start_after_s = 0;
  c.health.error_window_s = 600;
  c.health.link_errors_alarm = false;
  c.health.link_errors_min_ports = 2;
  c.health.error_thresholds = {{"symbol_errors", 100}, {"vl15_dropped", 7}};
  const auto w = map_watchers(c);
  const auto& e = w.errors;
  CHECK(e.reads_per_second == 50);
  CHECK(e.start_after == 0s);
  CHECK(e.window == 600s);
  CHECK_FALSE(e.alarm);
  CHECK(e.alarm_min_ports == 2);
  CHECK(mad::at(e.thresholds, mad::ErrorCounter::SymbolErrors) == 100);
  CHECK(mad::at(e.thresholds, mad::ErrorCounter::Vl15Dropped) == 7);
  CHECK(mad::at(e.thresholds, mad::ErrorCounter::LinkDowned) == 1);  // not given: its default
}
