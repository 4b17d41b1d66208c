// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// Text that came from outside smha's own config (the fabric: node descriptions,
// SM answers; OpenSM: its output and log lines in events and reasons) may carry
// any bytes. Before it reaches a terminal (smctl status/events text) or a
// Prometheus label it goes through printable(): the one escaping function.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace smha {

// Code points that valid UTF-8 may carry but that must not reach a terminal
// or a label as they are: C1 controls (U+0080..U+009F, e.g. the 8-bit CSI
// U+009B), and the invisible format characters that hide, reorder or break
// text: zero-width space/joiners and the LRM/RLM marks (U+200B..U+200F), the
// line and paragraph separators (U+2028, U+2029), the bidi embeddings and
// overrides (U+202A..U+202E), the word joiner and invisible operators
// (U+2060..U+2064), the bidi isolates (U+2066..U+2069) and the zero-width
// no-break space / BOM (U+FEFF).
bool invisible_code_point(char32_t cp);

// `text` with every valid, printable UTF-8 character kept as it is and the rest
// escaped, so the result is valid UTF-8 without control or invisible
// characters, and unambiguous: each escape stands for one input only.
//   - a backslash: "\\" (so a literal "\x1b" in the input comes back as
//     "\\x1b", never as the escape of an ESC);
//   - bytes that are not valid UTF-8 (stray continuation bytes, truncated or
//     overlong sequences, surrogates, > U+10FFFF): "\xNN" per byte;
//   - C0 controls (ESC of an ANSI sequence, CR, LF, TAB, ...) and DEL: "\xNN";
//   - invisible_code_point() characters: "\uXXXX".
// Plain ASCII text without backslashes comes back unchanged.
std::string printable(std::string_view text);

// printable() except that backslashes are kept: for showing text that
// printable() already escaped (smctl shows the daemon's fields through it, so
// the daemon's "\\" is not doubled again) while still escaping any control or
// invisible character, should one arrive unescaped. Idempotent.
std::string terminal_safe(std::string_view text);

// Lower-case hex of `bytes`, two digits each, nothing between (digests in JSON and files).
std::string hex_string(std::span<const std::uint8_t> bytes);

}  // namespace smha
