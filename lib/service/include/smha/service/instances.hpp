// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// Several smhad on one head, one per fabric (the template unit smhad@NAME
// reads /etc/smha/NAME.yaml; smhad.service reads /etc/smha/smha.yaml): the
// instances configured beside one another must not share a port, a file, a
// socket, a lock or a metrics port.
#pragma once

#include <string>
#include <vector>

#include "smha/config/config.hpp"

namespace smha::service {

// The instance name a configuration file stands for: NAME for NAME.yaml (the
// unit smhad@NAME), "" for smha.yaml (the one-fabric unit smhad.service).
std::string instance_of_file(const std::string& path);

// True when the unit of instance `name` (smhad@NAME.service, or smhad.service
// for "") is enabled: linked from a *.wants directory under `units_dir`.
bool instance_enabled(const std::string& name, const std::string& units_dir = "/etc/systemd/system");

// The other instances configured beside `mine`: the regular files *.yaml in
// the directory of `mine.source_path` (at most `max_files`) whose unit is
// enabled or whose control socket exists (the instance runs). A spare copy
// that is neither (fab0-old.yaml) is not an instance, and a file that does not
// load is left to its own check. Returns one message for each thing `mine`
// would share with one of them, naming that file, e.g. "state_dir
// /var/lib/smha/fab0 is also the state_dir of /etc/smha/fab2.yaml (smhad@fab2)".
std::vector<std::string> instance_conflicts(const config::Config& mine,
                                            const std::string& units_dir = "/etc/systemd/system",
                                            std::size_t max_files = 256);

}  // namespace smha::service
