// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// The in-process simulated fabric: nodes on one switch (or a chain of
// switches, FabricParams::switches), each with one port (GUID,
// LID, link state, MAD loss), an in-memory file system, a process runner
// that can run a simulated "opensm", and a MadTransport bound to the node.
//
// The simulated OpenSM behaves like OpenSM 3.3.x for SMInfo (internals §2-3):
//   - start: DISCOVERING; a master that answers is found `discover_check` into the
//     sweep (-> STANDBY, polling it), otherwise MASTER after `discover_full`; a
//     frozen SM on the fabric makes the sweep wait for its transaction timeouts;
//   - STANDBY polls its master every sminfo_polling_timeout and gives up after
//     polling_retry_number failures (-> DISCOVERING); it sends trap 144 to a
//     master of lower priority;
//   - MASTER light-sweeps every sweep_interval; a higher remote SM (or trap 144, a
//     SIGHUP, a SIGCONT, a HANDOVER) makes it heavy-sweep and, if a higher SM
//     exists, hand over (HANDOVER to it, itself STANDBY); it notices its own port
//     going down only when it sweeps (the next light sweep, or the heavy sweep
//     a SIGHUP starts), then stays DISCOVERING until the port comes back;
//   - SubnSet(SMInfo): payload state must be MASTER (else status 0x0700); per state
//     DISCOVERING accepts HANDOVER, STANDBY accepts DISCOVER (sweep), HANDOVER
//     (MASTER at once), DISABLE (NOTACTIVE), ACKNOWLEDGE; NOTACTIVE accepts STANDBY;
//     MASTER accepts only HANDOVER (forced sweep, stays MASTER); all else 0x0700;
//   - reads sm_priority, sm_key and the polling keys from its -F file at start and
//     on SIGHUP/SIGCONT, except that a SIGHUP landing while a MASTER's heavy sweep
//     runs is absorbed by that sweep and the file is not read (OpenSM 3.3.23); SIGSTOP freezes it (no answers, timers held), SIGCONT
//     resumes it, SIGTERM/SIGKILL end it (SIGTERM waits for SIGCONT if stopped).
// A MAD to a port with no SM bound (none running) is refused at once with an
// error status, as the kernel answers unmatched SMPs; a frozen SM, a down link or
// a lost MAD give silence. Everything runs on one EventQueue; randomness comes from one seeded mt19937_64.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "smha/core/sminfo.hpp"
#include "smha/core/types.hpp"
#include "smha/mad/transport.hpp"
#include "smha/os/file_system.hpp"
#include "smha/os/process_runner.hpp"
#include "smha/sim/event_queue.hpp"

namespace smha::sim {

// Calibrated on DESIGN.md's ibsim measurements: DISCOVER after a kill gives a
// MASTER ~90 ms later; DISCOVER with a live master returns to STANDBY in ~45 ms.
struct SmTiming {
  Duration startup = milliseconds(10);         // spawn -> answers SMInfo
  Duration discover_check = milliseconds(45);  // a live master is found by then
  Duration discover_full = milliseconds(90);   // no master: MASTER after this
  Duration handover_sweep = milliseconds(25);  // heavy sweep before HANDOVER
  Duration link_retry = milliseconds(100);     // discovery with own port down: retry
  int transaction_attempts = 4;                // OpenSM's own queries (1 + 3 retries)
  // OpenSM's transaction_timeout: a discovery sweep that queries a frozen
  // (SIGSTOPped) SM waits transaction_timeout x transaction_attempts for it.
  Duration transaction_timeout = milliseconds(200);
};

struct FabricParams {
  Duration hop_delay = microseconds(20);  // per cable traversed
  SmTiming sm;
  // 1: every node on one switch. More: switches in a row (switch s's port 2
  // cabled to switch s+1's port 1), each node on the switch add_node names,
  // so that heads can be several switches apart (doc/discovery.md).
  int switches = 1;
};

using NodeId = int;

// The opensm.conf keys the simulated OpenSM reads (besides the header comment
// and ignore_other_sm), and a file that sets them: what the simulated heads'
// smhad render. OpenSM's own polling stays at its defaults.
struct OpensmKeys {
  std::uint32_t sminfo_polling_timeout_ms = 10000;
  std::uint32_t polling_retry_number = 4;
  std::uint32_t sweep_interval_s = 10;
  std::uint64_t sm_key = 1;
};
std::string render_opensm_keys(const OpensmKeys& keys, std::uint8_t priority);

class Fabric {
 public:
  explicit Fabric(std::uint64_t seed, FabricParams params = {});
  ~Fabric();
  Fabric(const Fabric&) = delete;
  Fabric& operator=(const Fabric&) = delete;

  EventQueue& queue();
  const EventQueue& queue() const;
  std::mt19937_64& rng();
  const FabricParams& params() const;

  // Attaches a node to switch `sw` (0-based, clamped to the chain): node i is
  // on port i + 1 of the one switch, or port i + 3 of its switch in a chain.
  NodeId add_node(std::string name, Guid port_guid, Lid lid, int sw = 0);
  int switch_of(NodeId n) const;
  const std::string& name(NodeId n) const;
  Guid guid(NodeId n) const;
  Lid lid(NodeId n) const;
  // Moves the node's port to another LID (an SM's reassign_lids, a cold
  // restart with another guid2lid): SMInfo and PortInfo by LID follow.
  void set_lid(NodeId n, Lid lid);
  // Directed route from any node (on one switch; in a chain: from node 0) to
  // `target`: out of the node's port, through the switch(es), out of the
  // switch port of `target`.
  DrPath dr_path(NodeId target) const;
  // The directed route from `from` to `target` (through every switch between).
  DrPath dr_path(NodeId from, NodeId target) const;

  void set_link(NodeId n, bool up);
  bool link_up(NodeId n) const;
  // Probability that a MAD is lost at each traversal of this node's port.
  void set_loss(NodeId n, double p);
  // Since the fabric was made: port traversals that met a loss probability
  // above 0, and how many of them lost the MAD (loss tests assert these).
  struct LossCount {
    std::uint64_t trials = 0;
    std::uint64_t lost = 0;
  };
  LossCount loss_count() const;

  // Seams bound to a node. References live as long as the fabric.
  mad::MadTransport& transport(NodeId n);
  os::ProcessRunner& runner(NodeId n);
  os::FileSystem& fs(NodeId n);

  // Ground truth about the node's simulated OpenSM, if one runs there.
  struct SmView {
    int pid = 0;
    Guid guid;
    SmState state = SmState::NotActive;
    std::uint8_t priority = 0;
    bool stopped = false;
    std::uint32_t act_count = 0;
  };
  std::optional<SmView> sm(NodeId n) const;
  // The node's OpenSM process as procfs shows it (what smhad's supervisor
  // reads to adopt it after a restart): pid, start time, executable, argv.
  struct ProcessView {
    int pid = 0;
    std::uint64_t start_time = 0;  // the virtual clock at spawn, in ns
    std::string exe;
    std::vector<std::string> argv;
  };
  std::optional<ProcessView> process(NodeId n) const;
  // Nodes whose OpenSM runs, is not stopped and is MASTER.
  std::vector<NodeId> active_masters() const;
  // Sends a signal to the node's OpenSM. False if none runs there.
  bool signal_opensm(NodeId n, int sig);

  // A SubnSet(SMInfo, HANDOVER) from outside smha (a tool, a foreign SM) to the
  // node's STANDBY SM: it becomes MASTER at once, sweeps and, if a higher SM
  // exists, hands mastership to it and is STANDBY again (~25 ms: a mastership
  // shorter than a poll round). False if that SM is not a running STANDBY.
  bool stray_handover(NodeId n);

  // The lines the node's OpenSM would write to its log that the takeover
  // report reads, without a time stamp: "Entering <STATE> state", "minhop
  // tables configured on all switches" and "SUBNET UP" at the end of a
  // master's heavy sweep. Called on the event queue.
  using LogFn = std::function<void(NodeId, std::string_view)>;
  void set_opensm_log(LogFn fn);

  // SubnSet(SMInfo) MADs that reached an SM in MASTER state from smha (not from
  // another SM). smha must never send one.
  std::uint64_t sets_to_master() const;
  // Handovers OpenSM performed on its own (master -> higher SM).
  std::uint64_t handovers() const;
  // SIGHUPs a MASTER absorbed without reading its file (a heavy sweep was running).
  std::uint64_t hups_absorbed() const;
  // The next `count` SIGHUPs to this node's OpenSM, while it is MASTER, are
  // absorbed as if a heavy sweep were running (a trap-driven sweep the sim does
  // not time exactly).
  void absorb_next_hups(NodeId n, int count);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace smha::sim
