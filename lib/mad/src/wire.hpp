// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// Byte helpers the MAD codecs share (smp.cpp, sa.cpp, service_record.cpp):
// big-endian field access, hex text for error messages, the decode error.
// Internal to lib/mad.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <span>
#include <string>

#include "smha/core/result.hpp"
#include "smha/mad/sa.hpp"
#include "smha/mad/transport.hpp"

namespace smha::mad::wire {

// Big-endian field of `n` bytes at `off`; callers have checked the span's size.
inline std::uint64_t get_be(std::span<const std::uint8_t> b, std::size_t off, std::size_t n) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < n; ++i) v = (v << 8) | b[off + i];
  return v;
}

inline void put_be(std::span<std::uint8_t> b, std::size_t off, std::size_t n, std::uint64_t v) {
  for (std::size_t i = 0; i < n; ++i) b[off + n - 1 - i] = static_cast<std::uint8_t>(v >> (8 * i));
}

// "0x" and `digits` lower-case hex digits (at least).
inline std::string hex(std::uint64_t v, int digits) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%0*llx", digits, static_cast<unsigned long long>(v));
  return buf;
}

inline Error decode_error(std::string what) { return make_error(Errc::Parse, std::move(what)); }

// The common MAD header and SA header fields every SA codec reads and writes
// (SaHeaderWire, sa.hpp).
inline constexpr std::size_t kOffBaseVersion = offsetof(SaHeaderWire, base_version);
inline constexpr std::size_t kOffClass = offsetof(SaHeaderWire, mgmt_class);
inline constexpr std::size_t kOffClassVersion = offsetof(SaHeaderWire, class_version);
inline constexpr std::size_t kOffMethod = offsetof(SaHeaderWire, method);
inline constexpr std::size_t kOffStatus = offsetof(SaHeaderWire, status);
inline constexpr std::size_t kOffTid = offsetof(SaHeaderWire, tid);
inline constexpr std::size_t kOffAttrId = offsetof(SaHeaderWire, attr_id);
inline constexpr std::size_t kOffAttrOffset = offsetof(SaHeaderWire, attribute_offset);
inline constexpr std::size_t kOffCompMask = offsetof(SaHeaderWire, component_mask);

// The common MAD header of an SA MAD (class 0x03 version 2) and its
// ComponentMask; the rest of `b` is left as it is (zero in a fresh MadBytes).
inline void put_sa_header(std::span<std::uint8_t> b, std::uint8_t method, std::uint64_t tid, std::uint16_t attr,
                          std::uint64_t mask) {
  b[kOffBaseVersion] = kBaseVersion;
  b[kOffClass] = kClassSubnAdm;
  b[kOffClassVersion] = kSaClassVersion;
  b[kOffMethod] = method;
  put_be(b, kOffTid, 8, tid);
  put_be(b, kOffAttrId, 2, attr);
  put_be(b, kOffCompMask, 8, mask);
}

// The checks every SA MAD a codec reads gets: at least the SA header and at
// most one MAD, base version 1, class 0x03 version 2, attribute `attr`
// (`what` names it in messages, with the offset of the field).
inline Status check_sa_header(std::span<const std::uint8_t> mad, std::uint16_t attr, const char* what) {
  if (mad.size() < kSaHeaderSize)
    return decode_error(std::string(what) + " MAD is " + std::to_string(mad.size()) +
                        " bytes; the SA header alone is 56");
  if (mad.size() > kMadSize)
    return decode_error(std::string(what) + " MAD is " + std::to_string(mad.size()) + " bytes; one MAD is 256");
  if (mad[kOffBaseVersion] != kBaseVersion)
    return decode_error("base version " + std::to_string(mad[kOffBaseVersion]) + " at offset 0; expected 1");
  if (mad[kOffClass] != kClassSubnAdm)
    return decode_error("management class " + hex(mad[kOffClass], 2) + " at offset 1 is not SubnAdm (0x03)");
  if (mad[kOffClassVersion] != kSaClassVersion)
    return decode_error("class version " + std::to_string(mad[kOffClassVersion]) + " at offset 2; expected 2");
  const auto got = static_cast<std::uint16_t>(get_be(mad, kOffAttrId, 2));
  if (got != attr)
    return decode_error("attribute " + hex(got, 4) + " at offset 16 is not " + what + " (" + hex(attr, 4) + ")");
  return Status::Ok();
}

}  // namespace smha::mad::wire
