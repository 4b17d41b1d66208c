// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// The SA codec: SubnAdmGetTable(SMInfoRecord) and its GetTableResp, against
// bytes laid out by hand from IBA Figure 163, libibumad's struct
// umad_sa_packet and OpenSM's ib_sminfo_record_t, plus every error path.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "smha/mad/sa.hpp"

using namespace smha;
using namespace smha::mad;

namespace {

// A GetTableResp header (56 bytes) as OpenSM's osm_sa_respond() builds it.
std::vector<std::uint8_t> header(std::uint16_t attr_offset, std::uint32_t payload_length,
                                 std::uint8_t rmpp_flags = 0x07) {
  std::vector<std::uint8_t> b(56, 0);
  b[0] = 0x01;  // BaseVersion
  b[1] = 0x03;  // MgmtClass SubnAdm
  b[2] = 0x02;  // ClassVersion
  b[3] = 0x92;  // GetTableResp
  b[8] = 0x12;  // TID 0x1234567800abcdef
  b[9] = 0x34;
  b[10] = 0x56;
  b[11] = 0x78;
  b[13] = 0xab;
  b[14] = 0xcd;
  b[15] = 0xef;
  b[16] = 0x00;  // AttributeID 0x0018
  b[17] = 0x18;
  b[24] = 0x01;  // RMPPVersion
  b[25] = 0x01;  // RMPPType DATA
  b[26] = rmpp_flags;
  b[31] = 0x01;  // SegmentNumber 1
  b[32] = static_cast<std::uint8_t>(payload_length >> 24);
  b[33] = static_cast<std::uint8_t>(payload_length >> 16);
  b[34] = static_cast<std::uint8_t>(payload_length >> 8);
  b[35] = static_cast<std::uint8_t>(payload_length);
  b[44] = static_cast<std::uint8_t>(attr_offset >> 8);
  b[45] = static_cast<std::uint8_t>(attr_offset);
  return b;
}

// One 32-byte SMInfoRecord: LID, reserved, GUID, SM_Key, ActCount, pri/state, pad.
void add_record(std::vector<std::uint8_t>& b, std::uint16_t lid, std::uint64_t guid,
                std::uint32_t act_count, std::uint8_t priority, std::uint8_t state) {
  std::vector<std::uint8_t> r(32, 0);
  r[0] = static_cast<std::uint8_t>(lid >> 8);
  r[1] = static_cast<std::uint8_t>(lid);
  for (int i = 0; i < 8; ++i) r[4 + i] = static_cast<std::uint8_t>(guid >> (56 - 8 * i));
  for (int i = 0; i < 4; ++i) r[20 + i] = static_cast<std::uint8_t>(act_count >> (24 - 8 * i));
  r[24] = static_cast<std::uint8_t>(priority << 4 | state);
  b.insert(b.end(), r.begin(), r.end());
}

// The lab's table: head01 MASTER (prio 15), head02 STANDBY (1), Hca3 STANDBY (0).
std::vector<std::uint8_t> lab_table(std::uint32_t payload_length) {
  auto b = header(4, payload_length);
  add_record(b, 3, 0x100001, 1234, 15, 3);
  add_record(b, 1, 0x100004, 77, 1, 2);
  add_record(b, 5, 0x100006, 9, 0, 2);
  return b;
}

}  // namespace

TEST_CASE("SA layout: header offsets of IBA Figure 163, SMInfoRecord of ib_sminfo_record_t", "[mad][sa]") {
  CHECK(kSaHeaderSize == 56);
  CHECK(kSaDataSize == 200);
  CHECK(kSmInfoRecordSize == 32);
  CHECK(kSmInfoRecordOffsetWords == 4);
  CHECK(kSmInfoRecordsPerMad == 6);
  CHECK(kAttrSmInfoRecord == 0x0018);
}

TEST_CASE("Golden: SubnAdmGetTable(SMInfoRecord) request, byte for byte", "[mad][sa][golden]") {
  const auto m = encode_sminfo_record_get_table(0x00000000cafe0001ULL);
  std::vector<std::uint8_t> want(256, 0);
  want[0] = 0x01;
  want[1] = 0x03;
  want[2] = 0x02;
  want[3] = 0x12;  // GetTable
  want[12] = 0xca;
  want[13] = 0xfe;
  want[15] = 0x01;
  want[17] = 0x18;
  // RMPP header, SM_Key, AttributeOffset, ComponentMask: all zero (every SM).
  CHECK(std::vector<std::uint8_t>(m.begin(), m.end()) == want);
}

TEST_CASE("Golden: a three-SM GetTableResp as OpenSM sends it decodes record by record", "[mad][sa][golden]") {
  // PayloadLength as the kernel's RMPP sender writes it: 20 + 3 x 32.
  auto t = decode_sminfo_record_table(lab_table(116));
  REQUIRE(t.ok());
  REQUIRE(t->records.size() == 3);
  CHECK(t->claimed == 3u);
  CHECK_FALSE(t->truncated);
  CHECK(t->records[0] == SmInfoRecord{Lid{3}, SmInfo{Guid{0x100001}, 0, 1234, 15, SmState::Master}});
  CHECK(t->records[1] == SmInfoRecord{Lid{1}, SmInfo{Guid{0x100004}, 0, 77, 1, SmState::Standby}});
  CHECK(t->records[2] == SmInfoRecord{Lid{5}, SmInfo{Guid{0x100006}, 0, 9, 0, SmState::Standby}});

  // ibsim: no PayloadLength; the MAD is as long as OpenSM made it.
  auto ibsim = decode_sminfo_record_table(lab_table(0));
  REQUIRE(ibsim.ok());
  CHECK(ibsim->records == t->records);
  CHECK_FALSE(ibsim->claimed);
  CHECK_FALSE(ibsim->truncated);

  // A whole 256-byte MAD zero-padded past the records: the padding is no record.
  auto padded = lab_table(0);
  padded.resize(256, 0);
  auto p = decode_sminfo_record_table(padded);
  REQUIRE(p.ok());
  CHECK(p->records.size() == 3);
  CHECK_FALSE(p->truncated);
  // With a claim, the claim says where the records end.
  padded = lab_table(116);
  padded.resize(256, 0);
  auto c = decode_sminfo_record_table(padded);
  REQUIRE(c.ok());
  CHECK(c->records.size() == 3);
}

TEST_CASE("The encoder writes what the decoder reads, one MAD holds six records", "[mad][sa]") {
  std::vector<SmInfoRecord> recs;
  for (std::uint16_t i = 1; i <= 9; ++i)
    recs.push_back({Lid{i}, SmInfo{Guid{0x1000u + i}, 0, i * 10u, static_cast<std::uint8_t>(i % 16),
                                   SmState::Standby}});
  // Three: one MAD, nothing cut.
  std::vector<SmInfoRecord> three(recs.begin(), recs.begin() + 3);
  auto b3 = encode_sminfo_record_table_response(7, three, true);
  CHECK(b3.size() == 56 + 3 * 32);
  auto d3 = decode_sminfo_record_table(b3);
  REQUIRE(d3.ok());
  CHECK(d3->records == three);
  CHECK(d3->claimed == 3u);

  // Six fill the MAD to 248 bytes: nothing cut.
  std::vector<SmInfoRecord> six(recs.begin(), recs.begin() + 6);
  auto d6 = decode_sminfo_record_table(encode_sminfo_record_table_response(7, six, false));
  REQUIRE(d6.ok());
  CHECK(d6->records == six);
  CHECK_FALSE(d6->truncated);

  // Nine with PayloadLength (the kernel's first segment): 6 arrive, 9 claimed.
  auto b9 = encode_sminfo_record_table_response(7, recs, true);
  CHECK(b9.size() == 256);
  CHECK(b9[249] == 7);  // the 7th record's LID, cut after 8 bytes
  // Two segments: 9 x 32 = 288 bytes of records + 2 x 20 of SA header.
  CHECK(b9[32] == 0);
  CHECK(b9[34] == 0x01);
  CHECK(b9[35] == 0x48);  // 328
  auto d9 = decode_sminfo_record_table(b9);
  REQUIRE(d9.ok());
  CHECK(d9->records.size() == 6);
  CHECK(d9->claimed == 9u);
  CHECK(d9->truncated);

  // Nine without PayloadLength (ibsim): 6 arrive and a piece of the 7th: truncated, claim unknown.
  auto n9 = decode_sminfo_record_table(encode_sminfo_record_table_response(7, recs, false));
  REQUIRE(n9.ok());
  CHECK(n9->records.size() == 6);
  CHECK_FALSE(n9->claimed);
  CHECK(n9->truncated);
}

TEST_CASE("A kernel-reassembled table: every record after one header", "[mad][sa]") {
  // 9 records, 2 RMPP segments: PayloadLength 9 x 32 + 2 x 20 = 328.
  auto b = header(4, 328);
  for (std::uint16_t i = 1; i <= 9; ++i) add_record(b, i, 0x2000u + i, i, 0, 2);
  auto t = decode_sminfo_record_table(b);
  REQUIRE(t.ok());
  CHECK(t->records.size() == 9);
  CHECK(t->claimed == 9u);
  CHECK_FALSE(t->truncated);
  CHECK(t->records[8].info.guid == Guid{0x2009});
  // The transfer cut after 7 records: received 7 of 9 claimed.
  b.resize(56 + 7 * 32);
  auto cut = decode_sminfo_record_table(b);
  REQUIRE(cut.ok());
  CHECK(cut->records.size() == 7);
  CHECK(cut->truncated);
}

TEST_CASE("Bad SA responses: errors name the field and its offset", "[mad][sa]") {
  auto good = lab_table(116);
  auto bad = [&](std::size_t at, std::uint8_t v) {
    auto b = good;
    b[at] = v;
    return decode_sminfo_record_table(b);
  };
  auto expect = [](const Result<SmInfoRecordTable>& r, smha::Errc code, const std::string& text) {
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == code);
    INFO(r.error().message);
    CHECK(r.error().message.find(text) != std::string::npos);
  };
  expect(decode_sminfo_record_table(std::vector<std::uint8_t>(55, 0)), Errc::Parse, "header alone is 56");
  expect(bad(0, 2), Errc::Parse, "base version 2 at offset 0");
  expect(bad(1, 0x81), Errc::Parse, "management class 0x81 at offset 1");
  expect(bad(2, 1), Errc::Parse, "class version 1 at offset 2");
  expect(bad(3, 0x81), Errc::Parse, "method 0x81 at offset 3 is not GetTableResp");
  expect(bad(17, 0x20), Errc::Parse, "attribute 0x0020 at offset 16");
  // Non-zero status: the SA's own code named.
  auto st = good;
  st[4] = 0x03;  // 0x0300: no records
  expect(decode_sminfo_record_table(st), kErrMadStatus, "0x0300: no records");
  CHECK(decode_sminfo_record_table(st).error().mad_status == kSaStatusNoRecords);  // typed, for callers
  st[4] = 0x00;
  st[5] = 0x0c;
  expect(decode_sminfo_record_table(st), kErrMadStatus, "0x000c: method/attribute combination not supported");
  // AttributeOffset: 0 (empty), too small for a record, larger than a MAD's data.
  expect(bad(45, 0), Errc::Parse, "AttributeOffset 0 at offset 44");
  expect(bad(45, 3), Errc::Parse, "AttributeOffset 3 at offset 44");
  expect(bad(45, 26), Errc::Parse, "AttributeOffset 26 at offset 44");
  auto huge = good;
  huge[44] = 0xff;
  expect(decode_sminfo_record_table(huge), Errc::Parse, "AttributeOffset 65284 at offset 44");
  // A record's SMState above 3: which record, which byte.
  expect(bad(56 + 32 + 24, 0x14), Errc::Parse, "SMInfoRecord 1 SMState 4 at offset 112");
  // More than the transport ever reads.
  expect(decode_sminfo_record_table(std::vector<std::uint8_t>(kMaxSaResponse + 1, 0)), Errc::Parse,
         "at most");
}

TEST_CASE("A larger AttributeOffset is honoured: records are that far apart", "[mad][sa]") {
  auto b = header(5, 0);  // 40-byte records
  add_record(b, 3, 0x100001, 1, 15, 3);
  b.resize(b.size() + 8, 0);
  add_record(b, 1, 0x100004, 2, 1, 2);
  b.resize(b.size() + 8, 0);
  auto t = decode_sminfo_record_table(b);
  REQUIRE(t.ok());
  REQUIRE(t->records.size() == 2);
  CHECK(t->records[1].info.guid == Guid{0x100004});
}

TEST_CASE("SA status text", "[mad][sa]") {
  CHECK(describe_sa_status(0) == "0x0000: success");
  CHECK(describe_sa_status(0x0200) == "0x0200: request invalid");
  CHECK(describe_sa_status(0x0001) == "0x0001: busy");
  CHECK(describe_sa_status(0x0700) == "0x0700: request denied");
}

// SubnAdmGetTable(PortInfoRecord) of the IsSM ports, what `saquery -s` sends
// (infiniband-diags: CapabilityMask IsSM, ComponentMask CapabilityMask, the
// enhanced-mask AttributeModifier bit 31), and its answer.
TEST_CASE("Golden: SubnAdmGetTable(PortInfoRecord) of the IsSM ports, byte for byte", "[mad][sa][golden]") {
  const MadBytes b = encode_is_sm_port_record_get_table(0x1234);
  CHECK(b[0] == 1);
  CHECK(b[1] == 0x03);
  CHECK(b[2] == 2);
  CHECK(b[3] == 0x12);  // GetTable
  CHECK(b[15] == 0x34);
  CHECK(b[16] == 0x00);
  CHECK(b[17] == 0x12);  // PortInfoRecord
  CHECK(b[20] == 0x80);  // AttributeModifier bit 31
  CHECK((b[21] | b[22] | b[23]) == 0);
  for (std::size_t i = 36; i < 44; ++i) CHECK(b[i] == 0);  // SM_Key 0: an untrusted reader
  CHECK(b[45] == 9);     // AttributeOffset: 72-byte records
  for (std::size_t i = 48; i < 55; ++i) CHECK(b[i] == 0);
  CHECK(b[55] == 0x80);  // ComponentMask bit 7: CapabilityMask
  // The record: EndportLID 0, PortNum 0, PortInfo.CapabilityMask = IsSM (bytes 56 + 4 + 20).
  for (std::size_t i = 56; i < 256; ++i) CHECK(b[i] == (i == 83 ? 0x02 : 0));
}

TEST_CASE("PortInfoRecord tables: round trip, two per MAD under ibsim, empty, bad", "[mad][sa]") {
  std::vector<PortInfoRecord> recs;
  for (std::uint16_t i = 1; i <= 3; ++i) {
    PortInfoRecord r;
    r.lid = Lid{i};
    r.port_num = 1;
    r.info.lid = Lid{i};
    r.info.sm_lid = Lid{1};
    r.info.local_port = 1;
    r.info.state = mad::PortState::Active;
    r.info.capability_mask = 0x0050c04a;
    recs.push_back(r);
  }
  std::vector<PortInfoRecord> two(recs.begin(), recs.begin() + 2);
  auto d2 = decode_port_info_record_table(encode_port_info_record_table_response(3, two, true));
  REQUIRE(d2.ok());
  CHECK(d2->records == two);
  CHECK(d2->claimed == 2u);
  CHECK_FALSE(d2->truncated);
  CHECK(is_sm(d2->records[0].info));
  // Three: 216 bytes of records; one MAD carries two and 56 bytes of the third.
  auto b3 = encode_port_info_record_table_response(3, recs, false);
  CHECK(b3.size() == 256);
  auto d3 = decode_port_info_record_table(b3);
  REQUIRE(d3.ok());
  CHECK(d3->records == two);
  CHECK(d3->truncated);
  auto c3 = decode_port_info_record_table(encode_port_info_record_table_response(3, recs, true));
  REQUIRE(c3.ok());
  CHECK(c3->claimed == 3u);
  CHECK(c3->truncated);
  // No IsSM port at all: an empty table, not an error (AttributeOffset 0, or "no records").
  auto empty = decode_port_info_record_table(encode_port_info_record_table_response(3, {}, false));
  REQUIRE(empty.ok());
  CHECK(empty->records.empty());
  auto none = encode_port_info_record_table_response(3, two, false);
  none[4] = 0x03;
  none[5] = 0x00;
  auto n = decode_port_info_record_table(none);
  REQUIRE(n.ok());
  CHECK(n->records.empty());
  // Another attribute, a too-small record, another SA status: errors naming them.
  auto other = encode_port_info_record_table_response(3, two, false);
  other[17] = 0x18;
  auto o = decode_port_info_record_table(other);
  REQUIRE_FALSE(o.ok());
  CHECK(o.error().message == "attribute 0x0018 at offset 16 is not PortInfoRecord (0x0012)");
  auto small = encode_port_info_record_table_response(3, two, false);
  small[45] = 4;
  auto sm = decode_port_info_record_table(small);
  REQUIRE_FALSE(sm.ok());
  CHECK(sm.error().message ==
        "AttributeOffset 4 at offset 44: a PortInfoRecord is 9 8-byte words (9..25 accepted)");
  auto busy = encode_port_info_record_table_response(3, two, false);
  busy[4] = 0x01;
  busy[5] = 0x00;
  auto bz = decode_port_info_record_table(busy);
  REQUIRE_FALSE(bz.ok());
  CHECK(bz.error().code == kErrMadStatus);
  // The SMInfoRecord decoder refuses a PortInfoRecord table and vice versa.
  CHECK_FALSE(decode_sminfo_record_table(b3).ok());
}
