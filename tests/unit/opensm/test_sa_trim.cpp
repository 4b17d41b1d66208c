// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// What an SA copy may carry (opensm::trim_sa_dump, doc/continuity.md): a
// record OpenSM could not load back is left out with its fragments, and so
// are ServiceRecords, subscriptions and groups over the bounds; the rest is
// kept byte for byte and parses; the ports that registered what was left out
// are named.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <vector>

#include "smha/opensm/sa_dump.hpp"

using namespace smha;
using namespace smha::opensm;

namespace {

std::string real_dump() {
  std::ifstream in(std::string(SMHA_TEST_DATA_DIR) + "/sa_dump/opensm-3.3.23-workload.dump");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A ServiceRecord line as OpenSM writes it, registered by port GUID `guid`.
std::string service(std::uint64_t guid, std::uint64_t id, const std::string& name = "svc") {
  char b[1024];
  std::snprintf(b, sizeof b,
                "Service Record: id=0x%016llx gid=0xfe80000000000000:0x%016llx pkey=0xffff lease=0xffffffff "
                "key=0x0000000000000000:0x0000000000000000 name='%s' data8=0x0000000000000000:0x0000000000000000 "
                "data16=0x0000000000000000:0x0000000000000000 data32=0x0000000000000000:0x0000000000000000 "
                "data64=0x0000000000000000:0x0000000000000000 modified_time=0x0 lease_period=0xffffffff\n\n",
                static_cast<unsigned long long>(id), static_cast<unsigned long long>(guid), name.c_str());
  return b;
}

std::string inform(std::uint64_t guid, unsigned trap) {
  char b[1024];
  std::snprintf(b, sizeof b,
                "InformInfo Record: subscriber_gid=0xfe80000000000000:0x%016llx subscriber_enum=0x0 InformInfo: "
                "gid=0x0000000000000000:0x0000000000000000 lid_range_begin=0xffff lid_range_end=0x0 is_generic=0x1 "
                "subscribe=0x1 trap_type=0xffff trap_num=0x%x qpn_resp_time_val=0x100 node_type=0x000004 rep_addr: "
                "lid=0x0006 path_bits=0x00 static_rate=0x00 remote_qp=0x00000001 remote_qkey=0x00000000 "
                "pkey_ix=0x0000 sl=0x00\n\n",
                static_cast<unsigned long long>(guid), trap);
  return b;
}

std::string group(unsigned mlid, const std::vector<std::uint64_t>& members) {
  char b[1024];
  std::snprintf(b, sizeof b,
                "MC Group 0x%04x : mgid=0xff12601bffff0000:0x00000001ff00%04x port_gid=0xfe80000000000000:"
                "0x0000000000100007 qkey=0x00000b1b mlid=0x%04x mtu=0x84 tclass=0x00 pkey=0xffff rate=0x83 "
                "pkt_life=0x80 sl_flow_hop=0x00000000 scope_state=0x21 proxy_join=0x0\n\n",
                mlid, mlid, mlid);
  std::string s = b;
  for (auto m : members) {
    std::snprintf(b, sizeof b, "mcm_port: port_gid=0xfe80000000000000:0x%016llx scope_state=0x21 proxy_join=0x0\n\n",
                  static_cast<unsigned long long>(m));
    s += b;
  }
  return s;
}

SaDumpBounds unbounded() { return SaDumpBounds{0, 0, 0, 0, 0}; }

}  // namespace

TEST_CASE("SA trim: a dump OpenSM wrote is kept byte for byte", "[sa_dump][sa_trim]") {
  const std::string text = real_dump();
  const auto t = trim_sa_dump(text, SaDumpBounds{});
  CHECK_FALSE(t.any());
  CHECK(t.text == text);
  CHECK(t.ports.empty());
  CHECK(trim_summary(t, SaDumpBounds{}).empty());
}

TEST_CASE("SA trim: a ServiceRecord whose name holds a newline is left out with its fragments, the rest flows and "
          "parses, its port is named",
          "[sa_dump][sa_trim]") {
  const std::string text = real_dump();
  // A node at port GUID 0x...1000ff registers a name with two newlines: OpenSM
  // writes one record over three lines (and stops its load at the first).
  const std::string broken = service(0x1000ff, 0x42, "evil\nMC Group 0xc00f\n tail");
  REQUIRE(std::count(broken.begin(), broken.end(), '\n') == 4);
  const std::string dump = text.substr(0, text.find("Service Record:")) + broken + text.substr(text.find("Service Record:"));
  REQUIRE_FALSE(parse_sa_dump(dump));
  const auto t = trim_sa_dump(dump, SaDumpBounds{});
  CHECK(t.text == text);
  CHECK(t.unloadable == 1);
  CHECK(t.services == 0);
  CHECK(t.lines == 4);  // the record's three parts and the blank line after it
  REQUIRE(t.ports.size() == 1);
  CHECK(t.ports[0].gid_prefix == 0xfe80000000000000ULL);
  CHECK(t.ports[0].gid_guid == 0x1000ff);
  CHECK(t.ports[0].unloadable == 1);
  auto d = parse_sa_dump(t.text);
  REQUIRE(d);
  CHECK(d->services == 4);
  CHECK(d->groups.size() == 3);
  CHECK(trim_summary(t, SaDumpBounds{}) ==
        "1 record OpenSM could not load back: 1 registered by port GID 0xfe80000000000000:0x00000000001000ff");
}

TEST_CASE("SA trim: a group OpenSM could not load goes with its members, and members with no group, lines OpenSM "
          "would cut and text before any record are left out",
          "[sa_dump][sa_trim]") {
  std::string bad_group = group(0xc001, {0x100007, 0x10000a});
  bad_group.replace(bad_group.find(" qkey="), 6, " qkay=");
  const std::string good = group(0xc002, {0x100007});
  const std::string orphan = "mcm_port: port_gid=0xfe80000000000000:0x0000000000100009 scope_state=0x21 proxy_join=0x0\n\n";
  std::string long_service = service(0x100001, 1, std::string(60, 'a'));
  long_service.insert(long_service.find(" data8"), std::string(1000, ' '));
  const std::string dump = "garbage first\n\n" + bad_group + good + service(0x100001, 2) + orphan + long_service +
                           inform(0x100007, 0x40);
  const auto t = trim_sa_dump(dump, SaDumpBounds{});
  CHECK(t.text == good + service(0x100001, 2) + inform(0x100007, 0x40));
  CHECK(t.unloadable == 4);  // the text before any record, the group, the orphan, the long line
  auto d = parse_sa_dump(t.text);
  REQUIRE(d);
  CHECK(d->groups.size() == 1);
  CHECK(d->members == 1);
}

TEST_CASE("SA trim: ServiceRecords over the bound a port are left out, its first ones kept, other ports untouched",
          "[sa_dump][sa_trim]") {
  std::string dump;
  for (std::uint64_t i = 0; i < 100; ++i) dump += service(0x100003, i);
  dump += service(0x100004, 1) + service(0x100004, 2) + service(0x100004, 3);
  SaDumpBounds b = unbounded();
  b.services_per_port = 10;
  const auto t = trim_sa_dump(dump, b);
  std::string want;
  for (std::uint64_t i = 0; i < 10; ++i) want += service(0x100003, i);
  want += service(0x100004, 1) + service(0x100004, 2) + service(0x100004, 3);
  CHECK(t.text == want);
  CHECK(t.services == 90);
  CHECK(t.unloadable == 0);
  REQUIRE(t.ports.size() == 1);
  CHECK(t.ports[0].gid_guid == 0x100003);
  CHECK(t.ports[0].services == 90);
  CHECK(trim_summary(t, b) ==
        "90 ServiceRecords over the bounds (10 a port, none in all): 90 registered by port GID "
        "0xfe80000000000000:0x0000000000100003");
  REQUIRE(parse_sa_dump(t.text));
  CHECK(parse_sa_dump(t.text)->services == 13);
}

TEST_CASE("SA trim: over the total, every port is cut to the same share and the ports with the most lose first",
          "[sa_dump][sa_trim]") {
  std::string dump;
  for (std::uint64_t i = 0; i < 50; ++i) dump += service(0xa, i);
  for (std::uint64_t i = 0; i < 5; ++i) dump += service(0xb, i);
  for (std::uint64_t i = 0; i < 20; ++i) dump += service(0xc, i);
  SaDumpBounds b = unbounded();
  b.services = 30;
  const auto t = trim_sa_dump(dump, b);
  auto d = parse_sa_dump(t.text);
  REQUIRE(d);
  CHECK(d->services == 30);
  // A share of 12: 12 + 5 + 12 = 29; the one left goes to the port seen first.
  REQUIRE(t.ports.size() == 2);
  CHECK(t.ports[0].gid_guid == 0xa);
  CHECK(t.ports[0].services == 37);
  CHECK(t.ports[1].gid_guid == 0xc);
  CHECK(t.ports[1].services == 8);
  CHECK(t.text.find(service(0xa, 12)) != std::string::npos);
  CHECK(t.text.find(service(0xa, 13)) == std::string::npos);
  CHECK(t.text.find(service(0xb, 4)) != std::string::npos);
  CHECK(t.text.find(service(0xc, 11)) != std::string::npos);
  CHECK(t.text.find(service(0xc, 12)) == std::string::npos);
}

TEST_CASE("SA trim: subscriptions a port and in all, groups in all with their members", "[sa_dump][sa_trim]") {
  std::string dump;
  for (unsigned g = 0; g < 5; ++g) dump += group(0xc000 + g, {0x100007, 0x10000a});
  for (unsigned i = 0; i < 8; ++i) dump += inform(0x100007, i);
  dump += inform(0x10000a, 0x40);
  SaDumpBounds b = unbounded();
  b.informs_per_port = 3;
  b.groups = 2;
  const auto t = trim_sa_dump(dump, b);
  auto d = parse_sa_dump(t.text);
  REQUIRE(d);
  CHECK(d->groups.size() == 2);
  CHECK(d->members == 4);
  CHECK(d->informs == 4);
  CHECK(t.groups == 3);
  CHECK(t.informs == 5);
  REQUIRE(t.ports.size() == 1);
  CHECK(t.ports[0].gid_guid == 0x100007);
  CHECK(t.ports[0].informs == 5);
  CHECK(trim_summary(t, b) ==
        "5 InformInfo records over the bounds (3 a port, none in all), 3 multicast groups over the bound of 2: 5 "
        "registered by port GID 0xfe80000000000000:0x0000000000100007");
}

TEST_CASE("SA trim: the summary names at most the ports asked for, most first", "[sa_dump][sa_trim]") {
  std::string dump;
  for (std::uint64_t port = 1; port <= 6; ++port)
    for (std::uint64_t i = 0; i < 2 + port; ++i) dump += service(port, i);
  SaDumpBounds b = unbounded();
  b.services_per_port = 2;
  const auto t = trim_sa_dump(dump, b);
  CHECK(t.services == 1 + 2 + 3 + 4 + 5 + 6);
  const std::string s = trim_summary(t, b, 2);
  CHECK(s ==
        "21 ServiceRecords over the bounds (2 a port, none in all): 6 registered by port GID "
        "0xfe80000000000000:0x0000000000000006, 5 registered by port GID 0xfe80000000000000:0x0000000000000005, and 4 "
        "more ports");
}
