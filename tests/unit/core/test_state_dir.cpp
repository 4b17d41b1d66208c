// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include <catch2/catch.hpp>

#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "smha/core/state_dir.hpp"

using smha::check_writable_dir;

namespace {
struct Scratch {
  std::string path;
  Scratch() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "smha-statedir-XXXXXX").string();
    path = ::mkdtemp(tmpl.data());
  }
  ~Scratch() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};
std::string message(const smha::Status& st) { return st.ok() ? std::string("ok") : st.error().message; }
}  // namespace

TEST_CASE("state_dir: below a regular file names mkdir and ENOTDIR, created or not", "[state_dir]") {
  Scratch s;
  const std::string file = s.path + "/file";
  std::ofstream(file) << "x";
  const bool create = GENERATE(false, true);
  auto st = check_writable_dir(file + "/state/deeper", create);
  REQUIRE_FALSE(st.ok());
  CHECK(message(st) == "mkdir " + file + "/state: Not a directory (" + file + " is not a directory)");
  // The file itself as state_dir: open with O_DIRECTORY says what it is.
  auto st2 = check_writable_dir(file, create);
  CHECK(message(st2) == "open " + file + ": Not a directory");
}

TEST_CASE("state_dir: a directory smhad cannot write names the call and errno", "[state_dir]") {
  // Tests run as root, so a mode 0555 directory would be writable: use kernel
  // file systems. sysfs refuses new files (EACCES), procfs has no such entry.
  CHECK(message(check_writable_dir("/sys", false)) ==
        "open /sys/.smhad-probe-" + std::to_string(::getpid()) + ": Permission denied");
  CHECK(message(check_writable_dir("/sys/smha-state", true)) == "mkdir /sys/smha-state: Operation not permitted");
  CHECK(message(check_writable_dir("/proc/smha-state", true)) == "mkdir /proc/smha-state: No such file or directory");
  CHECK(message(check_writable_dir("/proc/smha-state", false)) ==
        "open /proc/.smhad-probe-" + std::to_string(::getpid()) + ": No such file or directory");
}

TEST_CASE("state_dir: a usable one passes, --check-config creates nothing, start-up the whole path",
          "[state_dir]") {
  Scratch s;
  CHECK(check_writable_dir(s.path, false).ok());
  CHECK(check_writable_dir(s.path + "/a/b/", false).ok());
  CHECK_FALSE(std::filesystem::exists(s.path + "/a"));
  CHECK(check_writable_dir(s.path + "/a/b/", true).ok());
  CHECK(std::filesystem::is_directory(s.path + "/a/b"));
  CHECK(check_writable_dir(s.path + "/a/b", true).ok());  // again: exists
  // No probe file left behind.
  CHECK(std::filesystem::is_empty(s.path + "/a/b"));
}
