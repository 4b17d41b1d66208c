// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// OpensmLogFollower: follows the local OpenSM's log file (its -f) and finds every
// SM state change OpenSM logged there (`Entering MASTER state`, from
// osm_report_sm_state()), with OpenSM's own time stamp. A mastership shorter
// than one poll round is invisible to SMInfo polling; its log lines are not.
//
// Each poll() reads only what the file gained since the last one, at most
// `max_read` bytes (older bytes of a burst are skipped and counted), through
// FileSystem::read_tail: regular files only, never blocking. A file that is now
// shorter than what was read (OpenSM truncated it at log_max_size, or it was
// rotated) is read again from its start. An incomplete last line waits for the
// next poll (kept up to max_read bytes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "smha/os/file_system.hpp"

namespace smha::opensm {

// One `Entering <STATE> state` line.
struct LoggedSmState {
  std::string state;  // MASTER, STANDBY, DISCOVERING or NOTACTIVE
  std::string stamp;  // OpenSM's time stamp ("Dec 03 15:20:33 123456"), empty if the line has none
};

// A line the takeover report reads (fabric::TakeoverReporter).
struct LoggedEvent {
  enum class Kind : std::uint8_t {
    SmState,        // "Entering <STATE> state": text is the state
    SubnetUp,       // "SUBNET UP" (the end of a master's heavy sweep)
    RoutingFailed,  // "ucast_mgr_route: <engine>: cannot build ...", "No routing engine able ...":
                    // text is the failure ("ftree: cannot build lid matrices")
    RoutingDone,    // "<engine> tables configured on all switches": text is the engine
    SaRestoreFailed,  // the SA database file (sa_db_file) did not load, or not all of it:
                      // "ERR 4C02: Can't open sa db file ...", "PARSE ERROR: ...",
                      // "cannot create MC group with mlid ...": text is the message
  };
  Kind kind;
  std::string text;
  std::string stamp;  // OpenSM's time stamp, empty if the line has none
};
std::optional<LoggedEvent> parse_log_event(std::string_view line);
// OpenSM's time stamp ("Dec 04 17:50:03 842370") in microseconds since the
// start of its year (every February counted as 29 days: only differences of
// stamps in one log matter); nullopt if it is not one.
std::optional<std::int64_t> stamp_us(std::string_view stamp);

// The state change a log line reports, if it is one. Log file lines look like
// `Dec 03 15:20:33 123456 [7F0A] 0x80 -> Entering MASTER state`.
std::optional<LoggedSmState> parse_sm_state_line(std::string_view line);

class OpensmLogFollower {
 public:
  static constexpr std::size_t kDefaultMaxRead = 256 * 1024;

  OpensmLogFollower(const os::FileSystem& fs, std::string path, std::size_t max_read = kDefaultMaxRead);

  // Lines already in the file are history: the next poll() starts at its current
  // end (or at 0 if it does not exist yet).
  void skip_existing();
  // Lines appended since the last call that parse_log_event() knows, oldest first.
  std::vector<LoggedEvent> poll();

  const std::string& path() const { return path_; }
  std::uint64_t offset() const { return offset_; }
  std::uint64_t skipped_bytes() const { return skipped_; }  // not read: a burst above max_read
  std::uint64_t restarts() const { return restarts_; }      // truncations/rotations seen
  // The last read error ("not_found" while OpenSM has not created the file yet).
  const std::optional<Error>& last_error() const { return last_error_; }

 private:
  const os::FileSystem& fs_;
  std::string path_;
  std::size_t max_read_;
  std::uint64_t offset_ = 0;  // bytes of the file consumed, up to the end of the last full line
  std::uint64_t skipped_ = 0;
  std::uint64_t restarts_ = 0;
  std::optional<Error> last_error_;
};

}  // namespace smha::opensm
