// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// The takeover report (fabric::TakeoverReport) as JSON: in the event journal,
// in `smctl events` and in `smctl status`'s last_takeover
// (doc/takeover-report.md). Durations in milliseconds; null where not known.
#pragma once

#include <optional>
#include <string>
#include <vector>
#include <utility>

#include <nlohmann/json.hpp>

#include "smha/fabric/takeover_report.hpp"

namespace smha::head {

nlohmann::json takeover_report_json(const fabric::TakeoverReport& r);
// The journal's copy back (nullopt if it is not one: the event is kept
// without it). Lists are cut to what a report keeps, texts to 160 bytes.
std::optional<fabric::TakeoverReport> takeover_report_from_json(const nlohmann::json& j);
// The log line's fields (SM_TAKEOVER_REPORT), after kind and summary.
std::vector<std::pair<std::string, std::string>> takeover_report_fields(const fabric::TakeoverReport& r);

}  // namespace smha::head
