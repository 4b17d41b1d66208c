// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// What smhad's rendered opensm.conf makes the real OpenSM do, under ibsim
// (doc/opensm-conf.md): its log reaches the file while it runs
// (force_log_flush), and its SA trusts the configured SA key, not OpenSM's
// well-known 0x1 (sa_key). smhad runs on head01 alone (head02 configured, its
// port without an SM); every process is stopped by PID, also on failure: smhad
// by the fabric, its OpenSM by OsmGuard.
#include <catch2/catch.hpp>

#include <unistd.h>

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

constexpr auto kRunTimeout = 15s;

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

// A key file as smhad requires it: mode 0600.
std::string write_key(const std::string& path, const std::string& key) {
  std::ofstream(path) << key << "\n";
  std::filesystem::permissions(path, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  return path;
}

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

TEST_CASE("OpenSM's SA trusts the rendered sa_key, not 0x1, and smhad's own SA requests still work",
          "[ibsim][smhad][opensm][sa]") {
  // Made up front so OneHead's smha.yaml can name it; the scratch dir is made
  // by the fabric, so the key lives in a directory of the test's own.
  const std::string keys = (std::filesystem::temp_directory_path() /
                            ("smha-sa-key-" + std::to_string(::getpid()))).string();
  std::filesystem::create_directories(keys);
  struct Cleanup {
    std::string dir;
    ~Cleanup() { std::filesystem::remove_all(dir); }
  } cleanup{keys};
  const std::string sa_key = "0x00000000d00d5a01";
  write_key(keys + "/sa_key", sa_key);
  OneHead one("sm_key: 0x00000000c0ffee01\nsa_key_file: " + keys + "/sa_key\n");
  auto& fabric = one.fabric;
  // The SA answers once the first master sweep is done (SUBNET UP).
  REQUIRE(wait_for([&] { return read_text(one.h.opensm_log()).find("SUBNET UP") != std::string::npos; }, 20s));
  const auto hca3 = fabric.node_port("Hca3");
  REQUIRE(hca3);
  REQUIRE(hca3->lid != 0);
  const std::string lid = std::to_string(hca3->lid);
  // P_KeyTableRecords go to trusted requesters only (osm_sa_pkey_record.c).
  // A request OpenSM drops gets no answer: the timeout shim ends saquery's wait.
  const std::vector<std::pair<std::string, std::string>> shim{{"LD_PRELOAD", umad_timeout_shim_preload()}};
  auto pktr = [&](const std::string& key) {
    std::vector<std::string> argv{"saquery"};
    if (!key.empty()) argv.insert(argv.end(), {"--smkey", key});
    argv.insert(argv.end(), {"PKTR", lid});
    return fabric.run("Hca3", argv, kRunTimeout, shim);
  };

  const auto well_known = pktr("0x1");
  INFO("saquery --smkey 0x1: exit " << well_known.exit_code << "\n" << well_known.out << well_known.err);
  CHECK(well_known.exit_code != 0);
  CHECK(well_known.out.find("PKeyTableRecord") == std::string::npos);
  CHECK(well_known.out.find("0xffff") == std::string::npos);

  const auto none = pktr("");
  INFO("saquery (SM_Key 0): exit " << none.exit_code << "\n" << none.out << none.err);
  CHECK(none.exit_code != 0);
  CHECK(none.out.find("0xffff") == std::string::npos);

  const auto trusted = pktr(sa_key);
  INFO("saquery --smkey " << sa_key << ": exit " << trusted.exit_code << "\n" << trusted.out << trusted.err);
  CHECK(trusted.exit_code == 0);
  CHECK(trusted.out.find("PKeyTableRecord") != std::string::npos);
  CHECK(trusted.out.find("0xffff") != std::string::npos);  // the default partition's full member key

  // OpenSM said why it dropped the 0x1 request.
  const std::string log = read_text(one.h.opensm_log());
  INFO("OpenSM log:\n" << log);
  CHECK(log.find("ERR 1A04: Non-Zero MAD SM_Key: 0x1 != SM_Key: 0xd00d5a01") != std::string::npos);

  // smhad's own SA requests (its ServiceRecord, SM_Key 0) are answered.
  json s;
  const bool registered = wait_status(fabric, one.h, one.guard, [](const json& j) {
    const auto& d = j.value("drift", json::object());
    return d.value("registrations", 0) >= 1 && d.value("register_error", json()).is_null();
  }, 20s, &s);
  INFO("status: " << s.dump());
  CHECK(registered);
}
