// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/core/link_rate.hpp"

#include <cctype>
#include <sstream>

#include "smha/core/text.hpp"

namespace smha {

namespace {
constexpr std::array<double, 8> kLaneGbps{0, 2.5, 5, 10, 14.0625, 25.78125, 53.125, 106.25};
}  // namespace

std::string to_string(const LinkRate& r) {
  const std::string lanes = r.lanes > 0 ? std::to_string(r.lanes) + "X" : "?";
  const int speed = r.speed >= 0 && r.speed < static_cast<int>(kLinkSpeedNames.size()) ? r.speed : 0;
  return lanes + " " + kLinkSpeedNames[static_cast<std::size_t>(speed)];
}

double gbps(const LinkRate& r) {
  if (!r.known() || r.speed >= static_cast<int>(kLaneGbps.size())) return 0;
  return r.lanes * kLaneGbps[static_cast<std::size_t>(r.speed)];
}

Result<LinkRate> parse_link_rate(const std::string& text) {
  LinkRate r;
  std::istringstream in(text);
  std::string word;
  bool any = false;
  while (in >> word) {
    any = true;
    std::string up;
    for (char c : word) up += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    bool matched = false;
    if (up.size() >= 2 && up.back() == 'X' && r.lanes == 0) {
      const std::string n = up.substr(0, up.size() - 1);
      for (const auto& [bit, lanes] : kLinkWidths)
        if (n == std::to_string(lanes)) r.lanes = lanes, matched = true;
    }
    for (std::size_t i = 1; i < kLinkSpeedNames.size() && !matched && r.speed == 0; ++i)
      if (up == kLinkSpeedNames[i]) r.speed = static_cast<int>(i), matched = true;
    if (!matched)
      return Error{Errc::Invalid, "'" + printable(word) +
                                      "' is not a link width (1X 2X 4X 8X 12X) or speed (SDR DDR QDR FDR EDR HDR NDR), "
                                      "each at most once"};
  }
  if (!any) return Error{Errc::Invalid, "empty: expected a width and/or a speed, e.g. \"4X NDR\""};
  return r;
}

}  // namespace smha
