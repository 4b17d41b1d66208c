// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// opensm.conf: the pure renderer Config -> text, the reload key table, and the
// change classifier (SIGHUP vs restart). No I/O here.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "smha/config/config.hpp"
#include "smha/core/types.hpp"

namespace smha::os {
class FileSystem;
}

namespace smha::opensm {

// Which OpenSM the file is rendered for. NVIDIA SM (MLNX_OFED / DOCA) knows
// every upstream key plus adaptive-routing engines (ar_ftree, ar_updn) and
// sharp_enabled; upstream 3.3.x knows neither.
enum class Flavor { Upstream, Nvidia };
std::string_view to_string(Flavor flavor);

// A policy file opensm.conf names (opensm.extra: partition_config_file,
// qos_policy_file, ...), with a hash of its content. OpenSM re-reads these
// files at every heavy sweep, which SIGHUP forces, but only the path is in
// opensm.conf: the header carries the content hash, so a file edited in place
// changes the rendered text, shows in `smctl render-config --diff`, and makes
// a reload SIGHUP OpenSM (classify_change).
struct PolicyFileHash {
  std::string key;   // the opensm.conf key, e.g. "partition_config_file"
  std::string path;  // its value
  std::string hash;  // "fnv1a64:<16 hex>", "missing" or "unreadable"
};

// The opensm.conf keys whose file OpenSM 3.3.x reads again at every heavy sweep
// (osm_subn_rescan_conf_files: QoS policy, prefix routes, per-module logging;
// the partition manager: partitions; the routing engines and the unicast
// manager: the GUID, routing-order, hop-weight, port-ordering and LFT/LID
// matrix input files). Sorted. node_name_map_name is not here: OpenSM reads it
// once at start, so a changed map takes effect at the next OpenSM start.
const std::vector<std::string>& sweep_read_policy_keys();

// Hashes the file of every sweep_read_policy_keys() key that opensm.extra sets,
// read through `fs`, in key order. A file that cannot be read gets "missing"
// (not_found) or "unreadable"; this never fails (OpenSM itself reports a bad
// policy file in its log, and the next reload hashes it again).
std::vector<PolicyFileHash> hash_policy_files(const config::Config& config, const os::FileSystem& fs);

// What the renderer needs beyond the Config. The HA engine changes the priority
// at run time, and the flavor and the AR/SHARP switches are decided by
// plan_render() (lib/opensm/check.hpp) from the installed OpenSM.
struct RenderInputs {
  std::uint8_t sm_priority = 0;   // effective priority, 0..15
  std::optional<Guid> port_guid;  // local port; `guid` is left out when unknown
  Flavor flavor = Flavor::Upstream;
  bool adaptive_routing = false;  // effective (false after a downgrade)
  bool sharp = false;             // effective (false after a downgrade)
  // The binary knows sharp_enabled (NVIDIA SM): render it, 2 with `sharp`,
  // else 1 (disabled), never leaving SHARP to the binary's default.
  bool sharp_key = false;
  // Content hashes of the policy files (hash_policy_files), one header line
  // each: "# policy-file <key> <path> <hash>".
  std::vector<PolicyFileHash> policy_files = {};
};

// FNV-1a, 64 bit: a hash that is the same on every build (std::hash is not).
std::uint64_t fnv1a64(std::string_view data);

// The routing_engine value rendered for `config_value` ("ftree,updn"): with
// adaptive routing on NVIDIA SM, ftree -> ar_ftree and updn -> ar_updn.
std::string rendered_routing_engine(std::string_view config_value, bool adaptive_routing);

// Renders opensm.conf. Pure and deterministic: the same inputs give the same
// bytes. A header names Config::source_path, one "policy-file" line per
// inputs.policy_files entry, and "body-hash fnv1a64:<hex>" of everything after
// the header. Managed keys come in a fixed order, then
// opensm.extra sorted by key.
std::string render_opensm_conf(const config::Config& config, const RenderInputs& inputs);

// `conf_text` (render_opensm_conf's) at another effective priority: its
// sm_priority line and body hash set, the bytes render_opensm_conf gives with
// inputs.sm_priority = `priority`. So a file is rendered once per
// configuration and the HA engine's priority changes re-render nothing. Text
// without smha's header or an sm_priority line is returned as it is.
std::string set_sm_priority(std::string_view conf_text, std::uint8_t priority);

// The body hash recorded in a rendered file's header, if any.
std::optional<std::string> header_hash(std::string_view conf_text);

// opensm.conf as OpenSM reads it (osm_subn_parse_conf_file): text from '#' on is
// dropped, the first word is the key and the trimmed, unquoted rest the value.
// A repeated key keeps its last value, as in OpenSM.
using ConfMap = std::map<std::string, std::string>;
ConfMap parse_opensm_conf(std::string_view text);

// One row of OpenSM's option table (osm_subnet.c opt_tbl): can OpenSM re-apply
// the key on SIGHUP? Data: config/opensm-keys.tsv, compiled in.
struct KeyInfo {
  std::string name;
  bool reloadable = false;
  std::string origin;  // "upstream" or "nvidia"
};
const std::vector<KeyInfo>& opensm_key_table();
const KeyInfo* find_opensm_key(std::string_view name);

// What applying a new opensm.conf to a running OpenSM takes.
struct ReloadDecision {
  enum class Kind { None, Sighup, Restart };
  Kind kind = Kind::None;
  std::string key;                   // Restart: the (first, by name) key that forced it
  std::vector<std::string> changed;  // every key added, removed or changed, sorted
};
std::string_view to_string(ReloadDecision::Kind kind);

// None if no key changed; Sighup if every changed key is reloadable; else Restart
// naming the first non-reloadable key. A key absent from the table counts as
// not reloadable. Comments and the header do not count, except (text form) the
// header's policy-file hashes: a policy file whose path stayed the same but
// whose content hash changed is listed as "<key> (content)" and needs a
// SIGHUP (OpenSM re-reads it in the heavy sweep SIGHUP forces).
ReloadDecision classify_change(const ConfMap& old_conf, const ConfMap& new_conf);
ReloadDecision classify_change(std::string_view old_text, std::string_view new_text);

// The header's policy-file lines: key -> {path, hash}.
std::map<std::string, std::pair<std::string, std::string>> header_policy_files(std::string_view conf_text);

// A line diff ("--- a", "+++ b", then " ", "-", "+" lines); empty if equal.
std::string diff_lines(std::string_view old_text, std::string_view new_text,
                       std::string_view old_label, std::string_view new_label);

}  // namespace smha::opensm
