// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// A multi-switch fabric graph for discovery: switches and CAs cabled port to
// port, read from an ibsim net file (topologies/*.net) or built in code, and
// a MadTransport at any CA port whose SMAs answer NodeInfo, PortInfo and
// NodeDescription along directed routes (and by LID) the way ibsim 0.10's do.
// SMInfo is not modelled here (no SM runs): it times out.
//
// GUIDs follow ibsim 0.10 (checked against its answers, tests/unit/mad/data):
// CAs in file order get node GUID 0x100000, 0x100000 + (ports + 1), ...,
// port n of a CA node GUID + n; switches 0x200000, 0x200001, ... (port 0 =
// node GUID). LIDs are 0 until assign_lids() (what an SM's sweep would do).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "smha/core/result.hpp"
#include "smha/core/types.hpp"
#include "smha/mad/transport.hpp"
#include "smha/sim/event_queue.hpp"

namespace smha::sim {

class Topology {
 public:
  struct Port {
    int peer = -1;               // node index at the other end of the cable, -1: none
    std::uint8_t peer_port = 0;
    Guid guid;                   // CA ports only (a switch's ports share port 0's)
    Lid lid;                     // CA ports only
    bool is_sm = false;          // PortInfo CapabilityMask.IsSM (a switch: port 0)
    // What the port enables (PortInfo LinkWidthEnabled / LinkSpeedEnabled):
    // ibsim's defaults, 4X and SDR, of 1X-12X and SDR-QDR supported; an ibsim
    // annotation `# lid N 1xSDR` on the port line enables that width and the
    // speeds up to that speed. A cable trains at the widest width and the
    // fastest speed both ends enable (0: none in common).
    std::uint8_t width_enabled = 2;
    std::uint8_t speed_enabled = 1;
    // The PMA's error counters of this port (ibsim's PerformanceSet sets them);
    // a read answers them as they are, saturated at each counter's width.
    mad::ErrorCounts errors{};
  };
  struct Node {
    mad::NodeType type = mad::NodeType::Ca;
    std::string id;              // the net file's "nodeid"
    std::string description;     // NodeDescription: the `# "..."` text, else the id
    Guid guid;
    Lid lid;                     // a switch's port 0 LID
    std::vector<Port> ports;     // index 0 unused for CAs, port 0 for switches
  };

  int add_switch(std::string id, int ports, std::string description = {});
  int add_ca(std::string id, int ports, std::string description = {});
  // Cables port `pa` of node `a` to port `pb` of node `b`. Errors name both ends.
  Status link(int a, int pa, int b, int pb);
  void unlink(int a, int pa);
  // Gives every switch and every cabled CA port the next LID from 1.
  void assign_lids();
  // The PMA error counters of port `port` of node `n` (for tests to set).
  mad::ErrorCounts& errors(int n, std::uint8_t port) {
    return nodes_.at(static_cast<std::size_t>(n)).ports.at(port).errors;
  }
  void set_lid(Guid port_guid, Lid lid);
  // Sets or clears IsSM on the port with this GUID (a switch's: its port 0,
  // an enhanced switch port 0 SM). False if no port has the GUID.
  bool set_is_sm(Guid port_guid, bool on);

  // An ibsim net file. Errors name the file (`where`), the line and what is wrong.
  static Result<Topology> parse_ibsim(std::string_view text, std::string_view where);

  std::size_t size() const { return nodes_.size(); }
  const Node& node(int n) const { return nodes_.at(static_cast<std::size_t>(n)); }
  std::optional<int> find(std::string_view id_or_description) const;
  std::size_t switches() const;
  std::size_t cas() const;

  // Where a directed route from port `port` of node `from` ends: the node and
  // the port the SMP came in on. nullopt: the route leaves the fabric (an
  // uncabled port, a port the node lacks, a CA asked to forward).
  struct End {
    int node;
    std::uint8_t in_port;
    int hops;
  };
  std::optional<End> walk(int from, std::uint8_t port, const DrPath& path) const;
  // PortInfo's link fields of port `port` of node `n`, as ibsim gives them
  // (the active width and speed only while it is cabled).
  mad::LinkInfo link_info(int n, std::uint8_t port) const;
  // The node and port holding `lid`.
  std::optional<End> by_lid(Lid lid) const;

 private:
  std::vector<Node> nodes_;
  std::uint64_t next_ca_guid_ = 0x100000;
  std::uint64_t next_switch_guid_ = 0x200000;
};

// A switch's LFT in a fabric that models no routes (both simulated
// transports): SwitchInfo's LinearFDBTop 0 (nothing programmed) and blocks of
// 255 (no port); a node that is not a switch refuses either with SMA status
// 0x000c. The reply's round trip and attempts are the caller's to set.
Result<mad::AnyReply> unrouted_lft_top(mad::NodeType type);
Result<mad::AnyReply> unrouted_lft_block(mad::NodeType type);

// MadTransport at port `port` of CA `node` of a Topology, on an EventQueue.
// An answer takes 2 x hop_delay per hop plus `sma_delay`; a route that ends
// nowhere times out (silence, as on hardware). Counts what it sends.
class TopologyTransport final : public mad::MadTransport {
 public:
  TopologyTransport(EventQueue& q, const Topology& topo, int node, std::uint8_t port,
                    Duration hop_delay = microseconds(1), Duration sma_delay = microseconds(5));
  // NodeInfo, NodeDescription and PortInfo as the SMAs answer them. No SM
  // runs on a topology file's fabric: SMInfo and every SA query time out.
  // PortCounters: the PMA at the LID, as ibsim 0.10's answers: a switch's for
  // any of its ports, a CA's for the port the LID is on only (MAD status
  // 0x001c else). A topology file has no routes: every switch answers
  // SwitchInfo with LinearFDBTop 0 (nothing programmed) and LFT blocks with
  // 255 (no port).
  void submit(mad::Request request, mad::ReplyCallback done) override;
  std::uint64_t mads_sent() const { return mads_; }
  std::uint64_t pma_mads_sent() const { return pma_mads_; }
  // PortCounters answers from the PMA at `lid` name port `port` + 1 instead
  // of the one asked (an answer from the wrong port, for tests).
  void misport(Lid lid) { misport_.push_back(lid); }
  // MAD answers that come back with a corrupt payload (malformed) for this target key
  // ("dr:0,1" style, see to_string(DrPath)): for tests of the decoder path.
  void corrupt(const DrPath& path) { corrupt_.push_back(path); }

 private:
  std::optional<Topology::End> resolve(const mad::Target& t) const;
  // `make(end)` answers after the route's delay; a route that ends nowhere is
  // silence. `dr`: the route, when directed (a corrupt() one answers garbage).
  template <class Fn>
  void answer(const std::optional<Topology::End>& end, const DrPath* dr, const mad::RequestOptions& o,
              mad::ReplyCallback done, Fn make);
  template <class Fn>
  void answer(const mad::Target& t, const mad::RequestOptions& o, mad::ReplyCallback done, Fn make) {
    answer(resolve(t), std::get_if<DrPath>(&t), o, std::move(done), std::move(make));
  }
  // No one answers: a timeout after every attempt (each counted as `mads`).
  void silence(const mad::RequestOptions& o, mad::ReplyCallback done, std::uint64_t mads, const char* what);
  EventQueue& q_;
  const Topology& topo_;
  int node_;
  std::uint8_t port_;
  Duration hop_delay_;
  Duration sma_delay_;
  std::uint64_t mads_ = 0;
  std::uint64_t pma_mads_ = 0;
  std::vector<DrPath> corrupt_;
  std::vector<Lid> misport_;
};

}  // namespace smha::sim
