// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// Fabric health, degraded links (doc/health.md): from the census walk's
// PortInfo answers (no MAD of its own beyond a few NodeDescriptions to name
// what it found), every cabled link whose active width or speed is below
//   - what both of its ends enable and support ("below_ends"),
//   - the operator's expectation for its kind of link, when smha.yaml sets
//     one ("below_expected"),
//   - else what most links of its kind run at, when more than half of them
//     agree and there are at least three ("below_tier": the one 1X link
//     among 4X ones).
// assess_links() is the pure part; LinkHealth keeps the picture between walks
// (since when each link is degraded), names the ends (NodeDescription reads,
// bounded) and raises and clears the link_degraded alarm through AlarmSink.
// Single-threaded on the owner's event loop.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "smha/core/alarm.hpp"
#include "smha/core/link_rate.hpp"
#include "smha/core/scheduler.hpp"
#include "smha/fabric/discovery.hpp"
#include "smha/mad/transport.hpp"

namespace smha::fabric {

// What one end's PortInfo says: the rate it runs at, and the best it and the
// other end could both run at (its Enabled & Supported masks).
LinkRate active_rate(const mad::LinkInfo& l);

enum class LinkKind : std::uint8_t { SwitchSwitch, SwitchCa, Other };
inline constexpr std::array<LinkKind, 3> kLinkKinds{LinkKind::SwitchSwitch, LinkKind::SwitchCa, LinkKind::Other};
// "switch-switch", "switch-ca", "other"
std::string_view to_string(LinkKind k);

enum class DegradedWhy : std::uint8_t { BelowEnds, BelowExpected, BelowTier };
// "below_ends", "below_expected", "below_tier"
std::string_view to_string(DegradedWhy w);

struct HealthExpectation {
  std::optional<LinkRate> switch_switch;  // a part left 0 is not checked
  std::optional<LinkRate> switch_ca;
};

struct LinkEndRef {
  Guid node;
  mad::NodeType type = mad::NodeType::Unknown;
  std::uint8_t port = 0;
  std::optional<DrPath> path;   // to the node, when the walk knows it
  std::string description;      // NodeDescription, raw (smha::printable() to show)
  bool description_known = false;
};

// A port as alarms and tables name it: "\"Switch2\" 0x… port 2" (the
// NodeDescription escaped, when known). label_text(): the same unescaped and
// without quotes, for a metrics label (the writer escapes label values).
std::string end_text(const LinkEndRef& e);
std::string label_text(const LinkEndRef& e);

struct DegradedLink {
  LinkEndRef a;                 // the switch end (both switches: the lower GUID)
  LinkEndRef b;
  LinkKind kind = LinkKind::Other;
  LinkRate active;
  LinkRate should;              // what it should run at
  DegradedWhy why = DegradedWhy::BelowEnds;
  std::string detail;           // "4X QDR enabled and supported at both ends", "5 of 6 switch-ca links run at 4X QDR"
  double fraction = 1;          // gbps(active) / gbps(should): worst first
};

struct LinkAssessment {
  std::size_t links = 0;                    // distinct cabled links with a known rate
  std::map<LinkKind, std::size_t> by_kind;  // of them
  std::size_t unknown = 0;                  // cabled links whose rate did not decode, or runs beyond what its
                                            // ends enable (contradicting answers): shown, never an alarm
  std::vector<DegradedLink> degraded;       // worst first
};

LinkAssessment assess_links(const DiscoveryResult& walk, const HealthExpectation& expect);

struct HealthConfig {
  bool enabled = true;            // off with the census
  bool alarm = true;              // raise link_degraded
  std::size_t alarm_min_links = 1;  // degraded links that raise it
  HealthExpectation expect;
  std::size_t max_descriptions = 32;  // NodeDescription reads per walk (the worst links' ends first)
  std::size_t max_links = 1000;       // degraded links kept and listed
  mad::RequestOptions request{milliseconds(200), 1, 0};
};

struct HealthSnapshot {
  bool assessed = false;          // a walk has been assessed
  std::optional<TimePoint> walk_at;   // when the assessed walk ended
  std::size_t links = 0;
  std::map<LinkKind, std::size_t> by_kind;
  std::size_t unknown = 0;
  std::size_t degraded_total = 0;     // before max_links
  std::map<LinkKind, std::size_t> degraded_by_kind;  // of degraded_total
  struct Entry {
    DegradedLink link;
    TimePoint since;               // the first assessed walk that found it degraded
  };
  std::vector<Entry> degraded;    // worst first, at most max_links
  std::uint64_t walks = 0;
  std::uint64_t description_mads = 0;
};

class LinkHealth {
 public:
  // `sched`, `mad` and `sink` must outlive it.
  LinkHealth(HealthConfig cfg, Scheduler& sched, mad::MadTransport& mad, AlarmSink& sink);
  ~LinkHealth();
  LinkHealth(const LinkHealth&) = delete;
  LinkHealth& operator=(const LinkHealth&) = delete;

  // A finished census walk: assessed, its ends named, then published (and
  // the alarm raised, refreshed or cleared). A walk arriving while the last
  // one's names are still being read replaces it.
  void on_walk(const DiscoveryResult& walk);
  // Drops reads in flight (their answers are ignored) and clears the alarm.
  void stop();
  const HealthSnapshot& snapshot() const { return snapshot_; }
  const HealthConfig& config() const { return cfg_; }

 private:
  struct Pending;
  void read_next(const std::shared_ptr<Pending>& p);
  void publish(Pending& p);
  void update_alarm();

  HealthConfig cfg_;
  Scheduler& sched_;
  mad::MadTransport& mad_;
  AlarmSink& sink_;
  HealthSnapshot snapshot_;
  std::shared_ptr<Pending> pending_;
  std::map<Guid, std::string> names_;   // NodeDescriptions read, by node GUID (bounded)
  std::string alarm_detail_;            // "" when clear
};

}  // namespace smha::fabric
