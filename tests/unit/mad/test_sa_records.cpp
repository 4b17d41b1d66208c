// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// The workload's SA records (MCMemberRecord, InformInfo, InformInfoRecord)
// and the switch forwarding tables on the wire, byte by byte: offsets from
// IBA Tables 195, 123, 193 and OpenSM's ib_member_rec_t / ib_inform_info_t.
#include <catch2/catch.hpp>

#include "smha/mad/sa_records.hpp"
#include "smha/mad/smp.hpp"

using namespace smha;
using namespace smha::mad;

namespace {

McMemberRecord ipoib_broadcast(std::uint64_t port_guid) {
  McMemberRecord r;
  r.mgid = Gid{0xff12401bffff0000ULL, Guid{0x00000000ffffffffULL}};
  r.port_gid = Gid{kDefaultSubnetPrefix, Guid{port_guid}};
  r.qkey = 0x0b1b;
  r.mtu = 0x84;   // exactly 2048
  r.tclass = 0;
  r.pkey = 0xffff;
  r.rate = 0x83;  // exactly 10 Gb/s
  r.pkt_life = 0x12;
  r.sl_flow_hop = 0x00000000;
  r.scope_state = 0x21;  // link-local scope, full member
  return r;
}

std::uint64_t be(const MadBytes& b, std::size_t off, std::size_t n) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < n; ++i) v = v << 8 | b[off + i];
  return v;
}

}  // namespace

TEST_CASE("MCMemberRecord join: Set, attribute 0x0038, the create mask, fields at Table 195 offsets", "[sa_records]") {
  auto b = encode_mcmember_join(0x42, ipoib_broadcast(0x0002c90300000001ULL));
  REQUIRE(b);
  CHECK((*b)[1] == 0x03);
  CHECK((*b)[2] == 2);
  CHECK((*b)[3] == kMethodSet);
  CHECK(be(*b, 16, 2) == 0x0038);
  // MGID, PortGID, Q_Key, TClass, P_Key, SL, FlowLabel, Scope, JoinState:
  // OpenSM's REQUIRED_MC_CREATE_COMP_MASK plus Scope.
  CHECK(be(*b, 48, 8) == 0x1b0c7ULL);
  CHECK(be(*b, 56, 8) == 0xff12401bffff0000ULL);   // MGID
  CHECK(be(*b, 72, 8) == kDefaultSubnetPrefix);    // PortGID
  CHECK(be(*b, 80, 8) == 0x0002c90300000001ULL);
  CHECK(be(*b, 88, 4) == 0x0b1b);                  // Q_Key
  CHECK(be(*b, 92, 2) == 0);                        // MLID: the SA assigns it
  CHECK((*b)[94] == 0x84);
  CHECK(be(*b, 96, 2) == 0xffff);                   // P_Key
  CHECK((*b)[98] == 0x83);
  CHECK((*b)[104] == 0x21);                         // Scope/JoinState
}

TEST_CASE("MCMemberRecord: refusals of a join that joins nothing or is not multicast", "[sa_records]") {
  auto r = ipoib_broadcast(1);
  r.scope_state = 0x20;
  auto b = encode_mcmember_join(1, r);
  REQUIRE_FALSE(b);
  CHECK(b.error().message.find("JoinState 0") != std::string::npos);
  r = ipoib_broadcast(1);
  r.mgid.prefix = 0xfe80000000000000ULL;
  b = encode_mcmember_leave(1, r);
  REQUIRE_FALSE(b);
  CHECK(b.error().message.find("not a multicast GID") != std::string::npos);
}

TEST_CASE("MCMemberRecord leave and Get: Delete with MGID/PortGID/JoinState, Get with MGID/PortGID", "[sa_records]") {
  auto leave = encode_mcmember_leave(7, ipoib_broadcast(5));
  REQUIRE(leave);
  CHECK((*leave)[3] == kMethodDelete);
  CHECK(be(*leave, 48, 8) == (kMcrMaskMgid | kMcrMaskPortGid | kMcrMaskJoinState));
  const auto get = encode_mcmember_get(8, ipoib_broadcast(5).mgid, ipoib_broadcast(5).port_gid);
  CHECK(get[3] == kMethodGet);
  CHECK(be(get, 48, 8) == (kMcrMaskMgid | kMcrMaskPortGid));
  CHECK(be(get, 80, 8) == 5);
  auto req = decode_mcmember_request(get);
  REQUIRE(req);
  CHECK(req->method == kMethodGet);
  CHECK(req->tid == 8);
  CHECK(req->record.port_gid.guid == Guid{5});
}

TEST_CASE("MCMemberRecord answers: the record round trips, a status is kErrMadStatus, bad headers name the offset",
          "[sa_records]") {
  auto rec = ipoib_broadcast(9);
  rec.mlid = 0xc001;
  const auto ok = encode_mcmember_response(3, kMethodGetResp, 0, &rec);
  auto got = decode_mcmember_response(ok, kMethodGetResp);
  REQUIRE(got);
  CHECK(*got == rec);
  // A leave is answered with DeleteResp, not GetResp.
  auto wrong = decode_mcmember_response(ok, kMethodDeleteResp);
  REQUIRE_FALSE(wrong);
  CHECK(wrong.error().message.find("offset 3") != std::string::npos);
  const auto none = encode_mcmember_response(3, kMethodGetResp, kSaStatusNoRecords, nullptr);
  auto st = decode_mcmember_response(none, kMethodGetResp);
  REQUIRE_FALSE(st);
  CHECK(st.error().code == kErrMadStatus);
  CHECK(st.error().mad_status == kSaStatusNoRecords);
  auto bad = ok;
  bad[45] = 22;  // AttributeOffset of a ServiceRecord
  auto e = decode_mcmember_response(bad, kMethodGetResp);
  REQUIRE_FALSE(e);
  CHECK(e.error().message.find("AttributeOffset 22 at offset 44") != std::string::npos);
  bad = ok;
  bad[17] = 0x31;
  e = decode_mcmember_response(bad, kMethodGetResp);
  REQUIRE_FALSE(e);
  CHECK(e.error().message.find("offset 16") != std::string::npos);
  e = decode_mcmember_response(std::span<const std::uint8_t>(ok.data(), 80), kMethodGetResp);
  REQUIRE_FALSE(e);
  CHECK(e.error().message.find("the record ends at 112") != std::string::npos);
}

TEST_CASE("InformInfo Set: traps 64/65 subscription at Table 123 offsets, refusals of fields that do not fit",
          "[sa_records]") {
  InformInfo info;
  info.trap_number = kTrapGidOutOfService;
  info.qpn = 0x123456;
  info.resp_time = 19;
  auto b = encode_inform_info_set(0x77, info);
  REQUIRE(b);
  CHECK((*b)[3] == kMethodSet);
  CHECK(be(*b, 16, 2) == 0x0003);
  CHECK(be(*b, 56 + 16, 2) == 0xffff);  // LIDRangeBegin: every LID
  CHECK((*b)[56 + 22] == 1);            // IsGeneric
  CHECK((*b)[56 + 23] == 1);            // Subscribe
  CHECK(be(*b, 56 + 24, 2) == 0xffff);  // Type: all
  CHECK(be(*b, 56 + 26, 2) == 65);      // TrapNumber
  CHECK(be(*b, 56 + 28, 4) == (0x123456u << 8 | 19));
  CHECK(be(*b, 56 + 33, 3) == 4);       // ProducerType: subnet management
  auto answer = encode_inform_info_response(0x77, 0, info);
  auto got = decode_inform_info_response(answer);
  REQUIRE(got);
  CHECK(*got == info);
  info.qpn = 0x1000000;
  CHECK_FALSE(encode_inform_info_set(1, info));
  info.qpn = 1;
  info.resp_time = 32;
  CHECK_FALSE(encode_inform_info_set(1, info));
  // Subscribe above 1 is refused naming its offset (OpenSM refuses it too).
  answer[56 + 23] = 2;
  auto e = decode_inform_info_response(answer);
  REQUIRE_FALSE(e);
  CHECK(e.error().message.find("Subscribe 2 at offset 79") != std::string::npos);
}

TEST_CASE("InformInfoRecord GetTable: by subscriber GID, three records in one MAD, no records is empty",
          "[sa_records]") {
  const Gid sub{kDefaultSubnetPrefix, Guid{0x0002c90300000004ULL}};
  const auto q = encode_inform_info_record_get_table(5, sub);
  CHECK(q[3] == kMethodGetTable);
  CHECK(be(q, 16, 2) == 0x00f3);
  CHECK(be(q, 48, 8) == kIirMaskSubscriberGid);
  CHECK(be(q, 64, 8) == 0x0002c90300000004ULL);
  std::vector<InformInfoRecord> recs(2);
  recs[0].subscriber_gid = sub;
  recs[0].info.trap_number = 64;
  recs[1].subscriber_gid = sub;
  recs[1].info.trap_number = 65;
  auto t = decode_inform_info_record_table(encode_inform_info_record_table_response(5, 0, recs));
  REQUIRE(t);
  CHECK(t->records == recs);
  CHECK_FALSE(t->truncated);
  auto empty = decode_inform_info_record_table(encode_inform_info_record_table_response(5, kSaStatusNoRecords, {}));
  REQUIRE(empty);
  CHECK(empty->records.empty());
  // A fourth record does not fit: ibsim cuts it after 8 bytes.
  std::vector<InformInfoRecord> four(4, recs[0]);
  auto full = encode_inform_info_record_table_response(5, 0, four);
  full[56 + 3 * 64] = 0xfe;
  auto cut = decode_inform_info_record_table(full);
  REQUIRE(cut);
  CHECK(cut->records.size() == 3);
  CHECK(cut->truncated);
}

TEST_CASE("Forwarding tables: LFT block, MFT block and position in the modifier, the answers' entries",
          "[smp][forwarding]") {
  auto lft = encode_lft_get(1, Target{Lid{3}}, 2, 0);
  REQUIRE(lft);
  CHECK(be(*lft, 16, 2) == 0x0019);
  CHECK(be(*lft, 20, 4) == 2);
  CHECK_FALSE(encode_lft_get(1, Target{Lid{3}}, kLftMaxBlock + 1, 0));
  auto mft = encode_mft_get(1, Target{DrPath{std::vector<std::uint8_t>{1, 2}}}, 3, 1, 0);
  REQUIRE(mft);
  CHECK(be(*mft, 16, 2) == 0x001b);
  CHECK(be(*mft, 20, 4) == (1u << 28 | 3));
  CHECK_FALSE(encode_mft_get(1, Target{Lid{3}}, 512, 0, 0));
  CHECK_FALSE(encode_mft_get(1, Target{Lid{3}}, 0, 16, 0));

  Smp answer;
  answer.method = kMethodGetResp;
  answer.attr_id = kAttrLinearForwardingTable;
  answer.data[0] = 255;
  answer.data[5] = 7;
  auto ports = decode_lft_response(encode_smp(answer));
  REQUIRE(ports);
  CHECK((*ports)[0] == 255);
  CHECK((*ports)[5] == 7);
  answer.attr_id = kAttrMulticastForwardingTable;
  answer.data[2] = 0x80;
  answer.data[3] = 0x06;
  auto masks = decode_mft_response(encode_smp(answer));
  REQUIRE(masks);
  CHECK((*masks)[1] == 0x8006);
  answer.attr_id = kAttrSwitchInfo;
  answer.data[6] = 0x01;
  answer.data[7] = 0x2c;
  auto top = decode_switchinfo_lft_top(encode_smp(answer));
  REQUIRE(top);
  CHECK(*top == 300);
  // An LFT answer is not an MFT one.
  answer.attr_id = kAttrLinearForwardingTable;
  CHECK_FALSE(decode_mft_response(encode_smp(answer)));
}
