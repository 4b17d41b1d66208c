// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// Fabric::Impl, shared by the fabric's two halves: fabric.cpp (nodes, links,
// switches, the MAD transport, the SMAs' answers) and opensm_model.cpp (the
// simulated OpenSM: its state machine, sweeps and polls, its answers to
// SubnSet(SMInfo), and its process: spawn, signals, exit). Internal to lib/sim.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <variant>
#include <vector>

#include "smha/mad/sa.hpp"
#include "smha/mad/service_record.hpp"
#include "smha/sim/fabric.hpp"

namespace smha::sim::detail {

// OpenSM's Set-rejection status as it goes on the wire (internals §2.1 quirk).
constexpr std::uint16_t kStatusRejected = 0x0700;
// Unsupported method/attribute: what the kernel answers for an SMP to a port on
// which no SM agent is registered.
constexpr std::uint16_t kStatusUnsupported = 0x000c;
// Invalid attribute modifier: an SMA's answer for a port the node lacks.
constexpr std::uint16_t kStatusBadModifier = 0x001c;

// The opensm.conf keys the simulated OpenSM reads.
struct Conf {
  std::uint8_t priority = 0;
  std::uint64_t sm_key = 1;
  Duration poll_timeout = milliseconds(10000);
  int retry_number = 4;
  Duration sweep_interval = seconds(10);
};

// Reads the keys the simulated OpenSM knows from an opensm.conf text; unknown
// keys are ignored, as OpenSM does ("Unrecognized token").
Conf parse_conf(const std::string& text);

}  // namespace smha::sim::detail

namespace smha::sim {

using detail::Conf;

struct Fabric::Impl {
  struct Sm {
    int pid = 0;
    NodeId node = 0;
    Guid guid;
    std::string exe;                 // spec.path
    std::vector<std::string> argv;   // as spawned
    TimePoint started{};
    std::string conf_path;
    Conf conf;
    SmState state = SmState::Discovering;
    bool stopped = false;
    bool term_pending = false;
    bool alive = true;
    TimePoint answers_from{};
    std::uint32_t act_count = 0;
    Guid master_guid;
    // The remote SMs this SM's sweeps found, with their last SMInfo (OpenSM's
    // sm_guid_tbl): what its SA lists besides itself.
    std::map<Guid, SmInfo> remote;
    // The ServiceRecords registered with this SM's SA (OpenSM's sa_sr_list),
    // by record ID (ServiceID, ServiceGID, ServiceP_Key); a new master starts
    // with none, as OpenSM does without an SA database file.
    struct StoredService {
      mad::ServiceRecord record;
      std::optional<TimePoint> expires;  // nullopt: infinite lease
    };
    std::map<std::tuple<std::uint64_t, mad::Gid, std::uint16_t>, StoredService> services;
    int retries = 0;
    std::uint64_t gen = 0;  // bumps on every state entry: stale timers do nothing
    // A heavy sweep runs until then: a SIGHUP that lands in it is absorbed (see reload()).
    TimePoint sweep_until{};
    std::vector<std::function<void()>> deferred;  // timers that fired while stopped
    os::ProcessRunner::ExitHandler on_exit;
  };
  using SmPtr = std::shared_ptr<Sm>;

  struct Node;
  struct NodeAnswer {
    std::variant<mad::NodeInfo, std::string> value;
    Duration rtt{};
    int attempts = 1;
  };
  using NodeDone = std::function<void(Result<NodeAnswer>)>;
  // The node's port: each query to the model below (fabric.cpp).
  struct Transport final : mad::MadTransport {
    Impl* f;
    NodeId self;
    void submit(mad::Request request, mad::ReplyCallback done) override;
  };
  struct Runner final : os::ProcessRunner {
    Impl* f;
    NodeId self;
    Result<int> spawn(const os::ProcessSpec& spec, OutputHandler, ExitHandler on_exit) override {
      return f->spawn(self, spec, std::move(on_exit));
    }
    Status kill(int pid, int sig) override { return f->kill(self, pid, sig); }
    Status adopt(int pid, ExitHandler on_exit) override {
      auto& n = f->nodes[self];
      if (!n->sm || n->sm->pid != pid) return make_error(Errc::NotFound, "no process " + std::to_string(pid));
      n->sm->on_exit = std::move(on_exit);
      return Status::Ok();
    }
  };
  struct Files final : os::FileSystem {
    std::map<std::string, std::string> files;
    Status write_atomic(const std::string& path, std::string_view content, unsigned) override {
      if (path.empty()) return make_error(Errc::Invalid, "empty path");
      files[path] = std::string(content);
      return Status::Ok();
    }
    Result<std::string> read(const std::string& path) const override {
      auto it = files.find(path);
      if (it == files.end()) return make_error(Errc::NotFound, path + ": no such file");
      return it->second;
    }
    Status append(const std::string& path, std::string_view data, unsigned, std::size_t* written) override {
      files[path].append(data);
      if (written) *written = data.size();
      return Status::Ok();
    }
  };
  struct Node {
    std::string name;
    Guid guid;
    Lid lid;
    int sw = 0;  // the switch of the chain its cable goes to
    bool link = true;
    double loss = 0;
    Transport transport;
    Runner runner;
    Files fs;
    SmPtr sm;
    Lid master_sm_lid;  // PortInfo MasterSMLID: set by the last master that swept this port
  };

  FabricParams params;
  EventQueue q;
  std::mt19937_64 rng;
  std::vector<std::unique_ptr<Node>> nodes;
  int next_pid = 1000;
  std::uint64_t sets_to_master = 0;
  std::uint64_t handovers = 0;
  std::uint64_t hups_absorbed = 0;
  Fabric::LogFn log_fn;  // set_opensm_log
  void log_line(const Sm& sm, std::string_view line) const {
    if (log_fn) log_fn(sm.node, line);
  }
  std::vector<int> absorb_hups;  // per node: SIGHUPs still to be absorbed as if a sweep ran

  Impl(std::uint64_t seed, FabricParams p) : params(p), rng(seed) {}
  // Held timers capture their SM: break those cycles.
  ~Impl() {
    for (auto& n : nodes)
      if (n->sm) n->sm->deferred.clear();
  }

  // Every use is a MAD crossing a port with loss probability p.
  bool chance(double p) {
    if (p <= 0) return false;
    ++losses.trials;
    const bool lost = std::uniform_real_distribution<double>(0, 1)(rng) < p;
    if (lost) ++losses.lost;
    return lost;
  }
  Fabric::LossCount losses;

  // ---- reachability ------------------------------------------------------

  // The switches: one (params.switches <= 1), node i on its port i + 1; or a
  // chain of them, switch s's port 1 cabled to switch s-1's port 2, and node i
  // on port i + 3 of its switch (ports of nodes on other switches uncabled).
  bool chain() const { return params.switches > 1; }
  int switches() const { return std::max(1, params.switches); }
  int switch_port(NodeId n) const { return chain() ? n + 3 : n + 1; }
  int switch_ports() const {
    return static_cast<int>(std::min<std::size_t>(nodes.size() + (chain() ? 2 : 0), 254));
  }

  // Where a target ends: a node, or switch `sw` entered by port `in_port`.
  struct End {
    bool is_switch = false;
    int id = 0;  // node id, or switch index
    std::uint8_t in_port = 0;
  };
  std::optional<End> walk(NodeId from, const mad::Target& t) const {
    if (const auto* lid = std::get_if<Lid>(&t)) {
      for (std::size_t i = 0; i < nodes.size(); ++i)
        if (nodes[i]->lid == *lid) return End{false, static_cast<int>(i), 1};
      return std::nullopt;
    }
    const auto& dr = std::get<DrPath>(t);
    if (dr.hops.empty()) return End{false, from, 1};
    // Out of our port (hop 1, our only port), then from switch to switch.
    if (dr.hops[0] != 1) return std::nullopt;
    End at{true, nodes[from]->sw, static_cast<std::uint8_t>(switch_port(from))};
    for (std::size_t h = 1; h < dr.hops.size(); ++h) {
      if (!at.is_switch) return std::nullopt;  // a CA does not forward
      const int p = dr.hops[h];
      if (chain() && p == 1 && at.id > 0) {
        at = End{true, at.id - 1, 2};
      } else if (chain() && p == 2 && at.id + 1 < switches()) {
        at = End{true, at.id + 1, 1};
      } else {
        const int n = chain() ? p - 3 : p - 1;
        if (n < 0 || n >= static_cast<int>(nodes.size()) || nodes[n]->sw != at.id) return std::nullopt;
        at = End{false, n, 1};
      }
    }
    return at;
  }
  std::optional<NodeId> resolve(NodeId from, const mad::Target& t) const {
    auto e = walk(from, t);
    if (!e || e->is_switch) return std::nullopt;
    return e->id;
  }
  // The switch a target ends at, if it ends at one.
  std::optional<End> switch_end(NodeId from, const mad::Target& t) const {
    auto e = walk(from, t);
    if (!e || !e->is_switch) return std::nullopt;
    return e;
  }
  // Cables from node a's port to node b's: 2 on one switch, one more per
  // switch-to-switch cable between them.
  int cables(NodeId a, NodeId b) const { return 2 + std::abs(nodes[a]->sw - nodes[b]->sw); }
  int cables_to_switch(NodeId a, int sw) const { return 1 + std::abs(nodes[a]->sw - sw); }

  // One traversal from `a` to `b` (both ports): false if lost or a link is down.
  bool path_ok(NodeId a, NodeId b) {
    if (a == b) return true;
    if (!nodes[a]->link || !nodes[b]->link) return false;
    if (chance(nodes[a]->loss)) return false;
    if (chance(nodes[b]->loss)) return false;
    return true;
  }
  Duration one_way(NodeId a, NodeId b) const {
    if (a == b) return params.hop_delay;
    return params.hop_delay * cables(a, b);
  }

  // ---- the simulated OpenSM (opensm_model.cpp) ----------------------------

  // An SM's own SMInfo query to another SM (its sweeps and polls), with OpenSM's
  // transaction retries and no delay modelled. nullopt: no answer.
  std::optional<SmInfo> sm_query(Sm& from, NodeId to);
  // A sweep drops the remote SMs whose port no longer has an SM process.
  void forget_gone_sms(Sm& sm);
  bool answering(const SmPtr& sm) const;
  static SmInfo info(const Sm& sm);
  static bool higher(const SmInfo& a, const Sm& b);
  // ---- SM timers ---------------------------------------------------------

  void sm_timer(const SmPtr& sm, Duration d, std::function<void()> fn);
  // ---- SM state machine --------------------------------------------------

  // A frozen SM reachable from `sm`: the sweep's query to it waits for its timeouts.
  bool frozen_sm_in_reach(const Sm& sm) const;
  void begin_discovery(const SmPtr& sm);
  void discovery_check(const SmPtr& sm, std::uint64_t g, bool first);
  // SMPs one sweep sends (OpenSM's ActCount counts them): `per_node` per node
  // plus a PortInfo for each of the switch's 36 ports. A STANDBY sends only
  // its SMInfo answers and polls, so a sweep stands out in its ActCount.
  std::uint32_t sweep_smps(std::uint32_t per_node) const;
  void enter_standby(const SmPtr& sm, Guid master);
  std::optional<NodeId> node_of(Guid g) const;
  // osm_sm_state_mgr_polling_callback: retry_number > polling_retry_number -> POLLING_TIMEOUT.
  void poll_master(const SmPtr& sm, std::uint64_t g);
  void enter_master(const SmPtr& sm);
  // A master's heavy sweep sets every port it reaches to point at it (PortInfo
  // MasterSMLID). Link state only: the sweep retries its Sets.
  void point_ports_at(const Sm& sm);
  void light_sweep_loop(const SmPtr& sm, std::uint64_t g);
  // Light sweep: query known SMs; a higher one (or another master) forces a heavy
  // sweep; a lower master gets trap 144 (it then hands over to us).
  void light_sweep(const SmPtr& sm);
  void trap144(const Sm& from, Guid to);
  // Heavy sweep on a master; at its end, hand over to the highest SM if it outranks us.
  void heavy_sweep(const SmPtr& sm);
  void receive_handover(const SmPtr& sm);
  // SubnSet(SMInfo) as osm_sminfo_rcv.c handles it. Returns the response payload
  // (pre-transition) or a non-zero status.
  std::variant<SmInfo, std::uint16_t> handle_set(const SmPtr& sm, SmInfoModifier mod,
                                                 const SmInfo& payload);

  // ---- processes ---------------------------------------------------------

  Result<int> spawn(NodeId n, const os::ProcessSpec& spec, os::ProcessRunner::ExitHandler on_exit);
  void end(const SmPtr& sm, bool signaled, int status);
  // SIGHUP as OpenSM 3.3.23 handles it (main.c, do_sweep()): the signal sets
  // force_heavy_sweep and wakes the sweeper; the file is re-read only at the
  // start of a heavy sweep. A HUP that lands while a heavy sweep runs (one a
  // trap 144, a HANDOVER or the first master sweep started) is taken by that
  // sweep, which has already passed its re-read and clears the flag: the new
  // file is not read. `hup` false: SIGCONT, whose re-read is not modelled as lost.
  void reload(const SmPtr& sm, bool hup = false);
  Status kill(NodeId n, int pid, int sig);

  // ---- MAD transport (fabric.cpp) ------------------------------------------

  struct Req {
    NodeId from;
    mad::Target target;
    std::optional<SmInfoModifier> mod;
    SmInfo payload;
    mad::RequestOptions opts;
    mad::ReplyCallback done;
    int attempt = 0;
    bool finished = false;
    TimePoint sent{};
  };
  void finish(const std::shared_ptr<Req>& r, Result<mad::SmInfoReply> res);
  void send(NodeId from, const mad::Target& t, std::optional<SmInfoModifier> mod,
            const SmInfo& payload, const mad::RequestOptions& o, mad::ReplyCallback done);
  void attempt(const std::shared_ptr<Req>& r);
  // SubnGet(PortInfo): answered by the node's SMA (no SM needed) from the link
  // model. Nodes have one port: port 1 (or 0, "the port the SMP came in on");
  // any other port is refused. Its state is Active while the link is up, Down
  // when not; a zero-hop query reaches the own port whatever the link state.
  // MasterSMLID is the last master's that swept the port; CapabilityMask
  // has IsSM while an OpenSM runs on the node.
  struct PortReq {
    NodeId from;
    mad::Target target;
    std::uint8_t port;
    mad::RequestOptions opts;
    mad::ReplyCallback done;
    int attempt = 0;
    bool finished = false;
    TimePoint sent{};
  };
  void send_port_info(NodeId from, const mad::Target& t, std::uint8_t port,
                      const mad::RequestOptions& o, mad::ReplyCallback done);
  void finish_port(const std::shared_ptr<PortReq>& r, Result<mad::PortInfoReply> res);
  // A switch: DR path {1} from any node is its own switch (the only one
  // without a chain). Port switch_port(n) is node n's cable; PortInfo of it
  // shows that node's link state; a chain's ports 1 and 2 go to the
  // neighbouring switches (Down at the ends of the chain).
  void switch_port_attempt(const std::shared_ptr<PortReq>& r, int a, const End& sw);
  // The answer of attempt `a` reaches the requester: the PortInfo, or a bad
  // modifier status when the port does not exist.
  void reply_port(const std::shared_ptr<PortReq>& r, int a, const std::optional<mad::PortInfo>& answer);
  void port_attempt(const std::shared_ptr<PortReq>& r);
  // SubnGet(NodeInfo) and SubnGet(NodeDescription), answered by the SMAs as
  // ibsim's do, so smha's discovery runs here unchanged: DR {} is the node
  // itself (a CA with one port, node GUID = port GUID), DR {1} the switch
  // (NumPorts = node count, LocalPortNum = the asker's switch port, port GUID
  // kSwitchGuid), DR {1,k} node k-1; a LID reaches the node holding it. A path
  // the fabric does not have, a down link or a lost MAD give silence.
  static constexpr std::uint64_t kSwitchGuid = 0x0002c90000005a00ULL;
  struct NodeReq {
    NodeId from;
    mad::Target target;
    mad::RequestOptions opts;
    NodeDone done;
    bool description = false;
    int attempt = 0;
    bool finished = false;
    TimePoint sent{};
  };
  void send_node_read(NodeId from, const mad::Target& t, const mad::RequestOptions& o,
                      NodeDone done, bool description = false);
  std::variant<mad::NodeInfo, std::string> node_answer(NodeId to, bool description) const;
  void node_attempt(const std::shared_ptr<NodeReq>& r);
  // SubnAdmGetTable(SMInfoRecord) to the SA at `lid`, answered as OpenSM's
  // osm_sa_sminfo_record.c does: its own SM (ActCount, priority, state; SM_Key
  // 0) and every remote SM its sweeps found (their last SMInfo), in one MAD as
  // under ibsim: the first 6 records, no PayloadLength, the rest cut. The
  // answer goes through the real encoder and decoder. No SM on the port: the
  // kernel refuses the GSI MAD (status); a frozen or starting SM: silence; an
  // SM that is not MASTER: busy (a model; the census asks the master only).
  // An SA table request (SMInfoRecords, IsSM PortInfoRecords) in flight.
  struct TableReq {
    NodeId from;
    Lid lid;
    mad::RequestOptions opts;
    mad::ReplyCallback done;
    int attempt = 0;
    bool finished = false;
    TimePoint sent{};
  };
  using SaReq = TableReq;
  void finish_sa(const std::shared_ptr<SaReq>& r, Result<mad::SmInfoRecordsReply> res);
  Result<mad::SmInfoRecordTable> sa_answer(NodeId to);
  void send_sa(NodeId from, Lid lid, const mad::RequestOptions& o, mad::ReplyCallback done);
  void sa_attempt(const std::shared_ptr<SaReq>& r);
  // ServiceRecord Set/Get/Delete to the SA at `lid`, handled as OpenSM's
  // osm_sa_service_record.c does (Set needs ServiceID and ServiceGID in the
  // ComponentMask and replaces a record with the same ID, GID and P_Key; a
  // lease runs out ServiceLease seconds after the last Set; Get matches
  // ServiceID, GID, P_Key and name when their mask bits are set: none is
  // status 0x0300, more than one 0x0400; Delete of no record is 0x0300).
  // Request and answer go through the real encoders and decoders. Who
  // answers and when: as send_sa.
  // SubnAdmGetTable(PortInfoRecord) of the IsSM ports.
  using PirReq = TableReq;
  void finish_pir(const std::shared_ptr<PirReq>& r, Result<mad::PortInfoRecordsReply> res);
  Result<mad::PortInfoRecordTable> pir_answer(NodeId to);
  void send_pir(NodeId from, Lid lid, const mad::RequestOptions& o, mad::ReplyCallback done);
  void pir_attempt(const std::shared_ptr<PirReq>& r);

  struct SrReq {
    NodeId from;
    Lid lid;
    mad::MadBytes request;
    std::uint8_t answer_method = 0;
    mad::RequestOptions opts;
    mad::ReplyCallback done;
    int attempt = 0;
    bool finished = false;
    TimePoint sent{};
  };
  void send_sr(NodeId from, Lid lid, Result<mad::MadBytes> request, std::uint8_t answer_method,
               const mad::RequestOptions& o, mad::ReplyCallback done);
  void finish_sr(const std::shared_ptr<SrReq>& r, Result<mad::ServiceRecordReply> res);
  mad::MadBytes sr_answer(NodeId to, const mad::MadBytes& request);
  void sr_attempt(const std::shared_ptr<SrReq>& r);
  // One attempt of an SA request `r` (SaReq, SrReq) to LID r->lid with the
  // timeout and retries of r->opts: `answer_at(to)` is what the SA at node `to`
  // answers, computed when the request arrives (a frozen or starting SM stays
  // silent); `arrived(answer, attempt)` runs when that answer is back at
  // r->from; `again()` sends the next attempt; `give_up(error)` ends r.
  template <typename Req, typename AnswerAt, typename Arrived, typename Again, typename GiveUp>
  void sa_round_trip(const std::shared_ptr<Req>& r, AnswerAt answer_at, Arrived arrived, Again again,
                     GiveUp give_up) {
    const int a = ++r->attempt;
    r->sent = q.now();
    auto dest = resolve(r->from, mad::Target{r->lid});
    if (dest && path_ok(r->from, *dest)) {
      const NodeId to = *dest;
      q.schedule_in(one_way(r->from, to), [this, r, a, to, answer_at, arrived] {
        if (r->finished || r->attempt != a) return;
        const auto& sm = nodes[to]->sm;
        if (sm && sm->alive && !answering(sm)) return;  // frozen or starting: silence
        auto answer = answer_at(to);
        if (!path_ok(to, r->from)) return;
        q.schedule_in(one_way(to, r->from), [r, a, answer, arrived] {
          if (r->finished || r->attempt != a) return;
          arrived(answer, a);
        });
      });
    }
    q.schedule_in(r->opts.timeout, [r, a, again, give_up] {
      if (r->finished || r->attempt != a) return;
      if (r->attempt <= r->opts.retries) return again();
      give_up(make_error(mad::kErrTimeout, "no SA answer after " + std::to_string(r->attempt) + " attempts"));
    });
  }
};

}  // namespace smha::sim
