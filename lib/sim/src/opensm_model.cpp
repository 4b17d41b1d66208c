// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// The simulated OpenSM (its behaviour is listed in smha/sim/fabric.hpp): its
// states and sweeps, its polls of the master, its answers to SubnSet(SMInfo),
// the opensm.conf keys it reads and its process (spawn, signals, exit).
// Calibrated on real OpenSM 3.3.x under ibsim (DESIGN.md's measurements);
// tests/sim/sim/test_opensm_model.cpp pins that behaviour.
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <sstream>

#include "fabric_impl.hpp"

namespace smha::sim {

namespace detail {

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

}  // namespace detail

std::string render_opensm_keys(const OpensmKeys& keys, std::uint8_t priority) {
  char key[32];
  std::snprintf(key, sizeof key, "0x%016llx", static_cast<unsigned long long>(keys.sm_key));
  std::string out = "# Rendered by smhad. Do not edit: changes are overwritten.\n";
  out += "sm_priority " + std::to_string(priority) + "\n";
  out += "sm_key " + std::string(key) + "\n";
  out += "sminfo_polling_timeout " + std::to_string(keys.sminfo_polling_timeout_ms) + "\n";
  out += "polling_retry_number " + std::to_string(keys.polling_retry_number) + "\n";
  out += "sweep_interval " + std::to_string(keys.sweep_interval_s) + "\n";
  out += "ignore_other_sm FALSE\n";
  return out;
}

using namespace detail;

// An SM's own SMInfo query to another SM (its sweeps and polls), with OpenSM's
// transaction retries and no delay modelled. nullopt: no answer.
std::optional<SmInfo> Fabric::Impl::sm_query(Sm& from, NodeId to) {
  const auto& target = nodes[to]->sm;
  for (int i = 0; i < params.sm.transaction_attempts; ++i) {
    if (!path_ok(from.node, to) || !path_ok(to, from.node)) continue;
    if (!answering(target)) return std::nullopt;
    ++target->act_count;
    from.remote[target->guid] = info(*target);
    return info(*target);
  }
  return std::nullopt;
}

void Fabric::Impl::forget_gone_sms(Sm& sm) {
  for (auto it = sm.remote.begin(); it != sm.remote.end();)
    it = node_of(it->first) ? std::next(it) : sm.remote.erase(it);
}

bool Fabric::Impl::answering(const SmPtr& sm) const {
  return sm && sm->alive && !sm->stopped && q.now() >= sm->answers_from;
}

SmInfo Fabric::Impl::info(const Sm& sm) {
  SmInfo i;
  i.guid = sm.guid;
  i.sm_key = sm.conf.sm_key;
  i.act_count = sm.act_count;
  i.priority = sm.conf.priority;
  i.state = sm.state;
  return i;
}

bool Fabric::Impl::higher(const SmInfo& a, const Sm& b) {
  return outranks(a.priority, a.guid, b.conf.priority, b.guid);
}

void Fabric::Impl::sm_timer(const SmPtr& sm, Duration d, std::function<void()> fn) {
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

// A frozen SM reachable from `sm`: the sweep's query to it waits for its timeouts.
bool Fabric::Impl::frozen_sm_in_reach(const Sm& sm) const {
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const auto& o = nodes[i]->sm;
    if (static_cast<NodeId>(i) == sm.node || !o || !o->alive || !o->stopped) continue;
    if (nodes[sm.node]->link && nodes[i]->link) return true;
  }
  return false;
}

void Fabric::Impl::begin_discovery(const SmPtr& sm) {
  if (sm->state != SmState::Discovering) log_line(*sm, "Entering DISCOVERING state");
  sm->state = SmState::Discovering;
  const auto g = ++sm->gen;
  discovery_check(sm, g, true);
}

void Fabric::Impl::discovery_check(const SmPtr& sm, std::uint64_t g, bool first) {
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
std::uint32_t Fabric::Impl::sweep_smps(std::uint32_t per_node) const {
  return per_node * static_cast<std::uint32_t>(nodes.size()) + 36;
}

void Fabric::Impl::enter_standby(const SmPtr& sm, Guid master) {
  if (sm->state != SmState::Standby) log_line(*sm, "Entering STANDBY state");
  sm->state = SmState::Standby;
  sm->master_guid = master;
  sm->retries = 0;
  const auto g = ++sm->gen;
  poll_master(sm, g);
}

std::optional<NodeId> Fabric::Impl::node_of(Guid g) const {
  for (std::size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i]->sm && nodes[i]->sm->guid == g) return static_cast<NodeId>(i);
  return std::nullopt;
}

// osm_sm_state_mgr_polling_callback: retry_number > polling_retry_number -> POLLING_TIMEOUT.
void Fabric::Impl::poll_master(const SmPtr& sm, std::uint64_t g) {
  if (sm->gen != g || sm->state != SmState::Standby) return;
  if (sm->retries > sm->conf.retry_number) {
    begin_discovery(sm);
    return;
  }
  std::optional<SmInfo> r;
  if (auto n = node_of(sm->master_guid)) r = sm_query(*sm, *n);
  ++sm->act_count;
  // osm_sm_state_mgr_signal_master_is_alive, from smi_rcv_process_get_sm: any
  // MASTER answer, or the polled SM answering STANDBY while still above us (a
  // master that handed over to another SM: we keep polling it).
  if (r && r->state == SmState::Master) {
    sm->retries = 0;
    if (higher(*r, *sm) == false && r->priority < sm->conf.priority) trap144(*sm, r->guid);
  } else if (r && r->state == SmState::Standby && r->guid == sm->master_guid && higher(*r, *sm)) {
    sm->retries = 0;
  } else {
    ++sm->retries;
  }
  sm_timer(sm, sm->conf.poll_timeout, [this, sm, g] { poll_master(sm, g); });
}

void Fabric::Impl::enter_master(const SmPtr& sm) {
  if (sm->state != SmState::Master) log_line(*sm, "Entering MASTER state");
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
void Fabric::Impl::point_ports_at(const Sm& sm) {
  for (std::size_t i = 0; i < nodes.size(); ++i)
    if (nodes[sm.node]->link && nodes[i]->link) nodes[i]->master_sm_lid = nodes[sm.node]->lid;
}

void Fabric::Impl::light_sweep_loop(const SmPtr& sm, std::uint64_t g) {
  sm_timer(sm, sm->conf.sweep_interval, [this, sm, g] {
    if (sm->gen != g || sm->state != SmState::Master) return;
    light_sweep(sm);
    light_sweep_loop(sm, g);
  });
}

// Light sweep: query known SMs; a higher one (or another master) forces a heavy
// sweep; a lower master gets trap 144 (it then hands over to us).
void Fabric::Impl::light_sweep(const SmPtr& sm) {
  if (!nodes[sm->node]->link) {
    begin_discovery(sm);  // state_mgr_is_sm_port_down -> DISCOVER
    return;
  }
  bool heavy = false;
  forget_gone_sms(*sm);
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (static_cast<NodeId>(i) == sm->node || !nodes[i]->sm) continue;
    auto r = sm_query(*sm, static_cast<NodeId>(i));
    if (!r || r->sm_key != sm->conf.sm_key) continue;
    if (r->state == SmState::Master && !higher(*r, *sm)) trap144(*sm, r->guid);
    if ((r->state == SmState::Master || r->state == SmState::Standby) && higher(*r, *sm)) heavy = true;
  }
  if (heavy) heavy_sweep(sm);
}

void Fabric::Impl::trap144(const Sm& from, Guid to) {
  auto n = node_of(to);
  if (!n) return;
  auto target = nodes[*n]->sm;
  if (!path_ok(from.node, *n) || !answering(target) || target->state != SmState::Master) return;
  heavy_sweep(target);
}

// Heavy sweep on a master; at its end, hand over to the highest SM if it outranks us.
void Fabric::Impl::heavy_sweep(const SmPtr& sm) {
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
    forget_gone_sms(*sm);
    std::optional<std::pair<NodeId, SmInfo>> best;
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      if (static_cast<NodeId>(i) == sm->node || !nodes[i]->sm) continue;
      auto r = sm_query(*sm, static_cast<NodeId>(i));
      if (!r || r->sm_key != sm->conf.sm_key || r->state == SmState::NotActive) continue;
      if (!higher(*r, *sm)) continue;
      if (!best || outranks(r->priority, r->guid, best->second.priority, best->second.guid))
        best = std::make_pair(static_cast<NodeId>(i), *r);
    }
    if (!best) {
      log_line(*sm, "osm_ucast_mgr_process: minhop tables configured on all switches");
      log_line(*sm, "SUBNET UP");
      return;
    }
    // state_mgr_send_handover: SubnSet(SMInfo, HANDOVER); then HANDOVER_SENT -> STANDBY.
    auto target = nodes[best->first]->sm;
    if (!path_ok(sm->node, best->first) || !answering(target)) return;
    ++handovers;
    receive_handover(target);
    enter_standby(sm, target->guid);
  });
}

void Fabric::Impl::receive_handover(const SmPtr& sm) {
  switch (sm->state) {
    case SmState::Standby: enter_master(sm); break;
    case SmState::Master: heavy_sweep(sm); break;     // forced first-time sweep; stays MASTER
    case SmState::Discovering: break;                  // just sweeps
    default: break;
  }
}

// SubnSet(SMInfo) as osm_sminfo_rcv.c handles it. Returns the response payload
// (pre-transition) or a non-zero status.
std::variant<SmInfo, std::uint16_t> Fabric::Impl::handle_set(const SmPtr& sm, SmInfoModifier mod,
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

Result<int> Fabric::Impl::spawn(NodeId n, const os::ProcessSpec& spec, os::ProcessRunner::ExitHandler on_exit) {
  const auto slash = spec.path.find_last_of('/');
  const std::string base = slash == std::string::npos ? spec.path : spec.path.substr(slash + 1);
  if (base != "opensm") return make_error(Errc::Unsupported, spec.path + ": the simulated fabric runs only opensm");
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
  sm->exe = spec.path;
  sm->argv = spec.argv;
  sm->started = q.now();
  sm->answers_from = q.now() + params.sm.startup;
  node.sm = sm;
  begin_discovery(sm);
  return sm->pid;
}

void Fabric::Impl::end(const SmPtr& sm, bool signaled, int status) {
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
void Fabric::Impl::reload(const SmPtr& sm, bool hup) {
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

Status Fabric::Impl::kill(NodeId n, int pid, int sig) {
  auto sm = nodes[n]->sm;
  if (!sm || sm->pid != pid) return make_error(Errc::NotFound, "no process " + std::to_string(pid));
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
    default: return make_error(Errc::Unsupported, "signal " + std::to_string(sig) + " not simulated");
  }
  return Status::Ok();
}

}  // namespace smha::sim
