// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include <catch2/catch.hpp>

#include "smha/core/clock.hpp"
#include "smha/core/types.hpp"

using namespace smha;

TEST_CASE("GUIDs print like OpenSM and parse back", "[core]") {
  CHECK(to_string(Guid{0x100001}) == "0x0000000000100001");
  CHECK(parse_guid("0x0000000000100001") == Guid{0x100001});
  CHECK(parse_guid("0XABCdef") == Guid{0xabcdef});
  CHECK_FALSE(parse_guid("100001").has_value());
  CHECK_FALSE(parse_guid("0x").has_value());
  CHECK_FALSE(parse_guid("0x12345678901234567").has_value());
  CHECK_FALSE(parse_guid("0x12g4").has_value());
  CHECK_FALSE(parse_guid("0x-1").has_value());
}

TEST_CASE("Directed-route paths parse as ibnetdiscover prints them", "[core]") {
  CHECK(parse_dr_path("0")->hops.empty());
  CHECK(parse_dr_path("0,1,3")->hops == std::vector<std::uint8_t>{1, 3});
  CHECK(parse_dr_path("1,3")->hops == std::vector<std::uint8_t>{1, 3});
  CHECK(to_string(*parse_dr_path("0,1,3")) == "0,1,3");
  CHECK_FALSE(parse_dr_path("").has_value());
  CHECK_FALSE(parse_dr_path("0,,1").has_value());
  CHECK_FALSE(parse_dr_path("0,256").has_value());
  CHECK_FALSE(parse_dr_path("0,1,0").has_value());
  CHECK_FALSE(parse_dr_path("a").has_value());
  std::string long_path = "0";
  for (int i = 0; i < 64; ++i) long_path += ",1";
  CHECK_FALSE(parse_dr_path(long_path).has_value());
}

TEST_CASE("SmState names match sminfo.c and reject out-of-range values", "[core]") {
  CHECK(to_string(SmState::NotActive) == "NOTACTIVE");
  CHECK(to_string(SmState::Master) == "MASTER");
  CHECK(to_string(static_cast<SmState>(7)) == "unknown");
  CHECK(to_string(SmInfoModifier::Discover) == "DISCOVER");
  CHECK(to_string(static_cast<SmInfoModifier>(9)) == "unknown");
}

TEST_CASE("Election order is priority, then lower GUID", "[core]") {
  CHECK(outranks(15, Guid{9}, 1, Guid{1}));
  CHECK_FALSE(outranks(1, Guid{1}, 15, Guid{9}));
  CHECK(outranks(5, Guid{1}, 5, Guid{2}));
  CHECK_FALSE(outranks(5, Guid{2}, 5, Guid{1}));
  CHECK_FALSE(outranks(5, Guid{2}, 5, Guid{2}));
}

TEST_CASE("ManualClock moves only when told", "[core]") {
  ManualClock clock;
  auto t0 = clock.now();
  clock.advance(std::chrono::milliseconds(250));
  CHECK(to_ms(clock.now() - t0) == Approx(250.0));
  SteadyClock steady;
  auto a = steady.now();
  CHECK(steady.now() >= a);
}
