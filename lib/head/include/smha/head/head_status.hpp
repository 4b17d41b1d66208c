// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// HeadStatus: what this head knows, typed -- the parts of the status reply
// that smhad itself acts on or exports. The status reply's top level, its
// peers, alarms and hold are converted from it once (to_json); the metrics
// (metrics_snapshot) and the drill's preconditions (check_drill) read it and
// never the JSON. The reply's fabric blocks (health, census, drift, LID
// continuity, OpenSM) are rendered here too, each once, from the typed state
// of the service that keeps it.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "smha/control/metrics.hpp"
#include "smha/core/alarm.hpp"
#include "smha/core/clock.hpp"
#include "smha/core/sminfo.hpp"
#include "smha/core/types.hpp"
#include "smha/fabric/census.hpp"
#include "smha/fabric/census_driver.hpp"
#include "smha/fabric/drift.hpp"
#include "smha/fabric/lid_continuity.hpp"
#include "smha/fabric/watchers.hpp"
#include "smha/opensm/supervisor.hpp"
#include "smha/head/recording_transport.hpp"
#include "smha/sm/engine_status.hpp"

namespace smha::agent {
struct PeerRoute;
}
namespace smha::config {
struct Peer;
}

namespace smha::head {

// What this head can say of an SM's state (status shows it as "state").
enum class SmSeen : std::uint8_t {
  Unknown,      // "unknown": no answer yet
  Resolving,    // "resolving": discovery looks for a peer that has no configured LID
  NotFound,     // "not found (searched N nodes, M ports)": discovery did not find it
  Unreachable,  // "unreachable": its last poll went unanswered
  Unaddressed,  // "unaddressed": neither a LID nor a DR path to poll it by
  Answered,     // its answer's state ("MASTER", "STANDBY", ...)
};

// A head's SM as this head sees it: its last SMInfo answer, and for a peer
// where it is polled and how the last poll went.
struct SmView {
  std::string name;  // the configured name (this head: node.name)
  Guid guid;
  // The last SMInfo answer.
  struct Answer {
    SmState state = SmState::NotActive;
    std::uint8_t priority = 0;
    std::uint32_t act_count = 0;
    double rtt_ms = 0;
    double age_s = 0;
  };
  std::optional<Answer> answer;
  // Whether status shows the answer's state (Answered) or why there is none
  // usable.
  SmSeen seen = SmSeen::Unknown;
  std::string searched;  // NotFound: what discovery searched ("searched N nodes, M ports")
  // Peers only.
  std::optional<Lid> lid;          // the LID polled: the configured override, else discovery's
  std::optional<DrPath> dr;        // likewise the DR path
  std::optional<Lid> configured_lid;
  std::optional<DrPath> configured_dr;
  std::string node_description;    // raw; "" unknown
  std::optional<std::string> route;  // agent::PeerRoute::status(), when the agent knows the peer
  std::optional<bool> last_poll_answered;
  std::optional<double> last_poll_age_s;

  // The answer's state while it is what status shows (a live answer), else nullopt.
  std::optional<SmState> state() const;
  // What status shows as "state": the answer's state, or why there is none
  // usable (SmSeen's texts).
  std::string shown() const;
  // A STANDBY whose last poll was answered: a target for a planned handover.
  bool live_standby() const { return state() == SmState::Standby && last_poll_answered.value_or(false); }
};

struct HeadStatus {
  std::string node;
  std::string fabric;  // the instance's fabric; "" on a one-fabric head
  bool observe = false;
  sm::Role role = sm::Role::Init;
  SmView local;
  bool local_answered = false;  // our SM answered a poll (local.answer beyond the engine's state)
  std::vector<SmView> peers;  // in the configuration's order
  struct Alarm {
    AlarmKind kind = AlarmKind::TwoMasters;
    std::string detail;
  };
  std::vector<Alarm> alarms;  // the active ones, by name (as the status reply lists them)
  bool held = false;
  std::string hold_reason;
  std::optional<double> hold_expires_in_s;
  std::string version;
  WallTime started{};
  WallTime config_loaded{};
  // Every SM the census knows, by its state as status shows it, lower case
  // ("master", "standby", "silent", ...).
  std::map<std::string, std::uint64_t> fabric_sms;
  // OpenSM's restarts by its supervisor; nullopt when smhad runs none.
  std::optional<std::uint64_t> opensm_restarts;
  struct LidContinuity {
    std::uint64_t entries = 0;
    std::uint64_t writes = 0;
    std::uint64_t write_errors = 0;
    std::map<std::string, std::uint64_t> rejected;  // bad_lid, duplicate_lid, conflict
  };
  std::optional<LidContinuity> lid_continuity;  // nullopt: off
  struct Drift {
    std::vector<std::pair<std::string, std::string>> own;    // component, digest (hex); empty: none yet
    std::vector<std::pair<std::string, std::string>> peers;  // name, state (unknown, match, drift)
    std::map<std::string, std::uint64_t> rejected;           // foreign, bad_digest
  };
  Drift drift;
  // Fabric health (doc/health.md); nullopt: off (no census) or no walk
  // assessed yet.
  struct Health {
    std::size_t links = 0;
    std::map<std::string, std::uint64_t> links_by_kind;     // switch-switch, switch-ca, other
    std::map<std::string, std::uint64_t> degraded_by_kind;  // the same kinds, every degraded link (not only those kept)
    std::uint64_t degraded = 0;
    std::uint64_t unknown = 0;
    struct Worst {
      std::string a, b;  // "<description> <guid> port N", raw (escaped where shown)
      std::string active, should, why;
      double fraction = 1;
    };
    std::vector<Worst> worst;  // the worst kMetricsWorstLinks, worst first
  };
  std::optional<Health> health;
  std::optional<control::ErrorCounterMetrics> errors;  // nullopt: off
};

// The degraded links metrics name one by one (the rest are counted).
inline constexpr std::size_t kMetricsWorstLinks = 10;

// The `health` reply and status.health (doc/control-protocol.md): the
// assessment, the degraded links (at most `limit`, worst first; every one
// with its ends, rates, reason and since when).
nlohmann::json health_json(const fabric::LinkHealth& health, TimePoint now, std::size_t limit);
// health.errors (doc/control-protocol.md): the error counters' reader, its
// totals and the erroring ports (at most `limit`, worst first).
nlohmann::json errors_json(const fabric::PortErrors& errors, TimePoint now, std::size_t limit);
// The whole `health` object of a head's watchers: health_json() with, in
// "errors", errors_json() (at most `links` degraded links and `ports` ports).
nlohmann::json health_json(const fabric::Watchers& watchers, TimePoint now, std::size_t links, std::size_t ports);
// The metrics' view of the error counters (at most kMetricsWorstLinks ports by name).
control::ErrorCounterMetrics error_metrics(const fabric::PortErrors& errors);

// The status reply's parts converted from HeadStatus. A peer's JSON
// (doc/control-protocol.md, status.peers[]).
nlohmann::json to_json(const SmView& peer);

// The status reply's fabric blocks (doc/control-protocol.md), each rendered
// once from the typed state of the service that keeps it. The peer channel's
// block is peer::continuity_json() (lib/head does not see lib/peer).
//
// status.sms and the sms reply: every SM the census knows (doc/census.md),
// heads first, then by GUID; `head_name` names a configured head's GUID.
nlohmann::json census_json(const fabric::Census& census, const std::function<std::string(Guid)>& head_name,
                           TimePoint now);
// status.census_sa and the sms reply's census.sa: the master's SA tables the
// census last asked for (doc/census.md, sources 5 and 6).
nlohmann::json census_sa_json(const fabric::CensusStats& stats, Duration sa_interval, TimePoint now);
// The sms reply's census: the walks and queries, with census_sa_json().
nlohmann::json census_stats_json(const fabric::Census& census, const fabric::CensusStats& stats,
                                 const fabric::CensusConfig& config, TimePoint now);
// status.lid_continuity (doc/lid-continuity.md); `lc` nullptr: off.
nlohmann::json lid_continuity_json(const fabric::LidContinuity* lc, bool honor_guid2lid_file, TimePoint now);
// status.drift (doc/drift.md).
nlohmann::json drift_json(const fabric::DriftMonitor& drift, TimePoint now);
// status.opensm: OpenSM's supervision, its opensm.conf and version.
nlohmann::json opensm_json(const opensm::SupervisorStatus& st, const std::string& conf_path,
                           const std::string& version, TimePoint now);

// An SM's last SMInfo answer as the poller saw it (nullopt: none yet).
std::optional<SmView::Answer> last_answer(const RecordingTransport& mad, Guid guid, TimePoint now);

// A configured peer as this head sees it, from its route (the agent's, when it
// knows the peer), its last SMInfo answer and its last poll (`mad`). Shown:
// its answer's state; "resolving" or "not found (searched N nodes, M ports)"
// while discovery has not found a peer without a configured lid;
// "unreachable" when its last poll (by LID, else by DR path) went unanswered
// (last_poll_answered: by LID only, so a peer without a LID is no live standby);
// "unaddressed" with neither a LID nor a DR path; "unknown" before any answer.
SmView peer_view(const config::Peer& peer, const agent::PeerRoute* route, const RecordingTransport& mad,
                 TimePoint now);

// The one-line STATUS= text systemd shows, e.g. "MASTER; peer head02 STANDBY
// prio 12; HOLD; OpenSM failed: <reason>": the local SM's state ("no answer
// from local SM" before one), every peer as peer_view shows it (with its
// priority while it answers), the hold, and OpenSM when it is not running
// under supervision (`opensm`; nullptr in observe mode).
std::string systemd_status_line(const HeadStatus& status, const opensm::SupervisorStatus* opensm);

}  // namespace smha::head
