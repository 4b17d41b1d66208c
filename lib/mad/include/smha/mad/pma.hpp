// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// Performance Management MADs (IBA 1.3 chapter 16.1) on the wire: the one
// request smha sends, PerfMgtGet(PortCounters), and its GetResp. Pure
// functions over bytes, like smp.hpp and sa.hpp; fabric health reads the
// error counters with it (doc/health.md, "Error counters").
//
// A PerfMgt MAD (IBA 16.1.1, libibmad's IB_PC_* fields): the 24-byte common
// MAD header, 40 reserved bytes, then the attribute at offset 64. It travels
// LID-routed to QP1 with the GSI Q_Key; every port's PMA answers it (a
// switch's, at the switch's LID, for any of its ports; a CA's for the port it
// arrived on only).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "smha/core/result.hpp"
#include "smha/mad/smp.hpp"
#include "smha/mad/transport.hpp"

namespace smha::mad {

// Management class PerfMgt (IBA Table 105), class version 1.
inline constexpr std::uint8_t kClassPerfMgt = 0x04;
inline constexpr std::uint8_t kPerfClassVersion = 1;
// PortCounters (IBA 16.1.3.5, Table 247).
inline constexpr std::uint16_t kAttrPortCounters = 0x0012;
// Where a PerfMgt attribute starts in the MAD, and how much of PortCounters
// a decoder needs (up to PortXmitWait, offset 40).
inline constexpr std::size_t kPerfDataOffset = 64;
inline constexpr std::size_t kPortCountersSize = 44;

// PerfMgtGet(PortCounters) of port `port`, PortSelect = `port`, CounterSelect 0.
MadBytes encode_port_counters_get(std::uint64_t tid, std::uint8_t port);
// A GetResp(PortCounters) carrying `counters` (tests and the simulated fabric).
MadBytes encode_port_counters_response(std::uint64_t tid, const PortCounters& counters, std::uint16_t status = 0);
// Reads a GetResp(PortCounters): one MAD (at most 256 bytes, at least the
// attribute's 108), PerfMgt class version 1, GetResp, PortCounters. A non-zero
// status is kErrMadStatus; anything else wrong is Errc::Parse naming the
// field and its offset.
Result<PortCounters> decode_port_counters_response(std::span<const std::uint8_t> mad);

}  // namespace smha::mad
