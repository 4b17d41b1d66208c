// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// LID continuity (doc/lid-continuity.md): the fabric's LIDs checked, merged
// with the guid2lid on disk, written atomically at a bounded rate while our
// OpenSM is STANDBY.
#include <catch2/catch.hpp>

#include <map>

#include "smha/fabric/lid_continuity.hpp"
#include "smha/core/clock.hpp"
#include "manual_scheduler.hpp"

using namespace smha;
using namespace smha::fabric;
using opensm::Guid2LidEntry;

using smha::test::ManualScheduler;

namespace {

// Files in memory; every write_atomic recorded (a reader sees whole files only).
struct MemFs : os::FileSystem {
  std::map<std::string, std::string> files;
  std::vector<std::pair<std::string, unsigned>> writes;
  bool fail = false;
  Status write_atomic(const std::string& p, std::string_view c, unsigned mode) override {
    if (fail) return make_error(Errc::Io, "disk full");
    files[p] = std::string(c);
    writes.emplace_back(p, mode);
    return Status::Ok();
  }
  Result<std::string> read(const std::string& p) const override {
    auto it = files.find(p);
    if (it == files.end()) return make_error(Errc::NotFound, p);
    return it->second;
  }
};

SmPort ca(std::uint64_t guid, std::uint16_t lid) {
  SmPort p;
  p.port_guid = Guid{guid};
  p.node_guid = Guid{guid - 1};
  p.node_type = mad::NodeType::Ca;
  p.port_num = 1;
  p.lid = Lid{lid};
  return p;
}

SmPort sw(std::uint64_t guid, std::uint16_t lid) {
  SmPort p = ca(guid, lid);
  p.node_type = mad::NodeType::Switch;
  p.port_num = 0;
  return p;
}

const std::string kPath = "/var/cache/opensm/guid2lid";

}  // namespace

TEST_CASE("LID continuity: fabric answers are checked, bad ones counted and never taken", "[lidcont]") {
  SECTION("valid answers, LMC 0: one LID each") {
    auto f = check_fabric_lids({ca(0x11, 1), sw(0x21, 2), ca(0x31, 0xbfff)}, 0);
    CHECK(f.entries.size() == 3);
    CHECK(f.entries.at(Guid{0x21}) == Guid2LidEntry{Guid{0x21}, 2, 2});
    CHECK(f.rejected.bad_lid + f.rejected.duplicate_lid + f.rejected.conflict == 0);
  }
  SECTION("LMC 2: a CA port gets 4 LIDs, a switch one; an unaligned base LID is refused") {
    auto f = check_fabric_lids({ca(0x11, 4), sw(0x21, 2), ca(0x31, 9)}, 2);
    CHECK(f.entries.at(Guid{0x11}) == Guid2LidEntry{Guid{0x11}, 4, 7});
    CHECK(f.entries.at(Guid{0x21}) == Guid2LidEntry{Guid{0x21}, 2, 2});
    CHECK_FALSE(f.entries.count(Guid{0x31}));
    CHECK(f.rejected.bad_lid == 1);
    CHECK(f.reasons.at(0) == "0x0000000000000031: LID range 0x0009-0x000c not aligned to a power of two");
  }
  SECTION("LID 0 is a port not configured yet: counted, not bad") {
    auto f = check_fabric_lids({ca(0x11, 0), ca(0x12, 3)}, 0);
    CHECK(f.unassigned == 1);
    CHECK(f.rejected.bad_lid == 0);
    CHECK(f.entries.size() == 1);
  }
  SECTION("out of the unicast range, GUID 0") {
    auto f = check_fabric_lids({ca(0x11, 0xc000), ca(0x12, 0xffff), ca(0, 5)}, 0);
    CHECK(f.entries.empty());
    CHECK(f.rejected.bad_lid == 3);
    CHECK(f.reasons.at(0) == "0x0000000000000011: LID 0xc000 past the unicast range (0x0001-0xbfff)");
    CHECK(f.reasons.at(2) == "0x0000000000000000: port GUID 0");
  }
  SECTION("two ports claiming one LID: neither is taken, the LID is contested") {
    auto f = check_fabric_lids({ca(0x11, 5), ca(0x12, 5), ca(0x13, 6)}, 0);
    CHECK(f.entries.size() == 1);
    CHECK(f.entries.count(Guid{0x13}));
    CHECK(f.rejected.duplicate_lid == 2);
    CHECK(f.contested == std::set<std::uint16_t>{5});
    CHECK(f.reasons.at(0) == "0x0000000000000012: LID 0x0005 also claimed by 0x0000000000000011");
  }
  SECTION("overlapping LMC ranges are duplicates too") {
    auto f = check_fabric_lids({ca(0x11, 4), sw(0x21, 6)}, 2);  // 4-7 and 6
    CHECK(f.entries.empty());
    CHECK(f.rejected.duplicate_lid == 2);
    CHECK(f.contested == std::set<std::uint16_t>{4, 5, 6, 7});
  }
  SECTION("one port answering two LIDs is a conflict; the same answer twice is not") {
    auto f = check_fabric_lids({ca(0x11, 5), ca(0x11, 7), ca(0x11, 9), ca(0x12, 3), ca(0x12, 3)}, 0);
    CHECK(f.entries.size() == 1);
    CHECK(f.entries.count(Guid{0x12}));
    CHECK(f.rejected.conflict == 1);
    CHECK(f.reasons.at(0) == "0x0000000000000011: answered LID 0x0005 and LID 0x0007");
  }
}

TEST_CASE("LID continuity: merge with the file on disk", "[lidcont]") {
  std::map<Guid, Guid2LidEntry> fabric = {{Guid{0x11}, {Guid{0x11}, 1, 1}}, {Guid{0x12}, {Guid{0x12}, 2, 2}}};
  SECTION("a port not seen now keeps its entry; one seen now at a free LID gets its LID of now") {
    auto b = build_guid2lid(fabric, {}, {{Guid{0x13}, 3, 3}, {Guid{0x12}, 9, 9}}, 100);
    CHECK(b.entries == std::vector<Guid2LidEntry>{{Guid{0x11}, 1, 1}, {Guid{0x12}, 2, 2}, {Guid{0x13}, 3, 3}});
    CHECK(b.from_fabric == 2);
    CHECK(b.kept == 1);
    CHECK(b.conflicts.empty());
  }
  SECTION("a LID the file holds for a GUID is not given to another port: the claim is a conflict") {
    // 0x13 is down (a rebooting node); 0x12 claims its LID 2 and held LID 4 before.
    auto b = build_guid2lid(fabric, {}, {{Guid{0x13}, 2, 2}, {Guid{0x12}, 4, 4}}, 100);
    CHECK(b.entries == std::vector<Guid2LidEntry>{{Guid{0x11}, 1, 1}, {Guid{0x12}, 4, 4}, {Guid{0x13}, 2, 2}});
    REQUIRE(b.conflicts.size() == 1);
    CHECK(describe(b.conflicts[0]) ==
          "0x0000000000000012 claims LID 0x0002, held for 0x0000000000000013 in guid2lid");
    CHECK(b.kept == 2);
  }
  SECTION("a port whose LID's holder has itself moved on takes it, also along a chain") {
    // The master renumbered: 0x13 4 -> 5, 0x12 9 -> 4, 0x11 8 -> 9.
    std::map<Guid, Guid2LidEntry> moved = {{Guid{0x11}, {Guid{0x11}, 9, 9}},
                                           {Guid{0x12}, {Guid{0x12}, 4, 4}},
                                           {Guid{0x13}, {Guid{0x13}, 5, 5}}};
    auto b = build_guid2lid(moved, {}, {{Guid{0x11}, 8, 8}, {Guid{0x12}, 9, 9}, {Guid{0x13}, 4, 4}}, 100);
    CHECK(b.entries == std::vector<Guid2LidEntry>{{Guid{0x11}, 9, 9}, {Guid{0x12}, 4, 4}, {Guid{0x13}, 5, 5}});
    CHECK(b.conflicts.empty());
  }
  SECTION("a contested LID held in the file stays with its holder") {
    auto b = build_guid2lid(fabric, {7}, {{Guid{0x13}, 7, 7}}, 100);
    CHECK(b.entries == std::vector<Guid2LidEntry>{{Guid{0x11}, 1, 1}, {Guid{0x12}, 2, 2}, {Guid{0x13}, 7, 7}});
  }
  SECTION("the heads' own entries are never dropped by a claim") {
    // 0x11 (a head) is seen; another port claims its LID 1 as well: contested,
    // no fabric entry for either, and both file entries stay.
    auto b = build_guid2lid({{Guid{0x12}, {Guid{0x12}, 2, 2}}}, {1}, {{Guid{0x11}, 1, 1}, {Guid{0x14}, 3, 3}}, 100);
    CHECK(b.entries == std::vector<Guid2LidEntry>{{Guid{0x11}, 1, 1}, {Guid{0x12}, 2, 2}, {Guid{0x14}, 3, 3}});
  }
  SECTION("two file entries on one LID: the first stays") {
    auto b = build_guid2lid({}, {}, {{Guid{0x14}, 4, 4}, {Guid{0x13}, 4, 4}}, 100);
    CHECK(b.entries == std::vector<Guid2LidEntry>{{Guid{0x14}, 4, 4}});
    CHECK(b.dropped_overlap == 1);
  }
  SECTION("bounded: the fabric first") {
    auto b = build_guid2lid(fabric, {}, {{Guid{0x13}, 3, 3}, {Guid{0x14}, 4, 4}}, 3);
    CHECK(b.entries.size() == 3);
    CHECK(b.from_fabric == 2);
    CHECK(b.kept == 1);
    CHECK(b.dropped_bound == 1);
  }
}

TEST_CASE("LID continuity: written atomically while STANDBY, when changed, at a bounded rate", "[lidcont]") {
  ManualScheduler s;
  MemFs fs;
  std::optional<SmState> own = SmState::Standby;
  LidContinuityConfig cfg;
  cfg.path = kPath;
  LidContinuity lc(cfg, s, fs, [&] { return own; });
  CHECK(lc.status().state == "waiting for the first census walk");
  CHECK(fs.writes.empty());

  lc.observe({ca(0x11, 1), sw(0x21, 2), ca(0x31, 3)}, true);
  REQUIRE(fs.writes.size() == 1);
  CHECK(fs.writes[0] == std::make_pair(kPath, 0644u));
  CHECK(fs.files[kPath] ==
        "0x0000000000000011 0x0001 0x0001\n\n"
        "0x0000000000000021 0x0002 0x0002\n\n"
        "0x0000000000000031 0x0003 0x0003\n\n");
  CHECK(lc.status().writes == 1);
  CHECK(lc.status().entries == 3);
  CHECK(lc.status().state == "writing");
  REQUIRE(lc.status().last_written_at);

  SECTION("unchanged: not written again") {
    s.run_for(seconds(30));
    lc.observe({ca(0x11, 1), sw(0x21, 2), ca(0x31, 3)}, true);
    CHECK(fs.writes.size() == 1);
    CHECK(lc.status().unchanged == 1);
  }
  SECTION("a change within min_interval waits for it; changes meanwhile are folded into one write") {
    s.run_for(seconds(2));
    lc.observe({ca(0x11, 1), sw(0x21, 2), ca(0x31, 3), ca(0x41, 4)}, true);
    lc.observe({ca(0x11, 1), sw(0x21, 2), ca(0x31, 3), ca(0x41, 4), ca(0x51, 5)}, true);
    CHECK(fs.writes.size() == 1);
    s.run_for(seconds(7));
    CHECK(fs.writes.size() == 1);
    s.run_for(seconds(1));  // 10 s after the first write
    CHECK(fs.writes.size() == 2);
    CHECK(lc.status().entries == 5);
    s.run_for(seconds(60));
    CHECK(fs.writes.size() == 2);
  }
  SECTION("a port gone from the fabric keeps its entry; another port claiming its LID is a conflict, "
          "reported once") {
    std::vector<std::string> reported;
    LidContinuity lc2(cfg, s, fs, [&] { return own; },
                      [&](const LidConflict&, const std::string& text) { reported.push_back(text); });
    s.run_for(seconds(10));
    lc2.observe({ca(0x11, 1), sw(0x21, 2)}, true);  // 0x31 unplugged
    CHECK(fs.writes.size() == 1);                     // the file already says all of it
    CHECK(lc2.status().kept == 1);
    s.run_for(seconds(10));
    lc2.observe({ca(0x11, 1), sw(0x21, 2), ca(0x99, 3)}, true);  // another port claims LID 3
    CHECK(fs.writes.size() == 1);  // unchanged: 0x31 keeps LID 3, 0x99 is not written
    CHECK(lc2.status().conflicts == 1);
    CHECK(lc2.status().conflict_details.at(0) ==
          "0x0000000000000099 claims LID 0x0003, held for 0x0000000000000031 in guid2lid");
    REQUIRE(reported.size() == 1);
    for (int i = 0; i < 3; ++i) {  // it keeps claiming: counted, not reported again
      s.run_for(seconds(10));
      lc2.observe({ca(0x11, 1), sw(0x21, 2), ca(0x99, 3)}, true);
    }
    CHECK(reported.size() == 1);
    CHECK(lc2.status().conflicts_total == 1);
    CHECK(fs.files[kPath] ==
          "0x0000000000000011 0x0001 0x0001\n\n"
          "0x0000000000000021 0x0002 0x0002\n\n"
          "0x0000000000000031 0x0003 0x0003\n\n");
  }
  SECTION("bad answers are never written; the good ones are") {
    s.run_for(seconds(10));
    lc.observe({ca(0x11, 1), sw(0x21, 2), ca(0x31, 3), ca(0x61, 0xc001), ca(0x71, 2)}, true);
    CHECK(lc.status().rejected.bad_lid == 1);
    CHECK(lc.status().rejected.duplicate_lid == 2);
    CHECK(lc.status().reasons.size() == 3);
    // LID 2 is contested: the file holds it for the switch, which keeps it.
    CHECK(fs.files[kPath] ==
          "0x0000000000000011 0x0001 0x0001\n\n"
          "0x0000000000000021 0x0002 0x0002\n\n"
          "0x0000000000000031 0x0003 0x0003\n\n");
  }
  SECTION("MASTER (it writes its own) or not answering: paused, written once STANDBY again") {
    own = SmState::Master;
    s.run_for(seconds(10));
    fs.files[kPath] = "0x0000000000000011 0x0001 0x0001\n\n";  // what that master wrote
    lc.observe({ca(0x11, 1), sw(0x21, 2), ca(0x31, 3), ca(0x41, 4)}, true);
    CHECK(fs.writes.size() == 1);
    CHECK(lc.status().state == "paused: our OpenSM is MASTER (it writes its own)");
    own = std::nullopt;
    s.run_for(seconds(10));
    lc.observe({ca(0x11, 1), sw(0x21, 2), ca(0x31, 3), ca(0x41, 4)}, true);
    CHECK(lc.status().state == "paused: our OpenSM does not answer");
    CHECK(fs.writes.size() == 1);
    own = SmState::Standby;
    lc.observe({ca(0x11, 1), sw(0x21, 2), ca(0x31, 3), ca(0x41, 4)}, true);
    CHECK(fs.writes.size() == 2);
    CHECK(lc.status().entries == 4);
  }
  SECTION("a failed write is counted, the old file stays, and it is tried again") {
    fs.fail = true;
    s.run_for(seconds(10));
    lc.observe({ca(0x11, 1), ca(0x41, 4)}, true);
    CHECK(lc.status().write_errors == 1);
    CHECK(lc.status().last_error == "write " + kPath + ": disk full");
    CHECK(lc.status().state == "error");
    fs.fail = false;
    s.run_for(seconds(10));
    lc.observe({ca(0x11, 1)}, false);
    CHECK(fs.writes.size() == 2);
    CHECK(fs.files[kPath].find("0x0000000000000041 0x0004 0x0004\n\n") != std::string::npos);
    CHECK(lc.status().last_error.empty());
  }
}

TEST_CASE("LID continuity: a bad file on disk is read safely, its bad records dropped", "[lidcont]") {
  ManualScheduler s;
  MemFs fs;
  LidContinuityConfig cfg;
  cfg.path = kPath;
  LidContinuity lc(cfg, s, fs, [] { return std::optional<SmState>(SmState::Standby); });
  SECTION("bad records") {
    fs.files[kPath] =
        "0x0000000000000041 0x0004 0x0004\n\n"
        "0x0000000000000042 0xc000 0xc000\n\n"
        "garbage\n\n";
    lc.observe({ca(0x11, 1)}, true);
    CHECK(lc.status().file_skipped == 2);
    CHECK(lc.status().file_problems.at(0) == "line 3: 0x0000000000000042: LID 0xc000 past the unicast range (0x0001-0xbfff)");
    CHECK(fs.files[kPath] ==
          "0x0000000000000011 0x0001 0x0001\n\n"
          "0x0000000000000041 0x0004 0x0004\n\n");
  }
  SECTION("a file larger than any valid guid2lid is not merged") {
    fs.files[kPath] = std::string(opensm::kMaxGuid2LidBytes + 10, 'x');
    lc.observe({ca(0x11, 1)}, true);
    CHECK(lc.status().file_skipped == 1);
    CHECK(fs.files[kPath] == "0x0000000000000011 0x0001 0x0001\n\n");
  }
}

TEST_CASE("LID continuity: a walk cut by a bound, or a single answer, adds and the newest wins", "[lidcont]") {
  ManualScheduler s;
  MemFs fs;
  LidContinuityConfig cfg;
  cfg.path = kPath;
  LidContinuity lc(cfg, s, fs, [] { return std::optional<SmState>(SmState::Standby); });
  lc.observe({ca(0x11, 1), ca(0x12, 2)}, true);
  s.run_for(seconds(10));
  lc.observe({ca(0x13, 2)}, false);  // 0x13 answers LID 2, which the file holds for 0x12
  CHECK(lc.status().fabric == 2);    // the fabric view: the newest answer wins
  CHECK(lc.status().conflicts == 1); // the file: the holder keeps it
  CHECK(fs.files[kPath] ==
        "0x0000000000000011 0x0001 0x0001\n\n"
        "0x0000000000000012 0x0002 0x0002\n\n");
  s.run_for(seconds(10));
  lc.observe({ca(0x13, 3), ca(0x12, 4)}, false);  // both moved to LIDs of their own
  CHECK(lc.status().conflicts == 0);
  CHECK(fs.files[kPath] ==
        "0x0000000000000011 0x0001 0x0001\n\n"
        "0x0000000000000012 0x0004 0x0004\n\n"
        "0x0000000000000013 0x0003 0x0003\n\n");
}
