// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// SmView: what this head can say of an SM, typed, and the text status shows
// for it (status.peers[].state, systemd's STATUS=, smctl).
#include <catch2/catch.hpp>

#include "smha/head/head_status.hpp"

using namespace smha;
using namespace smha::head;

TEST_CASE("SmView: the state status shows, from what was seen", "[head][status]") {
  SmView v;
  CHECK(v.seen == SmSeen::Unknown);
  CHECK(v.shown() == "unknown");
  CHECK_FALSE(v.state());
  v.answer = SmView::Answer{SmState::Standby, 12};
  CHECK(v.shown() == "unknown");  // an answer not shown (the engine's state unknown) is no live state
  CHECK_FALSE(v.state());
  v.seen = SmSeen::Answered;
  CHECK(v.shown() == "STANDBY");
  CHECK(v.state() == SmState::Standby);
  v.seen = SmSeen::Unreachable;
  CHECK(v.shown() == "unreachable");
  CHECK_FALSE(v.state());
  CHECK_FALSE(v.live_standby());
  v.seen = SmSeen::Resolving;
  CHECK(v.shown() == "resolving");
  v.seen = SmSeen::Unaddressed;
  CHECK(v.shown() == "unaddressed");
  v.seen = SmSeen::NotFound;
  v.searched = "searched 12 nodes, 40 ports";
  CHECK(v.shown() == "not found (searched 12 nodes, 40 ports)");
  CHECK(to_json(v)["state"] == "not found (searched 12 nodes, 40 ports)");
}
