// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// Identifiers and states shared by every module.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace smha {

// A 64-bit EUI-64 port or node GUID, kept in host order.
struct Guid {
  std::uint64_t value = 0;
  friend constexpr auto operator<=>(const Guid&, const Guid&) = default;
};

// Formats as OpenSM and infiniband-diags do: "0x" + 16 lower-case hex digits.
std::string to_string(Guid guid);
// Accepts "0x" + 1..16 hex digits (case-insensitive). Anything else: nullopt.
std::optional<Guid> parse_guid(std::string_view text);

// A 16-bit local identifier. 0 is reserved (no LID); 0xffff is the permissive LID.
struct Lid {
  std::uint16_t value = 0;
  friend constexpr auto operator<=>(const Lid&, const Lid&) = default;
};
inline constexpr Lid kPermissiveLid{0xffff};

// A directed-route initial path: out-ports, one per hop (IBA 14.2.2.3). An empty
// path addresses the local port itself (hop count 0). At most 63 hops.
struct DrPath {
  std::vector<std::uint8_t> hops;
  friend bool operator==(const DrPath&, const DrPath&) = default;
};
inline constexpr std::size_t kMaxDrHops = 63;
// Parses "0", "0,1,3" or "1,3" (a leading 0 names the local port, as ibnetdiscover
// prints paths). Returns nullopt on anything else or on more than kMaxDrHops hops.
std::optional<DrPath> parse_dr_path(std::string_view text);
std::string to_string(const DrPath& path);

// SMInfo SMState, IBA 1.3 section 14.2.5.13 (Table 152), as OpenSM's
// IB_SMINFO_STATE_* in include/iba/ib_types.h.
enum class SmState : std::uint8_t { NotActive = 0, Discovering = 1, Standby = 2, Master = 3 };

// "NOTACTIVE", "DISCOVERING", "STANDBY", "MASTER"; "unknown" for any other value.
std::string_view to_string(SmState state);

// SubnSet(SMInfo) attribute modifiers, IBA 14.4.1 (OpenSM IB_SMINFO_ATTR_MOD_*).
enum class SmInfoModifier : std::uint32_t {
  Handover = 1,
  Acknowledge = 2,
  Disable = 3,
  Standby = 4,
  Discover = 5,
};
std::string_view to_string(SmInfoModifier mod);

// OpenSM's election order (osm_sm_is_greater_than, IBA 14.4.1.2): higher priority
// wins; on equal priority the numerically lower port GUID wins. True if `a` outranks `b`.
constexpr bool outranks(std::uint8_t prio_a, Guid a, std::uint8_t prio_b, Guid b) {
  if (prio_a != prio_b) return prio_a > prio_b;
  return a.value < b.value;
}

}  // namespace smha
