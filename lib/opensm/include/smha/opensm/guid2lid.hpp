// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// OpenSM's guid2lid file ($OSM_CACHE_DIR/guid2lid, doc/lid-continuity.md):
// one record per port, "0x<port GUID, 16 hex> 0x<min LID, 4 hex> 0x<max LID,
// 4 hex>", each followed by an empty line, as osm_db_store() writes it
// (osm_db_files.c dump_tbl_entry "%s %s\n\n", osm_db_pack.c pack_guid /
// pack_lids). OpenSM reads it with osm_db_restore(): a key starts in column 0,
// lines until an empty one add to its value; unpack_lids() takes the first
// two numbers of the value and refuses one >= 0xC000.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "smha/core/result.hpp"
#include "smha/core/types.hpp"

namespace smha::opensm {

// The last unicast LID (IBA 4.1.3: 0x0001-0xBFFF unicast, 0xC000- multicast).
inline constexpr std::uint16_t kMaxUnicastLid = 0xBFFF;
// A LID can have one owner, so a valid file never has more entries than this.
inline constexpr std::size_t kMaxGuid2LidEntries = kMaxUnicastLid;
// What parse_guid2lid() accepts: 64 bytes an entry is roomy (34 are written).
inline constexpr std::size_t kMaxGuid2LidBytes = kMaxGuid2LidEntries * 64;
// LMC is at most 7 (IBA 14.2.5.6): a port has at most 128 LIDs.
inline constexpr unsigned kMaxLmc = 7;

struct Guid2LidEntry {
  Guid guid;
  std::uint16_t min_lid = 0;
  std::uint16_t max_lid = 0;
  friend bool operator==(const Guid2LidEntry&, const Guid2LidEntry&) = default;
};

// Why an entry is not valid for OpenSM's LID manager (lid_mgr_validate_db):
// "" when it is. Checks GUID 0, LID 0, LIDs past kMaxUnicastLid, min > max,
// more than 2^kMaxLmc LIDs, and a range not aligned to its size.
std::string guid2lid_entry_problem(const Guid2LidEntry& e);

// The file's text, entries in the order given.
std::string render_guid2lid(const std::vector<Guid2LidEntry>& entries);

struct Guid2LidFile {
  std::vector<Guid2LidEntry> entries;  // the valid ones, in file order
  // The records skipped, "line N: why" (at most kMaxProblems kept; `skipped`
  // counts all): not a record OpenSM would take, an invalid entry
  // (guid2lid_entry_problem), a GUID already listed.
  std::vector<std::string> problems;
  std::size_t skipped = 0;
  static constexpr std::size_t kMaxProblems = 8;
};

// Parses a guid2lid file. A record that does not parse is skipped and named
// in `problems`; the whole text is refused (error "too_large") only when it is
// longer than `max_bytes`, and records past `max_entries` are skipped. Never
// reads more than the text; memory is bounded by `max_entries`.
Result<Guid2LidFile> parse_guid2lid(std::string_view text, std::size_t max_entries = kMaxGuid2LidEntries,
                                    std::size_t max_bytes = kMaxGuid2LidBytes);

}  // namespace smha::opensm
