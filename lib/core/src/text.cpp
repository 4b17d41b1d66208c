// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/core/text.hpp"

#include <cstdint>
#include <cstdio>

namespace smha {

namespace {

void hex_byte(std::string& out, unsigned char b) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "\\x%02x", b);
  out += buf;
}

// Length of the valid UTF-8 sequence at `s` (2..4) and its code point, or 0.
std::size_t utf8_sequence(std::string_view s, char32_t& cp) {
  const auto b0 = static_cast<unsigned char>(s[0]);
  std::size_t len = 0;
  char32_t min = 0;
  if (b0 >= 0xc2 && b0 <= 0xdf) len = 2, cp = b0 & 0x1f, min = 0x80;
  else if (b0 >= 0xe0 && b0 <= 0xef) len = 3, cp = b0 & 0x0f, min = 0x800;
  else if (b0 >= 0xf0 && b0 <= 0xf4) len = 4, cp = b0 & 0x07, min = 0x10000;
  else return 0;
  if (s.size() < len) return 0;
  for (std::size_t i = 1; i < len; ++i) {
    const auto b = static_cast<unsigned char>(s[i]);
    if ((b & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (b & 0x3f);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return len;
}

std::string escape(std::string_view text, bool escape_backslash) {
  std::string out;
  out.reserve(text.size());
  std::size_t i = 0;
  while (i < text.size()) {
    const auto b = static_cast<unsigned char>(text[i]);
    if (b == '\\' && escape_backslash) {
      out += "\\\\";
      ++i;
      continue;
    }
    if (b >= 0x20 && b < 0x7f) {
      out += static_cast<char>(b);
      ++i;
      continue;
    }
    if (b < 0x80) {  // C0 control or DEL
      hex_byte(out, b);
      ++i;
      continue;
    }
    char32_t cp = 0;
    const std::size_t len = utf8_sequence(text.substr(i), cp);
    if (len == 0) {
      hex_byte(out, b);
      ++i;
      continue;
    }
    if (invisible_code_point(cp)) {
      char buf[12];
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(cp));
      out += buf;
    } else {
      out.append(text.substr(i, len));
    }
    i += len;
  }
  return out;
}

}  // namespace

bool invisible_code_point(char32_t cp) {
  return (cp >= 0x80 && cp <= 0x9f) || (cp >= 0x200b && cp <= 0x200f) || cp == 0x2028 || cp == 0x2029 ||
         (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2060 && cp <= 0x2064) || (cp >= 0x2066 && cp <= 0x2069) ||
         cp == 0xfeff;
}

std::string printable(std::string_view text) { return escape(text, true); }

std::string terminal_safe(std::string_view text) { return escape(text, false); }

std::string hex_string(std::span<const std::uint8_t> bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (auto b : bytes) {
    out += kDigits[b >> 4];
    out += kDigits[b & 0xf];
  }
  return out;
}

}  // namespace smha
