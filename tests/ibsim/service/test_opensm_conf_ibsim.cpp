// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// What smhad's rendered opensm.conf makes the real OpenSM do, under ibsim
// (doc/opensm-conf.md): its log reaches the file while it runs
// (force_log_flush). smhad runs on head01 alone (head02 configured, its
// port without an SM); every process is stopped by PID, also on failure: smhad
// by the fabric, its OpenSM by OsmGuard.
#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "ibsim_harness.hpp"
#include "smhad_heads.hpp"

using namespace smha::testing;
using namespace std::chrono_literals;
using nlohmann::json;

namespace {

std::string read_text(const std::string& path) {
  std::ifstream f(path);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

// head01 (Hca1) under smhad with `extra` appended to its smha.yaml, MASTER;
// head02 (Hca2) is its configured peer, with no SM.
struct OneHead {
  IbsimFabric fabric{topology_path("two-switch-4hca.net")};
  OsmGuard guard;  // after the fabric: OpenSM goes before ibsim
  SmhadHead h;
  json status;

  explicit OneHead(const std::string& extra, const std::string& opensm_extra = {}) {
    const auto hca1 = fabric.node_port("Hca1");
    const auto hca2 = fabric.node_port("Hca2");
    REQUIRE(hca1);
    REQUIRE(hca2);
    h = SmhadHead{"head01", "Hca1", hca1->port_guid, fabric.scratch_dir() + "/head01"};
    std::filesystem::create_directories(h.dir);
    SmhadOptions o;
    o.extra = extra;
    o.opensm_extra = opensm_extra;
    write_smhad_config(h, {{"head02", hca2->port_guid, 0}}, o);
    start_smhad(fabric, h, SMHA_SMHAD, {}, &guard);
    if (!wait_status(fabric, h, guard, local_master, 30s, &status))
      FAIL("head01 not MASTER: " << status.dump() << "\n" << smhad_log(fabric, h));
  }
  int opensm_pid() const { return status["opensm"].value("pid", 0); }
};

}  // namespace

TEST_CASE("smhad's OpenSM writes SUBNET UP to its log file while it runs", "[ibsim][smhad][opensm]") {
  // minhop: routing this fabric logs no ERR line (ftree and updn fail on
  // it, and an ERR line flushes OpenSM's buffer), as on the 1000-HCA fat tree.
  OneHead one("", "  routing_engine: minhop\n");
  const int pid = one.opensm_pid();
  REQUIRE(pid > 0);
  // OpenSM logs SUBNET UP at INFO, which it flushes only with
  // force_log_flush TRUE: without it the line stays in its stdio buffer until
  // it exits (or an ERR line happens to flush it).
  std::string log;
  const bool up = wait_for([&] {
    log = read_text(one.h.opensm_log());
    return log.find("SUBNET UP") != std::string::npos;
  }, 20s);
  INFO("OpenSM log:\n" << log << "\nsmhad:\n" << smhad_log(one.fabric, one.h));
  CHECK(pid_running(pid));  // read while the OpenSM that wrote it still runs
  REQUIRE(up);
  CHECK(log.find("ERR ") == std::string::npos);  // nothing else flushed it
  CHECK(read_text(one.h.dir + "/opensm.conf").find("\nforce_log_flush TRUE\n") != std::string::npos);
}
