// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// A link's rate as InfiniBand names it: lanes (1X 2X 4X 8X 12X) and a speed
// (SDR DDR QDR FDR EDR HDR NDR), for fabric health (doc/health.md) and the
// `health.expect_*` keys of smha.yaml.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <utility>

#include "smha/core/result.hpp"

namespace smha {

// Lanes (1, 2, 4, 8, 12) and a speed rank (1 SDR, 2 DDR, 3 QDR, 4 FDR, 5 EDR,
// 6 HDR, 7 NDR); 0: unknown (or, in an expectation, not checked).
struct LinkRate {
  int lanes = 0;
  int speed = 0;
  bool known() const { return lanes > 0 && speed > 0; }
  friend bool operator==(const LinkRate&, const LinkRate&) = default;
};

// PortInfo LinkWidth bits (IBA 14.2.5.6): 1 1X, 2 4X, 4 8X, 8 12X, 16 2X; the widest first.
inline constexpr std::array<std::pair<std::uint8_t, int>, 5> kLinkWidths{{{8, 12}, {4, 8}, {2, 4}, {16, 2}, {1, 1}}};
// LinkSpeed bits 1 SDR, 2 DDR, 4 QDR; LinkSpeedExt bits 1 FDR, 2 EDR, 4 HDR, 8 NDR. The fastest first.
inline constexpr std::array<std::pair<std::uint8_t, int>, 3> kLinkSpeeds{{{4, 3}, {2, 2}, {1, 1}}};
inline constexpr std::array<std::pair<std::uint8_t, int>, 4> kLinkExtSpeeds{{{8, 7}, {4, 6}, {2, 5}, {1, 4}}};
inline constexpr std::array<const char*, 8> kLinkSpeedNames{"?", "SDR", "DDR", "QDR", "FDR", "EDR", "HDR", "NDR"};

// "4X QDR", "1X SDR"; "?" for an unknown part ("4X ?").
std::string to_string(const LinkRate& r);
// Data rate in Gb/s: lanes times the lane rate (SDR 2.5 ... NDR 106.25 signalling); 0 if unknown.
double gbps(const LinkRate& r);
// Parses "4X", "QDR", "4X QDR" (case-insensitive; either part may be
// missing and is then 0). Fails naming the word it did not understand.
Result<LinkRate> parse_link_rate(const std::string& text);

}  // namespace smha
