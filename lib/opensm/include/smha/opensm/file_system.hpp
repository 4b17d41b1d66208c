// FileSystem: the seam through which smha writes opensm.conf and its state files.
// Real implementation: PosixFileSystem (temp + fsync + rename). The simulated
// fabric keeps files in memory, so a simulated OpenSM can read its rendered
// sm_priority on start and on SIGHUP, as the real one does.
#pragma once

#include <string>
#include <string_view>

#include "smha/core/result.hpp"

namespace smha::opensm {

class FileSystem {
 public:
  virtual ~FileSystem() = default;

  // Replaces `path` with `content` atomically (a reader sees the old or the new
  // file, never a mix) with permission bits `mode`. On failure `path` is unchanged.
  virtual Status write_atomic(const std::string& path, std::string_view content,
                              unsigned mode) = 0;

  // Whole file. Error code "not_found" if it does not exist.
  virtual Result<std::string> read(const std::string& path) const = 0;
};

}  // namespace smha::opensm
