// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// IbsimFabric: one simulated InfiniBand fabric (ibsim) plus the real OpenSM
// instances and client tools attached to it, for the ibsim test tier.
//
// Contract:
// - Every fabric gets its own IBSIM_SOCKNAME and scratch directory; every
//   process it starts gets its own scratch cwd (umad2sim writes sys-<pid>
//   folders there), and every OpenSM its own OSM_CACHE_DIR, OSM_TMP_DIR,
//   opensm.conf and log file.
// - Every process is started from an argv vector (no shell), with
//   PR_SET_PDEATHSIG(SIGKILL), and is stopped by its PID: SIGTERM (+SIGCONT
//   for a stopped process), SIGKILL after kStopGrace, then reaped. The
//   destructor does that for everything still running, even while a test
//   unwinds from a failure. A process that had to be killed has its ibsim
//   client slot freed through the console (`X <client>`), because ibsim keeps
//   a dead client attached and has only 10 slots.
// - Waits are condition polls with deadlines; none sleeps a fixed time.
// - ibsim's console (stdin) is a pipe owned by the fabric; its answers are read
//   back from ibsim's stdout file, delimited by the `sim> ` prompt.
// - Failures to set up (ibsim does not start, bad topology, fork fails) throw
//   std::runtime_error naming what failed; queries return values.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <csignal>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace smha::testing {

struct CommandResult {
  int exit_code;    // exit status; 128+signal if killed; -1 on timeout
  std::string out;  // stdout
  std::string err;  // stderr
};

// Port identity of a node as the fabric sees it (after an SM assigned LIDs).
struct NodePort {
  std::uint64_t port_guid = 0;
  std::uint16_t lid = 0;     // 0 until a master configured the port
  std::uint16_t sm_lid = 0;  // the master this port points to
};

// Everything start_opensm() can vary. The short overload fills node/priority/
// extra_args and the fabric-wide timeout-shim default.
struct OpensmSpec {
  std::string node;                     // ibsim node id, e.g. "Hca1"
  int priority = 0;                     // -p
  std::vector<std::string> extra_args;  // appended to the opensm argv
  std::vector<std::string> conf_lines;  // appended to the generated opensm.conf
  // Preload the umad timeout shim (tests/ibsim/shim) so unanswered MADs time
  // out as with the kernel's ib_umad. nullopt: the fabric default.
  std::optional<bool> timeout_shim;
  // Overrides the client environment last (e.g. SmInfoLoss::env()).
  std::vector<std::pair<std::string, std::string>> extra_env;
};

class IbsimFabric {
 public:
  static constexpr std::chrono::milliseconds kStopGrace{3000};
  static constexpr std::chrono::milliseconds kStartTimeout{10000};

  // Starts ibsim on `topology_path` (own IBSIM_SOCKNAME, scratch dir) and waits
  // until its console answers, i.e. its sockets are bound. Throws
  // std::runtime_error (with ibsim's stderr) if it cannot.
  explicit IbsimFabric(const std::string& topology_path);
  ~IbsimFabric();
  IbsimFabric(const IbsimFabric&) = delete;
  IbsimFabric& operator=(const IbsimFabric&) = delete;

  // Default for OpensmSpec::timeout_shim (initially false).
  void set_timeout_shim_default(bool on) { timeout_shim_default_ = on; }

  // Starts a real OpenSM attached at `node` with priority `priority`. Returns
  // its index (0, 1, ... in start order). Throws if it cannot be spawned.
  int start_opensm(const std::string& node, int priority,
                   std::vector<std::string> extra_args = {});
  int start_opensm(const OpensmSpec& spec);

  // true once OpenSM `idx` logged "SUBNET UP" (a MASTER finished its sweep).
  bool wait_subnet_up(int idx, std::chrono::milliseconds timeout);
  // true once `needle` appears in OpenSM `idx`'s log (anywhere).
  bool wait_log(int idx, const std::string& needle, std::chrono::milliseconds timeout);
  // true once `needle` appears in the log at or after byte `offset`
  // (use log_size() before an action to wait only for what follows it).
  bool wait_log_after(int idx, const std::string& needle, std::size_t offset,
                      std::chrono::milliseconds timeout);
  std::size_t log_size(int idx) const;
  std::string log_text(int idx) const;
  std::string log_path(int idx) const;
  std::string opensm_dir(int idx) const;  // its cwd, cache and tmp dir

  // Sends `sig` and waits until the process is gone (SIGKILL after
  // kStopGrace), then reaps it. A stopped process gets SIGCONT after `sig`.
  void stop_opensm(int idx, int sig = SIGTERM);
  // Sends `sig` only (SIGSTOP, SIGCONT, SIGHUP ...); returns false if gone.
  bool signal_opensm(int idx, int sig);
  int opensm_pid(int idx) const;
  int opensm_process(int idx) const;  // its index for the process_* members

  // The environment a libibumad client needs to attach at `node`: LD_PRELOAD
  // (umad2sim), SIM_HOST, IBSIM_SOCKNAME, and ASAN_OPTIONS with
  // verify_asan_link_order=0 so sanitizer builds run under the preload.
  std::vector<std::pair<std::string, std::string>> client_env(const std::string& node) const;

  // Runs a client attached at `node` in a fresh scratch cwd and waits for it;
  // on timeout kills it by PID (exit_code -1) and frees its ibsim slot.
  CommandResult run(const std::string& node, const std::vector<std::string>& argv,
                    std::chrono::milliseconds timeout);
  // The same with `extra_env` overriding the client environment (e.g. an
  // LD_PRELOAD that adds the timeout shim).
  CommandResult run(const std::string& node, const std::vector<std::string>& argv,
                    std::chrono::milliseconds timeout,
                    std::vector<std::pair<std::string, std::string>> extra_env);

  // Long-running processes attached at `node` (smhad, a probe ...). `argv[0]`
  // is resolved through PATH. `extra_env` overrides the client environment.
  // Returns a process index; stdout/stderr go to files in process_dir().
  int spawn(const std::string& node, const std::vector<std::string>& argv,
            std::vector<std::pair<std::string, std::string>> extra_env = {});
  void stop_process(int pidx, int sig = SIGTERM);
  bool signal_process(int pidx, int sig);
  bool process_running(int pidx);  // reaps it if it ended
  // Exit status once reaped (128+signal if killed), nullopt while running.
  std::optional<int> process_exit_code(int pidx);
  int process_pid(int pidx) const;
  std::string process_dir(int pidx) const;
  std::string process_stdout(int pidx) const;
  std::string process_stderr(int pidx) const;

  // Writes one line to ibsim's console and waits (bounded) until ibsim has
  // handled it. console_query() returns what ibsim printed for it.
  void console(const std::string& line);
  std::string console_query(const std::string& line,
                            std::chrono::milliseconds timeout = std::chrono::milliseconds{5000});
  // Pids ibsim lists as attached clients (console `Attached`).
  std::vector<int> attached_pids();
  // Detaches (`X <client>`) every attached client whose process is gone or a
  // zombie, e.g. an OpenSM that smhad SIGKILLed: ibsim keeps such a client
  // attached and has only 10 slots. Returns how many were freed.
  int free_dead_clients();

  // Port GUID and LIDs of `node`, read with ibstat attached there.
  std::optional<NodePort> node_port(const std::string& node);

  std::string scratch_dir() const { return scratch_; }
  std::string sockname() const { return sockname_; }
  int ibsim_pid() const { return ibsim_pid_; }
  // All PIDs this fabric started and has not reaped yet (ibsim included).
  std::vector<int> live_pids() const;

 private:
  struct Process {
    std::string name;
    pid_t pid = -1;
    std::string dir;
    std::string out_path;
    std::string err_path;
    std::optional<int> exit_code;  // set once reaped
  };
  struct Opensm {
    int process = -1;
    std::string log_path;
  };

  int spawn_process(const std::string& name, const std::vector<std::string>& argv,
                    const std::vector<std::pair<std::string, std::string>>& env,
                    const std::string& cwd_name);
  bool reap(Process& p, bool block);
  void stop(Process& p, int sig);
  void free_client_slot(pid_t pid);
  std::vector<std::pair<std::string, std::string>> env_for(
      const std::string& node, std::vector<std::pair<std::string, std::string>> extra) const;
  const Process& proc(int pidx) const;
  Process& proc(int pidx);
  const Opensm& osm(int idx) const;
  void wait_ibsim_ready(const std::string& topology);
  void shutdown() noexcept;

  std::string scratch_;
  std::string sockname_;
  pid_t ibsim_pid_ = -1;
  int console_fd_ = -1;
  std::string ibsim_out_;
  std::string ibsim_err_;
  bool timeout_shim_default_ = false;
  std::vector<Process> procs_;
  std::vector<Opensm> opensms_;
  int run_count_ = 0;
};

// Absolute path of topologies/<name> in the source tree.
std::string topology_path(const std::string& name);
// Absolute path of the umad timeout shim (tests/ibsim/shim), and an
// LD_PRELOAD value loading it together with libumad2sim.
std::string umad_timeout_shim_preload();
std::string umad_timeout_shim_path();
// Absolute path of the SMInfo loss shim (tests/ibsim/shim).
std::string umad_loss_shim_path();

// SMInfo loss for the processes of a test (tests/ibsim/shim/umad_loss_shim.c).
// ibsim's own `Error "node"[port] rate 32` drops no SMInfo (ibsim forwards it
// before it applies the error rate), so the ibsim tier injects the HA
// protocol's loss in the sending processes instead: each process started with
// env() drops `percent` % of the SMInfo MADs it sends off-node (directed-route
// hop 0 exempt) and counts them in its own file under `dir`.
// Contract: set_percent() takes effect for the next MAD of every such
// process (smhad and the OpenSM it starts, which inherits the environment);
// counts() sums every process's count file. Throws std::runtime_error if the
// shim is not built or `dir` cannot be written.
class SmInfoLoss {
 public:
  struct Counts {
    unsigned long long seen = 0;     // off-node SMInfo MADs sent while the loss was on
    unsigned long long dropped = 0;  // of those, dropped
    int processes = 0;               // count files found
    std::string text;                // their lines, for failure messages
  };
  // Creates `dir`; the loss starts at `percent` %.
  explicit SmInfoLoss(std::string dir, int percent = 0, unsigned seed = 1);
  // LD_PRELOAD (timeout shim, loss shim, umad2sim, in that order: a dropped
  // request then times out as on hardware) and the shim's variables.
  std::vector<std::pair<std::string, std::string>> env() const;
  void set_percent(int percent);
  Counts counts() const;

 private:
  std::string dir_;
  unsigned seed_;
};

// Reads a whole file ("" if it does not exist).
std::string read_file(const std::string& path);

}  // namespace smha::testing
