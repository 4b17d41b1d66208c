// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/opensm/conf_writer.hpp"

namespace smha::opensm {

Result<bool> write_if_changed(os::FileSystem& fs, const std::string& path, std::string_view content) {
  auto current = fs.read(path);
  if (current.ok()) {
    if (*current == content) return false;
  } else if (current.error().code != Errc::NotFound) {
    return current.error();
  }
  Status st = fs.write_atomic(path, content, kConfMode);
  if (!st.ok()) return st.error();
  return true;
}

}  // namespace smha::opensm
