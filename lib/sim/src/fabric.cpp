// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/sim/fabric.hpp"

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <map>
#include <sstream>
#include <variant>

namespace smha::sim {

namespace {

// OpenSM's Set-rejection status as it goes on the wire (internals §2.1 quirk).
constexpr std::uint16_t kStatusRejected = 0x0700;
// Unsupported method/attribute: what the kernel answers for an SMP to a port on
// which no SM agent is registered.
constexpr std::uint16_t kStatusUnsupported = 0x000c;
// Invalid attribute modifier: an SMA's answer for a port the node lacks.
constexpr std::uint16_t kStatusBadModifier = 0x001c;

struct Conf {
  std::uint8_t priority = 0;
  std::uint64_t sm_key = 1;
  Duration poll_timeout = milliseconds(10000);
  int retry_number = 4;
  Duration sweep_interval = seconds(10);
};

// Reads the keys the simulated OpenSM knows from an opensm.conf text; unknown
// keys are ignored, as OpenSM does ("Unrecognized token").
Conf parse_conf(const std::string& text) {
  Conf c;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string key, value;
    if (!(ls >> key >> value) || key[0] == '#') continue;
    try {
      if (key == "sm_priority") c.priority = static_cast<std::uint8_t>(std::min(15UL, std::stoul(value)));
      else if (key == "sm_key") c.sm_key = std::stoull(value, nullptr, 0);
      else if (key == "sminfo_polling_timeout") c.poll_timeout = milliseconds(std::stoul(value));
      else if (key == "polling_retry_number") c.retry_number = std::stoi(value);
      else if (key == "sweep_interval") c.sweep_interval = seconds(std::stoul(value));
    } catch (...) {
      // OpenSM keeps its default on a bad value.
    }
  }
  return c;
}

}  // namespace

struct Fabric::Impl {
  struct Sm {
    int pid = 0;
    NodeId node = 0;
    Guid guid;
    std::string conf_path;
    Conf conf;
    SmState state = SmState::Discovering;
    bool stopped = false;
    bool term_pending = false;
    bool alive = true;
    TimePoint answers_from{};
    std::uint32_t act_count = 0;
    Guid master_guid;
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
  struct Transport final : mad::MadTransport {
    Impl* f;
    NodeId self;
    void get_sminfo(const mad::Target& t, const mad::RequestOptions& o, mad::SmInfoCallback done) override {
      f->send(self, t, std::nullopt, SmInfo{}, o, std::move(done));
    }
    void set_sminfo(const mad::Target& t, SmInfoModifier mod, const SmInfo& payload,
                    const mad::RequestOptions& o, mad::SmInfoCallback done) override {
      f->send(self, t, mod, payload, o, std::move(done));
    }
    void get_port_info(const mad::Target& t, std::uint8_t port, const mad::RequestOptions& o,
                       mad::PortInfoCallback done) override {
      f->send_port_info(self, t, port, o, std::move(done));
    }
    void get_node_info(const mad::Target& t, const mad::RequestOptions& o,
                       mad::NodeInfoCallback done) override {
      f->send_node_read(self, t, o, [done = std::move(done)](Result<NodeAnswer> r) {
        if (!r) return done(r.error());
        done(mad::NodeInfoReply{std::get<mad::NodeInfo>(r->value), r->rtt, r->attempts});
      });
    }
    void get_node_description(const mad::Target& t, const mad::RequestOptions& o,
                              mad::NodeDescriptionCallback done) override {
      f->send_node_read(self, t, o, [done = std::move(done)](Result<NodeAnswer> r) {
        if (!r) return done(r.error());
        done(mad::NodeDescriptionReply{std::get<std::string>(r->value), r->rtt, r->attempts});
      }, true);
    }
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
      if (!n->sm || n->sm->pid != pid) return make_error("esrch", "no process " + std::to_string(pid));
      n->sm->on_exit = std::move(on_exit);
      return Status::Ok();
    }
  };
  struct Files final : os::FileSystem {
    std::map<std::string, std::string> files;
    Status write_atomic(const std::string& path, std::string_view content, unsigned) override {
      if (path.empty()) return make_error("invalid", "empty path");
      files[path] = std::string(content);
      return Status::Ok();
    }
    Result<std::string> read(const std::string& path) const override {
      auto it = files.find(path);
      if (it == files.end()) return make_error("not_found", path + ": no such file");
      return it->second;
    }
  };
  struct Node {
    std::string name;
    Guid guid;
    Lid lid;
    int sw = 0;  // the switch of the chain its cable goes to
    bool link = true;
    double loss = 0;
    Duration delay{};
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
    return params.hop_delay * cables(a, b) + nodes[a]->delay + nodes[b]->delay;
  }

  // An SM's own SMInfo query to another SM (its sweeps and polls), with OpenSM's
  // transaction retries and no delay modelled. nullopt: no answer.
  std::optional<SmInfo> sm_query(const Sm& from, NodeId to) {
    const auto& target = nodes[to]->sm;
    for (int i = 0; i < params.sm.transaction_attempts; ++i) {
      if (!path_ok(from.node, to) || !path_ok(to, from.node)) continue;
      if (!answering(target)) return std::nullopt;
      ++target->act_count;
      return info(*target);
    }
    return std::nullopt;
  }
  bool answering(const SmPtr& sm) const {
    return sm && sm->alive && !sm->stopped && q.now() >= sm->answers_from;
  }
  static SmInfo info(const Sm& sm) {
    SmInfo i;
    i.guid = sm.guid;
    i.sm_key = sm.conf.sm_key;
    i.act_count = sm.act_count;
    i.priority = sm.conf.priority;
    i.state = sm.state;
    return i;
  }
  static bool higher(const SmInfo& a, const Sm& b) {
    return outranks(a.priority, a.guid, b.conf.priority, b.guid);
  }

  // ---- SM timers ---------------------------------------------------------

  void sm_timer(const SmPtr& sm, Duration d, std::function<void()> fn) {
    std::weak_ptr<Sm> w = sm;
    q.schedule_in(d, [w, fn = std::move(fn)]() mutable {
      auto s = w.lock();
      if (!s || !s->alive) return;
      if (s->stopped) {
        s->deferred.push_back(std::move(fn));
        return;
      }
      fn();
    });
  }

  // ---- SM state machine --------------------------------------------------

  // A frozen SM reachable from `sm`: the sweep's query to it waits for its timeouts.
  bool frozen_sm_in_reach(const Sm& sm) const {
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      const auto& o = nodes[i]->sm;
      if (static_cast<NodeId>(i) == sm.node || !o || !o->alive || !o->stopped) continue;
      if (nodes[sm.node]->link && nodes[i]->link) return true;
    }
    return false;
  }

  void begin_discovery(const SmPtr& sm) {
    sm->state = SmState::Discovering;
    const auto g = ++sm->gen;
    discovery_check(sm, g, true);
  }

  void discovery_check(const SmPtr& sm, std::uint64_t g, bool first) {
    const Duration delay = first ? params.sm.discover_check
                                 : params.sm.transaction_timeout * params.sm.transaction_attempts;
    sm_timer(sm, delay, [this, sm, g, first] {
      if (sm->gen != g) return;
      if (first && nodes[sm->node]->link && frozen_sm_in_reach(*sm)) {
        discovery_check(sm, g, false);  // waits on the frozen SM, then goes on
        return;
      }
      if (!nodes[sm->node]->link) {  // SM port down: DISCOVERING until it comes back
        sm_timer(sm, params.sm.link_retry, [this, sm, g] {
          if (sm->gen == g) begin_discovery(sm);
        });
        return;
      }
      sm->act_count += sweep_smps(2);
      for (std::size_t i = 0; i < nodes.size(); ++i) {
        if (static_cast<NodeId>(i) == sm->node || !nodes[i]->sm) continue;
        auto r = sm_query(*sm, static_cast<NodeId>(i));
        if (r && r->state == SmState::Master && r->sm_key == sm->conf.sm_key) {
          enter_standby(sm, r->guid);  // MASTER_OR_HIGHER_SM_DETECTED
          return;
        }
      }
      sm_timer(sm, params.sm.discover_full - params.sm.discover_check, [this, sm, g] {
        if (sm->gen == g) enter_master(sm);  // DISCOVERY_COMPLETED
      });
    });
  }

  // SMPs one sweep sends (OpenSM's ActCount counts them): `per_node` per node
  // plus a PortInfo for each of the switch's 36 ports. A STANDBY sends only
  // its SMInfo answers and polls, so a sweep stands out in its ActCount.
  std::uint32_t sweep_smps(std::uint32_t per_node) const {
    return per_node * static_cast<std::uint32_t>(nodes.size()) + 36;
  }

  void enter_standby(const SmPtr& sm, Guid master) {
    sm->state = SmState::Standby;
    sm->master_guid = master;
    sm->retries = 0;
    const auto g = ++sm->gen;
    poll_master(sm, g);
  }

  std::optional<NodeId> node_of(Guid g) const {
    for (std::size_t i = 0; i < nodes.size(); ++i)
      if (nodes[i]->sm && nodes[i]->sm->guid == g) return static_cast<NodeId>(i);
    return std::nullopt;
  }

  // osm_sm_state_mgr_polling_callback: retry_number > polling_retry_number -> POLLING_TIMEOUT.
  void poll_master(const SmPtr& sm, std::uint64_t g) {
    if (sm->gen != g || sm->state != SmState::Standby) return;
    if (sm->retries > sm->conf.retry_number) {
      begin_discovery(sm);
      return;
    }
    std::optional<SmInfo> r;
    if (auto n = node_of(sm->master_guid)) r = sm_query(*sm, *n);
    ++sm->act_count;
    if (r && r->state == SmState::Master) {
      sm->retries = 0;
      if (higher(*r, *sm) == false && r->priority < sm->conf.priority) trap144(*sm, r->guid);
    } else {
      ++sm->retries;
    }
    sm_timer(sm, sm->conf.poll_timeout, [this, sm, g] { poll_master(sm, g); });
  }

  void enter_master(const SmPtr& sm) {
    sm->state = SmState::Master;
    point_ports_at(*sm);
    const auto g = ++sm->gen;
    sm->act_count += sweep_smps(4);
    // The first master sweep ends like every heavy sweep: hand over if a higher
    // SM is known (two masters after a HANDOVER to a standby last ~25 ms).
    heavy_sweep(sm);
    light_sweep_loop(sm, g);
  }

  // A master's heavy sweep sets every port it reaches to point at it (PortInfo
  // MasterSMLID). Link state only: the sweep retries its Sets.
  void point_ports_at(const Sm& sm) {
    for (std::size_t i = 0; i < nodes.size(); ++i)
      if (nodes[sm.node]->link && nodes[i]->link) nodes[i]->master_sm_lid = nodes[sm.node]->lid;
  }

  void light_sweep_loop(const SmPtr& sm, std::uint64_t g) {
    sm_timer(sm, sm->conf.sweep_interval, [this, sm, g] {
      if (sm->gen != g || sm->state != SmState::Master) return;
      light_sweep(sm);
      light_sweep_loop(sm, g);
    });
  }

  // Light sweep: query known SMs; a higher one (or another master) forces a heavy
  // sweep; a lower master gets trap 144 (it then hands over to us).
  void light_sweep(const SmPtr& sm) {
    if (!nodes[sm->node]->link) {
      begin_discovery(sm);  // state_mgr_is_sm_port_down -> DISCOVER
      return;
    }
    bool heavy = false;
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      if (static_cast<NodeId>(i) == sm->node || !nodes[i]->sm) continue;
      auto r = sm_query(*sm, static_cast<NodeId>(i));
      if (!r || r->sm_key != sm->conf.sm_key) continue;
      if (r->state == SmState::Master && !higher(*r, *sm)) trap144(*sm, r->guid);
      if ((r->state == SmState::Master || r->state == SmState::Standby) && higher(*r, *sm)) heavy = true;
    }
    if (heavy) heavy_sweep(sm);
  }

  void trap144(const Sm& from, Guid to) {
    auto n = node_of(to);
    if (!n) return;
    auto target = nodes[*n]->sm;
    if (!path_ok(from.node, *n) || !answering(target) || target->state != SmState::Master) return;
    heavy_sweep(target);
  }

  // Heavy sweep on a master; at its end, hand over to the highest SM if it outranks us.
  void heavy_sweep(const SmPtr& sm) {
    const auto g = sm->gen;
    sm->sweep_until = std::max(sm->sweep_until, q.now() + params.sm.handover_sweep);
    sm_timer(sm, params.sm.handover_sweep, [this, sm, g] {
      if (sm->gen != g || sm->state != SmState::Master) return;
      sm->act_count += sweep_smps(2);
      if (!nodes[sm->node]->link) {
        begin_discovery(sm);
        return;
      }
      point_ports_at(*sm);
      std::optional<std::pair<NodeId, SmInfo>> best;
      for (std::size_t i = 0; i < nodes.size(); ++i) {
        if (static_cast<NodeId>(i) == sm->node || !nodes[i]->sm) continue;
        auto r = sm_query(*sm, static_cast<NodeId>(i));
        if (!r || r->sm_key != sm->conf.sm_key || r->state == SmState::NotActive) continue;
        if (!higher(*r, *sm)) continue;
        if (!best || outranks(r->priority, r->guid, best->second.priority, best->second.guid))
          best = std::make_pair(static_cast<NodeId>(i), *r);
      }
      if (!best) return;
      // state_mgr_send_handover: SubnSet(SMInfo, HANDOVER); then HANDOVER_SENT -> STANDBY.
      auto target = nodes[best->first]->sm;
      if (!path_ok(sm->node, best->first) || !answering(target)) return;
      ++handovers;
      receive_handover(target);
      enter_standby(sm, target->guid);
    });
  }

  void receive_handover(const SmPtr& sm) {
    switch (sm->state) {
      case SmState::Standby: enter_master(sm); break;
      case SmState::Master: heavy_sweep(sm); break;     // forced first-time sweep; stays MASTER
      case SmState::Discovering: break;                  // just sweeps
      default: break;
    }
  }

  // SubnSet(SMInfo) as osm_sminfo_rcv.c handles it. Returns the response payload
  // (pre-transition) or a non-zero status.
  std::variant<SmInfo, std::uint16_t> handle_set(const SmPtr& sm, SmInfoModifier mod,
                                                 const SmInfo& payload) {
    const SmInfo reply = info(*sm);
    ++sm->act_count;
    if (sm->state == SmState::Master) ++sets_to_master;
    if (mod != SmInfoModifier::Acknowledge && payload.state != SmState::Master) return kStatusRejected;
    if (mod == SmInfoModifier::Acknowledge && payload.state != SmState::Standby) return kStatusRejected;
    std::function<void()> effect;
    switch (sm->state) {
      case SmState::Discovering:
        if (mod != SmInfoModifier::Handover) return kStatusRejected;
        break;
      case SmState::Standby:
        if (mod == SmInfoModifier::Discover) effect = [this, sm] { begin_discovery(sm); };
        else if (mod == SmInfoModifier::Handover) effect = [this, sm] { enter_master(sm); };
        else if (mod == SmInfoModifier::Disable)
          effect = [sm] { sm->state = SmState::NotActive; ++sm->gen; };
        else if (mod != SmInfoModifier::Acknowledge) return kStatusRejected;
        break;
      case SmState::NotActive:
        if (mod != SmInfoModifier::Standby) return kStatusRejected;
        effect = [this, sm, g = payload.guid] { enter_standby(sm, g); };
        break;
      case SmState::Master:
        if (mod != SmInfoModifier::Handover) return kStatusRejected;
        effect = [this, sm] { heavy_sweep(sm); };
        break;
    }
    if (effect) {
      std::weak_ptr<Sm> w = sm;
      q.schedule_in(Duration{0}, [w, effect] {
        if (auto s = w.lock(); s && s->alive) effect();
      });
    }
    return reply;
  }

  // ---- MAD transport -----------------------------------------------------

  struct Req {
    NodeId from;
    mad::Target target;
    std::optional<SmInfoModifier> mod;
    SmInfo payload;
    mad::RequestOptions opts;
    mad::SmInfoCallback done;
    int attempt = 0;
    bool finished = false;
    TimePoint sent{};
  };

  void finish(const std::shared_ptr<Req>& r, Result<mad::SmInfoReply> res) {
    if (r->finished) return;
    r->finished = true;
    auto done = std::move(r->done);
    done(std::move(res));
  }

  void send(NodeId from, const mad::Target& t, std::optional<SmInfoModifier> mod,
            const SmInfo& payload, const mad::RequestOptions& o, mad::SmInfoCallback done) {
    auto r = std::make_shared<Req>(Req{from, t, mod, payload, o, std::move(done)});
    attempt(r);
  }

  void attempt(const std::shared_ptr<Req>& r) {
    const int a = ++r->attempt;
    r->sent = q.now();
    auto dest = resolve(r->from, r->target);
    if (dest && path_ok(r->from, *dest)) {
      const NodeId to = *dest;
      q.schedule_in(one_way(r->from, to), [this, r, a, to] {
        if (r->finished || r->attempt != a) return;
        auto sm = nodes[to]->sm;
        std::variant<SmInfo, std::uint16_t> answer;
        if (!sm || !sm->alive) {
          answer = kStatusUnsupported;  // no SM bound: the kernel refuses the SMP
        } else if (!answering(sm)) {
          return;  // frozen or still starting: no response
        } else if (r->mod) {
          answer = handle_set(sm, *r->mod, r->payload);
        } else {
          ++sm->act_count;
          answer = info(*sm);
        }
        if (!path_ok(to, r->from)) return;
        q.schedule_in(one_way(to, r->from), [this, r, a, answer] {
          if (r->finished || r->attempt != a) return;
          if (const auto* st = std::get_if<std::uint16_t>(&answer)) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "0x%04x", *st);
            finish(r, make_error(mad::kErrMadStatus, std::string("MAD status ") + buf));
            return;
          }
          finish(r, mad::SmInfoReply{std::get<SmInfo>(answer), q.now() - r->sent, a});
        });
      });
    }
    q.schedule_in(r->opts.timeout, [this, r, a] {
      if (r->finished || r->attempt != a) return;
      if (r->attempt <= r->opts.retries) {
        attempt(r);
        return;
      }
      finish(r, make_error(mad::kErrTimeout, "no SMInfo answer after " +
                                                 std::to_string(r->attempt) + " attempts"));
    });
  }

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
    mad::PortInfoCallback done;
    int attempt = 0;
    bool finished = false;
    TimePoint sent{};
  };

  void send_port_info(NodeId from, const mad::Target& t, std::uint8_t port,
                      const mad::RequestOptions& o, mad::PortInfoCallback done) {
    port_attempt(std::make_shared<PortReq>(PortReq{from, t, port, o, std::move(done)}));
  }

  void finish_port(const std::shared_ptr<PortReq>& r, Result<mad::PortInfoReply> res) {
    if (r->finished) return;
    r->finished = true;
    auto done = std::move(r->done);
    done(std::move(res));
  }

  // A switch: DR path {1} from any node is its own switch (the only one
  // without a chain). Port switch_port(n) is node n's cable; PortInfo of it
  // shows that node's link state; a chain's ports 1 and 2 go to the
  // neighbouring switches (Down at the ends of the chain).
  void switch_port_attempt(const std::shared_ptr<PortReq>& r, int a, const End& sw) {
    const auto& me = *nodes[r->from];
    if (!me.link || chance(me.loss)) return;  // lost on our cable on the way out
    const int p = r->port;
    std::optional<mad::PortInfo> answer;
    if (p >= 1 && p <= switch_ports()) {
      mad::PortInfo pi;
      pi.local_port = r->port;
      if (chain() && p <= 2) {
        const bool cabled = p == 1 ? sw.id > 0 : sw.id + 1 < switches();
        pi.state = cabled ? mad::PortState::Active : mad::PortState::Down;
      } else {
        const int n = chain() ? p - 3 : p - 1;
        pi.state = nodes[n]->sw == sw.id && nodes[n]->link ? mad::PortState::Active : mad::PortState::Down;
      }
      answer = pi;
    }
    if (chance(me.loss)) return;  // lost on the way back
    q.schedule_in(2 * (params.hop_delay * cables_to_switch(r->from, sw.id) + me.delay),
                  [this, r, a, answer] { reply_port(r, a, answer); });
  }

  // The answer of attempt `a` reaches the requester: the PortInfo, or a bad
  // modifier status when the port does not exist.
  void reply_port(const std::shared_ptr<PortReq>& r, int a, const std::optional<mad::PortInfo>& answer) {
    if (r->finished || r->attempt != a) return;
    if (!answer) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "0x%04x", kStatusBadModifier);
      finish_port(r, make_error(mad::kErrMadStatus, std::string("MAD status ") + buf));
      return;
    }
    finish_port(r, mad::PortInfoReply{*answer, q.now() - r->sent, a});
  }

  void port_attempt(const std::shared_ptr<PortReq>& r) {
    const int a = ++r->attempt;
    r->sent = q.now();
    const auto sw = switch_end(r->from, r->target);
    auto dest = sw ? std::nullopt : resolve(r->from, r->target);
    if (sw) switch_port_attempt(r, a, *sw);
    if (dest && path_ok(r->from, *dest)) {
      const NodeId to = *dest;
      q.schedule_in(one_way(r->from, to), [this, r, a, to] {
        if (r->finished || r->attempt != a) return;
        std::optional<mad::PortInfo> answer;
        if (r->port <= 1) {
          mad::PortInfo pi;
          pi.lid = nodes[to]->lid;
          pi.sm_lid = nodes[to]->master_sm_lid;
          pi.local_port = 1;
          pi.state = nodes[to]->link ? mad::PortState::Active : mad::PortState::Down;
          // IsSM while an OpenSM process holds the port (stopped or not).
          if (nodes[to]->sm) pi.capability_mask = mad::kCapIsSm;
          answer = pi;
        }
        if (!path_ok(to, r->from)) return;
        q.schedule_in(one_way(to, r->from), [this, r, a, answer] { reply_port(r, a, answer); });
      });
    }
    q.schedule_in(r->opts.timeout, [this, r, a] {
      if (r->finished || r->attempt != a) return;
      if (r->attempt <= r->opts.retries) {
        port_attempt(r);
        return;
      }
      finish_port(r, make_error(mad::kErrTimeout, "no PortInfo answer after " +
                                                      std::to_string(r->attempt) + " attempts"));
    });
  }

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
                      NodeDone done, bool description = false) {
    node_attempt(std::make_shared<NodeReq>(NodeReq{from, t, o, std::move(done), description}));
  }

  std::variant<mad::NodeInfo, std::string> node_answer(NodeId to, bool description) const {
    if (description) return nodes[to]->name;
    mad::NodeInfo ni;
    ni.type = mad::NodeType::Ca;
    ni.num_ports = 1;
    ni.system_image_guid = nodes[to]->guid;
    ni.node_guid = nodes[to]->guid;
    ni.port_guid = nodes[to]->guid;
    ni.local_port = 1;
    return ni;
  }

  void node_attempt(const std::shared_ptr<NodeReq>& r) {
    const int a = ++r->attempt;
    r->sent = q.now();
    auto answer_in = [this, r, a](Duration d, std::variant<mad::NodeInfo, std::string> v) {
      q.schedule_in(d, [this, r, a, v] {
        if (r->finished || r->attempt != a) return;
        r->finished = true;
        auto done = std::move(r->done);
        done(NodeAnswer{v, q.now() - r->sent, a});
      });
    };
    if (const auto sw = switch_end(r->from, r->target)) {
      const auto& me = *nodes[r->from];
      if (me.link && !chance(me.loss) && !chance(me.loss)) {
        std::variant<mad::NodeInfo, std::string> v =
            chain() ? "sim switch " + std::to_string(sw->id + 1) : std::string("sim switch");
        if (!r->description) {
          const Guid g{kSwitchGuid + static_cast<std::uint64_t>(sw->id)};
          mad::NodeInfo ni;
          ni.type = mad::NodeType::Switch;
          ni.num_ports = static_cast<std::uint8_t>(switch_ports());
          ni.system_image_guid = g;
          ni.node_guid = g;
          ni.port_guid = g;
          ni.local_port = sw->in_port;
          v = ni;
        }
        answer_in(2 * (params.hop_delay * cables_to_switch(r->from, sw->id) + me.delay), v);
      }
    } else if (auto dest = resolve(r->from, r->target); dest && path_ok(r->from, *dest)) {
      const NodeId to = *dest;
      if (path_ok(to, r->from))
        answer_in(one_way(r->from, to) + one_way(to, r->from), node_answer(to, r->description));
    }
    q.schedule_in(r->opts.timeout, [this, r, a] {
      if (r->finished || r->attempt != a) return;
      if (r->attempt <= r->opts.retries) {
        node_attempt(r);
        return;
      }
      r->finished = true;
      auto done = std::move(r->done);
      done(make_error(mad::kErrTimeout, std::string("no ") +
                                            (r->description ? "NodeDescription" : "NodeInfo") +
                                            " answer after " + std::to_string(r->attempt) +
                                            " attempts"));
    });
  }

  // ---- processes ---------------------------------------------------------

  Result<int> spawn(NodeId n, const os::ProcessSpec& spec, os::ProcessRunner::ExitHandler on_exit) {
    const auto slash = spec.path.find_last_of('/');
    const std::string base = slash == std::string::npos ? spec.path : spec.path.substr(slash + 1);
    if (base != "opensm") return make_error("spawn", spec.path + ": the simulated fabric runs only opensm");
    std::string conf_path;
    std::optional<Guid> guid;
    for (std::size_t i = 1; i + 1 < spec.argv.size(); ++i) {
      if (spec.argv[i] == "-F") conf_path = spec.argv[i + 1];
      if (spec.argv[i] == "-g") guid = parse_guid(spec.argv[i + 1]);
    }
    auto sm = std::make_shared<Sm>();
    sm->pid = next_pid++;
    sm->node = n;
    sm->on_exit = std::move(on_exit);
    auto& node = *nodes[n];
    if (node.sm || (guid && *guid != node.guid)) {
      // Bind failure ("Perhaps another instance of OpenSM is already running"): exit 0.
      const int pid = sm->pid;
      auto handler = sm->on_exit;
      q.schedule_in(milliseconds(5), [handler, pid] {
        if (handler) handler(os::ExitInfo{pid, false, 0});
      });
      return pid;
    }
    if (!conf_path.empty()) {
      auto text = node.fs.read(conf_path);
      if (text.ok()) sm->conf = parse_conf(*text);
    }
    sm->conf_path = conf_path;
    sm->guid = node.guid;
    sm->answers_from = q.now() + params.sm.startup;
    node.sm = sm;
    begin_discovery(sm);
    return sm->pid;
  }

  void end(const SmPtr& sm, bool signaled, int status) {
    sm->alive = false;
    sm->deferred.clear();
    ++sm->gen;
    auto& node = *nodes[sm->node];
    if (node.sm == sm) node.sm.reset();
    auto handler = sm->on_exit;
    const int pid = sm->pid;
    q.schedule_in(Duration{0}, [handler, pid, signaled, status] {
      if (handler) handler(os::ExitInfo{pid, signaled, status});
    });
  }

  // SIGHUP as OpenSM 3.3.23 handles it (main.c, do_sweep()): the signal sets
  // force_heavy_sweep and wakes the sweeper; the file is re-read only at the
  // start of a heavy sweep. A HUP that lands while a heavy sweep runs (one a
  // trap 144, a HANDOVER or the first master sweep started) is taken by that
  // sweep, which has already passed its re-read and clears the flag: the new
  // file is not read. `hup` false: SIGCONT, whose re-read is not modelled as lost.
  void reload(const SmPtr& sm, bool hup = false) {
    auto& absorb = absorb_hups[static_cast<std::size_t>(sm->node)];
    if (hup && sm->state == SmState::Master && (q.now() < sm->sweep_until || absorb > 0)) {
      if (absorb > 0) --absorb;
      ++hups_absorbed;
      return;
    }
    const auto old = sm->conf.priority;
    if (!sm->conf_path.empty()) {
      auto text = nodes[sm->node]->fs.read(sm->conf_path);
      if (text.ok()) sm->conf = parse_conf(*text);
    }
    // osm_set_sm_priority: raising it in STANDBY sends trap 144 to the master.
    if (sm->state == SmState::Standby && sm->conf.priority > old) trap144(*sm, sm->master_guid);
    if (sm->state == SmState::Master) heavy_sweep(sm);  // HUP: heavy sweep
  }

  Status kill(NodeId n, int pid, int sig) {
    auto sm = nodes[n]->sm;
    if (!sm || sm->pid != pid) return make_error("esrch", "no process " + std::to_string(pid));
    switch (sig) {
      case SIGKILL: end(sm, true, SIGKILL); break;
      case SIGTERM:
      case SIGINT:
        if (sm->stopped) sm->term_pending = true;
        else end(sm, false, 0);
        break;
      case SIGHUP:
        if (!sm->stopped) reload(sm, true);
        break;
      case SIGSTOP: sm->stopped = true; break;
      case SIGCONT:
        if (!sm->stopped) break;
        sm->stopped = false;
        if (sm->term_pending) {
          end(sm, false, 0);
          break;
        }
        {
          auto deferred = std::move(sm->deferred);
          sm->deferred.clear();
          for (auto& fn : deferred) q.schedule_in(Duration{0}, [sm, fn] {
            if (sm->alive && !sm->stopped) fn();
          });
        }
        reload(sm);  // SIGCONT acts like SIGHUP in OpenSM
        break;
      default: return make_error("signal", "signal " + std::to_string(sig) + " not simulated");
    }
    return Status::Ok();
  }

};

Fabric::Fabric(std::uint64_t seed, FabricParams params)
    : impl_(std::make_unique<Impl>(seed, params)) {}
Fabric::~Fabric() = default;

EventQueue& Fabric::queue() { return impl_->q; }
const EventQueue& Fabric::queue() const { return impl_->q; }
std::mt19937_64& Fabric::rng() { return impl_->rng; }
const FabricParams& Fabric::params() const { return impl_->params; }

NodeId Fabric::add_node(std::string name, Guid port_guid, Lid lid, int sw) {
  auto n = std::make_unique<Impl::Node>();
  n->sw = std::clamp(sw, 0, impl_->switches() - 1);
  n->name = std::move(name);
  n->guid = port_guid;
  n->lid = lid;
  const auto id = static_cast<NodeId>(impl_->nodes.size());
  n->transport.f = impl_.get();
  n->transport.self = id;
  n->runner.f = impl_.get();
  n->runner.self = id;
  impl_->nodes.push_back(std::move(n));
  impl_->absorb_hups.push_back(0);
  return id;
}
std::size_t Fabric::node_count() const { return impl_->nodes.size(); }
const std::string& Fabric::name(NodeId n) const { return impl_->nodes[n]->name; }
Guid Fabric::guid(NodeId n) const { return impl_->nodes[n]->guid; }
Lid Fabric::lid(NodeId n) const { return impl_->nodes[n]->lid; }
void Fabric::set_lid(NodeId n, Lid lid) { impl_->nodes[n]->lid = lid; }
DrPath Fabric::dr_path(NodeId target) const {
  if (!impl_->chain()) return DrPath{{1, static_cast<std::uint8_t>(target + 1)}};
  const NodeId from = 0;
  return dr_path(from, target);
}
DrPath Fabric::dr_path(NodeId from, NodeId target) const {
  if (!impl_->chain()) return dr_path(target);
  DrPath p{{1}};
  const int a = impl_->nodes[from]->sw, b = impl_->nodes[target]->sw;
  for (int s = a; s != b; s += a < b ? 1 : -1) p.hops.push_back(a < b ? 2 : 1);
  p.hops.push_back(static_cast<std::uint8_t>(impl_->switch_port(target)));
  return p;
}
int Fabric::switch_of(NodeId n) const { return impl_->nodes[n]->sw; }

// A master does not notice its own port going down until it sweeps
// (state_mgr_is_sm_port_down() in do_sweep): at its next light sweep, or the
// heavy sweep a SIGHUP starts. No trap reaches it through a dead port.
void Fabric::set_link(NodeId n, bool up) { impl_->nodes[n]->link = up; }
bool Fabric::link_up(NodeId n) const { return impl_->nodes[n]->link; }
void Fabric::set_loss(NodeId n, double p) { impl_->nodes[n]->loss = p; }
Fabric::LossCount Fabric::loss_count() const { return impl_->losses; }
void Fabric::set_extra_delay(NodeId n, Duration d) { impl_->nodes[n]->delay = d; }

mad::MadTransport& Fabric::transport(NodeId n) { return impl_->nodes[n]->transport; }
os::ProcessRunner& Fabric::runner(NodeId n) { return impl_->nodes[n]->runner; }
os::FileSystem& Fabric::fs(NodeId n) { return impl_->nodes[n]->fs; }

std::optional<Fabric::SmView> Fabric::sm(NodeId n) const {
  const auto& sm = impl_->nodes[n]->sm;
  if (!sm) return std::nullopt;
  return SmView{sm->pid, sm->guid, sm->state, sm->conf.priority, sm->stopped, sm->act_count};
}

std::vector<NodeId> Fabric::active_masters() const {
  std::vector<NodeId> out;
  for (std::size_t i = 0; i < impl_->nodes.size(); ++i) {
    const auto& sm = impl_->nodes[i]->sm;
    if (sm && !sm->stopped && sm->state == SmState::Master) out.push_back(static_cast<NodeId>(i));
  }
  return out;
}

bool Fabric::signal_opensm(NodeId n, int sig) {
  const auto& sm = impl_->nodes[n]->sm;
  if (!sm) return false;
  return impl_->kill(n, sm->pid, sig).ok();
}

bool Fabric::stray_handover(NodeId n) {
  const auto& sm = impl_->nodes[n]->sm;
  if (!sm || sm->stopped || sm->state != SmState::Standby) return false;
  impl_->receive_handover(sm);
  return true;
}

std::uint64_t Fabric::sets_to_master() const { return impl_->sets_to_master; }
std::uint64_t Fabric::handovers() const { return impl_->handovers; }
std::uint64_t Fabric::hups_absorbed() const { return impl_->hups_absorbed; }
void Fabric::absorb_next_hups(NodeId n, int count) {
  impl_->absorb_hups[static_cast<std::size_t>(n)] = count;
}

}  // namespace smha::sim
