// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// SA ServiceRecord MADs (IBA 15.2.5.14; OpenSM osm_sa_service_record.c) on the
// wire: SubnAdmSet (register, with ServiceLease), SubnAdmGet (one record by
// ServiceGID and ServiceName) and SubnAdmDelete, and the SA's answers. One
// 256-byte MAD each way: 56 bytes of SA header and one 176-byte record (ibsim
// carries no RMPP; a single record never needs it). Pure functions over bytes,
// like sa.hpp; the config drift check uses them (doc/drift.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "smha/core/result.hpp"
#include "smha/mad/sa.hpp"
#include "smha/mad/transport.hpp"

namespace smha::mad {

// ServiceRecord (IBA Table 185; OpenSM IB_MAD_ATTR_SERVICE_RECORD).
inline constexpr std::uint16_t kAttrServiceRecord = 0x0031;
// SubnAdmDelete and its response (IBA Table 184; OpenSM IB_MAD_METHOD_DELETE).
// SubnAdmSet (0x02) and SubnAdmGet (0x01) are answered with GetResp (0x81).
inline constexpr std::uint8_t kMethodDelete = 0x15;
inline constexpr std::uint8_t kMethodDeleteResp = 0x95;

// The record as it goes on the wire (OpenSM ib_service_record_t).
struct ServiceRecordWire {
  std::uint8_t service_id[8];
  std::uint8_t gid_prefix[8];
  std::uint8_t gid_guid[8];
  std::uint8_t pkey[2];
  std::uint8_t reserved[2];
  std::uint8_t lease[4];
  std::uint8_t key[16];
  std::uint8_t name[64];
  std::uint8_t data[64];  // ServiceData8[16], 16[8], 32[4], 64[2]
};
static_assert(sizeof(ServiceRecordWire) == 176);
static_assert(offsetof(ServiceRecordWire, pkey) == 24);
static_assert(offsetof(ServiceRecordWire, lease) == 28);
static_assert(offsetof(ServiceRecordWire, key) == 32);
static_assert(offsetof(ServiceRecordWire, name) == 48);
static_assert(offsetof(ServiceRecordWire, data) == 112);
inline constexpr std::size_t kServiceRecordSize = sizeof(ServiceRecordWire);
inline constexpr std::uint16_t kServiceRecordOffsetWords = kServiceRecordSize / 8;  // 22
inline constexpr std::size_t kServiceNameSize = sizeof(ServiceRecordWire::name);

// ComponentMask bits (IBA Table 190; OpenSM IB_SR_COMPMASK_*).
inline constexpr std::uint64_t kSrMaskId = 1ULL << 0;
inline constexpr std::uint64_t kSrMaskGid = 1ULL << 1;
inline constexpr std::uint64_t kSrMaskPkey = 1ULL << 2;
inline constexpr std::uint64_t kSrMaskLease = 1ULL << 4;
inline constexpr std::uint64_t kSrMaskKey = 1ULL << 5;
inline constexpr std::uint64_t kSrMaskName = 1ULL << 6;
// ServiceData8[0..15] (bits 7..22), 16[0..7] (23..30), 32[0..3] (31..34), 64[0..1] (35..36).
inline constexpr std::uint64_t kSrMaskData = ((1ULL << 37) - 1) & ~((1ULL << 7) - 1);

// What a request carries: its method and ComponentMask, and the record.
struct ServiceRecordRequest {
  std::uint8_t method = 0;       // kMethodSet, kMethodGet or kMethodDelete
  std::uint64_t tid = 0;
  std::uint64_t component_mask = 0;
  ServiceRecord record;
};

// SubnAdmSet(ServiceRecord): ComponentMask ServiceID, ServiceGID, ServiceLease,
// ServiceName and all of ServiceData (OpenSM requires ID and GID; without the
// lease bit it would make the lease infinite). ServiceP_Key is sent as given
// and its mask bit left clear, so OpenSM checks no P_Key table. Error
// kErrInvalid when the name is longer than 64 bytes.
Result<MadBytes> encode_service_record_set(std::uint64_t tid, const ServiceRecord& record);
// SubnAdmGet(ServiceRecord) of the record with `id`, `gid` and `name`:
// ComponentMask ServiceID, ServiceGID and ServiceName.
Result<MadBytes> encode_service_record_get(std::uint64_t tid, std::uint64_t id, const Gid& gid,
                                           const std::string& name);
// SubnAdmDelete(ServiceRecord): ComponentMask ServiceID, ServiceGID, ServiceName.
Result<MadBytes> encode_service_record_delete(std::uint64_t tid, const ServiceRecord& record);

// Decodes a request (the simulated SA, fuzzing): base version 1, class 0x03
// version 2, method Set, Get or Delete, attribute 0x0031, 256 bytes.
Result<ServiceRecordRequest> decode_service_record_request(std::span<const std::uint8_t> mad);

// Decodes the SA's answer to a Set or Get (`method` kMethodGetResp) or a
// Delete (kMethodDeleteResp): base version 1, class 0x03 version 2, that
// method, attribute 0x0031, status 0 (else kErrMadStatus naming it),
// AttributeOffset 22 (exactly one record follows), and the record's
// ServiceName NUL-terminated or 64 bytes. Errors name the field and offset.
Result<ServiceRecord> decode_service_record_response(std::span<const std::uint8_t> mad,
                                                     std::uint8_t method);

// The answer an SA sends (the simulated SA, tests, fuzz seeds): `status` 0
// with `record`, or a status and no record (AttributeOffset 0).
MadBytes encode_service_record_response(std::uint64_t tid, std::uint8_t method, std::uint16_t status,
                                        const ServiceRecord* record);

}  // namespace smha::mad
