// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// What a reload cannot apply (restart_keys, from config::key_table).
#include <catch2/catch.hpp>

#include "smha/service/reload.hpp"

using namespace smha;
using namespace smha::service;

namespace {

const std::string kContinuity =
    "continuity:\n  listen: 0.0.0.0:7390\n  certificate: /etc/smha/head01.pem\n"
    "  private_key: /etc/smha/head01.key\n  ca: /etc/smha/ca.pem\n";

// head01 with peers head02 (lid 7) and head03, each with a continuity
// address; `extra` is appended (e.g. the continuity section).
std::string yaml(const std::string& extra, const std::string& head02 = "    lid: 7\n    address: 10.0.0.2:7390\n") {
  return "node:\n  name: head01\n  port_guid: 0x10\n"
         "peers:\n  - name: head02\n    port_guid: 0x20\n" +
         head02 + "  - name: head03\n    port_guid: 0x30\n    address: 10.0.0.3:7390\n" + extra;
}

config::Config load(const std::string& text) {
  auto r = config::load_config_from_string(text, "t.yaml");
  INFO(r.error_text());
  REQUIRE(r.ok());
  return r.value();
}

using Keys = std::vector<std::string>;

}  // namespace

TEST_CASE("reload: every continuity key that changes is named, and so is the section added or removed") {
  const auto on = load(yaml(kContinuity));
  CHECK(restart_keys(on, on).empty());
  CHECK(restart_keys(load(yaml("")), on) == Keys{"continuity"});
  CHECK(restart_keys(on, load(yaml(""))) == Keys{"continuity"});
  const auto changed = load(yaml(
      "continuity:\n  listen: 10.0.0.1:7391\n  certificate: /etc/smha/new.pem\n  private_key: /etc/smha/new.key\n"
      "  ca: /etc/smha/ca2.pem\n  max_copy_age_s: 300\n  refresh_s: 10\n  max_copy_mib: 128\n"
      "  max_services_per_port: 8\n  max_services: 100\n  max_subscriptions_per_port: 8\n  max_subscriptions: 100\n"
      "  max_groups: 100\n"));
  CHECK(restart_keys(on, changed) ==
        Keys{"continuity.listen", "continuity.certificate", "continuity.private_key", "continuity.ca",
             "continuity.max_copy_age_s", "continuity.refresh_s", "continuity.max_copy_mib",
             "continuity.max_services_per_port", "continuity.max_services", "continuity.max_subscriptions_per_port",
             "continuity.max_subscriptions", "continuity.max_groups"});
}

TEST_CASE("reload: with continuity on, the channel's peers and files need a restart, the engine's do not") {
  const auto on = load(yaml(kContinuity));
  // A peer's address, name or GUID is the channel's.
  CHECK(restart_keys(on, load(yaml(kContinuity, "    lid: 7\n    address: 10.0.0.9:7390\n"))) ==
        Keys{"peers[0].address"});
  auto renamed = yaml(kContinuity);
  renamed.replace(renamed.find("head03"), 6, "head04");
  renamed.replace(renamed.find("0x30"), 4, "0x40");
  CHECK(restart_keys(on, load(renamed)) == Keys{"peers[1].name", "peers[1].port_guid"});
  // A peer fewer.
  const std::string fewer = "node:\n  name: head01\n  port_guid: 0x10\npeers:\n  - name: head02\n    port_guid: 0x20\n"
                           "    lid: 7\n    address: 10.0.0.2:7390\n" + kContinuity;
  CHECK(restart_keys(on, load(fewer)) == Keys{"peers"});
  // The files the channel writes and reads.
  CHECK(restart_keys(on, load(yaml(kContinuity + "opensm:\n  sa_db_file: /var/lib/smha/sa.copy\n  dump_files_dir: "
                                                 "/var/log/osm/\n  cache_dir: /var/cache/osm\n"))) ==
        Keys{"opensm.dump_files_dir", "opensm.cache_dir", "opensm.sa_db_file"});
  // A peer's lid is the HA engine's: the reload applies it.
  CHECK(restart_keys(on, load(yaml(kContinuity, "    lid: 9\n    address: 10.0.0.2:7390\n"))).empty());
}

TEST_CASE("reload: without continuity, peers and health are applied by the reload") {
  const auto off = load(yaml(""));
  CHECK(restart_keys(off, load(yaml("", "    lid: 9\n    address: 10.0.0.9:7390\n"))).empty());
  CHECK(restart_keys(off, load(yaml("health:\n  error_window_s: 120\n  link_degraded_min_links: 4\n"))).empty());
  CHECK(restart_keys(off, load(yaml("opensm:\n  sa_db_file: /var/lib/smha/sa.copy\n"))).empty());
}

TEST_CASE("reload: OpenSM's binary and cache_dir are fixed at start (its command line and environment)") {
  const auto off = load(yaml(""));
  CHECK(restart_keys(off, load(yaml("opensm:\n  binary: /opt/osm/sbin/opensm\n  cache_dir: /var/cache/osm\n"))) ==
        Keys{"opensm.binary", "opensm.cache_dir"});
  // The metrics outputs, each named.
  CHECK(restart_keys(off, load(yaml("metrics:\n  textfile_dir: /tmp\n  textfile_interval_s: 30\n"))) ==
        Keys{"metrics.textfile_dir", "metrics.textfile_interval_s"});
}
