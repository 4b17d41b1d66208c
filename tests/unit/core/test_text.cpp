// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include <catch2/catch.hpp>

#include <string>

#include "smha/core/text.hpp"

using smha::printable;
using smha::terminal_safe;

TEST_CASE("printable: plain text and valid UTF-8 pass unchanged", "[text]") {
  CHECK(printable("head01 HCA-1 mlx5_0") == "head01 HCA-1 mlx5_0");
  CHECK(printable("") == "");
  CHECK(printable("\"quotes\" and 'single'") == "\"quotes\" and 'single'");
  CHECK(printable("n\xc5\x93ud \xe2\x86\x92 \xf0\x9f\x96\xa5") == "n\xc5\x93ud \xe2\x86\x92 \xf0\x9f\x96\xa5");
}

TEST_CASE("printable: ANSI escapes and other controls are escaped", "[text]") {
  CHECK(printable("\x1b[2J\x1b[31mred") == "\\x1b[2J\\x1b[31mred");
  CHECK(printable("a\rb\nc\td\x7f") == "a\\x0db\\x0ac\\x09d\\x7f");
  CHECK(printable(std::string("nul\0x", 5)) == "nul\\x00x");
  // 8-bit CSI (U+009B) and a right-to-left override (U+202E) as UTF-8.
  CHECK(printable("\xc2\x9b" "31m") == "\\u009b31m");
  CHECK(printable("abc\xe2\x80\xaetxt") == "abc\\u202etxt");
  CHECK(printable("\xe2\x81\xa7" "isolate\xe2\x81\xa9") == "\\u2067isolate\\u2069");
}

TEST_CASE("printable: zero-width, separator and other invisible format characters are escaped", "[text]") {
  // U+200B zero-width space, U+2028 line and U+2029 paragraph separator.
  CHECK(printable("node\xe2\x80\x8b" "07") == "node\\u200b07");
  CHECK(printable("a\xe2\x80\xa8" "b\xe2\x80\xa9" "c") == "a\\u2028b\\u2029c");
  // ZWNJ, ZWJ, LRM, RLM; word joiner .. invisible plus; BOM.
  CHECK(printable("\xe2\x80\x8c\xe2\x80\x8d\xe2\x80\x8e\xe2\x80\x8f") == "\\u200c\\u200d\\u200e\\u200f");
  CHECK(printable("\xe2\x81\xa0\xe2\x81\xa4") == "\\u2060\\u2064");
  CHECK(printable("\xef\xbb\xbfhead") == "\\ufeffhead");
  // Their neighbours are ordinary text: U+200A hair space, U+2027, U+2030, U+2065, U+FEFE.
  for (const char* kept : {"\xe2\x80\x8a", "\xe2\x80\xa7", "\xe2\x80\xb0", "\xe2\x81\xa5", "\xef\xbb\xbe"})
    CHECK(printable(kept) == kept);
  for (char32_t cp : {0x200bu, 0x200fu, 0x2028u, 0x2029u, 0x202au, 0x202eu, 0x2060u, 0x2064u, 0x2066u, 0x2069u,
                      0xfeffu, 0x80u, 0x9fu})
    CHECK(smha::invisible_code_point(cp));
  for (char32_t cp : {0x200au, 0x2010u, 0x2027u, 0x202fu, 0x2065u, 0x206au, 0xfefeu, 0xa0u, 0x41u})
    CHECK_FALSE(smha::invisible_code_point(cp));
}

TEST_CASE("printable: escapes are unambiguous, a literal backslash is doubled", "[text]") {
  // A NodeDescription holding the four characters \x1b is not an escaped ESC.
  CHECK(printable("evil\\x1b[2J") == "evil\\\\x1b[2J");
  CHECK(printable("evil\x1b[2J") == "evil\\x1b[2J");
  CHECK(printable("evil\\x1b[2J") != printable("evil\x1b[2J"));
  CHECK(printable("C:\\path\\u202e") == "C:\\\\path\\\\u202e");
  CHECK(printable("\\") == "\\\\");
}

TEST_CASE("terminal_safe: printable() without doubling backslashes, idempotent", "[text]") {
  const std::string once = printable("n\\x41 \x1b[2J \xe2\x80\x8b \xff");
  CHECK(terminal_safe(once) == once);
  CHECK(terminal_safe(terminal_safe(once)) == once);
  // Whatever arrives unescaped is still escaped.
  CHECK(terminal_safe("a\x1b[31m\\b\xe2\x80\xa8") == "a\\x1b[31m\\b\\u2028");
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
