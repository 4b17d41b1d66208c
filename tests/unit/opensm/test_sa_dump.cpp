// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// opensm-sa.dump as OpenSM 3.3.23's loader reads it (doc/continuity.md): a
// dump OpenSM wrote under ibsim parses whole; every way a line can stop
// OpenSM's load is refused naming the line and the field.
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

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

const char* kGroup =
    "MC Group 0xc001 : mgid=0xff12601bffff0000:0x00000001ff000001 port_gid=0xfe80000000000000:0x0000000000100007 "
    "qkey=0x00000b1b mlid=0xc001 mtu=0x84 tclass=0x00 pkey=0xffff rate=0x83 pkt_life=0x80 sl_flow_hop=0x00000000 "
    "scope_state=0x21 proxy_join=0x0\n\n";
const char* kMember = "mcm_port: port_gid=0xfe80000000000000:0x0000000000100007 scope_state=0x21 proxy_join=0x0\n\n";

std::string error_of(const std::string& text) {
  auto r = parse_sa_dump(text);
  REQUIRE_FALSE(r);
  return r.error().message;
}

}  // namespace

TEST_CASE("SA dump: what OpenSM 3.3.23 wrote for the workload parses whole", "[sa_dump]") {
  const std::string text = real_dump();
  REQUIRE(text.size() > 1000);
  auto d = parse_sa_dump(text);
  REQUIRE(d);
  REQUIRE(d->groups.size() == 3);
  CHECK(d->groups[0].mlid == 0xc000);
  CHECK(d->groups[0].well_known);
  CHECK(d->groups[0].mgid_prefix == 0xff12401bffff0000ULL);
  CHECK(d->groups[0].mgid_id == 0xffffffffULL);
  CHECK(d->groups[0].members == 2);
  CHECK_FALSE(d->groups[1].well_known);
  CHECK(d->groups[2].mlid == 0xc002);
  CHECK(d->members == 6);
  CHECK(d->informs == 4);
  CHECK(d->services == 4);
  CHECK(d->guidinfo == 0);
  CHECK(summary_text(*d) == "3 groups (6 members), 4 ServiceRecords, 4 subscriptions");
}

TEST_CASE("SA dump: empty, blank and comment lines are no records", "[sa_dump]") {
  auto d = parse_sa_dump("\n\n# a comment\n   \n");
  REQUIRE(d);
  CHECK(d->groups.empty());
  CHECK(d->members == 0);
}

TEST_CASE("SA dump: a field OpenSM's loader cannot read stops the load, so it is refused by line and field",
          "[sa_dump]") {
  const std::string good = std::string(kGroup) + kMember;
  REQUIRE(parse_sa_dump(good));
  std::string t = good;
  t.replace(t.find(" qkey="), 6, " qkay=");
  CHECK(error_of(t) == "line 1: MC Group: no \" qkey=0x\" field");
  t = good;
  t.replace(t.find("mlid=0xc001"), 11, "mlid=0xzz01");
  CHECK(error_of(t) == "line 1: MC Group: \" mlid=0x\" is not followed by a hex number");
  t = good;
  t.replace(t.find("mtu=0x84"), 8, "mtu=0x184");
  CHECK(error_of(t) == "line 1: MC Group: \" mtu=0x\" does not fit 1 byte(s)");
  t = good;
  t.replace(t.find("scope_state=0x21 proxy"), 16, "scope_state=0x21,");
  CHECK(error_of(t).find("line 1: MC Group: \" scope_state=0x\" is not followed by a blank or ':'") == 0);
  // The member line is line 3 (a blank line between).
  t = good;
  t.replace(t.find("mcm_port: port_gid=0xfe80000000000000:0x"), 40, "mcm_port: port_gid=0xfe80000000000000;0x");
  CHECK(error_of(t) == "line 3: mcm_port: \" port_gid=0x\" is not followed by a blank or ':'");
}

TEST_CASE("SA dump: records OpenSM never writes, members without a group, non-multicast MLIDs and MGIDs",
          "[sa_dump]") {
  CHECK(error_of(kMember) == "line 1: mcm_port before any MC Group");
  CHECK(error_of(std::string(kGroup) + "Hello there\n").find("line 3 is no record OpenSM writes") == 0);
  std::string t = kGroup;
  t.replace(t.find("0xc001 :"), 6, "0x0001");
  CHECK(error_of(t).find("line 1: MC Group MLID 1 is not a multicast LID") == 0);
  t = kGroup;
  t.replace(t.find("mgid=0xff12"), 11, "mgid=0xfe12");
  CHECK(error_of(t) == "line 1: MC Group mgid is not a multicast GID");
  // A service record after a group ends the group: a member after it has none.
  const std::string text = real_dump();
  const auto service = text.substr(text.find("Service Record:"));
  CHECK(error_of(service.substr(0, service.find('\n') + 1) + kMember) == "line 2: mcm_port before any MC Group");
}

TEST_CASE("SA dump: lines OpenSM would cut, NUL bytes and texts over the cap", "[sa_dump]") {
  std::string t = std::string(kGroup);
  t.insert(t.find(" proxy_join"), std::string(1000, ' '));
  CHECK(error_of(t).find("line 1 is 1") == 0);
  t = std::string(kGroup);
  t[20] = '\0';
  CHECK(error_of(t) == "line 1 has a NUL byte");
  auto big = parse_sa_dump(std::string(100, '\n'), 99);
  REQUIRE_FALSE(big);
  CHECK(big.error().code == Errc::TooLarge);
}

TEST_CASE("SA dump: a ServiceName of 64 bytes is read as OpenSM reads it (cut at 63), not refused", "[sa_dump]") {
  const std::string text = real_dump();
  auto line = text.substr(text.find("Service Record:"));
  line = line.substr(0, line.find('\n') + 1);
  line.replace(line.find("name='smha-workload'"), 20, "name='" + std::string(64, 'n') + "'");
  auto d = parse_sa_dump(line);
  REQUIRE(d);
  CHECK(d->services == 1);
  // A name with a newline in it (a ServiceName is any 64 bytes a node
  // registers) splits the line: OpenSM's load would stop there too.
  line = text.substr(text.find("Service Record:"));
  line = line.substr(0, line.find('\n') + 1);
  line.replace(line.find("name='smha-workload'"), 20, "name='smha\nworkload'");
  CHECK_FALSE(parse_sa_dump(line));
}
