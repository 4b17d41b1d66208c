// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// The SA records a compute node's workload makes (IBA 1.3 chapter 15), on the
// wire: MCMemberRecord (multicast joins and leaves, as IPoIB and rdma_cm
// make them), InformInfo (event subscriptions, as a node subscribes to traps
// 64/65) and InformInfoRecord (the subscriptions the SA holds). smha's
// workload tools use them to make a workload and to read back what a new
// master's SA still has after a takeover (doc/continuity.md). One 256-byte
// MAD each way (ibsim carries no RMPP): a Get that matches one record, or a
// GetTable whose answer fits one MAD. Pure functions over bytes, like sa.hpp.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "smha/core/result.hpp"
#include "smha/mad/sa.hpp"
#include "smha/mad/service_record.hpp"
#include "smha/mad/transport.hpp"

namespace smha::mad {

// ---------------------------------------------------------------------------
// MCMemberRecord (IBA 15.2.5.17 Table 195; OpenSM ib_member_rec_t).

inline constexpr std::uint16_t kAttrMcMemberRecord = 0x0038;

struct McMemberRecordWire {
  std::uint8_t mgid[16];
  std::uint8_t port_gid[16];
  std::uint8_t qkey[4];
  std::uint8_t mlid[2];
  std::uint8_t mtu;          // MTUSelector << 6 | MTU
  std::uint8_t tclass;
  std::uint8_t pkey[2];
  std::uint8_t rate;         // RateSelector << 6 | Rate
  std::uint8_t pkt_life;     // PacketLifeTimeSelector << 6 | PacketLifeTime
  std::uint8_t sl_flow_hop[4];  // SL (4 bits), FlowLabel (20), HopLimit (8)
  std::uint8_t scope_state;  // Scope << 4 | JoinState
  std::uint8_t proxy_join[3];   // ProxyJoin (1 bit) and reserved
  std::uint8_t pad[4];
};
static_assert(sizeof(McMemberRecordWire) == 56);
static_assert(offsetof(McMemberRecordWire, qkey) == 32);
static_assert(offsetof(McMemberRecordWire, mlid) == 36);
static_assert(offsetof(McMemberRecordWire, pkey) == 40);
static_assert(offsetof(McMemberRecordWire, sl_flow_hop) == 44);
static_assert(offsetof(McMemberRecordWire, scope_state) == 48);
inline constexpr std::size_t kMcMemberRecordSize = sizeof(McMemberRecordWire);
inline constexpr std::uint16_t kMcMemberRecordOffsetWords = kMcMemberRecordSize / 8;  // 7

// ComponentMask bits (IBA Table 195; OpenSM IB_MCR_COMPMASK_*).
inline constexpr std::uint64_t kMcrMaskMgid = 1ULL << 0;
inline constexpr std::uint64_t kMcrMaskPortGid = 1ULL << 1;
inline constexpr std::uint64_t kMcrMaskQkey = 1ULL << 2;
inline constexpr std::uint64_t kMcrMaskMlid = 1ULL << 3;
inline constexpr std::uint64_t kMcrMaskMtuSel = 1ULL << 4;
inline constexpr std::uint64_t kMcrMaskMtu = 1ULL << 5;
inline constexpr std::uint64_t kMcrMaskTclass = 1ULL << 6;
inline constexpr std::uint64_t kMcrMaskPkey = 1ULL << 7;
inline constexpr std::uint64_t kMcrMaskRateSel = 1ULL << 8;
inline constexpr std::uint64_t kMcrMaskRate = 1ULL << 9;
inline constexpr std::uint64_t kMcrMaskLifeSel = 1ULL << 10;
inline constexpr std::uint64_t kMcrMaskLife = 1ULL << 11;
inline constexpr std::uint64_t kMcrMaskSl = 1ULL << 12;
inline constexpr std::uint64_t kMcrMaskFlow = 1ULL << 13;
inline constexpr std::uint64_t kMcrMaskHop = 1ULL << 14;
inline constexpr std::uint64_t kMcrMaskScope = 1ULL << 15;
inline constexpr std::uint64_t kMcrMaskJoinState = 1ULL << 16;
inline constexpr std::uint64_t kMcrMaskProxy = 1ULL << 17;
// What a join that may create the group must carry (OpenSM
// REQUIRED_MC_CREATE_COMP_MASK): MGID, PortGID, JoinState, Q_Key, TClass,
// P_Key, FlowLabel, SL. A join of an existing group needs the first three.
inline constexpr std::uint64_t kMcrMaskCreate = kMcrMaskMgid | kMcrMaskPortGid | kMcrMaskJoinState |
                                                kMcrMaskQkey | kMcrMaskTclass | kMcrMaskPkey |
                                                kMcrMaskFlow | kMcrMaskSl;

// JoinState bits (IBA 15.2.5.17): FullMember, NonMember, SendOnlyNonMember.
inline constexpr std::uint8_t kJoinFull = 0x1;
inline constexpr std::uint8_t kJoinNon = 0x2;
inline constexpr std::uint8_t kJoinSendOnly = 0x4;

// One member of a group as the SA keeps it: the group's parameters and this
// port's JoinState.
struct McMemberRecord {
  Gid mgid;                    // the group (an MGID is a GID: prefix ff..., then the rest)
  Gid port_gid;                // the member port
  std::uint32_t qkey = 0;
  std::uint16_t mlid = 0;      // assigned by the SA (0xc000..0xfffe)
  std::uint8_t mtu = 0;        // selector << 6 | MTU code
  std::uint8_t tclass = 0;
  std::uint16_t pkey = 0;
  std::uint8_t rate = 0;       // selector << 6 | rate code
  std::uint8_t pkt_life = 0;   // selector << 6 | lifetime
  std::uint32_t sl_flow_hop = 0;
  std::uint8_t scope_state = 0;  // Scope << 4 | JoinState
  friend bool operator==(const McMemberRecord&, const McMemberRecord&) = default;
};

// SubnAdmSet(MCMemberRecord): join `record.port_gid` to `record.mgid` with the
// JoinState in the low nibble of `scope_state`, and the group's parameters
// (Q_Key, TClass, P_Key, SL/FlowLabel/HopLimit) so the join may create the
// group (ComponentMask kMcrMaskCreate | Scope). MLID 0 asks the SA for one.
// Error kErrInvalid when the JoinState is 0 or the MGID's first byte is not 0xff.
Result<MadBytes> encode_mcmember_join(std::uint64_t tid, const McMemberRecord& record);
// SubnAdmDelete(MCMemberRecord): the leave of that port from that group with
// that JoinState (ComponentMask MGID, PortGID, JoinState).
Result<MadBytes> encode_mcmember_leave(std::uint64_t tid, const McMemberRecord& record);
// SubnAdmGet(MCMemberRecord) of port `port_gid` in group `mgid` (ComponentMask
// MGID and PortGID): one record when that port is a member; the SA answers
// status 0x0300 (no records) when it is not, or when there is no such group.
MadBytes encode_mcmember_get(std::uint64_t tid, const Gid& mgid, const Gid& port_gid);

// Decodes the SA's answer to a join or Get (`method` kMethodGetResp) or a
// leave (kMethodDeleteResp): base version 1, class 0x03 version 2, that
// method, attribute 0x0038, status 0 (else kErrMadStatus naming it),
// AttributeOffset 7, one record. Errors name the field and offset.
Result<McMemberRecord> decode_mcmember_response(std::span<const std::uint8_t> mad, std::uint8_t method);

// A decoded request (the simulated SA, fuzzing): method, ComponentMask, record.
struct McMemberRequest {
  std::uint8_t method = 0;
  std::uint64_t tid = 0;
  std::uint64_t component_mask = 0;
  McMemberRecord record;
};
Result<McMemberRequest> decode_mcmember_request(std::span<const std::uint8_t> mad);

// The answer an SA sends: `status` 0 with `record`, or a status and no record.
MadBytes encode_mcmember_response(std::uint64_t tid, std::uint8_t method, std::uint16_t status,
                                  const McMemberRecord* record);

// ---------------------------------------------------------------------------
// InformInfo (IBA 13.4.8.3 Table 123; OpenSM ib_inform_info_t) and
// InformInfoRecord (IBA 15.2.5.12 Table 193; ib_inform_info_record_t).

inline constexpr std::uint16_t kAttrInformInfo = 0x0003;
inline constexpr std::uint16_t kAttrInformInfoRecord = 0x00f3;

struct InformInfoWire {
  std::uint8_t gid[16];
  std::uint8_t lid_range_begin[2];
  std::uint8_t lid_range_end[2];
  std::uint8_t reserved1[2];
  std::uint8_t is_generic;
  std::uint8_t subscribe;
  std::uint8_t type[2];
  std::uint8_t trap_number[2];   // TrapNumber (generic) or DeviceID
  std::uint8_t qpn_resp_time[4]; // QPN (24 bits), reserved (3), RespTimeValue (5)
  std::uint8_t reserved2;
  std::uint8_t producer_type[3]; // ProducerType (generic) or VendorID
};
static_assert(sizeof(InformInfoWire) == 36);
static_assert(offsetof(InformInfoWire, is_generic) == 22);
static_assert(offsetof(InformInfoWire, trap_number) == 26);
static_assert(offsetof(InformInfoWire, qpn_resp_time) == 28);
static_assert(offsetof(InformInfoWire, producer_type) == 33);
inline constexpr std::size_t kInformInfoSize = sizeof(InformInfoWire);

struct InformInfoRecordWire {
  std::uint8_t subscriber_gid[16];
  std::uint8_t subscriber_enum[2];
  std::uint8_t reserved[6];
  InformInfoWire inform_info;
  std::uint8_t pad[4];
};
static_assert(sizeof(InformInfoRecordWire) == 64);
static_assert(offsetof(InformInfoRecordWire, inform_info) == 24);
inline constexpr std::size_t kInformInfoRecordSize = sizeof(InformInfoRecordWire);
inline constexpr std::uint16_t kInformInfoRecordOffsetWords = kInformInfoRecordSize / 8;  // 8
// InformInfoRecords that fit in one MAD (ibsim's whole answer).
inline constexpr std::size_t kInformInfoRecordsPerMad = kSaDataSize / kInformInfoRecordSize;  // 3

// InformInfoRecord ComponentMask (OpenSM IB_IIR_COMPMASK_*).
inline constexpr std::uint64_t kIirMaskSubscriberGid = 1ULL << 0;
inline constexpr std::uint64_t kIirMaskEnum = 1ULL << 1;

// Trap numbers a node subscribes to (IBA 14.2.5.1 Table 128): a port came
// into service (its GID is in service) and went out of it.
inline constexpr std::uint16_t kTrapGidInService = 64;
inline constexpr std::uint16_t kTrapGidOutOfService = 65;
// InformInfo Type "all" and ProducerType "subnet management" (IBA Table 123, 124).
inline constexpr std::uint16_t kInformTypeAll = 0xffff;
inline constexpr std::uint32_t kProducerSubnetManagement = 0x000004;

struct InformInfo {
  Gid gid;                       // a GID to report on; 0: use the LID range
  std::uint16_t lid_range_begin = 0xffff;  // 0xffff: every LID
  std::uint16_t lid_range_end = 0;
  bool is_generic = true;
  bool subscribe = true;
  std::uint16_t type = kInformTypeAll;
  std::uint16_t trap_number = 0;
  std::uint32_t qpn = 0;         // 24 bits; the SA fills in the requester's QP
  std::uint8_t resp_time = 0;    // 5 bits
  std::uint32_t producer_type = kProducerSubnetManagement;  // 24 bits
  friend bool operator==(const InformInfo&, const InformInfo&) = default;
};

struct InformInfoRecord {
  Gid subscriber_gid;
  std::uint16_t subscriber_enum = 0;
  InformInfo info;
  friend bool operator==(const InformInfoRecord&, const InformInfoRecord&) = default;
};

// SubnAdmSet(InformInfo): subscribe (or, with `subscribe` false,
// unsubscribe). Error kErrInvalid when qpn or producer_type do not fit 24
// bits or resp_time 5.
Result<MadBytes> encode_inform_info_set(std::uint64_t tid, const InformInfo& info);
// Decodes the SA's GetResp(InformInfo) to a Set: the subscription as the SA
// took it. Status non-zero: kErrMadStatus.
Result<InformInfo> decode_inform_info_response(std::span<const std::uint8_t> mad);

// SubnAdmGetTable(InformInfoRecord) of the subscriptions of `subscriber`
// (ComponentMask SubscriberGID): OpenSM keeps enum 0 for every subscription,
// so a port's subscriptions are found by GID alone.
MadBytes encode_inform_info_record_get_table(std::uint64_t tid, const Gid& subscriber);
// Decodes its GetTableResp: the whole records present (at most 3 in one MAD),
// `truncated` when a partial one follows. Status 0x0300 is an empty table, not
// an error (OpenSM answers no records that way).
struct InformInfoRecordTable {
  std::vector<InformInfoRecord> records;
  bool truncated = false;
  friend bool operator==(const InformInfoRecordTable&, const InformInfoRecordTable&) = default;
};
Result<InformInfoRecordTable> decode_inform_info_record_table(std::span<const std::uint8_t> mad);

// The SA's answers (tests, fuzz seeds).
MadBytes encode_inform_info_response(std::uint64_t tid, std::uint16_t status, const InformInfo& info);
MadBytes encode_inform_info_record_table_response(std::uint64_t tid, std::uint16_t status,
                                                  const std::vector<InformInfoRecord>& records);

}  // namespace smha::mad
