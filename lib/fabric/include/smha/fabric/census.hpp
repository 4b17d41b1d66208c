// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// The SM census (doc/census.md): every SM seen on the fabric, not just the
// configured heads. Pure bookkeeping, fed by the agent:
//   - SMInfo answers of the poll rounds (our own SM, the peers, the SM at our
//     port's MasterSMLID),
//   - the census walk (Discovery::survey()): ports whose PortInfo
//     CapabilityMask has IsSM, with where they are cabled,
//   - the census's own SMInfo queries to those ports (by DR path),
//   - the master's SA: SubnAdmGetTable(SMInfoRecord), what the master found in
//     its sweeps.
// An SM is live while it answered SMInfo within `expiry`; an SA record counts
// as an answer only when it shows the SM changed since the SA last listed it
// (ActCount, state or priority moved: the master heard from it again), or
// the first time, so a record the master keeps after the SM stopped does not
// keep it live. A live SM that is not a configured head is an "other SM"
// (sm::PollRound::other_sms, alarm unknown_sm). An entry is kept while live,
// while the last walk that reached its port saw IsSM, or while the last SA
// table listed it; otherwise it is dropped (the SM is gone).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "smha/fabric/discovery.hpp"
#include "smha/core/clock.hpp"
#include "smha/core/sminfo.hpp"
#include "smha/core/types.hpp"
#include "smha/mad/transport.hpp"
#include "smha/sm/engine_status.hpp"

namespace smha::fabric {

// How the census learned of an SM (a bit set in CensusEntry::sources).
enum CensusSource : unsigned {
  kFromPoll = 1,         // a poll round's SMInfo (our own SM, a peer's address)
  kFromMasterSmLid = 2,  // SMInfo at our port's MasterSMLID
  kFromIsSm = 4,         // a port with CapabilityMask.IsSM (the census walk)
  kFromSa = 8,           // an SMInfoRecord of the master's SA
  kFromSaIsSm = 16,      // an IsSM PortInfoRecord of the master's SA
};
// "poll,master_sm_lid,is_sm,sa,sa_is_sm" (the bits set, in that order).
std::string census_sources_text(unsigned sources);

struct CensusEntry {
  Guid guid;                      // the SM's port GUID
  std::string description;        // NodeDescription, raw; "" when not known
  Lid lid;                        // 0 when not known
  std::optional<DrPath> path;     // DR path of its port (census walk)
  std::optional<Guid> neighbour;  // where it is cabled: the node (switch) at the other end
  std::uint8_t neighbour_port = 0;
  std::optional<SmInfo> info;     // its last SMInfo answer
  std::optional<TimePoint> answered_at;
  TimePoint first_seen{};
  bool head = false;              // a configured head (or our own SM)
  bool local = false;             // our own SM
  bool is_sm = false;             // the last walk that reached its port saw IsSM
  bool sa_listed = false;         // the last SA table listed it
  std::optional<SmInfo> sa_info;  // its last SMInfoRecord (SM_Key 0: the SA hides it)
  bool answer_from_sa = false;    // the last answer was an SA record, not an SMInfo
  unsigned sources = 0;           // CensusSource bits
  std::uint64_t answers = 0;
  std::uint64_t misses = 0;       // census queries unanswered in a row
};

// An SM that answered a census query on one port with the GUID of a
// configured head (or ours) that sits on another port: a claim the heads'
// own cabling refutes.
struct Impostor {
  Guid port;          // the port that was asked (census walk: its DR path)
  SmInfo info;        // what it answered (info.guid: the head it claims to be)
  std::string where;  // that port, for people (Census::where)
  TimePoint first_seen{};
  TimePoint last_seen{};
};

struct CensusLimits {
  Duration expiry = seconds(15);  // live while answered this recently
  std::size_t max_sms = 64;       // entries kept; more are counted in `dropped`
};

class Census {
 public:
  explicit Census(CensusLimits limits = {}) : limits_(limits) {}

  // Our own port GUID and the configured peers': entries are marked head/local.
  void set_heads(Guid own, const std::vector<Guid>& peers);
  // A census walk finished: `ports` had IsSM. Ports it reached without IsSM,
  // and ports it did not reach, lose is_sm (when `complete`, i.e. the walk
  // was not cut by a bound; a partial walk only adds).
  void walked(const std::vector<SmPort>& ports, bool complete, TimePoint now);
  // Every port the last walk read (IsSM or not): where each is cabled, its
  // LID and DR path, to fill in entries that come from polls (the heads).
  void known_ports(const std::vector<SmPort>& ports);
  // A recheck of one port's PortInfo between walks: IsSM set (added or
  // refreshed as a walk would) or clear (the entry loses is_sm).
  void rechecked(const SmPort& port, bool is_sm, TimePoint now);
  // The master's SA lists port `port` (its GUID read by NodeInfo at `lid`)
  // with IsSM: added, or marked IsSM, with that LID; a DR path a walk gave
  // it is kept (without one it is asked by LID).
  void sa_is_sm(Guid port, Lid lid, TimePoint now);
  // A whole IsSM PortInfoRecord table listed `lids`: an entry that only that
  // table made IsSM (no walk gave it a DR path) and whose LID it no longer
  // lists loses is_sm.
  void sa_is_sm_table(const std::vector<Lid>& lids);
  // The entry whose LID is `lid`, if any.
  const CensusEntry* by_lid(Lid lid) const;
  // Its NodeDescription, read after a recheck found it.
  void described(Guid guid, const std::string& description);
  // An SMInfo answer. `lid`: where it was asked by LID (0: by DR / unknown).
  void answered(const SmInfo& info, unsigned source, Lid lid, TimePoint now);
  // The answer of the SM on port `port` (a census query by that port's DR
  // path). One carrying a configured head's GUID (or ours) that is not this
  // port's is an impostor: recorded in impostors(), never taken as the head's
  // answer; returns true then. Anything else is answered() (with `lid` only
  // when the SM answers with the port's own GUID) and ends that port's
  // impostor record.
  bool answered_at(Guid port, const SmInfo& info, Lid lid, TimePoint now);
  // Impostors seen within 4 x expiry on ports that still show IsSM.
  std::vector<Impostor> impostors(TimePoint now) const;
  // For the alarm: each impostor and where the head it claims to be is,
  // "SM at <where> answers as head02 (0x...) MASTER prio 15; head02 is at <where>".
  std::string impostor_text(TimePoint now) const;
  // The master's SA listed `records`. New GUIDs are added; a record that
  // differs from the one before (or is the first) counts as an answer unless
  // the entry is live from a direct answer. `complete` (the table was not
  // truncated): entries it does not list lose sa_listed.
  void sa_table(const std::vector<mad::SmInfoRecord>& records, bool complete, TimePoint now);
  // A census query to this SM went unanswered.
  void missed(Guid guid);
  // Drops entries that are neither live nor IsSM.
  void expire(TimePoint now);

  bool live(const CensusEntry& e, TimePoint now) const;
  // "MASTER", "STANDBY", ... while live; "silent" when it answered before but
  // not within expiry; "unknown" when it never answered.
  std::string state_text(const CensusEntry& e, TimePoint now) const;
  // For people: "\"node desc\" lid 5 at 0x... port 3" (printable; parts unknown left out).
  static std::string where(const CensusEntry& e);
  // The live SMs that are not heads, for the engine.
  std::vector<sm::OtherSm> others(TimePoint now) const;
  // Entries per state_text(), lower case ("master", "standby", "silent", ...).
  std::map<std::string, std::size_t> count_by_state(TimePoint now) const;

  const std::map<Guid, CensusEntry>& entries() const { return entries_; }
  std::uint64_t dropped() const { return dropped_; }
  const CensusLimits& limits() const { return limits_; }

 private:
  CensusEntry* entry(Guid guid, TimePoint now);  // finds or adds; null when full
  CensusLimits limits_;
  Guid own_;
  std::vector<Guid> peers_;
  void annotate(CensusEntry& e) const;  // from known_ports_
  std::map<Guid, CensusEntry> entries_;
  std::map<Guid, SmPort> known_ports_;
  std::map<Guid, Impostor> impostors_;  // by port
  bool is_head(Guid g) const;
  std::uint64_t dropped_ = 0;
};

}  // namespace smha::fabric
