// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// Whether a directory smhad writes to (state_dir) is usable, with the failing
// system call and its errno in the message: "mkdir /a/file/state: Not a
// directory", "open /sys/.smhad-probe-12: Permission denied". OpenSM's cwd is
// state_dir, so an unusable one otherwise shows up only as OpenSM failing to
// start (a chdir in the child) after smhad reported READY.
#pragma once

#include <string>

#include "smha/core/result.hpp"

namespace smha {

// create: make `path` and its missing parents (mode 0755), as start-up does.
// !create (--check-config): change nothing; the nearest existing ancestor must
// be a directory we can create entries in. Then (both) `path` must be a
// directory we can open and search (OpenSM's start chdirs into it) and
// create files in (a probe file, removed again). Error code "io".
Status check_writable_dir(const std::string& path, bool create);

}  // namespace smha
