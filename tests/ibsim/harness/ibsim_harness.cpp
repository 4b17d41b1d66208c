// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "ibsim_harness.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <sstream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace smha::testing {
namespace {

// fork() for a child that execs: the child must not run the test's signal
// handlers between fork and exec (a SIGTERM that stops it early would make
// Catch's fatal-signal handler report a failed test, in the test's output).
// Signals are blocked across the fork; the child resets every handler to the
// default before it unblocks them.
pid_t fork_for_exec() {
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  const pid_t pid = fork();
  if (pid == 0)
    for (int s = 1; s < NSIG; ++s) signal(s, SIG_DFL);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return pid;
}

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr const char* kUmad2sim = "/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so";
// How often condition polls look again. Short enough not to blur the
// timings the tests measure, long enough not to spin on a 2-core machine.
constexpr milliseconds kPollInterval{5};
constexpr const char* kPrompt = "sim> ";

std::runtime_error error(const std::string& what) {
  return std::runtime_error("ibsim harness: " + what);
}

std::string errno_text(const std::string& what) {
  return what + ": " + std::strerror(errno);
}

// Polls `done` until it returns true or `timeout` passes.
template <typename F>
bool poll_until(milliseconds timeout, F&& done) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    if (done()) return true;
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(kPollInterval);
  }
}

std::string unique_token() {
  static std::atomic<unsigned> counter{0};
  std::random_device rd;
  std::ostringstream s;
  s << getpid() << '-' << counter++ << '-' << std::hex << (rd() & 0xffffff);
  return s.str();
}

std::string make_scratch_root() {
  const char* base = std::getenv("SMHA_IBSIM_TMP");
  std::string tmpl = (base && *base ? std::string(base) : fs::temp_directory_path().string()) +
                     "/smha-ibsim-XXXXXX";
  if (!mkdtemp(tmpl.data())) throw error(errno_text("mkdtemp " + tmpl));
  return tmpl;
}

// Resolves argv[0] through PATH plus the sbin directories (opensm, sminfo
// live there and a non-root PATH may lack them).
std::string resolve_executable(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  std::string path = std::getenv("PATH") ? std::getenv("PATH") : "";
  path += ":/usr/sbin:/sbin:/usr/bin:/bin";
  std::stringstream dirs(path);
  for (std::string dir; std::getline(dirs, dir, ':');) {
    if (dir.empty()) continue;
    const std::string candidate = dir + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  throw error("executable not found in PATH: " + name);
}

std::vector<std::string> merged_env(const std::vector<std::pair<std::string, std::string>>& over) {
  std::vector<std::string> out;
  for (char** e = environ; e && *e; ++e) {
    std::string_view kv(*e);
    const auto eq = kv.find('=');
    const std::string_view key = kv.substr(0, eq);
    bool replaced = false;
    for (const auto& [k, v] : over) replaced = replaced || key == k;
    if (!replaced) out.emplace_back(kv);
  }
  for (const auto& [k, v] : over) out.push_back(k + "=" + v);
  return out;
}

std::vector<char*> c_array(std::vector<std::string>& v) {
  std::vector<char*> out;
  for (auto& s : v) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::trunc);
  f << text;
  if (!f) throw error("cannot write " + path);
}

}  // namespace

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return {};
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

std::string topology_path(const std::string& name) {
  return std::string(SMHA_SOURCE_DIR) + "/topologies/" + name;
}

std::string umad_timeout_shim_path() {
  return SMHA_UMAD_TIMEOUT_SHIM;
}

std::string umad_timeout_shim_preload() {
  const std::string shim = umad_timeout_shim_path();
  if (shim.empty() || access(shim.c_str(), R_OK) != 0)
    throw error("umad timeout shim not built: '" + shim + "'");
  return shim + ":" + kUmad2sim;
}

std::string umad_loss_shim_path() {
  return SMHA_UMAD_LOSS_SHIM;
}

SmInfoLoss::SmInfoLoss(std::string dir, int percent, unsigned seed) : dir_(std::move(dir)), seed_(seed) {
  const std::string shim = umad_loss_shim_path();
  if (shim.empty() || access(shim.c_str(), R_OK) != 0)
    throw error("umad loss shim not built: '" + shim + "'");
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) throw error("cannot create " + dir_ + ": " + ec.message());
  set_percent(percent);
}

std::vector<std::pair<std::string, std::string>> SmInfoLoss::env() const {
  return {{"LD_PRELOAD", umad_timeout_shim_path() + ":" + umad_loss_shim_path() + ":" + kUmad2sim},
          {"SMHA_LOSS_CONTROL", dir_ + "/percent"},
          {"SMHA_LOSS_COUNTS", dir_ + "/counts"},
          {"SMHA_LOSS_SEED", std::to_string(seed_)}};
}

void SmInfoLoss::set_percent(int percent) {
  if (percent < 0 || percent > 100) throw error("loss percent out of range: " + std::to_string(percent));
  const std::string tmp = dir_ + "/percent.tmp";
  write_file(tmp, std::to_string(percent) + "\n");
  if (::rename(tmp.c_str(), (dir_ + "/percent").c_str()) != 0) throw error(errno_text("rename " + tmp));
}

SmInfoLoss::Counts SmInfoLoss::counts() const {
  Counts c;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir_, ec)) {
    if (e.path().filename().string().rfind("counts.", 0) != 0) continue;
    const std::string line = read_file(e.path().string());
    unsigned long long seen = 0, dropped = 0;
    const auto at = line.find("seen=");
    if (at == std::string::npos ||
        std::sscanf(line.c_str() + at, "seen=%llu dropped=%llu", &seen, &dropped) != 2)
      continue;
    c.seen += seen;
    c.dropped += dropped;
    ++c.processes;
    c.text += line;
  }
  return c;
}

IbsimFabric::IbsimFabric(const std::string& topology) {
  // ibsim's console pipe: a write to a dead ibsim must fail, not kill us.
  std::signal(SIGPIPE, SIG_IGN);
  if (access(topology.c_str(), R_OK) != 0) throw error(errno_text("topology " + topology));
  scratch_ = make_scratch_root();
  sockname_ = "smha-" + unique_token();
  const std::string dir = scratch_ + "/ibsim";
  fs::create_directories(dir);
  ibsim_out_ = dir + "/ibsim.out";
  ibsim_err_ = dir + "/ibsim.err";

  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) != 0) throw error(errno_text("pipe2"));
  console_fd_ = pipefd[1];

  std::vector<std::string> argv{resolve_executable("ibsim"), "-s", topology};
  std::vector<std::string> env = merged_env({{"IBSIM_SOCKNAME", sockname_}});
  const int out = open(ibsim_out_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  const int err = open(ibsim_err_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (out < 0 || err < 0) throw error(errno_text("open ibsim output in " + dir));
  auto cargv = c_array(argv);
  auto cenv = c_array(env);
  const pid_t parent = getpid();
  const pid_t pid = fork_for_exec();
  if (pid == 0) {
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    if (chdir(dir.c_str()) != 0) _exit(127);
    dup2(pipefd[0], 0);
    dup2(out, 1);
    dup2(err, 2);
    close_range(3, ~0U, 0);
    execve(cargv[0], cargv.data(), cenv.data());
    _exit(127);
  }
  close(pipefd[0]);
  close(out);
  close(err);
  if (pid < 0) {
    close(console_fd_);
    throw error(errno_text("fork ibsim"));
  }
  ibsim_pid_ = pid;
  procs_.push_back(Process{"ibsim", pid, dir, ibsim_out_, ibsim_err_, std::nullopt});
  try {
    wait_ibsim_ready(topology);
  } catch (...) {
    shutdown();
    throw;
  }
}

void IbsimFabric::wait_ibsim_ready(const std::string& topology) {

  // The prompt is printed before the sockets are bound; a console answer
  // proves the select loop (and so the bound sockets) is running.
  const bool prompt = poll_until(kStartTimeout, [&] {
    return read_file(ibsim_out_).find(kPrompt) != std::string::npos || !process_running(0);
  });
  if (!prompt || !process_running(0))
    throw error("ibsim did not start on " + topology + ": " + read_file(ibsim_err_));
  console_query("Attached", kStartTimeout);
  if (!process_running(0))
    throw error("ibsim exited on " + topology + ": " + read_file(ibsim_err_));
}

IbsimFabric::~IbsimFabric() { shutdown(); }

void IbsimFabric::shutdown() noexcept {
  try {
    // Clients first (newest first), so they detach from a live ibsim.
    for (std::size_t i = procs_.size(); i-- > 1;) stop(procs_[i], SIGTERM);
    // ibsim spins on console EOF: kill it before closing its pipe.
    if (!procs_.empty()) stop(procs_[0], SIGTERM);
  } catch (...) {
    for (auto& p : procs_) {
      if (!p.exit_code && p.pid > 0) {
        kill(p.pid, SIGKILL);
        waitpid(p.pid, nullptr, 0);
        p.exit_code = 128 + SIGKILL;
      }
    }
  }
  if (console_fd_ >= 0) close(console_fd_);
  console_fd_ = -1;
  const char* keep = std::getenv("SMHA_IBSIM_KEEP");
  if (!scratch_.empty() && !(keep && *keep == '1')) {
    std::error_code ec;
    fs::remove_all(scratch_, ec);
  }
}

bool IbsimFabric::reap(Process& p, bool block) {
  if (p.exit_code) return true;
  int status = 0;
  const pid_t r = waitpid(p.pid, &status, block ? 0 : WNOHANG);
  if (r == p.pid) {
    p.exit_code = exit_code_of(status);
    return true;
  }
  if (r < 0 && errno == ECHILD) {
    p.exit_code = -1;
    return true;
  }
  return false;
}

void IbsimFabric::stop(Process& p, int sig) {
  if (reap(p, false)) return;
  kill(p.pid, sig);
  if (sig != SIGKILL && sig != SIGCONT) kill(p.pid, SIGCONT);
  if (!poll_until(kStopGrace, [&] { return reap(p, false); })) {
    kill(p.pid, SIGKILL);
    reap(p, true);
  }
  // Killed by a signal: umad2sim's atexit detach did not run, so ibsim still
  // counts the client. Free the slot (ibsim itself needs no such care).
  if (p.pid != ibsim_pid_ && p.exit_code && *p.exit_code > 128) free_client_slot(p.pid);
}

void IbsimFabric::free_client_slot(pid_t pid) {
  if (ibsim_pid_ < 0 || procs_.empty() || reap(procs_[0], false)) return;
  std::string list;
  try {
    list = console_query("Attached");
  } catch (const std::exception&) {
    return;  // best effort: a dead or wedged ibsim has no slots to free
  }
  std::istringstream lines(list);
  for (std::string line; std::getline(lines, line);) {
    int client = -1;
    int client_pid = -1;
    if (std::sscanf(line.c_str(), "Client %d: pid %d", &client, &client_pid) == 2 &&
        client_pid == pid) {
      try {
        console("X " + std::to_string(client));
      } catch (const std::exception&) {
      }
    }
  }
}

std::vector<int> IbsimFabric::attached_pids() {
  std::vector<int> out;
  std::istringstream lines(console_query("Attached"));
  for (std::string line; std::getline(lines, line);) {
    int client = -1;
    int client_pid = -1;
    if (std::sscanf(line.c_str(), "Client %d: pid %d", &client, &client_pid) == 2)
      out.push_back(client_pid);
  }
  return out;
}

int IbsimFabric::free_dead_clients() {
  int freed = 0;
  std::istringstream lines(console_query("Attached"));
  for (std::string line; std::getline(lines, line);) {
    int client = -1;
    int client_pid = -1;
    if (std::sscanf(line.c_str(), "Client %d: pid %d", &client, &client_pid) != 2) continue;
    // Gone, or a zombie ("State:\tZ" in /proc/<pid>/status).
    const std::string status = read_file("/proc/" + std::to_string(client_pid) + "/status");
    if (!status.empty() && status.find("State:\tZ") == std::string::npos) continue;
    console("X " + std::to_string(client));
    ++freed;
  }
  return freed;
}

int IbsimFabric::spawn_process(const std::string& name, const std::vector<std::string>& argv_in,
                               const std::vector<std::pair<std::string, std::string>>& env_over,
                               const std::string& cwd_name) {
  if (argv_in.empty()) throw error("spawn " + name + ": empty argv");
  const std::string dir = scratch_ + "/" + cwd_name;
  fs::create_directories(dir);
  Process p;
  p.name = name;
  p.dir = dir;
  p.out_path = dir + "/stdout";
  p.err_path = dir + "/stderr";
  std::vector<std::string> argv = argv_in;
  argv[0] = resolve_executable(argv[0]);
  std::vector<std::string> env = merged_env(env_over);
  auto cargv = c_array(argv);
  auto cenv = c_array(env);
  const int out = open(p.out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  const int err = open(p.err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  const int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (out < 0 || err < 0 || in < 0) throw error(errno_text("open output files in " + dir));
  const pid_t parent = getpid();
  const pid_t pid = fork_for_exec();
  if (pid == 0) {
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    if (chdir(dir.c_str()) != 0) _exit(127);
    dup2(in, 0);
    dup2(out, 1);
    dup2(err, 2);
    close_range(3, ~0U, 0);
    execve(cargv[0], cargv.data(), cenv.data());
    _exit(127);
  }
  close(out);
  close(err);
  close(in);
  if (pid < 0) throw error(errno_text("fork " + name));
  p.pid = pid;
  procs_.push_back(std::move(p));
  return static_cast<int>(procs_.size()) - 1;
}

std::vector<std::pair<std::string, std::string>> IbsimFabric::client_env(
    const std::string& node) const {
  const char* asan = std::getenv("ASAN_OPTIONS");
  std::string asan_options = asan && *asan ? std::string(asan) + ":" : std::string();
  asan_options += "verify_asan_link_order=0";
  return {{"LD_PRELOAD", kUmad2sim},
          {"SIM_HOST", node},
          {"IBSIM_SOCKNAME", sockname_},
          {"ASAN_OPTIONS", asan_options}};
}

std::vector<std::pair<std::string, std::string>> IbsimFabric::env_for(
    const std::string& node, std::vector<std::pair<std::string, std::string>> extra) const {
  auto env = client_env(node);
  for (auto& [k, v] : extra) {
    bool replaced = false;
    for (auto& kv : env) {
      if (kv.first == k) {
        kv.second = v;
        replaced = true;
      }
    }
    if (!replaced) env.emplace_back(k, v);
  }
  return env;
}

int IbsimFabric::start_opensm(const std::string& node, int priority,
                              std::vector<std::string> extra_args) {
  OpensmSpec spec;
  spec.node = node;
  spec.priority = priority;
  spec.extra_args = std::move(extra_args);
  return start_opensm(spec);
}

int IbsimFabric::start_opensm(const OpensmSpec& spec) {
  const int idx = static_cast<int>(opensms_.size());
  const std::string cwd_name = "opensm" + std::to_string(idx) + "-" + spec.node;
  const std::string dir = scratch_ + "/" + cwd_name;
  fs::create_directories(dir);
  const std::string log = dir + "/opensm.log";
  const std::string conf = dir + "/opensm.conf";
  std::string text =
      "# written by the ibsim harness\n"
      "force_log_flush TRUE\n";
  for (const auto& line : spec.conf_lines) text += line + "\n";
  write_file(conf, text);

  auto env = client_env(spec.node);
  env.emplace_back("OSM_CACHE_DIR", dir);
  env.emplace_back("OSM_TMP_DIR", dir);
  if (spec.timeout_shim.value_or(timeout_shim_default_)) {
    env[0].second = umad_timeout_shim_preload();
  }
  for (const auto& [k, v] : spec.extra_env) {
    bool replaced = false;
    for (auto& kv : env)
      if (kv.first == k) {
        kv.second = v;
        replaced = true;
      }
    if (!replaced) env.emplace_back(k, v);
  }
  std::vector<std::string> argv{"opensm", "-F", conf, "-f", log, "-p",
                                std::to_string(spec.priority)};
  argv.insert(argv.end(), spec.extra_args.begin(), spec.extra_args.end());
  const int pidx = spawn_process("opensm@" + spec.node, argv, env, cwd_name);
  opensms_.push_back(Opensm{pidx, log});
  return idx;
}

const IbsimFabric::Opensm& IbsimFabric::osm(int idx) const {
  if (idx < 0 || static_cast<std::size_t>(idx) >= opensms_.size())
    throw error("no OpenSM with index " + std::to_string(idx));
  return opensms_[static_cast<std::size_t>(idx)];
}

const IbsimFabric::Process& IbsimFabric::proc(int pidx) const {
  if (pidx < 0 || static_cast<std::size_t>(pidx) >= procs_.size())
    throw error("no process with index " + std::to_string(pidx));
  return procs_[static_cast<std::size_t>(pidx)];
}

IbsimFabric::Process& IbsimFabric::proc(int pidx) {
  return const_cast<Process&>(static_cast<const IbsimFabric*>(this)->proc(pidx));
}

bool IbsimFabric::wait_subnet_up(int idx, milliseconds timeout) {
  return wait_log(idx, "SUBNET UP", timeout);
}

bool IbsimFabric::wait_log(int idx, const std::string& needle, milliseconds timeout) {
  return wait_log_after(idx, needle, 0, timeout);
}

bool IbsimFabric::wait_log_after(int idx, const std::string& needle, std::size_t offset,
                                 milliseconds timeout) {
  const std::string path = osm(idx).log_path;
  // Reads only what is new since the last look (keeping needle.size() - 1
  // bytes of overlap), so long logs are not re-read every poll.
  std::size_t from = offset;
  return poll_until(timeout, [&] {
    std::ifstream f(path, std::ios::binary);
    if (!f) return false;
    f.seekg(static_cast<std::streamoff>(from));
    std::string chunk((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (chunk.find(needle) != std::string::npos) return true;
    if (chunk.size() >= needle.size()) from += chunk.size() - (needle.size() - 1);
    return false;
  });
}

std::size_t IbsimFabric::log_size(int idx) const { return read_file(osm(idx).log_path).size(); }
std::string IbsimFabric::log_text(int idx) const { return read_file(osm(idx).log_path); }
std::string IbsimFabric::log_path(int idx) const { return osm(idx).log_path; }
std::string IbsimFabric::opensm_dir(int idx) const { return proc(osm(idx).process).dir; }

void IbsimFabric::stop_opensm(int idx, int sig) { stop_process(osm(idx).process, sig); }
bool IbsimFabric::signal_opensm(int idx, int sig) { return signal_process(osm(idx).process, sig); }
int IbsimFabric::opensm_pid(int idx) const { return proc(osm(idx).process).pid; }
int IbsimFabric::opensm_process(int idx) const { return osm(idx).process; }

CommandResult IbsimFabric::run(const std::string& node, const std::vector<std::string>& argv,
                               milliseconds timeout) {
  return run(node, argv, timeout, {});
}

CommandResult IbsimFabric::run(const std::string& node, const std::vector<std::string>& argv,
                               milliseconds timeout,
                               std::vector<std::pair<std::string, std::string>> extra_env) {
  const std::string cwd_name = "run" + std::to_string(run_count_++);
  const int pidx =
      spawn_process("run@" + node, argv, env_for(node, std::move(extra_env)), cwd_name);
  Process& p = procs_[static_cast<std::size_t>(pidx)];
  const bool done = poll_until(timeout, [&] { return reap(p, false); });
  if (!done) stop(p, SIGKILL);
  CommandResult r{done ? *p.exit_code : -1, read_file(p.out_path), read_file(p.err_path)};
  return r;
}

int IbsimFabric::spawn(const std::string& node, const std::vector<std::string>& argv,
                       std::vector<std::pair<std::string, std::string>> extra_env) {
  const auto env = env_for(node, std::move(extra_env));
  const std::string base = argv.empty() ? "proc" : fs::path(argv[0]).filename().string();
  return spawn_process(base + "@" + node, argv, env,
                       base + std::to_string(procs_.size()) + "-" + node);
}

void IbsimFabric::stop_process(int pidx, int sig) {
  if (pidx == 0) throw error("stop_process: index 0 is ibsim itself");
  stop(proc(pidx), sig);
}

bool IbsimFabric::signal_process(int pidx, int sig) {
  Process& p = proc(pidx);
  if (reap(p, false)) return false;
  return kill(p.pid, sig) == 0;
}

bool IbsimFabric::process_running(int pidx) { return !reap(proc(pidx), false); }

std::optional<int> IbsimFabric::process_exit_code(int pidx) {
  Process& p = proc(pidx);
  reap(p, false);
  return p.exit_code;
}

int IbsimFabric::process_pid(int pidx) const { return proc(pidx).pid; }
std::string IbsimFabric::process_dir(int pidx) const { return proc(pidx).dir; }
std::string IbsimFabric::process_stdout(int pidx) const { return read_file(proc(pidx).out_path); }
std::string IbsimFabric::process_stderr(int pidx) const { return read_file(proc(pidx).err_path); }

std::vector<int> IbsimFabric::live_pids() const {
  std::vector<int> out;
  for (const auto& p : procs_)
    if (!p.exit_code && p.pid > 0) out.push_back(p.pid);
  return out;
}

void IbsimFabric::console(const std::string& line) { console_query(line); }

std::string IbsimFabric::console_query(const std::string& line, milliseconds timeout) {
  if (line.find('\n') != std::string::npos) throw error("console line contains a newline");
  if (console_fd_ < 0 || procs_.empty() || procs_[0].exit_code)
    throw error("console: ibsim is not running");
  const std::size_t offset = read_file(ibsim_out_).size();
  const std::string data = line + "\n";
  std::size_t sent = 0;
  while (sent < data.size()) {
    const ssize_t n = write(console_fd_, data.data() + sent, data.size() - sent);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw error(errno_text("console write"));
    sent += static_cast<std::size_t>(n);
  }
  // ibsim prints the answer, then a fresh prompt, then flushes.
  std::string answer;
  const bool ok = poll_until(timeout, [&] {
    const std::string text = read_file(ibsim_out_);
    if (text.size() <= offset) return false;
    const auto end = text.find(kPrompt, offset);
    if (end == std::string::npos) return false;
    answer = text.substr(offset, end - offset);
    return true;
  });
  if (!ok) throw error("console: no answer from ibsim to '" + line + "'");
  return answer;
}

std::optional<NodePort> IbsimFabric::node_port(const std::string& node) {
  const CommandResult r = run(node, {"ibstat", "ibsim0", "1"}, milliseconds{10000});
  if (r.exit_code != 0) return std::nullopt;
  NodePort np;
  bool have_guid = false;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    unsigned long long v = 0;
    unsigned u = 0;
    if (std::sscanf(line.c_str(), " Port GUID: %llx", &v) == 1) {
      np.port_guid = v;
      have_guid = true;
    } else if (std::sscanf(line.c_str(), " Base lid: %u", &u) == 1) {
      np.lid = static_cast<std::uint16_t>(u);
    } else if (std::sscanf(line.c_str(), " SM lid: %u", &u) == 1) {
      np.sm_lid = static_cast<std::uint16_t>(u);
    }
  }
  if (!have_guid) return std::nullopt;
  return np;
}

}  // namespace smha::testing
