// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/os/posix_file_system.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <random>
#include <system_error>

#include "smha/core/file_read.hpp"

namespace smha::os {

namespace {

std::string errno_text(int err) { return std::error_code(err, std::system_category()).message(); }

Error io_error(const std::string& what, const std::string& path, int err) {
  return make_error(err == ENOENT && what == "open" ? Errc::NotFound : Errc::Io,
                    what + " " + path + ": " + errno_text(err));
}

// Closes on scope exit.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

Status PosixFileSystem::write_atomic(const std::string& path, std::string_view content, unsigned mode) {
  auto slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  if (base.empty()) return make_error(Errc::Io, "write " + path + ": not a file name");

  std::random_device rd;
  std::string tmp;
  Fd file;
  for (int attempt = 0; attempt < 16 && file.fd < 0; ++attempt) {
    tmp = dir + "/." + base + ".tmp" + std::to_string(rd());
    file.fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode & 07777);
    if (file.fd < 0 && errno != EEXIST) return io_error("create", tmp, errno);
  }
  if (file.fd < 0) return make_error(Errc::Io, "create a temporary file in " + dir + ": too many collisions");

  auto fail = [&](const std::string& what, const std::string& p, int err) -> Status {
    ::unlink(tmp.c_str());
    return io_error(what, p, err);
  };
  if (::fchmod(file.fd, mode & 07777) != 0) return fail("chmod", tmp, errno);
  const char* p = content.data();
  std::size_t left = content.size();
  while (left > 0) {
    ssize_t n = ::write(file.fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail("write", tmp, errno);
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  if (::fsync(file.fd) != 0) return fail("fsync", tmp, errno);
  int fd = file.fd;
  file.fd = -1;
  if (::close(fd) != 0) return fail("close", tmp, errno);
  if (::rename(tmp.c_str(), path.c_str()) != 0) return fail("rename to", path, errno);

  Fd dirfd;
  dirfd.fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dirfd.fd < 0 || ::fsync(dirfd.fd) != 0)
    return io_error("fsync directory", dir, errno);  // the new file is in place, maybe not durable
  return Status::Ok();
}

Result<std::string> PosixFileSystem::read(const std::string& path) const {
  Fd file;
  file.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (file.fd < 0) return io_error("open", path, errno);
  std::string out;
  char buf[8192];
  for (;;) {
    ssize_t n = ::read(file.fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return io_error("read", path, errno);
    }
    if (n == 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  return out;
}

Result<FileSystem::Tail> PosixFileSystem::read_tail(const std::string& path, std::uint64_t from,
                                                    std::size_t max) const {
  Fd file;
  file.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (file.fd < 0) return io_error("open", path, errno);
  struct stat st {};
  if (::fstat(file.fd, &st) != 0) return io_error("stat", path, errno);
  if (!S_ISREG(st.st_mode))
    return make_error(Errc::NotRegular, path + ": " + file_kind(st.st_mode) + ", not a regular file");
  Tail t;
  t.size = static_cast<std::uint64_t>(st.st_size);
  std::uint64_t start = from <= t.size ? from : 0;
  if (t.size - start > max) start = t.size - max;
  t.text.resize(static_cast<std::size_t>(t.size - start));
  std::size_t got = 0;
  while (got < t.text.size()) {
    ssize_t n = ::pread(file.fd, t.text.data() + got, t.text.size() - got, static_cast<off_t>(start + got));
    if (n < 0) {
      if (errno == EINTR) continue;
      return io_error("read", path, errno);
    }
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  t.text.resize(got);
  return t;
}

Result<FileSystem::Stamp> PosixFileSystem::stamp(const std::string& path) const {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return io_error("stat", path, errno);
  if (!S_ISREG(st.st_mode))
    return make_error(Errc::NotRegular, path + ": " + file_kind(st.st_mode) + ", not a regular file");
  Stamp s;
  s.size = static_cast<std::uint64_t>(st.st_size);
  s.mtime_ns = static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  s.inode = static_cast<std::uint64_t>(st.st_ino);
  return s;
}

Status PosixFileSystem::append(const std::string& path, std::string_view data, unsigned mode, std::size_t* written) {
  if (written) *written = 0;
  Fd file;
  file.fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NONBLOCK | O_NOCTTY, mode & 07777);
  if (file.fd < 0) return io_error("open", path, errno);
  struct stat st {};
  if (::fstat(file.fd, &st) != 0) return io_error("stat", path, errno);
  if (!S_ISREG(st.st_mode))
    return make_error(Errc::NotRegular, path + ": " + file_kind(st.st_mode) + ", not a regular file");
  std::size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(file.fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      if (written) *written = done;
      return io_error("write", path, errno);
    }
    done += static_cast<std::size_t>(n);
  }
  if (written) *written = done;
  return Status::Ok();
}

Status PosixFileSystem::make_dirs(const std::string& path) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec) return make_error(Errc::Io, "mkdir -p " + path + ": " + ec.message());
  return Status::Ok();
}

namespace {

class FlockLock final : public FileSystem::Lock {
 public:
  FlockLock(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  ~FlockLock() override { ::close(fd_); }
  FlockLock(const FlockLock&) = delete;
  FlockLock& operator=(const FlockLock&) = delete;
  Status note(std::string_view text) override {
    if (::ftruncate(fd_, 0) != 0) return io_error("truncate", path_, errno);
    if (::pwrite(fd_, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size()))
      return io_error("write", path_, errno);
    return Status::Ok();
  }

 private:
  int fd_;
  std::string path_;
};

}  // namespace

Result<std::unique_ptr<FileSystem::Lock>> PosixFileSystem::lock(const std::string& path) {
  Fd file;
  file.fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY, 0644);
  if (file.fd < 0) return io_error("open", path, errno);
  struct stat st {};
  if (::fstat(file.fd, &st) != 0) return io_error("stat", path, errno);
  if (!S_ISREG(st.st_mode))
    return make_error(Errc::NotRegular, path + ": " + file_kind(st.st_mode) + ", not a regular file");
  if (::flock(file.fd, LOCK_EX | LOCK_NB) != 0) {
    const int e = errno;
    if (e == EWOULDBLOCK) return make_error(Errc::Busy, path + ": locked by another process");
    return io_error("lock", path, e);
  }
  const int fd = file.fd;
  file.fd = -1;
  return std::unique_ptr<Lock>(std::make_unique<FlockLock>(fd, path));
}

}  // namespace smha::os
