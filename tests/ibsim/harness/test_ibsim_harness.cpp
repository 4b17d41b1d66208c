// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// The ibsim harness itself: two real OpenSM on two-switch-4hca come up as one
// MASTER and one STANDBY (read with infiniband-diags), and every process the
// fabric started is gone once it is destroyed.
#include <signal.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <cstdio>

#include "ibsim_harness.hpp"

using namespace std::chrono_literals;
using smha::testing::IbsimFabric;
using smha::testing::topology_path;

namespace {

bool pid_gone(int pid) { return kill(pid, 0) != 0 && errno == ESRCH; }

// Parses `sminfo` output: "sminfo: sm lid 1 sm guid 0x100001, activity count
// 88 priority 15 state 3 SMINFO_MASTER" -> {priority, state}.
// (No std::regex: g++ 12 warns maybe-uninitialized in it under ASan.)
std::pair<int, int> prio_state(const std::string& out) {
  const auto at = out.find("priority ");
  int prio = -1;
  int state = -1;
  if (at == std::string::npos ||
      std::sscanf(out.c_str() + at, "priority %d state %d", &prio, &state) != 2)
    return {-1, -1};
  return {prio, state};
}

}  // namespace

TEST_CASE("two OpenSM on two-switch-4hca: one MASTER, one STANDBY", "[ibsim][harness]") {
  std::vector<int> pids;
  std::string scratch;
  {
    IbsimFabric fabric(topology_path("two-switch-4hca.net"));
    scratch = fabric.scratch_dir();
    const int head01 = fabric.start_opensm("Hca1", 15);
    REQUIRE(fabric.wait_subnet_up(head01, 10s));
    const int head02 = fabric.start_opensm("Hca2", 1);
    REQUIRE(fabric.wait_log(head02, "Entering STANDBY state", 10s));

    const auto h1 = fabric.node_port("Hca1");
    const auto h2 = fabric.node_port("head02");  // node description works too
    REQUIRE(h1);
    REQUIRE(h2);
    CHECK(h1->lid != 0);
    CHECK(h2->lid != 0);
    CHECK(h1->port_guid != h2->port_guid);

    // From a third node: the master the fabric points to, then each SM by LID.
    const auto master = fabric.run("Hca3", {"sminfo"}, 10s);
    INFO(master.out << master.err);
    REQUIRE(master.exit_code == 0);
    CHECK(prio_state(master.out) == std::pair{15, 3});
    const auto standby = fabric.run("Hca3", {"sminfo", std::to_string(h2->lid)}, 10s);
    INFO(standby.out << standby.err);
    REQUIRE(standby.exit_code == 0);
    CHECK(prio_state(standby.out) == std::pair{1, 2});

    // Transient clients detached again; only the two OpenSM stay attached.
    const auto attached = fabric.attached_pids();
    CHECK(attached.size() == 2);

    pids = fabric.live_pids();
    REQUIRE(pids.size() == 3);  // ibsim + 2 OpenSM
    CHECK(fabric.ibsim_pid() == pids.front());
  }
  for (int pid : pids) CHECK(pid_gone(pid));
  CHECK_FALSE(std::filesystem::exists(scratch));
}

TEST_CASE("a client killed on timeout is stopped and its ibsim slot freed", "[ibsim][harness]") {
  IbsimFabric fabric(topology_path("two-switch-4hca.net"));
  const int sm = fabric.start_opensm("Hca1", 15);
  REQUIRE(fabric.wait_subnet_up(sm, 10s));
  const auto head01 = fabric.node_port("Hca1");
  REQUIRE(head01);
  // A frozen SM never answers, and under umad2sim an unanswered MAD never
  // times out: `sminfo` hangs until the harness kills it at the deadline.
  REQUIRE(fabric.signal_opensm(sm, SIGSTOP));
  const auto r = fabric.run("Hca3", {"sminfo", std::to_string(head01->lid)}, 500ms);
  INFO(r.out << r.err);
  CHECK(r.exit_code == -1);
  const auto attached = fabric.attached_pids();
  CHECK(attached == std::vector<int>{fabric.opensm_pid(sm)});
  CHECK(fabric.live_pids().size() == 2);  // ibsim + the frozen OpenSM
}

TEST_CASE("a SIGKILLed OpenSM is reaped and a new one can start on its node", "[ibsim][harness]") {
  IbsimFabric fabric(topology_path("two-switch-4hca.net"));
  const int first = fabric.start_opensm("Hca1", 15);
  REQUIRE(fabric.wait_subnet_up(first, 10s));
  const int pid = fabric.opensm_pid(first);
  fabric.stop_opensm(first, SIGKILL);
  CHECK(pid_gone(pid));
  CHECK(fabric.attached_pids().empty());
  // ibsim refuses a second SM client on a node that still has one attached.
  const int second = fabric.start_opensm("Hca1", 15);
  CHECK(fabric.wait_subnet_up(second, 10s));
}

TEST_CASE("a bad topology is a clear error and leaves nothing running", "[ibsim][harness]") {
  CHECK_THROWS_WITH(IbsimFabric(topology_path("does-not-exist.net")),
                    Catch::Contains("does-not-exist.net"));
}

TEST_CASE("fattree-324 parses and OpenSM sweeps it", "[ibsim][harness][topology]") {
  // Also with the umad timeout shim: it must not disturb a big sweep.
  const bool shim = GENERATE(false, true);
  IbsimFabric fabric(topology_path("fattree-324.net"));
  fabric.set_timeout_shim_default(shim);
  const auto t0 = std::chrono::steady_clock::now();
  const int head01 = fabric.start_opensm("head01", 15);
  REQUIRE(fabric.wait_subnet_up(head01, 60s));
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - t0);
  std::cout << "fattree-324" << (shim ? " (shim)" : "") << ": OpenSM start -> SUBNET UP "
            << took.count() << " ms\n";
  // The heads are Hca1/Hca2 by id and head01/head02 by node description,
  // on different leaves; the last HCA got a LID too.
  const auto h2 = fabric.node_port("head02");
  const auto last = fabric.node_port("Hca324");
  REQUIRE(h2);
  REQUIRE(last);
  CHECK(h2->lid != 0);
  CHECK(last->lid != 0);
  CHECK(last->sm_lid == fabric.node_port("Hca1")->lid);
}
