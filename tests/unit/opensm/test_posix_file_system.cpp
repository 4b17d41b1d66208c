// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <filesystem>

#include "process_test_util.hpp"
#include "smha/os/posix_file_system.hpp"

using namespace smha::os;
using namespace smha::testing;

namespace {
unsigned mode_of(const std::string& path) {
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  return st.st_mode & 07777;
}
std::size_t entries(const std::string& dir) {
  return static_cast<std::size_t>(std::distance(std::filesystem::directory_iterator(dir), {}));
}
}  // namespace

TEST_CASE("write_atomic creates and replaces a file with the given mode, leaving no temporary", "[fs]") {
  ScratchDir dir;
  PosixFileSystem fs;
  const auto path = dir / "opensm.conf";
  const mode_t old_umask = ::umask(0);  // the mode must not depend on the umask
  auto st = fs.write_atomic(path, "sm_key 0x1\n", 0600);
  ::umask(old_umask);
  REQUIRE(st.ok());
  CHECK(read_text(path) == "sm_key 0x1\n");
  CHECK(mode_of(path) == 0600);

  REQUIRE(fs.write_atomic(path, "sm_key 0x2\nsm_priority 3\n", 0640).ok());
  CHECK(read_text(path) == "sm_key 0x2\nsm_priority 3\n");
  CHECK(mode_of(path) == 0640);
  CHECK(entries(dir.path()) == 1);

  auto back = fs.read(path);
  REQUIRE(back.ok());
  CHECK(*back == "sm_key 0x2\nsm_priority 3\n");
  REQUIRE(fs.write_atomic(path, "", 0600).ok());
  CHECK(fs.read(path).value().empty());
}

TEST_CASE("write_atomic failures name the path and change nothing", "[fs]") {
  ScratchDir dir;
  PosixFileSystem fs;
  auto missing_dir = fs.write_atomic(dir / "no-such-dir/opensm.conf", "x", 0600);
  REQUIRE_FALSE(missing_dir.ok());
  CHECK(missing_dir.error().code == smha::Errc::Io);
  CHECK(missing_dir.error().message.find("no-such-dir") != std::string::npos);

  // Target is a directory: rename fails, the temporary is removed.
  std::filesystem::create_directory(dir / "conf.d");
  auto onto_dir = fs.write_atomic(dir / "conf.d", "x", 0600);
  REQUIRE_FALSE(onto_dir.ok());
  CHECK(onto_dir.error().message.find("conf.d") != std::string::npos);
  CHECK(std::filesystem::is_directory(dir / "conf.d"));
  CHECK(entries(dir.path()) == 1);
}

TEST_CASE("read reports a missing file as not_found", "[fs]") {
  ScratchDir dir;
  PosixFileSystem fs;
  auto r = fs.read(dir / "absent");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == smha::Errc::NotFound);
  CHECK(r.error().message.find("absent") != std::string::npos);
}
