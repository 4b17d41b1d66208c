// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// `smhad --check-config`: every check start-up makes, in one run, and what
// it warns about a reachable fabric (doc/configuration.md).
#pragma once

#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "smha/config/config.hpp"
#include "smha/fabric/discovery.hpp"
#include "smha/opensm/probe.hpp"

namespace smha::service {

// Directed-route discovery of every peer's port GUID from the configured port
// (doc/discovery.md), for --check-config. nullopt when the port cannot be
// opened (no fabric reachable from here): nothing is checked then.
using RouteProbe = std::function<std::optional<fabric::DiscoveryResult>(const config::Config&)>;
std::optional<fabric::DiscoveryResult> probe_routes(const config::Config& config);
// What --check-config warns about a reachable fabric: a peer port GUID on no
// port ("not found (searched N nodes, M ports)", at peers[i].port_guid), a
// configured lid or dr_path other than the one discovery finds (at
// peers[i].lid / peers[i].dr_path).
std::vector<config::Diagnostic> route_warnings(const config::Config& config,
                                               const fabric::DiscoveryResult& found);

// `smhad --check-config`: everything opensm::run_check_config checks, plus the
// key table (every key the file sets is one of config::key_table()'s), the
// security check of every configured hook (HookDispatcher::check), the
// state_dir, the HA policy (map_config) and the peer channel's TLS files
// (peer::check_tls_files), so a config smhad would refuse to
// start with fails here too. Every check runs and every problem is printed in
// one run (only a file that does not load stops at its own errors). Prints
// like opensm::run_check_config: warnings, then "error: <file>: ..." lines,
// then "<file>: N error(s)"; returns 0/1.
// When `probe` reaches the fabric, route_warnings() are printed as
// "warning: ..." (they do not fail the check).
// `load` carries the instance name (smhad --fabric). Another instance's file
// beside `path` that would share a port, file, socket or metrics port with it
// is an error naming that file (instance_conflicts).
int run_check_config(const std::string& path, opensm::OpensmRunner& runner, std::ostream& out,
                     std::ostream& err, const RouteProbe& probe = probe_routes,
                     const config::LoadOptions& load = {});

}  // namespace smha::service
