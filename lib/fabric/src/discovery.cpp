// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/fabric/discovery.hpp"

#include <algorithm>
#include <deque>
#include <set>
#include <variant>

#include "smha/mad/smp.hpp"

namespace smha::fabric {

std::string searched_text(const DiscoveryResult& r) {
  return "searched " + std::to_string(r.nodes) + " nodes, " + std::to_string(r.ports) + " ports";
}

std::string not_found_text(const DiscoveryResult& r) { return "not found (" + searched_text(r) + ")"; }

namespace {

// One unit of work: a request not yet sent.
struct ReadNode {       // NodeInfo at `path`
  DrPath path;
  std::optional<Guid> parent;  // the node at `path` less its last hop, when known
};
struct CheckPort {      // PortInfo of switch port `port` at `path`: extend through it if up
  DrPath path;
  std::uint8_t port;
  Guid sw;              // the switch's node GUID
};
struct ReadSmPort {     // survey: PortInfo of a port, for its CapabilityMask
  SmPort port;          // all but lid and description filled in
};
struct ReadSmDesc {     // survey: NodeDescription of the node of sm_ports[index]
  std::size_t index;
};
struct ReadTarget {     // PortInfo (LID) or NodeDescription of a found target
  Guid target;
  bool description;
};
struct ReadLftTop {     // survey: SwitchInfo of a switch, for its LinearFDBTop
  Guid sw;
  DrPath path;
};
struct ReadLftBlock {   // survey: one LinearForwardingTable block of a switch
  Guid sw;
  std::uint16_t block;
};
using Work = std::variant<ReadNode, CheckPort, ReadTarget, ReadSmPort, ReadSmDesc, ReadLftTop, ReadLftBlock>;

}  // namespace

struct Discovery::Run {
  std::set<Guid> targets;
  Done done;
  TimePoint began{};
  DiscoveryResult result;
  std::deque<Work> queue;
  std::set<Guid> expanded;   // node GUIDs whose ports were looked at
  std::set<Guid> ca_ports;   // CA/router port GUIDs reached
  int in_flight = 0;
  int target_reads = 0;      // ReadTarget requests queued or outstanding
  bool finished = false;
  bool survey = false;       // survey(): the whole fabric, and IsSM of every port
  std::optional<std::pair<Guid, std::uint8_t>> own_neighbour;  // the node at our cable's end, its port
};

Discovery::Discovery(Scheduler& sched, mad::MadTransport& mad, DiscoveryLimits limits)
    : sched_(sched), mad_(mad), limits_(limits) {
  limits_.max_hops = std::clamp(limits_.max_hops, 0, static_cast<int>(kMaxDrHops));
  limits_.in_flight = std::max(1, limits_.in_flight);
}

Discovery::~Discovery() { cancel(); }

void Discovery::cancel() { run_.reset(); }

void Discovery::survey(Done done) { begin(true, {}, std::move(done), {}); }

void Discovery::start(std::vector<Guid> targets, Done done, std::vector<DrPath> hints) {
  begin(false, std::move(targets), std::move(done), std::move(hints));
}

void Discovery::begin(bool survey, std::vector<Guid> targets, Done done, std::vector<DrPath> hints) {
  cancel();
  auto run = std::make_shared<Run>();
  run->survey = survey;
  run->targets.insert(targets.begin(), targets.end());
  run->done = std::move(done);
  run->began = sched_.now();
  for (auto& h : hints)
    if (!h.hops.empty() && static_cast<int>(h.hops.size()) <= limits_.max_hops)
      run->queue.push_back(ReadNode{std::move(h), std::nullopt});
  run->queue.push_back(ReadNode{DrPath{}, std::nullopt});
  run_ = run;

  // Everything below runs on callbacks; `weak` drops them after cancel().
  std::weak_ptr<Run> weak = run;
  auto self = this;

  struct Ops {
    static bool all_found(const Run& r) {
      return !r.survey && r.result.found.size() == r.targets.size() && r.target_reads == 0;
    }
    static void finish(Discovery* d, const std::shared_ptr<Run>& r) {
      if (r->finished) return;
      r->finished = true;
      for (Guid g : r->targets)
        if (!r->result.found.count(g)) r->result.missing.push_back(g);
      r->result.ports += r->ca_ports.size();
      if (r->own_neighbour)
        for (auto* list : {&r->result.sm_ports, &r->result.probed})
          for (auto& p : *list)
            if (p.path.hops.empty() && p.node_type != mad::NodeType::Switch) {
              p.neighbour = r->own_neighbour->first;
              p.neighbour_port = r->own_neighbour->second;
            }
      r->result.elapsed = d->sched_.now() - r->began;
      if (d->run_ == r) d->run_.reset();
      auto cb = std::move(r->done);
      if (cb) cb(r->result);
    }
    static void count_failure(Run& r, const Error& e, const mad::RequestOptions& o) {
      if (e.code == mad::kErrTimeout) {
        ++r.result.timeouts;
        r.result.mads += static_cast<std::uint64_t>(o.retries) + 1;
      } else if (e.code == mad::kErrMadStatus) {
        ++r.result.refused;
        r.result.mads += 1;
      } else {
        ++r.result.malformed;
        r.result.mads += 1;
      }
    }
    // Sends queued work while there is room; finishes when nothing is left.
    static void pump(Discovery* d, const std::shared_ptr<Run>& r) {
      if (r->finished) return;
      while (r->in_flight < d->limits_.in_flight && !r->queue.empty()) {
        const bool searching = r->survey || r->result.found.size() < r->targets.size();
        Work w = std::move(r->queue.front());
        r->queue.pop_front();
        // Once every target is found only their reads are still worth a MAD.
        if (!searching && !std::holds_alternative<ReadTarget>(w)) continue;
        if (r->result.requests >= d->limits_.max_requests) {
          r->result.request_bound = true;
          if (std::holds_alternative<ReadTarget>(w)) --r->target_reads;
          r->queue.clear();
          break;
        }
        ++r->result.requests;
        ++r->in_flight;
        send(d, r, std::move(w));
      }
      if (r->in_flight == 0 && (r->queue.empty() || all_found(*r))) finish(d, r);
    }
    static void send(Discovery* d, const std::shared_ptr<Run>& r, Work w) {
      std::weak_ptr<Run> weak = r;
      const mad::RequestOptions o = d->limits_.request;
      // Every answer: ignored once the run is gone or over; otherwise a failure
      // is counted, a reply's MADs are counted and it goes to on_reply(run,
      // reply); then more work is sent.
      auto answered = [d, weak, o](auto on_reply, bool target_read = false) {
        return [d, weak, o, on_reply = std::move(on_reply), target_read](auto res) {
          auto r = weak.lock();
          if (!r || r->finished) return;
          --r->in_flight;
          if (target_read) --r->target_reads;
          if (!res) {
            count_failure(*r, res.error(), o);
          } else {
            r->result.mads += static_cast<std::uint64_t>(res->attempts);
            on_reply(*r, *res);
          }
          pump(d, r);
        };
      };
      if (auto* rn = std::get_if<ReadNode>(&w)) {
        DrPath path = rn->path;
        auto parent = rn->parent;
        d->mad_.get_node_info(path, o, answered([d, path, parent](Run& r, const mad::NodeInfoReply& reply) {
          on_node(d, r, path, parent, reply.info);
        }));
      } else if (auto* sp = std::get_if<ReadSmPort>(&w)) {
        SmPort port = std::move(sp->port);
        const DrPath path = port.path;
        const std::uint8_t num = port.port_num;
        d->mad_.get_port_info(path, num, o, answered([port](Run& r, const mad::PortInfoReply& reply) {
          SmPort p = port;
          p.lid = reply.info.lid;
          p.master_sm_lid = reply.info.sm_lid;
          p.state = reply.info.state;
          r.result.probed.push_back(p);
          if (p.node_type != mad::NodeType::Switch)
            r.result.link_ends.push_back(
                LinkEnd{p.node_guid, p.node_type, p.path, p.port_num, p.state, reply.info.link});
          if (mad::is_sm(reply.info)) {
            r.result.sm_ports.push_back(std::move(p));
            r.queue.push_front(ReadSmDesc{r.result.sm_ports.size() - 1});
          }
        }));
      } else if (auto* sd = std::get_if<ReadSmDesc>(&w)) {
        const std::size_t idx = sd->index;
        d->mad_.get_node_description(r->result.sm_ports.at(idx).path, o,
                                     answered([idx](Run& r, const mad::NodeDescriptionReply& reply) {
                                       auto& p = r.result.sm_ports.at(idx);
                                       p.description = reply.info;
                                       p.description_known = true;
                                     }));
      } else if (auto* lt = std::get_if<ReadLftTop>(&w)) {
        const Guid sw = lt->sw;
        DrPath path = lt->path;
        d->mad_.get_lft_top(path, o, answered([sw, path](Run& r, const mad::LftTopReply& reply) {
          // LinearFDBTop 0: nothing programmed (no unicast LID but 0).
          if (reply.info == 0) return;
          const std::uint16_t top = std::min<std::uint16_t>(reply.info, 0xbfff);
          SwitchLft& lft = r.result.lfts[sw];
          lft.path = path;
          lft.ports.assign(static_cast<std::size_t>(top) + 1, 0xff);
          lft.blocks = top / mad::kLftBlockSize + 1;
          for (std::uint16_t b = 0; b <= top / mad::kLftBlockSize; ++b) r.queue.push_back(ReadLftBlock{sw, b});
        }));
      } else if (auto* lb = std::get_if<ReadLftBlock>(&w)) {
        const Guid sw = lb->sw;
        const std::uint16_t block = lb->block;
        d->mad_.get_lft_block(r->result.lfts.at(sw).path, block, o,
                              answered([sw, block](Run& r, const mad::LftBlockReply& reply) {
                                SwitchLft& lft = r.result.lfts.at(sw);
                                const std::size_t first = static_cast<std::size_t>(block) * mad::kLftBlockSize;
                                for (std::size_t i = 0; i < reply.info.size() && first + i < lft.ports.size(); ++i)
                                  lft.ports[first + i] = reply.info[i];
                                ++lft.blocks_read;
                              }));
      } else if (auto* cp = std::get_if<CheckPort>(&w)) {
        DrPath path = cp->path;
        const std::uint8_t port = cp->port;
        const Guid sw = cp->sw;
        d->mad_.get_port_info(path, port, o, answered([path, port, sw](Run& r, const mad::PortInfoReply& reply) {
          if (r.survey)
            r.result.link_ends.push_back(
                LinkEnd{sw, mad::NodeType::Switch, path, port, reply.info.state, reply.info.link});
          if (reply.info.state != mad::PortState::Down) {
            DrPath next = path;
            next.hops.push_back(port);
            r.queue.push_back(ReadNode{std::move(next), sw});
          }
        }));
      } else {
        const auto& rt = std::get<ReadTarget>(w);
        const Guid g = rt.target;
        const ResolvedPort& rp = r->result.found.at(g);
        if (rt.description) {
          d->mad_.get_node_description(rp.path, o, answered([g](Run& r, const mad::NodeDescriptionReply& reply) {
            auto& p = r.result.found.at(g);
            p.description = reply.info;
            p.description_known = true;
          }, true));
        } else {
          d->mad_.get_port_info(rp.path, rp.port_num, o, answered([g](Run& r, const mad::PortInfoReply& reply) {
            auto& p = r.result.found.at(g);
            p.lid = reply.info.lid;
            p.lid_known = true;
          }, true));
        }
      }
    }
    static void on_node(Discovery* d, Run& r, const DrPath& path, const std::optional<Guid>& parent,
                        const mad::NodeInfo& ni) {
      const bool new_ca_port = ni.type != mad::NodeType::Switch && r.ca_ports.insert(ni.port_guid).second;
      if (r.survey) {
        if (parent && !path.hops.empty())
          r.result.cables.push_back(Cable{*parent, path.hops.back(), ni.node_guid, ni.local_port, ni.type, path});
        // Where our own cable ends: the node one hop out of our port.
        if (path.hops.size() == 1 && parent && !r.own_neighbour)
          r.own_neighbour = std::make_pair(ni.node_guid, ni.local_port);
        SmPort p;
        p.node_guid = ni.node_guid;
        p.node_type = ni.type;
        p.path = path;
        if (new_ca_port) {
          p.port_guid = ni.port_guid;
          p.port_num = ni.local_port;
          if (parent && !path.hops.empty()) {
            p.neighbour = *parent;
            p.neighbour_port = path.hops.back();
          }
          r.queue.push_back(ReadSmPort{std::move(p)});
        } else if (ni.type == mad::NodeType::Switch && !r.expanded.count(ni.node_guid)) {
          p.port_guid = ni.port_guid;  // port 0: an enhanced switch port 0 SM
          p.port_num = 0;
          r.queue.push_back(ReadSmPort{std::move(p)});
        }
      }
      if (r.targets.count(ni.port_guid) && !r.result.found.count(ni.port_guid)) {
        ResolvedPort p;
        p.port_guid = ni.port_guid;
        p.node_guid = ni.node_guid;
        p.node_type = ni.type;
        p.path = path;
        p.port_num = ni.local_port;
        r.result.found.emplace(ni.port_guid, std::move(p));
        // A found target's reads go first.
        r.queue.push_front(ReadTarget{ni.port_guid, true});
        r.queue.push_front(ReadTarget{ni.port_guid, false});
        r.target_reads += 2;
      }
      if (!r.expanded.insert(ni.node_guid).second) {
        ++r.result.revisits;
        return;
      }
      ++r.result.nodes;
      if (r.survey && d->limits_.forwarding_tables && ni.type == mad::NodeType::Switch)
        r.queue.push_back(ReadLftTop{ni.node_guid, path});
      const bool local = path.hops.empty();
      if (ni.type != mad::NodeType::Switch && !local) return;  // CAs and routers do not forward SMPs
      if (static_cast<int>(path.hops.size()) >= d->limits_.max_hops) {
        r.result.hop_bound = true;
        return;
      }
      if (ni.type != mad::NodeType::Switch) {
        // Our own CA: out of the port we are on (LocalPortNum of DR {}).
        if (ni.local_port != 0) r.queue.push_back(ReadNode{DrPath{{ni.local_port}}, ni.node_guid});
        return;
      }
      for (unsigned port = 1; port <= ni.num_ports; ++port) {
        if (port == ni.local_port && !local) continue;  // where we came from
        ++r.result.ports;
        r.queue.push_back(CheckPort{path, static_cast<std::uint8_t>(port), ni.node_guid});
      }
    }
  };

  (void)weak;
  (void)self;
  if (run->targets.empty() && !survey) {
    sched_.schedule_at(sched_.now(), [this, weak] {
      if (auto r = weak.lock()) Ops::finish(this, r);
    });
    return;
  }
  Ops::pump(this, run);
}

}  // namespace smha::fabric
