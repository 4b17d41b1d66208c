// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// The peer channel's part of the plan (continuity_config): built once, here.
#include <catch2/catch.hpp>

#include "smha/service/continuity_plan.hpp"

using namespace smha;
using namespace std::chrono_literals;

TEST_CASE("continuity_config: the channel, the copy store and the sender from the configuration") {
  auto r = config::load_config_from_string(
      "fabric: rail1\nnode:\n  name: head01\n  port_guid: 0x10\n"
      "peers:\n  - name: head02\n    port_guid: 0x20\n    address: head02.mgmt:7390\n"
      "  - name: head03\n    port_guid: 0x30\n    address: \"[fd00::3]:7391\"\n"
      "opensm:\n  dump_files_dir: /var/log/osm\n  cache_dir: /var/cache/osm\n"
      "continuity:\n  listen: 0.0.0.0:7390\n  certificate: /etc/smha/h1.pem\n  private_key: /etc/smha/h1.key\n"
      "  ca: /etc/smha/ca.pem\n  max_copy_age_s: 300\n  refresh_s: 10\n  max_copy_mib: 2\n"
      "  max_services_per_port: 1\n  max_services: 2\n  max_subscriptions_per_port: 3\n  max_subscriptions: 4\n"
      "  max_groups: 5\n",
      "t.yaml");
  INFO(r.error_text());
  REQUIRE(r.ok());
  const config::Config& c = r.value();
  const peer::ContinuityConfig cc = service::continuity_config(c, Guid{0x10});
  CHECK(cc.fabric == "rail1");
  CHECK(cc.own_name == "head01");
  CHECK(cc.own_guid == Guid{0x10});
  CHECK(cc.channel.listen_host == "0.0.0.0");
  CHECK(cc.channel.listen_port == 7390);
  CHECK(cc.channel.certificate == "/etc/smha/h1.pem");
  CHECK(cc.channel.private_key == "/etc/smha/h1.key");
  CHECK(cc.channel.ca == "/etc/smha/ca.pem");
  CHECK(cc.channel.max_bytes == 2u * 1024 * 1024);
  REQUIRE(cc.channel.peers.size() == 2);
  CHECK(cc.channel.peers[0].name == "head02");
  CHECK(cc.channel.peers[0].guid == Guid{0x20});
  CHECK(cc.channel.peers[0].host == "head02.mgmt");
  CHECK(cc.channel.peers[0].port == 7390);
  CHECK(cc.channel.peers[1].host == c.peers[1].address_host);
  CHECK(cc.channel.peers[1].port == 7391);
  CHECK(cc.store.peers == std::map<std::string, Guid>{{"head02", Guid{0x20}}, {"head03", Guid{0x30}}});
  CHECK(cc.store.fabric == "rail1");
  CHECK(cc.store.own_name == "head01");
  CHECK(cc.store.sa_path == c.opensm.sa_db_file);  // <state_dir>/opensm-sa.copy unless set
  CHECK_FALSE(cc.store.sa_path.empty());
  CHECK(cc.store.guid2lid_path == "/var/cache/osm/guid2lid");
  CHECK(cc.store.max_bytes == 2u * 1024 * 1024);
  // The master's dump in dump_files_dir, with or without its trailing '/'.
  CHECK(cc.sender.sa_dump_path == "/var/log/osm/opensm-sa.dump");
  CHECK(cc.sender.guid2lid_path == "/var/cache/osm/guid2lid");
  CHECK(cc.sender.max_bytes == 2u * 1024 * 1024);
  CHECK(cc.sender.refresh == 10s);
  CHECK(cc.sender.bounds.services_per_port == 1);
  CHECK(cc.sender.bounds.services == 2);
  CHECK(cc.sender.bounds.informs_per_port == 3);
  CHECK(cc.sender.bounds.informs == 4);
  CHECK(cc.sender.bounds.groups == 5);
  CHECK(cc.max_copy_age == 300s);
}
