// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// Writing opensm.conf: it carries the SM key, so mode 0600, and only when the
// content changed (an unchanged file keeps its mtime and causes no reload).
#pragma once

#include <string>
#include <string_view>

#include "smha/core/result.hpp"
#include "smha/os/file_system.hpp"

namespace smha::opensm {

inline constexpr unsigned kConfMode = 0600;

// Writes `content` to `path` through fs.write_atomic (mode 0600) unless the file
// already holds exactly `content`. Returns true if it wrote, false if unchanged.
// A read error other than "not_found" is returned and nothing is written; on a
// write error the old file is left as it was (FileSystem contract).
Result<bool> write_if_changed(os::FileSystem& fs, const std::string& path, std::string_view content);

}  // namespace smha::opensm
