// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// FileSystem: the seam through which smha writes opensm.conf and its state files.
// Real implementation: PosixFileSystem (temp + fsync + rename). The simulated
// fabric keeps files in memory, so a simulated OpenSM can read its rendered
// sm_priority on start and on SIGHUP, as the real one does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "smha/core/result.hpp"

namespace smha::os {

class FileSystem {
 public:
  virtual ~FileSystem() = default;

  // Replaces `path` with `content` atomically (a reader sees the old or the new
  // file, never a mix) with permission bits `mode`. On failure `path` is unchanged.
  virtual Status write_atomic(const std::string& path, std::string_view content,
                              unsigned mode) = 0;

  // Whole file. Error code "not_found" if it does not exist.
  virtual Result<std::string> read(const std::string& path) const = 0;

  // A bounded read of what a growing file gained: the bytes from offset `from` to
  // the end, at most the last `max` of them (from 0 if the file is now shorter
  // than `from`: it was truncated or rotated). `size` is the file's size.
  // Error "not_found"; "not_regular" for a FIFO, device etc. (never blocks).
  // Default: through read() (in-memory implementations).
  struct Tail {
    std::string text;
    std::uint64_t size = 0;
  };
  virtual Result<Tail> read_tail(const std::string& path, std::uint64_t from, std::size_t max) const {
    auto whole = read(path);
    if (!whole) return whole.error();
    Tail t;
    t.size = whole->size();
    std::size_t start = from <= whole->size() ? static_cast<std::size_t>(from) : 0;
    if (whole->size() - start > max) start = whole->size() - max;
    t.text = whole->substr(start);
    return t;
  }
};

}  // namespace smha::os
