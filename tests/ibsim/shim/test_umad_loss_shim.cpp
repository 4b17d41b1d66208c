// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// The SMInfo loss shim: ibsim's own `Error ... 32` drops no SMInfo; the shim
// drops the given fraction of the SMInfo MADs a process sends off-node, counts
// exactly what it dropped, exempts directed-route hop 0, and can be turned on
// and off while the process runs.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "ibsim_harness.hpp"

using namespace std::chrono_literals;
using smha::testing::IbsimFabric;
using smha::testing::SmInfoLoss;
using smha::testing::topology_path;

namespace {

// bench_failover_probe --every 1 output: one line per answer or error.
struct ProbeTally {
  int answers = 0;
  int errors = 0;
};

ProbeTally tally(const std::string& out) {
  ProbeTally t;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    long long ns = 0;
    int lid = 0;
    char what[64] = {};
    if (std::sscanf(line.c_str(), "%lld %d %63s", &ns, &lid, what) != 3) continue;
    if (std::string(what).rfind("error:", 0) == 0) ++t.errors;
    else ++t.answers;
  }
  return t;
}

// Polls until `pred` holds or `timeout` passes.
template <typename Pred>
bool wait_until(Pred pred, std::chrono::milliseconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(20ms);
  }
  return true;
}

// The probe polls `lid` every 5 ms with one attempt per poll (no retries), so
// each dropped request is one error line; an answer later than `timeout_ms`
// (a busy machine) is one too, so only "at least one error per drop" holds.
std::vector<std::string> probe_argv(int lid, int timeout_ms = 50) {
  return {SMHA_PROBE, "--lid", std::to_string(lid), "--interval-ms", "5", "--timeout-ms",
          std::to_string(timeout_ms), "--every", "1"};
}

}  // namespace

TEST_CASE("SMInfo loss: ibsim's Error drops none, the loss shim drops the given share", "[ibsim][shim][loss]") {
  IbsimFabric fabric(topology_path("two-switch-4hca.net"));
  const int sm = fabric.start_opensm("Hca1", 15);
  REQUIRE(fabric.wait_subnet_up(sm, 20s));
  const auto head01 = fabric.node_port("Hca1");
  REQUIRE(head01);
  REQUIRE(head01->lid != 0);

  SECTION("ibsim's Error at 100 % on SMInfo (attribute 32) drops no SMInfo") {
    // The loss the drills used to inject: on both ends of the path.
    fabric.console("Error \"Hca1\"[1] 100 32");
    fabric.console("Error \"Hca3\"[1] 100 32");
    // Nothing is lost, so a long timeout costs nothing and no answer comes late.
    const int probe = fabric.spawn("Hca3", probe_argv(head01->lid, 2000));
    REQUIRE(wait_until([&] { return tally(fabric.process_stdout(probe)).answers >= 20; }, 10s));
    fabric.stop_process(probe);
    const auto t = tally(fabric.process_stdout(probe));
    std::cout << "ibsim Error 100 % attr 32: " << t.answers << " SMInfo answers, " << t.errors << " errors\n";
    CHECK(t.errors == 0);
  }

  SECTION("the shim at 25 %: a plausible share dropped, every drop counted") {
    SmInfoLoss loss(fabric.scratch_dir() + "/loss", 25, 7);
    const int probe = fabric.spawn("Hca3", probe_argv(head01->lid), loss.env());
    REQUIRE(wait_until([&] { return loss.counts().seen >= 400; }, 60s));
    fabric.stop_process(probe);
    const auto c = loss.counts();
    const auto t = tally(fabric.process_stdout(probe));
    INFO(c.text);
    std::cout << "loss shim 25 %: " << c.seen << " SMInfo sent, " << c.dropped << " dropped; probe: "
              << t.answers << " answers, " << t.errors << " errors\n";
    CHECK(c.processes == 1);
    // Each drop is one timed-out poll (the last one may still be pending at
    // the stop); a busy machine may time out an answered poll too, so more
    // errors than drops are possible, never fewer.
    CHECK(static_cast<unsigned long long>(t.errors) + 1 >= c.dropped);
    // Every poll sent ended as an answer or an error.
    CHECK(static_cast<unsigned long long>(t.answers + t.errors) + 1 >= c.seen);
    // 25 % of >= 400 (the decisions are fixed by the seed; 5 binomial sigma
    // would be about 11 % of the count).
    CHECK(c.dropped * 100 >= c.seen * 15);
    CHECK(c.dropped * 100 <= c.seen * 35);
  }

  SECTION("loss on and off while the process runs") {
    SmInfoLoss loss(fabric.scratch_dir() + "/loss", 0);
    const int probe = fabric.spawn("Hca3", probe_argv(head01->lid), loss.env());
    REQUIRE(wait_until([&] { return tally(fabric.process_stdout(probe)).answers >= 20; }, 10s));
    CHECK(loss.counts().dropped == 0);
    loss.set_percent(100);
    REQUIRE(wait_until([&] { return loss.counts().dropped >= 10; }, 10s));
    loss.set_percent(0);
    const int answers_off = tally(fabric.process_stdout(probe)).answers;
    REQUIRE(wait_until([&] { return tally(fabric.process_stdout(probe)).answers >= answers_off + 20; }, 10s));
    fabric.stop_process(probe);
    const auto c = loss.counts();
    const auto t = tally(fabric.process_stdout(probe));
    INFO(c.text);
    CHECK(c.seen == c.dropped);  // counted only while on: all of them at 100 %
    CHECK(static_cast<unsigned long long>(t.errors) >= c.dropped);
  }

  SECTION("directed-route hop 0 (the local SM) is exempt, LID-routed SMInfo is not") {
    SmInfoLoss loss(fabric.scratch_dir() + "/loss", 100);
    const auto hop0 = fabric.run("Hca1", {"sminfo", "-t", "100", "-D", "0"}, 10s, loss.env());
    INFO(hop0.out << hop0.err);
    CHECK(hop0.exit_code == 0);
    CHECK(hop0.out.find("state 3") != std::string::npos);
    CHECK(loss.counts().dropped == 0);
    const auto by_lid = fabric.run("Hca3", {"sminfo", "-t", "100", std::to_string(head01->lid)}, 10s, loss.env());
    INFO(by_lid.out << by_lid.err);
    CHECK(by_lid.exit_code != 0);
    CHECK(loss.counts().dropped >= 1);
  }
}
