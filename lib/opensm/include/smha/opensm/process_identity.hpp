// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// Process identity for adoption: a PID alone is not an identity (PIDs are reused),
// so the pidfile also records the process start time (/proc/<pid>/stat field 22,
// clock ticks since boot) and the executable (/proc/<pid>/exe).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
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
// clock cannot be read, "invalid" if the start lies in the future.
Result<std::chrono::nanoseconds> process_age(std::uint64_t start_time);

// The argv of a live process (/proc/<pid>/cmdline). Errors as read_process_identity.
Result<std::vector<std::string>> read_process_cmdline(int pid);

// Whether `argv` (a running OpenSM's) carries `-F <conf_path>` and `-g <guid>`
// (also --config / --guid; the GUID compared as a number, so 0x10 == 0x0010).
// Empty conf_path or guid: that part is not checked.
bool opensm_argv_matches(const std::vector<std::string>& argv, const std::string& conf_path,
                         const std::string& guid);

// The port GUID an OpenSM command line binds to: its `-g`/`--guid` value or, when
// it has none, the `guid` line of the opensm.conf its `-F`/`--config` names (read
// only if it is a small regular file). nullopt: neither names a GUID (OpenSM then
// binds the first active port, which this check cannot tell).
std::optional<std::uint64_t> opensm_argv_guid(const std::vector<std::string>& argv);

// Whether `argv` / `exe` look like an OpenSM: the basename of argv[0], of argv[1]
// (a script run by an interpreter) or of exe is "opensm".
bool looks_like_opensm(const std::vector<std::string>& argv, const std::string& exe);

// The GUID value of `s` ("0x0002c903...", "0002c903...", as OpenSM reads it).
std::optional<std::uint64_t> parse_guid_value(std::string_view s);

struct BoundOpensm {
  int pid = 0;
  std::vector<std::string> argv;
  std::string exe;
};
// Every live OpenSM process on this host (procfs) whose port GUID (see
// opensm_argv_guid) is `guid`, except `except_pid`. Under ibsim (umad2sim), a
// process whose IBSIM_SOCKNAME differs from ours runs on another simulated
// fabric and is left out. Processes that vanish while being read are skipped.
std::vector<BoundOpensm> find_opensm_bound_to(std::uint64_t guid, int except_pid = 0);

// Pidfile text: "pid=<n>\nstart_time=<n>\nexe=<path>\n".
std::string format_pidfile(const ProcessIdentity& id);
// Errors: "parse" naming the line and what is wrong.
Result<ProcessIdentity> parse_pidfile(std::string_view text);

}  // namespace smha::opensm
