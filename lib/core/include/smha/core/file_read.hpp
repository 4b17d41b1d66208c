// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// Reading a small input file safely on the event loop: only a regular file is
// read (a FIFO, a device such as /dev/zero, a directory or a socket is refused
// without blocking: the open is O_NONBLOCK), and never more than `max_bytes`.
#pragma once

#include <cstddef>
#include <string>

#include "smha/core/result.hpp"

namespace smha {

// Size caps of the files smha reads.
inline constexpr std::size_t kMaxConfigFileBytes = 1024 * 1024;  // smha.yaml
inline constexpr std::size_t kMaxKeyFileBytes = 4096;            // sm_key_file

// The whole content of `path`; `mode`, if given, gets its st_mode. Errors (the
// message says what is wrong without the path, which callers name, e.g.
// "open: No such file or directory", "is a FIFO, not a regular file"):
//   "not_found"    the path does not exist
//   "not_regular"  it is not a regular file ("is a FIFO", "is a directory", ...)
//   "too_large"    it holds more than max_bytes
//   "io"           open/fstat/read failed otherwise
Result<std::string> read_regular_file(const std::string& path, std::size_t max_bytes, unsigned* mode = nullptr);

// "a FIFO", "a directory", "a character device", ... for a st_mode.
std::string file_kind(unsigned mode);

}  // namespace smha
