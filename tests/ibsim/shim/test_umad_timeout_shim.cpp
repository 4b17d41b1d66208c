// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// The umad timeout shim: under plain umad2sim a request to a frozen SM is
// never completed; with the shim it completes with ETIMEDOUT after
// timeout x (retries + 1), answered requests are untouched, and a standby
// OpenSM replaces a SIGSTOP'ed master through its own SMInfo polling.
#include <signal.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>

#include "ibsim_harness.hpp"

using namespace std::chrono_literals;
using smha::testing::CommandResult;
using smha::testing::IbsimFabric;
using smha::testing::OpensmSpec;
using smha::testing::topology_path;
using smha::testing::umad_timeout_shim_preload;

namespace {

struct Probe {
  int status = -1;
  std::string tid;
  std::string method;
  long elapsed_ms = -1;
};

// Parses umad_probe's "agent=0 status=110 tid=5a5a1234 method=01 elapsed_ms=201".
// (No std::regex: g++ 12 warns maybe-uninitialized in it under ASan.)
Probe parse_probe(const CommandResult& r) {
  Probe p;
  const auto at = r.out.find("status=");
  int status = -1;
  char tid[16] = {};
  char method[8] = {};
  long elapsed = -1;
  if (at != std::string::npos &&
      std::sscanf(r.out.c_str() + at, "status=%d tid=%15s method=%7s elapsed_ms=%ld", &status, tid,
                  method, &elapsed) == 4) {
    p.status = status;
    p.tid = tid;
    p.method = method;
    p.elapsed_ms = elapsed;
  }
  return p;
}

std::vector<std::string> probe_argv(int lid, int timeout_ms, int retries, int recv_wait_ms) {
  return {SMHA_UMAD_PROBE, std::to_string(lid), std::to_string(timeout_ms),
          std::to_string(retries), std::to_string(recv_wait_ms)};
}

}  // namespace

TEST_CASE("the shim completes an unanswered request with ETIMEDOUT", "[ibsim][shim]") {
  IbsimFabric fabric(topology_path("two-switch-4hca.net"));
  const int sm = fabric.start_opensm("Hca1", 15);
  REQUIRE(fabric.wait_subnet_up(sm, 10s));
  const auto head01 = fabric.node_port("Hca1");
  REQUIRE(head01);
  const std::vector<std::pair<std::string, std::string>> with_shim{
      {"LD_PRELOAD", umad_timeout_shim_preload()}};

  SECTION("an answered request is passed through") {
    const auto r = fabric.run("Hca3", probe_argv(head01->lid, 100, 1, 2000), 10s, with_shim);
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    const Probe p = parse_probe(r);
    CHECK(p.status == 0);
    CHECK(p.method == "81");  // GetResp
    CHECK(p.tid == "5a5a1234");
  }
  SECTION("a frozen SM: ETIMEDOUT copy of the request after timeout x (retries + 1)") {
    REQUIRE(fabric.signal_opensm(sm, SIGSTOP));
    const auto r = fabric.run("Hca3", probe_argv(head01->lid, 100, 2, 5000), 10s, with_shim);
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    const Probe p = parse_probe(r);
    CHECK(p.status == ETIMEDOUT);
    CHECK(p.method == "01");  // the request itself, as ib_umad returns it
    CHECK(p.tid == "5a5a1234");
    std::cout << "shim: 100 ms x 3 tries to a frozen SM -> ETIMEDOUT after " << p.elapsed_ms
              << " ms\n";
    CHECK(p.elapsed_ms >= 300);
    CHECK(p.elapsed_ms < 1000);  // 10 ms slices; slack for a loaded machine
  }
  SECTION("a frozen SM without the shim: no completion at all (the umad2sim quirk)") {
    REQUIRE(fabric.signal_opensm(sm, SIGSTOP));
    const auto r = fabric.run("Hca3", probe_argv(head01->lid, 100, 2, 1000), 10s);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 2);  // umad_recv's own wait ran out
  }
}

namespace {

OpensmSpec fast_polling_sm(const std::string& node, int priority, bool shim) {
  OpensmSpec spec;
  spec.node = node;
  spec.priority = priority;
  spec.conf_lines = {"sminfo_polling_timeout 500", "polling_retry_number 1"};
  spec.timeout_shim = shim;
  return spec;
}

}  // namespace

TEST_CASE("with the shim a standby OpenSM replaces a SIGSTOP'ed master", "[ibsim][shim]") {
  IbsimFabric fabric(topology_path("two-switch-4hca.net"));
  const int head01 = fabric.start_opensm(fast_polling_sm("Hca1", 15, true));
  REQUIRE(fabric.wait_subnet_up(head01, 10s));
  const int head02 = fabric.start_opensm(fast_polling_sm("Hca2", 1, true));
  REQUIRE(fabric.wait_log(head02, "Entering STANDBY state", 10s));

  const auto mark = fabric.log_size(head02);
  const auto t0 = std::chrono::steady_clock::now();
  REQUIRE(fabric.signal_opensm(head01, SIGSTOP));
  // Detection takes (polling_retry_number + 2) x 500 ms; the sweep then waits
  // one transaction timeout (200 ms x 4 tries) for the frozen SM's SMInfo.
  REQUIRE(fabric.wait_log_after(head02, "SUBNET UP", mark, 15s));
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - t0);
  std::cout << "shim takeover of a SIGSTOP'ed master: " << took.count() << " ms\n";
  CHECK(took < 8s);  // measured ~2.6 s
  CHECK(fabric.log_text(head02).find("Entering MASTER state", mark) != std::string::npos);

  const auto h2 = fabric.node_port("Hca2");
  REQUIRE(h2);
  const auto r = fabric.run("Hca3", {"sminfo", std::to_string(h2->lid)}, 10s);
  INFO(r.out << r.err);
  CHECK(r.out.find("priority 1 state 3") != std::string::npos);
}

TEST_CASE("without the shim the standby never replaces a SIGSTOP'ed master", "[ibsim][shim]") {
  IbsimFabric fabric(topology_path("two-switch-4hca.net"));
  const int head01 = fabric.start_opensm(fast_polling_sm("Hca1", 15, false));
  REQUIRE(fabric.wait_subnet_up(head01, 10s));
  const int head02 = fabric.start_opensm(fast_polling_sm("Hca2", 1, false));
  REQUIRE(fabric.wait_log(head02, "Entering STANDBY state", 10s));

  const auto mark = fabric.log_size(head02);
  REQUIRE(fabric.signal_opensm(head01, SIGSTOP));
  // Twice the time the shimmed takeover needs: the standby's polls and its
  // discovery sweep wait forever for the frozen SM's SMInfo reply.
  CHECK_FALSE(fabric.wait_log_after(head02, "SUBNET UP", mark, 6s));
  CHECK(fabric.log_text(head02).find("Entering DISCOVERING state", mark) != std::string::npos);
}
