// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include <catch2/catch.hpp>

#include "smha/core/result.hpp"

using namespace smha;

static Result<int> half(int v) {
  if (v % 2) return make_error(Errc::InvalidArgument, std::to_string(v) + " is odd");
  return v / 2;
}

TEST_CASE("Result carries a value or an error", "[core]") {
  auto ok = half(8);
  REQUIRE(ok.ok());
  CHECK(*ok == 4);
  auto bad = half(3);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().code == Errc::InvalidArgument);
  CHECK(bad.error().message == "3 is odd");
  Status s = make_error(Errc::Failed, "y");
  CHECK_FALSE(s.ok());
  CHECK(Status::Ok().ok());
}
