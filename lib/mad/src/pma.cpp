// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/mad/pma.hpp"

#include <algorithm>
#include <string>

#include "wire.hpp"

namespace smha::mad {

namespace {

using namespace wire;

// PortCounters fields (IBA Table 247): byte offset in the attribute and size
// in bytes; the two 4-bit counters share byte 19 (LocalLinkIntegrity high
// nibble, ExcessiveBufferOverrun low).
constexpr std::size_t kOffPortSelect = 1;
constexpr std::size_t kOffCounterSelect = 2;
constexpr std::size_t kOffNibbles = 19;

struct Field {
  std::string_view name;
  std::string_view key;
  std::size_t offset;  // in the attribute
  std::size_t bytes;   // 0: a nibble of byte kOffNibbles
  std::uint32_t max;
};
constexpr std::array<Field, kErrorCounterCount> kFields{{
    {"SymbolErrorCounter", "symbol_errors", 4, 2, 0xffff},
    {"LinkErrorRecoveryCounter", "link_error_recovery", 6, 1, 0xff},
    {"LinkDownedCounter", "link_downed", 7, 1, 0xff},
    {"PortRcvErrors", "rcv_errors", 8, 2, 0xffff},
    {"LocalLinkIntegrityErrors", "local_link_integrity", kOffNibbles, 0, 0xf},
    {"ExcessiveBufferOverrunErrors", "excessive_buffer_overrun", kOffNibbles, 0, 0xf},
    {"PortXmitDiscards", "xmit_discards", 14, 2, 0xffff},
    {"VL15Dropped", "vl15_dropped", 22, 2, 0xffff},
}};

const Field& field(ErrorCounter c) { return kFields[static_cast<std::size_t>(c)]; }

void put_header(std::span<std::uint8_t> b, std::uint8_t method, std::uint64_t tid) {
  b[kOffBaseVersion] = kBaseVersion;
  b[kOffClass] = kClassPerfMgt;
  b[kOffClassVersion] = kPerfClassVersion;
  b[kOffMethod] = method;
  put_be(b, kOffTid, 8, tid);
  put_be(b, kOffAttrId, 2, kAttrPortCounters);
}

}  // namespace

std::string_view counter_name(ErrorCounter c) { return field(c).name; }
std::string_view counter_key(ErrorCounter c) { return field(c).key; }
std::uint32_t counter_max(ErrorCounter c) { return field(c).max; }

MadBytes encode_port_counters_get(std::uint64_t tid, std::uint8_t port) {
  MadBytes b{};
  put_header(b, kMethodGet, tid);
  b[kPerfDataOffset + kOffPortSelect] = port;
  put_be(b, kPerfDataOffset + kOffCounterSelect, 2, 0);
  return b;
}

MadBytes encode_port_counters_response(std::uint64_t tid, const PortCounters& counters, std::uint16_t status) {
  MadBytes b{};
  put_header(b, kMethodGetResp, tid);
  put_be(b, kOffStatus, 2, status);
  auto data = std::span<std::uint8_t>(b).subspan(kPerfDataOffset);
  data[kOffPortSelect] = counters.port_select;
  for (auto c : kErrorCounters) {
    const Field& f = field(c);
    const std::uint32_t v = std::min(at(counters.errors, c), f.max);
    if (f.bytes > 0)
      put_be(data, f.offset, f.bytes, v);
    else if (c == ErrorCounter::LocalLinkIntegrity)
      data[kOffNibbles] = static_cast<std::uint8_t>((data[kOffNibbles] & 0x0f) | (v << 4));
    else
      data[kOffNibbles] = static_cast<std::uint8_t>((data[kOffNibbles] & 0xf0) | v);
  }
  return b;
}

Result<PortCounters> decode_port_counters_response(std::span<const std::uint8_t> mad) {
  if (mad.size() < kPerfDataOffset + kPortCountersSize)
    return decode_error("PortCounters MAD is " + std::to_string(mad.size()) + " bytes; at least " +
                        std::to_string(kPerfDataOffset + kPortCountersSize) + " expected");
  if (mad.size() > kMadSize)
    return decode_error("PortCounters MAD is " + std::to_string(mad.size()) + " bytes; one MAD is 256");
  if (mad[kOffBaseVersion] != kBaseVersion)
    return decode_error("base version " + std::to_string(mad[kOffBaseVersion]) + " at offset 0; expected 1");
  if (mad[kOffClass] != kClassPerfMgt)
    return decode_error("management class " + hex(mad[kOffClass], 2) + " at offset 1 is not PerfMgt (0x04)");
  if (mad[kOffClassVersion] != kPerfClassVersion)
    return decode_error("class version " + std::to_string(mad[kOffClassVersion]) + " at offset 2; expected 1");
  if (mad[kOffMethod] != kMethodGetResp)
    return decode_error("method " + hex(mad[kOffMethod], 2) + " at offset 3 is not GetResp (0x81)");
  const auto attr = static_cast<std::uint16_t>(get_be(mad, kOffAttrId, 2));
  if (attr != kAttrPortCounters)
    return decode_error("attribute " + hex(attr, 4) + " at offset 16 is not PortCounters (0x0012)");
  const auto status = static_cast<std::uint16_t>(get_be(mad, kOffStatus, 2));
  if (status != 0) return mad_status_error(status, "PMA status " + hex(status, 4));
  auto data = mad.subspan(kPerfDataOffset);
  PortCounters pc;
  pc.port_select = data[kOffPortSelect];
  for (auto c : kErrorCounters) {
    const Field& f = field(c);
    std::uint32_t v;
    if (f.bytes > 0)
      v = static_cast<std::uint32_t>(get_be(data, f.offset, f.bytes));
    else if (c == ErrorCounter::LocalLinkIntegrity)
      v = data[kOffNibbles] >> 4;
    else
      v = data[kOffNibbles] & 0x0f;
    at(pc.errors, c) = v;
  }
  return pc;
}

}  // namespace smha::mad
