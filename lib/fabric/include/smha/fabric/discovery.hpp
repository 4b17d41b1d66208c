// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// Directed-route discovery: finds the DR path, LID and NodeDescription of the
// ports whose port GUIDs the caller names, by a bounded breadth-first search
// from the local port over MadTransport (doc/discovery.md).
//
// From DR {} (our own node) it reads NodeInfo; out of our port it reads the
// neighbour; at every switch it asks PortInfo of each other port and extends
// the path through the ports that are not Down. Every node is expanded once
// (by node GUID), so a loop in the fabric, or a path that comes back to a
// visited node, costs one NodeInfo and nothing more. When a target's port GUID
// answers NodeInfo at the end of a path, PortInfo of that port (modifier =
// NodeInfo.LocalPortNum) gives its LID and NodeDescription its name.
//
// Bounds: paths of at most `max_hops` hops (<= 63, the DR limit), at most
// `max_requests` requests, at most `in_flight` requests outstanding. The search
// stops early once every target is found (and read). A request that times out,
// is refused or answers with something malformed is counted and skipped.
//
// Single-threaded on the owner's event loop; callbacks after destruction or
// cancel() are dropped.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "smha/core/scheduler.hpp"
#include "smha/mad/transport.hpp"

namespace smha::fabric {

struct DiscoveryLimits {
  int max_hops = 63;                   // clamped to kMaxDrHops
  std::uint64_t max_requests = 20000;  // SubnGet requests (each up to 1 + retries MADs)
  int in_flight = 16;                  // requests outstanding at once (>= 1)
  mad::RequestOptions request{milliseconds(100), 1, 0};
  // survey(): also read every switch's linear forwarding table (SwitchInfo,
  // then LinearForwardingTable blocks 0..LinearFDBTop/64): the takeover
  // report's "LFT entries changed" (doc/takeover-report.md).
  bool forwarding_tables = false;
};

// survey(): a switch's linear forwarding table: the out port of each LID
// 0..LinearFDBTop (255: none). A block that did not answer reads 255 and
// leaves the table incomplete.
struct SwitchLft {
  DrPath path;
  std::vector<std::uint8_t> ports;
  std::size_t blocks = 0;       // LinearFDBTop / 64 + 1
  std::size_t blocks_read = 0;  // of them, answered
  bool complete() const { return blocks_read == blocks; }
  friend bool operator==(const SwitchLft&, const SwitchLft&) = default;
};

// What discovery learned about one port.
struct ResolvedPort {
  Guid port_guid;
  Guid node_guid;
  mad::NodeType node_type = mad::NodeType::Unknown;
  DrPath path;               // from our port; {} is our own node
  std::uint8_t port_num = 0; // the port's number on its node (NodeInfo.LocalPortNum)
  Lid lid;                   // PortInfo.LID of that port; 0 if PortInfo did not answer
  bool lid_known = false;
  std::string description;   // NodeDescription, raw (smha::printable() to show it)
  bool description_known = false;
};

// A port whose PortInfo CapabilityMask has IsSM: an SM is bound to it
// (Discovery::survey(), the SM census: doc/census.md).
struct SmPort {
  Guid port_guid;
  Guid node_guid;
  mad::NodeType node_type = mad::NodeType::Unknown;
  DrPath path;                  // from our port; {} is our own node
  std::uint8_t port_num = 0;    // the port's number on its node (a switch: 0)
  Lid lid;                      // PortInfo.LID
  Lid master_sm_lid;            // PortInfo.MasterSMLID: the master this port was told of
  mad::PortState state = mad::PortState::Unknown;  // PortInfo.PortState
  std::string description;      // NodeDescription, raw (smha::printable() to show it)
  bool description_known = false;
  // Where it is cabled: the node at the other end of its cable and that
  // node's port (a switch GUID and port for a CA on a switch); unset for a
  // switch's port 0 and when not known.
  std::optional<Guid> neighbour;
  std::uint8_t neighbour_port = 0;
};

// survey(): one port's link as that port reports it (its PortInfo): every
// switch port the walk looked at and every CA port it reached (fabric health,
// doc/health.md).
struct LinkEnd {
  Guid node_guid;
  mad::NodeType node_type = mad::NodeType::Unknown;
  DrPath path;                 // to the node
  std::uint8_t port_num = 0;
  mad::PortState state = mad::PortState::Unknown;
  mad::LinkInfo link;
  friend bool operator==(const LinkEnd&, const LinkEnd&) = default;
};

// survey(): a cable the walk crossed, from the node it left (port a_port) to
// the node that answered (its LocalPortNum b_port). A cable crossed both ways
// is listed twice.
struct Cable {
  Guid a_node;
  std::uint8_t a_port = 0;
  Guid b_node;
  std::uint8_t b_port = 0;
  mad::NodeType b_type = mad::NodeType::Unknown;
  DrPath b_path;               // to the node that answered
  friend bool operator==(const Cable&, const Cable&) = default;
};

struct DiscoveryResult {
  std::map<Guid, ResolvedPort> found;  // the targets found, by port GUID
  std::vector<SmPort> sm_ports;        // survey(): every port with IsSM, in the order found
  std::vector<SmPort> probed;          // survey(): every port whose PortInfo answered (IsSM or not)
  std::vector<LinkEnd> link_ends;      // survey(): the link of every port whose PortInfo answered
  std::vector<Cable> cables;           // survey(): every cable crossed
  std::map<Guid, SwitchLft> lfts;      // survey() with forwarding_tables: by switch node GUID
  std::vector<Guid> missing;           // the targets not found
  std::size_t nodes = 0;               // distinct nodes (node GUIDs) that answered NodeInfo
  std::size_t ports = 0;               // ports looked at: switch ports asked + CA ports reached
  std::uint64_t requests = 0;          // SubnGet requests sent
  std::uint64_t mads = 0;              // MADs sent (request attempts)
  std::uint64_t timeouts = 0;          // requests without an answer
  std::uint64_t refused = 0;           // answered with a MAD status
  std::uint64_t malformed = 0;         // answers that did not decode (skipped)
  std::uint64_t revisits = 0;          // NodeInfo answers from a node already expanded
  bool hop_bound = false;              // a node at max_hops was not expanded
  bool request_bound = false;          // max_requests stopped the search
  Duration elapsed{};
  bool complete() const { return missing.empty(); }
};

// "not found (searched N nodes, M ports)", for status.
std::string searched_text(const DiscoveryResult& r);  // "searched N nodes, M ports"
std::string not_found_text(const DiscoveryResult& r);

class Discovery {
 public:
  using Done = std::function<void(const DiscoveryResult&)>;
  // `sched` and `mad` must outlive the discovery.
  Discovery(Scheduler& sched, mad::MadTransport& mad, DiscoveryLimits limits = {});
  ~Discovery();
  Discovery(const Discovery&) = delete;
  Discovery& operator=(const Discovery&) = delete;

  // Searches for `targets` (port GUIDs); `done` runs once, on the event loop,
  // never from inside this call. A search already running is cancelled first.
  // `hints` (where a target was last seen) are asked first: a target still
  // there is confirmed with a handful of MADs and the search stops early.
  void start(std::vector<Guid> targets, Done done, std::vector<DrPath> hints = {});
  // The census walk: the whole fabric within the limits (no early stop),
  // plus PortInfo of every CA port reached and of every switch's port 0; the
  // ports with IsSM are read (NodeDescription) and returned in `sm_ports`.
  // Costs the full search plus one request per CA port and per switch, plus
  // one per SM; with `forwarding_tables`, one per switch and one per 64
  // LIDs of its LFT. Same callback contract as start().
  void survey(Done done);
  // Drops the running search: its answers are ignored, `done` is not called.
  void cancel();
  bool running() const { return static_cast<bool>(run_); }
  const DiscoveryLimits& limits() const { return limits_; }

 private:
  struct Run;
  void begin(bool survey, std::vector<Guid> targets, Done done, std::vector<DrPath> hints);
  Scheduler& sched_;
  mad::MadTransport& mad_;
  DiscoveryLimits limits_;
  std::shared_ptr<Run> run_;
};

}  // namespace smha::fabric
