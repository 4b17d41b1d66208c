// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// OpensmSupervisor: keeps one OpenSM process running with the rendered opensm.conf.
//
// It starts OpenSM (argv from the daemon's ProcessSpec factory, normally
// `opensm -F <conf> -g <guid> ...`), logs its stdout/stderr attributed
// (`opensm[<pid>]: <line>`, logger "osm"), sorts every exit into a class and acts:
//   - requested (stop/restart/reload asked for it): nothing more;
//   - permanent (OpenSM printed a fatal start-up message such as a bind failure,
//     "No local ports detected!", "Permission denied" — OpenSM exits 0 on several
//     of these — or exited 2/255 = bad command line, or could not be executed):
//     no respawn, state Failed with the reason;
//   - a spawn that fails for want of resources (EMFILE, ENFILE, EAGAIN, ENOMEM:
//     code "resources") is retried after a doubling backoff (state Backoff), so
//     a head recovers by itself once the shortage ends;
//   - crash (anything else, including an unexpected exit 0 and death by signal):
//     respawn after a backoff of initial, 2x, 4x ... up to max, the doubling reset
//     once a run lasted `stable_uptime`; after `crash_loop_count` crashes within
//     `crash_loop_window`, state Failed with a crash-loop reason. A crash loop is
//     retried, forever, one spawn per `crash_loop_retry` (`crash_loop_retry_no_master`
//     while no SM is master anywhere: set_no_master()); a retried run that
//     crashes before `stable_uptime` fails again at once.
// It does not judge health: whether OpenSM answers SMInfo is the caller's business.
// The caller can force a restart (`restart`) when OpenSM hangs, and observes the
// process through `status()`, `on_change` and `on_line` (e.g. "SUBNET UP").
//
// Adoption: after each spawn it writes a pidfile (pid, /proc start time, exe).
// start() first looks at that pidfile; if it names a live process with the same
// start time whose exe is `expected_exe` and whose command line carries the
// spec's `-F <conf>` and `-g <guid>` (not an OpenSM someone else started), it
// adopts it (no new OpenSM, so a smhad restart does not move mastership). Otherwise the pidfile is stale: it is ignored
// and replaced after the spawn. Before every spawn it also looks in procfs for an
// OpenSM already bound to the spec's port GUID (`-g`, or the `guid` of the conf
// its `-F` names): one with our -F and -g and our exe is adopted (a lost or stale
// pidfile); any other makes the spawn fail ("foreign", state Failed) rather than
// start a second OpenSM on the port. Destroying the supervisor leaves OpenSM running
// (when `keep_running_on_exit`, the default, OpenSM is also spawned without a
// parent-death signal so it survives smhad's exit).
//
// All waiting and every duration is on the injected Scheduler (smhad: asio
// timers; the simulated fabric: its virtual clock). One thread, no locks: use it
// from the scheduler's event loop.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "smha/core/clock.hpp"
#include "smha/core/result.hpp"
#include "smha/core/scheduler.hpp"
#include "smha/opensm/process_identity.hpp"
#include "smha/os/file_system.hpp"
#include "smha/os/process_runner.hpp"

namespace spdlog {
class logger;
}

namespace smha::opensm {

// How a new opensm.conf must be applied (the renderer classifies the change from
// the opensm_conf key table; the daemon maps its result to this).
enum class ConfChangeKind {
  None,     // nothing OpenSM reads changed (e.g. only the header comment)
  Sighup,   // only keys OpenSM re-reads on SIGHUP (can_update=1) changed
  Restart,  // a key OpenSM reads only at start changed
};
struct ConfChange {
  ConfChangeKind kind = ConfChangeKind::None;
  std::string restart_key;  // Restart: the (first) key that forced it, for the log
};

enum class SupervisorState {
  Stopped,   // not started, or stopped on request
  Running,   // a process is running (spawned or adopted)
  Backoff,   // crashed; respawn scheduled at next_start_at
  Stopping,  // SIGTERM sent, waiting (SIGKILL after stop_timeout)
  Failed,    // permanent failure or crash loop: not restarting; see reason
};
std::string_view to_string(SupervisorState state);  // "stopped", "running", ...

enum class ExitClass { Requested, Crash, Permanent };
std::string_view to_string(ExitClass c);  // "requested", "crash", "permanent"

// "exited with status 1", "killed by signal 11 (SEGV)", "exited (status unknown)".
std::string describe_exit(const os::ExitInfo& exit);

// Returns the permanent-failure description if `line` is one of OpenSM's fatal
// start-up messages (main.c, libvendor/osm_vendor_ibumad.c), else nullopt.
std::optional<std::string_view> match_permanent_line(std::string_view line);

struct SupervisorStatus {
  SupervisorState state = SupervisorState::Stopped;
  int pid = 0;                       // running (or stopping) process, else 0
  bool adopted = false;              // the running process was adopted, not spawned
  std::optional<TimePoint> started_at;   // adopted: the process's real start (procfs), when known
  std::optional<TimePoint> next_start_at;  // Backoff
  int spawns = 0;                    // processes started by this supervisor
  int restarts = 0;                  // spawns that replaced an earlier process (spawned or adopted)
  int crashes = 0;                   // crash exits seen by this supervisor
  int crash_loop_retries = 0;        // retries after a crash loop (their spawns count in spawns)
  // Failed by a crash loop: retried at next_start_at. A retried run is on
  // probation (`retrying`) until it lasted stable_uptime.
  bool crash_looped = false;
  bool retrying = false;
  int consecutive_crashes = 0;       // drives the backoff; 0 after a stable run
  Duration current_backoff{};        // delay used for the scheduled respawn
  std::optional<os::ExitInfo> last_exit;
  std::optional<ExitClass> last_exit_class;
  std::string reason;                // Failed/Backoff: why; else the last exit, if any
};

struct SupervisorOptions {
  std::string conf_path;                 // where opensm.conf is written (the spec must point at it)
  unsigned conf_mode = 0600;             // it carries the SM key
  std::string pidfile_path;              // empty: no pidfile, no adoption
  // OpenSM's own log file (its -f): on a start-up failure or crash, the ERR lines
  // this run appended to it give the reason in OpenSM's words. Empty: not read.
  std::string log_file;
  std::string expected_exe;              // adoption check; empty: realpath(spec.path)
  bool keep_running_on_exit = true;      // no parent-death signal; see doc/supervision.md
  Duration backoff_initial = seconds(1);
  Duration backoff_max = seconds(60);
  Duration stable_uptime = seconds(60);  // a run this long resets the backoff
  int crash_loop_count = 5;              // this many crashes ...
  Duration crash_loop_window = seconds(300);  // ... within this window: Failed
  // A crash loop is retried after this long (from the failure) while an SM is
  // MASTER elsewhere, and after crash_loop_retry_no_master while none is.
  Duration crash_loop_retry = seconds(600);
  Duration crash_loop_retry_no_master = seconds(60);
  Duration stop_timeout = seconds(10);   // SIGTERM -> SIGKILL (the whole group)
  // After a crash, wait in Backoff for request_respawn() instead of respawning
  // when the backoff ends: the HA engine decides when a crashed OpenSM comes
  // back and at which priority (a master's must not race the peer taking over).
  // The backoff is then the least delay before that respawn.
  bool respawn_on_request = false;
  // Called after every state change (and each new pid), on the event loop.
  std::function<void(const SupervisorStatus&)> on_change;
  // Every OpenSM output line (after it was logged), for readiness cues.
  std::function<void(int pid, std::string_view line)> on_line;
  // Identity of a live process; default read_process_identity (tests/sim inject).
  std::function<Result<ProcessIdentity>(int pid)> identify;
  // How long ago an adopted process started (its uptime in status); default
  // process_age of its start time. An error: uptime counted from the adoption.
  std::function<Result<std::chrono::nanoseconds>(const ProcessIdentity&)> age;
  // Command line of a live process; default read_process_cmdline. Adoption
  // also requires the spec's `-F <conf>` and `-g <guid>` in it.
  std::function<Result<std::vector<std::string>>(int pid)> cmdline;
  // Every live OpenSM bound to a port GUID; default find_opensm_bound_to (procfs).
  // Consulted before each spawn: one carrying the spec's -F and -g whose exe is
  // expected_exe is adopted; any other refuses the spawn (Failed, no second OpenSM).
  std::function<std::vector<BoundOpensm>(std::uint64_t guid)> find_bound;
};

struct StartReport {
  bool adopted = false;
  // Adopted, and the running OpenSM's file differs from `conf_text`: the file was
  // left alone; call reload(conf_text, change) with the change classified against
  // the file on disk.
  bool conf_differs = false;
};

enum class ReloadAction {
  Unchanged,   // file content equal: nothing written, nothing signalled
  Written,     // file rewritten; OpenSM not running or change kind None
  Signalled,   // file rewritten and SIGHUP sent
  Restarted,   // file rewritten and a restart begun
  Retried,     // while Failed (file changed or not): the failure was cleared and OpenSM started
};
std::string_view to_string(ReloadAction a);

class OpensmSupervisor {
 public:
  using SpecFactory = std::function<os::ProcessSpec()>;

  // References must outlive the supervisor.
  OpensmSupervisor(Scheduler& sched, os::ProcessRunner& runner, os::FileSystem& fs,
                   SpecFactory make_spec, SupervisorOptions options);
  // Leaves OpenSM running (adoptable by the next supervisor); cancels timers.
  ~OpensmSupervisor();

  OpensmSupervisor(const OpensmSupervisor&) = delete;
  OpensmSupervisor& operator=(const OpensmSupervisor&) = delete;

  // Adopts the OpenSM named by the pidfile, or writes `conf_text` to conf_path (if it
  // differs) and spawns OpenSM. Allowed in Stopped and Failed.
  // Errors: "busy" (not Stopped/Failed), "io" (conf not written: nothing started),
  // "exec"/"failed" (OpenSM could not be started: state Failed, reason set),
  // "foreign" (another OpenSM is bound to the port GUID: state Failed, none started).
  // Out of resources at spawn is not an error: state Backoff, retried.
  Result<StartReport> start(std::string_view conf_text);

  // Takes over an OpenSM left running on this head (the pidfile's, or one bound
  // to the port GUID with our -F, -g and executable) without writing the file
  // or signalling it; true if one was adopted (then Running). Only in Stopped.
  // smhad calls it before its engine decides anything, so that an OpenSM which
  // is slow to answer its first query is still known to run (a MASTER then
  // keeps its priority) rather than "started" at a standby value.
  bool adopt_running();

  // Stops OpenSM: SIGTERM to its process group, SIGKILL to the group after
  // stop_timeout. `done` runs on the event loop once the process is gone (at once,
  // posted, if nothing runs). A pending respawn is cancelled. Ends in Stopped.
  void stop(std::function<void()> done = {});

  // Caller-detected trouble (e.g. the local SM stopped answering SMInfo): stops the
  // process (TERM, then KILL) and respawns it. counts_as_crash: the exit goes through
  // the crash accounting (backoff, crash loop); otherwise it respawns at once.
  // Errors: "conflict" unless Running.
  Status restart(std::string reason, bool counts_as_crash);

  // respawn_on_request: in Backoff, respawn once the backoff has run out (at
  // once if it has). Elsewhere, and without that option, nothing.
  void request_respawn();

  // Whether no SM answers MASTER anywhere on the fabric (the HA engine's
  // view, fed every poll round). Chooses the crash-loop retry delay; a
  // pending retry is brought forward when the fabric loses its master.
  void set_no_master(bool no_master);

  // The log file a failed run's reason is read from (opensm.log_file, as a
  // reload changes it): used from OpenSM's next start on.
  void set_log_file(std::string path) { options_.log_file = std::move(path); }

  // Applies a new opensm.conf: writes it (atomically, conf_mode) only if it differs
  // from the file on disk, then per `change`: Sighup -> SIGHUP to OpenSM; Restart ->
  // restart (logging the key); None -> nothing. While Failed, the failure is
  // cleared and OpenSM started again at once, whether the file changed or not
  // (the fix may be in the new file, or outside it: a restored GUID, a directory).
  // Errors: "io" (file not written; nothing else done).
  Result<ReloadAction> reload(std::string_view conf_text, const ConfChange& change);

  const SupervisorStatus& status() const { return status_; }

 private:
  enum class AfterStop { Nothing, Respawn, RespawnAsCrash };

  Status write_conf_if_changed(std::string_view conf_text, bool& ret_changed);
  Result<bool> try_adopt();
  bool adopt_process(const ProcessIdentity& live, std::string_view why);
  enum class BoundCheck { Free, Adopted, Foreign };
  // Before a spawn: is an OpenSM already bound to the spec's port GUID (procfs)?
  // Ours (our -F and -g, our exe): adopted. Another: Foreign, bound_reason_ says which.
  BoundCheck check_bound(const os::ProcessSpec& spec);
  Status spawn_now();
  void on_output(std::uint64_t run, os::OutputStream stream, std::string_view line);
  void on_exit(std::uint64_t run, const os::ExitInfo& exit);
  void handle_crash(const os::ExitInfo& exit, Duration uptime, const std::string& what);
  void fail(std::string reason);
  // Failed by a crash loop: schedules the retry (arm_retry()).
  void fail_crash_loop(std::string reason);
  // Clears the crash accounting and the crash-loop retry (start, stop, reload
  // of a failed head, a permanent failure).
  void forget_crashes();
  void arm_retry();
  void retry_crash_loop();
  // The ERR lines OpenSM wrote to its own log during this run: the first one
  // (a start-up failure) or the last ones (a crash).
  enum class LogPick { First, Last };
  std::optional<std::string> log_error(LogPick pick = LogPick::First) const;
  // A spawn failed for want of descriptors, processes or memory: Backoff, and
  // try again after the (doubling) backoff. Not a crash, not Failed.
  void retry_spawn_later(std::string what);
  void begin_stop(AfterStop after);
  void notify();
  // Cancels the timer in `slot`, if any, and arms it for `fn` after `delay`.
  void arm(std::optional<Scheduler::TimerId>& slot, Duration delay, std::function<void()> fn);
  void disarm(std::optional<Scheduler::TimerId>& slot);
  std::string expected_exe() const;

  Scheduler& sched_;
  os::ProcessRunner& runner_;
  os::FileSystem& fs_;
  SpecFactory make_spec_;
  SupervisorOptions options_;
  std::shared_ptr<spdlog::logger> log_;

  SupervisorStatus status_;
  std::uint64_t run_ = 0;                  // generation of the current process
  std::optional<std::string> permanent_;   // fatal start-up line seen in this run
  bool respawn_requested_ = false;         // respawn_on_request: asked since the crash
  bool had_process_ = false;               // an OpenSM ran (spawned or adopted) before
  int resource_retries_ = 0;               // consecutive spawns that failed for want of resources
  std::size_t permanent_rank_ = 0;         // its kPermanentLines index (lower: more specific)
  bool came_up_ = false;                   // this run printed an SM state line
  std::deque<std::string> recent_lines_;   // last few output lines of this run
  std::uint64_t log_offset_ = 0;           // log_file's size when this run started
  std::deque<TimePoint> crash_times_;      // within crash_loop_window
  AfterStop after_stop_ = AfterStop::Nothing;
  std::string restart_reason_;
  std::string bound_reason_;
  std::vector<std::function<void()>> stop_waiters_;
  std::optional<Scheduler::TimerId> backoff_timer_;
  std::optional<Scheduler::TimerId> kill_timer_;
  std::optional<Scheduler::TimerId> stable_timer_;  // ends a retried run's probation
  TimePoint failed_at_{};                            // when the crash loop failed
  std::string crash_reason_;                         // its reason, before the retry's words
  bool no_master_ = false;                           // set_no_master()
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);  // handlers hold a weak_ptr
};

}  // namespace smha::opensm
