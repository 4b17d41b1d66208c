// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// LID continuity (doc/lid-continuity.md): while our OpenSM is STANDBY, smhad
// keeps a guid2lid in its OpenSM's cache_dir built from what the fabric says
// (the LIDs the census walk and its rechecks read from PortInfo), so that when
// this OpenSM comes out of standby with honor_guid2lid_file TRUE it restores
// every port's LID, a port that is down at that moment included.
//
// Rules:
//  - A fabric answer is taken when its LID range is valid (not 0, within the
//    unicast range, aligned; opensm::guid2lid_entry_problem). Two ports that
//    claim one LID in the same walk are both refused (duplicate_lid), as is a
//    port that answered with two LIDs (conflict); LID 0 (a port the SM has not
//    configured yet) is counted as unassigned, not as bad input. Refused
//    answers are counted and never written.
//  - The file is merged by OpenSM's own rule for it: a LID the file holds
//    for a GUID is not given to another port. Its entries are kept (a port
//    down during an outage is what must keep its LID). A port the fabric
//    shows now gets the LID it has now when no other GUID holds that LID in
//    the file (or that GUID's port has itself moved to a LID of its own);
//    otherwise its answer is a conflict (counted, shown, reported once) and
//    its file entry, if any, stays. Without M_Key any node can set its own
//    PortInfo LID: a port's answer is a claim, the file is the record.
//  - Written (temp + fsync + rename, FileSystem::write_atomic) only while our
//    OpenSM answers STANDBY or NOTACTIVE (a master writes its own), only when
//    the content changed, at most once every `min_interval`.
// Single-threaded on the owner's event loop.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "smha/fabric/discovery.hpp"
#include "smha/core/clock.hpp"
#include "smha/core/scheduler.hpp"
#include "smha/core/types.hpp"
#include "smha/opensm/guid2lid.hpp"
#include "smha/os/file_system.hpp"

namespace smha::fabric {

// Fabric answers refused, by reason (counted, never written).
struct LidRejects {
  std::uint64_t bad_lid = 0;        // invalid range: GUID 0, LID past 0xBFFF, unaligned
  std::uint64_t duplicate_lid = 0;  // one LID claimed by two ports in one walk
  std::uint64_t conflict = 0;       // one port answered with two LIDs in one walk
};

// One walk's (or recheck's) answers, checked.
struct FabricLids {
  std::map<Guid, opensm::Guid2LidEntry> entries;  // the valid, uncontested ones
  std::set<std::uint16_t> contested;              // LIDs two ports claimed
  LidRejects rejected;
  std::size_t unassigned = 0;                     // ports with LID 0
  std::vector<std::string> reasons;               // the first few refusals, for status
};
// `lmc`: OpenSM's lmc; a CA port gets 2^lmc LIDs, a switch (port 0) one.
FabricLids check_fabric_lids(const std::vector<SmPort>& ports, unsigned lmc);

// A port whose answer claims a LID the file holds for another GUID.
struct LidConflict {
  Guid claimant;
  std::uint16_t lid = 0;
  Guid holder;  // the GUID the file holds `lid` for
  bool operator<(const LidConflict& o) const {
    return std::tie(claimant, lid, holder) < std::tie(o.claimant, o.lid, o.holder);
  }
};
std::string describe(const LidConflict& c);  // "0x.. claims LID 0x0008, held for 0x.. in guid2lid"

// The file to write: the fabric's entries that claim no LID the previous file
// holds for another GUID, then the previous file's entries of every other
// port (their LIDs kept, whatever a port claims now; a later file entry that
// overlaps an earlier one is dropped), at most `max_entries` (fabric first);
// sorted by port GUID.
struct Guid2LidBuild {
  std::vector<opensm::Guid2LidEntry> entries;
  std::size_t from_fabric = 0;
  std::size_t kept = 0;              // from the previous file: ports not seen now, or whose claim conflicts
  std::vector<LidConflict> conflicts;  // fabric answers refused: the LID is held for another GUID
  std::size_t dropped_overlap = 0;   // file entries overlapping an earlier one
  std::size_t dropped_bound = 0;     // past max_entries
};
Guid2LidBuild build_guid2lid(const std::map<Guid, opensm::Guid2LidEntry>& fabric,
                             const std::set<std::uint16_t>& contested,
                             const std::vector<opensm::Guid2LidEntry>& previous, std::size_t max_entries);

struct LidContinuityConfig {
  std::string path;                 // <opensm.cache_dir>/guid2lid
  unsigned lmc = 0;
  Duration min_interval = seconds(10);
  std::size_t max_entries = opensm::kMaxGuid2LidEntries;
};

struct LidContinuityStatus {
  std::string path;
  std::string state = "waiting for the first census walk";
  std::size_t fabric = 0;            // ports with a valid LID from the fabric now
  std::size_t entries = 0;           // in the file last written (or found unchanged)
  std::size_t kept = 0;              // of them, kept from the file: ports not seen now
  std::size_t dropped_overlap = 0;   // last build: file entries overlapping an earlier one
  // Ports claiming a LID the file holds for another GUID: the last build's
  // count and first few, and every distinct one since start (each reported once).
  std::size_t conflicts = 0;
  std::vector<std::string> conflict_details;
  std::uint64_t conflicts_total = 0;
  std::size_t file_skipped = 0;      // records of the file last read that were not valid
  std::vector<std::string> file_problems;
  LidRejects rejected;               // fabric answers refused, since start
  std::uint64_t unassigned = 0;      // answers with LID 0, since start
  std::vector<std::string> reasons;  // the last walk's refusals (a few)
  std::uint64_t writes = 0;
  std::uint64_t write_errors = 0;
  std::uint64_t unchanged = 0;       // builds that matched the file: not written
  std::optional<TimePoint> last_written_at;
  std::optional<TimePoint> last_checked_at;
  std::string last_error;            // "" after a write that worked
};

class LidContinuity {
 public:
  // Our own SM's state (the poll rounds); nullopt while it does not answer.
  using OwnState = std::function<std::optional<SmState>()>;
  // Called once for each distinct conflict (claimant, LID, holder), with its description.
  using ConflictHandler = std::function<void(const LidConflict&, const std::string& text)>;
  // `sched` and `fs` must outlive this.
  LidContinuity(LidContinuityConfig cfg, Scheduler& sched, os::FileSystem& fs, OwnState own_state,
                ConflictHandler on_conflict = {});
  ~LidContinuity();
  LidContinuity(const LidContinuity&) = delete;
  LidContinuity& operator=(const LidContinuity&) = delete;

  // Ports read by a census walk (`complete`: not cut by a bound; it then
  // replaces what the fabric showed before) or a recheck (adds, newest wins).
  void observe(const std::vector<SmPort>& ports, bool complete);
  const LidContinuityStatus& status() const { return status_; }

 private:
  void maybe_write();
  void write_now();

  LidContinuityConfig cfg_;
  Scheduler& sched_;
  os::FileSystem& fs_;
  OwnState own_state_;
  ConflictHandler on_conflict_;
  std::set<LidConflict> reported_;  // bounded (kMaxReportedConflicts)
  std::map<Guid, opensm::Guid2LidEntry> fabric_;
  std::set<std::uint16_t> contested_;
  bool observed_ = false;
  bool dirty_ = false;
  std::optional<TimePoint> last_write_try_;
  std::optional<Scheduler::TimerId> timer_;
  LidContinuityStatus status_;
};

}  // namespace smha::fabric
