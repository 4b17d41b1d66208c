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
using smha::testing::SmInfoLoss;
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

// The kernel's MAD layer sends a request again each time `timeout` passes
// without an answer, `retries` times, and OpenSM asks for three retries: a
// MAD lost on the wire costs it a retry, not a poll. The shim does the same,
// or the loss drills lose a whole poll per lost MAD (what made OpenSM's own
// standby polling give up on a live master under 20 % loss).
TEST_CASE("the shim sends a request again on each retry, as the kernel does", "[ibsim][shim][loss]") {
  IbsimFabric fabric(topology_path("two-switch-4hca.net"));
  const int sm = fabric.start_opensm("Hca1", 15);
  REQUIRE(fabric.wait_subnet_up(sm, 10s));
  const auto head01 = fabric.node_port("Hca1");
  REQUIRE(head01);

  SECTION("every try lost: retries + 1 sends, then ETIMEDOUT") {
    SmInfoLoss loss(fabric.scratch_dir() + "/loss", 100);
    const auto r = fabric.run("Hca3", probe_argv(head01->lid, 100, 2, 5000), 10s, loss.env());
    INFO(r.out << r.err << loss.counts().text);
    REQUIRE(r.exit_code == 0);
    const Probe p = parse_probe(r);
    CHECK(p.status == ETIMEDOUT);
    CHECK(p.elapsed_ms >= 300);
    CHECK(loss.counts().seen == 3);
    CHECK(loss.counts().dropped == 3);
  }
  SECTION("a lost try is answered by the next one") {
    // 50 % loss of the probe's requests, one process per seed: the seed fixes
    // which tries are lost. 3 retries: a request fails only if all 4 are lost.
    int answered = 0, answered_after_loss = 0, timed_out = 0;
    for (unsigned seed = 1; seed <= 20; ++seed) {
      SmInfoLoss loss(fabric.scratch_dir() + "/loss-" + std::to_string(seed), 50, seed);
      const auto r = fabric.run("Hca3", probe_argv(head01->lid, 100, 3, 5000), 10s, loss.env());
      INFO(r.out << r.err << loss.counts().text);
      REQUIRE(r.exit_code == 0);
      const Probe p = parse_probe(r);
      const auto c = loss.counts();
      if (p.status == 0) {
        ++answered;
        // One try was answered; an answer later than a try's 100 ms (a
        // loaded machine) is preceded by a resend, as with the kernel.
        CHECK(c.seen >= c.dropped + 1);
        CHECK(c.seen <= 4);
        if (c.dropped > 0) {
          ++answered_after_loss;
          CHECK(p.elapsed_ms >= 100 * static_cast<long>(c.dropped));
        }
      } else {
        CHECK(p.status == ETIMEDOUT);
        CHECK(c.dropped == 4);
        ++timed_out;
      }
    }
    std::cout << "shim resends at 50 % loss, 3 retries: " << answered << " of 20 answered, "
              << answered_after_loss << " of them after a lost try, " << timed_out << " timed out\n";
    CHECK(answered_after_loss >= 1);
    CHECK(answered >= 15);
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
