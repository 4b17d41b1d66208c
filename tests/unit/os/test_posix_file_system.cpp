// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>

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

TEST_CASE("append adds to a file, creating it with the mode, and refuses a FIFO without blocking", "[fs]") {
  ScratchDir dir;
  PosixFileSystem fs;
  const std::string path = dir / "events.jsonl";
  std::size_t written = 99;
  REQUIRE(fs.append(path, "one\n", 0640, &written).ok());
  CHECK(written == 4);
  CHECK(mode_of(path) == 0640);
  REQUIRE(fs.append(path, "two\n", 0600).ok());
  CHECK(read_text(path) == "one\ntwo\n");
  CHECK(mode_of(path) == 0640);  // an existing file keeps its mode

  const std::string fifo = dir / "fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  auto r = fs.append(fifo, "x\n", 0640, &written);  // no reader: must not block
  REQUIRE_FALSE(r.ok());
  CHECK(written == 0);
  CHECK(r.error().message.find(fifo) != std::string::npos);

  auto missing = fs.append(dir / "no-such-dir/events.jsonl", "x", 0640);
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().message.find("no-such-dir") != std::string::npos);
}

TEST_CASE("make_dirs creates parents, accepts an existing directory and names what failed", "[fs]") {
  ScratchDir dir;
  PosixFileSystem fs;
  REQUIRE(fs.make_dirs(dir / "a/b/c").ok());
  CHECK(std::filesystem::is_directory(dir / "a/b/c"));
  REQUIRE(fs.make_dirs(dir / "a/b/c").ok());
  std::ofstream(dir / "file") << "x";
  auto below_file = fs.make_dirs(dir / "file/state");
  REQUIRE_FALSE(below_file.ok());
  CHECK(below_file.error().code == smha::Errc::Io);
  CHECK(below_file.error().message.find("file/state") != std::string::npos);
}

TEST_CASE("lock is exclusive until released, and its note is readable by the next one", "[fs]") {
  ScratchDir dir;
  PosixFileSystem fs;
  const std::string path = dir / "smhad.lock";
  auto first = fs.lock(path);
  REQUIRE(first.ok());
  REQUIRE(first.value()->note("1234\n").ok());
  // flock locks belong to the open file description: a second open in the
  // same process contends as another process would.
  auto second = fs.lock(path);
  REQUIRE_FALSE(second.ok());
  CHECK(second.error().code == smha::Errc::Busy);
  CHECK(second.error().message.find(path) != std::string::npos);
  CHECK(fs.read(path).value() == "1234\n");
  first.value().reset();
  auto third = fs.lock(path);
  REQUIRE(third.ok());

  std::filesystem::create_symlink(path, dir / "link.lock");
  auto via_link = fs.lock(dir / "link.lock");
  REQUIRE_FALSE(via_link.ok());
  CHECK(via_link.error().code == smha::Errc::Io);
}
