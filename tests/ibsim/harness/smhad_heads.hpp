// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// Helpers for ibsim tests that run smhad on head nodes (tests/ibsim/service):
// write a head's smha.yaml, start smhad attached at its node, query it over its
// control socket, read SMInfo from a third node with `sminfo`, and stop the
// OpenSMs smhad started (they outlive smhad by design) by PID.
//
// Contract: every wait is a condition poll with a deadline (kWaitStep between
// looks); queries return values (nullopt / empty views when there is no answer),
// they do not throw. OsmGuard kills only PIDs whose /proc start time still
// matches the one recorded, so a reused PID is never signalled.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "ibsim_harness.hpp"
#include "smha/control/protocol.hpp"

namespace smha::testing {

inline constexpr std::chrono::milliseconds kWaitStep{20};

// /proc/<pid>/stat: state char and start time (field 22); nullopt if gone.
struct ProcStat {
  char state = '?';
  unsigned long long start = 0;
};
std::optional<ProcStat> proc_stat(int pid);
// The process exists and is not a zombie.
bool pid_running(int pid);

// Polls `pred` every kWaitStep until it holds or `timeout` passes.
bool wait_for(const std::function<bool()>& pred, std::chrono::milliseconds timeout);

// The OpenSMs smhad started: not our children, so killed by PID + start time
// (SIGKILL) when the guard goes. Declare it after the IbsimFabric so that it
// runs first (OpenSM goes before ibsim).
class OsmGuard {
 public:
  void add(int pid);
  // smhad's pidfile (<state_dir>/opensm.pid: pid=, start_time=) names the
  // OpenSM it runs now; read when the guard goes, so an OpenSM restarted after
  // the last add() is stopped too.
  void add_pidfile(const std::string& path);
  // Also stops that smhad (SIGTERM, through the fabric) before anything is
  // killed, so it cannot respawn an OpenSM the guard kills; reads its pidfile.
  void watch(IbsimFabric& fabric, int smhad_pidx, const std::string& pidfile);
  ~OsmGuard();

 private:
  std::map<int, unsigned long long> pids_;
  std::vector<std::string> pidfiles_;
  std::vector<std::pair<IbsimFabric*, int>> smhads_;
};

// One SM's SMInfo as `sminfo` prints it.
struct MasterView {
  std::uint64_t guid = 0;
  int priority = -1;
  int state = -1;  // 3 = MASTER; -1: no answer
};
// `sminfo` at `node` (no target: the master the node's port points to; with
// `lid`: the SM at that LID), bounded by `timeout`.
MasterView query_sm(IbsimFabric& fabric, const std::string& node, std::optional<int> lid = std::nullopt,
                    std::chrono::milliseconds timeout = std::chrono::milliseconds{10000});

// `iblinkinfo --switches-only -l` at `node` (infiniband-diags, its own
// discovery): the (switch GUID, port) of every link it prints at `width`
// ("1X", "4X"). Throws, with its stderr, when it fails.
std::set<std::pair<std::uint64_t, int>> iblinkinfo_links(IbsimFabric& fabric, const std::string& node,
                                                          const std::string& width,
                                                          std::chrono::milliseconds timeout = std::chrono::seconds{60});

// `ibqueryerrors` at `node` (infiniband-diags: its own discovery and PMA
// reads, any counter above 0): the error counters it prints, by (node
// description, port), each as {"SymbolErrorCounter": 25, ...}; its "port
// ALL" sums are left out. Throws, with its stderr, when it fails.
using CounterReport = std::map<std::pair<std::string, int>, std::map<std::string, std::uint64_t>>;
CounterReport ibqueryerrors_ports(IbsimFabric& fabric, const std::string& node,
                                  std::chrono::milliseconds timeout = std::chrono::seconds{60});

// ibsim keeps a killed client attached (10 slots): frees the slot of `pid`.
void free_ibsim_slot(IbsimFabric& fabric, int pid);

std::string hex_guid(std::uint64_t v);
// A TCP port on 127.0.0.1 that was free a moment ago (bound to port 0 and
// closed again: the kernel's pick). Throws when no socket can be bound.
int free_loopback_port();

struct PeerCfg {
  std::string name;
  std::uint64_t guid;
  int lid;                   // 0: no lid (the README quick start): found by discovery
  std::string dr_path = {};  // e.g. "0,1,3,1"; empty: none
  std::string address = {};  // continuity address HOST:PORT; empty: none
};

// What varies between the tests' smha.yaml files.
struct SmhadOptions {
  int sm_priority = 10;
  int poll_interval_ms = 100;  // the default
  int misses = 3;
  std::string failback = "sticky";  // or "preempt"
  int preempt_holddown_s = 30;
  std::string extra;  // appended verbatim (e.g. a metrics section)
  std::string opensm_extra;  // lines inside the opensm: map, indented two spaces
  std::string opensm_log_file;  // empty: <dir>/opensm.log
};

struct SmhadHead {
  std::string name;  // head01
  std::string node;  // Hca1
  std::uint64_t guid = 0;
  std::string dir;   // its files: smha.yaml, ctl/, state/, cache/, opensm.log
  int pidx = -1;     // fabric process index of the running smhad
  int lid = 0;
  std::string yaml() const { return dir + "/smha.yaml"; }
  std::string socket() const { return dir + "/ctl/smhad.sock"; }
  std::string opensm_log() const { return dir + "/opensm.log"; }
  std::string state_dir() const { return dir + "/state"; }
  std::string pidfile() const { return state_dir() + "/opensm.pid"; }
};

void write_smhad_config(const SmhadHead& h, const std::vector<PeerCfg>& peers, const SmhadOptions& o = {});
// Spawns `smhad -c <yaml>` attached at h.node (its OpenSM child inherits the
// environment; `extra_env` e.g. preloads the umad timeout shim); sets h.pidx.
// Logs to stderr whatever the test runner's environment (--log-target stderr).
// With `guard`, the guard watches this smhad and its OpenSM pidfile.
void start_smhad(IbsimFabric& f, SmhadHead& h, const std::string& smhad_binary,
                 std::vector<std::pair<std::string, std::string>> extra_env = {}, OsmGuard* guard = nullptr);

// One control-socket call and its whole reply; nullopt when smhad cannot be
// reached or does not answer within `timeout`.
std::optional<control::Reply> smhad_call(const SmhadHead& h, const std::string& method, const nlohmann::json& params,
                                         std::chrono::milliseconds timeout = std::chrono::milliseconds{5000});
// Control socket calls: status's data / the events array (oldest first).
std::optional<nlohmann::json> smhad_status(const SmhadHead& h);
std::optional<nlohmann::json> smhad_events(const SmhadHead& h, int n = 256);
// The last ~4000 bytes of smhad's stderr + stdout.
std::string smhad_log(IbsimFabric& f, const SmhadHead& h);

// Waits until smhad's status satisfies `pred`; records OpenSM's pid in `guard`;
// `last` receives the latest status.
bool wait_status(IbsimFabric& f, const SmhadHead& h, OsmGuard& guard,
                 const std::function<bool(const nlohmann::json&)>& pred, std::chrono::milliseconds timeout,
                 nlohmann::json* last = nullptr);

// status: local SM MASTER and its OpenSM supervised as running.
bool local_master(const nlohmann::json& s);

// Starts h1 (configured already) and waits until it is MASTER, then h2 and
// waits until it is STANDBY seeing h1 MASTER; their last status in s1 and s2.
// Returns "" or what went wrong (the head, its status and log). `watch`: the
// guard also watches both smhad and their OpenSM pidfiles (start_smhad's guard).
std::string start_master_standby(IbsimFabric& f, OsmGuard& guard, SmhadHead& h1, SmhadHead& h2,
                                 nlohmann::json& s1, nlohmann::json& s2, const std::string& smhad_binary,
                                 bool watch);

}  // namespace smha::testing
