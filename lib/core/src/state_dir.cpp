// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/core/state_dir.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace smha {

namespace {

Error call_failed(const std::string& call, const std::string& path, int err) {
  return make_error(Errc::Io, call + " " + path + ": " + std::strerror(err));
}

std::string parent_of(const std::string& path) {
  auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// Creates a probe file in `dir` and removes it: can we write there?
Status probe_create(const std::string& dir) {
  const std::string probe = (dir == "/" ? "" : dir) + "/.smhad-probe-" + std::to_string(::getpid());
  int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return call_failed("open", probe, errno);
  ::close(fd);
  ::unlink(probe.c_str());
  return Status::Ok();
}

}  // namespace

Status check_writable_dir(const std::string& path_in, bool create) {
  std::string path = path_in;
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  if (path.empty()) return make_error(Errc::Io, "empty directory path");

  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    // ENOTDIR: a component is not a directory; the walk below says which.
    if (errno != ENOENT && errno != ENOTDIR) return call_failed("stat", path, errno);
    // The missing components, from the nearest existing ancestor down.
    std::string existing = parent_of(path);
    while (::stat(existing.c_str(), &st) != 0) {
      if (errno != ENOENT && errno != ENOTDIR) return call_failed("stat", existing, errno);
      existing = parent_of(existing);
    }
    if (!S_ISDIR(st.st_mode)) {
      // What mkdir below it fails with; the probe would say the same.
      const std::string child = path.substr(0, path.find('/', existing.size() + 1));
      return make_error(Errc::Io, "mkdir " + child + ": " + std::strerror(ENOTDIR) + " (" + existing +
                                  " is not a directory)");
    }
    if (!create) return probe_create(existing);
    std::size_t pos = existing == "/" ? 1 : existing.size() + 1;
    while (pos <= path.size()) {
      auto end = path.find('/', pos);
      if (end == std::string::npos) end = path.size();
      const std::string part = path.substr(0, end);
      if (::mkdir(part.c_str(), 0755) != 0 && errno != EEXIST) return call_failed("mkdir", part, errno);
      pos = end + 1;
    }
  }
  // What OpenSM's chdir needs: a directory we can open (O_DIRECTORY fails with
  // ENOTDIR on anything else) and search.
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return call_failed("open", path, errno);
  ::close(fd);
  if (::access(path.c_str(), X_OK) != 0) return call_failed("access", path, errno);
  return probe_create(path);
}

}  // namespace smha
