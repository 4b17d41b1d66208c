// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "smha/opensm/cli.hpp"
#include "test_support.hpp"

using namespace smha;
using namespace smha::opensm;
using namespace smha::os;
using namespace smha::opensm::test;

namespace {

class TempConfig {
 public:
  explicit TempConfig(const std::string& yaml) {
    dir_ = (std::filesystem::temp_directory_path() / ("smha-cli-" + std::to_string(::getpid())))
               .string();
    std::filesystem::create_directories(dir_);
    path_ = dir_ + "/smha.yaml";
    std::ofstream(path_) << yaml;
  }
  ~TempConfig() { std::filesystem::remove_all(dir_); }
  const std::string& path() const { return path_; }

 private:
  std::string dir_, path_;
};

const std::string kYaml =
    "node:\n  name: a\n  port_guid: 0x10\nsm_key: 0x2\nsa_key: 0x3\nopensm:\n  conf_path: /etc/opensm/smha.conf\n";

}  // namespace

TEST_CASE("check-config: exit 0 and a line naming the OpenSM") {
  TempConfig cfg(kYaml);
  FakeOpensm fake("opensm-3.3.23");
  std::ostringstream out, err;
  CHECK(run_check_config(cfg.path(), fake, out, err) == 0);
  CHECK(out.str() == cfg.path() + ": OK for OpenSM 3.3.23 (upstream) at /usr/sbin/opensm\n");
  CHECK(err.str().empty());
}

TEST_CASE("check-config: every error, then a count, exit 1") {
  TempConfig cfg("node:\n  name: a\n  port_guid: 0x10\nsm_priority: 16\nopensm:\n  sweep_interval: 0\n");
  FakeOpensm fake("opensm-3.3.23");
  std::ostringstream out, err;
  CHECK(run_check_config(cfg.path(), fake, out, err) == 1);
  CHECK(out.str().empty());
  CHECK(err.str() == "error: " + cfg.path() +
                         ":4:14: sm_priority: must be between 0 and 15 (got 16)\n"
                         "error: " + cfg.path() +
                         ":6:19: opensm.sweep_interval: must be > 0 (got 0)\n" +
                         cfg.path() + ": 2 error(s)\n");
}

TEST_CASE("check-config: no SM_Key and no SA key are warnings, not errors") {
  TempConfig cfg("node:\n  name: a\n  port_guid: 0x10\n");
  FakeOpensm fake("opensm-3.3.23");
  std::ostringstream out, err;
  CHECK(run_check_config(cfg.path(), fake, out, err) == 0);
  CHECK(err.str() == "warning: " + cfg.path() +
                         ": sm_key: not set: OpenSM's default SM_Key 0x1 is used; any SM on the "
                         "fabric can take mastership with it. Set the same sm_key_file (or "
                         "sm_key) on every head\n"
                         "warning: " + cfg.path() +
                         ": sa_key: is OpenSM's default 0x1: any host that puts 0x1 in an SA request is "
                         "a trusted SA client (every multicast member's PortGID, subscribers' QPNs, P_Key "
                         "tables). Set the same sa_key_file (or sa_key) on every head\n");
}

TEST_CASE("check-config: warnings do not fail the check") {
  TempConfig cfg(kYaml + "  sharp: true\n  downgrade_unsupported: true\n");
  FakeOpensm fake("opensm-3.3.23");
  std::ostringstream out, err;
  CHECK(run_check_config(cfg.path(), fake, out, err) == 0);
  CHECK(err.str() == "warning: " + cfg.path() +
                         ":8:10: opensm.sharp: is true, but OpenSM 3.3.23 (upstream) at "
                         "/usr/sbin/opensm cannot do SHARP; rendering without it "
                         "(downgrade_unsupported)\n");
}

TEST_CASE("render-config prints the file, --diff compares with conf_path") {
  TempConfig cfg(kYaml);
  FakeOpensm fake("opensm-3.3.23");
  MemoryFileSystem fs;
  std::ostringstream out, err;
  REQUIRE(run_render_config(cfg.path(), fake, fs, false, out, err) == kRenderOk);
  const std::string rendered = out.str();
  CHECK(parse_opensm_conf(rendered).at("guid") == "0x0000000000000010");
  // sm_priority 0 on the only head: standby 1, the value smhad starts with.
  CHECK(parse_opensm_conf(rendered).at("sm_priority") == "1");
  CHECK(err.str() ==
        "note: sm_priority 1: the standby value smhad starts with (standby 1, master 2, yield 0, "
        "claim 3); /etc/opensm/smha.conf not read\n");

  SECTION("no file yet: everything is added, exit kRenderDiffers") {
    std::ostringstream d, e;
    REQUIRE(run_render_config(cfg.path(), fake, fs, true, d, e) == kRenderDiffers);
    CHECK(d.str().rfind("--- /etc/opensm/smha.conf\n+++ rendered from " + cfg.path() + "\n+#", 0) == 0);
  }
  SECTION("up to date: exit kRenderOk") {
    fs.files["/etc/opensm/smha.conf"] = rendered;
    std::ostringstream d, e;
    REQUIRE(run_render_config(cfg.path(), fake, fs, true, d, e) == kRenderOk);
    CHECK(d.str() == "/etc/opensm/smha.conf is up to date\n");
  }
  SECTION("a changed key shows as -/+ lines, exit kRenderDiffers") {
    std::string old = rendered;
    old.replace(old.find("sweep_interval "), 15, "sweep_interval 99 ");
    fs.files["/etc/opensm/smha.conf"] = old;
    std::ostringstream d, e;
    REQUIRE(run_render_config(cfg.path(), fake, fs, true, d, e) == kRenderDiffers);
    CHECK(d.str().find("\n-sweep_interval 99 ") != std::string::npos);
    CHECK(d.str().find("\n+sweep_interval ") != std::string::npos);
    CHECK(fs.writes.empty());  // --diff never writes
  }
  SECTION("a priority that is none of this head's values is shown as changed") {
    std::string old = rendered;
    old.replace(old.find("sm_priority 1"), 13, "sm_priority 5");
    fs.files["/etc/opensm/smha.conf"] = old;
    std::ostringstream d, e;
    REQUIRE(run_render_config(cfg.path(), fake, fs, true, d, e) == kRenderDiffers);
    CHECK(d.str().find("\n-sm_priority 5\n+sm_priority 1\n") != std::string::npos);
  }
  SECTION("an unreadable conf_path is an error") {
    fs.read_error = make_error(Errc::Io, "Permission denied");
    std::ostringstream d, e;
    CHECK(run_render_config(cfg.path(), fake, fs, true, d, e) == kRenderError);
    CHECK(e.str() == "error: cannot read /etc/opensm/smha.conf: Permission denied\n");
  }
}

TEST_CASE("render-config shows the priority OpenSM runs with and not the configured one") {
  // head a 15, head b 14: standby 13 (a) / 12 (b), master 14, yield 11, claim 15.
  TempConfig cfg(kYaml + "sm_priority: 15\npeers:\n  - name: b\n    port_guid: 0x20\n    sm_priority: 14\n");
  FakeOpensm fake("opensm-3.3.23");
  MemoryFileSystem fs;
  SECTION("no file: the standby value smhad starts with") {
    std::ostringstream out, err;
    REQUIRE(run_render_config(cfg.path(), fake, fs, false, out, err) == kRenderOk);
    CHECK(parse_opensm_conf(out.str()).at("sm_priority") == "13");
  }
  SECTION("smhad wrote the master value: render-config and --diff agree with it") {
    fs.files["/etc/opensm/smha.conf"] = "sm_priority 14\n";
    std::ostringstream o2, e2;
    REQUIRE(run_render_config(cfg.path(), fake, fs, false, o2, e2) == kRenderOk);
    CHECK(parse_opensm_conf(o2.str()).at("sm_priority") == "14");
    CHECK(e2.str() ==
          "note: sm_priority 14: the value in the current file (standby 13, master 14, yield 11, claim 15)\n");
    fs.files["/etc/opensm/smha.conf"] = o2.str();  // what smhad wrote as master
    std::ostringstream d, e;
    CHECK(run_render_config(cfg.path(), fake, fs, true, d, e) == kRenderOk);
    CHECK(d.str() == "/etc/opensm/smha.conf is up to date\n");
  }
}

TEST_CASE("render-config with an invalid file prints errors only") {
  TempConfig cfg("node:\n  name: a\n");
  FakeOpensm fake("opensm-3.3.23");
  MemoryFileSystem fs;
  std::ostringstream out, err;
  CHECK(run_render_config(cfg.path(), fake, fs, false, out, err) == 1);
  CHECK(out.str().empty());
  CHECK(err.str() == "error: " + cfg.path() +
                         ":1:1: node: missing the IB port: set 'port_guid', or 'ca' (and 'port')\n");
  CHECK(fake.runs == 0);
}

TEST_CASE("ReadOnlyFileSystem reads and refuses to write") {
  TempConfig cfg("hello\n");
  ReadOnlyFileSystem fs;
  auto r = fs.read(cfg.path());
  REQUIRE(r.ok());
  CHECK(*r == "hello\n");
  auto missing = fs.read("/nonexistent/smha/x");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().code == Errc::NotFound);
  Status w = fs.write_atomic(cfg.path(), "x", 0600);
  REQUIRE_FALSE(w.ok());
  CHECK(w.error().code == Errc::Permission);
  CHECK(*fs.read(cfg.path()) == "hello\n");
}

TEST_CASE("ReadOnlyFileSystem does not block on a FIFO and refuses a directory") {
  TempConfig cfg("x\n");
  const std::string fifo = std::filesystem::path(cfg.path()).parent_path().string() + "/fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  ReadOnlyFileSystem fs;
  auto r = fs.read(fifo);  // no writer: a blocking open would hang here
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message == fifo + ": not a regular file");
  auto d = fs.read(std::filesystem::path(cfg.path()).parent_path().string());
  REQUIRE_FALSE(d.ok());
  CHECK(d.error().code == Errc::Io);
}
