// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/sim/topology.hpp"

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <type_traits>
#include <variant>

namespace smha::sim {

int Topology::add_switch(std::string id, int ports, std::string description) {
  Node n;
  n.type = mad::NodeType::Switch;
  n.description = description.empty() ? id : std::move(description);
  n.id = std::move(id);
  n.guid = Guid{next_switch_guid_++};
  n.ports.resize(static_cast<std::size_t>(ports) + 1);
  nodes_.push_back(std::move(n));
  return static_cast<int>(nodes_.size()) - 1;
}

int Topology::add_ca(std::string id, int ports, std::string description) {
  Node n;
  n.type = mad::NodeType::Ca;
  n.description = description.empty() ? id : std::move(description);
  n.id = std::move(id);
  n.guid = Guid{next_ca_guid_};
  n.ports.resize(static_cast<std::size_t>(ports) + 1);
  for (int p = 1; p <= ports; ++p) n.ports[static_cast<std::size_t>(p)].guid = Guid{next_ca_guid_ + static_cast<std::uint64_t>(p)};
  next_ca_guid_ += static_cast<std::uint64_t>(ports) + 1;
  nodes_.push_back(std::move(n));
  return static_cast<int>(nodes_.size()) - 1;
}

Status Topology::link(int a, int pa, int b, int pb) {
  auto bad = [&](int n, int p) -> bool {
    return n < 0 || n >= static_cast<int>(nodes_.size()) || p < 1 ||
           p >= static_cast<int>(nodes_[static_cast<std::size_t>(n)].ports.size());
  };
  auto name = [&](int n, int p) {
    const std::string id = n >= 0 && n < static_cast<int>(nodes_.size()) ? nodes_[static_cast<std::size_t>(n)].id : "#" + std::to_string(n);
    return id + "[" + std::to_string(p) + "]";
  };
  if (bad(a, pa) || bad(b, pb))
    return make_error(Errc::Invalid, "cannot cable " + name(a, pa) + " to " + name(b, pb) + ": no such port");
  auto& x = nodes_[static_cast<std::size_t>(a)].ports[static_cast<std::size_t>(pa)];
  auto& y = nodes_[static_cast<std::size_t>(b)].ports[static_cast<std::size_t>(pb)];
  if ((x.peer != -1 && !(x.peer == b && x.peer_port == pb)) ||
      (y.peer != -1 && !(y.peer == a && y.peer_port == pa)))
    return make_error(Errc::Invalid, "cannot cable " + name(a, pa) + " to " + name(b, pb) +
                                     ": a port is already cabled elsewhere");
  x.peer = b;
  x.peer_port = static_cast<std::uint8_t>(pb);
  y.peer = a;
  y.peer_port = static_cast<std::uint8_t>(pa);
  return Status::Ok();
}

mad::LinkInfo Topology::link_info(int n, std::uint8_t port) const {
  const auto& node = nodes_.at(static_cast<std::size_t>(n));
  const Port& p = node.ports.at(port);
  mad::LinkInfo l;
  l.width_supported = 31;  // 1X 4X 8X 12X 2X
  l.speed_supported = 7;   // SDR DDR QDR
  l.width_enabled = p.width_enabled;
  l.speed_enabled = p.speed_enabled;
  l.phys_state = 2;        // Polling
  if (p.peer >= 0) {
    const Port& q = nodes_.at(static_cast<std::size_t>(p.peer)).ports.at(p.peer_port);
    const std::uint8_t w = p.width_enabled & q.width_enabled;
    const std::uint8_t s = p.speed_enabled & q.speed_enabled;
    for (std::uint8_t bit : {8, 4, 2, 16, 1})  // 12X 8X 4X 2X 1X
      if (w & bit) {
        l.width_active = bit;
        break;
      }
    for (std::uint8_t bit : {4, 2, 1})  // QDR DDR SDR
      if (s & bit) {
        l.speed_active = bit;
        break;
      }
    l.phys_state = 5;      // LinkUp
  }
  return l;
}

void Topology::unlink(int a, int pa) {
  auto& x = nodes_.at(static_cast<std::size_t>(a)).ports.at(static_cast<std::size_t>(pa));
  if (x.peer < 0) return;
  auto& y = nodes_.at(static_cast<std::size_t>(x.peer)).ports.at(x.peer_port);
  y.peer = -1;
  y.peer_port = 0;
  x.peer = -1;
  x.peer_port = 0;
}

void Topology::assign_lids() {
  std::uint16_t next = 1;
  for (auto& n : nodes_) {
    if (n.type == mad::NodeType::Switch) {
      n.lid = Lid{next++};
      continue;
    }
    for (std::size_t p = 1; p < n.ports.size(); ++p)
      if (n.ports[p].peer >= 0) n.ports[p].lid = Lid{next++};
  }
}

void Topology::set_lid(Guid port_guid, Lid lid) {
  for (auto& n : nodes_) {
    if (n.type == mad::NodeType::Switch && n.guid == port_guid) n.lid = lid;
    for (auto& p : n.ports)
      if (n.type != mad::NodeType::Switch && p.guid == port_guid) p.lid = lid;
  }
}

bool Topology::set_is_sm(Guid port_guid, bool on) {
  for (auto& n : nodes_) {
    if (n.type == mad::NodeType::Switch) {
      if (n.guid != port_guid || n.ports.empty()) continue;
      n.ports[0].is_sm = on;
      return true;
    }
    for (auto& p : n.ports)
      if (p.guid == port_guid) {
        p.is_sm = on;
        return true;
      }
  }
  return false;
}

std::optional<int> Topology::find(std::string_view key) const {
  for (std::size_t i = 0; i < nodes_.size(); ++i)
    if (nodes_[i].id == key || nodes_[i].description == key) return static_cast<int>(i);
  return std::nullopt;
}

std::size_t Topology::switches() const {
  return static_cast<std::size_t>(std::count_if(nodes_.begin(), nodes_.end(), [](const Node& n) {
    return n.type == mad::NodeType::Switch;
  }));
}

std::size_t Topology::cas() const { return nodes_.size() - switches(); }

std::optional<Topology::End> Topology::walk(int from, std::uint8_t port, const DrPath& path) const {
  if (path.hops.empty()) return End{from, port, 0};
  if (path.hops.size() > kMaxDrHops || path.hops[0] != port) return std::nullopt;
  int cur = from;
  std::uint8_t out = port;
  for (std::size_t i = 0;; ++i) {
    const Node& n = nodes_[static_cast<std::size_t>(cur)];
    if (out < 1 || out >= n.ports.size() || n.ports[out].peer < 0) return std::nullopt;
    const Port& p = n.ports[out];
    cur = p.peer;
    const std::uint8_t in = p.peer_port;
    if (i + 1 == path.hops.size()) return End{cur, in, static_cast<int>(path.hops.size())};
    if (nodes_[static_cast<std::size_t>(cur)].type != mad::NodeType::Switch) return std::nullopt;
    out = path.hops[i + 1];
  }
}

std::optional<Topology::End> Topology::by_lid(Lid lid) const {
  if (lid.value == 0) return std::nullopt;
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    const Node& n = nodes_[i];
    if (n.type == mad::NodeType::Switch && n.lid == lid) return End{static_cast<int>(i), 0, 1};
    for (std::size_t p = 1; p < n.ports.size(); ++p)
      if (n.type != mad::NodeType::Switch && n.ports[p].lid == lid)
        return End{static_cast<int>(i), static_cast<std::uint8_t>(p), 1};
  }
  return std::nullopt;
}

namespace {

std::string trim(std::string s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

// The first "..." in `s` from `pos`; advances `pos` past it.
std::optional<std::string> quoted(const std::string& s, std::size_t& pos) {
  const auto a = s.find('"', pos);
  if (a == std::string::npos) return std::nullopt;
  const auto b = s.find('"', a + 1);
  if (b == std::string::npos) return std::nullopt;
  pos = b + 1;
  return s.substr(a + 1, b - a - 1);
}

}  // namespace

Result<Topology> Topology::parse_ibsim(std::string_view text, std::string_view where) {
  struct Cable {
    int line;
    std::string a;
    int pa;
    std::string b;
    int pb;
    std::uint8_t width = 0;  // an annotation's enabled width and speed; 0: the defaults
    std::uint8_t speed = 0;
  };
  Topology t;
  std::vector<Cable> cables;
  std::istringstream in{std::string(text)};
  std::string raw;
  int line = 0;
  int current = -1;
  auto fail = [&](const std::string& what) -> Result<Topology> {
    return make_error(Errc::Parse, std::string(where) + ":" + std::to_string(line) + ": " + what);
  };
  while (std::getline(in, raw)) {
    ++line;
    std::string s = trim(raw);
    if (s.empty()) {
      current = -1;
      continue;
    }
    if (s[0] == '#') continue;
    if (s[0] == '[') {
      if (current < 0) return fail("port line outside a node record");
      int local = 0;
      int remote_port = 0;
      if (std::sscanf(s.c_str(), "[%d]", &local) != 1) return fail("cannot read the local port in '" + s + "'");
      std::size_t pos = s.find(']') + 1;
      auto remote = quoted(s, pos);
      if (!remote) return fail("no quoted remote node id in '" + s + "'");
      if (std::sscanf(s.c_str() + pos, "[%d]", &remote_port) != 1)
        return fail("cannot read the remote port in '" + s + "'");
      Cable c{line, t.nodes_[static_cast<std::size_t>(current)].id, local, *remote, remote_port};
      // ibsim's "lid N <width>x<speed>" after the '#': 1xSDR, 4xQDR, 12xDDR.
      if (const auto hash = s.find('#', pos); hash != std::string::npos) {
        const auto at = s.find("lid ", hash);
        int rlid = 0;
        int width = 0;
        char speed[8] = {};
        if (at != std::string::npos && std::sscanf(s.c_str() + at, "lid %d %dx%7s", &rlid, &width, speed) == 3) {
          const std::string sp(speed);
          c.width = width == 1 ? 1 : width == 2 ? 16 : width == 4 ? 3 : width == 8 ? 4 : width == 12 ? 11 : 0;
          c.speed = sp == "SDR" ? 1 : sp == "DDR" ? 3 : sp == "QDR" ? 7 : 0;
          if (c.width == 0 || c.speed == 0)
            return fail("link width/speed '" + std::to_string(width) + "x" + sp +
                        "' is not one the sim models (1x 2x 4x 8x 12x, SDR DDR QDR)");
        }
      }
      cables.push_back(std::move(c));
      continue;
    }
    std::istringstream hs(s);
    std::string kind;
    int ports = 0;
    hs >> kind >> ports;
    if ((kind != "Switch" && kind != "Hca") || !hs)
      return fail("expected 'Switch N \"id\"' or 'Hca N \"id\"', got '" + s + "'");
    if (ports < 1 || ports > 254) return fail("port count " + std::to_string(ports) + " is not 1..254");
    std::size_t pos = 0;
    auto id = quoted(s, pos);
    if (!id) return fail("no quoted node id in '" + s + "'");
    if (t.find(*id)) return fail("node id \"" + *id + "\" appears twice");
    std::string desc;
    const auto hash = s.find('#', pos);
    if (hash != std::string::npos) {
      std::size_t p2 = hash;
      if (auto d = quoted(s, p2)) desc = *d;
    }
    current = kind == "Switch" ? t.add_switch(*id, ports, desc) : t.add_ca(*id, ports, desc);
  }
  for (const auto& c : cables) {
    line = c.line;
    std::optional<int> a, b;
    for (std::size_t i = 0; i < t.nodes_.size(); ++i) {
      if (t.nodes_[i].id == c.a) a = static_cast<int>(i);
      if (t.nodes_[i].id == c.b) b = static_cast<int>(i);
    }
    if (!b) return fail("cable to unknown node \"" + c.b + "\"");
    auto st = t.link(*a, c.pa, *b, c.pb);
    if (!st.ok()) return fail(st.error().message);
    if (c.width != 0) {
      auto& p = t.nodes_[static_cast<std::size_t>(*a)].ports[static_cast<std::size_t>(c.pa)];
      p.width_enabled = c.width;
      p.speed_enabled = c.speed;
    }
  }
  return t;
}

// ---- TopologyTransport ------------------------------------------------------

TopologyTransport::TopologyTransport(EventQueue& q, const Topology& topo, int node,
                                     std::uint8_t port, Duration hop_delay, Duration sma_delay)
    : q_(q), topo_(topo), node_(node), port_(port), hop_delay_(hop_delay), sma_delay_(sma_delay) {}

std::optional<Topology::End> TopologyTransport::resolve(const mad::Target& t) const {
  if (const auto* lid = std::get_if<Lid>(&t)) return topo_.by_lid(*lid);
  return topo_.walk(node_, port_, std::get<DrPath>(t));
}

Result<mad::AnyReply> unrouted_lft_top(mad::NodeType type) {
  if (type != mad::NodeType::Switch) return mad::mad_status_error(0x000c, "SMA status 0x000c");
  return mad::AnyReply{mad::LftTopReply{}};
}

Result<mad::AnyReply> unrouted_lft_block(mad::NodeType type) {
  if (type != mad::NodeType::Switch) return mad::mad_status_error(0x000c, "SMA status 0x000c");
  mad::LftBlockReply r;
  r.info.fill(0xff);
  return mad::AnyReply{r};
}

template <class Fn>
void TopologyTransport::answer(const std::optional<Topology::End>& end, const DrPath* dr, const mad::RequestOptions& o,
                               mad::ReplyCallback done, Fn make) {
  ++mads_;
  if (end) {
    if (dr && std::find(corrupt_.begin(), corrupt_.end(), *dr) != corrupt_.end()) {
      q_.schedule_in(sma_delay_, [done] { done(make_error(Errc::Parse, "NodeType 0 at SMP data offset 2")); });
      return;
    }
    Result<mad::AnyReply> r = make(*end);
    const Duration rtt = 2 * hop_delay_ * std::max(1, end->hops) + sma_delay_;
    if (r.ok()) mad::set_round_trip(r.value(), rtt, 1);
    q_.schedule_in(rtt, [done, r] { done(r); });
    return;
  }
  // Silence: each attempt times out; the transport retries.
  mads_ += static_cast<std::uint64_t>(o.retries);
  q_.schedule_in(o.timeout * (o.retries + 1), [done] { done(make_error(mad::kErrTimeout, "no answer")); });
}

void TopologyTransport::silence(const mad::RequestOptions& o, mad::ReplyCallback done, std::uint64_t mads,
                                const char* what) {
  mads_ += mads;
  q_.schedule_in(o.timeout * (o.retries + 1), [done, what] { done(make_error(mad::kErrTimeout, what)); });
}

void TopologyTransport::submit(mad::Request request, mad::ReplyCallback done) {
  const mad::RequestOptions& o = request.opts;
  const auto attempts = static_cast<std::uint64_t>(o.retries) + 1;
  std::visit(
      [&](const auto& q) {
        using Q = std::decay_t<decltype(q)>;
        if constexpr (std::is_same_v<Q, mad::SmInfoGet> || std::is_same_v<Q, mad::SmInfoSet>) {
          silence(o, std::move(done), 1, "no SM");
        } else if constexpr (std::is_same_v<Q, mad::PortInfoGet>) {
          answer(q.target, o, std::move(done), [this, port = q.port](const Topology::End& e) -> Result<mad::AnyReply> {
            const auto& n = topo_.node(e.node);
            const std::uint8_t p = port == 0 && n.type != mad::NodeType::Switch ? e.in_port : port;
            if (p >= n.ports.size() || (p == 0 && n.type != mad::NodeType::Switch))
              return mad::mad_status_error(0x001c, "MAD status 0x001c");
            mad::PortInfo pi;
            pi.lid = n.type == mad::NodeType::Switch ? n.lid : n.ports[p].lid;
            pi.local_port = e.in_port;
            pi.state = p == 0 || n.ports[p].peer >= 0 ? mad::PortState::Active : mad::PortState::Down;
            if (n.ports[p].is_sm) pi.capability_mask = mad::kCapIsSm;
            if (p != 0) pi.link = topo_.link_info(e.node, p);
            return mad::AnyReply{mad::PortInfoReply{pi, {}, 1}};
          });
        } else if constexpr (std::is_same_v<Q, mad::NodeInfoGet>) {
          answer(q.target, o, std::move(done), [this](const Topology::End& e) -> Result<mad::AnyReply> {
            const auto& n = topo_.node(e.node);
            mad::NodeInfo ni;
            ni.type = n.type;
            ni.num_ports = static_cast<std::uint8_t>(n.ports.size() - 1);
            ni.system_image_guid = n.guid;
            ni.node_guid = n.guid;
            ni.port_guid = n.type == mad::NodeType::Switch ? n.guid : n.ports[e.in_port].guid;
            ni.local_port = e.in_port;
            return mad::AnyReply{mad::NodeInfoReply{ni, {}, 1}};
          });
        } else if constexpr (std::is_same_v<Q, mad::NodeDescriptionGet>) {
          answer(q.target, o, std::move(done), [this](const Topology::End& e) -> Result<mad::AnyReply> {
            return mad::AnyReply{mad::NodeDescriptionReply{topo_.node(e.node).description, {}, 1}};
          });
        } else if constexpr (std::is_same_v<Q, mad::PortCountersGet>) {
          ++pma_mads_;
          const bool lie = std::find(misport_.begin(), misport_.end(), q.lid) != misport_.end();
          answer(topo_.by_lid(q.lid), nullptr, o, std::move(done),
                 [this, port = q.port, lie](const Topology::End& e) -> Result<mad::AnyReply> {
                   const auto& n = topo_.node(e.node);
                   const bool sw = n.type == mad::NodeType::Switch;
                   if (port >= n.ports.size() || (!sw && port != e.in_port))
                     return mad::mad_status_error(0x001c, "PMA status 0x001c");
                   mad::PortCounters pc;
                   pc.port_select = lie ? static_cast<std::uint8_t>(port + 1) : port;
                   for (auto c : mad::kErrorCounters)
                     mad::at(pc.errors, c) = std::min(mad::at(n.ports[port].errors, c), mad::counter_max(c));
                   return mad::AnyReply{mad::PortCountersReply{pc, {}, 1}};
                 });
        } else if constexpr (std::is_same_v<Q, mad::LftTopGet>) {
          answer(q.target, o, std::move(done),
                 [this](const Topology::End& e) { return unrouted_lft_top(topo_.node(e.node).type); });
        } else if constexpr (std::is_same_v<Q, mad::LftBlockGet>) {
          answer(q.target, o, std::move(done),
                 [this](const Topology::End& e) { return unrouted_lft_block(topo_.node(e.node).type); });
        } else {
          static_assert(std::is_same_v<Q, mad::SmInfoRecordsGet> || std::is_same_v<Q, mad::IsSmPortRecordsGet> ||
                            std::is_same_v<Q, mad::ServiceRecordSet> || std::is_same_v<Q, mad::ServiceRecordGet> ||
                            std::is_same_v<Q, mad::ServiceRecordDelete> || std::is_same_v<Q, mad::McMemberGet>,
                        "a query the topology does not answer");
          silence(o, std::move(done), attempts, "no SA");  // no SM: no SA
        }
      },
      request.query);
}

}  // namespace smha::sim
