// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include <catch2/catch.hpp>

#include "smha/opensm/conf_writer.hpp"
#include "test_support.hpp"

using namespace smha;
using namespace smha::opensm;
using namespace smha::os;
using namespace smha::opensm::test;

TEST_CASE("write_if_changed writes 0600 only when the content differs") {
  MemoryFileSystem fs;
  auto first = write_if_changed(fs, "/var/lib/smha/opensm.conf", "sm_priority 1\n");
  REQUIRE(first.ok());
  CHECK(*first);
  REQUIRE(fs.writes.size() == 1);
  CHECK(fs.writes[0].path == "/var/lib/smha/opensm.conf");
  CHECK(fs.writes[0].content == "sm_priority 1\n");
  CHECK(fs.writes[0].mode == 0600);

  auto same = write_if_changed(fs, "/var/lib/smha/opensm.conf", "sm_priority 1\n");
  REQUIRE(same.ok());
  CHECK_FALSE(*same);
  CHECK(fs.writes.size() == 1);

  auto changed = write_if_changed(fs, "/var/lib/smha/opensm.conf", "sm_priority 2\n");
  REQUIRE(changed.ok());
  CHECK(*changed);
  REQUIRE(fs.writes.size() == 2);
  CHECK(fs.files.at("/var/lib/smha/opensm.conf") == "sm_priority 2\n");
}

TEST_CASE("write_if_changed: errors leave the file alone") {
  MemoryFileSystem fs;
  fs.files["/c"] = "old\n";
  fs.read_error = make_error(Errc::Io, "/c: Permission denied");
  auto r = write_if_changed(fs, "/c", "new\n");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == Errc::Io);
  CHECK(fs.writes.empty());

  fs.read_error.reset();
  fs.write_error = make_error(Errc::Io, "/c: No space left on device");
  auto w = write_if_changed(fs, "/c", "new\n");
  REQUIRE_FALSE(w.ok());
  CHECK(w.error().message == "/c: No space left on device");
  CHECK(fs.files.at("/c") == "old\n");
}
