// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// FileSystem: the seam through which smha writes opensm.conf and its state
// files, appends its event journal, creates its directories and takes its
// single-instance lock. Real implementation: PosixFileSystem (temp + fsync +
// rename, O_APPEND, flock). The simulated fabric keeps files in memory, so a
// simulated OpenSM can read its rendered sm_priority on start and on SIGHUP, as
// the real one does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
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

  // What tells one version of a file from the next without reading it: size,
  // modification time and inode (a rename-into-place changes the inode).
  // Default: error "unsupported" (in-memory implementations: callers read).
  struct Stamp {
    std::uint64_t size = 0;
    std::int64_t mtime_ns = 0;
    std::uint64_t inode = 0;
    friend bool operator==(const Stamp&, const Stamp&) = default;
  };
  virtual Result<Stamp> stamp(const std::string& path) const {
    return make_error(Errc::Unsupported, path + ": no file stamps here");
  }

  // Appends `data` to `path`, creating it with permission bits `mode` if it is
  // missing: plain write()s without fsync (a crash may lose the last appends,
  // never earlier ones). Error "not_regular" for a FIFO, device etc. (never
  // blocks). On an error a prefix of `data` may be in the file: `*written`, if
  // given, says how many bytes. Default: through read() and write_atomic()
  // (in-memory implementations).
  virtual Status append(const std::string& path, std::string_view data, unsigned mode,
                        std::size_t* written = nullptr) {
    if (written) *written = 0;
    auto old = read(path);
    if (!old && old.error().code != Errc::NotFound) return old.error();
    std::string text = old ? std::move(old).value() : std::string();
    text.append(data);
    if (auto st = write_atomic(path, text, mode); !st.ok()) return st;
    if (written) *written = data.size();
    return Status::Ok();
  }

  // Creates directory `path` and its missing parents (mode 0755), as mkdir -p;
  // an existing directory is fine. Default: nothing to create (in-memory files
  // have no directories).
  virtual Status make_dirs(const std::string& path) {
    (void)path;
    return Status::Ok();
  }

  // An exclusive lock, held until the object is destroyed (and by the kernel
  // until the process ends). note() replaces the lock file's content, for the
  // message another would-be holder prints (read it with read()).
  class Lock {
   public:
    virtual ~Lock() = default;
    virtual Status note(std::string_view text) = 0;
  };
  // Locks `path` (created with mode 0644 if missing; a symlink is refused)
  // without waiting. Error "busy" if another process holds it. Default: a lock
  // nobody else can contend for (in-memory implementations).
  virtual Result<std::unique_ptr<Lock>> lock(const std::string& path) {
    (void)path;
    struct Uncontended final : Lock {
      Status note(std::string_view) override { return Status::Ok(); }
    };
    return std::unique_ptr<Lock>(std::make_unique<Uncontended>());
  }
};

}  // namespace smha::os
