// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// A head's SM as HeadStatus shows it, for tests: answering `state` at
// `priority`, or (state nullopt) not answering, shown as `shown`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "smha/head/head_status.hpp"

namespace smha::test {

inline head::SmView sm_view(const std::string& name, std::uint64_t guid, std::optional<SmState> state,
                               std::uint8_t priority = 0, const std::string& shown = "unknown") {
  head::SmView v;
  v.name = name;
  v.guid = Guid{guid};
  if (state) {
    v.answer = head::SmView::Answer{*state, priority};
    v.seen = head::SmSeen::Answered;
  } else {
    using head::SmSeen;
    v.seen = shown == "unreachable"   ? SmSeen::Unreachable
             : shown == "resolving"   ? SmSeen::Resolving
             : shown == "unaddressed" ? SmSeen::Unaddressed
             : shown.rfind("not found (", 0) == 0 ? SmSeen::NotFound
                                                 : SmSeen::Unknown;
    if (v.seen == SmSeen::NotFound) v.searched = shown.substr(11, shown.size() - 12);
  }
  return v;
}

}  // namespace smha::test
