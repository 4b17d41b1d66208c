// Helpers for ibsim tests that run the real smhad binary (tests/ibsim/service):
// per-head scratch directories and configs, the control socket's status, waits
// on conditions, and a guard that kills the OpenSMs smhad started (they are not
// the test's children and outlive smhad by design). Moved here from
// test_smhad_ibsim.cpp so every smhad test shares them.
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
// Alive and not a zombie.
bool running(int pid);

// Waits for `pred`, re-checking every 20 ms, up to `timeout`.
bool wait_for(const std::function<bool()>& pred, std::chrono::milliseconds timeout);

// The OpenSMs smhad started: killed (SIGKILL) by PID + start time on destruction.
// add() records a pid seen in a status reply. watch() registers a smhad and its
// supervisor's pidfile (<state_dir>/opensm.pid): at destruction that smhad is
// stopped first (SIGTERM, so it cannot respawn what is killed next), then the
// pidfile is read, so an OpenSM started while the test never got a status
// reply (e.g. a REQUIRE failed first) is stopped too. Declare the guard after
// the IbsimFabric (it is then destroyed first).
class OsmGuard {
 public:
  void add(int pid);
  void watch(IbsimFabric& fabric, int smhad_pidx, const std::string& pidfile);
  ~OsmGuard();

 private:
  struct Watched {
    IbsimFabric* fabric;
    int pidx;
    std::string pidfile;
  };
  std::map<int, unsigned long long> pids_;
  std::vector<Watched> watched_;
};

// The master as seen by `sminfo` run at `node` (state 3 = MASTER); -1s if none.
struct MasterView {
  std::uint64_t guid = 0;
  int priority = -1;
  int state = -1;
};
MasterView query_master(IbsimFabric& fabric, const std::string& node);

// ibsim keeps a killed client attached (10 slots): free the slot of `pid`.
void free_ibsim_slot(IbsimFabric& fabric, int pid);

std::string hex(std::uint64_t v);

struct PeerCfg {
  std::string name;
  std::uint64_t guid;
  int lid;
};

// One head: smhad attached at ibsim node `node`, files under `dir`.
struct Head {
  std::string name;
  std::string node;
  std::uint64_t guid = 0;
  std::string dir;
  int pidx = -1;  // the fabric's process index of the running smhad
  std::string yaml() const { return dir + "/smha.yaml"; }
  std::string socket() const { return dir + "/ctl/smhad.sock"; }
};

// Extra YAML for write_config(): lines inside the `opensm:` map (indented by
// two spaces, e.g. "  crash_loop_count: 2\n") and top-level lines.
struct ConfigExtras {
  std::string opensm;
  std::string top;
};

// Writes h.yaml(): poll 200 ms x 3 misses, every path under h.dir, control
// socket group root.
void write_config(const Head& h, int priority, const std::vector<PeerCfg>& peers,
                  const ConfigExtras& extras = {});

// `status` over the control socket; nullopt if smhad does not answer.
std::optional<nlohmann::json> smhad_status(const Head& h);

// The last 4000 bytes of smhad's stderr+stdout.
std::string smhad_log(IbsimFabric& f, const Head& h);

// Starts smhad -c h.yaml() --log-target stderr attached at h.node; sets h.pidx.
// With `guard`, the head's OpenSM pidfile is watched (OsmGuard::watch).
void start_smhad(IbsimFabric& f, Head& h,
                 std::vector<std::pair<std::string, std::string>> extra_env = {},
                 OsmGuard* guard = nullptr);

// Waits until smhad's status satisfies `pred`; records OpenSM's pid in `guard`.
bool wait_status(IbsimFabric& f, const Head& h, OsmGuard& guard,
                 const std::function<bool(const nlohmann::json&)>& pred,
                 std::chrono::milliseconds timeout, nlohmann::json* last = nullptr);

// The local SM answers MASTER and OpenSM runs under supervision.
bool local_master(const nlohmann::json& s);

}  // namespace smha::testing
