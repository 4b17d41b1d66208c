// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/core/file_read.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace smha {

std::string file_kind(unsigned mode) {
  switch (mode & S_IFMT) {
    case S_IFREG: return "a regular file";
    case S_IFDIR: return "a directory";
    case S_IFIFO: return "a FIFO";
    case S_IFCHR: return "a character device";
    case S_IFBLK: return "a block device";
    case S_IFSOCK: return "a socket";
    case S_IFLNK: return "a symlink";
  }
  return "not a regular file";
}

namespace {

// An fd closed when it goes out of scope.
struct Fd {
  int fd = -1;
  Fd() = default;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// Opens `path` for reading without blocking (O_NONBLOCK: opening a FIFO
// without a writer must not wait for one) and checks that it is a regular file.
Result<struct stat> open_regular(const std::string& path, Fd& out) {
  out.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (out.fd < 0) {
    int e = errno;
    return make_error(e == ENOENT ? Errc::NotFound : Errc::Io, std::string("open: ") + std::strerror(e));
  }
  struct stat st {};
  if (::fstat(out.fd, &st) != 0) return make_error(Errc::Io, std::string("fstat: ") + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return make_error(Errc::NotRegular, "is " + file_kind(st.st_mode) + ", not a regular file");
  return st;
}

}  // namespace

Result<std::string> read_regular_file(const std::string& path, std::size_t max_bytes, unsigned* mode) {
  Fd file;
  auto opened = open_regular(path, file);
  if (!opened) return opened.error();
  const int fd = file.fd;
  const struct stat st = opened.value();
  if (mode != nullptr) *mode = st.st_mode;
  if (static_cast<std::size_t>(st.st_size) > max_bytes) {
    return make_error(Errc::TooLarge, "is " + std::to_string(st.st_size) + " bytes, over the limit of " +
                                       std::to_string(max_bytes));
  }
  std::string out;
  out.reserve(static_cast<std::size_t>(st.st_size));
  char buf[8192];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return make_error(Errc::Io, std::string("read: ") + std::strerror(errno));
    }
    if (n == 0) break;
    out.append(buf, static_cast<std::size_t>(n));
    if (out.size() > max_bytes) {  // it grew while we read
      return make_error(Errc::TooLarge, "holds more than the limit of " + std::to_string(max_bytes) + " bytes");
    }
  }
  return out;
}

}  // namespace smha
