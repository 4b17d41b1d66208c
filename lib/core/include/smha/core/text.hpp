// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// Text that came from outside smha's own config (the fabric: node descriptions,
// SM answers; OpenSM: its output and log lines in events and reasons) may carry
// any bytes. Before it reaches a terminal (smctl status/events text) or a
// Prometheus label it goes through printable(): the one escaping function.
#pragma once

#include <string>
#include <string_view>

namespace smha {

// `text` with every valid, printable UTF-8 character kept as it is and the rest
// escaped, so the result is valid UTF-8 without control characters:
//   - bytes that are not valid UTF-8 (stray continuation bytes, truncated or
//     overlong sequences, surrogates, > U+10FFFF): "\xNN" per byte;
//   - C0 controls (ESC of an ANSI sequence, CR, LF, TAB, ...) and DEL: "\xNN";
//   - C1 controls (U+0080..U+009F, e.g. the 8-bit CSI U+009B) and the bidi
//     overrides/isolates (U+202A..U+202E, U+2066..U+2069): "\uXXXX".
// Backslashes are kept. Plain ASCII text comes back unchanged.
std::string printable(std::string_view text);

}  // namespace smha
