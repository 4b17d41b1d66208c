// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include <catch2/catch.hpp>

#include <string>

#include "smha/core/text.hpp"

using smha::printable;

TEST_CASE("printable: plain text and valid UTF-8 pass unchanged", "[text]") {
  CHECK(printable("head01 HCA-1 mlx5_0") == "head01 HCA-1 mlx5_0");
  CHECK(printable("") == "");
  CHECK(printable("path C:\\x and \"quotes\"") == "path C:\\x and \"quotes\"");
  CHECK(printable("n\xc5\x93ud \xe2\x86\x92 \xf0\x9f\x96\xa5") == "n\xc5\x93ud \xe2\x86\x92 \xf0\x9f\x96\xa5");
}

TEST_CASE("printable: ANSI escapes and other controls are escaped", "[text]") {
  CHECK(printable("\x1b[2J\x1b[31mred") == "\\x1b[2J\\x1b[31mred");
  CHECK(printable("a\rb\nc\td\x7f") == "a\\x0db\\x0ac\\x09d\\x7f");
  CHECK(printable(std::string("nul\0x", 5)) == "nul\\x00x");
  // 8-bit CSI (U+009B) and a right-to-left override (U+202E) as UTF-8.
  CHECK(printable("\xc2\x9b" "31m") == "\\u009b31m");
  CHECK(printable("abc\xe2\x80\xaetxt") == "abc\\u202etxt");
}

TEST_CASE("printable: bytes that are not UTF-8 are escaped per byte", "[text]") {
  CHECK(printable("caf\xe9") == "caf\\xe9");                 // Latin-1
  CHECK(printable("\x80\xbf") == "\\x80\\xbf");              // stray continuation bytes
  CHECK(printable("\xe2\x82") == "\\xe2\\x82");              // truncated
  CHECK(printable("\xc0\xaf") == "\\xc0\\xaf");              // overlong '/'
  CHECK(printable("\xed\xa0\x80") == "\\xed\\xa0\\x80");     // surrogate
  CHECK(printable("\xf4\x90\x80\x80") == "\\xf4\\x90\\x80\\x80");  // > U+10FFFF
  CHECK(printable("\xff" "ok") == "\\xffok");
}
