// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// The SMInfo attribute as a value (IBA 1.3 section 14.2.5.13). lib/mad encodes it
// on the wire; lib/sm reasons about it; nothing here touches bytes.
#pragma once

#include <cstdint>

#include "smha/core/types.hpp"

namespace smha {

struct SmInfo {
  Guid guid;                     // port GUID of the SM
  std::uint64_t sm_key = 0;      // SM_Key (OpenSM reveals it unless M_Key protection is on)
  std::uint32_t act_count = 0;   // ActCount; OpenSM sends its QP0 MADs-sent counter
  std::uint8_t priority = 0;     // 0..15
  SmState state = SmState::NotActive;
  friend bool operator==(const SmInfo&, const SmInfo&) = default;
};

}  // namespace smha
