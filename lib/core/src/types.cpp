// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/core/types.hpp"

#include <charconv>
#include <cstdio>

namespace smha {

std::string to_string(Guid guid) {
  char buf[19];
  std::snprintf(buf, sizeof buf, "0x%016llx", static_cast<unsigned long long>(guid.value));
  return buf;
}

std::optional<Guid> parse_guid(std::string_view text) {
  if (text.size() < 3 || text.size() > 18 || text[0] != '0' || (text[1] != 'x' && text[1] != 'X'))
    return std::nullopt;
  std::uint64_t v = 0;
  const char* first = text.data() + 2;
  const char* last = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(first, last, v, 16);
  if (ec != std::errc() || ptr != last) return std::nullopt;
  return Guid{v};
}

std::optional<DrPath> parse_dr_path(std::string_view text) {
  DrPath path;
  if (text.empty()) return std::nullopt;
  std::size_t pos = 0;
  bool first = true;
  while (pos <= text.size()) {
    std::size_t comma = text.find(',', pos);
    if (comma == std::string_view::npos) comma = text.size();
    std::string_view item = text.substr(pos, comma - pos);
    unsigned v = 0;
    auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), v, 10);
    if (item.empty() || ec != std::errc() || ptr != item.data() + item.size() || v > 255)
      return std::nullopt;
    // A leading 0 is the local port (ibnetdiscover's notation); port 0 is invalid elsewhere.
    if (first && v == 0) {
      first = false;
    } else {
      if (v == 0) return std::nullopt;
      path.hops.push_back(static_cast<std::uint8_t>(v));
      first = false;
    }
    pos = comma + 1;
  }
  if (path.hops.size() > kMaxDrHops) return std::nullopt;
  return path;
}

std::string to_string(const DrPath& path) {
  std::string out = "0";
  for (auto h : path.hops) out += "," + std::to_string(h);
  return out;
}

std::string_view to_string(SmState state) {
  switch (state) {
    case SmState::NotActive: return "NOTACTIVE";
    case SmState::Discovering: return "DISCOVERING";
    case SmState::Standby: return "STANDBY";
    case SmState::Master: return "MASTER";
  }
  return "unknown";
}

std::string_view to_string(SmInfoModifier mod) {
  switch (mod) {
    case SmInfoModifier::Handover: return "HANDOVER";
    case SmInfoModifier::Acknowledge: return "ACKNOWLEDGE";
    case SmInfoModifier::Disable: return "DISABLE";
    case SmInfoModifier::Standby: return "STANDBY";
    case SmInfoModifier::Discover: return "DISCOVER";
  }
  return "unknown";
}

}  // namespace smha
