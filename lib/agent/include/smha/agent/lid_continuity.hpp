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
//  - The file is merged: its entries for ports the fabric does not show now
//    are kept (a port down during an outage is what must keep its LID),
//    unless another port holds (or contests) one of its LIDs now. A port the
//    fabric shows now gets the LID it has now.
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
#include <vector>

#include "smha/agent/discovery.hpp"
#include "smha/core/clock.hpp"
#include "smha/core/scheduler.hpp"
#include "smha/core/types.hpp"
#include "smha/opensm/guid2lid.hpp"
#include "smha/os/file_system.hpp"

namespace smha::agent {

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

// The file to write: the fabric's entries, then the previous file's entries
// kept (not seen now, no LID taken by a fabric entry or contested, no overlap
// with an entry kept before them), at most `max_entries` (fabric first);
// sorted by port GUID.
struct Guid2LidBuild {
  std::vector<opensm::Guid2LidEntry> entries;
  std::size_t from_fabric = 0;
  std::size_t kept = 0;             // from the previous file, ports not seen now
  std::size_t dropped_claimed = 0;  // previous entries whose LID another port holds now
  std::size_t dropped_bound = 0;    // past max_entries
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
  std::size_t dropped_claimed = 0;   // last build: file entries whose LID another port holds
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
  // `sched` and `fs` must outlive this.
  LidContinuity(LidContinuityConfig cfg, Scheduler& sched, os::FileSystem& fs, OwnState own_state);
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
  std::map<Guid, opensm::Guid2LidEntry> fabric_;
  std::set<std::uint16_t> contested_;
  bool observed_ = false;
  bool dirty_ = false;
  std::optional<TimePoint> last_write_try_;
  std::optional<Scheduler::TimerId> timer_;
  LidContinuityStatus status_;
};

}  // namespace smha::agent
