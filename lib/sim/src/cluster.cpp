// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/sim/cluster.hpp"

#include <algorithm>
#include <stdexcept>

#include <spdlog/spdlog.h>

#include "smha/head/plan.hpp"
#include "smha/opensm/check.hpp"
#include "smha/opensm/conf.hpp"
#include "smha/opensm/log_follower.hpp"

namespace smha::sim {

struct Cluster::Sink final : agent::EventSink {
  std::vector<HeadRecord>* out;
  void event(const sm::RecordEvent& e, TimePoint at) override {
    out->push_back({at, "event", std::string(sm::to_string(e.kind)), e.reason + " | " + e.evidence});
  }
  void alarm(const RaiseAlarm& a, TimePoint at) override {
    out->push_back({at, a.refresh ? "alarm_detail" : "alarm", std::string(to_string(a.kind)), a.detail});
  }
  void clear(const ClearAlarm& a, TimePoint at) override {
    out->push_back({at, "clear", std::string(to_string(a.kind)), ""});
  }
  void hook(const sm::RunHook& h, TimePoint at) override {
    out->push_back({at, "hook", h.event,
                    std::string(to_string(h.old_state)) + "->" + std::string(to_string(h.new_state))});
  }
  void error(const Error& e, TimePoint at) override {
    out->push_back({at, "error", std::string(to_string(e.code)), e.message});
  }
  void takeover_report(const fabric::TakeoverReport& r, TimePoint at) override {
    out->push_back({at, "report", std::string(fabric::to_string(r.kind)), fabric::summary(r)});
  }
  void role_changed(const sm::RoleChange& r, TimePoint at) override {
    out->push_back({at, "role", std::string(sm::to_string(r.from)) + "->" + std::string(sm::to_string(r.to)),
                    r.why});
  }
};

namespace {

// A ClusterParams duration in the unit of the configuration key it becomes. A
// value the key cannot hold is refused: the head would run with another value
// than the one the test asked for.
template <class To>
To in_config_unit(Duration d, const char* param) {
  const auto t = std::chrono::duration_cast<To>(d);
  if (Duration(t) != d)
    throw std::invalid_argument(std::string("sim::ClusterParams::") + param +
                                ": not a whole number of the configuration key's unit");
  return t;
}

// The OpenSM binary the simulation models, as smhad's probe would describe it:
// upstream, taking every key smhad renders for `c` (it acts on the ones it
// models: render_opensm_keys).
opensm::Capabilities simulated_opensm(const config::Config& c) {
  opensm::Capabilities caps;
  caps.binary = c.opensm.binary;
  caps.version = "3.3.23";
  const auto plan = opensm::plan_render(c, caps, static_cast<std::uint8_t>(c.sm_priority), c.port.port_guid);
  for (const auto& [key, value] : opensm::parse_opensm_conf(opensm::render_opensm_conf(c, plan.inputs)))
    caps.defaults[key] = value;
  return caps;
}

// Passes every call to smhad's OpenSM control and notes when the engine asks
// for a start (the supervision property "a respawn waits for the engine").
class StartWatch final : public agent::OpensmControl {
 public:
  StartWatch(agent::OpensmControl& inner, const EventQueue& q, TimePoint& last_start)
      : inner_(inner), q_(q), last_start_(last_start) {}
  Status start(std::uint8_t priority) override {
    last_start_ = q_.now();
    return inner_.start(priority);
  }
  Status stop(bool force) override { return inner_.stop(force); }
  Status restart(std::uint8_t priority, bool force) override {
    last_start_ = q_.now();
    return inner_.restart(priority, force);
  }
  Status set_priority(std::uint8_t priority) override { return inner_.set_priority(priority); }
  sm::ProcessState state() const override { return inner_.state(); }
  void set_exit_handler(ExitHandler h) override { inner_.set_exit_handler(std::move(h)); }
  bool adopt_running() override { return inner_.adopt_running(); }

 private:
  agent::OpensmControl& inner_;
  const EventQueue& q_;
  TimePoint& last_start_;
};

// Passes every call to the fabric's transport and reports the answers to a tap.
class TapTransport final : public mad::MadTransport {
 public:
  TapTransport(mad::MadTransport& inner, EventQueue& q, const Cluster::Tap& tap)
      : inner_(inner), q_(q), tap_(tap) {}
  void submit(mad::Request request, mad::ReplyCallback done) override {
    if (tap_.request) tap_.request(std::string(mad::name(request.query)).c_str());
    const TimePoint sent = q_.now();
    if (const auto* get = std::get_if<mad::SmInfoGet>(&request.query)) {
      const mad::Target target = get->target;
      if (tap_.drop_sminfo && tap_.drop_sminfo(target)) {
        const Duration wait = request.opts.timeout * (1 + request.opts.retries);
        q_.schedule_in(wait, [done = std::move(done)] {
          done(make_error(mad::kErrTimeout, "no SMInfo answer (dropped by the test's tap)"));
        });
        return;
      }
      std::string via = std::holds_alternative<Lid>(target) ? "lid:" + std::to_string(std::get<Lid>(target).value)
                                                            : "dr:" + to_string(std::get<DrPath>(target));
      inner_.submit(std::move(request), [this, sent, via, done = std::move(done)](Result<mad::AnyReply> r) {
        const auto* reply = r.ok() ? std::get_if<mad::SmInfoReply>(&r.value()) : nullptr;
        if (reply && tap_.sminfo) tap_.sminfo(reply->info, sent, q_.now(), via);
        done(std::move(r));
      });
      return;
    }
    if (const auto* port = std::get_if<mad::PortInfoGet>(&request.query)) {
      const auto* dr = std::get_if<DrPath>(&port->target);
      const bool local = dr != nullptr && dr->hops.empty();
      inner_.submit(std::move(request), [this, sent, local, done = std::move(done)](Result<mad::AnyReply> r) {
        const auto* reply = r.ok() ? std::get_if<mad::PortInfoReply>(&r.value()) : nullptr;
        if (reply && local && tap_.local_port) tap_.local_port(reply->info, sent, q_.now());
        done(std::move(r));
      });
      return;
    }
    inner_.submit(std::move(request), std::move(done));
  }

 private:
  mad::MadTransport& inner_;
  EventQueue& q_;
  const Cluster::Tap& tap_;
};

}  // namespace

struct Cluster::Head {
  NodeId node = 0;
  Tap tap;
  std::unique_ptr<TapTransport> tapped;
  // smhad's configuration of this head, from ClusterParams; cfg is mapped from
  // it as smhad maps its own (lib/head), plus what has no configuration key.
  config::Config config;
  agent::AgentConfig cfg;
  head::NoHooks hooks;
  int spawns_before = 0;  // spawns of earlier smhad runs
  // Respawns wait for the engine: when it last asked for a start, and when
  // the OpenSM it had went down unasked (nullopt: none since the last spawn).
  TimePoint last_start_call{};
  std::optional<TimePoint> down_since;
  int last_pid = 0;
  std::unique_ptr<head::Head> smhad;  // the head smhad runs (lib/head), while smhad is up
  Sink sink;
  std::vector<HeadRecord> records;
};

Cluster::Cluster(std::uint64_t seed, ClusterParams params)
    : params_(params), fabric_(seed, params.fabric) {
  // The supervisor and the engine log as in smhad ("osm", "sm"); thousands of
  // simulated crashes must not flood the test output.
  for (const char* name : {"osm", "sm"}) {
    auto l = spdlog::get(name);
    if (!l) {
      l = spdlog::default_logger()->clone(name);
      spdlog::register_logger(l);
    }
    l->set_level(spdlog::level::off);
  }
  const int n = std::max(2, params_.heads);
  // In a chain of switches the first head is on the first switch, the last
  // head on the last one, and any between spread over the chain.
  const int last_switch = std::max(1, params_.fabric.switches) - 1;
  for (int i = 0; i < n; ++i) {
    auto h = std::make_unique<Head>();
    h->node = fabric_.add_node("head" + std::string(i < 9 ? "0" : "") + std::to_string(i + 1),
                               Guid{0x0002c90300000010ULL + 0x10ULL * static_cast<unsigned>(i)},
                               Lid{static_cast<std::uint16_t>(i + 1)}, i * last_switch / (n - 1));
    h->sink.out = &h->records;
    heads_.push_back(std::move(h));
  }
  observer_ = fabric_.add_node("node01", Guid{0x0002c90300000900ULL}, Lid{100});
  // What each head's OpenSM logs reaches its smhad as OpenSM's log file
  // reaches smhad's log follower: parsed by the same opensm::parse_log_event.
  fabric_.set_opensm_log([this](NodeId n, std::string_view line) {
    for (auto& h : heads_)
      if (h->node == n && h->smhad)
        if (auto e = opensm::parse_log_event(line)) h->smhad->opensm_logged(*e);
  });
  auto configured = [&](int k) {
    return k < static_cast<int>(params_.priorities.size()) ? params_.priorities[k] : params_.base_priority;
  };
  for (int i = 0; i < n; ++i) {
    auto& h = *heads_[i];
    // The head's smha.yaml, as smhad would load it.
    config::Config& c = h.config;
    c.source_path = "sim::ClusterParams";
    c.node_name = fabric_.name(h.node);
    c.port.port_guid = fabric_.guid(h.node);
    c.sm_priority = configured(i);
    c.failover.poll_interval = in_config_unit<milliseconds>(params_.poll_interval, "poll_interval");
    c.failover.misses_before_takeover = params_.misses;
    c.failover.failback =
        params_.failback == sm::FailbackMode::Preempt ? config::FailbackPolicy::Preempt : config::FailbackPolicy::Sticky;
    c.failover.preempt_holddown = in_config_unit<seconds>(params_.preempt_hold_down, "preempt_hold_down");
    c.opensm.binary = "/usr/sbin/opensm";
    c.opensm.conf_path = "/etc/opensm/opensm.conf";
    c.opensm.log_file.clear();  // the simulated OpenSM writes no log file (its lines reach the head directly)
    c.state_dir = "/var/lib/smha";  // the pidfile: /var/lib/smha/opensm.pid
    const auto& sv = params_.supervision;
    c.opensm.restart_backoff_initial = in_config_unit<milliseconds>(sv.backoff_initial, "supervision.backoff_initial");
    c.opensm.restart_backoff_max = in_config_unit<seconds>(sv.backoff_max, "supervision.backoff_max");
    c.opensm.restart_stable = in_config_unit<seconds>(sv.stable_uptime, "supervision.stable_uptime");
    c.opensm.crash_loop_count = sv.crash_loop_count;
    c.opensm.crash_loop_window = in_config_unit<seconds>(sv.crash_loop_window, "supervision.crash_loop_window");
    c.opensm.crash_loop_retry = in_config_unit<seconds>(sv.crash_loop_retry, "supervision.crash_loop_retry");
    c.opensm.crash_loop_retry_no_master =
        in_config_unit<seconds>(sv.crash_loop_retry_no_master, "supervision.crash_loop_retry_no_master");
    for (int j = 0; j < n; ++j) {
      if (j == i) continue;
      const NodeId o = heads_[j]->node;
      config::Peer peer{fabric_.name(o), fabric_.guid(o), std::nullopt, std::nullopt, configured(j), {}, 0};
      // A wrong lid override (discovery still finds the peer by its GUID).
      if (params_.peer_addressing == PeerAddressing::GuidWrongLid)
        peer.lid = Lid{static_cast<std::uint16_t>(fabric_.lid(o).value + 50)};
      c.peers.push_back(std::move(peer));
    }

    // The policy with its clamps and, addressed by GUID, the peers: smhad's mapping.
    auto mapped = head::map_config(c, fabric_.guid(h.node));
    if (!mapped) throw std::invalid_argument(mapped.error().message);
    h.cfg = std::move(mapped).value();
    // What has no configuration key.
    h.cfg.policy.takeover_bound = params_.takeover_bound;
    h.cfg.policy.start_grace = params_.start_grace;
    h.cfg.census = params_.census;
    // The legacy addressings: a peer polled only at a configured LID (and DR
    // path), or not at all, without discovery. smhad's configuration cannot
    // say that any more (every peer is found by its port GUID), so these heads
    // get their peer addresses here, not from map_config.
    const auto legacy = params_.peer_addressing;
    if (legacy == PeerAddressing::Lid || legacy == PeerAddressing::Unaddressed ||
        legacy == PeerAddressing::StaleLid) {
      h.cfg.peers.clear();
      for (int j = 0; j < n; ++j) {
        if (j == i) continue;
        const NodeId o = heads_[j]->node;
        if (legacy == PeerAddressing::Lid)
          h.cfg.peers.push_back(agent::PeerAddress{fabric_.guid(o), fabric_.lid(o), fabric_.dr_path(h.node, o)});
        else if (legacy == PeerAddressing::StaleLid)
          h.cfg.peers.push_back(agent::PeerAddress{
              fabric_.guid(o), Lid{static_cast<std::uint16_t>(fabric_.lid(o).value + 50)}, std::nullopt});
      }
    }
  }
  if (params_.observer_interval > Duration{0}) observe_loop();
}

Cluster::~Cluster() {
  alive_.reset();
  for (auto& h : heads_) h->smhad.reset();
}

TimePoint Cluster::now() const { return fabric_.queue().now(); }
NodeId Cluster::head(int i) const { return heads_[i]->node; }
bool Cluster::smhad_up(int i) const { return heads_[i]->smhad != nullptr; }
agent::Agent* Cluster::agent(int i) { return heads_[i]->smhad ? &heads_[i]->smhad->agent() : nullptr; }
fabric::Watchers* Cluster::watchers(int i) { return heads_[i]->smhad ? &heads_[i]->smhad->watchers() : nullptr; }
head::Head* Cluster::smhad(int i) { return heads_[i]->smhad.get(); }
const opensm::SupervisorStatus* Cluster::supervisor(int i) const {
  const auto& h = heads_[i]->smhad;
  return h ? h->opensm() : nullptr;
}
int Cluster::opensm_spawns(int i) const {
  const auto& h = *heads_[i];
  const auto* st = supervisor(i);
  return h.spawns_before + (st ? st->spawns : 0);
}
const std::vector<HeadRecord>& Cluster::records(int i) const { return heads_[i]->records; }

int Cluster::head_of(Guid g) const {
  for (std::size_t i = 0; i < heads_.size(); ++i)
    if (fabric_.guid(heads_[i]->node) == g) return static_cast<int>(i);
  return -1;
}

namespace {

// The keys the simulated OpenSM models, as the opensm.conf smhad renders sets
// them (`rendered`: simulated_opensm's parse of it), not a mapping of the sim's own.
OpensmKeys modelled_keys(const opensm::ConfMap& rendered) {
  OpensmKeys k;
  auto take = [&](const char* key, std::uint32_t& out) {
    if (auto it = rendered.find(key); it != rendered.end()) out = static_cast<std::uint32_t>(std::stoul(it->second));
  };
  take("sminfo_polling_timeout", k.sminfo_polling_timeout_ms);
  take("polling_retry_number", k.polling_retry_number);
  take("sweep_interval", k.sweep_interval_s);
  return k;
}

}  // namespace

OpensmKeys Cluster::opensm_keys(int i) const {
  if (params_.opensm_conf) return *params_.opensm_conf;
  return modelled_keys(simulated_opensm(heads_[i]->config).defaults);
}

void Cluster::start_smhad(int i) {
  auto& h = *heads_[i];
  if (h.smhad) return;
  // The head smhad runs (lib/head: the plan and the Head, as lib/service's
  // Daemon builds them), over the node's simulated processes, files and port;
  // procfs is the fabric's view of the node.
  const NodeId node = h.node;
  Fabric* f = &fabric_;
  const opensm::Capabilities caps = simulated_opensm(h.config);
  auto planned = head::make_plan(h.config, h.cfg, head::PlanInputs{fabric_.guid(node), false, caps}, fabric_.fs(node));
  if (!planned) throw std::invalid_argument(planned.error().message);
  head::Plan plan = std::move(planned).value();
  // What follows from the OpenSM a head runs: the simulated one routes with
  // minhop, and its log lines reach the head directly (Fabric::set_opensm_log).
  plan.watchers.routing_engines = {"minhop"};
  plan.watchers.opensm_log = true;
  head::Plan::Opensm& osm = *plan.opensm;
  // The simulated OpenSM reads only the keys it models.
  osm.render = [keys = params_.opensm_conf.value_or(modelled_keys(caps.defaults))](
                   std::uint8_t prio) -> Result<std::string> {
    return render_opensm_keys(keys, prio);
  };
  // The sim has never given OpenSM an environment or a working directory (the
  // simulated runner runs only path and argv); kept so.
  osm.spec.env.clear();
  osm.spec.cwd.clear();
  // What smhad leaves to realpath(spec.path) and the process hooks: the
  // simulated node's.
  opensm::SupervisorOptions& so = osm.supervisor;
  so.expected_exe = h.config.opensm.binary;
  so.identify = [f, node](int pid) -> Result<opensm::ProcessIdentity> {
    auto p = f->process(node);
    if (!p || p->pid != pid) return make_error(Errc::NotFound, "no process " + std::to_string(pid));
    return opensm::ProcessIdentity{p->pid, p->start_time, p->exe};
  };
  so.age = [f](const opensm::ProcessIdentity& id) -> Result<std::chrono::nanoseconds> {
    return f->queue().now().time_since_epoch() - Duration(static_cast<Duration::rep>(id.start_time));
  };
  so.cmdline = [f, node](int pid) -> Result<std::vector<std::string>> {
    auto p = f->process(node);
    if (!p || p->pid != pid) return make_error(Errc::NotFound, "no process " + std::to_string(pid));
    return p->argv;
  };
  so.find_bound = [f, node](std::uint64_t g) {
    std::vector<opensm::BoundOpensm> out;
    if (auto p = f->process(node); p && f->guid(node).value == g) out.push_back({p->pid, p->argv, p->exe});
    return out;
  };
  // One per head for the cluster's life: the fabric may still answer a query
  // of an smhad that crashed.
  if (!h.tapped) h.tapped = std::make_unique<TapTransport>(fabric_.transport(node), fabric_.queue(), h.tap);
  Head* hp = &h;
  auto opensm_changed = [this, hp](const opensm::SupervisorStatus& st) {
    // opensm_failed reaches the records from the head's OpensmWatch, through
    // the tap (h.sink) like every other alarm.
    const bool failed = st.state == opensm::SupervisorState::Failed;
    // An OpenSM that went down unasked comes back only after the engine asked
    // for it again, and not before the backoff (the supervisor's
    // respawn_on_request; a master's must not race the peer taking over).
    const bool down = st.state == opensm::SupervisorState::Backoff || failed;
    if (down && !hp->down_since) hp->down_since = now();
    if (st.state == opensm::SupervisorState::Running && st.pid != 0 && st.pid != hp->last_pid) {
      if (hp->down_since && !st.adopted &&
          (hp->last_start_call < *hp->down_since ||
           now() - *hp->down_since < params_.supervision.backoff_initial))
        hp->records.push_back({now(), "error", "respawn_without_engine",
                               "pid " + std::to_string(st.pid) + " spawned " +
                                   std::to_string(to_ms(now() - *hp->down_since)) + " ms after the exit"});
      hp->down_since.reset();
    }
    if (st.pid != 0) hp->last_pid = st.pid;
  };
  head::HeadSeams seams{fabric_.queue(),
                        fabric_.queue().clock(),
                        fabric_.fs(node),
                        *h.tapped,
                        1,  // the fabric answers PortInfo from its link model
                        &fabric_.runner(node),
                        h.hooks,
                        [f, node](int) {
                          const auto sm = f->sm(node);
                          return sm && sm->stopped;
                        },
                        [] {},
                        &h.sink,
                        [this, hp](agent::OpensmControl& inner) -> std::unique_ptr<agent::OpensmControl> {
                          return std::make_unique<StartWatch>(inner, fabric_.queue(), hp->last_start_call);
                        },
                        opensm_changed};
  head::HeadOptions options;
  options.own_guid = fabric_.guid(node);
  options.caps = caps;
  options.version = "sim";
  // The seeded scenarios keep their MAD sequences: no drift ServiceRecords.
  options.drift = false;
  h.smhad = std::make_unique<head::Head>(h.config, std::move(plan), std::move(options), std::move(seams));
  h.smhad->start();
}

void Cluster::set_tap(int i, Tap tap) { heads_[i]->tap = std::move(tap); }

void Cluster::start_all_smhad() {
  for (int i = 0; i < heads(); ++i) start_smhad(i);
}

void Cluster::crash_smhad(int i) {
  auto& h = *heads_[i];
  if (const auto* st = supervisor(i)) h.spawns_before += st->spawns;
  h.smhad.reset();
  h.down_since.reset();
  h.last_pid = 0;
}

int Cluster::count_events(int i, const std::string& kind) const {
  return static_cast<int>(std::count_if(heads_[i]->records.begin(), heads_[i]->records.end(),
                                        [&](const HeadRecord& r) { return r.kind == kind; }));
}

void Cluster::track() {
  const bool dual = fabric_.active_masters().size() >= 2;
  if (dual && !dual_since_) dual_since_ = now();
  if (!dual && dual_since_) {
    const auto d = now() - *dual_since_;
    dual_total_ += d;
    dual_longest_ = std::max(dual_longest_, d);
    dual_since_.reset();
  }
}

void Cluster::run_for(Duration d) {
  run_until([] { return false; }, d);
}

bool Cluster::run_until(const std::function<bool()>& pred, Duration limit) {
  return queue().run_until(now() + limit, [&] {
    track();
    return pred();
  });
}

void Cluster::observe_loop() {
  struct Sweep {
    int outstanding = 0;
    std::vector<Guid> masters;
  };
  auto sweep = std::make_shared<Sweep>();
  sweep->outstanding = heads();
  std::weak_ptr<int> alive = alive_;
  mad::RequestOptions o;
  o.timeout = params_.observer_interval;
  o.retries = 0;
  for (const auto& h : heads_) {
    fabric_.transport(observer_).get_sminfo(
        fabric_.lid(h->node), o, [this, alive, sweep](Result<mad::SmInfoReply> r) {
          if (alive.expired()) return;
          if (r.ok() && r->info.state == SmState::Master) sweep->masters.push_back(r->info.guid);
          if (--sweep->outstanding > 0) return;
          std::sort(sweep->masters.begin(), sweep->masters.end());
          if (observed_log_.empty() || observed_log_.back().second != sweep->masters)
            observed_log_.emplace_back(now(), sweep->masters);
          observed_ = sweep->masters;
        });
  }
  queue().schedule_in(params_.observer_interval, [this, alive] {
    if (!alive.expired()) observe_loop();
  });
}

std::optional<TimePoint> Cluster::first_new_master_seen(TimePoint since, std::optional<Guid> old) const {
  for (const auto& [at, masters] : observed_log_) {
    if (at < since) continue;
    for (const auto& g : masters)
      if (!old || g != *old) return at;
  }
  return std::nullopt;
}

}  // namespace smha::sim
