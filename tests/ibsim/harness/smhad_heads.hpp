// Helpers for ibsim tests (and benchmarks) that run smhad heads on an
// IbsimFabric: the YAML a head reads, its control socket, waiting on its status,
// and stopping the OpenSMs smhad started (they outlive smhad by design, so they
// are not the fabric's children: OsmGuard kills them by PID + start time).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ibsim_harness.hpp"

namespace smha::testing {

// /proc/<pid>/stat: state char and start time (field 22); nullopt if gone.
struct ProcStat {
  char state = '?';
  unsigned long long start = 0;
};
std::optional<ProcStat> proc_stat(int pid);
// True while `pid` exists and is not a zombie.
bool pid_running(int pid);

// Waits for `pred`, re-checking every 20 ms, up to `timeout`.
bool wait_for(const std::function<bool()>& pred, std::chrono::milliseconds timeout);

// The OpenSMs smhad started: killed (SIGKILL) by PID + start time on destruction.
class OsmGuard {
 public:
  void add(int pid);
  ~OsmGuard();

 private:
  std::map<int, unsigned long long> pids_;
};

// The master as infiniband-diags `sminfo` at `node` sees it; zeros/-1 if no answer.
struct MasterView {
  std::uint64_t guid = 0;
  int priority = -1;
  int state = -1;
};
MasterView query_master(IbsimFabric& fabric, const std::string& node);
// The SM at `lid` (its own SMInfo, LID-routed), asked from `node`.
MasterView query_sm(IbsimFabric& fabric, const std::string& node, int lid);

// ibsim keeps a killed client attached (10 slots): frees the slot of `pid`.
void free_ibsim_slot(IbsimFabric& fabric, int pid);

std::string hex_guid(std::uint64_t v);  // 0x%016x

struct PeerCfg {
  std::string name;
  std::uint64_t guid;
  int lid;
};

// One smhad head: its name, the ibsim node it runs at, its port GUID and its
// own directory (YAML, socket, state, OpenSM files).
struct Head {
  std::string name;
  std::string node;
  std::uint64_t guid = 0;
  std::string dir;
  int pidx = -1;  // the fabric's process index once started
  std::string yaml() const { return dir + "/smha.yaml"; }
  std::string socket() const { return dir + "/ctl/smhad.sock"; }
  std::string state_dir() const { return dir + "/state"; }
};

// Writes h.yaml(): poll_interval_ms 200 x 3 misses unless `failover` replaces
// that section; `extra` is appended verbatim (e.g. a metrics section).
void write_config(const Head& h, int priority, const std::vector<PeerCfg>& peers,
                  const std::string& extra = {},
                  const std::string& failover = "failover:\n  poll_interval_ms: 200\n  misses_before_takeover: 3\n");

// The status method's data, or nullopt if smhad does not answer.
std::optional<nlohmann::json> smhad_status(const Head& h);
// The tail of smhad's stderr + stdout, for failure messages.
std::string smhad_log(IbsimFabric& f, const Head& h);
// Spawns `smhad -c h.yaml()` at h.node (the fabric stops it by PID).
void start_smhad(IbsimFabric& f, Head& h, const std::string& smhad_path,
                 std::vector<std::pair<std::string, std::string>> env = {});
// Waits until smhad's status satisfies `pred`; records OpenSM's pid in `guard`.
bool wait_status(IbsimFabric& f, const Head& h, OsmGuard& guard,
                 const std::function<bool(const nlohmann::json&)>& pred, std::chrono::milliseconds timeout,
                 nlohmann::json* last = nullptr);
// Local SM MASTER and OpenSM supervised as running.
bool local_master(const nlohmann::json& s);

}  // namespace smha::testing
