// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// The simulated fabric: nodes, links and switches, the MAD transport and the
// SMAs' answers (PortInfo, NodeInfo, NodeDescription). The simulated OpenSM
// that SMInfo MADs reach is in opensm_model.cpp.
#include "smha/sim/fabric.hpp"

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <type_traits>
#include <variant>

#include "fabric_impl.hpp"
#include "smha/sim/topology.hpp"

namespace smha::sim {

using namespace detail;

void Fabric::Impl::Transport::submit(mad::Request request, mad::ReplyCallback done) {
  const mad::RequestOptions& o = request.opts;
  std::visit(
      [&](const auto& q) {
        using Q = std::decay_t<decltype(q)>;
        if constexpr (std::is_same_v<Q, mad::SmInfoGet>) {
          f->send(self, q.target, std::nullopt, SmInfo{}, o, std::move(done));
        } else if constexpr (std::is_same_v<Q, mad::SmInfoSet>) {
          f->send(self, q.target, q.mod, q.payload, o, std::move(done));
        } else if constexpr (std::is_same_v<Q, mad::PortInfoGet>) {
          f->send_port_info(self, q.target, q.port, o, std::move(done));
        } else if constexpr (std::is_same_v<Q, mad::NodeInfoGet>) {
          f->send_node_read(self, q.target, o, [done = std::move(done)](Result<NodeAnswer> r) {
            if (!r) return done(r.error());
            done(mad::NodeInfoReply{std::get<mad::NodeInfo>(r->value), r->rtt, r->attempts});
          });
        } else if constexpr (std::is_same_v<Q, mad::NodeDescriptionGet>) {
          f->send_node_read(
              self, q.target, o,
              [done = std::move(done)](Result<NodeAnswer> r) {
                if (!r) return done(r.error());
                done(mad::NodeDescriptionReply{std::get<std::string>(r->value), r->rtt, r->attempts});
              },
              true);
        } else if constexpr (std::is_same_v<Q, mad::SmInfoRecordsGet>) {
          f->send_sa(self, q.sa_lid, o, std::move(done));
        } else if constexpr (std::is_same_v<Q, mad::IsSmPortRecordsGet>) {
          f->send_pir(self, q.sa_lid, o, std::move(done));
        } else if constexpr (std::is_same_v<Q, mad::ServiceRecordSet>) {
          f->send_sr(self, q.sa_lid, mad::encode_service_record_set(0, q.record), mad::kMethodGetResp, o,
                     std::move(done));
        } else if constexpr (std::is_same_v<Q, mad::ServiceRecordGet>) {
          f->send_sr(self, q.sa_lid, mad::encode_service_record_get(0, q.id, q.gid, q.name), mad::kMethodGetResp, o,
                     std::move(done));
        } else if constexpr (std::is_same_v<Q, mad::ServiceRecordDelete>) {
          f->send_sr(self, q.sa_lid, mad::encode_service_record_delete(0, q.record), mad::kMethodDeleteResp, o,
                     std::move(done));
        } else if constexpr (std::is_same_v<Q, mad::PortCountersGet>) {
          // The simulated cluster models no PMA (TopologyTransport does): silence.
          f->q.schedule_in(o.timeout * (o.retries + 1), [done] { done(make_error(mad::kErrTimeout, "no PMA")); });
        } else if constexpr (std::is_same_v<Q, mad::LftTopGet> || std::is_same_v<Q, mad::LftBlockGet>) {
          // No routes either: the LFT of a fabric without routes, as TopologyTransport.
          f->send_node_read(self, q.target, o, [done = std::move(done)](Result<NodeAnswer> r) {
            if (!r) return done(r.error());
            const auto* ni = std::get_if<mad::NodeInfo>(&r->value);
            const mad::NodeType type = ni ? ni->type : mad::NodeType::Unknown;
            Result<mad::AnyReply> reply =
                std::is_same_v<Q, mad::LftTopGet> ? unrouted_lft_top(type) : unrouted_lft_block(type);
            if (reply.ok()) mad::set_round_trip(reply.value(), r->rtt, r->attempts);
            done(std::move(reply));
          });
        } else {
          static_assert(std::is_same_v<Q, mad::McMemberGet>, "a query the simulated fabric does not answer");
          // The simulated SA keeps no multicast groups: silence.
          f->q.schedule_in(o.timeout * (o.retries + 1), [done] { done(make_error(mad::kErrTimeout, "no SA groups")); });
        }
      },
      request.query);
}

void Fabric::Impl::finish(const std::shared_ptr<Req>& r, Result<mad::SmInfoReply> res) {
  if (r->finished) return;
  r->finished = true;
  auto done = std::move(r->done);
  done(std::move(res));
}

void Fabric::Impl::send(NodeId from, const mad::Target& t, std::optional<SmInfoModifier> mod,
          const SmInfo& payload, const mad::RequestOptions& o, mad::ReplyCallback done) {
  auto r = std::make_shared<Req>(Req{from, t, mod, payload, o, std::move(done)});
  attempt(r);
}

void Fabric::Impl::attempt(const std::shared_ptr<Req>& r) {
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
          finish(r, mad::mad_status_error(*st, std::string("MAD status ") + buf));
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

void Fabric::Impl::send_port_info(NodeId from, const mad::Target& t, std::uint8_t port,
                    const mad::RequestOptions& o, mad::ReplyCallback done) {
  port_attempt(std::make_shared<PortReq>(PortReq{from, t, port, o, std::move(done)}));
}

void Fabric::Impl::finish_port(const std::shared_ptr<PortReq>& r, Result<mad::PortInfoReply> res) {
  if (r->finished) return;
  r->finished = true;
  auto done = std::move(r->done);
  done(std::move(res));
}

// A switch: DR path {1} from any node is its own switch (the only one
// without a chain). Port switch_port(n) is node n's cable; PortInfo of it
// shows that node's link state; a chain's ports 1 and 2 go to the
// neighbouring switches (Down at the ends of the chain).
void Fabric::Impl::switch_port_attempt(const std::shared_ptr<PortReq>& r, int a, const End& sw) {
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
  q.schedule_in(2 * params.hop_delay * cables_to_switch(r->from, sw.id),
                [this, r, a, answer] { reply_port(r, a, answer); });
}

// The answer of attempt `a` reaches the requester: the PortInfo, or a bad
// modifier status when the port does not exist.
void Fabric::Impl::reply_port(const std::shared_ptr<PortReq>& r, int a, const std::optional<mad::PortInfo>& answer) {
  if (r->finished || r->attempt != a) return;
  if (!answer) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "0x%04x", kStatusBadModifier);
    finish_port(r, mad::mad_status_error(kStatusBadModifier, std::string("MAD status ") + buf));
    return;
  }
  finish_port(r, mad::PortInfoReply{*answer, q.now() - r->sent, a});
}

void Fabric::Impl::port_attempt(const std::shared_ptr<PortReq>& r) {
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

void Fabric::Impl::send_node_read(NodeId from, const mad::Target& t, const mad::RequestOptions& o,
                    NodeDone done, bool description) {
  node_attempt(std::make_shared<NodeReq>(NodeReq{from, t, o, std::move(done), description}));
}

std::variant<mad::NodeInfo, std::string> Fabric::Impl::node_answer(NodeId to, bool description) const {
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

void Fabric::Impl::node_attempt(const std::shared_ptr<NodeReq>& r) {
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
      answer_in(2 * params.hop_delay * cables_to_switch(r->from, sw->id), v);
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

mad::MadTransport& Fabric::transport(NodeId n) { return impl_->nodes[n]->transport; }
os::ProcessRunner& Fabric::runner(NodeId n) { return impl_->nodes[n]->runner; }
os::FileSystem& Fabric::fs(NodeId n) { return impl_->nodes[n]->fs; }

std::optional<Fabric::SmView> Fabric::sm(NodeId n) const {
  const auto& sm = impl_->nodes[n]->sm;
  if (!sm) return std::nullopt;
  return SmView{sm->pid, sm->guid, sm->state, sm->conf.priority, sm->stopped, sm->act_count};
}

std::optional<Fabric::ProcessView> Fabric::process(NodeId n) const {
  const auto& sm = impl_->nodes[n]->sm;
  if (!sm) return std::nullopt;
  return ProcessView{sm->pid, static_cast<std::uint64_t>(sm->started.time_since_epoch().count()), sm->exe,
                     sm->argv};
}

// ---- SA (see fabric_impl.hpp) ------------------------------------------------

void Fabric::Impl::finish_sa(const std::shared_ptr<SaReq>& r, Result<mad::SmInfoRecordsReply> res) {
  if (r->finished) return;
  r->finished = true;
  auto done = std::move(r->done);
  done(std::move(res));
}

Result<mad::SmInfoRecordTable> Fabric::Impl::sa_answer(NodeId to) {
  const auto& sm = nodes[to]->sm;
  if (!sm || !sm->alive) return mad::mad_status_error(0x000c, "SA status 0x000c");
  if (sm->state != SmState::Master) return mad::mad_status_error(0x0001, "SA status 0x0001: busy");
  std::vector<mad::SmInfoRecord> records;
  SmInfo own = info(*sm);
  own.sm_key = 0;
  records.push_back({nodes[to]->lid, own});
  for (const auto& [g, i] : sm->remote) {
    auto n = node_of(g);
    if (!n) continue;
    SmInfo r = i;
    r.sm_key = 0;
    records.push_back({nodes[*n]->lid, r});
  }
  auto bytes = mad::encode_sminfo_record_table_response(0, records, false);
  return mad::decode_sminfo_record_table(bytes);
}

void Fabric::Impl::send_sa(NodeId from, Lid lid, const mad::RequestOptions& o, mad::ReplyCallback done) {
  sa_attempt(std::make_shared<SaReq>(SaReq{from, lid, o, std::move(done)}));
}

void Fabric::Impl::sa_attempt(const std::shared_ptr<SaReq>& r) {
  sa_round_trip(
      r, [this](NodeId to) { return sa_answer(to); },
      [this, r](const Result<mad::SmInfoRecordTable>& answer, int a) {
        if (!answer) return finish_sa(r, answer.error());
        finish_sa(r, mad::SmInfoRecordsReply{*answer, q.now() - r->sent, a});
      },
      [this, r] { sa_attempt(r); }, [this, r](Error e) { finish_sa(r, std::move(e)); });
}

// ---- SA PortInfoRecords of the IsSM ports (see fabric_impl.hpp) ------------------

void Fabric::Impl::finish_pir(const std::shared_ptr<PirReq>& r, Result<mad::PortInfoRecordsReply> res) {
  if (r->finished) return;
  r->finished = true;
  auto done = std::move(r->done);
  done(std::move(res));
}

// The master's SA: every port where an OpenSM process holds the port (IsSM,
// as a PortInfo read shows it), through the wire encoding and its decoder,
// whole (the kernel reassembles RMPP on hardware; ibsim's cut is the SMInfoRecord table's to model).
Result<mad::PortInfoRecordTable> Fabric::Impl::pir_answer(NodeId to) {
  const auto& sm = nodes[to]->sm;
  if (!sm || !sm->alive) return mad::mad_status_error(0x000c, "SA status 0x000c");
  if (sm->state != SmState::Master) return mad::mad_status_error(0x0001, "SA status 0x0001: busy");
  std::vector<mad::PortInfoRecord> records;
  for (const auto& n : nodes) {
    if (!n->sm || n->lid.value == 0) continue;
    mad::PortInfoRecord r;
    r.lid = n->lid;
    r.port_num = 1;
    r.info.lid = n->lid;
    r.info.sm_lid = n->master_sm_lid;
    r.info.local_port = 1;
    r.info.state = n->link ? mad::PortState::Active : mad::PortState::Down;
    r.info.capability_mask = mad::kCapIsSm;
    records.push_back(r);
  }
  auto bytes = mad::encode_port_info_record_table_response(0, records, true, false);
  return mad::decode_port_info_record_table(bytes);
}

void Fabric::Impl::send_pir(NodeId from, Lid lid, const mad::RequestOptions& o, mad::ReplyCallback done) {
  pir_attempt(std::make_shared<PirReq>(PirReq{from, lid, o, std::move(done)}));
}

void Fabric::Impl::pir_attempt(const std::shared_ptr<PirReq>& r) {
  sa_round_trip(
      r, [this](NodeId to) { return pir_answer(to); },
      [this, r](const Result<mad::PortInfoRecordTable>& answer, int a) {
        if (!answer) return finish_pir(r, answer.error());
        finish_pir(r, mad::PortInfoRecordsReply{*answer, q.now() - r->sent, a});
      },
      [this, r] { pir_attempt(r); }, [this, r](Error e) { finish_pir(r, std::move(e)); });
}

// ---- SA ServiceRecords (see fabric_impl.hpp) -----------------------------------

void Fabric::Impl::finish_sr(const std::shared_ptr<SrReq>& r, Result<mad::ServiceRecordReply> res) {
  if (r->finished) return;
  r->finished = true;
  auto done = std::move(r->done);
  done(std::move(res));
}

mad::MadBytes Fabric::Impl::sr_answer(NodeId to, const mad::MadBytes& request) {
  constexpr std::uint16_t kInvalid = 0x0200, kNoRecords = 0x0300, kTooMany = 0x0400;
  auto req = mad::decode_service_record_request(request);
  if (!req) return mad::encode_service_record_response(0, mad::kMethodGetResp, kInvalid, nullptr);
  const std::uint8_t resp = req->method == mad::kMethodDelete ? mad::kMethodDeleteResp : mad::kMethodGetResp;
  auto error = [&](std::uint16_t status) { return mad::encode_service_record_response(req->tid, resp, status, nullptr); };
  const auto& sm = nodes[to]->sm;
  if (!sm || !sm->alive) return error(kStatusUnsupported);
  if (sm->state != SmState::Master) return error(0x0001);  // busy (a model; smha asks the master)
  // Leases that ran out (OpenSM's lease timer, here at each access).
  const TimePoint now = q.now();
  std::erase_if(sm->services, [now](const auto& kv) { return kv.second.expires && *kv.second.expires <= now; });
  const mad::ServiceRecord& in = req->record;
  const auto rid = std::make_tuple(in.id, in.gid, in.pkey);
  const std::uint64_t mask = req->component_mask;
  if (req->method == mad::kMethodSet) {
    if ((mask & (mad::kSrMaskId | mad::kSrMaskGid)) != (mad::kSrMaskId | mad::kSrMaskGid)) return error(kInvalid);
    mad::ServiceRecord rec = in;
    if (!(mask & mad::kSrMaskLease)) rec.lease = 0xffffffffu;
    Sm::StoredService s{rec, std::nullopt};
    if (rec.lease != 0xffffffffu) s.expires = now + seconds(rec.lease);
    sm->services[rid] = s;
    if (!(mask & mad::kSrMaskPkey)) rec.pkey = 0xffff;  // the default P_Key in the answer
    rec.key = {};  // an untrusted request (SM_Key 0) sees ServiceKey 0
    return mad::encode_service_record_response(req->tid, resp, 0, &rec);
  }
  if (req->method == mad::kMethodDelete) {
    auto it = sm->services.find(rid);
    if (it == sm->services.end()) return error(kNoRecords);
    mad::ServiceRecord rec = it->second.record;
    sm->services.erase(it);
    rec.key = {};
    return mad::encode_service_record_response(req->tid, resp, 0, &rec);
  }
  std::vector<mad::ServiceRecord> found;
  for (const auto& [k, s] : sm->services) {
    const auto& r = s.record;
    if ((mask & mad::kSrMaskId) && r.id != in.id) continue;
    if ((mask & mad::kSrMaskGid) && r.gid != in.gid) continue;
    if ((mask & mad::kSrMaskPkey) && r.pkey != in.pkey) continue;
    if ((mask & mad::kSrMaskName) && r.name != in.name) continue;
    found.push_back(r);
  }
  if (found.empty()) return error(kNoRecords);
  if (found.size() > 1) return error(kTooMany);
  found[0].key = {};
  return mad::encode_service_record_response(req->tid, resp, 0, &found[0]);
}

void Fabric::Impl::send_sr(NodeId from, Lid lid, Result<mad::MadBytes> request, std::uint8_t answer_method,
                           const mad::RequestOptions& o, mad::ReplyCallback done) {
  if (!request) {
    q.schedule_in(Duration::zero(), [done = std::move(done), e = request.error()] { done(e); });
    return;
  }
  sr_attempt(std::make_shared<SrReq>(SrReq{from, lid, *request, answer_method, o, std::move(done)}));
}

void Fabric::Impl::sr_attempt(const std::shared_ptr<SrReq>& r) {
  sa_round_trip(
      r, [this, r](NodeId to) { return sr_answer(to, r->request); },
      [this, r](const mad::MadBytes& answer, int a) {
        auto rec = mad::decode_service_record_response(answer, r->answer_method);
        if (!rec) return finish_sr(r, rec.error());
        finish_sr(r, mad::ServiceRecordReply{*rec, q.now() - r->sent, a});
      },
      [this, r] { sr_attempt(r); }, [this, r](Error e) { finish_sr(r, std::move(e)); });
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
void Fabric::set_opensm_log(LogFn fn) { impl_->log_fn = std::move(fn); }
std::uint64_t Fabric::hups_absorbed() const { return impl_->hups_absorbed; }
void Fabric::absorb_next_hups(NodeId n, int count) {
  impl_->absorb_hups[static_cast<std::size_t>(n)] = count;
}

}  // namespace smha::sim
