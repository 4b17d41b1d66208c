// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// The simulated OpenSM answers SubnSet(SMInfo) as internals §2.2-2.3 describe.
#include <catch2/catch.hpp>

#include <csignal>

#include "smha/agent/process_opensm_control.hpp"
#include "smha/sim/fabric.hpp"

using namespace smha;
using namespace smha::sim;

namespace {

struct Two {
  Fabric f{42};
  NodeId a = f.add_node("a", Guid{0x10}, Lid{1});
  NodeId b = f.add_node("b", Guid{0x20}, Lid{2});
  NodeId obs = f.add_node("obs", Guid{0x90}, Lid{9});

  int spawn(NodeId n, int prio) {
    (void)f.fs(n).write_atomic("/c", "sm_priority " + std::to_string(prio) + "\n", 0644);
    auto pid = f.runner(n).spawn({"/usr/sbin/opensm", {"opensm", "-F", "/c"}, {}, {}},
                                 [](opensm::OutputStream, std::string_view) {},
                                 [](const opensm::ExitInfo&) {});
    REQUIRE(pid.ok());
    return *pid;
  }
  Result<mad::SmInfoReply> call(NodeId from, mad::Target t, std::optional<SmInfoModifier> mod,
                                SmState payload_state = SmState::Master) {
    std::optional<Result<mad::SmInfoReply>> out;
    SmInfo p;
    p.state = payload_state;
    if (mod)
      f.transport(from).set_sminfo(t, *mod, p, {}, [&](Result<mad::SmInfoReply> r) { out = r; });
    else
      f.transport(from).get_sminfo(t, {}, [&](Result<mad::SmInfoReply> r) { out = r; });
    f.queue().run_until(f.queue().now() + seconds(1), [&] { return out.has_value(); });
    REQUIRE(out);
    return *out;
  }
};

}  // namespace

TEST_CASE("Simulated OpenSM: election, DISCOVER, HANDOVER, rejections", "[sim][fabric]") {
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
          "[sim][fabric]") {
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

TEST_CASE("Simulated OpenSM: SIGHUP re-reads sm_priority; a raised standby preempts", "[sim][fabric]") {
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

TEST_CASE("Simulated OpenSM: SIGSTOP freezes answers; native polling takes over after its timeout",
          "[sim][fabric]") {
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

TEST_CASE("Simulated links: a MAD to a node whose link is down times out", "[sim][fabric]") {
  Two t;
  t.spawn(t.a, 10);
  t.f.queue().run_until(t.f.queue().now() + milliseconds(200));
  CHECK(t.call(t.obs, Lid{1}, std::nullopt).ok());
  CHECK(t.call(t.obs, t.f.dr_path(t.a), std::nullopt).ok());
  t.f.set_link(t.a, false);
  CHECK_FALSE(t.call(t.obs, Lid{1}, std::nullopt).ok());
  // DR hop 0 on the node itself does not need the link.
  CHECK(t.call(t.a, DrPath{}, std::nullopt).ok());
}
