// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include <catch2/catch.hpp>

#include <set>
#include <sstream>
#include <string_view>

#include <nlohmann/json.hpp>

#include "smha/core/result.hpp"

using namespace smha;

static Result<int> half(int v) {
  if (v % 2) return make_error(Errc::Invalid, std::to_string(v) + " is odd");
  return v / 2;
}

TEST_CASE("Result carries a value or an error", "[core]") {
  auto ok = half(8);
  REQUIRE(ok.ok());
  CHECK(*ok == 4);
  auto bad = half(3);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().code == Errc::Invalid);
  CHECK(bad.error().message == "3 is odd");
  Status s = make_error(Errc::Failed, "y");
  CHECK_FALSE(s.ok());
  CHECK(Status::Ok().ok());
}

TEST_CASE("error codes show as their tokens: text, streams and JSON", "[core]") {
  CHECK(to_string(Errc::NotFound) == "not_found");
  CHECK(to_string(Errc::MadStatus) == "mad_status");
  CHECK(to_string(Errc::FrameTooLarge) == "frame_too_large");
  CHECK(to_string(make_error(Errc::Timeout, "no answer after 3 attempts")) ==
        "timeout: no answer after 3 attempts");
  std::ostringstream out;
  out << Errc::Resources;
  CHECK(out.str() == "resources");
  // JSON takes the token, never the enum's number (helpers and replies write
  // `j["code"] = e.code`).
  nlohmann::json j;
  j["code"] = Errc::Timeout;
  CHECK(j.dump() == R"({"code":"timeout"})");
  // Every code has its own token.
  std::set<std::string_view> tokens;
  for (int c = 0; c <= static_cast<int>(kLastErrc); ++c) {
    auto t = to_string(static_cast<Errc>(c));
    INFO(c);
    CHECK(!t.empty());
    CHECK(tokens.insert(t).second);
  }
}
