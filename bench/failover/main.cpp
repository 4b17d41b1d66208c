// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// bench_failover: how long a subnet is without a MASTER when the master SM
// fails, as a third node sees it, and whether MAD loss causes false takeovers.
//
// Every run builds a fresh ibsim fabric (tests/ibsim/harness IbsimFabric):
// OpenSM on Hca1 (priority 15, MASTER) and on Hca2 (priority 1, STANDBY), both
// with the umad timeout shim, and bench_failover_probe at Hca3 polling the
// standby's SMInfo by LID every few ms. The fault is injected, and the figure
// is the probe's timestamp of the first reply showing the standby as MASTER
// minus the fault time (both CLOCK_MONOTONIC). The fabric destructor stops
// every process by PID, also when a run throws.
//
// Columns: two smhad at their defaults, each running its own OpenSM (the 4-HCA
// drills, the --big kill -9 and the --soak-minutes loss soak); three smhad (the
// 4-HCA drills: head03 on Hca4, the figure is head02's MASTER answer, and a
// run where head03 answers MASTER first counts as failed); and OpenSM's own HA
// at three (sminfo_polling_timeout x polling_retry_number) settings. A second
// table, the SA outage: from the fault until the new master's SA answers the
// probe's SubnAdmGetTable(SMInfoRecord) (an OpenSM answers no SA query until
// its first master sweep ends; a compute node's rejoins and path queries wait
// that long). See doc/performance.md ("## Failover").
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <CLI/CLI.hpp>

#include "flood.hpp"
#include "smha_yaml.hpp"
#include "ibsim_harness.hpp"
#include "smhad_heads.hpp"

namespace {

using namespace std::chrono_literals;
using smha::testing::IbsimFabric;
using smha::testing::OpensmSpec;
using Clock = std::chrono::steady_clock;

struct OsmHa {
  std::string name;
  int polling_timeout_ms;
  int retries;
  int runs;
  bool sa_copy = false;
};

enum class Drill { Kill, Stop, Unlink };

const char* drill_name(Drill d) {
  switch (d) {
    case Drill::Kill: return "kill -9 master";
    case Drill::Stop: return "SIGSTOP master (hung)";
    case Drill::Unlink: return "master HCA link removed";
  }
  return "?";
}

struct ProbeLine {
  std::int64_t ns;
  int lid;
  std::string state;
};

std::vector<ProbeLine> parse_probe(const std::string& text) {
  std::vector<ProbeLine> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    ProbeLine p{};
    if (ls >> p.ns >> p.lid >> p.state) out.push_back(p);
  }
  return out;
}

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

// The stamp of the probe's first line for `lid` in `state` at or after
// `since_ns`, if it printed one yet.
std::optional<std::int64_t> probe_saw(IbsimFabric& f, int probe, int lid, const std::string& state,
                                      std::int64_t since_ns) {
  for (const auto& p : parse_probe(f.process_stdout(probe)))
    if (p.lid == lid && p.state == state && p.ns >= since_ns) return p.ns;
  return std::nullopt;
}

// Waits until the probe has printed a line for `lid` in `state` stamped at or
// after `since_ns`; returns its stamp.
std::optional<std::int64_t> wait_probe(IbsimFabric& f, int probe, int lid,
                                       const std::string& state, std::int64_t since_ns,
                                       std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    if (const auto ns = probe_saw(f, probe, lid, state, since_ns)) return ns;
    if (!f.process_running(probe)) return std::nullopt;
    std::this_thread::sleep_for(5ms);
  }
  return std::nullopt;
}

// --osm-conf: extra opensm.conf lines ("key value") for every OpenSM of the
// run, bare (conf_lines) or rendered by smhad (opensm.extra), so the columns
// stay comparable.
std::vector<std::string> g_osm_conf;

std::vector<std::string> ha_conf(const OsmHa& ha) {
  std::vector<std::string> out{"sminfo_polling_timeout " + std::to_string(ha.polling_timeout_ms),
                               "polling_retry_number " + std::to_string(ha.retries)};
  if (ha.sa_copy) out.push_back("sa_db_dump TRUE");
  out.insert(out.end(), g_osm_conf.begin(), g_osm_conf.end());
  return out;
}

// --sa-copy-by-hand: OpenSM's own HA with the master's opensm-sa.dump copied
// by the bench into the standby's sa_db_file just before the fault (both
// with sa_db_dump TRUE): what an exact copy gives, as a reference column.
bool g_sa_copy_by_hand = false;

struct Heads {
  int master = -1;
  int standby = -1;
  int lid1 = 0;
  int lid2 = 0;
};

// Starts both OpenSMs and waits for MASTER + STANDBY. Throws on failure.
// `env1`/`env2` override each head's environment (e.g. the SMInfo loss shim).
Heads start_heads(IbsimFabric& f, const OsmHa& ha, std::chrono::milliseconds up_timeout,
                  std::vector<std::pair<std::string, std::string>> env1 = {},
                  std::vector<std::pair<std::string, std::string>> env2 = {}) {
  Heads h;
  OpensmSpec spec;
  spec.node = "Hca1";
  spec.priority = 15;
  spec.conf_lines = ha_conf(ha);
  spec.extra_env = std::move(env1);
  h.master = f.start_opensm(spec);
  if (!f.wait_subnet_up(h.master, up_timeout))
    throw std::runtime_error("master OpenSM on Hca1: no SUBNET UP");
  spec.node = "Hca2";
  spec.priority = 1;
  spec.extra_env = std::move(env2);
  if (ha.sa_copy) spec.conf_lines.push_back("sa_db_file " + f.scratch_dir() + "/sa-copy.dump");
  h.standby = f.start_opensm(spec);
  if (!f.wait_log(h.standby, "Entering STANDBY state", up_timeout))
    throw std::runtime_error("OpenSM on Hca2: never STANDBY");
  const auto p1 = f.node_port("Hca1");
  const auto p2 = f.node_port("Hca2");
  if (!p1 || !p2 || p1->lid == 0 || p2->lid == 0)
    throw std::runtime_error("could not read the heads' LIDs with ibstat");
  h.lid1 = p1->lid;
  h.lid2 = p2->lid;
  return h;
}

// `sa_lid`: the probe also asks that SA (the standby that is to take over).
int spawn_probe(IbsimFabric& f, const std::vector<int>& lids, int interval_ms, int sa_lid = 0) {
  std::vector<std::string> argv{SMHA_BENCH_PROBE, "--interval-ms", std::to_string(interval_ms)};
  for (int lid : lids) {
    argv.push_back("--lid");
    argv.push_back(std::to_string(lid));
  }
  if (sa_lid != 0) {
    argv.push_back("--sa-lid");
    argv.push_back(std::to_string(sa_lid));
  }
  return f.spawn("Hca3", argv);
}

struct Cell {
  std::vector<double> ms;
  int failed = 0;
};

// The SA outage of each run, by column and row ("OpenSM 50x0", "kill -9
// master (4 HCAs)"); `g_row_fabric` names the fabric of the runs going on.
std::map<std::pair<std::string, std::string>, Cell> g_sa_outage;
std::string g_row_fabric = "4 HCAs";

// ---- --workload: what a compute node's workload keeps across the takeover.
//
// Before the fault, bench_workload_client at each workload node joins
// g_workload_groups multicast groups, registers a ServiceRecord and
// subscribes to traps 64/65 through the master's SA; the fabric's LIDs, LFTs
// and MFTs are read by SMP from Hca3 once the master has programmed every
// group's MLID. After the new master's SA answers, the same is read back
// from it. Each row counts what changed or was lost, of how many.
bool g_workload = false;
int g_workload_groups = 4;
int g_workload_nodes = 16;  // on the big fabric; the 4-HCA lab has Hca3 and Hca4

struct WorkloadBefore {
  nlohmann::json tables;
  nlohmann::json check;
  std::vector<std::string> members;  // port GUIDs, as the client prints them
};

struct Changed {
  long n = 0;  // changed or lost
  long of = 0;
};

// One run's figures, in the order of kWorkloadRows.
using WorkloadRun = std::vector<Changed>;
const std::vector<std::string> kWorkloadRows{
    "LIDs changed",        "LFT entries changed", "MFT entries changed",   "MLIDs changed or lost",
    "members lost",        "ServiceRecords lost", "subscriptions lost"};
std::map<std::pair<std::string, std::string>, std::vector<WorkloadRun>> g_workload_runs;

std::vector<std::string> workload_nodes(const std::string& topology) {
  if (topology.find("fattree") == std::string::npos) return {"Hca3", "Hca4"};
  // Round-robin over the leaves: Hca3.. sit on different leaves.
  std::vector<std::string> out;
  for (int i = 0; i < g_workload_nodes; ++i) out.push_back("Hca" + std::to_string(3 + i));
  return out;
}

nlohmann::json run_client(IbsimFabric& f, const std::string& node, std::vector<std::string> args) {
  args.insert(args.begin(), SMHA_WORKLOAD_CLIENT);
  const auto r = f.run(node, args, 120s);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(r.out);
  } catch (const std::exception&) {
    throw std::runtime_error("workload client at " + node + " (" + args[1] + "): exit " +
                             std::to_string(r.exit_code) + ": " + r.err.substr(0, 500));
  }
  return j;
}

nlohmann::json check_workload(IbsimFabric& f, int sa_lid, const std::vector<std::string>& members) {
  std::vector<std::string> args{"check", "--sa-lid", std::to_string(sa_lid), "--groups",
                                std::to_string(g_workload_groups)};
  for (const auto& m : members) {
    args.push_back("--member");
    args.push_back(m);
  }
  return run_client(f, "Hca3", args);
}

// Every joined MLID has a port in some switch's MFT (the master programs the
// MFTs on the sweep after a join).
bool mfts_programmed(const nlohmann::json& tables, const std::set<int>& mlids) {
  std::set<int> seen;
  for (const auto& [sw, entries] : tables["mft"].items())
    for (const auto& [mlid, positions] : entries.items()) seen.insert(std::stoi(mlid));
  return std::includes(seen.begin(), seen.end(), mlids.begin(), mlids.end());
}

WorkloadBefore workload_start(IbsimFabric& f, const std::string& topology, int sa_lid) {
  WorkloadBefore b;
  std::set<int> mlids;
  for (const auto& node : workload_nodes(topology)) {
    const auto j = run_client(f, node, {"join", "--sa-lid", std::to_string(sa_lid), "--groups",
                                        std::to_string(g_workload_groups)});
    if (!j["errors"].empty()) throw std::runtime_error("workload at " + node + ": " + j["errors"].dump());
    b.members.push_back(j["port_guid"].get<std::string>());
    for (const auto& g : j["groups"]) mlids.insert(g["mlid"].get<int>());
  }
  const bool ok = smha::testing::wait_for([&] {
    b.tables = run_client(f, "Hca3", {"tables"});
    return b.tables["errors"].empty() && mfts_programmed(b.tables, mlids);
  }, 30s);
  if (!ok) throw std::runtime_error("the master never programmed the workload's MFT entries");
  b.check = check_workload(f, sa_lid, b.members);
  if (!b.check["errors"].empty()) throw std::runtime_error("workload check before: " + b.check["errors"].dump());
  return b;
}

WorkloadRun workload_diff(const WorkloadBefore& b, const nlohmann::json& tables, const nlohmann::json& check) {
  WorkloadRun r(kWorkloadRows.size());
  // LIDs of every port seen before.
  std::set<int> lids;
  for (const auto& [guid, lid] : b.tables["lids"].items()) {
    lids.insert(lid.get<int>());
    ++r[0].of;
    if (!tables["lids"].contains(guid) || tables["lids"][guid] != lid) {
      ++r[0].n;
      std::fprintf(stderr, "  LID of %s: %d before, %s after\n", guid.c_str(), lid.get<int>(),
                   tables["lids"].contains(guid) ? tables["lids"][guid].dump().c_str() : "none");
    }
  }
  // LFT entries of the LIDs in use, every switch.
  for (const auto& [sw, ports] : b.tables["lft"].items())
    for (int lid : lids) {
      if (lid >= static_cast<int>(ports.size())) continue;
      ++r[1].of;
      const auto& after = tables["lft"].contains(sw) ? tables["lft"][sw] : nlohmann::json::array();
      if (lid >= static_cast<int>(after.size()) || after[static_cast<std::size_t>(lid)] != ports[static_cast<std::size_t>(lid)]) ++r[1].n;
    }
  // MFT entries (switch, MLID, position) set before; and any set after only.
  for (const auto& [sw, entries] : b.tables["mft"].items())
    for (const auto& [mlid, positions] : entries.items())
      for (const auto& [pos, mask] : positions.items()) {
        ++r[2].of;
        const auto& a = tables["mft"];
        if (!a.contains(sw) || !a[sw].contains(mlid) || !a[sw][mlid].contains(pos) || a[sw][mlid][pos] != mask) ++r[2].n;
      }
  for (const auto& [sw, entries] : tables["mft"].items())
    for (const auto& [mlid, positions] : entries.items())
      for (const auto& [pos, mask] : positions.items())
        if (!b.tables["mft"].contains(sw) || !b.tables["mft"][sw].contains(mlid) ||
            !b.tables["mft"][sw][mlid].contains(pos))
          ++r[2].n;
  // Groups: the MLID any member had before, and after; each member.
  for (std::size_t g = 0; g < b.check["groups"].size(); ++g) {
    const auto& before = b.check["groups"][g]["members"];
    const auto& after = check["groups"][g]["members"];
    std::optional<int> mlid_before, mlid_after;
    for (const auto& [m, mlid] : before.items()) {
      if (mlid.is_null()) continue;
      mlid_before = mlid.get<int>();
      ++r[4].of;
      if (!after.contains(m) || after[m].is_null() || after[m] != mlid) ++r[4].n;
      if (after.contains(m) && !after[m].is_null()) mlid_after = after[m].get<int>();
    }
    if (!mlid_before) continue;
    ++r[3].of;
    if (mlid_after != mlid_before) ++r[3].n;
  }
  for (const auto& [m, present] : b.check["services"].items()) {
    if (!present.get<bool>()) continue;
    ++r[5].of;
    if (!check["services"].contains(m) || !check["services"][m].get<bool>()) ++r[5].n;
  }
  for (const auto& [m, n] : b.check["informs"].items()) {
    r[6].of += n.get<int>();
    const int now = check["informs"].contains(m) ? check["informs"][m].get<int>() : 0;
    r[6].n += std::max(0, n.get<int>() - now);
  }
  return r;
}

// After the new master's SA answered: read it all back and count. A check the
// SA does not answer yet (errors) is retried for a while.
void workload_finish(IbsimFabric& f, const WorkloadBefore& b, int sa_lid, const std::string& column,
                     const std::string& row) {
  nlohmann::json check;
  const bool ok = smha::testing::wait_for([&] {
    check = check_workload(f, sa_lid, b.members);
    return check["errors"].empty();
  }, 30s);
  if (!ok) throw std::runtime_error("workload check after: " + check["errors"].dump());
  // A port the drill took away (the old master's HCA, relinked) is back once
  // the new master has swept it: wait for every port seen before, then
  // count whatever is there (a port still missing counts as changed).
  nlohmann::json tables;
  smha::testing::wait_for([&] {
    tables = run_client(f, "Hca3", {"tables"});
    if (!tables["errors"].empty()) return false;
    for (const auto& [guid, lid] : b.tables["lids"].items())
      if (!tables["lids"].contains(guid)) return false;
    return true;
  }, 30s);
  if (!tables["errors"].empty()) throw std::runtime_error("tables after: " + tables["errors"].dump());
  g_workload_runs[{column, row}].push_back(workload_diff(b, tables, check));
}

// After a run's new MASTER: when the probe first had an answer from its SA.
void note_sa_outage(IbsimFabric& f, int probe, int sa_lid, std::int64_t t0, const std::string& column, Drill drill);

// One drill run; milliseconds from the fault to the probe's first MASTER
// reply from the standby, or nullopt (with the reason on stderr).
std::optional<double> run_drill(const std::string& topology, const OsmHa& ha, Drill drill,
                                int interval_ms, std::chrono::milliseconds up_timeout) {
  try {
    IbsimFabric f(topology);
    f.set_timeout_shim_default(true);
    const Heads h = start_heads(f, ha, up_timeout);
    // Only the standby is polled: a frozen master's socket queue must not be
    // filled by the probe (doc/lab.md, ibsim quirk 5).
    const int probe = spawn_probe(f, {h.lid2}, interval_ms, h.lid2);
    if (!wait_probe(f, probe, h.lid2, "STANDBY", 0, 10s))
      throw std::runtime_error("probe never saw the standby: " + f.process_stderr(probe));
    std::optional<WorkloadBefore> work;
    if (g_workload) work = workload_start(f, topology, h.lid1);
    if (ha.sa_copy) {
      // The master writes its dump at the end of the sweep after a change.
      const std::string dump = f.opensm_dir(h.master) + "/opensm-sa.dump";
      if (!smha::testing::wait_for([&] { return smha::testing::read_file(dump).find("mcm_port") != std::string::npos; }, 30s))
        throw std::runtime_error("no opensm-sa.dump with members from the master");
      std::filesystem::copy_file(dump, f.scratch_dir() + "/sa-copy.dump", std::filesystem::copy_options::overwrite_existing);
    }
    const std::int64_t t0 = now_ns();
    switch (drill) {
      case Drill::Kill: f.signal_opensm(h.master, SIGKILL); break;
      case Drill::Stop: f.signal_opensm(h.master, SIGSTOP); break;
      case Drill::Unlink: f.console("Unlink \"Hca1\"[1]"); break;
    }
    const auto bound = std::chrono::milliseconds(ha.polling_timeout_ms * (ha.retries + 3)) + 30s;
    const auto t1 = wait_probe(f, probe, h.lid2, "MASTER", t0, bound);
    if (drill == Drill::Unlink) f.console("ReLink \"Hca1\"[1]");
    if (!t1) {
      std::fprintf(stderr, "  %s, %s: no new MASTER within %lld ms\n", ha.name.c_str(),
                   drill_name(drill), static_cast<long long>(bound.count()));
      return std::nullopt;
    }
    note_sa_outage(f, probe, h.lid2, t0, ha.name, drill);
    if (work) workload_finish(f, *work, h.lid2, ha.name, std::string(drill_name(drill)) + " (" + g_row_fabric + ")");
    return static_cast<double>(*t1 - t0) / 1e6;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "  %s, %s: run failed: %s\n", ha.name.c_str(), drill_name(drill),
                 e.what());
    return std::nullopt;
  }
}

// ---- smhad column: two smhad (branch daemon's run path) steering the OpenSMs.

// Children of `pid` whose comm is "opensm" (/proc/<pid>/task/<pid>/children).
std::vector<int> opensm_children(int pid) {
  std::vector<int> out;
  std::ifstream in("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children");
  for (int child = 0; in >> child;) {
    std::ifstream comm("/proc/" + std::to_string(child) + "/comm");
    std::string name;
    if (comm >> name && name == "opensm") out.push_back(child);
  }
  return out;
}

// The OpenSMs smhad started outlive smhad by design: killed here by PID.
class OsmReaper {
 public:
  void add(const std::vector<int>& pids) {
    for (int p : pids)
      if (std::find(pids_.begin(), pids_.end(), p) == pids_.end()) pids_.push_back(p);
  }
  // smhad's OpenSM pidfile (state_dir/opensm.pid), read when the reaper goes:
  // an OpenSM smhad started after the last add() (a restart as standby at the
  // end of a run) is stopped too.
  void add_pidfile(std::string path) { pidfiles_.push_back(std::move(path)); }
  ~OsmReaper() {
    for (const auto& path : pidfiles_) {
      std::ifstream in(path);
      for (std::string line; std::getline(in, line);)
        if (line.rfind("pid=", 0) == 0) {
          const int pid = std::atoi(line.c_str() + 4);
          std::ifstream comm("/proc/" + std::to_string(pid) + "/comm");
          std::string name;
          if (pid > 0 && comm >> name && name == "opensm") add({pid});
        }
    }
    for (int p : pids_) ::kill(p, SIGKILL);
    for (int p : pids_)
      for (int i = 0; i < 200 && ::kill(p, 0) == 0; ++i) std::this_thread::sleep_for(10ms);
  }

 private:
  std::vector<int> pids_;
  std::vector<std::string> pidfiles_;
};

struct SmhadHead {
  std::string name;
  std::string node;
  smha::testing::NodePort port;
  std::string dir;
  int channel_port = 0;  // continuity.listen on 127.0.0.1 (g_channel runs)
};

// The runs going on are "smhad, continuity": the peer channel between the
// heads (doc/continuity.md), certificates from scripts/make-peer-certs.
bool g_channel = false;
// --flood-runs: these channel runs settle 2 s before the fault; with g_flood
// a ChannelFlood (flood.hpp) hammers both heads' listeners from then until
// the new MASTER answers.
bool g_flood_compare = false;
bool g_flood = false;


// The YAML smhad reads, written as the tests write it (tests/support/smha_yaml.hpp).
std::string write_smhad_config(const SmhadHead& h, const std::vector<SmhadHead>& heads) {
  smha::test::HeadYaml y;
  y.dir = h.dir;
  y.name = h.name;
  y.guid = h.port.port_guid;
  y.peers.clear();
  for (const auto& peer : heads)
    if (peer.name != h.name)
      y.peers.push_back({peer.name, peer.port.port_guid, static_cast<int>(peer.port.lid), "",
                         g_channel ? "127.0.0.1:" + std::to_string(peer.channel_port) : ""});
  if (g_channel) {
    const std::string certs = std::filesystem::path(h.dir).parent_path().string() + "/certs";
    y.extra = "continuity:\n  listen: \"127.0.0.1:" + std::to_string(h.channel_port) + "\"\n  certificate: " +
              certs + "/" + h.name + ".pem\n  private_key: " + certs + "/" + h.name + ".key\n  ca: " + certs +
              "/ca.pem\n";
  }
  y.sm_priority = 10;
  y.dump_files_dir = true;
  if (!g_osm_conf.empty()) {
    y.opensm_extra = "  extra:\n";
    for (const auto& line : g_osm_conf) {
      const auto sp = line.find(' ');
      y.opensm_extra += "    " + line.substr(0, sp) + ": \"" + line.substr(sp + 1) + "\"\n";
    }
  }
  const std::string path = h.dir + "/smha.yaml";
  y.write(path);
  return path;
}

// Two or three smhad at their defaults on `topology`: head01 (Hca1) MASTER,
// head02 (Hca2) and head03 (Hca4) STANDBY, and the probe at Hca3 polling every
// head. Throws on failure.
struct SmhadGroup {
  std::vector<SmhadHead> heads;
  std::vector<int> procs;  // smhad per head
  std::vector<int> lids;   // per head
  int probe = -1;
};

// `loss_env`: every smhad (and the OpenSMs they start) under the SMInfo loss shim.
SmhadGroup start_smhad_group(IbsimFabric& f, OsmReaper& reaper, int nheads, int interval_ms,
                             std::chrono::seconds up_timeout,
                             std::vector<std::pair<std::string, std::string>> loss_env = {}) {
  SmhadGroup g;
  const std::vector<std::pair<std::string, std::string>> all{{"head01", "Hca1"}, {"head02", "Hca2"}, {"head03", "Hca4"}};
  // LIDs: a plain OpenSM on Hca3 assigns them once; later masters keep them.
  const int boot = f.start_opensm("Hca3", 0);
  if (!f.wait_subnet_up(boot, up_timeout)) throw std::runtime_error("boot OpenSM: no SUBNET UP");
  for (int i = 0; i < nheads; ++i) {
    SmhadHead h{all[i].first, all[i].second, {}, f.scratch_dir() + "/" + all[i].first, smha::testing::free_loopback_port()};
    reaper.add_pidfile(h.dir + "/state/opensm.pid");
    const auto port = f.node_port(h.node);
    if (!port || !port->lid) throw std::runtime_error("no LID for " + h.node);
    h.port = *port;
    g.heads.push_back(h);
    g.lids.push_back(static_cast<int>(port->lid));
  }
  f.stop_opensm(boot);
  if (g_channel) {
    std::string cmd = std::string(SMHA_SOURCE_DIR) + "/scripts/make-peer-certs " + f.scratch_dir() + "/certs";
    for (const auto& h : g.heads) cmd += " " + h.name;
    if (std::system(cmd.c_str()) != 0) throw std::runtime_error("make-peer-certs failed");
  }
  const std::vector<std::pair<std::string, std::string>> env =
      loss_env.empty() ? std::vector<std::pair<std::string, std::string>>{
                             {"LD_PRELOAD", smha::testing::umad_timeout_shim_preload()}}
                       : loss_env;
  g.probe = spawn_probe(f, g.lids, interval_ms, g.lids[1]);
  for (int i = 0; i < nheads; ++i) {
    const auto& h = g.heads[i];
    g.procs.push_back(f.spawn(h.node, {SMHA_SMHAD, "-c", write_smhad_config(h, g.heads)}, env));
    const char* want = i == 0 ? "MASTER" : "STANDBY";
    if (!wait_probe(f, g.probe, g.lids[i], want, 0, up_timeout))
      throw std::runtime_error(h.name + " never " + want + ": " + f.process_stderr(g.procs[i]).substr(0, 2000));
    reaper.add(opensm_children(f.process_pid(g.procs[i])));
  }
  // The steady state a deployed group is in before any fault: each smhad's own
  // rounds show every peer (head01's engine has seen the standbys answer
  // STANDBY, which the instant DISCOVER on a local crash goes by; each
  // standby's has seen head01 MASTER). The third node seeing STANDBY can come
  // a round earlier.
  for (const auto& h : g.heads) {
    smha::testing::SmhadHead th;
    th.dir = h.dir;
    const bool steady = smha::testing::wait_for([&] {
      auto s = smha::testing::smhad_status(th);
      // "state" is null until the first answered round (doc/control-protocol.md).
      auto state = [](const nlohmann::json& j) {
        return j.is_object() && j.contains("state") && j["state"].is_string() ? j["state"].get<std::string>()
                                                                               : std::string();
      };
      if (!s || state((*s)["local"]) != (h.name == "head01" ? "MASTER" : "STANDBY")) return false;
      if (!(*s)["peers"].is_array() || (*s)["peers"].size() != g.heads.size() - 1) return false;
      for (const auto& peer : (*s)["peers"])
        if (state(peer) != (peer.value("name", "") == "head01" ? "MASTER" : "STANDBY")) return false;
      return true;
    }, up_timeout);
    if (!steady) throw std::runtime_error(h.name + "'s smhad never saw its peers steady");
  }
  return g;
}

// Where --keep-logs copies each smhad run's head directories (smhad's stderr,
// opensm.log, opensm.conf, events); empty: nothing is kept.
std::string g_keep_logs;
int g_kept_runs = 0;

void keep_logs(IbsimFabric& f, const SmhadGroup& g) {
  if (g_keep_logs.empty()) return;
  namespace fs = std::filesystem;
  const fs::path dst = fs::path(g_keep_logs) / ("run-" + std::to_string(++g_kept_runs));
  fs::create_directories(dst);
  for (std::size_t i = 0; i < g.heads.size(); ++i) {
    const auto& h = g.heads[i];
    for (const auto& e : fs::recursive_directory_iterator(h.dir)) {
      if (!e.is_regular_file()) continue;  // the control socket, the cache dirs
      const fs::path to = dst / h.name / fs::relative(e.path(), h.dir);
      fs::create_directories(to.parent_path());
      fs::copy_file(e.path(), to, fs::copy_options::overwrite_existing);
    }
    std::ofstream(dst / (h.name + ".stderr")) << f.process_stderr(g.procs[i]);
  }
  std::ofstream(dst / "probe.out") << f.process_stdout(g.probe);
  std::fprintf(stderr, "  logs kept in %s\n", dst.c_str());
}

// With the channel: head02 holds the master's SA dump with the whole
// workload (every group, every member) before the fault, as a deployed pair
// does a few seconds after a change.
void wait_copy_current(const SmhadGroup& g, const WorkloadBefore& w) {
  std::size_t members = 0, groups = 0;
  for (const auto& grp : w.check["groups"]) {
    std::size_t n = 0;
    for (const auto& [m, mlid] : grp["members"].items()) n += mlid.is_null() ? 0 : 1;
    members += n;
    groups += n > 0 ? 1 : 0;
  }
  smha::testing::SmhadHead th;
  th.dir = g.heads[1].dir;
  const bool ok = smha::testing::wait_for([&] {
    auto s = smha::testing::smhad_status(th);
    if (!s) return false;
    const auto& sa = (*s)["continuity"]["copies"]["sa_dump"];
    return sa.is_object() && sa["groups"].get<std::size_t>() >= groups && sa["members"].get<std::size_t>() >= members;
  }, 60s);
  if (!ok) throw std::runtime_error("head02 never held the master's SA dump with the workload");
}

// With three heads, head02 must take over (OpenSM's order at equal priority:
// the lower port GUID, Hca2's); head03 answering MASTER first fails the run.
std::optional<double> run_smhad_drill(const std::string& topology, Drill drill, int interval_ms,
                                      std::chrono::seconds up_timeout = 30s, int nheads = 2) {
  const std::string what = nheads == 2 ? (g_channel ? "smhad, continuity" : "smhad")
                                       : "smhad, " + std::to_string(nheads) + " heads";
  try {
    IbsimFabric f(topology);
    OsmReaper reaper;  // after the fabric: OpenSM goes before ibsim
    const SmhadGroup g = start_smhad_group(f, reaper, nheads, interval_ms, up_timeout);
    const auto victims = opensm_children(f.process_pid(g.procs[0]));
    reaper.add(victims);
    if (victims.size() != 1) throw std::runtime_error("head01's OpenSM pid not found");
    std::optional<WorkloadBefore> work;
    if (g_workload && nheads == 2) work = workload_start(f, topology, g.lids[0]);
    if (work && g_channel) wait_copy_current(g, *work);
    std::unique_ptr<smha::bench::ChannelFlood> flood;
    if (g_flood_compare) {
      if (g_flood) flood = std::make_unique<smha::bench::ChannelFlood>(
                       std::vector<int>{g.heads[0].channel_port, g.heads[1].channel_port}, 4, 10);
      std::this_thread::sleep_for(2s);  // the flood in full swing (or the same wait without it)
    }
    const std::int64_t t0 = now_ns();
    switch (drill) {
      case Drill::Kill: ::kill(victims[0], SIGKILL); break;
      case Drill::Stop: ::kill(victims[0], SIGSTOP); break;
      case Drill::Unlink: f.console("Unlink \"Hca1\"[1]"); break;
    }
    const auto t1 = wait_probe(f, g.probe, g.lids[1], "MASTER", t0, 30s);
    if (flood) {
      const auto n = flood->counts();
      flood.reset();
      std::fprintf(stderr, "  flood: %llu ClientHellos, %llu idle connections\n",
                   static_cast<unsigned long long>(n.handshakes), static_cast<unsigned long long>(n.holds));
    }
    if (t1 && !g_flood_compare) note_sa_outage(f, g.probe, g.lids[1], t0, what, drill);
    for (int proc : g.procs) reaper.add(opensm_children(f.process_pid(proc)));
    if (drill == Drill::Unlink) f.console("ReLink \"Hca1\"[1]");
    // After the relink, as in the OpenSM columns: the old master's port is back.
    if (t1 && work)
      workload_finish(f, *work, g.lids[1], what, std::string(drill_name(drill)) + " (" + g_row_fabric + ")");
    for (int proc : g.procs) f.stop_process(proc);
    keep_logs(f, g);
    if (!t1) {
      std::fprintf(stderr, "  %s, %s: no new MASTER within 30 s\n", what.c_str(), drill_name(drill));
      return std::nullopt;
    }
    for (std::size_t i = 2; i < g.lids.size(); ++i)
      if (const auto wrong = probe_saw(f, g.probe, g.lids[i], "MASTER", t0); wrong && *wrong <= *t1) {
        std::fprintf(stderr, "  %s, %s: %s answered MASTER first\n", what.c_str(), drill_name(drill),
                     g.heads[i].name.c_str());
        return std::nullopt;
      }
    return static_cast<double>(*t1 - t0) / 1e6;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "  %s, %s: run failed: %s\n", what.c_str(), drill_name(drill), e.what());
    return std::nullopt;
  }
}

void note_sa_outage(IbsimFabric& f, int probe, int sa_lid, std::int64_t t0, const std::string& column, Drill drill) {
  auto& c = g_sa_outage[{column, std::string(drill_name(drill)) + " (" + g_row_fabric + ")"}];
  if (const auto t = wait_probe(f, probe, sa_lid, "SA_OK", t0, 60s))
    c.ms.push_back(static_cast<double>(*t - t0) / 1e6);
  else
    ++c.failed;
}

std::string fmt_cell(const Cell& c) {
  if (c.ms.empty()) return c.failed ? "failed (" + std::to_string(c.failed) + ")" : "not run";
  auto v = c.ms;
  std::sort(v.begin(), v.end());
  const double median =
      v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
  char buf[128];
  std::snprintf(buf, sizeof buf, "%.0f / %.0f (n=%zu%s)", median, v.back(), v.size(),
                c.failed ? (", " + std::to_string(c.failed) + " failed").c_str() : "");
  return buf;
}

// MAD-loss soak: `rate` % errors on the given head ports for `minutes`;
// counts the standby's "Entering MASTER state" and the time the probe saw
// both heads answer MASTER.
struct SoakResult {
  int takeovers = 0;
  double dual_master_ms = 0;
  // Only while both heads' latest MASTER answers are at most kFreshMs old (a
  // head that stops answering, e.g. a fenced OpenSM, does not count).
  double fresh_dual_master_ms = 0;
  bool ended_dual = false;
  // --loss-attr 32: what the SMInfo loss shim dropped (the soak fails if nothing).
  bool shim = false;
  unsigned long long loss_seen = 0;
  unsigned long long loss_dropped = 0;
  std::string error;
};

int count_of(const std::string& text, const std::string& needle) {
  int n = 0;
  for (std::size_t at = 0; (at = text.find(needle, at)) != std::string::npos; ++at) ++n;
  return n;
}

// Time in [t0, t_end] during which the probe's last known answers from both
// LIDs were MASTER (a lost query keeps the previous answer).
constexpr std::int64_t kFreshMs = 250;

void add_dual_master(SoakResult& r, const std::string& probe_out, int lid1, int lid2, std::int64_t t0,
                     std::int64_t t_end) {
  std::map<int, std::string> state;
  std::map<int, std::int64_t> master_at;  // latest MASTER answer per LID
  std::int64_t dual_since = -1;
  std::int64_t prev_ns = -1;
  bool prev_fresh = false;
  for (const auto& p : parse_probe(probe_out)) {
    if (p.ns > t_end) break;
    // Fresh dual time accrues between consecutive probe lines.
    if (prev_fresh && prev_ns >= t0) r.fresh_dual_master_ms += static_cast<double>(p.ns - prev_ns) / 1e6;
    prev_ns = p.ns;
    if (p.state.rfind("error:", 0) == 0) {
      prev_fresh = prev_fresh && master_at.count(lid1) && master_at.count(lid2) &&
                   p.ns - master_at[lid1] <= kFreshMs * 1000000 && p.ns - master_at[lid2] <= kFreshMs * 1000000;
      continue;
    }
    state[p.lid] = p.state;
    if (p.state == "MASTER") master_at[p.lid] = p.ns;
    else master_at.erase(p.lid);
    prev_fresh = master_at.count(lid1) && master_at.count(lid2) &&
                 p.ns - master_at[lid1] <= kFreshMs * 1000000 && p.ns - master_at[lid2] <= kFreshMs * 1000000;
    const bool dual = state[lid1] == "MASTER" && state[lid2] == "MASTER";
    if (dual && dual_since < 0) dual_since = std::max(p.ns, t0);
    if (!dual && dual_since >= 0) {
      r.dual_master_ms += static_cast<double>(p.ns - dual_since) / 1e6;
      dual_since = -1;
    }
  }
  if (dual_since >= 0) {
    r.dual_master_ms += static_cast<double>(t_end - dual_since) / 1e6;
    r.ended_dual = true;
  }
}

// --loss-at: where the soak's MAD loss is set. "hca": on the head's own HCA
// port (ibsim then also drops the hop-0 SMPs that port answers itself, which
// on hardware never cross the cable); "switch": on the switch port the head is
// cabled to (two-switch-4hca.net: Switch1[1] for Hca1, Switch2[1] for Hca2),
// so only MADs that cross the head's link are lost.
std::string g_loss_at = "hca";

// --loss-attr: drop only MADs of this attribute; 0: every attribute (ibsim
// `Error "node"[port] rate [attr]`). 32 (SMInfo, the HA protocol's traffic) is
// injected by the SMInfo loss shim in the heads' processes instead, because
// ibsim forwards SMInfo before it applies the error rate (its `Error ... 32`
// drops nothing); --loss-at does not apply to it.
int g_loss_attr = 0;
constexpr int kSmInfoAttr = 32;

// Closes a shim soak: loss off, the counts into `r`; a soak whose injector
// dropped nothing measured nothing, so it is an error.
void finish_shim_loss(smha::testing::SmInfoLoss& loss, SoakResult& r) {
  loss.set_percent(0);
  const auto c = loss.counts();
  r.shim = true;
  r.loss_seen = c.seen;
  r.loss_dropped = c.dropped;
  if (c.dropped == 0)
    throw std::runtime_error("the SMInfo loss shim dropped nothing (" + std::to_string(c.seen) + " seen)");
}

std::string loss_text(const SoakResult& r) {
  if (!r.shim) return "ibsim Error (not counted)";
  return std::to_string(r.loss_dropped) + " of " + std::to_string(r.loss_seen) + " SMInfo";
}

std::string loss_cmd(const std::string& port, int rate) {
  std::string c = "Error " + port + " " + std::to_string(rate);
  if (rate > 0 && g_loss_attr > 0) c += " " + std::to_string(g_loss_attr);
  return c;
}

std::string loss_port(const std::string& hca) {
  if (g_loss_at == "switch") {
    if (hca == "Hca1") return "\"Switch1\"[1]";
    if (hca == "Hca2") return "\"Switch2\"[1]";
  }
  return "\"" + hca + "\"[1]";
}

SoakResult run_soak(const std::string& topology, const OsmHa& ha, int rate,
                    const std::vector<std::string>& ports, double minutes, int interval_ms) {
  SoakResult r;
  try {
    IbsimFabric f(topology);
    f.set_timeout_shim_default(true);
    const bool shim = g_loss_attr == kSmInfoAttr;
    std::optional<smha::testing::SmInfoLoss> loss;
    std::vector<std::pair<std::string, std::string>> env1, env2;
    if (shim) {
      loss.emplace(f.scratch_dir() + "/loss");
      for (const auto& p : ports) (p == "Hca1" ? env1 : env2) = loss->env();
    }
    const Heads h = start_heads(f, ha, 30s, env1, env2);
    const int probe = spawn_probe(f, {h.lid1, h.lid2}, interval_ms);
    if (!wait_probe(f, probe, h.lid2, "STANDBY", 0, 10s))
      throw std::runtime_error("probe never saw the standby");
    const std::size_t log0 = f.log_size(h.standby);
    if (shim) loss->set_percent(rate);
    else for (const auto& p : ports) f.console(loss_cmd(loss_port(p), rate));
    const auto t0 = now_ns();
    std::this_thread::sleep_for(std::chrono::duration<double, std::ratio<60>>(minutes));
    const auto t_end = now_ns();
    if (shim) finish_shim_loss(*loss, r);
    else for (const auto& p : ports) f.console(loss_cmd(loss_port(p), 0));
    const std::string log = f.log_text(h.standby).substr(log0);
    r.takeovers = count_of(log, "Entering MASTER state");
    add_dual_master(r, f.process_stdout(probe), h.lid1, h.lid2, t0, t_end);
  } catch (const std::exception& e) {
    r.error = e.what();
  }
  return r;
}

// The soak with two smhad: `rate` % errors on both heads' ports for
// `minutes`. False takeovers = head02's OpenSM logging "Entering MASTER state"
// (and smhad's takeover_done events, from its log) while head01 was healthy.
SoakResult run_smhad_soak(const std::string& topology, int rate, double minutes, int interval_ms,
                          int* discover_kicks, int* fences) {
  SoakResult r;
  try {
    IbsimFabric f(topology);
    OsmReaper reaper;
    const bool shim = g_loss_attr == kSmInfoAttr;
    std::optional<smha::testing::SmInfoLoss> loss;
    if (shim) loss.emplace(f.scratch_dir() + "/loss");
    const SmhadGroup g = start_smhad_group(f, reaper, 2, interval_ms, 30s,
                                           shim ? loss->env() : std::vector<std::pair<std::string, std::string>>{});
    const std::string log2 = g.heads[1].dir + "/opensm.log";
    const std::size_t log0 = smha::testing::read_file(log2).size();
    const std::size_t err0 = f.process_stderr(g.procs[1]).size();
    if (shim) loss->set_percent(rate);
    else for (const char* n : {"Hca1", "Hca2"}) f.console(loss_cmd(loss_port(n), rate));
    const auto t0 = now_ns();
    std::this_thread::sleep_for(std::chrono::duration<double, std::ratio<60>>(minutes));
    const auto t_end = now_ns();
    if (shim) finish_shim_loss(*loss, r);
    else for (const char* n : {"Hca1", "Hca2"}) f.console(loss_cmd(loss_port(n), 0));
    for (int proc : g.procs) reaper.add(opensm_children(f.process_pid(proc)));
    r.takeovers = count_of(smha::testing::read_file(log2).substr(log0), "Entering MASTER state");
    const std::string smhad_log = f.process_stderr(g.procs[1]).substr(err0) + f.process_stdout(g.procs[1]);
    r.takeovers = std::max(r.takeovers, count_of(smhad_log, "kind=takeover_done"));
    *discover_kicks = count_of(smhad_log, "kind=takeover_started");
    const std::string log1 = f.process_stderr(g.procs[0]) + f.process_stdout(g.procs[0]);
    *fences = count_of(log1, "kind=fence_local") + count_of(smhad_log, "kind=fence_local");
    add_dual_master(r, f.process_stdout(g.probe), g.lids[0], g.lids[1], t0, t_end);
    for (int proc : g.procs) f.stop_process(proc);
    keep_logs(f, g);
  } catch (const std::exception& e) {
    r.error = e.what();
  }
  return r;
}

std::string make_big_topology(const std::string& dir, int hcas) {
  const std::string path = dir + "/fattree-" + std::to_string(hcas) + ".net";
  const std::string cmd = std::string(SMHA_SOURCE_DIR) + "/scripts/gen-fattree " +
                          std::to_string(hcas) + " 48 > " + path;
  if (std::system(cmd.c_str()) != 0) throw std::runtime_error("gen-fattree failed: " + cmd);
  return path;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_failover: OpenSM HA failover drills on ibsim, seen from Hca3"};
  int runs = 5;
  int slow_runs = 1;
  int interval_ms = 5;
  double soak_minutes = 0;
  bool big = false;
  int big_hcas = 1000;
  int big_runs = 3;
  int smhad_runs = -1;
  int channel_runs = -1;
  int three_runs = -1;
  bool smhad_only = false;
  app.add_option("--runs", runs, "runs per drill and setting (fast settings; 0: skip)")
      ->check(CLI::Range(0, 100));
  app.add_option("--slow-runs", slow_runs,
                 "runs per drill at OpenSM's defaults (10000 ms x 4: ~1 min per run)")
      ->check(CLI::Range(0, 100));
  app.add_option("--interval-ms", interval_ms, "probe poll interval")->check(CLI::Range(1, 1000));
  app.add_option("--soak-minutes", soak_minutes, "MAD-loss soak length (0: skip)")
      ->check(CLI::Range(0.0, 600.0));
  app.add_flag("--big", big, "also kill -9 on a generated fat tree");
  app.add_option("--big-runs", big_runs, "runs per fast setting on the --big fat tree")
      ->check(CLI::Range(0, 100));
  app.add_option("--big-hcas", big_hcas, "HCAs in the --big fat tree")->check(CLI::Range(4, 1152));
  app.add_option("--smhad-runs", smhad_runs, "runs per drill with two smhad (default: --runs)")
      ->check(CLI::Range(0, 100));
  app.add_option("--three-runs", three_runs, "runs per drill with three smhad (default: --smhad-runs)")
      ->check(CLI::Range(0, 100));
  app.add_flag("--smhad-only", smhad_only,
               "skip OpenSM's own HA in the --big and --soak-minutes runs (the smhad column only)");
  app.add_option("--loss-at", g_loss_at,
                 "soak loss on the heads' HCA ports (hca) or on the switch ports they are cabled "
                 "to (switch: hop-0 SMPs are not lost)")
      ->check(CLI::IsMember({"hca", "switch"}));
  app.add_option("--loss-attr", g_loss_attr,
                 "soak loss only on MADs of this attribute id; 0: all (ibsim Error). 32 (SMInfo): "
                 "the SMInfo loss shim in the heads' processes, drop count reported")
      ->check(CLI::Range(0, 0xffff));
  app.add_option("--keep-logs", g_keep_logs,
                 "copy each smhad run's logs (smhad, OpenSM, probe) to DIR/run-N");
  app.add_option("--osm-conf", g_osm_conf,
                 "an opensm.conf line \"key value\" for every OpenSM of the run (repeatable)")
      ->check([](const std::string& v) {
        return v.find(' ') == std::string::npos ? "expected \"key value\"" : "";
      });
  app.add_flag("--workload", g_workload,
               "also make a workload before each kill -9 / hung / link drill (two heads) and count what "
               "the new master kept of it: LIDs, LFT/MFT entries, MLIDs, members, ServiceRecords, subscriptions");
  app.add_flag("--sa-copy-by-hand", g_sa_copy_by_hand,
               "a reference column: OpenSM 50x0 with the master's opensm-sa.dump copied by the bench into "
               "the standby's sa_db_file before the fault");
  app.add_option("--channel-runs", channel_runs,
                 "runs per drill (and per --big run) with two smhad and the peer channel (default: --smhad-runs "
                 "with --workload, else 0)")
      ->check(CLI::Range(0, 100));
  int flood_runs = 0;
  app.add_option("--flood-runs", flood_runs,
                 "runs of kill -9 and SIGSTOP with two smhad and the peer channel, each without and with a "
                 "flood of ffdhe8192 ClientHellos and idle connections at both heads' listeners (own table)")
      ->check(CLI::Range(0, 100));
  app.add_option("--workload-groups", g_workload_groups, "multicast groups each workload node joins")
      ->check(CLI::Range(1, 64));
  app.add_option("--workload-nodes", g_workload_nodes, "workload nodes on the --big fat tree (Hca3..)")
      ->check(CLI::Range(1, 200));
  CLI11_PARSE(app, argc, argv);
  if (smhad_runs < 0) smhad_runs = runs;
  if (three_runs < 0) three_runs = smhad_runs;
  if (channel_runs < 0) channel_runs = g_workload ? smhad_runs : 0;

  const std::string topo = smha::testing::topology_path("two-switch-4hca.net");
  std::vector<OsmHa> settings{
      {"OpenSM 10000x4 (default)", 10000, 4, slow_runs},
      {"OpenSM 1000x2", 1000, 2, runs},
      {"OpenSM 50x0", 50, 0, runs},
  };
  if (g_sa_copy_by_hand) settings.push_back({"OpenSM 50x0, SA dump copied by hand", 50, 0, runs, true});
  const std::vector<Drill> drills{Drill::Kill, Drill::Stop, Drill::Unlink};

  std::map<std::pair<int, int>, Cell> cells;
  for (std::size_t s = 0; s < settings.size(); ++s)
    for (std::size_t d = 0; d < drills.size(); ++d)
      for (int i = 0; i < settings[s].runs; ++i) {
        auto ms = run_drill(topo, settings[s], drills[d], interval_ms, 30s);
        auto& c = cells[{static_cast<int>(s), static_cast<int>(d)}];
        if (ms) c.ms.push_back(*ms);
        else ++c.failed;
        std::fprintf(stderr, "%s | %s | run %d: %s\n", settings[s].name.c_str(),
                     drill_name(drills[d]), i + 1,
                     ms ? std::to_string(*ms).c_str() : "failed");
      }

  // Two and three heads alternate, run by run, so that both columns see the
  // same machine.
  std::map<int, Cell> smhad_cells;
  std::map<int, Cell> three_cells;
  for (std::size_t d = 0; d < drills.size(); ++d)
    for (int i = 0; i < std::max(smhad_runs, three_runs); ++i)
      for (int nheads : {2, 3}) {
        if (i >= (nheads == 2 ? smhad_runs : three_runs)) continue;
        auto ms = run_smhad_drill(topo, drills[d], interval_ms, 30s, nheads);
        auto& c = (nheads == 2 ? smhad_cells : three_cells)[static_cast<int>(d)];
        if (ms) c.ms.push_back(*ms);
        else ++c.failed;
        std::fprintf(stderr, "smhad, %d heads | %s | run %d: %s\n", nheads, drill_name(drills[d]), i + 1,
                     ms ? std::to_string(*ms).c_str() : "failed");
      }

  // Two smhad with the peer channel (the workload table's "smhad,
  // continuity" rows; its new-MASTER times are not in the first table).
  for (std::size_t d = 0; d < drills.size(); ++d)
    for (int i = 0; i < channel_runs; ++i) {
      g_channel = true;
      auto ms = run_smhad_drill(topo, drills[d], interval_ms, 30s, 2);
      g_channel = false;
      std::fprintf(stderr, "smhad, continuity | %s | run %d: %s\n", drill_name(drills[d]), i + 1,
                   ms ? std::to_string(*ms).c_str() : "failed");
    }

  // The peer channel under a flood, alternating run by run with the same
  // runs without it (same machine, same moment).
  std::map<std::pair<int, bool>, Cell> flood_cells;
  const std::vector<Drill> flood_drills{Drill::Kill, Drill::Stop};
  for (std::size_t d = 0; d < flood_drills.size(); ++d)
    for (int i = 0; i < flood_runs; ++i)
      for (bool flooded : {false, true}) {
        g_channel = g_flood_compare = true;
        g_flood = flooded;
        auto ms = run_smhad_drill(topo, flood_drills[d], interval_ms, 30s, 2);
        g_channel = g_flood_compare = g_flood = false;
        auto& c = flood_cells[{static_cast<int>(d), flooded}];
        if (ms) c.ms.push_back(*ms);
        else ++c.failed;
        std::fprintf(stderr, "smhad, continuity%s | %s | run %d: %s\n", flooded ? ", flood" : "",
                     drill_name(flood_drills[d]), i + 1, ms ? std::to_string(*ms).c_str() : "failed");
      }

  std::string big_dir;
  std::map<int, Cell> big_cells;
  Cell big_smhad;
  if (big) {
    char tmpl[] = "/tmp/smha-bench-fattree-XXXXXX";
    if (!mkdtemp(tmpl)) {
      std::perror("mkdtemp");
      return 1;
    }
    big_dir = tmpl;
    const std::string big_topo = make_big_topology(big_dir, big_hcas);
    g_row_fabric = std::to_string(big_hcas) + " HCAs";
    for (int i = 0; i < big_runs; ++i) {
      auto ms = run_smhad_drill(big_topo, Drill::Kill, interval_ms, 120s);
      if (ms) big_smhad.ms.push_back(*ms);
      else ++big_smhad.failed;
      std::fprintf(stderr, "smhad | kill -9 @%d HCAs | run %d: %s\n", big_hcas, i + 1,
                   ms ? std::to_string(*ms).c_str() : "failed");
      if (i < channel_runs) {
        g_channel = true;
        auto cms = run_smhad_drill(big_topo, Drill::Kill, interval_ms, 120s);
        g_channel = false;
        std::fprintf(stderr, "smhad, continuity | kill -9 @%d HCAs | run %d: %s\n", big_hcas, i + 1,
                     cms ? std::to_string(*cms).c_str() : "failed");
      }
    }
    for (std::size_t s = 0; s < (smhad_only ? 0 : settings.size()); ++s)
      for (int i = 0; i < (s == 0 ? slow_runs : big_runs); ++i) {
        auto ms = run_drill(big_topo, settings[s], Drill::Kill, interval_ms, 120s);
        auto& c = big_cells[static_cast<int>(s)];
        if (ms) c.ms.push_back(*ms);
        else ++c.failed;
        std::fprintf(stderr, "%s | kill -9 @%d HCAs | run %d: %s\n", settings[s].name.c_str(),
                     big_hcas, i + 1, ms ? std::to_string(*ms).c_str() : "failed");
      }
    std::filesystem::remove_all(big_dir);
  }

  std::printf("\nms from fault to first SMInfo read at Hca3 showing the new MASTER: "
              "median / max (n runs); probe interval %d ms\n", interval_ms);
  std::string extra;
  for (const auto& l : g_osm_conf) extra += (extra.empty() ? "" : ", ") + l;
  std::printf("opensm.conf beyond the defaults, in every column: %s\n\n",
              extra.empty() ? "none" : extra.c_str());
  std::printf("| drill | smhad | smhad, 3 heads |");
  for (const auto& s : settings) std::printf(" %s |", s.name.c_str());
  std::printf("\n|---|---|---|");
  for (std::size_t s = 0; s < settings.size(); ++s) std::printf("---|");
  std::printf("\n");
  for (std::size_t d = 0; d < drills.size(); ++d) {
    std::printf("| %s (4 HCAs) | %s | %s |", drill_name(drills[d]),
                fmt_cell(smhad_cells[static_cast<int>(d)]).c_str(),
                fmt_cell(three_cells[static_cast<int>(d)]).c_str());
    for (std::size_t s = 0; s < settings.size(); ++s)
      std::printf(" %s |", fmt_cell(cells[{static_cast<int>(s), static_cast<int>(d)}]).c_str());
    std::printf("\n");
  }
  std::printf("| kill -9 master (%d HCAs) | %s | not run |", big_hcas,
              big ? fmt_cell(big_smhad).c_str() : "not run (--big)");
  for (std::size_t s = 0; s < settings.size(); ++s)
    std::printf(" %s |", big ? fmt_cell(big_cells[static_cast<int>(s)]).c_str() : "not run (--big)");
  std::printf("\n");

  std::printf("\nSA outage, ms from fault until the new master's SA answers SubnAdmGetTable(SMInfoRecord) at "
              "Hca3: median / max (n runs)\n\n");
  std::printf("| drill | smhad | smhad, 3 heads |");
  for (const auto& s : settings) std::printf(" %s |", s.name.c_str());
  std::printf("\n|---|---|---|");
  for (std::size_t s = 0; s < settings.size(); ++s) std::printf("---|");
  std::printf("\n");
  std::vector<std::string> rows;
  for (const auto& d : drills) rows.push_back(std::string(drill_name(d)) + " (4 HCAs)");
  if (big) rows.push_back(std::string(drill_name(Drill::Kill)) + " (" + std::to_string(big_hcas) + " HCAs)");
  for (const auto& row : rows) {
    std::printf("| %s | %s | %s |", row.c_str(), fmt_cell(g_sa_outage[{"smhad", row}]).c_str(),
                fmt_cell(g_sa_outage[{"smhad, 3 heads", row}]).c_str());
    for (const auto& s : settings) std::printf(" %s |", fmt_cell(g_sa_outage[{s.name, row}]).c_str());
    std::printf("\n");
  }

  if (g_workload) {
    std::printf("\nWorkload at the takeover: changed or lost / of, the worst of the runs (n); %d groups joined per "
                "workload node (Hca3, Hca4 on 4 HCAs; Hca3..Hca%d on the fat tree), one ServiceRecord and "
                "traps 64/65 subscribed each\n\n", g_workload_groups, 2 + g_workload_nodes);
    std::printf("| setting | drill |");
    for (const auto& r : kWorkloadRows) std::printf(" %s |", r.c_str());
    std::printf(" SA outage ms |\n|---|---|");
    for (std::size_t i = 0; i <= kWorkloadRows.size(); ++i) std::printf("---:|");
    std::printf("\n");
    for (const auto& [key, runs] : g_workload_runs) {
      std::printf("| %s | %s |", key.first.c_str(), key.second.c_str());
      for (std::size_t i = 0; i < kWorkloadRows.size(); ++i) {
        Changed worst;
        for (const auto& run : runs)
          if (run[i].n > worst.n || (run[i].n == worst.n && run[i].of > worst.of)) worst = run[i];
        std::printf(" %ld / %ld |", worst.n, worst.of);
      }
      std::printf(" %s |\n", fmt_cell(g_sa_outage[key]).c_str());
    }
  }

  if (soak_minutes > 0) {
    if (g_loss_attr == kSmInfoAttr)
      std::printf("\nMAD loss soak, %.1f min each: the SMInfo MADs the heads' processes send off-node, "
                  "dropped by the loss shim (tests/ibsim/shim/umad_loss_shim.c):\n\n", soak_minutes);
    else
      std::printf("\nMAD loss soak, %.1f min each, loss set on the %s ports (ibsim Error), %s:\n\n", soak_minutes,
                  g_loss_at == "switch" ? "switch ports the heads are cabled to" : "heads' HCA",
                  g_loss_attr ? ("attribute " + std::to_string(g_loss_attr) + " only").c_str()
                              : "every attribute");
    std::printf("| setting | loss | MADs dropped | false takeovers | dual-master ms | both answering MASTER ms | ended with two masters |\n");
    std::printf("|---|---|---|---:|---:|---:|---|\n");
    struct Case { OsmHa ha; int rate; std::vector<std::string> ports; const char* what; };
    const std::vector<Case> cases{
        {settings[2], 20, {"Hca1", "Hca2"}, "20 % on both heads' ports"},
        {settings[1], 30, {"Hca1"}, "30 % on the master's port"},
    };
    for (const auto& c : cases) {
      if (smhad_only) continue;
      const auto r = run_soak(topo, c.ha, c.rate, c.ports, soak_minutes, interval_ms);
      if (!r.error.empty())
        std::printf("| %s | %s | | failed: %s | | | |\n", c.ha.name.c_str(), c.what, r.error.c_str());
      else
        std::printf("| %s | %s | %s | %d | %.0f | %.0f | %s |\n", c.ha.name.c_str(), c.what,
                    loss_text(r).c_str(), r.takeovers, r.dual_master_ms, r.fresh_dual_master_ms,
                    r.ended_dual ? "yes" : "no");
    }
    int kicks = 0;
    int fences = 0;
    const auto r = run_smhad_soak(topo, 20, soak_minutes, interval_ms, &kicks, &fences);
    if (!r.error.empty())
      std::printf("| smhad | 20 %% on both heads' ports | | failed: %s | | | |\n", r.error.c_str());
    else
      std::printf("| smhad | 20 %% on both heads' ports | %s | %d (DISCOVER sent: %d, own OpenSM fenced: %d) | %.0f | %.0f | %s |\n",
                  loss_text(r).c_str(), r.takeovers, kicks, fences, r.dual_master_ms,
                  r.fresh_dual_master_ms, r.ended_dual ? "yes" : "no");
  } else {
    std::printf("\nMAD loss soak: not run (--soak-minutes M)\n");
  }
  if (flood_runs > 0) {
    std::printf("\nThe peer channel under a flood (4 HCAs, two smhad with the channel): ms from fault to the new "
                "MASTER, median / max (n runs); the flood: 4 threads per head sending ffdhe8192 ClientHellos "
                "and 10 idle connections per head, re-opened when closed\n\n");
    std::printf("| drill | smhad, continuity | smhad, continuity, under flood |\n|---|---|---|\n");
    for (std::size_t d = 0; d < flood_drills.size(); ++d)
      std::printf("| %s | %s | %s |\n", drill_name(flood_drills[d]),
                  fmt_cell(flood_cells[{static_cast<int>(d), false}]).c_str(),
                  fmt_cell(flood_cells[{static_cast<int>(d), true}]).c_str());
  }
  return 0;
}
