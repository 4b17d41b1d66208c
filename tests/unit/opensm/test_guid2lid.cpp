// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// OpenSM's guid2lid file: what smhad writes and how it reads one back
// (osm_db_files.c osm_db_store / osm_db_restore, osm_db_pack.c).
#include <catch2/catch.hpp>

#include "smha/opensm/guid2lid.hpp"

using namespace smha;
using namespace smha::opensm;

TEST_CASE("guid2lid: rendered as osm_db_store writes it", "[guid2lid]") {
  // "%s %s\n\n" of pack_guid ("0x%016" PRIx64) and pack_lids ("0x%04x 0x%04x").
  const std::string opensm_wrote =
      "0x0002c90300000101 0x0001 0x0001\n\n"
      "0x0002c90300000f00 0x0003 0x0003\n\n";
  CHECK(render_guid2lid({{Guid{0x0002c90300000101}, 1, 1}, {Guid{0x0002c90300000f00}, 3, 3}}) == opensm_wrote);
  CHECK(render_guid2lid({}).empty());
  CHECK(render_guid2lid({{Guid{0xffffffffffffffff}, 0xbffc, 0xbfff}}) == "0xffffffffffffffff 0xbffc 0xbfff\n\n");
  auto back = parse_guid2lid(opensm_wrote);
  REQUIRE(back.ok());
  CHECK(back->skipped == 0);
  CHECK(back->entries == std::vector<Guid2LidEntry>{{Guid{0x0002c90300000101}, 1, 1}, {Guid{0x0002c90300000f00}, 3, 3}});
}

TEST_CASE("guid2lid: entry checks follow lid_mgr_validate_db and unpack_lids", "[guid2lid]") {
  CHECK(guid2lid_entry_problem({Guid{1}, 1, 1}).empty());
  CHECK(guid2lid_entry_problem({Guid{1}, 0xbfff, 0xbfff}).empty());
  CHECK(guid2lid_entry_problem({Guid{1}, 4, 7}).empty());  // LMC 2, aligned
  CHECK(guid2lid_entry_problem({Guid{0}, 1, 1}) == "port GUID 0");
  CHECK(guid2lid_entry_problem({Guid{1}, 0, 0}) == "LID 0");
  CHECK(guid2lid_entry_problem({Guid{1}, 0xc000, 0xc000}) ==
        "LID 0xc000 past the unicast range (0x0001-0xbfff)");
  CHECK(guid2lid_entry_problem({Guid{1}, 0xbffe, 0xc001}).find("past the unicast range") != std::string::npos);
  CHECK(guid2lid_entry_problem({Guid{1}, 5, 4}) == "min LID 0x0005 above max LID 0x0004");
  CHECK(guid2lid_entry_problem({Guid{1}, 5, 8}) == "LID range 0x0005-0x0008 not aligned to a power of two");
  CHECK(guid2lid_entry_problem({Guid{1}, 4, 6}) == "LID range 0x0004-0x0006 not aligned to a power of two");
  CHECK(guid2lid_entry_problem({Guid{1}, 0x100, 0x1ff}) == "256 LIDs (LMC allows at most 128)");
}

TEST_CASE("guid2lid: bad records are skipped and named, the rest is kept", "[guid2lid]") {
  const std::string text =
      "0x0000000000000001 0x0001 0x0001\n\n"     // line 1: good
      "0x0000000000000002 0x0000 0x0000\n\n"     // line 3: LID 0
      "0x0000000000000003 0xc000 0xc000\n\n"     // line 5: multicast
      "0x0000000000000001 0x0009 0x0009\n\n"     // line 7: GUID again
      "0x0000000000000004 0x0004\n\n"            // line 9: two words
      "zz 0x0005 0x0005\n\n"                     // line 11: not hex
      "0x0000000000000006 0x12345 0x0006\n\n"    // line 13: LID of 5 digits
      "  0x0000000000000007 0x0007 0x0007\n\n"   // line 15: white space first
      "0x0000000000000008 0x0008 0x0008\n"       // line 17: a record of two lines
      "0x0000000000000009 0x0009 0x0009\n\n"
      "0x000000000000000a 0x000a 0x000a";        // line 20: no empty line at the end: still a record
  auto f = parse_guid2lid(text);
  REQUIRE(f.ok());
  CHECK(f->entries == std::vector<Guid2LidEntry>{{Guid{1}, 1, 1}, {Guid{0xa}, 0xa, 0xa}});
  CHECK(f->skipped == 8);
  REQUIRE(f->problems.size() == Guid2LidFile::kMaxProblems);
  CHECK(f->problems[0] == "line 3: 0x0000000000000002: LID 0");
  CHECK(f->problems[1] == "line 5: 0x0000000000000003: LID 0xc000 past the unicast range (0x0001-0xbfff)");
  CHECK(f->problems[2] == "line 7: port GUID 0x0000000000000001 listed again");
  CHECK(f->problems[3] == "line 9: not \"0x<port GUID> 0x<min LID> 0x<max LID>\"");
  CHECK(f->problems[4] == "line 11: port GUID is not 0x and 1-16 hex digits");
  CHECK(f->problems[5] == "line 13: LID is not 0x and 1-4 hex digits");
  CHECK(f->problems[6] == "line 15: a line starting with white space outside a record");
  CHECK(f->problems[7] == "line 17: a record of more than one line");
}

TEST_CASE("guid2lid: bounded in bytes and entries", "[guid2lid]") {
  std::string text;
  for (int i = 1; i <= 10; ++i)
    text += render_guid2lid({{Guid{static_cast<std::uint64_t>(i)}, static_cast<std::uint16_t>(i),
                              static_cast<std::uint16_t>(i)}});
  auto f = parse_guid2lid(text, 4);
  REQUIRE(f.ok());
  CHECK(f->entries.size() == 4);
  CHECK(f->skipped == 6);
  CHECK(f->problems[0] == "line 9: more than 4 entries");
  auto big = parse_guid2lid(text, 100, text.size() - 1);
  REQUIRE_FALSE(big.ok());
  CHECK(big.error().code == Errc::TooLarge);
  CHECK(parse_guid2lid("").ok());
  CHECK(parse_guid2lid("\n\n\n")->entries.empty());
  // The largest valid file (every unicast LID used) fits the default bound.
  CHECK(kMaxGuid2LidEntries * 34 < kMaxGuid2LidBytes);
}
