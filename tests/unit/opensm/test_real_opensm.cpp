// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// Against the installed /usr/sbin/opensm (3.3.23) in its config-dump mode:
// no fabric, no ibsim, no umad device is opened.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "smha/opensm/check.hpp"
#include "smha/opensm/conf.hpp"
#include "smha/opensm/probe.hpp"
#include "test_support.hpp"

using namespace smha;
using namespace smha::opensm;
using namespace smha::os;
using namespace smha::opensm::test;

namespace {

const std::string kOpensm = "/usr/sbin/opensm";

Capabilities real_caps() {
  ExecOpensmRunner runner;
  auto caps = probe_opensm(runner, kOpensm);
  INFO((caps.ok() ? "" : caps.error().message));
  REQUIRE(caps.ok());
  return *caps;
}

// Numbers compare by value: OpenSM prints some options in hex.
bool same(const std::string& a, const std::string& b) {
  if (a == b) return true;
  try {
    std::size_t ia = 0, ib = 0;
    unsigned long long va = std::stoull(a, &ia, 0), vb = std::stoull(b, &ib, 0);
    return ia == a.size() && ib == b.size() && va == vb;
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace

TEST_CASE("real opensm: the probe finds 3.3.23, upstream, and the keys of our table") {
  Capabilities caps = real_caps();
  CHECK(caps.version == "3.3.23");
  CHECK(caps.flavor == Flavor::Upstream);
  CHECK_FALSE(caps.adaptive_routing);
  CHECK_FALSE(caps.sharp);
  // Every key the binary knows is in config/opensm-keys.tsv as an upstream key,
  // and every upstream key of the table is known to the binary, except the
  // deprecated alias dimn_ports_file, which opensm -c does not print.
  for (const auto& [key, value] : caps.defaults) {
    INFO(key);
    const KeyInfo* k = find_opensm_key(key);
    REQUIRE(k != nullptr);
    CHECK(k->origin == "upstream");
  }
  for (const auto& k : opensm_key_table()) {
    if (k.origin != "upstream" || k.name == "dimn_ports_file") continue;
    INFO(k.name);
    CHECK(caps.knows(k.name));
  }
}

TEST_CASE("real opensm: the probe matches the committed capture") {
  CHECK(real_caps().defaults == caps_of("opensm-3.3.23").defaults);
}

TEST_CASE("real opensm accepts every rendered upstream golden with the same values") {
  ExecOpensmRunner runner;
  Capabilities caps = real_caps();
  for (const std::string name : {"head01", "head02", "extra_keys"}) {
    INFO(name);
    const std::string rendered = read_data("render/" + name + ".conf");
    auto out = runner.run(kOpensm, rendered);
    REQUIRE(out.ok());
    // OpenSM read our file ...
    CHECK(out->output.find("Reading Cached Option File") != std::string::npos);
    // ... knew every key ...
    CHECK(out->output.find("Unrecognized token") == std::string::npos);
    // ... and took every value as given.
    ConfMap taken = parse_opensm_conf(out->dump);
    ConfMap given = parse_opensm_conf(rendered);
    REQUIRE(given.size() >= 11);
    for (const auto& [key, value] : given) {
      INFO(key);
      REQUIRE(taken.count(key) == 1);
      CHECK(same(value, taken.at(key)));
    }
    // The library's own check agrees.
    auto config = load_data_config(name);
    CHECK(verify_accepted(runner, config, rendered, caps).empty());
    CHECK(check_rendered_keys(config, rendered, caps).empty());
  }
}

TEST_CASE("real opensm: the NVIDIA golden is refused by upstream, naming sharp_enabled") {
  ExecOpensmRunner runner;
  Capabilities caps = real_caps();
  const std::string rendered = read_data("render/nvidia_ar_sharp.conf");
  auto out = runner.run(kOpensm, rendered);
  REQUIRE(out.ok());
  CHECK(out->output.find("Unrecognized token: \"sharp_enabled\"") != std::string::npos);
  auto config = load_data_config("nvidia_ar_sharp");
  std::vector<std::string> errors;
  for (const auto& d : verify_accepted(runner, config, rendered, caps)) errors.push_back(d.to_string());
  CHECK(errors == std::vector<std::string>{
                      "nvidia_ar_sharp.yaml:15:10: opensm.sharp: OpenSM 3.3.23 (upstream) at "
                      "/usr/sbin/opensm does not know opensm.conf key 'sharp_enabled' "
                      "(\"Unrecognized token\")"});
}

TEST_CASE("real opensm: a clamped value is caught") {
  ExecOpensmRunner runner;
  Capabilities caps = real_caps();
  auto r = config::load_config_from_string(
      "node:\n  name: a\n  port_guid: 0x10\nopensm:\n  extra:\n    lmc: 9\n", "t.yaml");
  REQUIRE(r.ok());
  std::string rendered = render_opensm_conf(r.value(), {0, Guid{0x10}, Flavor::Upstream, false, false});
  std::vector<std::string> errors;
  for (const auto& d : verify_accepted(runner, r.value(), rendered, caps)) errors.push_back(d.to_string());
  CHECK(errors == std::vector<std::string>{
                      "t.yaml:6:5: opensm.extra.lmc: OpenSM 3.3.23 (upstream) at "
                      "/usr/sbin/opensm read opensm.conf key 'lmc' as '0', not '9'"});
}

TEST_CASE("real opensm: check_config end to end, the example config included") {
  std::string dir = (std::filesystem::temp_directory_path() /
                     ("smha-real-" + std::to_string(::getpid()))).string();
  std::filesystem::create_directories(dir);
  std::string key = dir + "/sm_key";
  std::ofstream(key) << "0x00000000c0ffee01\n";
  std::filesystem::permissions(key, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  // The shipped example as is: valid, with one warning (no SM_Key: OpenSM's default).
  std::string example = read_data("../../config/smha.yaml");
  std::string path = dir + "/smha.yaml";
  std::ofstream(path) << example;
  ExecOpensmRunner runner;
  {
    auto shipped = check_config(path, runner);
    CHECK(shipped.ok());
    REQUIRE(shipped.warnings.size() == 2);
    CHECK(shipped.warnings[0].key_path == "sm_key");
    CHECK(shipped.warnings[1].key_path == "sa_key");
    CHECK(parse_opensm_conf(shipped.rendered).at("sm_key") == "0x0000000000000001");
    CHECK(parse_opensm_conf(shipped.rendered).at("sa_key") == "0x0000000000000001");
    CHECK(parse_opensm_conf(shipped.rendered).at("force_log_flush") == "TRUE");
  }
  // ... and with its commented sm_key_file and sa_key_file enabled and pointed at our keys.
  auto at = example.find("# sm_key_file: /etc/smha/sm_key");
  REQUIRE(at != std::string::npos);
  example.replace(at, 31, "sm_key_file: " + key);
  const std::string sa_key = dir + "/sa_key";
  std::ofstream(sa_key) << "0x00000000d00d5a01\n";
  std::filesystem::permissions(sa_key, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  at = example.find("# sa_key_file: /etc/smha/sa_key");
  REQUIRE(at != std::string::npos);
  example.replace(at, 31, "sa_key_file: " + sa_key);
  std::ofstream(path) << example;
  auto report = check_config(path, runner);
  CHECK(report.warnings.empty());
  std::vector<std::string> errors;
  for (const auto& d : report.errors) errors.push_back(d.to_string());
  CHECK(errors.empty());
  CHECK(report.ok());
  CHECK(parse_opensm_conf(report.rendered).at("sm_key") == "0x00000000c0ffee01");
  CHECK(parse_opensm_conf(report.rendered).at("sa_key") == "0x00000000d00d5a01");
  std::filesystem::remove_all(dir);
}
