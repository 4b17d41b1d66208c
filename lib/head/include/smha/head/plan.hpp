// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// The plan of a head: what a head is built from, derived in one place from its
// configuration, the OpenSM binary's capabilities and its port GUID -- the
// engine's policy with its clamps, the agent's and the watchers'
// configurations, how OpenSM is
// started and supervised, how opensm.conf is rendered, the inputs of this
// head's configuration digests and LID continuity. smhad builds its head from
// it; a change of mapping is made here once.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "smha/agent/agent.hpp"
#include "smha/agent/supervised_opensm_control.hpp"
#include "smha/config/config.hpp"
#include "smha/core/result.hpp"
#include "smha/core/types.hpp"
#include "smha/fabric/drift.hpp"
#include "smha/fabric/lid_continuity.hpp"
#include "smha/opensm/check.hpp"
#include "smha/fabric/watchers.hpp"
#include "smha/opensm/probe.hpp"
#include "smha/opensm/supervisor.hpp"
#include "smha/os/file_system.hpp"
#include "smha/os/process_runner.hpp"

namespace smha::head {

// config::Config -> agent::AgentConfig: the HaPolicy (base priority =
// sm_priority and each peer's peers[].sm_priority; hang_timeout = (misses + 1)
// x poll; the bounds that must cover a round follow a long poll interval),
// every peer found by directed-route discovery from its port GUID (a configured
// lid or dr_path is an override). A policy the engine refuses is an error
// naming the YAML key that set it and its position.
Result<agent::AgentConfig> map_config(const config::Config& config, Guid own_guid);

// How opensm.conf is rendered and checked for this OpenSM
// (opensm::prepare_opensm_conf, which tests replace to count its calls): a
// plan calls it once, at the configured priority, with the policy files read
// through `policy_fs`.
using ConfPreparer = std::function<opensm::PreparedConf(const config::Config&, const opensm::Capabilities&,
                                                        std::uint8_t sm_priority, std::optional<Guid> port_guid,
                                                        const os::FileSystem* policy_fs)>;

// config::Config -> fabric::WatchersConfig: the drift alarm bound, the link
// health and error counter settings (health.*). What follows from OpenSM
// (the routing engines, its log) make_plan adds.
fabric::WatchersConfig map_watchers(const config::Config& config);


// opensm.conf for a priority, from `rendered` (opensm.conf rendered once for
// the configuration): its sm_priority set (opensm::set_sm_priority), nothing
// rendered again. The policy files' hashes are those of that rendering, so a
// reload after an edit of e.g. the partitions file (a new plan, a new
// rendering) SIGHUPs OpenSM (opensm::classify_change). Never fails.
agent::PriorityRenderer priority_renderer(std::string rendered);

// The inputs of this head's configuration digests (doc/drift.md): `rendered`
// (opensm.conf at the configured priority), the failover keys, OpenSM's
// version and flavor, the keys.
fabric::DigestInputs drift_inputs(const config::Config& config, const opensm::Capabilities& caps, std::string rendered);

// How OpenSM is started: opensm -F <conf_path> -g <GUID>, OSM_CACHE_DIR and
// OSM_TMP_DIR = cache_dir, cwd state_dir, no parent-death signal (the next
// smhad adopts it).
os::ProcessSpec opensm_spec(const config::Config& config, Guid own_guid);

// How OpenSM is supervised: conf and pidfile (<state_dir>/opensm.pid) paths,
// log file, backoff and crash loop from the configuration; it keeps running
// when smhad exits; respawns wait for the engine. The host adds on_change and,
// off a real machine, its process-identity hooks.
opensm::SupervisorOptions supervisor_options(const config::Config& config);

struct PlanInputs {
  Guid own_guid;
  bool observe = false;        // poll and report only: no OpenSM of ours
  opensm::Capabilities caps;   // the OpenSM binary's (unused when observing)
  ConfPreparer prepare = nullptr;  // empty: opensm::prepare_opensm_conf
};

struct Plan {
  // map_config, plus observe mode in the policy.
  agent::AgentConfig agent;
  // map_watchers, plus what follows from the OpenSM this head runs: the
  // routing engines as rendered (with NVIDIA AR, ftree is ar_ftree, so that
  // the engine OpenSM configures is the first choice and not a fallback),
  // whether OpenSM's log is followed.
  fabric::WatchersConfig watchers;
  // Unset when observing.
  struct Opensm {
    os::ProcessSpec spec;                    // opensm_spec
    opensm::SupervisorOptions supervisor;    // supervisor_options
    // From the plan's one rendering of opensm.conf (priority_renderer).
    agent::PriorityRenderer render;
    fabric::DigestInputs drift;  // its rendered_conf: opensm.conf at the configured priority
    // What that rendering warns about (no_clients_rereg TRUE, an AR/SHARP
    // downgrade), as "file:line:column: key: text".
    std::vector<std::string> warnings;
    // Unset with opensm.lid_continuity false or without the census.
    std::optional<fabric::LidContinuityConfig> lid_continuity;
    // Made before OpenSM starts: state_dir (its cwd, the pidfile) and cache_dir.
    std::vector<std::string> dirs;
  };
  std::optional<Opensm> opensm;
};

// `mapped`: map_config(config, in.own_guid), which callers run first so that
// the policy's errors come before OpenSM is probed. Unless observing,
// opensm.conf is rendered here, once (in.prepare). Errors: opensm.conf that
// does not render for this OpenSM (code "config", every problem) -- refused
// before anything starts or a reload changes anything.
Result<Plan> make_plan(const config::Config& config, agent::AgentConfig mapped, const PlanInputs& in,
                       const os::FileSystem& fs);

}  // namespace smha::head
