// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// Process identity for adoption: a PID alone is not an identity (PIDs are reused),
// so the pidfile also records the process start time (/proc/<pid>/stat field 22,
// clock ticks since boot) and the executable (/proc/<pid>/exe).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "smha/core/result.hpp"

namespace smha::opensm {

struct ProcessIdentity {
  int pid = 0;
  std::uint64_t start_time = 0;  // /proc/<pid>/stat field 22 (starttime)
  std::string exe;               // /proc/<pid>/exe target, without " (deleted)"
  friend bool operator==(const ProcessIdentity&, const ProcessIdentity&) = default;
};

// Reads the identity of a live process from /proc. Errors: "not_found" if there is
// no such process (or it is a zombie: start time and exe no longer say anything),
// "io" otherwise (e.g. EACCES reading another user's /proc/<pid>/exe).
// `exe_deleted`, if given, is set when the executable was replaced on disk since
// the process started (a package upgrade): the kernel appends " (deleted)".
Result<ProcessIdentity> read_process_identity(int pid, bool* ret_exe_deleted = nullptr);

// Parses the `starttime` (field 22) out of a /proc/<pid>/stat line. The comm field
// (2) may contain spaces and parentheses; fields are counted after the last ')'.
Result<std::uint64_t> parse_proc_stat_start_time(std::string_view stat_line);

// How long ago a process with `start_time` (field 22, clock ticks since boot)
// started: CLOCK_BOOTTIME now minus start_time / _SC_CLK_TCK. Error "io" if the
// clock cannot be read, "range" if the start lies in the future.
Result<std::chrono::nanoseconds> process_age(std::uint64_t start_time);

// The argv of a live process (/proc/<pid>/cmdline). Errors as read_process_identity.
Result<std::vector<std::string>> read_process_cmdline(int pid);

// Whether `argv` (a running OpenSM's) carries `-F <conf_path>` and `-g <guid>`
// (also --config / --guid; the GUID compared as a number, so 0x10 == 0x0010).
// Empty conf_path or guid: that part is not checked.
bool opensm_argv_matches(const std::vector<std::string>& argv, const std::string& conf_path,
                         const std::string& guid);

// Pidfile text: "pid=<n>\nstart_time=<n>\nexe=<path>\n".
std::string format_pidfile(const ProcessIdentity& id);
// Errors: "parse" naming the line and what is wrong.
Result<ProcessIdentity> parse_pidfile(std::string_view text);

}  // namespace smha::opensm
