// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// The ServiceRecord codec: SubnAdmSet/Get/Delete(ServiceRecord) and the SA's
// answers, against bytes laid out by hand from IBA 15.2.5.14 and OpenSM's
// ib_service_record_t / IB_SR_COMPMASK_*, plus the error paths.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "smha/mad/service_record.hpp"

using namespace smha;
using namespace smha::mad;

namespace {

ServiceRecord sample() {
  ServiceRecord r;
  r.id = 0x0200534d48410001ULL;
  r.gid = Gid{0xfe80000000000000ULL, Guid{0x0002c90000000002ULL}};
  r.pkey = 0;
  r.lease = 60;
  r.name = "smha";
  for (std::size_t i = 0; i < r.data.size(); ++i) r.data[i] = static_cast<std::uint8_t>(i + 1);
  return r;
}

std::uint64_t be(const MadBytes& b, std::size_t off, std::size_t n) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < n; ++i) v = (v << 8) | b[off + i];
  return v;
}

}  // namespace

TEST_CASE("ServiceRecord Set: golden bytes of header and record", "[mad][service_record]") {
  auto m = encode_service_record_set(0x1122334455667788ULL, sample());
  REQUIRE(m.ok());
  const MadBytes& b = *m;
  CHECK(b[0] == 0x01);   // BaseVersion
  CHECK(b[1] == 0x03);   // SubnAdm
  CHECK(b[2] == 0x02);   // ClassVersion
  CHECK(b[3] == 0x02);   // SubnAdmSet
  CHECK(be(b, 4, 2) == 0);
  CHECK(be(b, 8, 8) == 0x1122334455667788ULL);
  CHECK(be(b, 16, 2) == 0x0031);  // ServiceRecord
  CHECK(be(b, 36, 8) == 0);       // SM_Key
  // ComponentMask: SID(0) SGID(1) SLEASE(4) SNAME(6) and ServiceData bits 7..36.
  CHECK(be(b, 48, 8) == 0x0000001fffffffd3ULL);
  // The record at 56: ServiceID, GID prefix, GUID, P_Key, reserved, lease, key, name, data.
  CHECK(be(b, 56, 8) == 0x0200534d48410001ULL);
  CHECK(be(b, 64, 8) == 0xfe80000000000000ULL);
  CHECK(be(b, 72, 8) == 0x0002c90000000002ULL);
  CHECK(be(b, 80, 2) == 0);
  CHECK(be(b, 84, 4) == 60);
  CHECK(be(b, 88, 16) == 0);
  CHECK(b[104] == 's');
  CHECK(b[105] == 'm');
  CHECK(b[106] == 'h');
  CHECK(b[107] == 'a');
  CHECK(b[108] == 0);
  CHECK(b[168] == 1);   // ServiceData8[0]
  CHECK(b[231] == 64);  // ServiceData64[1]'s last byte
  for (std::size_t i = 232; i < 256; ++i) CHECK(b[i] == 0);
}

TEST_CASE("ServiceRecord Get and Delete: methods and component masks", "[mad][service_record]") {
  auto g = encode_service_record_get(7, sample().id, sample().gid, "smha");
  REQUIRE(g.ok());
  CHECK((*g)[3] == 0x01);
  // ServiceID too: a record another port registers with this GID and name
  // under another ServiceID cannot make the Get ambiguous (SA status 0x0400).
  CHECK(be(*g, 48, 8) == (kSrMaskId | kSrMaskGid | kSrMaskName));
  CHECK(be(*g, 56, 8) == sample().id);
  CHECK(be(*g, 72, 8) == 0x0002c90000000002ULL);
  CHECK((*g)[104] == 's');
  auto d = encode_service_record_delete(8, sample());
  REQUIRE(d.ok());
  CHECK((*d)[3] == 0x15);
  CHECK(be(*d, 48, 8) == (kSrMaskId | kSrMaskGid | kSrMaskName));
  // SM_Key 0: untrusted requests, answered whatever the SA's sa_key is, so the
  // SA key never travels in a MAD smhad sends (doc/drift.md).
  CHECK(be(*g, 36, 8) == 0);
  CHECK(be(*d, 36, 8) == 0);
  ServiceRecord long_name = sample();
  long_name.name.assign(65, 'x');
  auto bad = encode_service_record_set(1, long_name);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message.find("ServiceName") != std::string::npos);
}

TEST_CASE("ServiceRecord requests decode back (the simulated SA reads them)", "[mad][service_record]") {
  auto m = encode_service_record_set(42, sample());
  REQUIRE(m.ok());
  auto req = decode_service_record_request(*m);
  REQUIRE(req.ok());
  CHECK(req->method == kMethodSet);
  CHECK(req->tid == 42);
  CHECK(req->record == sample());
  MadBytes bad = *m;
  bad[3] = 0x12;
  auto e = decode_service_record_request(bad);
  REQUIRE_FALSE(e.ok());
  CHECK(e.error().message.find("offset 3") != std::string::npos);
}

TEST_CASE("ServiceRecord answers: GetResp and DeleteResp round trip", "[mad][service_record]") {
  const ServiceRecord r = sample();
  auto get = encode_service_record_response(9, kMethodGetResp, 0, &r);
  CHECK(be(get, 44, 2) == 22);  // AttributeOffset: 176 bytes
  auto got = decode_service_record_response(get, kMethodGetResp);
  REQUIRE(got.ok());
  CHECK(*got == r);
  auto del = encode_service_record_response(9, kMethodDeleteResp, 0, &r);
  CHECK(del[3] == 0x95);
  CHECK(decode_service_record_response(del, kMethodDeleteResp).ok());
  // A GetResp where a DeleteResp is awaited is not our answer.
  auto wrong = decode_service_record_response(get, kMethodDeleteResp);
  REQUIRE_FALSE(wrong.ok());
  CHECK(wrong.error().code == Errc::Parse);
}

TEST_CASE("ServiceRecord answers: an SA status is named, a malformed answer says where", "[mad][service_record]") {
  auto none = encode_service_record_response(9, kMethodGetResp, 0x0300, nullptr);
  auto e = decode_service_record_response(none, kMethodGetResp);
  REQUIRE_FALSE(e.ok());
  CHECK(e.error().code == kErrMadStatus);
  CHECK(e.error().message == "SA status 0x0300: no records");
  CHECK(e.error().mad_status == kSaStatusNoRecords);

  const ServiceRecord r = sample();
  auto ok = encode_service_record_response(9, kMethodGetResp, 0, &r);
  SECTION("short") {
    auto x = decode_service_record_response(std::span<const std::uint8_t>(ok).first(100), kMethodGetResp);
    REQUIRE_FALSE(x.ok());
    CHECK(x.error().message.find("100 bytes") != std::string::npos);
  }
  SECTION("class") {
    ok[1] = 0x81;
    auto x = decode_service_record_response(ok, kMethodGetResp);
    REQUIRE_FALSE(x.ok());
    CHECK(x.error().message.find("offset 1") != std::string::npos);
  }
  SECTION("attribute") {
    ok[17] = 0x18;
    auto x = decode_service_record_response(ok, kMethodGetResp);
    REQUIRE_FALSE(x.ok());
    CHECK(x.error().message.find("not ServiceRecord") != std::string::npos);
  }
  SECTION("AttributeOffset") {
    ok[45] = 4;
    auto x = decode_service_record_response(ok, kMethodGetResp);
    REQUIRE_FALSE(x.ok());
    CHECK(x.error().message.find("AttributeOffset 4") != std::string::npos);
  }
  SECTION("bytes after the name's NUL") {
    ok[56 + 48 + 10] = 'x';
    auto x = decode_service_record_response(ok, kMethodGetResp);
    REQUIRE_FALSE(x.ok());
    CHECK(x.error().message.find("ServiceName at offset 104") != std::string::npos);
  }
  SECTION("a 64-byte name has no NUL") {
    ServiceRecord full = r;
    full.name.assign(64, 'n');
    auto b = encode_service_record_response(9, kMethodGetResp, 0, &full);
    auto x = decode_service_record_response(b, kMethodGetResp);
    REQUIRE(x.ok());
    CHECK(x->name.size() == 64);
  }
}

TEST_CASE("Gid text", "[mad][service_record]") {
  CHECK(to_string(Gid{0xfe80000000000000ULL, Guid{0x2c90000000002ULL}}) ==
        "0xfe80000000000000:0x0002c90000000002");
}
