// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// Every key of smha.yaml once: its path (as doc/configuration.md writes it),
// the range of an integer key (limits::kRangedKeys), how a change takes effect
// when smhad is reloaded, and how to tell whether two configurations differ
// in it. The loader takes the keys it accepts from this table, a reload
// computes what changed from it (config::changed_keys: refused, applied, the
// engine re-created), and a unit test holds doc/configuration.md's Reload
// column to it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "smha/config/config.hpp"
#include "smha/core/limits.hpp"

namespace smha::config {

// How a change of a key takes effect on reload (SIGHUP, `smctl reload`).
enum class ReloadEffect : std::uint8_t {
  Live,           // smhad applies it itself
  Sighup,         // opensm.conf rewritten, OpenSM sent SIGHUP
  OpensmRestart,  // opensm.conf rewritten, OpenSM restarted
  Rendered,       // as the opensm.conf keys it changes (OpenSM's option table: SIGHUP or restart)
  SmhadRestart,   // not reloadable: the reload is refused, naming the key
};
// "live", "SIGHUP", "OpenSM restart", "per rendered key", "smhad restart":
// the words doc/configuration.md's Reload column starts with.
std::string_view to_string(ReloadEffect effect);

struct KeyInfo {
  // "sm_priority", "opensm.sweep_interval", "peers" (the list: an item added
  // or removed), "peers[].address" (an item's key), "continuity" (the section
  // given or not).
  std::string_view path;
  ReloadEffect effect = ReloadEffect::Live;
  // A change re-creates the HA engine with the new settings (its history,
  // such as the error counters' windows, starts afresh; OpenSM and
  // mastership are untouched).
  bool engine = false;
  // While `continuity` is on, the peer channel has it from start (its peers,
  // the files it reads and writes): then a smhad restart.
  bool channel = false;
  // An integer key's range, from limits::kRangedKeys.
  std::optional<limits::IntRange> range;
  // Whether two configurations differ in this key: `differs` for a key of
  // the configuration, `peer_differs` for a key of a peers[] item.
  bool (*differs)(const Config&, const Config&) = nullptr;
  bool (*peer_differs)(const Peer&, const Peer&) = nullptr;
};

// Every key, in the loader's order (section by section, each section's keys
// in the order it checks them).
const std::vector<KeyInfo>& key_table();
// The entry of `path` ("peers[].lid", "health.error_window_s"), or nullptr.
const KeyInfo* find_key(std::string_view path);
// The key names the loader accepts in `section`: "" for the top level (its
// keys and sections), "peers[]" for a peers item, else a section ("failover").
std::vector<std::string> key_names(std::string_view section);
// `written` ("peers[3].address", "health.error_thresholds.symbol_errors",
// "opensm.extra.lmc", "hooks.master[0]") as the table names it
// ("peers[].address", "health.error_thresholds", "opensm.extra", "hooks").
std::string table_path(std::string_view written);

// One key a reload changes.
struct KeyChange {
  std::string key;        // as written in the YAML: "opensm.sweep_interval", "peers[1].address"
  const KeyInfo* info;    // its table entry
  ReloadEffect effect;    // info->effect, or SmhadRestart for a key the running peer channel has
};

// Every key that differs between `current` and `next`, in the table's order
// (a peers[] key per item, the items in order, after "peers"). Adding or
// removing `continuity` is the one key "continuity"; its keys are compared
// only when both have the section. Empty: nothing a reload would change.
std::vector<KeyChange> changed_keys(const Config& current, const Config& next);

}  // namespace smha::config
