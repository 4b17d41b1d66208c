// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// A three-head configuration (head01 at 0x10 with peers head02 at 0x20, lid 7,
// and head03 at 0x30; sm_priority 15, 50 ms polls, 2 misses, preempt), loaded
// from YAML text named t.yaml so that errors carry positions.
#pragma once

#include <catch2/catch.hpp>

#include "smha/config/config.hpp"

namespace smha::test {

inline config::Config two_heads() {
  auto r = config::load_config_from_string(
      "node:\n  name: head01\n  port_guid: 0x10\n"
      "peers:\n  - name: head02\n    port_guid: 0x20\n    lid: 7\n  - name: head03\n    port_guid: 0x30\n"
      "sm_priority: 15\nfailover:\n  poll_interval_ms: 50\n  misses_before_takeover: 2\n  failback: preempt\n",
      "t.yaml");
  INFO(r.error_text());
  REQUIRE(r.ok());
  return r.value();
}

}  // namespace smha::test
