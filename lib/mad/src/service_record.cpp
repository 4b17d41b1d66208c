// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/mad/service_record.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "wire.hpp"

namespace smha::mad {

std::string to_string(const Gid& gid) {
  return wire::hex(gid.prefix, 16) + ":" + to_string(gid.guid);
}

namespace {

using namespace wire;  // byte helpers and the SA header offsets

constexpr std::size_t kOffMask = kOffCompMask;

constexpr std::size_t kRec = kSaHeaderSize;  // the record follows the SA header
constexpr std::size_t kOffId = kRec + offsetof(ServiceRecordWire, service_id);
constexpr std::size_t kOffPrefix = kRec + offsetof(ServiceRecordWire, gid_prefix);
constexpr std::size_t kOffGuid = kRec + offsetof(ServiceRecordWire, gid_guid);
constexpr std::size_t kOffPkey = kRec + offsetof(ServiceRecordWire, pkey);
constexpr std::size_t kOffLease = kRec + offsetof(ServiceRecordWire, lease);
constexpr std::size_t kOffKey = kRec + offsetof(ServiceRecordWire, key);
constexpr std::size_t kOffName = kRec + offsetof(ServiceRecordWire, name);
constexpr std::size_t kOffData = kRec + offsetof(ServiceRecordWire, data);
static_assert(kRec + kServiceRecordSize <= kMadSize);

void put_header(std::span<std::uint8_t> b, std::uint8_t method, std::uint64_t tid, std::uint64_t mask) {
  put_sa_header(b, method, tid, kAttrServiceRecord, mask);
}

Status check_name(const std::string& name) {
  if (name.size() > kServiceNameSize)
    return make_error(kErrInvalid, "ServiceName is " + std::to_string(name.size()) +
                                       " bytes; at most 64 fit");
  return Status::Ok();
}

void put_record(std::span<std::uint8_t> b, const ServiceRecord& r) {
  put_be(b, kOffId, 8, r.id);
  put_be(b, kOffPrefix, 8, r.gid.prefix);
  put_be(b, kOffGuid, 8, r.gid.guid.value);
  put_be(b, kOffPkey, 2, r.pkey);
  put_be(b, kOffLease, 4, r.lease);
  std::copy(r.key.begin(), r.key.end(), b.begin() + kOffKey);
  std::copy(r.name.begin(), r.name.begin() + static_cast<std::ptrdiff_t>(std::min(r.name.size(), kServiceNameSize)),
            b.begin() + kOffName);
  std::copy(r.data.begin(), r.data.end(), b.begin() + kOffData);
}

Result<ServiceRecord> get_record(std::span<const std::uint8_t> b) {
  ServiceRecord r;
  r.id = get_be(b, kOffId, 8);
  r.gid.prefix = get_be(b, kOffPrefix, 8);
  r.gid.guid = Guid{get_be(b, kOffGuid, 8)};
  r.pkey = static_cast<std::uint16_t>(get_be(b, kOffPkey, 2));
  r.lease = static_cast<std::uint32_t>(get_be(b, kOffLease, 4));
  std::copy_n(b.begin() + kOffKey, r.key.size(), r.key.begin());
  auto name = b.subspan(kOffName, kServiceNameSize);
  const auto nul = std::find(name.begin(), name.end(), std::uint8_t{0});
  r.name.assign(name.begin(), nul);
  // Bytes after the terminating NUL: not a name OpenSM would match (it
  // compares all 64 bytes), so not one we registered.
  if (nul != name.end() && std::any_of(nul, name.end(), [](std::uint8_t c) { return c != 0; }))
    return decode_error("ServiceName at offset " + std::to_string(kOffName) +
                        " has bytes after its terminating NUL");
  std::copy_n(b.begin() + kOffData, r.data.size(), r.data.begin());
  return r;
}

// The checks every ServiceRecord MAD gets: size, versions, class, attribute.
Status check_common(std::span<const std::uint8_t> mad) {
  if (mad.size() < kRec + kServiceRecordSize)
    return decode_error("ServiceRecord MAD is " + std::to_string(mad.size()) + " bytes; at least " +
                        std::to_string(kRec + kServiceRecordSize) + " expected (header and one record)");
  return check_sa_header(mad, kAttrServiceRecord, "ServiceRecord");
}

}  // namespace

Result<MadBytes> encode_service_record_set(std::uint64_t tid, const ServiceRecord& record) {
  if (auto st = check_name(record.name); !st.ok()) return st.error();
  MadBytes b{};
  put_header(b, kMethodSet, tid, kSrMaskId | kSrMaskGid | kSrMaskLease | kSrMaskName | kSrMaskData);
  put_record(b, record);
  return b;
}

Result<MadBytes> encode_service_record_get(std::uint64_t tid, std::uint64_t id, const Gid& gid,
                                           const std::string& name) {
  if (auto st = check_name(name); !st.ok()) return st.error();
  ServiceRecord r;
  r.id = id;
  r.gid = gid;
  r.name = name;
  MadBytes b{};
  put_header(b, kMethodGet, tid, kSrMaskId | kSrMaskGid | kSrMaskName);
  put_record(b, r);
  return b;
}

Result<MadBytes> encode_service_record_delete(std::uint64_t tid, const ServiceRecord& record) {
  if (auto st = check_name(record.name); !st.ok()) return st.error();
  MadBytes b{};
  put_header(b, kMethodDelete, tid, kSrMaskId | kSrMaskGid | kSrMaskName);
  put_record(b, record);
  return b;
}

Result<ServiceRecordRequest> decode_service_record_request(std::span<const std::uint8_t> mad) {
  if (auto st = check_common(mad); !st.ok()) return st.error();
  ServiceRecordRequest req;
  req.method = mad[kOffMethod];
  if (req.method != kMethodSet && req.method != kMethodGet && req.method != kMethodDelete)
    return decode_error("method " + hex(req.method, 2) +
                        " at offset 3 is not Set (0x02), Get (0x01) or Delete (0x15)");
  req.tid = get_be(mad, kOffTid, 8);
  req.component_mask = get_be(mad, kOffMask, 8);
  auto rec = get_record(mad);
  if (!rec) return rec.error();
  req.record = std::move(*rec);
  return req;
}

Result<ServiceRecord> decode_service_record_response(std::span<const std::uint8_t> mad,
                                                     std::uint8_t method) {
  // A status answer may carry no record: its header is checked first.
  if (mad.size() >= kSaHeaderSize && mad.size() <= kMadSize && mad[kOffMethod] == method &&
      mad[kOffBaseVersion] == kBaseVersion && mad[kOffClass] == kClassSubnAdm &&
      get_be(mad, kOffAttrId, 2) == kAttrServiceRecord) {
    const auto status = static_cast<std::uint16_t>(get_be(mad, kOffStatus, 2));
    if (status != 0) return mad_status_error(status, "SA status " + describe_sa_status(status));
  }
  if (auto st = check_common(mad); !st.ok()) return st.error();
  if (mad[kOffMethod] != method)
    return decode_error("method " + hex(mad[kOffMethod], 2) + " at offset 3 is not " +
                        (method == kMethodDeleteResp ? "DeleteResp (0x95)" : "GetResp (0x81)"));
  const auto status = static_cast<std::uint16_t>(get_be(mad, kOffStatus, 2));
  if (status != 0) return mad_status_error(status, "SA status " + describe_sa_status(status));
  const auto words = get_be(mad, kOffAttrOffset, 2);
  if (words != kServiceRecordOffsetWords)
    return decode_error("AttributeOffset " + std::to_string(words) +
                        " at offset 44: a ServiceRecord is 22 8-byte words");
  return get_record(mad);
}

MadBytes encode_service_record_response(std::uint64_t tid, std::uint8_t method, std::uint16_t status,
                                        const ServiceRecord* record) {
  MadBytes b{};
  put_header(b, method, tid, 0);
  put_be(b, kOffStatus, 2, status);
  if (record) {
    put_be(b, kOffAttrOffset, 2, kServiceRecordOffsetWords);
    ServiceRecord r = *record;
    if (r.name.size() > kServiceNameSize) r.name.resize(kServiceNameSize);
    put_record(b, r);
  }
  return b;
}

}  // namespace smha::mad
