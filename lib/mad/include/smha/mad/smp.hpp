// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// Subnet Management Packets (IBA 1.3 section 14.2.1), the SMInfo attribute
// (section 14.2.5.13), the PortInfo fields smha reads (section 14.2.5.6),
// NodeInfo (14.2.5.3) and NodeDescription (14.2.5.2) on the wire. Pure functions over bytes: no I/O, no state.
//
// Every multi-byte field is big-endian on the wire and is read and written one
// byte at a time here, so host byte order never matters. Decoders accept any
// byte sequence: malformed input gives an Error (code "parse", or "mad_status"
// for a well-formed answer carrying a non-zero status), never undefined behaviour.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "smha/core/result.hpp"
#include "smha/core/sminfo.hpp"
#include "smha/core/types.hpp"
#include "smha/mad/transport.hpp"

namespace smha::mad {

// "MADs are 256 bytes" (IBA 13.4.2); SMPs never use RMPP.
inline constexpr std::size_t kMadSize = 256;
using MadBytes = std::array<std::uint8_t, kMadSize>;

inline constexpr std::uint8_t kBaseVersion = 1;
inline constexpr std::uint8_t kSmpClassVersion = 1;
// Management classes (IBA Table 105; OpenSM IB_MCLASS_SUBN_LID / _DIR).
inline constexpr std::uint8_t kClassSubnLid = 0x01;
inline constexpr std::uint8_t kClassSubnDirected = 0x81;
// Methods (IBA Table 106). Bit 7 of the method byte is the R (response) bit.
inline constexpr std::uint8_t kMethodGet = 0x01;
inline constexpr std::uint8_t kMethodSet = 0x02;
inline constexpr std::uint8_t kMethodGetResp = 0x81;
// SMInfo attribute ID (IBA Table 145; OpenSM IB_MAD_ATTR_SM_INFO).
inline constexpr std::uint16_t kAttrSmInfo = 0x0020;
// PortInfo attribute ID (IBA Table 145; libibmad IB_ATTR_PORT_INFO).
inline constexpr std::uint16_t kAttrPortInfo = 0x0015;
// NodeDescription and NodeInfo attribute IDs (IBA Table 145; libibmad
// IB_ATTR_NODE_DESC, IB_ATTR_NODE_INFO).
inline constexpr std::uint16_t kAttrNodeDescription = 0x0010;
inline constexpr std::uint16_t kAttrNodeInfo = 0x0011;
// "Permissive LID" used as DrSLID/DrDLID while a DR SMP travels directed.
inline constexpr std::uint16_t kPermissiveDrLid = 0xffff;
// The D bit is bit 15 of the DR SMP's status word (IBA Figure 150).
inline constexpr std::uint16_t kDirectionBit = 0x8000;

// The SMP layout (IBA Figures 149 and 150), one byte array per field, so the
// compiler adds no padding and offsetof gives the wire offsets. Directed-route
// fields (hop pointer/count, DrSLID/DrDLID, paths) are reserved in LID-routed SMPs.
struct SmpWire {
  std::uint8_t base_version;
  std::uint8_t mgmt_class;
  std::uint8_t class_version;
  std::uint8_t method;           // R bit | method
  std::uint8_t status[2];        // DR: D bit | 15-bit status
  std::uint8_t hop_pointer;      // DR only
  std::uint8_t hop_count;        // DR only
  std::uint8_t tid[8];
  std::uint8_t attr_id[2];
  std::uint8_t reserved1[2];
  std::uint8_t attr_mod[4];
  std::uint8_t m_key[8];
  std::uint8_t dr_slid[2];       // DR only
  std::uint8_t dr_dlid[2];       // DR only
  std::uint8_t reserved2[28];
  std::uint8_t data[64];
  std::uint8_t initial_path[64]; // DR only; byte i is the out-port of hop i, byte 0 unused
  std::uint8_t return_path[64];  // DR only
};
static_assert(sizeof(SmpWire) == kMadSize);
static_assert(offsetof(SmpWire, status) == 4);
static_assert(offsetof(SmpWire, hop_pointer) == 6);
static_assert(offsetof(SmpWire, hop_count) == 7);
static_assert(offsetof(SmpWire, tid) == 8);
static_assert(offsetof(SmpWire, attr_id) == 16);
static_assert(offsetof(SmpWire, attr_mod) == 20);
static_assert(offsetof(SmpWire, m_key) == 24);
static_assert(offsetof(SmpWire, dr_slid) == 32);
static_assert(offsetof(SmpWire, dr_dlid) == 34);
static_assert(offsetof(SmpWire, data) == 64);           // libibmad IB_SMP_DATA_OFFS
static_assert(offsetof(SmpWire, initial_path) == 128);
static_assert(offsetof(SmpWire, return_path) == 192);

inline constexpr std::size_t kSmpDataOffset = offsetof(SmpWire, data);
inline constexpr std::size_t kSmpDataSize = sizeof(SmpWire::data);
inline constexpr std::size_t kDrPathSize = sizeof(SmpWire::initial_path);
// "Hop Count ... range 0 to 63" (IBA 14.2.2.1).
inline constexpr std::uint8_t kMaxHopCount = 63;

// The SMInfo attribute layout (IBA Table 152; libibmad IB_SMINFO_*_F).
struct SmInfoWire {
  std::uint8_t guid[8];
  std::uint8_t sm_key[8];
  std::uint8_t act_count[4];
  std::uint8_t priority_state;   // priority << 4 | SMState
  std::uint8_t reserved[43];
};
static_assert(sizeof(SmInfoWire) == kSmpDataSize);
static_assert(offsetof(SmInfoWire, sm_key) == 8);
static_assert(offsetof(SmInfoWire, act_count) == 16);
static_assert(offsetof(SmInfoWire, priority_state) == 20);

// The PortInfo attribute layout up to the fields smha reads (IBA 14.2.5.6;
// libibmad IB_PORT_*_F: Lid bits 128-143, SMLid 144-159, LocalPort 224-231,
// LinkSpeedSupported 256-259, LinkState 260-263, PhysLinkState 264-267,
// LinkWidthEnabled/Supported/Active 232-255, LinkSpeedActive 280-283,
// LinkSpeedEnabled 284-287, LinkSpeedExtActive 496-499, LinkSpeedExtSupported
// 500-503, LinkSpeedExtEnabled 507-511).
struct PortInfoWire {
  std::uint8_t m_key[8];
  std::uint8_t gid_prefix[8];
  std::uint8_t lid[2];
  std::uint8_t master_sm_lid[2];
  std::uint8_t capability_mask[4];
  std::uint8_t diag_code[2];
  std::uint8_t m_key_lease_period[2];
  std::uint8_t local_port_num;
  std::uint8_t link_width_enabled;
  std::uint8_t link_width_supported;
  std::uint8_t link_width_active;
  std::uint8_t speed_supported_state;  // LinkSpeedSupported << 4 | PortState
  std::uint8_t phys_state_down_default;  // PortPhysicalState << 4 | LinkDownDefaultState
  std::uint8_t mkey_lmc;                 // M_KeyProtectBits, LMC
  std::uint8_t speed_active_enabled;     // LinkSpeedActive << 4 | LinkSpeedEnabled
  std::uint8_t middle[24];
  std::uint8_t capability_mask2[2];
  std::uint8_t speed_ext_active_supported;  // LinkSpeedExtActive << 4 | LinkSpeedExtSupported
  std::uint8_t speed_ext_enabled;           // low 5 bits: LinkSpeedExtEnabled
};
static_assert(sizeof(PortInfoWire) == kSmpDataSize);
static_assert(offsetof(PortInfoWire, lid) == 16);
static_assert(offsetof(PortInfoWire, master_sm_lid) == 18);
static_assert(offsetof(PortInfoWire, local_port_num) == 28);
static_assert(offsetof(PortInfoWire, speed_supported_state) == 32);
static_assert(offsetof(PortInfoWire, speed_active_enabled) == 35);
static_assert(offsetof(PortInfoWire, speed_ext_active_supported) == 62);  // bits 496-503

// The NodeInfo attribute layout (IBA 14.2.5.3 Table 146; libibmad IB_NODE_*_F:
// BaseVers bits 0-7, ClassVers 8-15, NodeType 16-23, NumPorts 24-31,
// SystemGuid 32-95, Guid 96-159, PortGuid 160-223, PartCap 224-239,
// DevId 240-255, Revision 256-287, LocalPort 288-295, VendorId 296-319).
// 40 bytes; the rest of the 64-byte SMP data is reserved.
struct NodeInfoWire {
  std::uint8_t base_version;
  std::uint8_t class_version;
  std::uint8_t node_type;
  std::uint8_t num_ports;
  std::uint8_t system_image_guid[8];
  std::uint8_t node_guid[8];
  std::uint8_t port_guid[8];
  std::uint8_t partition_cap[2];
  std::uint8_t device_id[2];
  std::uint8_t revision[4];
  std::uint8_t local_port_num;
  std::uint8_t vendor_id[3];
  std::uint8_t reserved[24];
};
static_assert(sizeof(NodeInfoWire) == kSmpDataSize);
static_assert(offsetof(NodeInfoWire, system_image_guid) == 4);
static_assert(offsetof(NodeInfoWire, node_guid) == 12);
static_assert(offsetof(NodeInfoWire, port_guid) == 20);
static_assert(offsetof(NodeInfoWire, partition_cap) == 28);
static_assert(offsetof(NodeInfoWire, device_id) == 30);
static_assert(offsetof(NodeInfoWire, revision) == 32);
static_assert(offsetof(NodeInfoWire, local_port_num) == 36);
static_assert(offsetof(NodeInfoWire, vendor_id) == 37);

// NodeDescription is the whole 64-byte SMP data: "UTF-8 encoded string to
// describe node in text format", NUL-padded (IBA 14.2.5.2 Table 145).
inline constexpr std::size_t kNodeDescriptionSize = kSmpDataSize;

// A decoded SMP. For LID-routed SMPs the DR-only fields are zero on encode and
// ignored on decode.
struct Smp {
  std::uint8_t mgmt_class = kClassSubnLid;
  std::uint8_t method = kMethodGet;
  std::uint16_t status = 0;      // 15 bits for DR, 16 for LID-routed; D bit excluded
  bool direction = false;        // DR D bit: false outbound, true returning
  std::uint8_t hop_pointer = 0;
  std::uint8_t hop_count = 0;
  std::uint64_t tid = 0;
  std::uint16_t attr_id = 0;
  std::uint32_t attr_mod = 0;
  std::uint64_t m_key = 0;
  std::uint16_t dr_slid = 0;
  std::uint16_t dr_dlid = 0;
  std::array<std::uint8_t, kSmpDataSize> data{};
  std::array<std::uint8_t, kDrPathSize> initial_path{};
  std::array<std::uint8_t, kDrPathSize> return_path{};

  bool directed() const { return mgmt_class == kClassSubnDirected; }
  friend bool operator==(const Smp&, const Smp&) = default;
};

// Writes `smp` as 256 wire bytes. Reserved bytes are zero. Total: never fails
// (the caller's hop count is written as given; encode_sminfo_* validate paths).
MadBytes encode_smp(const Smp& smp);

// Parses and checks the SMP header of `mad`: exactly kMadSize bytes, base
// version 1, class 0x01 or 0x81, class version 1, and for DR a hop count <= 63
// and a hop pointer <= hop count + 1. Says what is wrong and at which offset.
Result<Smp> decode_smp(std::span<const std::uint8_t> mad);

// The 64-byte SMInfo attribute. Decoding rejects an SMState above 3 (IBA
// defines 0..3), naming the value; reserved bytes are not checked.
std::array<std::uint8_t, kSmpDataSize> encode_sminfo(const SmInfo& info);
Result<SmInfo> decode_sminfo(std::span<const std::uint8_t> data);

// SubnGet(SMInfo) to `target`: class 0x01 for a Lid (the LID itself goes into
// the umad address, not the MAD), class 0x81 with hop count = path length,
// hop pointer 0, D = 0, DrSLID = DrDLID = 0xffff and the initial path for a
// DrPath. The payload is zero. Fails with code kErrInvalid if a Lid is 0 or
// the permissive LID, or a path has more than 63 hops or a port 0 on a hop.
Result<MadBytes> encode_sminfo_get(std::uint64_t tid, const Target& target, std::uint64_t m_key);

// SubnSet(SMInfo) with attribute modifier `mod` and `payload`, addressed as in
// encode_sminfo_get.
Result<MadBytes> encode_sminfo_set(std::uint64_t tid, const Target& target, SmInfoModifier mod,
                                   const SmInfo& payload, std::uint64_t m_key);

// Decodes a GetResp(SMInfo): decode_smp plus method 0x81, attribute 0x0020,
// D bit set for DR, status 0 and a valid payload. A non-zero status gives code
// kErrMadStatus with the status in hex; everything else code "parse".
Result<SmInfo> decode_sminfo_response(std::span<const std::uint8_t> mad);

// The 64-byte PortInfo attribute, only the PortInfo fields (other bytes zero
// on encode, ignored on decode). Decoding rejects a PortState that is not
// 1..4 (0 is "no state change", only meaningful in a Set), naming the value.
std::array<std::uint8_t, kSmpDataSize> encode_portinfo(const PortInfo& info);
Result<PortInfo> decode_portinfo(std::span<const std::uint8_t> data);

// SubnGet(PortInfo) of port `port` (attribute modifier) of the node at
// `target`, addressed and validated as in encode_sminfo_get. Zero payload.
Result<MadBytes> encode_portinfo_get(std::uint64_t tid, const Target& target, std::uint8_t port,
                                     std::uint64_t m_key);

// Decodes a GetResp(PortInfo) as decode_sminfo_response does a GetResp(SMInfo)
// (attribute 0x0015 instead of 0x0020).
Result<PortInfo> decode_portinfo_response(std::span<const std::uint8_t> mad);

// The 64-byte NodeInfo attribute. Decoding rejects a NodeType other than
// 1..3, NumPorts 0 and a LocalPortNum above NumPorts, naming the field and its
// offset; reserved bytes are not checked.
std::array<std::uint8_t, kSmpDataSize> encode_nodeinfo(const NodeInfo& info);
Result<NodeInfo> decode_nodeinfo(std::span<const std::uint8_t> data);

// SubnGet(NodeInfo) of the node at `target`, addressed and validated as in
// encode_sminfo_get. Zero payload, attribute modifier 0.
Result<MadBytes> encode_nodeinfo_get(std::uint64_t tid, const Target& target, std::uint64_t m_key);

// Decodes a GetResp(NodeInfo) as decode_sminfo_response does a GetResp(SMInfo).
Result<NodeInfo> decode_nodeinfo_response(std::span<const std::uint8_t> mad);

// The 64-byte NodeDescription: `text` truncated to 64 bytes, NUL-padded.
// Decoding takes the bytes before the first NUL (all 64 if none); it never
// fails on content, only on a size other than 64.
std::array<std::uint8_t, kSmpDataSize> encode_node_description(std::string_view text);
Result<std::string> decode_node_description(std::span<const std::uint8_t> data);

// SubnGet(NodeDescription) of the node at `target`, as encode_nodeinfo_get.
Result<MadBytes> encode_node_description_get(std::uint64_t tid, const Target& target,
                                             std::uint64_t m_key);
Result<std::string> decode_node_description_response(std::span<const std::uint8_t> mad);

// Switch forwarding tables (IBA 14.2.5.4, 14.2.5.10, 14.2.5.11): what a
// takeover may rewrite. SwitchInfo (0x0012) gives LinearFDBTop, the highest
// LID the LFT holds; a LinearForwardingTable block (0x0019, modifier = block)
// is the out port of 64 LIDs, one byte each (block b covers LIDs 64b..64b+63,
// 255 = none); a MulticastForwardingTable block (0x001B, modifier = position
// << 28 | block) is the port mask of 32 MLIDs for 16 ports (position p covers
// ports 16p..16p+15; block b covers MLIDs 0xc000 + 32b ..).
inline constexpr std::uint16_t kAttrSwitchInfo = 0x0012;
inline constexpr std::uint16_t kAttrLinearForwardingTable = 0x0019;
inline constexpr std::uint16_t kAttrMulticastForwardingTable = 0x001b;
inline constexpr std::size_t kLftBlockSize = 64;
inline constexpr std::size_t kMftBlockSize = 32;
inline constexpr std::uint16_t kMulticastLidBase = 0xc000;
// The MFT has at most 16 positions (16 x 16 ports = 256) and 512 blocks
// (0xc000..0xffff).
inline constexpr std::uint8_t kMftMaxPosition = 15;
inline constexpr std::uint16_t kMftMaxBlock = 511;
// The largest LFT block: LIDs up to 0xbfff (the unicast range).
inline constexpr std::uint16_t kLftMaxBlock = 0xbfff / kLftBlockSize;

// SubnGet(SwitchInfo); its answer's LinearFDBTop (bytes 6-7).
Result<MadBytes> encode_switchinfo_get(std::uint64_t tid, const Target& target, std::uint64_t m_key);
Result<std::uint16_t> decode_switchinfo_lft_top(std::span<const std::uint8_t> mad);
// SubnGet(LinearForwardingTable) of `block` (0..kLftMaxBlock, else
// kErrInvalid); its answer's 64 port numbers.
Result<MadBytes> encode_lft_get(std::uint64_t tid, const Target& target, std::uint16_t block, std::uint64_t m_key);
Result<std::array<std::uint8_t, kLftBlockSize>> decode_lft_response(std::span<const std::uint8_t> mad);
// SubnGet(MulticastForwardingTable) of `block` (0..511) at `position`
// (0..15), else kErrInvalid; its answer's 32 port masks.
Result<MadBytes> encode_mft_get(std::uint64_t tid, const Target& target, std::uint16_t block,
                                std::uint8_t position, std::uint64_t m_key);
Result<std::array<std::uint16_t, kMftBlockSize>> decode_mft_response(std::span<const std::uint8_t> mad);

// The MAD status of a decoded SMP as text ("0x0007: invalid attribute or
// attribute modifier value", ...), for error messages and smctl.
std::string describe_mad_status(std::uint16_t status);
// The class-independent part (bits 0-4: busy, redirect, invalid field) as
// "busy; method not supported"; "" when none is set. describe_sa_status adds
// the SA's own codes to it.
std::string describe_mad_status_common(std::uint16_t status);

// Lower-case hex of `bytes`, 16 bytes per line with the offset first (logs, tests).
std::string hex_dump(std::span<const std::uint8_t> bytes);

// Error code for arguments the encoders refuse.
inline constexpr Errc kErrInvalid = Errc::Invalid;

}  // namespace smha::mad
