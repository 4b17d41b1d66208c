// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// libFuzzer target: OpenSM's log lines as smhad reads them (the SM state
// lines, SUBNET UP and the routing lines of the takeover report, and their
// time stamps), one line per input line.
// Invariants checked: no crash/UB/leak; a kept text is at most 160 bytes; a
// state line names one of OpenSM's four states; a stamp is within a year.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "smha/opensm/log_follower.hpp"

using namespace smha::opensm;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  constexpr std::int64_t kYearUs = 366LL * 24 * 3600 * 1'000'000;
  while (!text.empty()) {
    const auto nl = text.find('\n');
    const std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    if (auto us = stamp_us(line.substr(0, 22)); us && (*us < 0 || *us >= kYearUs)) std::abort();
    auto e = parse_log_event(line);
    if (!e) continue;
    if (e->text.size() > 160) std::abort();
    if (e->kind == LoggedEvent::Kind::SmState && e->text != "MASTER" && e->text != "STANDBY" &&
        e->text != "DISCOVERING" && e->text != "NOTACTIVE")
      std::abort();
    if (auto us = stamp_us(e->stamp); us && (*us < 0 || *us >= kYearUs)) std::abort();
    auto state = parse_sm_state_line(line);
    if (state.has_value() != (e->kind == LoggedEvent::Kind::SmState)) std::abort();
  }
  return 0;
}
