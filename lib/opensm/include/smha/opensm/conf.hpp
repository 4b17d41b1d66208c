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

namespace smha::opensm {

// Which OpenSM the file is rendered for. NVIDIA SM (MLNX_OFED / DOCA) knows
// every upstream key plus adaptive-routing engines (ar_ftree, ar_updn) and
// sharp_enabled; upstream 3.3.x knows neither.
enum class Flavor { Upstream, Nvidia };
std::string_view to_string(Flavor flavor);

// What the renderer needs beyond the Config. The HA engine changes the priority
// at run time, and the flavor and the AR/SHARP switches are decided by
// plan_render() (lib/opensm/check.hpp) from the installed OpenSM.
struct RenderInputs {
  std::uint8_t sm_priority = 0;   // effective priority, 0..15
  std::optional<Guid> port_guid;  // local port; `guid` is left out when unknown
  Flavor flavor = Flavor::Upstream;
  bool adaptive_routing = false;  // effective (false after a downgrade)
  bool sharp = false;             // effective (false after a downgrade)
};

// FNV-1a, 64 bit: a hash that is the same on every build (std::hash is not).
std::uint64_t fnv1a64(std::string_view data);

// The routing_engine value rendered for `config_value` ("ftree,updn"): with
// adaptive routing on NVIDIA SM, ftree -> ar_ftree and updn -> ar_updn.
std::string rendered_routing_engine(std::string_view config_value, bool adaptive_routing);

// Renders opensm.conf. Pure and deterministic: the same inputs give the same
// bytes. A header names Config::source_path and carries "body-hash fnv1a64:<hex>"
// of everything after the header. Managed keys come in a fixed order, then
// opensm.extra sorted by key.
std::string render_opensm_conf(const config::Config& config, const RenderInputs& inputs);

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
// not reloadable. Comments and the header do not count.
ReloadDecision classify_change(const ConfMap& old_conf, const ConfMap& new_conf);
ReloadDecision classify_change(std::string_view old_text, std::string_view new_text);

// A line diff ("--- a", "+++ b", then " ", "-", "+" lines); empty if equal.
std::string diff_lines(std::string_view old_text, std::string_view new_text,
                       std::string_view old_label, std::string_view new_label);

}  // namespace smha::opensm
