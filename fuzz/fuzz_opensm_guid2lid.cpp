// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// libFuzzer target: the guid2lid parser smhad reads OpenSM's cache file with
// before it merges and rewrites it (doc/lid-continuity.md), on any bytes.
// Invariants checked: no crash/UB/leak; every entry it takes is valid for
// OpenSM (guid2lid_entry_problem empty), GUIDs are unique, the entry bound
// holds, and the rendered entries parse back to the same entries.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string_view>

#include "smha/opensm/guid2lid.hpp"

using namespace smha::opensm;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto f = parse_guid2lid(text, 64);
  if (!f.ok()) return 0;
  if (f->entries.size() > 64 || f->problems.size() > Guid2LidFile::kMaxProblems) std::abort();
  std::set<std::uint64_t> guids;
  for (const auto& e : f->entries) {
    if (!guid2lid_entry_problem(e).empty()) std::abort();
    if (!guids.insert(e.guid.value).second) std::abort();
  }
  auto again = parse_guid2lid(render_guid2lid(f->entries), 64);
  if (!again.ok() || again->skipped != 0 || !(again->entries == f->entries)) std::abort();
  return 0;
}
