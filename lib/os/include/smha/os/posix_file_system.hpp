// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// PosixFileSystem: the real FileSystem. write_atomic() writes a temporary file in
// the target's directory (O_EXCL, created with `mode` & 07777 so a secret is never
// readable by others, not even briefly), fsyncs it, rename()s it over the target
// and fsyncs the directory, so after a crash the file is either the old or the new
// one, complete. The target's directory must exist. The umask does not apply: the
// mode is set with fchmod.
#pragma once

#include "smha/os/file_system.hpp"

namespace smha::os {

class PosixFileSystem final : public FileSystem {
 public:
  // Errors: "io" naming the path and the failing call; `path` is unchanged and no
  // temporary file is left behind. Exception: if only the final directory fsync
  // fails, the new content is already in place (the message says "fsync directory").
  Status write_atomic(const std::string& path, std::string_view content, unsigned mode) override;
  // Errors: "not_found" if `path` does not exist, "io" otherwise.
  Result<std::string> read(const std::string& path) const override;
  Result<Tail> read_tail(const std::string& path, std::uint64_t from, std::size_t max) const override;
  // stat(2); error "not_regular" for a FIFO, device etc.
  Result<Stamp> stamp(const std::string& path) const override;
  // Opened with O_APPEND | O_NONBLOCK (a FIFO never blocks), written and closed.
  Status append(const std::string& path, std::string_view data, unsigned mode,
                std::size_t* written = nullptr) override;
  // Errors "io" naming the directory that could not be made.
  Status make_dirs(const std::string& path) override;
  // flock(LOCK_EX | LOCK_NB) on the file opened O_RDWR | O_CREAT | O_NOFOLLOW.
  Result<std::unique_ptr<Lock>> lock(const std::string& path) override;
};

}  // namespace smha::os
