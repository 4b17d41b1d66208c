// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// Fabric health, error counters (doc/health.md, "Error counters"): the PMA
// PortCounters of every active port the census walks found, read one MAD at
// a time at a fixed rate (a budget, not a burst) and kept as deltas, so that
// "rising" means risen between two reads of this head, within a window.
//
// Only the head whose OpenSM is MASTER reads (Watchers says so through
// set_reading(), after it has been master for a while): there is exactly one
// such head, so the fabric is read once; a standby's MADs stay free for a
// takeover; and the master's head has no takeover to make.
//
// A counter that went down was cleared by someone (ibqueryerrors -k, a PMA
// reset): its rise since is its value, and the clear is counted. A counter at
// its maximum is saturated: it no longer rises, so it is flagged, not
// trusted. An answer for another port than asked, a failed read, or a port
// whose counters go down more than kMaxResets times within the window is
// unknown: shown, never an alarm. The link_errors alarm is raised when at
// least `alarm_min_ports` ports have a counter risen by its threshold within
// the window.
//
// Single-threaded on the owner's event loop.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "smha/core/alarm.hpp"
#include "smha/core/scheduler.hpp"
#include "smha/fabric/discovery.hpp"
#include "smha/fabric/health.hpp"
#include "smha/mad/transport.hpp"

namespace smha::fabric {

struct ErrorsConfig {
  bool enabled = true;                  // off with the census
  double reads_per_second = 20;         // PortCounters MADs a second at most (0: off)
  Duration start_after = seconds(30);   // master this long before the first read
  Duration window = seconds(3600);      // "rising": risen within this long
  // Rises within the window at which a port counts against the alarm, by
  // mad::ErrorCounter (SymbolErrors, LinkErrorRecovery, LinkDowned,
  // RcvErrors, LocalLinkIntegrity, ExcessiveBufferOverrun, XmitDiscards,
  // Vl15Dropped).
  mad::ErrorCounts thresholds{10, 3, 1, 10, 1, 1, 100, 100};
  bool alarm = true;                    // raise link_errors
  std::size_t alarm_min_ports = 1;
  std::size_t max_ports = 1000;         // ports listed
  std::size_t max_tracked = 100000;     // ports kept (a walk's beyond are not read)
  std::size_t max_descriptions = 32;    // NodeDescription reads per pass, to name listed ports
  mad::RequestOptions request{milliseconds(200), 1, 0};
};

// A port whose counters went down this often within the window is unknown.
inline constexpr int kMaxResets = 3;
// Rise samples kept per port (older ones are merged).
inline constexpr std::size_t kMaxSamples = 64;

struct ErrorPort {
  LinkEndRef where;                 // node, type, port, path, description
  Lid lid;                          // the PMA's LID (a switch's for all its ports)
  mad::ErrorCounts value{};         // as last read
  mad::ErrorCounts rise{};          // risen within the window
  std::array<bool, mad::kErrorCounterCount> saturated{};  // at its maximum: its rise is not known
  std::optional<TimePoint> since;   // first rise seen in this run of rises (unset: old errors only)
  std::optional<TimePoint> read_at; // last answered read
  double per_hour = 0;              // all rises within the window, per hour
  bool over = false;                // a rise reached its threshold
  bool unknown = false;             // the last read failed, or the counters cannot be trusted
  std::string why_unknown;
  int resets = 0;                   // times its counters went down within the window
};

struct ErrorsSnapshot {
  std::string state = "off";        // "reading", "waiting" (master, settling), "standby" (not master), "off"
  std::size_t ports = 0;            // active ports to read (from the last walk)
  std::size_t read = 0;             // with at least one answered read
  std::size_t unknown = 0;
  std::size_t with_errors = 0;      // some counter non-zero
  std::size_t rising = 0;           // some counter risen within the window
  std::size_t over = 0;             // over a threshold
  std::map<mad::ErrorCounter, std::size_t> rising_by_counter;
  std::uint64_t reads = 0;          // PortCounters requests sent
  std::uint64_t failures = 0;       // of them: no answer, a status, malformed
  std::uint64_t wrong_port = 0;     // answers naming another port than asked
  std::uint64_t resets = 0;         // counters seen going down (cleared by someone)
  std::uint64_t description_mads = 0;
  std::uint64_t passes = 0;         // full passes over the ports
  std::optional<Duration> last_pass;
  std::vector<ErrorPort> listed;    // worst first, at most max_ports: over, then rising, then errors
};

class PortErrors {
 public:
  // `sched`, `mad` and `sink` must outlive it.
  PortErrors(ErrorsConfig cfg, Scheduler& sched, mad::MadTransport& mad, AlarmSink& sink);
  ~PortErrors();
  PortErrors(const PortErrors&) = delete;
  PortErrors& operator=(const PortErrors&) = delete;

  // A finished census walk: the active ports and their PMAs' LIDs. Ports no
  // longer found are forgotten; those found again keep their history.
  void on_walk(const DiscoveryResult& walk);
  // Whether this head reads now, and, when it does not, why ("waiting",
  // "standby"). Stopping drops the read in flight and clears the alarm; the
  // counters read so far stay shown, and a restart reads each port afresh
  // before a rise counts.
  void set_reading(bool on, const std::string& why_not = "standby");
  void stop();
  ErrorsSnapshot snapshot() const;
  const ErrorsConfig& config() const { return cfg_; }

 private:
  struct Port;
  void arm();
  void tick();
  void read_counters(const std::pair<Guid, std::uint8_t>& key);
  void on_counters(const std::pair<Guid, std::uint8_t>& key, Result<mad::PortCountersReply> r);
  void forget_old(Port& p, TimePoint now);
  bool is_over(const Port& p) const;
  void note_over(const std::pair<Guid, std::uint8_t>& key, bool over);
  void update_alarm();

  ErrorsConfig cfg_;
  Scheduler& sched_;
  mad::MadTransport& mad_;
  AlarmSink& sink_;
  std::map<std::pair<Guid, std::uint8_t>, Port> ports_;
  std::vector<std::pair<Guid, std::uint8_t>> order_;  // read order (the walk's)
  std::size_t next_ = 0;
  bool reading_ = false;
  std::string state_ = "off";
  std::optional<Scheduler::TimerId> timer_;
  std::shared_ptr<int> generation_;     // reads in flight hold a weak_ptr: dropped on stop
  bool in_flight_ = false;
  std::optional<TimePoint> pass_started_;
  std::size_t pass_descriptions_ = 0;
  std::map<Guid, std::string> names_;   // NodeDescriptions, by node GUID (bounded)
  std::deque<std::pair<Guid, DrPath>> to_name_;  // listed ports' nodes not yet named
  std::set<Guid> naming_;               // of to_name_
  std::set<std::pair<Guid, std::uint8_t>> over_;  // ports over a threshold (the alarm's)
  ErrorsSnapshot counts_;               // the running counters (reads, failures, ...)
  std::string alarm_detail_;
};

}  // namespace smha::fabric
