// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// The SMP/SMInfo codec against bytes captured from infiniband-diags `sminfo`
// under ibsim (data/README.md), plus every error path of the decoders.
#include <catch2/catch.hpp>

#include <fstream>
#include <stdexcept>
#include <tuple>
#include <string>
#include <utility>
#include <vector>

#include "smha/mad/smp.hpp"

using namespace smha;
using namespace smha::mad;

namespace {

struct Capture {
  std::vector<std::vector<std::uint8_t>> sent;
  std::vector<std::vector<std::uint8_t>> received;
};

std::vector<std::uint8_t> from_hex(const std::string& hex) {
  std::vector<std::uint8_t> out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2)
    out.push_back(static_cast<std::uint8_t>(std::stoul(hex.substr(i, 2), nullptr, 16)));
  return out;
}

Capture load(const std::string& name) {
  std::ifstream in(std::string(SMHA_MAD_TESTDATA) + "/" + name);
  if (!in) throw std::runtime_error("cannot open test data " + name);
  Capture c;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    auto space = line.find(' ');
    auto bytes = from_hex(line.substr(space + 1));
    (line.compare(0, space, "send") == 0 ? c.sent : c.received).push_back(bytes);
  }
  return c;
}

std::uint64_t tid_of(const std::vector<std::uint8_t>& mad) {
  auto smp = decode_smp(mad);
  REQUIRE(smp.ok());
  return smp->tid;
}

MadBytes to_array(const std::vector<std::uint8_t>& v) {
  MadBytes a{};
  REQUIRE(v.size() == a.size());
  std::copy(v.begin(), v.end(), a.begin());
  return a;
}

// A valid GetResp(SMInfo) to mutate in the error-path tests.
MadBytes good_response(std::uint8_t mgmt_class) {
  Smp smp;
  smp.mgmt_class = mgmt_class;
  smp.method = kMethodGetResp;
  smp.attr_id = kAttrSmInfo;
  smp.tid = 0x1234;
  if (mgmt_class == kClassSubnDirected) {
    smp.direction = true;
    smp.hop_count = 2;
    smp.hop_pointer = 2;
    smp.dr_slid = smp.dr_dlid = kPermissiveDrLid;
  }
  smp.data = encode_sminfo(SmInfo{Guid{0x100001}, 1, 76, 15, SmState::Master});
  return encode_smp(smp);
}

}  // namespace

TEST_CASE("Layout constants match IBA figures 149/150", "[mad]") {
  CHECK(kMadSize == 256);
  CHECK(kSmpDataOffset == 64);
  CHECK(kSmpDataSize == 64);
  CHECK(offsetof(SmpWire, initial_path) == 128);
  CHECK(offsetof(SmpWire, return_path) == 192);
  CHECK(offsetof(SmInfoWire, priority_state) == 20);
}

TEST_CASE("SMInfo payload is big-endian with priority in the high nibble", "[mad]") {
  SmInfo info{Guid{0x0102030405060708}, 0x1112131415161718, 0x21222324, 9, SmState::Standby};
  auto b = encode_sminfo(info);
  std::vector<std::uint8_t> head(b.begin(), b.begin() + 21);
  CHECK(head == std::vector<std::uint8_t>{1, 2, 3, 4, 5, 6, 7, 8, 0x11, 0x12, 0x13, 0x14, 0x15,
                                          0x16, 0x17, 0x18, 0x21, 0x22, 0x23, 0x24, 0x92});
  for (std::size_t i = 21; i < b.size(); ++i) CHECK(b[i] == 0);
  auto back = decode_sminfo(b);
  REQUIRE(back.ok());
  CHECK(*back == info);
}

TEST_CASE("Golden: LID-routed GetResp from the MASTER decodes as sminfo printed it", "[mad][golden]") {
  auto c = load("lid_master.txt");
  REQUIRE(c.received.size() == 1);
  auto info = decode_sminfo_response(c.received[0]);
  REQUIRE(info.ok());
  CHECK(info->guid == Guid{0x100001});
  CHECK(info->act_count == 76);
  CHECK(info->priority == 15);
  CHECK(info->state == SmState::Master);
  CHECK(info->sm_key == 1);  // OpenSM's default sm_key, revealed because M_Key is 0
}

TEST_CASE("Golden: LID-routed and DR GetResps from the STANDBY", "[mad][golden]") {
  auto lid = decode_sminfo_response(load("lid_standby.txt").received.at(0));
  REQUIRE(lid.ok());
  CHECK(lid->guid == Guid{0x100004});
  CHECK(lid->act_count == 158);
  CHECK(lid->priority == 1);
  CHECK(lid->state == SmState::Standby);

  auto dr = decode_sminfo_response(load("dr_standby.txt").received.at(0));
  REQUIRE(dr.ok());
  CHECK(dr->guid == Guid{0x100004});
  CHECK(dr->act_count == 159);
  CHECK(dr->state == SmState::Standby);
}

TEST_CASE("Golden: DR GetResp carries the D bit, hop count and paths", "[mad][golden]") {
  auto c = load("dr_master.txt");
  auto smp = decode_smp(c.received.at(0));
  REQUIRE(smp.ok());
  CHECK(smp->directed());
  CHECK(smp->direction);
  CHECK(smp->status == 0);
  CHECK(smp->hop_count == 2);
  CHECK(smp->initial_path[1] == 1);
  CHECK(smp->initial_path[2] == 1);
  auto info = decode_sminfo(smp->data);
  REQUIRE(info.ok());
  CHECK(info->guid == Guid{0x100001});
  CHECK(info->act_count == 77);
  CHECK(info->priority == 15);
  CHECK(info->state == SmState::Master);
  // Every captured SMP survives decode -> encode unchanged.
  for (const auto& mad : c.sent) CHECK(encode_smp(*decode_smp(mad)) == to_array(mad));
  for (const auto& mad : c.received) CHECK(encode_smp(*decode_smp(mad)) == to_array(mad));
}

TEST_CASE("Golden: the local SM by DR hop count 0", "[mad][golden]") {
  auto c = load("dr0_local_master.txt");
  auto sent = decode_smp(c.sent.at(0));
  REQUIRE(sent.ok());
  CHECK(sent->hop_count == 0);
  auto info = decode_sminfo_response(c.received.at(0));
  REQUIRE(info.ok());
  CHECK(info->guid == Guid{0x100001});
  CHECK(info->act_count == 83);
  CHECK(info->state == SmState::Master);
}

TEST_CASE("Golden: our Get requests equal sminfo's except its STANDBY payload byte", "[mad][golden]") {
  struct Case {
    const char* file;
    Target target;
  };
  std::vector<Case> cases{{"lid_master.txt", Lid{3}},
                          {"lid_standby.txt", Lid{1}},
                          {"dr_master.txt", DrPath{{1, 1}}},
                          {"dr_standby.txt", DrPath{{1, 3, 1}}},
                          {"dr0_local_master.txt", DrPath{}}};
  for (const auto& k : cases) {
    INFO(k.file);
    auto theirs = load(k.file).sent.at(0);
    auto ours = encode_sminfo_get(tid_of(theirs), k.target, 0);
    REQUIRE(ours.ok());
    // sminfo encodes its -s default (2 = STANDBY) into a Get's payload; smha sends zeros.
    CHECK(theirs[kSmpDataOffset + 20] == 0x02);
    theirs[kSmpDataOffset + 20] = 0;
    CHECK(*ours == to_array(theirs));
  }
}

TEST_CASE("Golden: our SubnSet(DISCOVER) equals sminfo -s 3 <lid> 5 byte for byte", "[mad][golden]") {
  auto c = load("set_discover_standby.txt");
  auto theirs = c.sent.at(0);
  SmInfo payload;
  payload.state = SmState::Master;
  auto ours = encode_sminfo_set(tid_of(theirs), Lid{1}, SmInfoModifier::Discover, payload, 0);
  REQUIRE(ours.ok());
  CHECK(*ours == to_array(theirs));
  auto answer = decode_sminfo_response(c.received.at(0));
  REQUIRE(answer.ok());
  CHECK(answer->state == SmState::Standby);  // OpenSM answers with its pre-transition state
}

TEST_CASE("Golden: OpenSM's rejection is status 0x0700, reported as mad_status", "[mad][golden]") {
  auto c = load("set_rejected_master.txt");
  auto r = decode_sminfo_response(c.received.at(0));
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == kErrMadStatus);
  CHECK(r.error().message.find("0x0700") != std::string::npos);
  CHECK(r.error().mad_status == 0x0700);
}

TEST_CASE("Golden: an unanswered request returned by ibsim is not a GetResp", "[mad][golden]") {
  for (const char* file : {"lid_no_sm.txt", "dr0_no_sm.txt"}) {
    INFO(file);
    auto c = load(file);
    CHECK(c.sent.size() == 3);  // libibmad's default retries
    REQUIRE(c.received.size() == 3);
    auto r = decode_sminfo_response(c.received[0]);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == Errc::Parse);
    CHECK(r.error().message.find("not GetResp") != std::string::npos);
  }
}

TEST_CASE("DR requests: hop pointer 0, D clear, permissive DrSLID/DrDLID, path from byte 1", "[mad]") {
  auto mad = encode_sminfo_get(0xabcdef01, DrPath{{4, 7, 9}}, 0x1122334455667788);
  REQUIRE(mad.ok());
  const MadBytes& b = *mad;
  CHECK(b[0] == 1);
  CHECK(b[1] == 0x81);
  CHECK(b[2] == 1);
  CHECK(b[3] == kMethodGet);
  CHECK(b[4] == 0);
  CHECK(b[5] == 0);
  CHECK(b[6] == 0);
  CHECK(b[7] == 3);
  CHECK(b[12] == 0xab);
  CHECK(b[15] == 0x01);
  CHECK(b[16] == 0x00);
  CHECK(b[17] == 0x20);
  CHECK(b[24] == 0x11);
  CHECK(b[31] == 0x88);
  CHECK(b[32] == 0xff);
  CHECK(b[35] == 0xff);
  CHECK(b[128] == 0);
  CHECK(b[129] == 4);
  CHECK(b[130] == 7);
  CHECK(b[131] == 9);
  CHECK(b[132] == 0);
}

TEST_CASE("Encoders refuse targets that cannot be addressed", "[mad]") {
  auto check_invalid = [](const Result<MadBytes>& r, const char* needle) {
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == kErrInvalid);
    CHECK(r.error().message.find(needle) != std::string::npos);
  };
  check_invalid(encode_sminfo_get(1, Lid{0}, 0), "LID 0");
  check_invalid(encode_sminfo_get(1, kPermissiveLid, 0), "LID 65535");
  DrPath long_path;
  long_path.hops.assign(64, 1);
  check_invalid(encode_sminfo_get(1, long_path, 0), "64 hops");
  check_invalid(encode_sminfo_set(1, DrPath{{1, 0, 2}}, SmInfoModifier::Discover, SmInfo{}, 0),
                "hop 2 names port 0");
  DrPath max_path;
  max_path.hops.assign(63, 1);
  CHECK(encode_sminfo_get(1, max_path, 0).ok());
}

TEST_CASE("Malformed SMPs give a decode error naming what and where", "[mad]") {
  auto expect = [](std::span<const std::uint8_t> mad, smha::Errc code, const char* needle) {
    auto r = decode_sminfo_response(mad);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == code);
    INFO(r.error().message);
    CHECK(r.error().message.find(needle) != std::string::npos);
  };
  for (std::uint8_t cls : {kClassSubnLid, kClassSubnDirected}) {
    INFO("class " << int(cls));
    REQUIRE(decode_sminfo_response(good_response(cls)).ok());

    MadBytes m = good_response(cls);
    expect(std::span(m).first(255), Errc::Parse, "255 bytes");
    expect(std::span<const std::uint8_t>(), Errc::Parse, "0 bytes");
    std::vector<std::uint8_t> longer(m.begin(), m.end());
    longer.push_back(0);
    expect(longer, Errc::Parse, "257 bytes");

    m = good_response(cls);
    m[0] = 2;
    expect(m, Errc::Parse, "base version 2 at offset 0");
    m = good_response(cls);
    m[1] = 0x04;
    expect(m, Errc::Parse, "class 0x04 at offset 1");
    m = good_response(cls);
    m[2] = 2;
    expect(m, Errc::Parse, "class version 2 at offset 2");
    m = good_response(cls);
    m[3] = kMethodGet;
    expect(m, Errc::Parse, "method 0x01 at offset 3");
    m = good_response(cls);
    m[3] = kMethodSet;
    expect(m, Errc::Parse, "method 0x02");
    m = good_response(cls);
    m[17] = 0x15;  // PortInfo
    expect(m, Errc::Parse, "attribute 0x0015 at offset 16");
    m = good_response(cls);
    m[4] = static_cast<std::uint8_t>(m[4] | 0x07);
    expect(m, kErrMadStatus, "0x07");
    m = good_response(cls);
    m[5] = 0x1c;
    expect(m, kErrMadStatus, "invalid attribute or modifier value");
    for (std::uint8_t state = 4; state < 16; ++state) {
      m = good_response(cls);
      m[kSmpDataOffset + 20] = static_cast<std::uint8_t>(0xf0 | state);
      expect(m, Errc::Parse, "SMState");
    }
  }
  MadBytes dr = good_response(kClassSubnDirected);
  dr[4] = 0;  // D bit cleared
  expect(dr, Errc::Parse, "D bit");
  dr = good_response(kClassSubnDirected);
  dr[7] = 64;
  expect(dr, Errc::Parse, "hop count 64 at offset 7");
  dr = good_response(kClassSubnDirected);
  dr[6] = 4;  // hop count 2: pointer may be 0..3
  expect(dr, Errc::Parse, "hop pointer 4 at offset 6");
  dr[6] = 3;
  CHECK(decode_sminfo_response(dr).ok());

  // LID-routed SMPs have no D bit: the same status bit there is a status bit.
  MadBytes lid = good_response(kClassSubnLid);
  lid[4] = 0x80;
  expect(lid, kErrMadStatus, "0x8000");

  CHECK_FALSE(decode_sminfo(std::span(dr).first(63)).ok());
}

TEST_CASE("MAD status text names the IBA fields and OpenSM's quirk", "[mad]") {
  CHECK(describe_mad_status(0) == "0x0000: success");
  CHECK(describe_mad_status(0x0001) == "0x0001: busy");
  CHECK(describe_mad_status(0x0004) == "0x0004: bad base or class version");
  CHECK(describe_mad_status(0x000c) == "0x000c: method/attribute combination not supported");
  CHECK(describe_mad_status(0x0700).find("OpenSM") != std::string::npos);
  CHECK(hex_dump(std::vector<std::uint8_t>{0xde, 0xad}) == "0000: de ad\n");
}

// ---- PortInfo -------------------------------------------------------------

TEST_CASE("PortInfo layout: LID, MasterSMLID, LocalPortNum, PortState low nibble of byte 32",
          "[mad]") {
  CHECK(kAttrPortInfo == 0x0015);
  CHECK(offsetof(PortInfoWire, lid) == 16);
  CHECK(offsetof(PortInfoWire, master_sm_lid) == 18);
  CHECK(offsetof(PortInfoWire, local_port_num) == 28);
  CHECK(offsetof(PortInfoWire, speed_supported_state) == 32);
  CHECK(offsetof(PortInfoWire, capability_mask) == 20);
  PortInfo info{Lid{0x0102}, Lid{0x0304}, 7, PortState::Armed, 0x0050c04a};
  CHECK(is_sm(info));
  auto b = encode_portinfo(info);
  for (std::size_t i = 0; i < b.size(); ++i) {
    INFO("byte " << i);
    const std::uint8_t want = i == 16 ? 0x01 : i == 17 ? 0x02 : i == 18 ? 0x03 : i == 19 ? 0x04
                              : i == 20 ? 0x00 : i == 21 ? 0x50 : i == 22 ? 0xc0 : i == 23 ? 0x4a
                              : i == 28 ? 7 : i == 32 ? 3 : 0;
    CHECK(b[i] == want);
  }
  auto back = decode_portinfo(b);
  REQUIRE(back.ok());
  CHECK(*back == info);
  // LinkSpeedSupported (high nibble) does not disturb the state.
  b[32] = 0x74;
  REQUIRE(decode_portinfo(b).ok());
  CHECK(decode_portinfo(b)->state == PortState::Active);
  CHECK(decode_portinfo(b)->link.speed_supported == 7);
}

TEST_CASE("PortInfo link fields: widths 29-31, speeds in bytes 32 and 35, extended speeds in 62-63 only with IsExtendedSpeedsSupported",
          "[mad]") {
  CHECK(offsetof(PortInfoWire, link_width_enabled) == 29);
  CHECK(offsetof(PortInfoWire, speed_active_enabled) == 35);
  CHECK(offsetof(PortInfoWire, speed_ext_active_supported) == 62);
  CHECK(offsetof(PortInfoWire, speed_ext_enabled) == 63);
  PortInfo info{Lid{2}, Lid{1}, 3, PortState::Active, kCapExtendedSpeeds};
  info.link = LinkInfo{.width_enabled = 3, .width_supported = 3, .width_active = 2, .speed_supported = 7,
                       .speed_enabled = 7, .speed_active = 4, .ext_supported = 0xc, .ext_enabled = 0x1c,
                       .ext_active = 8, .phys_state = 5};
  auto b = encode_portinfo(info);
  CHECK(b[29] == 3);
  CHECK(b[31] == 2);
  CHECK(b[32] == 0x74);
  CHECK(b[33] == 0x50);
  CHECK(b[35] == 0x47);
  CHECK(b[62] == 0x8c);
  CHECK(b[63] == 0x1c);
  auto back = decode_portinfo(b);
  REQUIRE(back.ok());
  CHECK(*back == info);
  // Without the capability bit (CapabilityMask bit 14: byte 22, 0x40) the
  // extended bytes mean nothing: not read.
  CHECK(b[22] == 0x40);
  b[22] = 0;
  back = decode_portinfo(b);
  REQUIRE(back.ok());
  CHECK(back->link.ext_active == 0);
  CHECK(back->link.ext_supported == 0);
  CHECK(back->link.ext_enabled == 0);
  CHECK(back->link.speed_active == 4);
}

TEST_CASE("Golden: zero-hop PortInfo of our own port, as smpquery printed it", "[mad][golden]") {
  struct Case {
    const char* file;
    PortState state;
    std::uint16_t lid;
    std::uint16_t sm_lid;
  };
  for (const Case& k : {Case{"portinfo_dr0_init.txt", PortState::Init, 0, 0},
                        Case{"portinfo_dr0_active.txt", PortState::Active, 1, 1},
                        Case{"portinfo_dr0_down.txt", PortState::Down, 1, 1}}) {
    INFO(k.file);
    auto c = load(k.file);
    REQUIRE(c.received.size() == 1);
    auto info = decode_portinfo_response(c.received[0]);
    REQUIRE(info.ok());
    CHECK(info->state == k.state);
    CHECK(info->lid == Lid{k.lid});
    CHECK(info->sm_lid == Lid{k.sm_lid});
    CHECK(info->local_port == 1);
    // CapMask 0x0050c048 as smpquery printed it: no IsSM (opensm -o had exited).
    CHECK(info->capability_mask == 0x0050c048);
    CHECK_FALSE(is_sm(*info));
    if (k.state == PortState::Active) {
      // ibsim's defaults: 4X enabled and active of 1X/4X/8X/12X/2X supported,
      // SDR active and enabled of SDR/DDR/QDR, LinkUp, no extended speed.
      CHECK(info->link == LinkInfo{.width_enabled = 2, .width_supported = 31, .width_active = 2, .speed_supported = 7,
                                   .speed_enabled = 1, .speed_active = 1, .ext_supported = 0, .ext_enabled = 0,
                                   .ext_active = 0, .phys_state = 5});
    }
    // smpquery's request is ours byte for byte (zero payload, modifier = port 1).
    auto theirs = c.sent.at(0);
    auto ours = encode_portinfo_get(tid_of(theirs), DrPath{}, 1, 0);
    REQUIRE(ours.ok());
    CHECK(*ours == to_array(theirs));
    for (const auto& mad : c.received) CHECK(encode_smp(*decode_smp(mad)) == to_array(mad));
  }
}

TEST_CASE("Golden: PortInfo of a port the HCA lacks is refused with status 0x001c", "[mad][golden]") {
  auto c = load("portinfo_dr0_bad_port.txt");
  auto ours = encode_portinfo_get(tid_of(c.sent.at(0)), DrPath{}, 9, 0);
  REQUIRE(ours.ok());
  CHECK(*ours == to_array(c.sent.at(0)));
  auto r = decode_portinfo_response(c.received.at(0));
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == kErrMadStatus);
  CHECK(r.error().message.find("0x001c") != std::string::npos);
}

TEST_CASE("PortInfo Get by LID and DR, malformed PortInfo answers name what and where", "[mad]") {
  auto by_lid = encode_portinfo_get(0x42, Lid{5}, 1, 0x99);
  REQUIRE(by_lid.ok());
  auto smp = decode_smp(*by_lid);
  REQUIRE(smp.ok());
  CHECK(smp->mgmt_class == kClassSubnLid);
  CHECK(smp->method == kMethodGet);
  CHECK(smp->attr_id == kAttrPortInfo);
  CHECK(smp->attr_mod == 1);
  CHECK(smp->m_key == 0x99);
  auto by_dr = encode_portinfo_get(0x42, DrPath{{1, 3}}, 4, 0);
  REQUIRE(by_dr.ok());
  CHECK((*by_dr)[7] == 2);
  CHECK((*by_dr)[23] == 4);
  CHECK_FALSE(encode_portinfo_get(1, Lid{0}, 1, 0).ok());
  CHECK_FALSE(encode_portinfo_get(1, DrPath{{1, 0}}, 1, 0).ok());

  const auto good = to_array(load("portinfo_dr0_active.txt").received.at(0));
  REQUIRE(decode_portinfo_response(good).ok());
  auto expect = [](const MadBytes& m, smha::Errc code, const std::string& needle) {
    auto r = decode_portinfo_response(m);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == code);
    INFO(r.error().message);
    CHECK(r.error().message.find(needle) != std::string::npos);
  };
  MadBytes m = good;
  m[17] = 0x20;  // SMInfo
  expect(m, Errc::Parse, "attribute 0x0020 at offset 16 is not PortInfo (0x0015)");
  m = good;
  m[3] = kMethodGet;
  expect(m, Errc::Parse, "not GetResp");
  m = good;
  m[4] = 0;  // D bit cleared
  expect(m, Errc::Parse, "D bit");
  for (std::uint8_t state : {0, 5, 6, 15}) {
    INFO("state " << int(state));
    m = good;
    m[kSmpDataOffset + 32] = static_cast<std::uint8_t>((m[kSmpDataOffset + 32] & 0xf0) | state);
    expect(m, Errc::Parse, "PortState " + std::to_string(state) + " at SMP data offset 32");
  }
  // A SMInfo answer is not a PortInfo answer, and the reverse.
  CHECK_FALSE(decode_portinfo_response(good_response(kClassSubnDirected)).ok());
  CHECK_FALSE(decode_sminfo_response(good).ok());
  CHECK_FALSE(decode_portinfo(std::span(good).first(63)).ok());
}

TEST_CASE("PortState names", "[mad]") {
  CHECK(to_string(PortState::Down) == "DOWN");
  CHECK(to_string(PortState::Init) == "INIT");
  CHECK(to_string(PortState::Armed) == "ARMED");
  CHECK(to_string(PortState::Active) == "ACTIVE");
  CHECK(to_string(PortState::Unknown) == "unknown");
  CHECK(to_string(static_cast<PortState>(9)) == "unknown");
}

TEST_CASE("NodeInfo layout: every field at the offset IBA Table 146 gives it", "[mad]") {
  CHECK(kAttrNodeInfo == 0x0011);
  CHECK(kAttrNodeDescription == 0x0010);
  NodeInfo ni;
  ni.base_version = 1;
  ni.class_version = 1;
  ni.type = NodeType::Switch;
  ni.num_ports = 36;
  ni.system_image_guid = Guid{0x0102030405060708};
  ni.node_guid = Guid{0x1112131415161718};
  ni.port_guid = Guid{0x2122232425262728};
  ni.partition_cap = 0x3132;
  ni.device_id = 0x4142;
  ni.revision = 0x51525354;
  ni.local_port = 17;
  ni.vendor_id = 0x616263;
  auto b = encode_nodeinfo(ni);
  CHECK(b[0] == 1);
  CHECK(b[1] == 1);
  CHECK(b[2] == 2);
  CHECK(b[3] == 36);
  CHECK(b[4] == 0x01);
  CHECK(b[11] == 0x08);
  CHECK(b[12] == 0x11);
  CHECK(b[19] == 0x18);
  CHECK(b[20] == 0x21);
  CHECK(b[27] == 0x28);
  CHECK(b[28] == 0x31);
  CHECK(b[30] == 0x41);
  CHECK(b[32] == 0x51);
  CHECK(b[35] == 0x54);
  CHECK(b[36] == 17);
  CHECK(b[37] == 0x61);
  CHECK(b[39] == 0x63);
  for (std::size_t i = 40; i < b.size(); ++i) CHECK(b[i] == 0);
  auto back = decode_nodeinfo(b);
  REQUIRE(back.ok());
  CHECK(*back == ni);
}

TEST_CASE("Golden: NodeInfo by directed route from ibsim's SMAs, as smpquery printed it",
          "[mad][golden]") {
  struct Case {
    const char* file;
    DrPath path;
    NodeType type;
    std::uint8_t ports;
    std::uint64_t node_guid;
    std::uint64_t port_guid;
    std::uint8_t local_port;
  };
  for (const Case& k :
       {Case{"nodeinfo_dr0.txt", DrPath{}, NodeType::Ca, 2, 0x100000, 0x100001, 1},
        Case{"nodeinfo_dr_switch.txt", DrPath{{1}}, NodeType::Switch, 8, 0x200000, 0x200000, 1},
        Case{"nodeinfo_dr_hca2.txt", DrPath{{1, 3, 1}}, NodeType::Ca, 2, 0x100003, 0x100004, 1}}) {
    INFO(k.file);
    auto c = load(k.file);
    REQUIRE(c.received.size() == 1);
    auto info = decode_nodeinfo_response(c.received[0]);
    REQUIRE(info.ok());
    CHECK(info->type == k.type);
    CHECK(info->num_ports == k.ports);
    CHECK(info->node_guid == Guid{k.node_guid});
    CHECK(info->system_image_guid == Guid{k.node_guid});
    CHECK(info->port_guid == Guid{k.port_guid});
    CHECK(info->local_port == k.local_port);
    CHECK(info->revision == 0xa1);
    // smpquery's request is ours byte for byte.
    auto theirs = c.sent.at(0);
    auto ours = encode_nodeinfo_get(tid_of(theirs), k.path, 0);
    REQUIRE(ours.ok());
    CHECK(*ours == to_array(theirs));
    for (const auto& mad : c.received) CHECK(encode_smp(*decode_smp(mad)) == to_array(mad));
  }
}

TEST_CASE("Golden: NodeDescription by directed route, and a switch port's PortInfo", "[mad][golden]") {
  for (auto [file, path, text] : {std::tuple{"nodedesc_dr_hca2.txt", DrPath{{1, 3, 1}}, "head02"},
                                  std::tuple{"nodedesc_dr_switch.txt", DrPath{{1}}, "Switch1"}}) {
    INFO(file);
    auto c = load(file);
    // smpquery nodedesc asks NodeInfo first, then NodeDescription.
    REQUIRE(c.received.size() == 2);
    REQUIRE(decode_nodeinfo_response(c.received[0]).ok());
    auto desc = decode_node_description_response(c.received[1]);
    REQUIRE(desc.ok());
    CHECK(*desc == text);
    auto theirs = c.sent.at(1);
    auto ours = encode_node_description_get(tid_of(theirs), path, 0);
    REQUIRE(ours.ok());
    CHECK(*ours == to_array(theirs));
  }
  // Switch1 port 8 has no cable: PortInfo says DOWN (what discovery checks
  // before it extends a path through a switch port).
  auto c = load("portinfo_dr_switch_port8.txt");
  auto pi = decode_portinfo_response(c.received.at(0));
  REQUIRE(pi.ok());
  CHECK(pi->state == PortState::Down);
  auto ours = encode_portinfo_get(tid_of(c.sent.at(0)), DrPath{{1}}, 8, 0);
  REQUIRE(ours.ok());
  CHECK(*ours == to_array(c.sent.at(0)));
}

TEST_CASE("Golden: NodeInfo through a switch port with no cable comes back unanswered",
          "[mad][golden]") {
  // ibsim hands back a copy of the request (method 0x01, no D bit) with
  // ETIMEDOUT in the umad header: never a NodeInfo answer.
  auto c = load("nodeinfo_dr_unconnected.txt");
  REQUIRE(c.received.size() == 3);
  for (const auto& mad : c.received) {
    auto r = decode_nodeinfo_response(mad);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == Errc::Parse);
  }
}

TEST_CASE("Malformed NodeInfo and NodeDescription answers name what and where", "[mad]") {
  const auto good = to_array(load("nodeinfo_dr_switch.txt").received.at(0));
  REQUIRE(decode_nodeinfo_response(good).ok());
  auto expect = [](const MadBytes& m, const std::string& needle) {
    auto r = decode_nodeinfo_response(m);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == Errc::Parse);
    INFO(r.error().message);
    CHECK(r.error().message.find(needle) != std::string::npos);
  };
  MadBytes m = good;
  for (std::uint8_t t : {0, 4, 255}) {
    m = good;
    m[kSmpDataOffset + 2] = t;
    expect(m, "NodeType " + std::to_string(t) + " at SMP data offset 2");
  }
  m = good;
  m[kSmpDataOffset + 3] = 0;
  expect(m, "NumPorts 0 at SMP data offset 3");
  m = good;
  m[kSmpDataOffset + 36] = 9;  // 8 ports
  expect(m, "LocalPortNum 9 at SMP data offset 36 exceeds NumPorts 8");
  m = good;
  m[17] = 0x10;
  expect(m, "attribute 0x0010 at offset 16 is not NodeInfo (0x0011)");
  m = good;
  m[4] = 0;
  expect(m, "D bit");
  CHECK_FALSE(decode_nodeinfo(std::span(good).first(40)).ok());
  // A NodeInfo answer is no NodeDescription answer.
  auto d = decode_node_description_response(good);
  REQUIRE_FALSE(d.ok());
  CHECK(d.error().message.find("is not NodeDescription (0x0010)") != std::string::npos);
  CHECK_FALSE(decode_node_description(std::span(good).first(10)).ok());

  // NodeInfo Get by LID and DR.
  auto by_lid = encode_nodeinfo_get(7, Lid{9}, 0);
  REQUIRE(by_lid.ok());
  auto smp = decode_smp(*by_lid);
  REQUIRE(smp.ok());
  CHECK(smp->mgmt_class == kClassSubnLid);
  CHECK(smp->attr_id == kAttrNodeInfo);
  CHECK(smp->attr_mod == 0);
  CHECK_FALSE(encode_nodeinfo_get(1, Lid{0}, 0).ok());
  CHECK_FALSE(encode_node_description_get(1, DrPath{{1, 0}}, 0).ok());
  CHECK_FALSE(encode_nodeinfo_get(1, DrPath{std::vector<std::uint8_t>(64, 1)}, 0).ok());
  auto deep = encode_nodeinfo_get(1, DrPath{std::vector<std::uint8_t>(63, 1)}, 0);
  REQUIRE(deep.ok());
  CHECK((*deep)[7] == 63);
}

TEST_CASE("NodeDescription: NUL-padded, 64 bytes at most, raw bytes (smha::printable() shows them)", "[mad]") {
  auto b = encode_node_description("head01 mlx5_0");
  CHECK(b[0] == 'h');
  CHECK(b[13] == 0);
  CHECK(*decode_node_description(b) == "head01 mlx5_0");
  // 64 bytes without a NUL: all of them.
  std::string full(70, 'x');
  auto f = encode_node_description(full);
  CHECK(decode_node_description(f)->size() == 64);
  // Bytes after the first NUL are ignored.
  b[20] = 'z';
  CHECK(*decode_node_description(b) == "head01 mlx5_0");
  CHECK(to_string(NodeType::Ca) == "CA");
  CHECK(to_string(NodeType::Switch) == "switch");
  CHECK(to_string(NodeType::Router) == "router");
  CHECK(to_string(NodeType::Unknown) == "unknown");
}
