// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// What a reload (SIGHUP, `smctl reload`) cannot apply: the keys whose entry in
// the key table (config::key_table, and doc/configuration.md's Reload column)
// says "smhad restart". A reload that changes one of them is refused as a
// whole, naming each, and nothing changes.
#pragma once

#include <string>
#include <vector>

#include "smha/config/config.hpp"

namespace smha::service {

// The YAML keys (as written in the file, e.g. "control.socket",
// "continuity.certificate", "peers[1].address") that differ between
// `current` and `next` and take effect only when smhad restarts: those of
// config::changed_keys() whose effect is ReloadEffect::SmhadRestart, in the
// key table's order (config::key_table). Empty: everything that changed can
// be applied by the reload.
//
// The peer channel (`continuity`) is built once at start: adding or removing
// the section is "continuity", a changed key of it is named, and while it is
// on, what the channel took from other keys is too (KeyInfo::channel): the
// peers it knows (their number as "peers", a peer's name, port_guid or
// address) and the files it writes and reads (opensm.sa_db_file,
// opensm.dump_files_dir). A peer's lid, dr_path or sm_priority, and every
// peer change without continuity, are the HA engine's: the reload applies them.
std::vector<std::string> restart_keys(const config::Config& current, const config::Config& next);

}  // namespace smha::service
