// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// libFuzzer target: the takeover report as the event journal carries it
// (takeover_report_from_json on any JSON an input parses to).
// Invariants checked: no crash/UB/leak; what decodes stays within a report's
// bounds and re-encodes to JSON that decodes to a fixed point.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include <nlohmann/json.hpp>

#include "smha/head/takeover_report_json.hpp"

using namespace smha;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto j = nlohmann::json::parse(std::string_view(reinterpret_cast<const char*>(data), size), nullptr, false);
  if (j.is_discarded()) return 0;
  auto r = head::takeover_report_from_json(j);
  if (!r) return 0;
  if (r->routing_failures.size() > fabric::kReportRoutingFailures ||
      r->lid_changed_ports.size() > fabric::kReportPortsNamed || r->ports_elsewhere.size() > fabric::kReportPortsNamed)
    std::abort();
  // Durations come back rounded to 0.1 ms: the second round trip is exact.
  auto again = head::takeover_report_from_json(head::takeover_report_json(*r));
  if (!again) std::abort();
  auto third = head::takeover_report_from_json(head::takeover_report_json(*again));
  if (!third || !(*third == *again)) std::abort();
  return 0;
}
