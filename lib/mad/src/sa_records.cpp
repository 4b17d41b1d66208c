// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/mad/sa_records.hpp"

#include <string>

#include "wire.hpp"

namespace smha::mad {

namespace {

using namespace wire;  // byte helpers and the SA header offsets

constexpr std::size_t kRec = kSaHeaderSize;  // the record follows the SA header


void put_gid(std::span<std::uint8_t> b, std::size_t off, const Gid& g) {
  put_be(b, off, 8, g.prefix);
  put_be(b, off + 8, 8, g.guid.value);
}

Gid get_gid(std::span<const std::uint8_t> b, std::size_t off) {
  return Gid{get_be(b, off, 8), Guid{get_be(b, off + 8, 8)}};
}


// An answer with `method` carrying one record of `words` 8-byte words:
// header, method, status (kErrMadStatus), AttributeOffset, size.
Status check_one_record_answer(std::span<const std::uint8_t> mad, std::uint16_t attr, const char* what,
                               std::uint8_t method, std::uint16_t words) {
  if (auto st = check_sa_header(mad, attr, what); !st.ok()) return st;
  if (mad[kOffMethod] != method)
    return decode_error("method " + hex(mad[kOffMethod], 2) + " at offset 3 is not " + hex(method, 2));
  const auto status = static_cast<std::uint16_t>(get_be(mad, kOffStatus, 2));
  if (status != 0) return mad_status_error(status, "SA status " + describe_sa_status(status));
  const auto got = get_be(mad, kOffAttrOffset, 2);
  if (got != words)
    return decode_error("AttributeOffset " + std::to_string(got) + " at offset 44: a " + what + " is " +
                        std::to_string(words) + " 8-byte words");
  if (mad.size() < kRec + words * 8u)
    return decode_error(std::string(what) + " MAD is " + std::to_string(mad.size()) + " bytes; the record ends at " +
                        std::to_string(kRec + words * 8u));
  return Status::Ok();
}

// --- MCMemberRecord ---------------------------------------------------------

constexpr std::size_t kMcMgid = kRec + offsetof(McMemberRecordWire, mgid);
constexpr std::size_t kMcPortGid = kRec + offsetof(McMemberRecordWire, port_gid);
constexpr std::size_t kMcQkey = kRec + offsetof(McMemberRecordWire, qkey);
constexpr std::size_t kMcMlid = kRec + offsetof(McMemberRecordWire, mlid);
constexpr std::size_t kMcMtu = kRec + offsetof(McMemberRecordWire, mtu);
constexpr std::size_t kMcTclass = kRec + offsetof(McMemberRecordWire, tclass);
constexpr std::size_t kMcPkey = kRec + offsetof(McMemberRecordWire, pkey);
constexpr std::size_t kMcRate = kRec + offsetof(McMemberRecordWire, rate);
constexpr std::size_t kMcLife = kRec + offsetof(McMemberRecordWire, pkt_life);
constexpr std::size_t kMcSlFlowHop = kRec + offsetof(McMemberRecordWire, sl_flow_hop);
constexpr std::size_t kMcScopeState = kRec + offsetof(McMemberRecordWire, scope_state);
static_assert(kRec + kMcMemberRecordSize <= kMadSize);

void put_mcmember(std::span<std::uint8_t> b, const McMemberRecord& r) {
  put_gid(b, kMcMgid, r.mgid);
  put_gid(b, kMcPortGid, r.port_gid);
  put_be(b, kMcQkey, 4, r.qkey);
  put_be(b, kMcMlid, 2, r.mlid);
  b[kMcMtu] = r.mtu;
  b[kMcTclass] = r.tclass;
  put_be(b, kMcPkey, 2, r.pkey);
  b[kMcRate] = r.rate;
  b[kMcLife] = r.pkt_life;
  put_be(b, kMcSlFlowHop, 4, r.sl_flow_hop);
  b[kMcScopeState] = r.scope_state;
}

McMemberRecord get_mcmember(std::span<const std::uint8_t> b) {
  McMemberRecord r;
  r.mgid = get_gid(b, kMcMgid);
  r.port_gid = get_gid(b, kMcPortGid);
  r.qkey = static_cast<std::uint32_t>(get_be(b, kMcQkey, 4));
  r.mlid = static_cast<std::uint16_t>(get_be(b, kMcMlid, 2));
  r.mtu = b[kMcMtu];
  r.tclass = b[kMcTclass];
  r.pkey = static_cast<std::uint16_t>(get_be(b, kMcPkey, 2));
  r.rate = b[kMcRate];
  r.pkt_life = b[kMcLife];
  r.sl_flow_hop = static_cast<std::uint32_t>(get_be(b, kMcSlFlowHop, 4));
  r.scope_state = b[kMcScopeState];
  return r;
}

Status check_mgid(const Gid& mgid) {
  if ((mgid.prefix >> 56) != 0xff)
    return make_error(kErrInvalid, "MGID " + to_string(mgid) + " is not a multicast GID (its first byte is not 0xff)");
  return Status::Ok();
}

// --- InformInfo -------------------------------------------------------------

void put_inform(std::span<std::uint8_t> b, std::size_t off, const InformInfo& i) {
  put_gid(b, off + offsetof(InformInfoWire, gid), i.gid);
  put_be(b, off + offsetof(InformInfoWire, lid_range_begin), 2, i.lid_range_begin);
  put_be(b, off + offsetof(InformInfoWire, lid_range_end), 2, i.lid_range_end);
  b[off + offsetof(InformInfoWire, is_generic)] = i.is_generic ? 1 : 0;
  b[off + offsetof(InformInfoWire, subscribe)] = i.subscribe ? 1 : 0;
  put_be(b, off + offsetof(InformInfoWire, type), 2, i.type);
  put_be(b, off + offsetof(InformInfoWire, trap_number), 2, i.trap_number);
  put_be(b, off + offsetof(InformInfoWire, qpn_resp_time), 4, (i.qpn & 0xffffffu) << 8 | (i.resp_time & 0x1fu));
  put_be(b, off + offsetof(InformInfoWire, producer_type), 3, i.producer_type & 0xffffffu);
}

Result<InformInfo> get_inform(std::span<const std::uint8_t> b, std::size_t off) {
  InformInfo i;
  i.gid = get_gid(b, off + offsetof(InformInfoWire, gid));
  i.lid_range_begin = static_cast<std::uint16_t>(get_be(b, off + offsetof(InformInfoWire, lid_range_begin), 2));
  i.lid_range_end = static_cast<std::uint16_t>(get_be(b, off + offsetof(InformInfoWire, lid_range_end), 2));
  const std::uint8_t generic = b[off + offsetof(InformInfoWire, is_generic)];
  const std::uint8_t subscribe = b[off + offsetof(InformInfoWire, subscribe)];
  // IBA 13.4.8.3: both are 0 or 1; OpenSM refuses Subscribe above 1.
  if (generic > 1)
    return decode_error("IsGeneric " + std::to_string(generic) + " at offset " +
                        std::to_string(off + offsetof(InformInfoWire, is_generic)) + " is not 0 or 1");
  if (subscribe > 1)
    return decode_error("Subscribe " + std::to_string(subscribe) + " at offset " +
                        std::to_string(off + offsetof(InformInfoWire, subscribe)) + " is not 0 or 1");
  i.is_generic = generic == 1;
  i.subscribe = subscribe == 1;
  i.type = static_cast<std::uint16_t>(get_be(b, off + offsetof(InformInfoWire, type), 2));
  i.trap_number = static_cast<std::uint16_t>(get_be(b, off + offsetof(InformInfoWire, trap_number), 2));
  const auto qrt = static_cast<std::uint32_t>(get_be(b, off + offsetof(InformInfoWire, qpn_resp_time), 4));
  i.qpn = qrt >> 8;
  i.resp_time = static_cast<std::uint8_t>(qrt & 0x1fu);
  i.producer_type = static_cast<std::uint32_t>(get_be(b, off + offsetof(InformInfoWire, producer_type), 3));
  return i;
}

constexpr std::size_t kIirSubscriber = offsetof(InformInfoRecordWire, subscriber_gid);
constexpr std::size_t kIirEnum = offsetof(InformInfoRecordWire, subscriber_enum);
constexpr std::size_t kIirInfo = offsetof(InformInfoRecordWire, inform_info);

void put_inform_record(std::span<std::uint8_t> b, std::size_t off, const InformInfoRecord& r) {
  put_gid(b, off + kIirSubscriber, r.subscriber_gid);
  put_be(b, off + kIirEnum, 2, r.subscriber_enum);
  put_inform(b, off + kIirInfo, r.info);
}

}  // namespace

// --- MCMemberRecord ---------------------------------------------------------

Result<MadBytes> encode_mcmember_join(std::uint64_t tid, const McMemberRecord& record) {
  if (auto st = check_mgid(record.mgid); !st.ok()) return st.error();
  if ((record.scope_state & 0x0f) == 0)
    return make_error(kErrInvalid, "JoinState 0 joins nothing (FullMember 0x1, NonMember 0x2, SendOnly 0x4)");
  MadBytes b{};
  put_sa_header(b, kMethodSet, tid, kAttrMcMemberRecord, kMcrMaskCreate | kMcrMaskScope);
  put_mcmember(b, record);
  return b;
}

Result<MadBytes> encode_mcmember_leave(std::uint64_t tid, const McMemberRecord& record) {
  if (auto st = check_mgid(record.mgid); !st.ok()) return st.error();
  if ((record.scope_state & 0x0f) == 0)
    return make_error(kErrInvalid, "JoinState 0 leaves nothing (FullMember 0x1, NonMember 0x2, SendOnly 0x4)");
  MadBytes b{};
  put_sa_header(b, kMethodDelete, tid, kAttrMcMemberRecord, kMcrMaskMgid | kMcrMaskPortGid | kMcrMaskJoinState);
  put_mcmember(b, record);
  return b;
}

MadBytes encode_mcmember_get(std::uint64_t tid, const Gid& mgid, const Gid& port_gid) {
  McMemberRecord r;
  r.mgid = mgid;
  r.port_gid = port_gid;
  MadBytes b{};
  put_sa_header(b, kMethodGet, tid, kAttrMcMemberRecord, kMcrMaskMgid | kMcrMaskPortGid);
  put_mcmember(b, r);
  return b;
}

Result<McMemberRecord> decode_mcmember_response(std::span<const std::uint8_t> mad, std::uint8_t method) {
  if (auto st = check_one_record_answer(mad, kAttrMcMemberRecord, "MCMemberRecord", method,
                                        kMcMemberRecordOffsetWords);
      !st.ok())
    return st.error();
  return get_mcmember(mad);
}

Result<McMemberRequest> decode_mcmember_request(std::span<const std::uint8_t> mad) {
  if (auto st = check_sa_header(mad, kAttrMcMemberRecord, "MCMemberRecord"); !st.ok()) return st.error();
  if (mad.size() < kRec + kMcMemberRecordSize)
    return decode_error("MCMemberRecord MAD is " + std::to_string(mad.size()) + " bytes; the record ends at " +
                        std::to_string(kRec + kMcMemberRecordSize));
  McMemberRequest req;
  req.method = mad[kOffMethod];
  if (req.method != kMethodSet && req.method != kMethodGet && req.method != kMethodDelete &&
      req.method != kMethodGetTable)
    return decode_error("method " + hex(req.method, 2) +
                        " at offset 3 is not Set (0x02), Get (0x01), GetTable (0x12) or Delete (0x15)");
  req.tid = get_be(mad, kOffTid, 8);
  req.component_mask = get_be(mad, kOffCompMask, 8);
  req.record = get_mcmember(mad);
  return req;
}

MadBytes encode_mcmember_response(std::uint64_t tid, std::uint8_t method, std::uint16_t status,
                                  const McMemberRecord* record) {
  MadBytes b{};
  put_sa_header(b, method, tid, kAttrMcMemberRecord, 0);
  put_be(b, kOffStatus, 2, status);
  if (record) {
    put_be(b, kOffAttrOffset, 2, kMcMemberRecordOffsetWords);
    put_mcmember(b, *record);
  }
  return b;
}

// --- InformInfo -------------------------------------------------------------

Result<MadBytes> encode_inform_info_set(std::uint64_t tid, const InformInfo& info) {
  if (info.qpn > 0xffffffu) return make_error(kErrInvalid, "QPN " + hex(info.qpn, 6) + " does not fit 24 bits");
  if (info.resp_time > 0x1fu)
    return make_error(kErrInvalid, "RespTimeValue " + std::to_string(info.resp_time) + " does not fit 5 bits");
  if (info.producer_type > 0xffffffu)
    return make_error(kErrInvalid, "ProducerType " + hex(info.producer_type, 6) + " does not fit 24 bits");
  MadBytes b{};
  put_sa_header(b, kMethodSet, tid, kAttrInformInfo, 0);
  put_inform(b, kRec, info);
  return b;
}

Result<InformInfo> decode_inform_info_response(std::span<const std::uint8_t> mad) {
  // OpenSM answers a Set with the InformInfo and AttributeOffset 0 or the
  // record's size depending on its path; the record is what counts: the
  // AttributeOffset is not checked, the size is.
  if (auto st = check_sa_header(mad, kAttrInformInfo, "InformInfo"); !st.ok()) return st.error();
  if (mad[kOffMethod] != kMethodGetResp)
    return decode_error("method " + hex(mad[kOffMethod], 2) + " at offset 3 is not GetResp (0x81)");
  const auto status = static_cast<std::uint16_t>(get_be(mad, kOffStatus, 2));
  if (status != 0) return mad_status_error(status, "SA status " + describe_sa_status(status));
  if (mad.size() < kRec + kInformInfoSize)
    return decode_error("InformInfo MAD is " + std::to_string(mad.size()) + " bytes; the record ends at " +
                        std::to_string(kRec + kInformInfoSize));
  return get_inform(mad, kRec);
}

MadBytes encode_inform_info_record_get_table(std::uint64_t tid, const Gid& subscriber) {
  MadBytes b{};
  put_sa_header(b, kMethodGetTable, tid, kAttrInformInfoRecord, kIirMaskSubscriberGid);
  InformInfoRecord r;
  r.subscriber_gid = subscriber;
  r.info = InformInfo{Gid{}, 0, 0, false, false, 0, 0, 0, 0, 0};
  put_inform_record(b, kRec, r);
  return b;
}

Result<InformInfoRecordTable> decode_inform_info_record_table(std::span<const std::uint8_t> mad) {
  if (auto st = check_sa_header(mad, kAttrInformInfoRecord, "InformInfoRecord"); !st.ok()) return st.error();
  if (mad[kOffMethod] != kMethodGetTableResp)
    return decode_error("method " + hex(mad[kOffMethod], 2) + " at offset 3 is not GetTableResp (0x92)");
  const auto status = static_cast<std::uint16_t>(get_be(mad, kOffStatus, 2));
  if (status == kSaStatusNoRecords) return InformInfoRecordTable{};
  if (status != 0) return mad_status_error(status, "SA status " + describe_sa_status(status));
  const auto words = get_be(mad, kOffAttrOffset, 2);
  if (words == 0) return InformInfoRecordTable{};
  if (words != kInformInfoRecordOffsetWords)
    return decode_error("AttributeOffset " + std::to_string(words) +
                        " at offset 44: an InformInfoRecord is 8 8-byte words");
  InformInfoRecordTable t;
  std::size_t off = kRec;
  for (; off + kInformInfoRecordSize <= mad.size(); off += kInformInfoRecordSize) {
    auto rec_bytes = mad.subspan(off, kInformInfoRecordSize);
    // Trailing all-zero slots are the MAD's padding, not records.
    bool zero = true;
    for (auto c : rec_bytes) zero = zero && c == 0;
    if (zero) break;
    InformInfoRecord r;
    r.subscriber_gid = get_gid(mad, off + kIirSubscriber);
    r.subscriber_enum = static_cast<std::uint16_t>(get_be(mad, off + kIirEnum, 2));
    auto info = get_inform(mad, off + kIirInfo);
    if (!info) return info.error();
    r.info = *info;
    t.records.push_back(r);
  }
  if (off < mad.size() && off + kInformInfoRecordSize > mad.size())
    for (std::size_t i = off; i < mad.size(); ++i) t.truncated = t.truncated || mad[i] != 0;
  return t;
}

MadBytes encode_inform_info_response(std::uint64_t tid, std::uint16_t status, const InformInfo& info) {
  MadBytes b{};
  put_sa_header(b, kMethodGetResp, tid, kAttrInformInfo, 0);
  put_be(b, kOffStatus, 2, status);
  put_inform(b, kRec, info);
  return b;
}

MadBytes encode_inform_info_record_table_response(std::uint64_t tid, std::uint16_t status,
                                                  const std::vector<InformInfoRecord>& records) {
  MadBytes b{};
  put_sa_header(b, kMethodGetTableResp, tid, kAttrInformInfoRecord, 0);
  put_be(b, kOffStatus, 2, status);
  if (!records.empty()) put_be(b, kOffAttrOffset, 2, kInformInfoRecordOffsetWords);
  std::size_t off = kRec;
  for (const auto& r : records) {
    if (off + kInformInfoRecordSize > kMadSize) break;
    put_inform_record(b, off, r);
    off += kInformInfoRecordSize;
  }
  return b;
}

}  // namespace smha::mad
