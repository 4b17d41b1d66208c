// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/opensm/supervisor.hpp"

#include <signal.h>
#include <sys/stat.h>
#include <string.h>

#include <climits>
#include <cstdint>
#include <cstdlib>
#include <utility>

#include <spdlog/spdlog.h>

#include "smha/core/logger.hpp"

namespace smha::opensm {

namespace {

std::shared_ptr<spdlog::logger> osm_logger() { return named_logger("osm"); }

// OpenSM's fatal start-up messages on stdout/stderr (opensm/main.c,
// libvendor/osm_vendor_ibumad.c), with what they mean for an operator. Several of
// these paths end in exit(0), so the exit status alone cannot tell. Order matters:
// the first needle contained in a line wins.
struct PermanentLine {
  std::string_view needle;
  std::string_view meaning;
};
constexpr PermanentLine kPermanentLines[] = {
    {"Error from osm_opensm_bind", "cannot bind to the port (GUID not on this node, or another SM holds it)"},
    {"Perhaps another instance of OpenSM is already running",
     "cannot bind to the port (GUID not on this node, or another SM holds it)"},
    {"Unable to register class", "cannot register the SM management class (another SM holds the port)"},
    {"Unable to find requested CA guid", "the port GUID is not on this node"},
    {"No local ports detected!", "no local InfiniBand port"},
    {"Error from osm_vendor_get_all_port_attr", "cannot list the local InfiniBand ports"},
    // osm_log_init: log_file cannot be opened (e.g. its directory is missing); OpenSM
    // then prints "Error from osm_opensm_init" and exits 42.
    {"Cannot open file '", "cannot open its log file (does the directory of opensm.log_file exist?)"},
    {"Error from osm_opensm_init_finish", "initialisation failed (e.g. corrupt guid2lid with exit_on_fatal)"},
    {"Error from osm_opensm_init", "initialisation failed (umad device missing or not accessible)"},
    {"Invalid GUID specified", "no port GUID given in daemon mode"},
    {"Permission denied", "permission denied"},
};

// SYS lines printed only once OpenSM is bound and has swept: fatal start-up
// messages after one of these are not start-up failures. Not "Entering
// DISCOVERING state": OpenSM 3.3.23 prints that in osm_opensm_init, before the
// bind (measured under ibsim: DISCOVERING, then "Error from osm_opensm_bind").
constexpr std::string_view kCameUpLines[] = {"Entering STANDBY state", "Entering MASTER state", "SUBNET UP"};

constexpr std::size_t kRecentLines = 5;

// The value following `opt` in `argv`, or "".
std::string option_of(const std::vector<std::string>& argv, std::string_view opt) {
  for (std::size_t i = 1; i + 1 < argv.size(); ++i)
    if (argv[i] == opt) return argv[i + 1];
  return {};
}

std::string seconds_text(Duration d) {
  char buf[32];
  snprintf(buf, sizeof buf, "%.3gs", to_ms(d) / 1000.0);
  return buf;
}

}  // namespace

std::string_view to_string(SupervisorState state) {
  switch (state) {
    case SupervisorState::Stopped: return "stopped";
    case SupervisorState::Running: return "running";
    case SupervisorState::Backoff: return "backoff";
    case SupervisorState::Stopping: return "stopping";
    case SupervisorState::Failed: return "failed";
  }
  return "unknown";
}

std::string_view to_string(ExitClass c) {
  switch (c) {
    case ExitClass::Requested: return "requested";
    case ExitClass::Crash: return "crash";
    case ExitClass::Permanent: return "permanent";
  }
  return "unknown";
}

std::string_view to_string(ReloadAction a) {
  switch (a) {
    case ReloadAction::Unchanged: return "unchanged";
    case ReloadAction::Written: return "written";
    case ReloadAction::Signalled: return "signalled";
    case ReloadAction::Restarted: return "restarted";
    case ReloadAction::Retried: return "retried";
  }
  return "unknown";
}

std::string describe_exit(const os::ExitInfo& exit) {
  if (exit.signaled) {
    const char* abbrev = sigabbrev_np(exit.status);
    return "killed by signal " + std::to_string(exit.status) + " (" + (abbrev ? abbrev : "?") + ")";
  }
  if (exit.status < 0) return "exited (status unknown)";
  return "exited with status " + std::to_string(exit.status);
}

namespace {
// Index of the first kPermanentLines entry `line` matches (earlier = more specific).
std::optional<std::size_t> permanent_index(std::string_view line) {
  for (std::size_t i = 0; i < std::size(kPermanentLines); ++i)
    if (line.find(kPermanentLines[i].needle) != std::string_view::npos) return i;
  return std::nullopt;
}
}  // namespace

std::optional<std::string_view> match_permanent_line(std::string_view line) {
  if (auto i = permanent_index(line)) return kPermanentLines[*i].meaning;
  return std::nullopt;
}

OpensmSupervisor::OpensmSupervisor(Scheduler& sched, os::ProcessRunner& runner, os::FileSystem& fs,
                                   SpecFactory make_spec, SupervisorOptions options)
    : sched_(sched),
      runner_(runner),
      fs_(fs),
      make_spec_(std::move(make_spec)),
      options_(std::move(options)),
      log_(osm_logger()) {
  if (!options_.identify) options_.identify = [](int pid) { return read_process_identity(pid); };
  if (!options_.age) options_.age = [](const ProcessIdentity& id) { return process_age(id.start_time); };
  if (!options_.cmdline) options_.cmdline = [](int pid) { return read_process_cmdline(pid); };
  if (!options_.find_bound)
    options_.find_bound = [](std::uint64_t guid) { return find_opensm_bound_to(guid); };
}

OpensmSupervisor::~OpensmSupervisor() {
  disarm(backoff_timer_);
  disarm(kill_timer_);
  if (status_.pid != 0 && status_.state != SupervisorState::Stopping)
    log_->info("supervisor going away; OpenSM pid {} keeps running (adoptable)", status_.pid);
}

void OpensmSupervisor::arm(std::optional<Scheduler::TimerId>& slot, Duration delay, std::function<void()> fn) {
  disarm(slot);
  slot = sched_.schedule_at(sched_.now() + delay, [&slot, fn = std::move(fn)] {
    slot.reset();
    fn();
  });
}

void OpensmSupervisor::disarm(std::optional<Scheduler::TimerId>& slot) {
  if (slot) sched_.cancel(*slot);
  slot.reset();
}

std::string OpensmSupervisor::expected_exe() const {
  if (!options_.expected_exe.empty()) return options_.expected_exe;
  auto spec = make_spec_();
  char buf[PATH_MAX];
  if (::realpath(spec.path.c_str(), buf) == nullptr) return spec.path;
  return buf;
}

void OpensmSupervisor::notify() {
  if (options_.on_change) options_.on_change(status_);
}

Status OpensmSupervisor::write_conf_if_changed(std::string_view conf_text, bool& ret_changed) {
  auto current = fs_.read(options_.conf_path);
  ret_changed = !(current.ok() && *current == conf_text);
  if (!ret_changed) {
    // Unchanged content, but it carries the SM_Key: a file left readable by
    // others (an older smhad, a hand edit) is rewritten with conf_mode.
    struct stat st {};
    if (::stat(options_.conf_path.c_str(), &st) == 0 && (st.st_mode & 07777) != options_.conf_mode) {
      if (auto w = fs_.write_atomic(options_.conf_path, conf_text, options_.conf_mode); !w) {
        log_->error("cannot rewrite {} with mode {:o}: {}", options_.conf_path, options_.conf_mode, w.error().message);
        return w;
      }
      log_->warn("{} had mode {:o}; rewritten with mode {:o} (it holds the SM_Key)", options_.conf_path,
                 st.st_mode & 07777, options_.conf_mode);
    }
    return Status::Ok();
  }
  auto st = fs_.write_atomic(options_.conf_path, conf_text, options_.conf_mode);
  if (!st) {
    log_->error("cannot write {}: {}", options_.conf_path, st.error().message);
    return st;
  }
  log_->info("wrote {} ({} bytes)", options_.conf_path, conf_text.size());
  return Status::Ok();
}

void OpensmSupervisor::forget_crashes() {
  crash_times_.clear();
  status_.consecutive_crashes = 0;
  status_.crash_looped = false;
  status_.retrying = false;
  disarm(backoff_timer_);
  disarm(stable_timer_);
}

Result<StartReport> OpensmSupervisor::start(std::string_view conf_text) {
  if (status_.state != SupervisorState::Stopped && status_.state != SupervisorState::Failed)
    return make_error(Errc::Busy, std::string("start: supervisor is ") + std::string(to_string(status_.state)));
  forget_crashes();
  status_.reason.clear();

  auto adopted = try_adopt();
  if (adopted.ok() && *adopted) {
    auto current = fs_.read(options_.conf_path);
    StartReport report{true, !(current.ok() && *current == conf_text)};
    if (report.conf_differs)
      log_->warn("adopted OpenSM pid {} runs the previous {}; the new one is not applied until reload",
                 status_.pid, options_.conf_path);
    return report;
  }

  bool changed = false;
  if (auto st = write_conf_if_changed(conf_text, changed); !st) return st.error();
  if (auto st = spawn_now(); !st) return st.error();
  return StartReport{};
}

bool OpensmSupervisor::adopt_running() {
  if (status_.state != SupervisorState::Stopped) return false;
  auto adopted = try_adopt();
  if (adopted.ok() && *adopted) return true;
  return check_bound(make_spec_()) == BoundCheck::Adopted;
}

Result<bool> OpensmSupervisor::try_adopt() {
  if (options_.pidfile_path.empty()) return false;
  auto text = fs_.read(options_.pidfile_path);
  if (!text) {
    if (text.error().code != Errc::NotFound)
      log_->warn("cannot read pidfile: {}; starting a new OpenSM", text.error().message);
    return false;
  }
  auto recorded = parse_pidfile(*text);
  if (!recorded) {
    log_->warn("ignoring malformed pidfile {}: {}", options_.pidfile_path, recorded.error().message);
    return false;
  }
  auto live = options_.identify(recorded->pid);
  if (!live) {
    log_->info("stale pidfile {}: pid {} is gone ({}); starting a new OpenSM", options_.pidfile_path,
               recorded->pid, live.error().message);
    return false;
  }
  if (live->start_time != recorded->start_time) {
    log_->info("stale pidfile {}: pid {} is another process (start time {} != {}); starting a new OpenSM",
               options_.pidfile_path, recorded->pid, live->start_time, recorded->start_time);
    return false;
  }
  const std::string want = expected_exe();
  if (live->exe != recorded->exe || live->exe != want) {
    log_->info("stale pidfile {}: pid {} runs {}, expected {}; starting a new OpenSM", options_.pidfile_path,
               recorded->pid, live->exe, want);
    return false;
  }
  // Same pid, start time and exe is not enough: it must be the OpenSM this
  // head starts (our -F and -g), not one someone else started on this host.
  {
    const auto spec = make_spec_();
    const std::string conf = option_of(spec.argv, "-F");
    const std::string guid = option_of(spec.argv, "-g");
    auto argv = options_.cmdline(recorded->pid);
    if (!argv || !opensm_argv_matches(*argv, conf, guid)) {
      std::string got;
      if (argv)
        for (const auto& a : *argv) got += (got.empty() ? "" : " ") + a;
      log_->warn("pidfile {} names pid {} ({}), which is not the OpenSM of this head (its command line \"{}\" "
                 "lacks -F {} -g {}); not adopting it",
                 options_.pidfile_path, recorded->pid, live->exe, argv ? got : argv.error().message, conf, guid);
      return false;
    }
  }
  return adopt_process(*live, "left running by an earlier smhad");
}

bool OpensmSupervisor::adopt_process(const ProcessIdentity& live, std::string_view why) {
  const std::uint64_t run = ++run_;
  std::weak_ptr<int> alive = alive_;
  auto st = runner_.adopt(live.pid, [this, alive, run](const os::ExitInfo& exit) {
    if (!alive.expired()) on_exit(run, exit);
  });
  if (!st) {
    log_->warn("cannot adopt OpenSM pid {}: {}; starting a new OpenSM", live.pid, st.error().message);
    return false;
  }
  permanent_.reset();
  came_up_ = true;  // it ran before we came: no start-up failure to classify
  recent_lines_.clear();
  status_.state = SupervisorState::Running;
  status_.pid = live.pid;
  status_.adopted = true;
  had_process_ = true;
  status_.started_at = sched_.now();
  if (auto age = options_.age(live); age.ok()) {
    status_.started_at = sched_.now() - std::chrono::duration_cast<Duration>(*age);
  } else {
    log_->warn("cannot tell when OpenSM pid {} started: {}; its uptime counts from now", status_.pid,
               age.error().message);
  }
  status_.next_start_at.reset();
  log_->info("adopted running OpenSM pid {} ({}), {}", status_.pid, live.exe, why);
  notify();
  return true;
}

OpensmSupervisor::BoundCheck OpensmSupervisor::check_bound(const os::ProcessSpec& spec) {
  const std::string guid_text = option_of(spec.argv, "-g");
  const auto guid = parse_guid_value(guid_text);
  if (!guid || !options_.find_bound) return BoundCheck::Free;
  const std::string conf = option_of(spec.argv, "-F");
  for (auto& b : options_.find_bound(*guid)) {
    std::string argv;
    for (const auto& a : b.argv) argv += (argv.empty() ? "" : " ") + a;
    if (opensm_argv_matches(b.argv, conf, guid_text)) {
      auto live = options_.identify(b.pid);
      const std::string want = expected_exe();
      if (live && live->exe == want) {
        if (!adopt_process(*live, "found running with this head's -F and -g (its pidfile was lost or stale)"))
          continue;
        if (!options_.pidfile_path.empty()) {
          if (auto w = fs_.write_atomic(options_.pidfile_path, format_pidfile(*live), 0644); !w)
            log_->warn("cannot record OpenSM pid {} in {}: {} (a smhad restart will not adopt it)", live->pid,
                       options_.pidfile_path, w.error().message);
        }
        return BoundCheck::Adopted;
      }
      bound_reason_ = "OpenSM pid " + std::to_string(b.pid) + " (\"" + argv + "\", executable " +
                      (live ? live->exe : b.exe) + ", expected " + want +
                      ") carries this head's -F and -g but is not this head's OpenSM";
    } else {
      bound_reason_ = "another OpenSM, pid " + std::to_string(b.pid) + " (\"" + argv + "\"), is bound to port GUID " +
                      guid_text;
    }
    return BoundCheck::Foreign;
  }
  return BoundCheck::Free;
}

Status OpensmSupervisor::spawn_now() {
  auto spec = make_spec_();
  if (options_.keep_running_on_exit) spec.parent_death_signal = 0;
  const std::uint64_t run = ++run_;
  permanent_.reset();
  came_up_ = false;
  recent_lines_.clear();
  log_offset_ = 0;
  if (!options_.log_file.empty()) {
    if (auto t = fs_.read_tail(options_.log_file, UINT64_MAX, 0)) log_offset_ = t->size;
  }
  switch (check_bound(spec)) {
    case BoundCheck::Free: break;
    case BoundCheck::Adopted: return Status::Ok();
    case BoundCheck::Foreign:
      fail("cannot start " + spec.path + ": " + bound_reason_ +
           "; not starting a second OpenSM for this port (stop that one, then reload or restart smhad)");
      return make_error(Errc::Foreign, bound_reason_);
  }
  std::weak_ptr<int> alive = alive_;
  auto pid = runner_.spawn(
      spec,
      [this, alive, run](os::OutputStream stream, std::string_view line) {
        if (!alive.expired()) on_output(run, stream, line);
      },
      [this, alive, run](const os::ExitInfo& exit) {
        if (!alive.expired()) on_exit(run, exit);
      });
  if (!pid && pid.error().code == Errc::Resources) {
    retry_spawn_later("cannot start " + spec.path + ": " + pid.error().message);
    return Status::Ok();
  }
  if (!pid) {
    fail("cannot start " + spec.path + ": " + pid.error().message);
    return pid.error();
  }
  resource_retries_ = 0;
  status_.state = SupervisorState::Running;
  status_.pid = *pid;
  status_.adopted = false;
  status_.started_at = sched_.now();
  status_.next_start_at.reset();
  status_.reason = status_.last_exit ? "previous run " + describe_exit(*status_.last_exit) : "";
  ++status_.spawns;
  if (had_process_) ++status_.restarts;
  had_process_ = true;
  std::string argv;
  for (const auto& a : spec.argv) argv += (argv.empty() ? "" : " ") + a;
  log_->info("started OpenSM pid {}: {}", *pid, argv);
  if (status_.retrying) {
    std::weak_ptr<int> alive = alive_;
    arm(stable_timer_, options_.stable_uptime, [this, alive, run] {
      if (alive.expired() || run != run_ || status_.state != SupervisorState::Running || !status_.retrying) return;
      status_.retrying = false;
      log_->info("crash loop over: OpenSM pid {} has run for {} since retry {}", status_.pid,
                 seconds_text(options_.stable_uptime), status_.crash_loop_retries);
      notify();
    });
  }

  if (!options_.pidfile_path.empty()) {
    auto id = options_.identify(*pid);
    Status st = id ? fs_.write_atomic(options_.pidfile_path, format_pidfile(*id), 0644) : Status(id.error());
    if (!st)
      log_->warn("cannot record OpenSM pid {} in {}: {} (a smhad restart will not adopt it)", *pid,
                 options_.pidfile_path, st.error().message);
  }
  notify();
  return Status::Ok();
}

void OpensmSupervisor::on_output(std::uint64_t run, os::OutputStream stream, std::string_view line) {
  if (run != run_) return;
  if (stream == os::OutputStream::Stderr)
    log_->warn("opensm[{}]: {}", status_.pid, line);
  else
    log_->info("opensm[{}]: {}", status_.pid, line);
  if (!came_up_) {
    for (auto up : kCameUpLines)
      if (line.find(up) != std::string_view::npos) came_up_ = true;
    // stdout and stderr are separate pipes, so their lines may arrive in either
    // order: a more specific fatal line (earlier in the table) replaces a generic one.
    if (!came_up_) {
      if (auto i = permanent_index(line); i && (!permanent_ || *i < permanent_rank_)) {
        permanent_ = std::string(kPermanentLines[*i].meaning) + " (OpenSM: \"" + std::string(line) + "\")";
        permanent_rank_ = *i;
      }
    }
  }
  if (line.find_first_not_of(" \t") != std::string_view::npos) {
    recent_lines_.emplace_back(line);
    if (recent_lines_.size() > kRecentLines) recent_lines_.pop_front();
  }
  if (options_.on_line) options_.on_line(status_.pid, line);
}

void OpensmSupervisor::on_exit(std::uint64_t run, const os::ExitInfo& exit) {
  if (run != run_) return;
  const TimePoint now = sched_.now();
  const Duration uptime = status_.started_at ? now - *status_.started_at : Duration{};
  const std::string what = "OpenSM pid " + std::to_string(exit.pid) + " " + describe_exit(exit) + " after " +
                           seconds_text(uptime);
  status_.last_exit = exit;
  status_.pid = 0;
  status_.adopted = false;
  status_.started_at.reset();

  if (status_.state == SupervisorState::Stopping) {
    disarm(kill_timer_);
    status_.last_exit_class = ExitClass::Requested;
    log_->info("{} (stop requested)", what);
    auto after = std::exchange(after_stop_, AfterStop::Nothing);
    if (after == AfterStop::Respawn) {
      (void)spawn_now();  // on failure: Failed, reason set
    } else if (after == AfterStop::RespawnAsCrash) {
      status_.last_exit_class = ExitClass::Crash;
      handle_crash(exit, uptime, what + " (restarted: " + restart_reason_ + ")");
    } else {
      status_.state = SupervisorState::Stopped;
      status_.reason = what;
      notify();
    }
    for (auto& waiter : std::exchange(stop_waiters_, {})) sched_.post(std::move(waiter));
    return;
  }

  // Before OpenSM came up, its own log says why it stopped; after, the ERR lines
  // there are routine sweep complaints (e.g. routing fallbacks), not the cause.
  const auto logged = came_up_ ? std::nullopt : log_error();
  if (permanent_) {
    status_.last_exit_class = ExitClass::Permanent;
    fail("permanent failure: " + (logged ? *logged : *permanent_) + "; " + describe_exit(exit) +
         "; not restarting");
    return;
  }
  if (!exit.signaled && (exit.status == 2 || exit.status == 255)) {
    status_.last_exit_class = ExitClass::Permanent;
    std::string last = logged                  ? "; " + *logged
                       : recent_lines_.empty() ? ""
                                               : "; last output: \"" + recent_lines_.back() + "\"";
    fail("permanent failure: OpenSM rejected its command line or options (" + describe_exit(exit) + ")" + last +
         "; not restarting");
    return;
  }
  status_.last_exit_class = ExitClass::Crash;
  // A crash after OpenSM came up: the last ERR lines it logged are the best
  // word on why (a SIGSEGV has no message of its own).
  const auto cause = came_up_ ? log_error(LogPick::Last) : logged;
  handle_crash(exit, uptime, cause ? what + " (" + *cause + ")" : what);
}

// The first error OpenSM wrote to its own log during this run, e.g.
// `OpenSM log /var/log/opensm.log: "osm_db_init: ERR 6101: Failed to create the db
// directory:/var/cache/opensm"`. Reads at most the last 64 KiB the run appended.
std::optional<std::string> OpensmSupervisor::log_error(LogPick pick) const {
  if (options_.log_file.empty()) return std::nullopt;
  auto tail = fs_.read_tail(options_.log_file, log_offset_, 64 * 1024);
  if (!tail) return std::nullopt;
  std::string_view text = tail->text;
  // Last: the two newest ERR lines, oldest first.
  std::deque<std::string> last;
  while (!text.empty()) {
    const auto nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    if (line.find(": ERR ") == std::string_view::npos) continue;
    // "Dec 03 13:45:01 123456 [7F2A...] 0x01 -> osm_db_init: ERR 6101: ..."
    if (auto arrow = line.find("-> "); arrow != std::string_view::npos) line = line.substr(arrow + 3);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t'))
      line.remove_suffix(1);
    if (line.size() > 300) line = line.substr(0, 300);
    if (pick == LogPick::First) return "OpenSM log " + options_.log_file + ": \"" + std::string(line) + "\"";
    last.emplace_back(line);
    if (last.size() > 2) last.pop_front();
  }
  if (last.empty()) return std::nullopt;
  std::string out = "last ERR in OpenSM log " + options_.log_file + ": ";
  for (std::size_t i = 0; i < last.size(); ++i) out += (i ? " / \"" : "\"") + last[i] + "\"";
  return out;
}

void OpensmSupervisor::handle_crash(const os::ExitInfo& exit, Duration uptime, const std::string& what) {
  (void)exit;
  const TimePoint now = sched_.now();
  ++status_.crashes;
  if (uptime >= options_.stable_uptime) status_.consecutive_crashes = 0;
  ++status_.consecutive_crashes;
  crash_times_.push_back(now);
  while (!crash_times_.empty() && now - crash_times_.front() > options_.crash_loop_window) crash_times_.pop_front();
  std::string last = recent_lines_.empty() ? "" : "; last output: \"" + recent_lines_.back() + "\"";
  if (status_.retrying && uptime < options_.stable_uptime) {
    fail_crash_loop("crash loop: retry " + std::to_string(status_.crash_loop_retries) + " crashed too: " + what +
                    last);
    return;
  }
  if (static_cast<int>(crash_times_.size()) >= options_.crash_loop_count) {
    fail_crash_loop("crash loop: " + std::to_string(crash_times_.size()) + " crashes within " +
                    seconds_text(options_.crash_loop_window) + "; last: " + what + last);
    return;
  }
  status_.retrying = false;
  Duration delay = options_.backoff_initial;
  for (int i = 1; i < status_.consecutive_crashes && delay < options_.backoff_max; ++i) delay *= 2;
  if (delay > options_.backoff_max) delay = options_.backoff_max;
  status_.current_backoff = delay;
  status_.state = SupervisorState::Backoff;
  status_.next_start_at = now + delay;
  respawn_requested_ = false;
  status_.reason = what + last +
                   (options_.respawn_on_request
                        ? "; restarting when the HA engine asks, not before " + seconds_text(delay)
                        : "; restarting in " + seconds_text(delay));
  log_->warn("{}", status_.reason);
  std::weak_ptr<int> alive = alive_;
  arm(backoff_timer_, delay, [this, alive] {
    if (alive.expired() || status_.state != SupervisorState::Backoff) return;
    if (options_.respawn_on_request && !respawn_requested_) return;
    (void)spawn_now();
  });
  notify();
}

void OpensmSupervisor::retry_spawn_later(std::string what) {
  Duration delay = options_.backoff_initial;
  for (int i = 0; i < resource_retries_ && delay < options_.backoff_max; ++i) delay *= 2;
  if (delay > options_.backoff_max) delay = options_.backoff_max;
  ++resource_retries_;
  status_.state = SupervisorState::Backoff;
  status_.pid = 0;
  status_.current_backoff = delay;
  status_.next_start_at = sched_.now() + delay;
  respawn_requested_ = true;  // the spawn was asked for already
  status_.reason = what + " (out of resources; retrying in " + seconds_text(delay) + ")";
  if (resource_retries_ == 1 || resource_retries_ % 10 == 0) log_->error("{}", status_.reason);
  std::weak_ptr<int> alive = alive_;
  arm(backoff_timer_, delay, [this, alive] {
    if (alive.expired() || status_.state != SupervisorState::Backoff) return;
    (void)spawn_now();
  });
  notify();
}

void OpensmSupervisor::request_respawn() {
  if (!options_.respawn_on_request || status_.state != SupervisorState::Backoff) return;
  respawn_requested_ = true;
  if (status_.next_start_at && sched_.now() >= *status_.next_start_at) (void)spawn_now();
}

void OpensmSupervisor::fail(std::string reason) {
  forget_crashes();
  status_.state = SupervisorState::Failed;
  status_.pid = 0;
  status_.next_start_at.reset();
  status_.reason = std::move(reason);
  log_->error("{}", status_.reason);
  notify();
}

// A crash loop does not end supervision: a fabric must not be left without
// an SM because OpenSM crashed for a while (e.g. at every sweep while two
// nodes carry the same GUID). One spawn per retry delay, forever.
void OpensmSupervisor::fail_crash_loop(std::string reason) {
  disarm(stable_timer_);
  status_.state = SupervisorState::Failed;
  status_.pid = 0;
  status_.crash_looped = true;
  status_.retrying = false;
  failed_at_ = sched_.now();
  crash_reason_ = std::move(reason);
  arm_retry();
  log_->error("{}", status_.reason);
  notify();
}

void OpensmSupervisor::arm_retry() {
  const Duration delay = no_master_ ? options_.crash_loop_retry_no_master : options_.crash_loop_retry;
  const TimePoint at = failed_at_ + delay;
  status_.next_start_at = at;
  status_.reason = crash_reason_ + "; retrying " + seconds_text(delay) + " after the failure (" +
                   (no_master_ ? "no SM is MASTER on the fabric" : "an SM is MASTER elsewhere") + ")";
  std::weak_ptr<int> alive = alive_;
  arm(backoff_timer_, std::max(Duration{}, at - sched_.now()), [this, alive] {
    if (!alive.expired()) retry_crash_loop();
  });
}

void OpensmSupervisor::set_no_master(bool no_master) {
  if (no_master == no_master_) return;
  no_master_ = no_master;
  if (status_.state != SupervisorState::Failed || !status_.crash_looped) return;
  arm_retry();
  log_->info("{}", status_.reason);
  notify();
}

void OpensmSupervisor::retry_crash_loop() {
  if (status_.state != SupervisorState::Failed || !status_.crash_looped) return;
  crash_times_.clear();
  status_.consecutive_crashes = 0;
  status_.crash_looped = false;
  status_.retrying = true;
  ++status_.crash_loop_retries;
  log_->warn("crash loop: retry {} of OpenSM ({})", status_.crash_loop_retries,
             no_master_ ? "no SM is MASTER on the fabric" : "an SM is MASTER elsewhere");
  if (!options_.respawn_on_request) {
    (void)spawn_now();  // on failure: Failed, reason set
    return;
  }
  // As after a crash: the HA engine starts it, at the priority it chooses.
  status_.state = SupervisorState::Backoff;
  status_.next_start_at = sched_.now();
  status_.current_backoff = Duration{};
  respawn_requested_ = false;
  status_.reason = "crash loop: retry " + std::to_string(status_.crash_loop_retries) +
                   "; starting when the HA engine asks";
  notify();
}

void OpensmSupervisor::begin_stop(AfterStop after) {
  after_stop_ = after;
  status_.state = SupervisorState::Stopping;
  const int pid = status_.pid;
  if (auto st = runner_.kill(pid, SIGTERM); !st)
    log_->debug("SIGTERM to OpenSM pid {}: {}", pid, st.error().message);
  std::weak_ptr<int> alive = alive_;
  const std::uint64_t run = run_;
  arm(kill_timer_, options_.stop_timeout, [this, alive, run, pid] {
    if (alive.expired() || run != run_ || status_.state != SupervisorState::Stopping) return;
    log_->warn("OpenSM pid {} did not stop within {} of SIGTERM; sending SIGKILL to its process group", pid,
               seconds_text(options_.stop_timeout));
    if (auto st = runner_.kill(pid, SIGKILL); !st)
      log_->debug("SIGKILL to OpenSM pid {}: {}", pid, st.error().message);
  });
  notify();
}

void OpensmSupervisor::stop(std::function<void()> done) {
  switch (status_.state) {
    case SupervisorState::Running:
      log_->info("stopping OpenSM pid {}", status_.pid);
      if (done) stop_waiters_.push_back(std::move(done));
      begin_stop(AfterStop::Nothing);
      return;
    case SupervisorState::Stopping:
      after_stop_ = AfterStop::Nothing;
      if (done) stop_waiters_.push_back(std::move(done));
      return;
    case SupervisorState::Backoff:
    case SupervisorState::Failed:
    case SupervisorState::Stopped:
      forget_crashes();
      if (status_.state != SupervisorState::Stopped) {
        status_.state = SupervisorState::Stopped;
        status_.next_start_at.reset();
        notify();
      }
      if (done) sched_.post(std::move(done));
      return;
  }
}

Status OpensmSupervisor::restart(std::string reason, bool counts_as_crash) {
  if (status_.state != SupervisorState::Running)
    return make_error(Errc::Conflict, std::string("restart: OpenSM is ") + std::string(to_string(status_.state)));
  log_->warn("restarting OpenSM pid {}: {}", status_.pid, reason);
  restart_reason_ = std::move(reason);
  begin_stop(counts_as_crash ? AfterStop::RespawnAsCrash : AfterStop::Respawn);
  return Status::Ok();
}

Result<ReloadAction> OpensmSupervisor::reload(std::string_view conf_text, const ConfChange& change) {
  bool changed = false;
  if (auto st = write_conf_if_changed(conf_text, changed); !st) return st.error();
  if (status_.state == SupervisorState::Failed) {
    // The fix may be in the file or outside it (a restored GUID, a directory
    // made): a reload of a failed head always tries again, at once.
    log_->info("reload: {} {} while failed ({}); starting OpenSM again", options_.conf_path,
               changed ? "changed" : "unchanged", status_.reason);
    forget_crashes();
    if (auto st = spawn_now(); !st) return st.error();
    return ReloadAction::Retried;
  }
  if (!changed) {
    log_->info("reload: {} unchanged; OpenSM left alone", options_.conf_path);
    return ReloadAction::Unchanged;
  }
  switch (status_.state) {
    case SupervisorState::Failed:
      return ReloadAction::Retried;  // handled above
    case SupervisorState::Running:
      switch (change.kind) {
        case ConfChangeKind::None:
          return ReloadAction::Written;
        case ConfChangeKind::Sighup:
          if (auto st = runner_.kill(status_.pid, SIGHUP); !st) {
            log_->warn("reload: SIGHUP to OpenSM pid {} failed: {}", status_.pid, st.error().message);
            return ReloadAction::Written;  // its exit, if that is why, is being handled
          }
          log_->info("reload: sent SIGHUP to OpenSM pid {} to re-read {}", status_.pid, options_.conf_path);
          return ReloadAction::Signalled;
        case ConfChangeKind::Restart:
          log_->info("reload: opensm.conf key '{}' is read only at start; restarting OpenSM pid {}",
                     change.restart_key, status_.pid);
          begin_stop(AfterStop::Respawn);
          return ReloadAction::Restarted;
      }
      return ReloadAction::Written;
    case SupervisorState::Stopping:
    case SupervisorState::Backoff:
    case SupervisorState::Stopped:
      return ReloadAction::Written;  // the next start reads the new file
  }
  return ReloadAction::Written;
}

}  // namespace smha::opensm
