// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// smctl on a head with several smhad, one per fabric (smhad@NAME): the
// instance's socket, and `smctl status --all`.
#pragma once

#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "smha/client/cli.hpp"
#include "smha/core/fabric_name.hpp"

namespace smha::client {

using smha::kRunDir;

// The control socket of instance `fabric` in `run_dir`: NAME.sock; the
// one-fabric smhad's (smhad.sock) for "" (smha::instance_socket_path).
std::string instance_socket(const std::string& fabric, const std::string& run_dir = kRunDir);

// Every instance socket in `run_dir`, as (fabric, socket path): smhad.sock is
// the one-fabric smhad (""), NAME.sock instance NAME. Sorted by fabric; at most 256.
std::vector<std::pair<std::string, std::string>> list_instances(const std::string& run_dir = kRunDir);

// One row per instance for `smctl status --all`: fabric, socket, and either
// role, master, last_change, alarms (answered) or error.
nlohmann::json status_all(const CliOptions& options, const std::string& run_dir = kRunDir);
// The rows as a table for people.
std::string render_status_all_text(const nlohmann::json& rows);
// `smctl status --all`: the table (or, with options.json, the rows); 0 when
// every instance answered, kExitNoDaemon when one did not or none exists.
int run_status_all(const CliOptions& options, std::ostream& out, std::ostream& err,
                   const std::string& run_dir = kRunDir);

}  // namespace smha::client
