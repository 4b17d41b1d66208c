// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// Several fabrics on one head: the instance name and its own paths.
#include <catch2/catch.hpp>

#include "smha/config/config.hpp"

using namespace smha;
using namespace smha::config;

namespace {

const std::string kNode = "node:\n  name: head01\n  port_guid: 0x10\n";

Config load_ok(const std::string& yaml, const std::string& fabric = {}) {
  auto r = load_config_from_string(yaml, "t.yaml", LoadOptions{fabric});
  INFO(r.error_text());
  REQUIRE(r.ok());
  return r.value();
}

std::string first_error(const std::string& yaml, const std::string& fabric = {}) {
  auto r = load_config_from_string(yaml, "t.yaml", LoadOptions{fabric});
  REQUIRE_FALSE(r.ok());
  return r.errors().front().to_string();
}

}  // namespace

TEST_CASE("instances: no fabric, the one-fabric paths") {
  const Config c = load_ok(kNode);
  CHECK(c.fabric.empty());
  CHECK(c.state_dir == "/var/lib/smha");
  CHECK(c.control.socket_path == "/run/smha/smhad.sock");
  CHECK(c.opensm.conf_path == "/var/lib/smha/opensm.conf");
  CHECK(c.opensm.cache_dir == "/var/cache/opensm");
  CHECK(c.opensm.log_file == "/var/log/opensm.log");
  CHECK(c.opensm.dump_files_dir == "/var/log/");
  CHECK(c.metrics.textfile_name == "smha.prom");
}

TEST_CASE("instances: a fabric name gives every per-instance path its own default") {
  for (const auto& [yaml, hint] : std::vector<std::pair<std::string, std::string>>{
           {kNode + "fabric: rail3\n", ""}, {kNode, "rail3"}, {kNode + "fabric: rail3\n", "rail3"}}) {
    const Config c = load_ok(yaml, hint);
    CHECK(c.fabric == "rail3");
    CHECK(c.state_dir == "/var/lib/smha/rail3");
    CHECK(c.control.socket_path == "/run/smha/rail3.sock");
    CHECK(c.opensm.conf_path == "/var/lib/smha/rail3/opensm.conf");
    CHECK(c.opensm.cache_dir == "/var/cache/opensm/rail3");
    CHECK(c.opensm.log_file == "/var/log/opensm-rail3.log");
    CHECK(c.opensm.dump_files_dir == "/var/log/opensm-rail3/");
    CHECK(c.metrics.textfile_name == "smha-rail3.prom");
  }
}

TEST_CASE("instances: paths the file sets win over the instance defaults") {
  const Config c = load_ok(kNode + "state_dir: /srv/smha\ncontrol:\n  socket: /run/x.sock\n"
                                   "opensm:\n  cache_dir: /srv/cache\n  log_file: /srv/osm.log\n",
                           "fab1");
  CHECK(c.state_dir == "/srv/smha");
  CHECK(c.control.socket_path == "/run/x.sock");
  CHECK(c.opensm.cache_dir == "/srv/cache");
  CHECK(c.opensm.log_file == "/srv/osm.log");
  CHECK(c.opensm.conf_path == "/var/lib/smha/fab1/opensm.conf");  // not set: the instance's
  CHECK(c.opensm.dump_files_dir == "/var/log/opensm-fab1/");
}

TEST_CASE("instances: bad names and a file naming another instance are refused with where") {
  CHECK(first_error(kNode + "fabric: a/b\n") ==
        "t.yaml:4:9: fabric: 'a/b' may hold only letters, digits, '_' and '-' (it names files, a socket and a "
        "systemd unit)");
  CHECK(first_error(kNode + "fabric: -x\n") == "t.yaml:4:9: fabric: '-x' must start with a letter or digit");
  CHECK(first_error(kNode + "fabric: " + std::string(33, 'a') + "\n") ==
        "t.yaml:4:9: fabric: '" + std::string(33, 'a') + "' is longer than 32 characters");
  CHECK(first_error(kNode + "fabric: fab0\n", "fab1") ==
        "t.yaml:4:9: fabric: 'fab0' is not this instance's name 'fab1' (smhad --fabric, the unit smhad@fab1); "
        "remove the key or make them the same");
  CHECK(first_error(kNode, "../x") ==
        "t.yaml: fabric: the instance name '../x' (smhad --fabric) may hold only letters, digits, '_' and '-' "
        "(it names files, a socket and a systemd unit)");
  CHECK(first_error(kNode + "fabric: [a]\n").find("t.yaml:4:9: fabric:") == 0);
}
