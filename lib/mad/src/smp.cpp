// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/mad/smp.hpp"

#include <algorithm>
#include <cstdio>
#include <string>

#include "wire.hpp"

namespace smha::mad {
namespace {

using wire::decode_error;
using wire::get_be;
using wire::hex;
using wire::put_be;

constexpr std::size_t kOffBaseVersion = offsetof(SmpWire, base_version);
constexpr std::size_t kOffClass = offsetof(SmpWire, mgmt_class);
constexpr std::size_t kOffClassVersion = offsetof(SmpWire, class_version);
constexpr std::size_t kOffMethod = offsetof(SmpWire, method);
constexpr std::size_t kOffStatus = offsetof(SmpWire, status);
constexpr std::size_t kOffHopPointer = offsetof(SmpWire, hop_pointer);
constexpr std::size_t kOffHopCount = offsetof(SmpWire, hop_count);
constexpr std::size_t kOffTid = offsetof(SmpWire, tid);
constexpr std::size_t kOffAttrId = offsetof(SmpWire, attr_id);
constexpr std::size_t kOffAttrMod = offsetof(SmpWire, attr_mod);
constexpr std::size_t kOffMKey = offsetof(SmpWire, m_key);
constexpr std::size_t kOffDrSlid = offsetof(SmpWire, dr_slid);
constexpr std::size_t kOffDrDlid = offsetof(SmpWire, dr_dlid);
constexpr std::size_t kOffInitialPath = offsetof(SmpWire, initial_path);
constexpr std::size_t kOffReturnPath = offsetof(SmpWire, return_path);

constexpr std::size_t kOffGuid = offsetof(SmInfoWire, guid);
constexpr std::size_t kOffSmKey = offsetof(SmInfoWire, sm_key);
constexpr std::size_t kOffActCount = offsetof(SmInfoWire, act_count);
constexpr std::size_t kOffPriState = offsetof(SmInfoWire, priority_state);

constexpr std::size_t kOffPiLid = offsetof(PortInfoWire, lid);
constexpr std::size_t kOffPiSmLid = offsetof(PortInfoWire, master_sm_lid);
constexpr std::size_t kOffPiCapMask = offsetof(PortInfoWire, capability_mask);
constexpr std::size_t kOffPiLocalPort = offsetof(PortInfoWire, local_port_num);
constexpr std::size_t kOffPiState = offsetof(PortInfoWire, speed_supported_state);
constexpr std::size_t kOffPiWidthEnabled = offsetof(PortInfoWire, link_width_enabled);
constexpr std::size_t kOffPiWidthSupported = offsetof(PortInfoWire, link_width_supported);
constexpr std::size_t kOffPiWidthActive = offsetof(PortInfoWire, link_width_active);
constexpr std::size_t kOffPiPhys = offsetof(PortInfoWire, phys_state_down_default);
constexpr std::size_t kOffPiSpeed = offsetof(PortInfoWire, speed_active_enabled);
constexpr std::size_t kOffPiSpeedExt = offsetof(PortInfoWire, speed_ext_active_supported);
constexpr std::size_t kOffPiSpeedExtEnabled = offsetof(PortInfoWire, speed_ext_enabled);

constexpr std::size_t kOffNiBase = offsetof(NodeInfoWire, base_version);
constexpr std::size_t kOffNiClass = offsetof(NodeInfoWire, class_version);
constexpr std::size_t kOffNiType = offsetof(NodeInfoWire, node_type);
constexpr std::size_t kOffNiPorts = offsetof(NodeInfoWire, num_ports);
constexpr std::size_t kOffNiSysGuid = offsetof(NodeInfoWire, system_image_guid);
constexpr std::size_t kOffNiGuid = offsetof(NodeInfoWire, node_guid);
constexpr std::size_t kOffNiPortGuid = offsetof(NodeInfoWire, port_guid);
constexpr std::size_t kOffNiPartCap = offsetof(NodeInfoWire, partition_cap);
constexpr std::size_t kOffNiDevId = offsetof(NodeInfoWire, device_id);
constexpr std::size_t kOffNiRev = offsetof(NodeInfoWire, revision);
constexpr std::size_t kOffNiLocalPort = offsetof(NodeInfoWire, local_port_num);
constexpr std::size_t kOffNiVendor = offsetof(NodeInfoWire, vendor_id);

// Fills the addressing part of a request for `attr_id`. Validates the target.
Result<Smp> smp_request(std::uint8_t method, std::uint16_t attr_id, std::uint64_t tid,
                        const Target& target, std::uint64_t m_key) {
  Smp smp;
  smp.method = method;
  smp.tid = tid;
  smp.attr_id = attr_id;
  smp.m_key = m_key;
  if (const Lid* lid = std::get_if<Lid>(&target)) {
    if (lid->value == 0 || *lid == kPermissiveLid)
      return make_error(kErrInvalid, "LID " + std::to_string(lid->value) +
                                         " cannot address a LID-routed SMP (use 1..65534)");
    smp.mgmt_class = kClassSubnLid;
    return smp;
  }
  const DrPath& path = std::get<DrPath>(target);
  if (path.hops.size() > kMaxHopCount)
    return make_error(kErrInvalid, "directed route has " + std::to_string(path.hops.size()) +
                                       " hops; at most 63 are allowed");
  smp.mgmt_class = kClassSubnDirected;
  smp.hop_count = static_cast<std::uint8_t>(path.hops.size());
  smp.hop_pointer = 0;
  smp.dr_slid = kPermissiveDrLid;
  smp.dr_dlid = kPermissiveDrLid;
  for (std::size_t i = 0; i < path.hops.size(); ++i) {
    if (path.hops[i] == 0)
      return make_error(kErrInvalid,
                        "directed route hop " + std::to_string(i + 1) + " names port 0");
    smp.initial_path[i + 1] = path.hops[i];
  }
  return smp;
}

// decode_smp plus the checks every GetResp gets: method 0x81, attribute
// `attr_id`, D bit set for DR, status 0 (else code kErrMadStatus).
Result<Smp> decode_get_response(std::span<const std::uint8_t> mad, std::uint16_t attr_id,
                                const char* attr_name) {
  auto smp = decode_smp(mad);
  if (!smp) return smp.error();
  if (smp->method != kMethodGetResp)
    return decode_error("method " + hex(smp->method, 2) + " at offset 3 is not GetResp (0x81)");
  if (smp->attr_id != attr_id)
    return decode_error("attribute " + hex(smp->attr_id, 4) + " at offset 16 is not " +
                        attr_name + " (" + hex(attr_id, 4) + ")");
  if (smp->directed() && !smp->direction)
    return decode_error("directed-route GetResp without the D bit (offset 4, bit 15)");
  if (smp->status != 0)
    return mad_status_error(smp->status, "MAD status " + describe_mad_status(smp->status));
  return smp;
}

}  // namespace

std::string_view to_string(PortState state) {
  switch (state) {
    case PortState::Down: return "DOWN";
    case PortState::Init: return "INIT";
    case PortState::Armed: return "ARMED";
    case PortState::Active: return "ACTIVE";
    case PortState::Unknown: break;
  }
  return "unknown";
}

MadBytes encode_smp(const Smp& smp) {
  MadBytes b{};
  b[kOffBaseVersion] = kBaseVersion;
  b[kOffClass] = smp.mgmt_class;
  b[kOffClassVersion] = kSmpClassVersion;
  b[kOffMethod] = smp.method;
  std::uint16_t status = smp.status;
  if (smp.directed()) {
    status = static_cast<std::uint16_t>((status & ~kDirectionBit) | (smp.direction ? kDirectionBit : 0));
    b[kOffHopPointer] = smp.hop_pointer;
    b[kOffHopCount] = smp.hop_count;
    put_be(b, kOffDrSlid, 2, smp.dr_slid);
    put_be(b, kOffDrDlid, 2, smp.dr_dlid);
    std::copy(smp.initial_path.begin(), smp.initial_path.end(), b.begin() + kOffInitialPath);
    std::copy(smp.return_path.begin(), smp.return_path.end(), b.begin() + kOffReturnPath);
  }
  put_be(b, kOffStatus, 2, status);
  put_be(b, kOffTid, 8, smp.tid);
  put_be(b, kOffAttrId, 2, smp.attr_id);
  put_be(b, kOffAttrMod, 4, smp.attr_mod);
  put_be(b, kOffMKey, 8, smp.m_key);
  std::copy(smp.data.begin(), smp.data.end(), b.begin() + kSmpDataOffset);
  return b;
}

Result<Smp> decode_smp(std::span<const std::uint8_t> mad) {
  if (mad.size() != kMadSize)
    return decode_error("MAD is " + std::to_string(mad.size()) + " bytes; an SMP is exactly 256");
  if (mad[kOffBaseVersion] != kBaseVersion)
    return decode_error("base version " + std::to_string(mad[kOffBaseVersion]) +
                        " at offset 0; expected 1");
  Smp smp;
  smp.mgmt_class = mad[kOffClass];
  if (smp.mgmt_class != kClassSubnLid && smp.mgmt_class != kClassSubnDirected)
    return decode_error("management class " + hex(smp.mgmt_class, 2) +
                        " at offset 1 is not an SMP class (0x01 or 0x81)");
  if (mad[kOffClassVersion] != kSmpClassVersion)
    return decode_error("class version " + std::to_string(mad[kOffClassVersion]) +
                        " at offset 2; expected 1");
  smp.method = mad[kOffMethod];
  auto status = static_cast<std::uint16_t>(get_be(mad, kOffStatus, 2));
  smp.tid = get_be(mad, kOffTid, 8);
  smp.attr_id = static_cast<std::uint16_t>(get_be(mad, kOffAttrId, 2));
  smp.attr_mod = static_cast<std::uint32_t>(get_be(mad, kOffAttrMod, 4));
  smp.m_key = get_be(mad, kOffMKey, 8);
  std::copy_n(mad.begin() + kSmpDataOffset, kSmpDataSize, smp.data.begin());
  if (smp.directed()) {
    smp.direction = (status & kDirectionBit) != 0;
    smp.status = static_cast<std::uint16_t>(status & ~kDirectionBit);
    smp.hop_pointer = mad[kOffHopPointer];
    smp.hop_count = mad[kOffHopCount];
    if (smp.hop_count > kMaxHopCount)
      return decode_error("hop count " + std::to_string(smp.hop_count) +
                          " at offset 7 exceeds 63");
    if (smp.hop_pointer > smp.hop_count + 1)
      return decode_error("hop pointer " + std::to_string(smp.hop_pointer) +
                          " at offset 6 exceeds hop count + 1 (" +
                          std::to_string(smp.hop_count + 1) + ")");
    smp.dr_slid = static_cast<std::uint16_t>(get_be(mad, kOffDrSlid, 2));
    smp.dr_dlid = static_cast<std::uint16_t>(get_be(mad, kOffDrDlid, 2));
    std::copy_n(mad.begin() + kOffInitialPath, kDrPathSize, smp.initial_path.begin());
    std::copy_n(mad.begin() + kOffReturnPath, kDrPathSize, smp.return_path.begin());
  } else {
    smp.status = status;
  }
  return smp;
}

std::array<std::uint8_t, kSmpDataSize> encode_sminfo(const SmInfo& info) {
  std::array<std::uint8_t, kSmpDataSize> b{};
  put_be(b, kOffGuid, 8, info.guid.value);
  put_be(b, kOffSmKey, 8, info.sm_key);
  put_be(b, kOffActCount, 4, info.act_count);
  b[kOffPriState] = static_cast<std::uint8_t>(((info.priority & 0x0f) << 4) |
                                              (static_cast<std::uint8_t>(info.state) & 0x0f));
  return b;
}

Result<SmInfo> decode_sminfo(std::span<const std::uint8_t> data) {
  if (data.size() != kSmpDataSize)
    return decode_error("SMInfo attribute is " + std::to_string(data.size()) +
                        " bytes; expected 64");
  SmInfo info;
  info.guid = Guid{get_be(data, kOffGuid, 8)};
  info.sm_key = get_be(data, kOffSmKey, 8);
  info.act_count = static_cast<std::uint32_t>(get_be(data, kOffActCount, 4));
  std::uint8_t pri_state = data[kOffPriState];
  info.priority = static_cast<std::uint8_t>(pri_state >> 4);
  std::uint8_t state = pri_state & 0x0f;
  if (state > static_cast<std::uint8_t>(SmState::Master))
    return decode_error("SMInfo SMState " + std::to_string(state) + " at SMP data offset " +
                        std::to_string(kOffPriState) + " (low nibble) is not 0..3");
  info.state = static_cast<SmState>(state);
  return info;
}

std::array<std::uint8_t, kSmpDataSize> encode_portinfo(const PortInfo& info) {
  std::array<std::uint8_t, kSmpDataSize> b{};
  put_be(b, kOffPiLid, 2, info.lid.value);
  put_be(b, kOffPiSmLid, 2, info.sm_lid.value);
  put_be(b, kOffPiCapMask, 4, info.capability_mask);
  b[kOffPiLocalPort] = info.local_port;
  const LinkInfo& l = info.link;
  b[kOffPiState] = static_cast<std::uint8_t>((l.speed_supported & 0x0f) << 4 |
                                             (static_cast<std::uint8_t>(info.state) & 0x0f));
  b[kOffPiWidthEnabled] = l.width_enabled;
  b[kOffPiWidthSupported] = l.width_supported;
  b[kOffPiWidthActive] = l.width_active;
  b[kOffPiPhys] = static_cast<std::uint8_t>((l.phys_state & 0x0f) << 4);
  b[kOffPiSpeed] = static_cast<std::uint8_t>((l.speed_active & 0x0f) << 4 | (l.speed_enabled & 0x0f));
  b[kOffPiSpeedExt] = static_cast<std::uint8_t>((l.ext_active & 0x0f) << 4 | (l.ext_supported & 0x0f));
  b[kOffPiSpeedExtEnabled] = static_cast<std::uint8_t>(l.ext_enabled & 0x1f);
  return b;
}

Result<PortInfo> decode_portinfo(std::span<const std::uint8_t> data) {
  if (data.size() != kSmpDataSize)
    return decode_error("PortInfo attribute is " + std::to_string(data.size()) +
                        " bytes; expected 64");
  PortInfo info;
  info.lid = Lid{static_cast<std::uint16_t>(get_be(data, kOffPiLid, 2))};
  info.sm_lid = Lid{static_cast<std::uint16_t>(get_be(data, kOffPiSmLid, 2))};
  info.capability_mask = static_cast<std::uint32_t>(get_be(data, kOffPiCapMask, 4));
  info.local_port = data[kOffPiLocalPort];
  const std::uint8_t state = data[kOffPiState] & 0x0f;
  if (state < static_cast<std::uint8_t>(PortState::Down) ||
      state > static_cast<std::uint8_t>(PortState::Active))
    return decode_error("PortInfo PortState " + std::to_string(state) + " at SMP data offset " +
                        std::to_string(kOffPiState) + " (low nibble) is not 1..4");
  info.state = static_cast<PortState>(state);
  // The link's fields are taken as they are: what they mean (and whether an
  // answer makes sense) is fabric health's to judge (doc/health.md).
  LinkInfo& l = info.link;
  l.width_enabled = data[kOffPiWidthEnabled];
  l.width_supported = data[kOffPiWidthSupported];
  l.width_active = data[kOffPiWidthActive];
  l.speed_supported = static_cast<std::uint8_t>(data[kOffPiState] >> 4);
  l.phys_state = static_cast<std::uint8_t>(data[kOffPiPhys] >> 4);
  l.speed_active = static_cast<std::uint8_t>(data[kOffPiSpeed] >> 4);
  l.speed_enabled = static_cast<std::uint8_t>(data[kOffPiSpeed] & 0x0f);
  if (info.capability_mask & kCapExtendedSpeeds) {
    l.ext_active = static_cast<std::uint8_t>(data[kOffPiSpeedExt] >> 4);
    l.ext_supported = static_cast<std::uint8_t>(data[kOffPiSpeedExt] & 0x0f);
    l.ext_enabled = static_cast<std::uint8_t>(data[kOffPiSpeedExtEnabled] & 0x1f);
  }
  return info;
}

Result<MadBytes> encode_portinfo_get(std::uint64_t tid, const Target& target, std::uint8_t port,
                                     std::uint64_t m_key) {
  auto smp = smp_request(kMethodGet, kAttrPortInfo, tid, target, m_key);
  if (!smp) return smp.error();
  smp->attr_mod = port;
  return encode_smp(*smp);
}

Result<PortInfo> decode_portinfo_response(std::span<const std::uint8_t> mad) {
  auto smp = decode_get_response(mad, kAttrPortInfo, "PortInfo");
  if (!smp) return smp.error();
  return decode_portinfo(smp->data);
}

Result<MadBytes> encode_sminfo_get(std::uint64_t tid, const Target& target, std::uint64_t m_key) {
  auto smp = smp_request(kMethodGet, kAttrSmInfo, tid, target, m_key);
  if (!smp) return smp.error();
  return encode_smp(*smp);
}

Result<MadBytes> encode_sminfo_set(std::uint64_t tid, const Target& target, SmInfoModifier mod,
                                   const SmInfo& payload, std::uint64_t m_key) {
  auto smp = smp_request(kMethodSet, kAttrSmInfo, tid, target, m_key);
  if (!smp) return smp.error();
  smp->attr_mod = static_cast<std::uint32_t>(mod);
  smp->data = encode_sminfo(payload);
  return encode_smp(*smp);
}

Result<SmInfo> decode_sminfo_response(std::span<const std::uint8_t> mad) {
  auto smp = decode_get_response(mad, kAttrSmInfo, "SMInfo");
  if (!smp) return smp.error();
  return decode_sminfo(smp->data);
}

std::string_view to_string(NodeType type) {
  switch (type) {
    case NodeType::Ca: return "CA";
    case NodeType::Switch: return "switch";
    case NodeType::Router: return "router";
    case NodeType::Unknown: break;
  }
  return "unknown";
}

std::array<std::uint8_t, kSmpDataSize> encode_nodeinfo(const NodeInfo& info) {
  std::array<std::uint8_t, kSmpDataSize> b{};
  b[kOffNiBase] = info.base_version;
  b[kOffNiClass] = info.class_version;
  b[kOffNiType] = static_cast<std::uint8_t>(info.type);
  b[kOffNiPorts] = info.num_ports;
  put_be(b, kOffNiSysGuid, 8, info.system_image_guid.value);
  put_be(b, kOffNiGuid, 8, info.node_guid.value);
  put_be(b, kOffNiPortGuid, 8, info.port_guid.value);
  put_be(b, kOffNiPartCap, 2, info.partition_cap);
  put_be(b, kOffNiDevId, 2, info.device_id);
  put_be(b, kOffNiRev, 4, info.revision);
  b[kOffNiLocalPort] = info.local_port;
  put_be(b, kOffNiVendor, 3, info.vendor_id & 0xffffff);
  return b;
}

Result<NodeInfo> decode_nodeinfo(std::span<const std::uint8_t> data) {
  if (data.size() != kSmpDataSize)
    return decode_error("NodeInfo attribute is " + std::to_string(data.size()) +
                        " bytes; expected 64");
  NodeInfo info;
  info.base_version = data[kOffNiBase];
  info.class_version = data[kOffNiClass];
  const std::uint8_t type = data[kOffNiType];
  if (type < 1 || type > 3)
    return decode_error("NodeInfo NodeType " + std::to_string(type) + " at SMP data offset " +
                        std::to_string(kOffNiType) + " is not 1..3 (CA, switch, router)");
  info.type = static_cast<NodeType>(type);
  info.num_ports = data[kOffNiPorts];
  if (info.num_ports == 0)
    return decode_error("NodeInfo NumPorts 0 at SMP data offset " + std::to_string(kOffNiPorts));
  info.system_image_guid = Guid{get_be(data, kOffNiSysGuid, 8)};
  info.node_guid = Guid{get_be(data, kOffNiGuid, 8)};
  info.port_guid = Guid{get_be(data, kOffNiPortGuid, 8)};
  info.partition_cap = static_cast<std::uint16_t>(get_be(data, kOffNiPartCap, 2));
  info.device_id = static_cast<std::uint16_t>(get_be(data, kOffNiDevId, 2));
  info.revision = static_cast<std::uint32_t>(get_be(data, kOffNiRev, 4));
  info.local_port = data[kOffNiLocalPort];
  if (info.local_port > info.num_ports)
    return decode_error("NodeInfo LocalPortNum " + std::to_string(info.local_port) +
                        " at SMP data offset " + std::to_string(kOffNiLocalPort) +
                        " exceeds NumPorts " + std::to_string(info.num_ports));
  info.vendor_id = static_cast<std::uint32_t>(get_be(data, kOffNiVendor, 3));
  return info;
}

Result<MadBytes> encode_nodeinfo_get(std::uint64_t tid, const Target& target, std::uint64_t m_key) {
  auto smp = smp_request(kMethodGet, kAttrNodeInfo, tid, target, m_key);
  if (!smp) return smp.error();
  return encode_smp(*smp);
}

Result<NodeInfo> decode_nodeinfo_response(std::span<const std::uint8_t> mad) {
  auto smp = decode_get_response(mad, kAttrNodeInfo, "NodeInfo");
  if (!smp) return smp.error();
  return decode_nodeinfo(smp->data);
}

std::array<std::uint8_t, kSmpDataSize> encode_node_description(std::string_view text) {
  std::array<std::uint8_t, kSmpDataSize> b{};
  const std::size_t n = std::min(text.size(), kNodeDescriptionSize);
  for (std::size_t i = 0; i < n; ++i) b[i] = static_cast<std::uint8_t>(text[i]);
  return b;
}

Result<std::string> decode_node_description(std::span<const std::uint8_t> data) {
  if (data.size() != kNodeDescriptionSize)
    return decode_error("NodeDescription attribute is " + std::to_string(data.size()) +
                        " bytes; expected 64");
  std::string text;
  for (std::uint8_t c : data) {
    if (c == 0) break;
    text += static_cast<char>(c);
  }
  return text;
}

Result<MadBytes> encode_node_description_get(std::uint64_t tid, const Target& target,
                                             std::uint64_t m_key) {
  auto smp = smp_request(kMethodGet, kAttrNodeDescription, tid, target, m_key);
  if (!smp) return smp.error();
  return encode_smp(*smp);
}

Result<std::string> decode_node_description_response(std::span<const std::uint8_t> mad) {
  auto smp = decode_get_response(mad, kAttrNodeDescription, "NodeDescription");
  if (!smp) return smp.error();
  return decode_node_description(smp->data);
}

Result<MadBytes> encode_switchinfo_get(std::uint64_t tid, const Target& target, std::uint64_t m_key) {
  auto smp = smp_request(kMethodGet, kAttrSwitchInfo, tid, target, m_key);
  if (!smp) return smp.error();
  return encode_smp(*smp);
}

Result<std::uint16_t> decode_switchinfo_lft_top(std::span<const std::uint8_t> mad) {
  auto smp = decode_get_response(mad, kAttrSwitchInfo, "SwitchInfo");
  if (!smp) return smp.error();
  return static_cast<std::uint16_t>(get_be(smp->data, 6, 2));
}

Result<MadBytes> encode_lft_get(std::uint64_t tid, const Target& target, std::uint16_t block, std::uint64_t m_key) {
  if (block > kLftMaxBlock)
    return make_error(kErrInvalid, "LFT block " + std::to_string(block) + " is beyond the unicast LIDs (0.." +
                                       std::to_string(kLftMaxBlock) + ")");
  auto smp = smp_request(kMethodGet, kAttrLinearForwardingTable, tid, target, m_key);
  if (!smp) return smp.error();
  smp->attr_mod = block;
  return encode_smp(*smp);
}

Result<std::array<std::uint8_t, kLftBlockSize>> decode_lft_response(std::span<const std::uint8_t> mad) {
  auto smp = decode_get_response(mad, kAttrLinearForwardingTable, "LinearForwardingTable");
  if (!smp) return smp.error();
  std::array<std::uint8_t, kLftBlockSize> ports{};
  std::copy_n(smp->data.begin(), kLftBlockSize, ports.begin());
  return ports;
}

Result<MadBytes> encode_mft_get(std::uint64_t tid, const Target& target, std::uint16_t block,
                                std::uint8_t position, std::uint64_t m_key) {
  if (block > kMftMaxBlock)
    return make_error(kErrInvalid, "MFT block " + std::to_string(block) + " is beyond 0..511");
  if (position > kMftMaxPosition)
    return make_error(kErrInvalid, "MFT position " + std::to_string(position) + " is beyond 0..15");
  auto smp = smp_request(kMethodGet, kAttrMulticastForwardingTable, tid, target, m_key);
  if (!smp) return smp.error();
  smp->attr_mod = static_cast<std::uint32_t>(position) << 28 | block;
  return encode_smp(*smp);
}

Result<std::array<std::uint16_t, kMftBlockSize>> decode_mft_response(std::span<const std::uint8_t> mad) {
  auto smp = decode_get_response(mad, kAttrMulticastForwardingTable, "MulticastForwardingTable");
  if (!smp) return smp.error();
  std::array<std::uint16_t, kMftBlockSize> masks{};
  for (std::size_t i = 0; i < kMftBlockSize; ++i)
    masks[i] = static_cast<std::uint16_t>(get_be(smp->data, 2 * i, 2));
  return masks;
}

std::string describe_mad_status_common(std::uint16_t status) {
  // IBA Table 108 (MAD status field): bit 0 busy, bit 1 redirect, bits 2-4 the
  // invalid-field code; bits 8-15 are the class's own.
  std::string what;
  auto add = [&what](const char* s) { what += what.empty() ? s : std::string("; ") + s; };
  if (status & 0x0001) add("busy");
  if (status & 0x0002) add("redirect required");
  switch ((status >> 2) & 0x7) {
    case 0: break;
    case 1: add("bad base or class version"); break;
    case 2: add("method not supported"); break;
    case 3: add("method/attribute combination not supported"); break;
    case 7: add("invalid attribute or modifier value"); break;
    default: add("reserved invalid-field code"); break;
  }
  return what;
}

std::string describe_mad_status(std::uint16_t status) {
  // Bits 8-14 class specific: OpenSM's SMInfo rejections arrive as 0x0700 (a
  // host-order 7 it does not byte-swap).
  const std::string text = hex(status, 4);
  if (status == 0) return text + ": success";
  std::string what = describe_mad_status_common(status);
  if (status & 0x7f00)
    what += std::string(what.empty() ? "" : "; ") + "class-specific bits set (OpenSM's SMInfo rejection is 0x0700)";
  return text + ": " + what;
}

std::string hex_dump(std::span<const std::uint8_t> bytes) {
  std::string out;
  char buf[24];
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    if (i % 16 == 0) {
      if (i) out += '\n';
      std::snprintf(buf, sizeof buf, "%04zx:", i);
      out += buf;
    }
    std::snprintf(buf, sizeof buf, " %02x", bytes[i]);
    out += buf;
  }
  if (!bytes.empty()) out += '\n';
  return out;
}

}  // namespace smha::mad
