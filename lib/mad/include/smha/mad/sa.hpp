// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// Subnet Administration MADs (IBA 1.3 chapter 15) on the wire: the one query
// smha sends, SubnAdmGetTable(SMInfoRecord) (what `saquery SMIR` asks), and its
// GetTableResp. Pure functions over bytes, like smp.hpp; the census uses the
// answer (doc/census.md, source 5).
//
// An SA MAD (IBA Figure 163 / libibumad struct umad_sa_packet): the 24-byte
// common MAD header, the 12-byte RMPP header (IBA 13.6.2.1), the 20-byte SA
// header (SM_Key, AttributeOffset, ComponentMask) and 200 bytes of records per
// 256-byte MAD. A table longer than that travels as RMPP segments; the kernel
// reassembles them for an agent registered with rmpp_version 1 and hands over
// one buffer: the first segment's 56 header bytes, then all the records.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "smha/core/result.hpp"
#include "smha/core/sminfo.hpp"
#include "smha/core/types.hpp"
#include "smha/mad/smp.hpp"
#include "smha/mad/transport.hpp"

namespace smha::mad {

// Management class SubnAdm (IBA Table 105; OpenSM IB_MCLASS_SUBN_ADM), class
// version 2 (IBA 15.2.1.1; OpenSM's SA answers version 2 only).
inline constexpr std::uint8_t kClassSubnAdm = 0x03;
inline constexpr std::uint8_t kSaClassVersion = 2;
// SubnAdmGetTable and its response (IBA Table 184; OpenSM IB_MAD_METHOD_GETTABLE).
inline constexpr std::uint8_t kMethodGetTable = 0x12;
inline constexpr std::uint8_t kMethodGetTableResp = 0x92;
// SMInfoRecord (IBA Table 185; OpenSM IB_MAD_ATTR_SMINFO_RECORD).
inline constexpr std::uint16_t kAttrSmInfoRecord = 0x0018;
// The GSI QP and its well-known Q_Key (IBA 13.5.1; the SA listens on QP1).
inline constexpr int kQp1 = 1;
inline constexpr std::uint32_t kGsiQKey = 0x80010000u;
// RMPP (IBA 13.6.2.1): version 1; flags in the low 3 bits of byte 26.
inline constexpr std::uint8_t kRmppVersion = 1;
inline constexpr std::uint8_t kRmppTypeData = 1;
inline constexpr std::uint8_t kRmppFlagActive = 0x01;
inline constexpr std::uint8_t kRmppFlagFirst = 0x02;
inline constexpr std::uint8_t kRmppFlagLast = 0x04;

// The SA MAD layout up to the records, one byte array per field (IBA Figure
// 163; libibumad struct umad_sa_packet; libibmad IB_SA_*_F).
struct SaHeaderWire {
  std::uint8_t base_version;
  std::uint8_t mgmt_class;
  std::uint8_t class_version;
  std::uint8_t method;
  std::uint8_t status[2];
  std::uint8_t class_specific[2];
  std::uint8_t tid[8];
  std::uint8_t attr_id[2];
  std::uint8_t reserved1[2];
  std::uint8_t attr_mod[4];
  std::uint8_t rmpp_version;
  std::uint8_t rmpp_type;
  std::uint8_t rmpp_time_flags;      // RRespTime << 3 | RMPPFlags
  std::uint8_t rmpp_status;
  std::uint8_t segment_number[4];
  std::uint8_t payload_length[4];    // PayloadLength in the first (and last) segment
  std::uint8_t sm_key[8];
  std::uint8_t attribute_offset[2];  // record size in 8-byte words
  std::uint8_t reserved2[2];
  std::uint8_t component_mask[8];
};
static_assert(sizeof(SaHeaderWire) == 56);
static_assert(offsetof(SaHeaderWire, status) == 4);
static_assert(offsetof(SaHeaderWire, tid) == 8);
static_assert(offsetof(SaHeaderWire, attr_id) == 16);
static_assert(offsetof(SaHeaderWire, rmpp_version) == 24);
static_assert(offsetof(SaHeaderWire, rmpp_time_flags) == 26);
static_assert(offsetof(SaHeaderWire, segment_number) == 28);
static_assert(offsetof(SaHeaderWire, payload_length) == 32);
static_assert(offsetof(SaHeaderWire, sm_key) == 36);
static_assert(offsetof(SaHeaderWire, attribute_offset) == 44);  // libibmad IB_SA_ATTROFFS_F
static_assert(offsetof(SaHeaderWire, component_mask) == 48);

inline constexpr std::size_t kSaHeaderSize = sizeof(SaHeaderWire);      // IB_SA_DATA_OFFS, 56
inline constexpr std::size_t kSaDataSize = kMadSize - kSaHeaderSize;     // 200 per MAD
// The SA class header (SM_Key .. ComponentMask) that every RMPP segment of an
// SA transfer repeats; PayloadLength counts it once per segment (as the kernel's
// RMPP sender does: segments x 220 - padding).
inline constexpr std::size_t kSaClassHeaderSize = 20;
inline constexpr std::size_t kRmppSegmentPayload = kSaClassHeaderSize + kSaDataSize;  // 220

// SMInfoRecord (IBA 15.2.5.13; OpenSM ib_sminfo_record_t): LID, 2 reserved
// bytes, the SMInfo attribute's first 21 bytes (GUID, SM_Key, ActCount,
// priority << 4 | state), 7 bytes of padding: 32 bytes, AttributeOffset 4.
struct SmInfoRecordWire {
  std::uint8_t lid[2];
  std::uint8_t reserved[2];
  std::uint8_t guid[8];
  std::uint8_t sm_key[8];
  std::uint8_t act_count[4];
  std::uint8_t priority_state;
  std::uint8_t pad[7];
};
static_assert(sizeof(SmInfoRecordWire) == 32);
static_assert(offsetof(SmInfoRecordWire, guid) == 4);
static_assert(offsetof(SmInfoRecordWire, sm_key) == 12);
static_assert(offsetof(SmInfoRecordWire, act_count) == 20);
static_assert(offsetof(SmInfoRecordWire, priority_state) == 24);
inline constexpr std::size_t kSmInfoRecordSize = sizeof(SmInfoRecordWire);
inline constexpr std::uint16_t kSmInfoRecordOffsetWords = kSmInfoRecordSize / 8;
// Records that fit in one MAD (ibsim's whole answer: it carries no RMPP).
inline constexpr std::size_t kSmInfoRecordsPerMad = kSaDataSize / kSmInfoRecordSize;  // 6

// SubnAdmGetTable(SMInfoRecord), ComponentMask 0 (every SM), SM_Key 0: one
// 256-byte MAD, class 0x03 version 2, RMPP header zero (a request needs none).
MadBytes encode_sminfo_record_get_table(std::uint64_t tid);

// Decodes a GetTableResp(SMInfoRecord): `mad` is what arrived, 56 header bytes
// and then the records (one MAD, or a kernel-reassembled RMPP transfer; at
// most kMaxSaResponse bytes). Checks base version 1, class 0x03, class version
// 2, method 0x92, attribute 0x0018, status 0 (else code kErrMadStatus naming
// it), AttributeOffset 4..25 (0 is an empty table, which a master's SA never
// sends: it lists itself), and each record's SMState. Records are the whole
// record slots present, up to the claim; with no claim, trailing all-zero
// slots are padding. Errors name the field and its offset.
Result<SmInfoRecordTable> decode_sminfo_record_table(std::span<const std::uint8_t> mad);

// The response an SA would send for `records` (the sim's SA, tests, fuzz
// seeds), RMPP active/first/last, and, when `payload_length` is set,
// PayloadLength for the whole table as the kernel's RMPP sender writes it
// (else 0, as under ibsim): 56 + 32 x records bytes, cut at 256 as ibsim
// cuts it (6 whole records and the first 8 bytes of the 7th).
std::vector<std::uint8_t> encode_sminfo_record_table_response(
    std::uint64_t tid, const std::vector<SmInfoRecord>& records, bool payload_length);

// PortInfoRecord (IBA 15.2.5.3; OpenSM ib_portinfo_record_t): EndportLID,
// PortNum, Options, the 64-byte PortInfo, 4 bytes of padding: 72 bytes,
// AttributeOffset 9. Two fit in one MAD (ibsim's whole answer).
inline constexpr std::uint16_t kAttrPortInfoRecord = 0x0012;
struct PortInfoRecordWire {
  std::uint8_t lid[2];
  std::uint8_t port_num;
  std::uint8_t options;
  std::uint8_t port_info[kSmpDataSize];
  std::uint8_t pad[4];
};
static_assert(sizeof(PortInfoRecordWire) == 72);
static_assert(offsetof(PortInfoRecordWire, port_info) == 4);
inline constexpr std::size_t kPortInfoRecordSize = sizeof(PortInfoRecordWire);
inline constexpr std::uint16_t kPortInfoRecordOffsetWords = kPortInfoRecordSize / 8;
// ComponentMask bits of a PortInfoRecord (IBA 15.2.5.3: EndportLID 0,
// PortNum 1, Options 2, then the PortInfo fields in order: M_Key 3,
// GIDPrefix 4, LID 5, MasterSMLID 6, CapabilityMask 7; OpenSM
// IB_PIR_COMPMASK_CAPMASK).
inline constexpr std::uint64_t kPirCompCapabilityMask = 1ull << 7;
// AttributeModifier bit 31 of a Get/GetTable: the component mask compares
// CapabilityMask bitwise (the IBA 1.2 errata; OpenSM's
// is_enhanced_comp_mask): every port with at least the bits asked for.
inline constexpr std::uint32_t kSaEnhancedCompMask = 0x80000000u;

// SubnAdmGetTable(PortInfoRecord) of every port with IsSM: ComponentMask
// CapabilityMask, the enhanced-mask modifier, CapabilityMask = IsSM, SM_Key 0.
MadBytes encode_is_sm_port_record_get_table(std::uint64_t tid);

// Decodes a GetTableResp(PortInfoRecord) as decode_sminfo_record_table does
// an SMInfoRecord table (same checks; attribute 0x0012, AttributeOffset
// 9..25; an empty table is AttributeOffset 0 or status 0x0300 and decodes to
// no records: unlike the SMInfoRecord table it may be empty).
Result<PortInfoRecordTable> decode_port_info_record_table(std::span<const std::uint8_t> mad);

// The response an SA would send for `records`: with `one_mad`, cut at 256
// bytes as ibsim cuts it (two whole records and the first 56 bytes of the
// third); without, the whole transfer as the kernel hands a reassembled RMPP
// transfer over (the sim's SA on hardware terms).
std::vector<std::uint8_t> encode_port_info_record_table_response(
    std::uint64_t tid, const std::vector<PortInfoRecord>& records, bool payload_length, bool one_mad = true);

// The largest response read and decoded (a reassembled table): an SM on each
// of the 49151 unicast LIDs would be 56 + 49151 x 32 bytes, under 1.5 MiB.
inline constexpr std::size_t kMaxSaResponse = 2 * 1024 * 1024;

// The SA status of a GetTableResp as text ("0x0300: no records", ...).
std::string describe_sa_status(std::uint16_t status);

}  // namespace smha::mad
