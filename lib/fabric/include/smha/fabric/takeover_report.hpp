// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// The takeover report (doc/takeover-report.md): after every takeover or
// handover that made our SM the MASTER, one report of how it went.
//
//   detection           the lost master's last MASTER answer -> the takeover
//                       started (our DISCOVER, or our SM seen leaving STANDBY
//                       after the dying master's smhad sent it DISCOVER);
//                       takeovers only
//   to_master           the takeover started -> our SM answered MASTER
//                       (a handover: the old master's last MASTER answer ->
//                       ours)
//   discovering_to_master OpenSM's "Entering DISCOVERING state" -> "Entering
//                       MASTER state" (its log's stamps): DISCOVER -> MASTER
//                       as our SM lived it
//   master_to_subnet_up OpenSM's "Entering MASTER state" -> "SUBNET UP", both
//                       by OpenSM's own log time stamps
//   routing             the engine that configured the switches and the ones
//                       that failed first ("ftree: cannot build lid matrices");
//                       a fallback when any failed or the engine used is not
//                       the first one configured
//   lids                the ports of the last census walk before the takeover
//                       against a walk started at SUBNET UP: how many kept
//                       their LID
//   master_sm_lid       of the active ports that walk read, how many already
//                       point at the new master (PortInfo MasterSMLID)
//   lfts                every switch's linear forwarding table in the last
//                       walk before against the walk at SUBNET UP: entries
//                       changed
//   sa                  when our SA answered again (Watchers asks it from
//                       MASTER on: OpenSM ignores SA queries until its first
//                       master sweep ends), and what of the old master's SA
//                       database our OpenSM was given (the copy the peer
//                       channel left in sa_db_file, doc/continuity.md), whether
//                       it loaded (OpenSM's log), and which of its multicast
//                       groups our SA has at the same MLID
//
// A report is made when our SM becomes MASTER after a takeover started
// (TakeoverStarted), or from STANDBY while another SM was seen MASTER (a
// handover), or from any other state while the SM last seen MASTER no longer
// answers MASTER (a takeover the engine did not start: smhad was still
// starting when the lost master's smhad sent our SM DISCOVER). A cold start
// is none of these.
//
// Pure bookkeeping, fed by Watchers (engine events, poll answers, census
// walks) and by whoever reads OpenSM's log (smhad's log follower; the
// simulated fabric's model). A report is emitted once everything arrived, or
// at `deadline` after MASTER with what did (`incomplete` says what is
// missing), or when our SM stops being MASTER first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "smha/fabric/discovery.hpp"
#include "smha/core/clock.hpp"
#include "smha/core/types.hpp"
#include "smha/opensm/log_follower.hpp"
#include "smha/sm/engine_status.hpp"

namespace smha::fabric {

// Ports a report names one by one (LID changed, MasterSMLID elsewhere).
inline constexpr std::size_t kReportPortsNamed = 8;
// Routing failures a report keeps (OpenSM logs one per engine tried).
inline constexpr std::size_t kReportRoutingFailures = 4;
// Multicast groups of the SA copy a report asks our SA about (one SubnAdmGet
// each) and names when lost.
inline constexpr std::size_t kReportGroupsChecked = 1024;
inline constexpr std::size_t kReportGroupsNamed = 8;

// The SA database copy in our OpenSM's sa_db_file when it became MASTER
// (doc/continuity.md), as the daemon's continuity holds it.
struct SaCopyInfo {
  std::uint64_t generation = 0;
  std::string sender;              // the head that sent it
  std::optional<double> age_s;     // since the master last confirmed it
  std::optional<double> content_age_s;  // since the master's OpenSM wrote its content
  std::size_t groups = 0, members = 0, services = 0, informs = 0;
  // Current (doc/continuity.md): the old master's SA as last known here, i.e.
  // confirmed within max_copy_age and no notice since that the master's SA
  // moved on. Otherwise `stale` says why ("not sent: <the master's problem>",
  // "last confirmed N s before (bound B s)").
  bool current = true;
  std::string stale;
  // A notice's: the old master's SA changed this long after the copy's content.
  std::optional<double> missed_s;
  // What the copy lacks against the master's unsent dump (its counts minus
  // the copy's, where more), when a notice counted it.
  struct Counts {
    std::size_t groups = 0, members = 0, services = 0, informs = 0;
    friend bool operator==(const Counts&, const Counts&) = default;
  };
  std::optional<Counts> lost;
  // A group OpenSM restores (one with a full member), and that member: our SA
  // is asked for its MCMemberRecord.
  struct Group {
    mad::Gid mgid;
    Lid mlid;
    mad::Gid member;
    friend bool operator==(const Group&, const Group&) = default;
  };
  std::vector<Group> checkable;    // the first kReportGroupsChecked
  friend bool operator==(const SaCopyInfo&, const SaCopyInfo&) = default;
};

struct TakeoverReport {
  enum class Kind : std::uint8_t { Takeover, Handover };
  Kind kind = Kind::Takeover;
  std::optional<Guid> previous_master;  // the SM last seen MASTER before ours
  std::string cause;                    // the takeover's reason ("" for a handover)
  std::optional<Duration> detection;
  std::optional<Duration> to_master;
  std::optional<Duration> discovering_to_master;
  std::optional<Duration> master_to_subnet_up;
  std::string routing_engine;                 // "" when not logged
  std::vector<std::string> routing_failures;  // "ftree: cannot build lid matrices"
  bool routing_fallback = false;
  std::optional<std::size_t> ports_compared;  // in both walks
  std::size_t lids_changed = 0;
  std::vector<Guid> lid_changed_ports;        // the first kReportPortsNamed
  std::optional<std::size_t> ports_sampled;   // active ports the walk after read
  std::size_t ports_on_new_master = 0;        // of them, MasterSMLID == our LID
  std::vector<Guid> ports_elsewhere;          // the first kReportPortsNamed that do not
  Lid master_lid;                             // our port's LID in that walk
  // Forwarding tables: switches whose whole LFT both walks read.
  std::optional<std::size_t> lft_entries_compared;
  std::size_t lft_entries_changed = 0;
  std::vector<Guid> lft_changed_switches;     // the first kReportPortsNamed
  // The SA.
  std::optional<Duration> sa_after_master;    // our SM seen MASTER -> our SA's first answer
  std::optional<Duration> sa_outage;          // the old master's last MASTER answer -> our SA's first answer
  std::optional<SaCopyInfo> sa_copy;          // the copy held at MASTER (checkable left out); none: nothing to restore
  std::string sa_restore_error;               // OpenSM's log: the first line saying the file did not (all) load
  std::optional<std::size_t> groups_checked;  // groups of the copy asked of our SA
  std::size_t groups_kept = 0;                // of them, answered with the copy's MLID
  std::vector<std::string> groups_lost;       // the first kReportGroupsNamed others: "MGID: why"
  std::string incomplete;                     // what did not arrive ("" = nothing missing)
  friend bool operator==(const TakeoverReport&, const TakeoverReport&) = default;
};
std::string_view to_string(TakeoverReport::Kind k);  // "takeover", "handover"
std::optional<TakeoverReport::Kind> report_kind_named(std::string_view name);
// One line for people: "takeover from 0x... : detected in 120 ms, MASTER
// 14 ms later, SUBNET UP 3 ms after; routing minhop (fell back: ...); LIDs
// changed 0 of 6; 6 of 6 ports point at the new master".
std::string summary(const TakeoverReport& r);
// "SA database restored from generation 7 of head01 (12 s old): groups kept
// their MLID 4 of 4", or "SA database not restored (no copy from the master)".
std::string sa_restore_text(const TakeoverReport& r);
// A current copy restored with no OpenSM load error: what
// smha_last_takeover_sa_restored says.
bool sa_restored(const TakeoverReport& r);

class TakeoverReporter {
 public:
  using Emit = std::function<void(const TakeoverReport&)>;
  // `configured_engines`: opensm.routing_engine split at commas (empty:
  // OpenSM's default, minhop). `deadline`: from MASTER to the report at the
  // latest.
  explicit TakeoverReporter(std::vector<std::string> configured_engines = {}, Duration deadline = seconds(30));

  void set_emit(Emit fn) { emit_ = std::move(fn); }
  void set_own(Guid own) { own_ = own; }
  // Whether census walks run (no LID or MasterSMLID figures without them).
  void set_walks(bool on) { walks_ = on; }
  // Whether Watchers asks our SA from MASTER on (sa_after_master, sa_outage).
  void set_sa_probe(bool on) { sa_probe_ = on; }
  // The SA copy our OpenSM holds, asked when it becomes MASTER (unset or
  // nullopt: none).
  void set_sa_copy_source(std::function<std::optional<SaCopyInfo>()> fn) { sa_copy_source_ = std::move(fn); }
  // Whether OpenSM's log reaches on_opensm_log(). Without it the report does
  // not wait for SUBNET UP: its walk starts `kWalkWithoutLog` after MASTER.
  void set_log_followed(bool on) { log_followed_ = on; }
  static constexpr Duration kWalkWithoutLog = seconds(2);

  // A poll round began at `at`; master_seen() calls of that round follow.
  void round_began(TimePoint at) { round_at_ = at; }
  // An SM other than ours answered MASTER (poll rounds, at the round's start).
  void master_seen(Guid guid, TimePoint at);
  // The engine's events (TakeoverStarted, TakeoverAborted, StateChanged).
  void on_event(const sm::RecordEvent& e, TimePoint now);
  // A line of OpenSM's log (smhad's log follower; the simulated fabric's
  // model). A line without a time stamp counts at `now`.
  void on_opensm_log(const opensm::LoggedEvent& e, TimePoint now);
  // Every census walk.
  void on_walk(const DiscoveryResult& r, TimePoint now);
  // True when the report waits for a census walk that should start now
  // (then walk_started()).
  bool wants_walk(TimePoint now) const;
  void walk_started() { walk_started_ = true; }
  // True while the report waits for our SA's first answer: Watchers asks it.
  bool wants_sa_answer() const { return pending_ && sa_probe_ && !pending_->sa_after_master; }
  // Our SA answered (anything, an error status too) at `at`.
  void on_sa_answer(TimePoint at);
  // Once our SA answers (without the probe: at SUBNET UP): the groups of the
  // copy to ask it about, once per report (empty: none to ask).
  std::vector<SaCopyInfo::Group> take_group_check();
  // The answers: `kept` with the copy's MLID; `lost` "MGID: why" for the others.
  void on_groups_checked(std::size_t checked, std::size_t kept, std::vector<std::string> lost);
  // Emits a report whose deadline passed; Watchers calls it at next_wakeup().
  void tick(TimePoint now);
  std::optional<TimePoint> next_wakeup() const;

  bool pending() const { return pending_.has_value(); }
  const std::optional<TakeoverReport>& last() const { return last_; }

 private:
  // What OpenSM logged since it last entered MASTER.
  struct LoggedMastership {
    std::optional<std::int64_t> master_us;  // its stamp
    TimePoint master_at{};                  // when it was read
    std::optional<Duration> from_discovering;
    std::optional<Duration> to_subnet_up;
    std::string engine;
    std::vector<std::string> failures;
    std::string sa_restore_error;
    bool subnet_up = false;
  };
  void take_log();
  void finish(std::string incomplete);
  void maybe_finish();

  std::vector<std::string> engines_;
  Duration deadline_;
  Emit emit_;
  Guid own_;
  bool walks_ = true;
  bool log_followed_ = true;
  bool sa_probe_ = false;
  std::function<std::optional<SaCopyInfo>()> sa_copy_source_;
  // Before a report: the last SM seen MASTER, and LIDs as the walks saw them.
  std::optional<Guid> last_master_;
  TimePoint last_master_at_{};
  TimePoint round_at_{};  // the current poll round's start
  std::map<Guid, Lid> lids_;
  std::map<Guid, std::vector<std::uint8_t>> lfts_;  // whole LFTs the walks read, by switch
  std::optional<TimePoint> takeover_at_;  // TakeoverStarted while not MASTER
  std::string takeover_cause_;
  bool master_ = false;
  std::optional<LoggedMastership> log_;
  // The last "Entering DISCOVERING state": its stamp, when it was read.
  std::optional<std::int64_t> discovering_us_;
  std::optional<TimePoint> discovering_at_;
  // The report being gathered (from MASTER on).
  std::optional<TakeoverReport> pending_;
  TimePoint master_at_{};
  bool subnet_up_ = false;
  bool walk_started_ = false;
  bool walk_done_ = false;
  std::vector<SaCopyInfo::Group> groups_to_check_;
  bool group_check_started_ = false;
  bool groups_done_ = true;
  std::optional<TakeoverReport> last_;
};

}  // namespace smha::fabric
