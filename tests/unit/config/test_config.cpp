// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "smha/config/config.hpp"
#include "smha/core/limits.hpp"

using namespace smha;
using namespace smha::config;

namespace {

std::vector<std::string> errors_of(const std::string& yaml) {
  auto r = load_config_from_string(yaml, "t.yaml");
  REQUIRE_FALSE(r.ok());
  std::vector<std::string> out;
  for (const auto& d : r.errors()) out.push_back(d.to_string());
  return out;
}

Config load_ok(const std::string& yaml) {
  auto r = load_config_from_string(yaml, "t.yaml");
  INFO(r.error_text());
  REQUIRE(r.ok());
  return r.value();
}

const std::string kNode = "node:\n  name: head01\n  port_guid: 0x10\n";

// A file in a fresh temp directory, removed at scope exit.
class TempFile {
 public:
  explicit TempFile(const std::string& content, std::filesystem::perms perms =
                                                    std::filesystem::perms::owner_read |
                                                    std::filesystem::perms::owner_write) {
    std::string tmpl = (std::filesystem::temp_directory_path() / "smha-test-XXXXXX").string();
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/file";
    std::ofstream(path_) << content;
    std::filesystem::permissions(path_, perms);
  }
  ~TempFile() { std::filesystem::remove_all(dir_); }
  const std::string& path() const { return path_; }

 private:
  std::string dir_, path_;
};

}  // namespace

TEST_CASE("a minimal config gets every documented default") {
  Config c = load_ok(kNode);
  CHECK(c.source_path == "t.yaml");
  CHECK(c.node_name == "head01");
  CHECK(c.port.port_guid == Guid{0x10});
  CHECK(c.port.ca.empty());
  CHECK(c.peers.empty());
  CHECK(c.sm_priority == 0);
  CHECK(c.failover.poll_interval == std::chrono::milliseconds(100));
  CHECK(c.failover.misses_before_takeover == 3);
  CHECK(c.failover.failback == FailbackPolicy::Sticky);
  CHECK(c.failover.preempt_holddown == std::chrono::seconds(30));
  CHECK(c.failover.opensm_polling_timeout == std::chrono::milliseconds(2000));
  CHECK(c.failover.opensm_polling_retries == 4);
  CHECK(c.sm_key == 1);
  CHECK_FALSE(c.sm_key_set);
  CHECK(c.opensm.binary == "/usr/sbin/opensm");
  CHECK(c.opensm.flavor == OpensmFlavor::Auto);
  CHECK(c.opensm.routing_engine == "ftree,updn");
  CHECK(c.opensm.sweep_interval_s == 10);
  CHECK(c.opensm.max_wire_smps == 8);
  CHECK_FALSE(c.opensm.adaptive_routing);
  CHECK_FALSE(c.opensm.sharp);
  CHECK_FALSE(c.opensm.downgrade_unsupported);
  CHECK(c.opensm.log_file == "/var/log/opensm.log");
  CHECK(c.opensm.dump_files_dir == "/var/log/");
  CHECK(c.opensm.cache_dir == "/var/cache/opensm");
  CHECK(c.opensm.conf_path == "/var/lib/smha/opensm.conf");
  CHECK(c.opensm.lid_continuity);
  CHECK(c.opensm.honor_guid2lid_file);  // follows lid_continuity
  CHECK(c.opensm.sa_db_dump);
  CHECK(c.opensm.sa_db_file.empty());
  CHECK(c.opensm.extra.empty());
  CHECK(c.control.socket_path == "/run/smha/smhad.sock");
  CHECK(c.control.group == "smha");
  CHECK(c.hooks.empty());
  CHECK(c.hook_timeout == std::chrono::seconds(10));
  CHECK(c.state_dir == "/var/lib/smha");
}

TEST_CASE("the shipped example config loads") {
  // As shipped it needs no other file (the SM_Key is left at OpenSM's default,
  // which --check-config warns about: doc/packaging.md).
  auto r = load_config(SMHA_EXAMPLE_CONFIG);
  INFO(r.error_text());
  REQUIRE(r.ok());
  CHECK_FALSE(r.value().sm_key_set);
  CHECK(r.value().opensm.crash_loop_count == 5);
}

TEST_CASE("every key is read") {
  TempFile hook("#!/bin/sh\n");
  Config c = load_ok(R"(node:
  name: head02
  ca: mlx5_1
  port: 2
peers:
  - name: head01
    port_guid: 0x0002c90300a1b2c1
  - name: head03
    port_guid: 0x0002C90300A1B2C3
sm_priority: 15
failover:
  poll_interval_ms: 50
  misses_before_takeover: 5
  failback: preempt
  preempt_holddown_s: 120
  opensm_polling_timeout_ms: 5000
  opensm_polling_retries: 2
sm_key: 0xdeadbeef
opensm:
  binary: /opt/opensm/bin/opensm
  flavor: nvidia
  routing_engine: ar_ftree
  sweep_interval: 30
  adaptive_routing: true
  sharp: true
  downgrade_unsupported: true
  log_file: /var/log/smha/opensm.log
  dump_files_dir: /var/log/smha/
  cache_dir: /var/lib/smha/cache
  conf_path: /run/smha/opensm.conf
  honor_guid2lid_file: true
  sa_db_dump: false
  sa_db_file: /var/lib/smha/opensm-sa.dump
  extra:
    qos: true
    lmc: 2
    accum_log_file: FALSE
control:
  socket: /run/x/s.sock
  group: ibadm
hooks:
  master: /etc/smha/hooks/a
  standby: [/etc/smha/hooks/b, /etc/smha/hooks/c]
hook_timeout_s: 3
state_dir: /srv/smha
)");
  CHECK(c.node_name == "head02");
  CHECK(c.port.ca == "mlx5_1");
  CHECK(c.port.port == 2);
  CHECK_FALSE(c.port.port_guid);
  REQUIRE(c.peers.size() == 2);
  CHECK(c.peers[0].name == "head01");
  CHECK(c.peers[0].port_guid == Guid{0x0002c90300a1b2c1});
  CHECK(c.peers[1].port_guid == Guid{0x0002c90300a1b2c3});
  CHECK(c.sm_priority == 15);
  CHECK(c.failover.poll_interval == std::chrono::milliseconds(50));
  CHECK(c.failover.misses_before_takeover == 5);
  CHECK(c.failover.failback == FailbackPolicy::Preempt);
  CHECK(c.failover.preempt_holddown == std::chrono::seconds(120));
  CHECK(c.failover.opensm_polling_timeout == std::chrono::milliseconds(5000));
  CHECK(c.failover.opensm_polling_retries == 2);
  CHECK(c.sm_key == 0xdeadbeef);
  CHECK(c.sm_key_set);
  CHECK(c.opensm.binary == "/opt/opensm/bin/opensm");
  CHECK(c.opensm.flavor == OpensmFlavor::Nvidia);
  CHECK(c.opensm.routing_engine == "ar_ftree");
  CHECK(c.opensm.sweep_interval_s == 30);
  CHECK(c.opensm.adaptive_routing);
  CHECK(c.opensm.sharp);
  CHECK(c.opensm.downgrade_unsupported);
  CHECK(c.opensm.log_file == "/var/log/smha/opensm.log");
  CHECK(c.opensm.dump_files_dir == "/var/log/smha/");
  CHECK(c.opensm.cache_dir == "/var/lib/smha/cache");
  CHECK(c.opensm.conf_path == "/run/smha/opensm.conf");
  CHECK(c.opensm.honor_guid2lid_file);
  CHECK_FALSE(c.opensm.sa_db_dump);
  CHECK(c.opensm.sa_db_file == "/var/lib/smha/opensm-sa.dump");
  // Sorted by key; YAML booleans become OpenSM's TRUE/FALSE.
  REQUIRE(c.opensm.extra.size() == 3);
  CHECK(c.opensm.extra[0].key == "accum_log_file");
  CHECK(c.opensm.extra[0].value == "FALSE");
  CHECK(c.opensm.extra[1].key == "lmc");
  CHECK(c.opensm.extra[1].value == "2");
  CHECK(c.opensm.extra[2].key == "qos");
  CHECK(c.opensm.extra[2].value == "TRUE");
  CHECK(c.opensm.extra[2].pos.line == 35);
  CHECK(c.opensm.extra[2].pos.column == 5);
  CHECK(c.control.socket_path == "/run/x/s.sock");
  CHECK(c.control.group == "ibadm");
  CHECK(c.hooks.at("master") == std::vector<std::string>{"/etc/smha/hooks/a"});
  CHECK(c.hooks.at("standby") ==
        std::vector<std::string>{"/etc/smha/hooks/b", "/etc/smha/hooks/c"});
  CHECK(c.hook_timeout == std::chrono::seconds(3));
  CHECK(c.state_dir == "/srv/smha");
  // Positions of values are kept for later checks.
  CHECK(c.position_of("opensm.sharp").line == 25);
  CHECK(c.position_of("opensm.sharp").column == 10);
  CHECK(c.position_of("no.such.key").line == 0);
}

TEST_CASE("empty sections mean their defaults") {
  Config c = load_ok(kNode + "peers:\nhooks:\nfailover:\ncontrol:\nopensm:\n  extra:\n");
  CHECK(c.peers.empty());
  CHECK(c.hooks.empty());
  CHECK(c.opensm.extra.empty());
  CHECK(c.failover.misses_before_takeover == 3);
  CHECK(c.control.group == "smha");
  CHECK(load_ok(kNode + "opensm:\n").opensm.routing_engine == "ftree,updn");
  CHECK(errors_of("node:\n") ==
        std::vector<std::string>{"t.yaml:1:1: node: missing required key 'name'",
                                 "t.yaml:1:1: node: missing the IB port: set 'port_guid', or "
                                 "'ca' (and 'port')"});
}

TEST_CASE("ca without port means port 1") {
  Config c = load_ok("node:\n  name: a\n  ca: mlx5_0\n");
  CHECK(c.port.ca == "mlx5_0");
  CHECK(c.port.port == 1);
}

TEST_CASE("sm_key_file: read, trimmed, parsed") {
  TempFile key("  0x00000000C0FFEE01 \n");
  Config c = load_ok(kNode + "sm_key_file: " + key.path() + "\n");
  CHECK(c.sm_key == 0xc0ffee01);
  CHECK(c.sm_key_set);
}

TEST_CASE("sm_key_file errors name the file and the key") {
  TempFile key("not-a-key\n");
  CHECK(errors_of(kNode + "sm_key_file: " + key.path() + "\n") ==
        std::vector<std::string>{"t.yaml:4:14: sm_key_file: the key in " + key.path() +
                                 " must be 0x followed by 1 to 16 hex digits (got \"not-a-key\")"});
  CHECK(errors_of(kNode + "sm_key_file: /nonexistent/smha/key\n") ==
        std::vector<std::string>{
            "t.yaml:4:14: sm_key_file: cannot read /nonexistent/smha/key: open: No such file or directory"});
  CHECK(errors_of(kNode + "sm_key_file: relative/key\n") ==
        std::vector<std::string>{
            "t.yaml:4:14: sm_key_file: must be an absolute path (got \"relative/key\")"});
  CHECK(errors_of(kNode + "sm_key: 0x1\nsm_key_file: /etc/smha/sm_key\n") ==
        std::vector<std::string>{
            "t.yaml:5:1: sm_key_file: give either sm_key or sm_key_file, not both"});
}

TEST_CASE("sm_key_file and -c read only small regular files, never blocking") {
  // A FIFO without a writer would block a plain open(); a device never ends.
  std::string dir = (std::filesystem::temp_directory_path() / "smha-test-XXXXXX").string();
  REQUIRE(::mkdtemp(dir.data()) != nullptr);
  struct Cleanup {
    std::string dir;
    ~Cleanup() { std::filesystem::remove_all(dir); }
  } cleanup{dir};
  const std::string fifo = dir + "/fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK(errors_of(kNode + "sm_key_file: " + fifo + "\n") ==
        std::vector<std::string>{"t.yaml:4:14: sm_key_file: cannot read " + fifo +
                                 ": is a FIFO, not a regular file"});
  CHECK(errors_of(kNode + "sm_key_file: /dev/zero\n") ==
        std::vector<std::string>{
            "t.yaml:4:14: sm_key_file: cannot read /dev/zero: is a character device, not a regular file"});
  TempFile big(std::string(5000, '0'));
  CHECK(errors_of(kNode + "sm_key_file: " + big.path() + "\n") ==
        std::vector<std::string>{"t.yaml:4:14: sm_key_file: cannot read " + big.path() +
                                 ": is 5000 bytes, over the limit of 4096"});

  auto r = load_config(fifo);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error_text() == fifo + ": cannot read the file (is a FIFO, not a regular file)\n");
  auto d = load_config(dir);
  REQUIRE_FALSE(d.ok());
  CHECK(d.error_text() == dir + ": cannot read the file (is a directory, not a regular file)\n");
  auto z = load_config("/dev/zero");
  REQUIRE_FALSE(z.ok());
  CHECK(z.error_text() == "/dev/zero: cannot read the file (is a character device, not a regular file)\n");
  TempFile huge(kNode + "# " + std::string(2 * 1024 * 1024, 'x') + "\n");
  auto h = load_config(huge.path());
  REQUIRE_FALSE(h.ok());
  CHECK_THAT(h.error_text(), Catch::Contains("over the limit of 1048576"));
}

TEST_CASE("an sm_key_file readable by others is refused, naming the path") {
  TempFile key("0x1\n", std::filesystem::perms::owner_read | std::filesystem::perms::owner_write |
                             std::filesystem::perms::group_read | std::filesystem::perms::others_read);
  CHECK(errors_of(kNode + "sm_key_file: " + key.path() + "\n") ==
        std::vector<std::string>{"t.yaml:4:14: sm_key_file: " + key.path() +
                                 " has mode 0644; it holds the SM_Key, so it must not be readable by others: "
                                 "chmod 600 " + key.path()});
  TempFile group_only("0x1\n", std::filesystem::perms::owner_read | std::filesystem::perms::group_read);
  CHECK(errors_of(kNode + "sm_key_file: " + group_only.path() + "\n").size() == 1);
}

TEST_CASE("sa_key / sa_key_file: parsed like sm_key, never 0, a file of mode 0600") {
  Config unset = load_ok(kNode + "sm_key: 0x2\n");
  CHECK(unset.sa_key == 1);
  CHECK_FALSE(unset.sa_key_set);
  Config inline_key = load_ok(kNode + "sa_key: 0x5A5A0001\n");
  CHECK(inline_key.sa_key == 0x5a5a0001);
  CHECK(inline_key.sa_key_set);
  TempFile key(" 0x00000000d00d5a01\n");
  Config from_file = load_ok(kNode + "sm_key: 0x2\nsa_key_file: " + key.path() + "\n");
  CHECK(from_file.sa_key == 0xd00d5a01);
  CHECK(from_file.sm_key == 2);
  CHECK(errors_of(kNode + "sa_key: 0x0\n") ==
        std::vector<std::string>{"t.yaml:4:9: sa_key: must not be 0: OpenSM would then trust every SA "
                                 "request that carries no key"});
  TempFile zero("0x0000000000000000\n");
  CHECK(errors_of(kNode + "sa_key_file: " + zero.path() + "\n") ==
        std::vector<std::string>{"t.yaml:4:14: sa_key_file: the key in " + zero.path() +
                                 " must not be 0: OpenSM would then trust every SA request that carries no key"});
  CHECK(errors_of(kNode + "sa_key: 0x1\nsa_key_file: /etc/smha/sa_key\n") ==
        std::vector<std::string>{"t.yaml:5:1: sa_key_file: give either sa_key or sa_key_file, not both"});
  CHECK(errors_of(kNode + "sa_key: key\n") ==
        std::vector<std::string>{"t.yaml:4:9: sa_key: must be 0x followed by 1 to 16 hex digits (got \"key\")"});
  TempFile open_key("0x5\n", std::filesystem::perms::owner_read | std::filesystem::perms::owner_write |
                                 std::filesystem::perms::others_read);
  CHECK(errors_of(kNode + "sa_key_file: " + open_key.path() + "\n") ==
        std::vector<std::string>{"t.yaml:4:14: sa_key_file: " + open_key.path() +
                                 " has mode 0604; it holds the SA key, so it must not be readable by others: "
                                 "chmod 600 " + open_key.path()});
  CHECK(errors_of(kNode + "opensm:\n  extra:\n    sa_key: 0x5\n") ==
        std::vector<std::string>{"t.yaml:6:5: opensm.extra.sa_key: smha manages this key; set sa_key or "
                                 "sa_key_file instead"});
}

TEST_CASE("key warnings: default SM_Key, default SA key, SA key equal to the SM_Key") {
  auto texts = [](const Config& c) {
    std::vector<std::string> out;
    for (const auto& d : key_warnings(c)) out.push_back(d.to_string());
    return out;
  };
  CHECK(texts(load_ok(kNode)) ==
        std::vector<std::string>{std::string("t.yaml: sm_key: ") + kDefaultSmKeyWarning,
                                 std::string("t.yaml: sa_key: ") + kDefaultSaKeyWarning});
  // 0x1 given explicitly is still the well-known default; the warning points at it.
  CHECK(texts(load_ok(kNode + "sm_key: 0x2\nsa_key: 0x1\n")) ==
        std::vector<std::string>{std::string("t.yaml:5:9: sa_key: ") + kDefaultSaKeyWarning});
  CHECK(texts(load_ok(kNode + "sm_key: 0x2\nsa_key: 0x2\n")) ==
        std::vector<std::string>{std::string("t.yaml:5:9: sa_key: ") + kSameSaKeyWarning});
  CHECK(texts(load_ok(kNode + "sm_key: 0x2\nsa_key: 0x3\n")).empty());
}

TEST_CASE("opensm.extra: force_log_flush stays TRUE, log_flags keeps ERROR and INFO") {
  // TRUE is what smha renders anyway: accepted, not rendered a second time.
  Config same = load_ok(kNode + "opensm:\n  extra:\n    force_log_flush: true\n    log_flags: 0x0f\n");
  REQUIRE(same.opensm.extra.size() == 1);
  CHECK(same.opensm.extra[0].key == "log_flags");
  CHECK(same.opensm.extra[0].value == "0x0f");
  CHECK(errors_of(kNode + "opensm:\n  extra:\n    force_log_flush: false\n") ==
        std::vector<std::string>{"t.yaml:6:22: opensm.extra.force_log_flush: refused: smha renders "
                                 "force_log_flush TRUE (smhad reads OpenSM's log as it is written: SUBNET UP, "
                                 "takeover reports, start-up errors); drop the key"});
  CHECK(errors_of(kNode + "opensm:\n  extra:\n    log_flags: 0x01\n") ==
        std::vector<std::string>{"t.yaml:6:16: opensm.extra.log_flags: must keep ERROR (0x01) and INFO (0x02): "
                                 "smhad reads OpenSM's SUBNET UP, state and routing lines (INFO) and its ERR "
                                 "lines from the log (got 0x01)"});
  CHECK(errors_of(kNode + "opensm:\n  extra:\n    log_flags: lots\n") ==
        std::vector<std::string>{"t.yaml:6:16: opensm.extra.log_flags: must be a number 0..0xff (OpenSM's log "
                                 "levels), e.g. 0x03 (got \"lots\")"});
  CHECK(load_ok(kNode + "opensm:\n  extra:\n    log_flags: 3\n").opensm.extra.size() == 1);
}

TEST_CASE("YAML that would be read laxly is refused with a position") {
  auto multi = load_config_from_string(kNode + "---\nsm_priority: 3\n", "t.yaml");
  REQUIRE_FALSE(multi.ok());
  CHECK(multi.error_text() ==
        "t.yaml:4:1: a second YAML document ('---') would be ignored; the file must hold exactly one\n");
  // yaml-cpp's LoadAll never returns on this (fuzz_config_load found it).
  CHECK(errors_of(",_U_") ==
        std::vector<std::string>{"t.yaml:1:1: YAML syntax error: unexpected ',' where the document should end"});
  CHECK(errors_of(kNode + "...\nsm_priority: 3\n").size() == 1);
  CHECK(errors_of(kNode + "sm_priority: \"010\"\n") ==
        std::vector<std::string>{"t.yaml:4:14: sm_priority: must be an integer, not a quoted string (got \"010\")"});
  CHECK(load_ok(kNode + "sm_priority: 10\n").sm_priority == 10);
}

TEST_CASE("YAML tags are refused with their position") {
  CHECK(errors_of(kNode + "sm_priority: !!python/object:os.system 10\n") ==
        std::vector<std::string>{"t.yaml:4:14: YAML tag 'tag:yaml.org,2002:python/object:os.system' is not "
                                 "supported; write the plain value (smha.yaml uses no tags)"});
  CHECK(errors_of("node:\n  name: !!str head01\n  port_guid: 0x10\n") ==
        std::vector<std::string>{"t.yaml:2:9: YAML tag 'tag:yaml.org,2002:str' is not supported; write the plain "
                                 "value (smha.yaml uses no tags)"});
  CHECK(errors_of(kNode + "peers: !custom\n  - {name: b, port_guid: 0x20}\n").size() == 1);
}

TEST_CASE("config sizes are capped: name length, peer count, string length") {
  const std::string long_name(kMaxNameBytes + 1, 'n');
  CHECK(errors_of("node:\n  name: " + long_name + "\n  port_guid: 0x10\n") ==
        std::vector<std::string>{"t.yaml:2:9: node.name: is 65 bytes long, at most 64"});
  CHECK(load_ok("node:\n  name: " + std::string(kMaxNameBytes, 'n') + "\n  port_guid: 0x10\n").node_name.size() ==
        kMaxNameBytes);
  std::string peers = kNode + "peers:\n";
  for (std::size_t i = 0; i <= kMaxPeers; ++i)
    peers += "  - {name: p" + std::to_string(i) + ", port_guid: 0x" + std::to_string(100 + i) + "}\n";
  CHECK(errors_of(peers) == std::vector<std::string>{"t.yaml:5:3: peers: lists 65 peers, at most 64"});
  CHECK(errors_of(kNode + "state_dir: /" + std::string(kMaxStringBytes, 'd') + "\n") ==
        std::vector<std::string>{"t.yaml:4:12: state_dir: is 4097 bytes long, at most 4096"});
}

TEST_CASE("names must be printable UTF-8: no ANSI escapes, control characters or bad bytes") {
  CHECK(errors_of("node:\n  name: \"head\\e[31m01\"\n  port_guid: 0x10\n") ==
        std::vector<std::string>{
            "t.yaml:2:9: node.name: byte 5 is a control or invisible character or not UTF-8; a name is printable UTF-8"});
  CHECK(errors_of(kNode + "peers:\n  - {name: \"b\\x85\", port_guid: 0x20}\n").size() == 1);  // C1 NEL
  CHECK(errors_of(kNode + "peers:\n  - {name: \"b\\x7f\", port_guid: 0x20}\n").size() == 1);  // DEL
  // Zero-width, separator and bidi characters would hide or reorder a name.
  CHECK(errors_of(kNode + "peers:\n  - {name: \"b\\u200b\", port_guid: 0x20}\n").size() == 1);  // ZWSP
  CHECK(errors_of(kNode + "peers:\n  - {name: \"b\\u2028c\", port_guid: 0x20}\n").size() == 1);  // LS
  CHECK(errors_of(kNode + "peers:\n  - {name: \"\\ufeffb\", port_guid: 0x20}\n").size() == 1);  // BOM
  CHECK(errors_of(kNode + "peers:\n  - {name: \"b\\u2067\", port_guid: 0x20}\n").size() == 1);  // RLI
  CHECK(errors_of("node:\n  name: \"h\xff\"\n  port_guid: 0x10\n").size() == 1);  // not UTF-8
  CHECK(errors_of("node:\n  name: \"h\xc0\xaf\"\n  port_guid: 0x10\n").size() == 1);  // overlong
  CHECK(load_ok("node:\n  name: \"t\xc3\xaate-01\"\n  port_guid: 0x10\n").node_name == "t\xc3\xaate-01");
}

TEST_CASE("validation errors: exact file:line:column, key path and message") {
  struct Case {
    std::string yaml;
    std::string error;
  };
  const std::vector<Case> cases = {
      // Structure and unknown keys.
      {kNode + "sm_priorty: 3\n", "t.yaml:4:1: sm_priorty: unknown key; did you mean 'sm_priority'?"},
      {kNode + "zzz: 3\n", "t.yaml:4:1: zzz: unknown key"},
      {kNode + "opensm:\n  sweep_intervall: 5\n",
       "t.yaml:5:3: opensm.sweep_intervall: unknown key; did you mean 'sweep_interval'?"},
      {kNode + "opensm:\n  max_wire_smps: 0\n", "t.yaml:5:18: opensm.max_wire_smps: must be between 1 and 64 (got 0)"},
      {kNode + "opensm:\n  max_wire_smps: 16\n  extra:\n    max_wire_smps: 32\n",
       "t.yaml:5:18: opensm.max_wire_smps: also set as opensm.extra.max_wire_smps (line 7): set one"},
      {kNode + "sm_priority: 1\nsm_priority: 2\n",
       "t.yaml:5:1: sm_priority: duplicate key (first set at line 4)"},
      {kNode + "opensm: 3\n", "t.yaml:4:9: opensm: must be a map (got a scalar)"},
      {"- a\n- b\n", "t.yaml:1:1: must be a map (got a list)"},
      {"sm_priority: 3\n", "t.yaml:1:1: node: missing required key 'node' (this node's name and IB port)"},
      // node
      {"node:\n  port_guid: 0x10\n", "t.yaml:1:1: node: missing required key 'name'"},
      {"node:\n  name: a\n", "t.yaml:1:1: node: missing the IB port: set 'port_guid', or 'ca' (and 'port')"},
      {"node:\n  name: a\n  ca: mlx5_0\n  port_guid: 0x10\n",
       "t.yaml:4:3: node.port_guid: give either port_guid or ca + port, not both"},
      {"node:\n  name: a\n  ca: mlx5_0\n  port: 0\n",
       "t.yaml:4:9: node.port: must be between 1 and 254 (got 0)"},
      {"node:\n  name: a\n  port_guid: 0x0\n",
       "t.yaml:3:14: node.port_guid: must not be 0 (OpenSM treats GUID 0 as \"ask which port\")"},
      {"node:\n  name: a\n  port_guid: 12345\n",
       "t.yaml:3:14: node.port_guid: must be a GUID: 0x followed by 1 to 16 hex digits (got \"12345\")"},
      {"node:\n  name: a\n  port_guid: 0x00112233445566778\n",
       "t.yaml:3:14: node.port_guid: must be a GUID: 0x followed by 1 to 16 hex digits (got \"0x00112233445566778\")"},
      {"node:\n  name: ''\n  port_guid: 0x10\n", "t.yaml:2:9: node.name: must not be empty"},
      // peers
      {kNode + "peers: head02\n", "t.yaml:4:8: peers: must be a list of {name, port_guid} (got a scalar)"},
      {kNode + "peers:\n  - name: head01\n    port_guid: 0x20\n",
       "t.yaml:5:11: peers[0].name: a peer cannot have this node's name (node.name)"},
      {kNode + "peers:\n  - name: b\n    port_guid: 0x10\n",
       "t.yaml:6:16: peers[0].port_guid: a peer cannot have this node's port GUID (node.port_guid)"},
      {kNode + "peers:\n  - name: b\n    port_guid: 0x20\n  - name: b\n    port_guid: 0x30\n",
       "t.yaml:7:11: peers[1].name: peer name \"b\" already used by peers[0]"},
      {kNode + "peers:\n  - name: b\n    port_guid: 0x20\n  - name: c\n    port_guid: 0x020\n",
       "t.yaml:8:16: peers[1].port_guid: port GUID 0x0000000000000020 already used by peers[0]"},
      {kNode + "peers:\n  - name: b\n", "t.yaml:5:5: peers[0]: missing required key 'port_guid'"},
      {kNode + "peers:\n  - port_guid: 0x20\n", "t.yaml:5:5: peers[0]: missing required key 'name'"},
      {kNode + "peers:\n  - name: b\n    port_guid: 0x20\n    prio: 3\n",
       "t.yaml:7:5: peers[0].prio: unknown key"},
      {kNode + "peers:\n  - name: b\n    port_guid: 0x20\n    sm_priority: 16\n",
       "t.yaml:7:18: peers[0].sm_priority: must be between 0 and 15 (got 16)"},
      // ranges
      {kNode + "sm_priority: 16\n", "t.yaml:4:14: sm_priority: must be between 0 and 15 (got 16)"},
      {kNode + "sm_priority: -1\n", "t.yaml:4:14: sm_priority: must be between 0 and 15 (got -1)"},
      {kNode + "sm_priority: high\n", "t.yaml:4:14: sm_priority: must be an integer (got \"high\")"},
      {kNode + "sm_priority: 3.5\n", "t.yaml:4:14: sm_priority: must be an integer (got \"3.5\")"},
      {kNode + "sm_priority: 99999999999999999999\n",
       "t.yaml:4:14: sm_priority: integer out of range (got 99999999999999999999)"},
      {kNode + "sm_priority: [1]\n", "t.yaml:4:14: sm_priority: must be a single value (got a list)"},
      {kNode + "failover:\n  poll_interval_ms: 0\n",
       "t.yaml:5:21: failover.poll_interval_ms: must be >= 10 (got 0)"},
      {kNode + "failover:\n  misses_before_takeover: 0\n",
       "t.yaml:5:27: failover.misses_before_takeover: must be between 1 and 100 (got 0)"},
      {kNode + "failover:\n  failback: stiky\n",
       "t.yaml:5:13: failover.failback: must be sticky or preempt (got \"stiky\"); did you mean 'sticky'?"},
      {kNode + "failover:\n  preempt_holddown_s: -1\n",
       "t.yaml:5:23: failover.preempt_holddown_s: must be >= 0 (got -1)"},
      {kNode + "failover:\n  opensm_polling_retries: 101\n",
       "t.yaml:5:27: failover.opensm_polling_retries: must be between 0 and 100 (got 101)"},
      // OpenSM's backstop must be slower than smha: (0+2)*100 ms vs 2*(100*(3+1)) ms.
      {kNode + "failover:\n  opensm_polling_timeout_ms: 100\n  opensm_polling_retries: 0\n",
       "t.yaml:4:1: failover.opensm_polling_timeout_ms: OpenSM's own takeover after 200 ms must "
       "be more than twice smha's detection time (400 ms = poll_interval_ms * "
       "(misses_before_takeover + 1)); raise opensm_polling_timeout_ms or opensm_polling_retries"},
      {kNode + "sm_key: 0xnope\n",
       "t.yaml:4:9: sm_key: must be 0x followed by 1 to 16 hex digits (got \"0xnope\")"},
      // opensm
      {kNode + "opensm:\n  sweep_interval: -3\n",
       "t.yaml:5:19: opensm.sweep_interval: must be > 0 (got -3)"},
      {kNode + "opensm:\n  sweep_interval: 0\n",
       "t.yaml:5:19: opensm.sweep_interval: must be > 0 (got 0)"},
      {kNode + "opensm:\n  flavor: nvida\n",
       "t.yaml:5:11: opensm.flavor: must be auto, upstream or nvidia (got \"nvida\"); did you mean 'nvidia'?"},
      {kNode + "opensm:\n  sharp: yes please\n",
       "t.yaml:5:10: opensm.sharp: must be true or false (got \"yes please\")"},
      {kNode + "opensm:\n  binary: opensm\n",
       "t.yaml:5:11: opensm.binary: must be an absolute path (got \"opensm\")"},
      {kNode + "opensm:\n  log_file: '/var/log/a#b'\n",
       "t.yaml:5:13: opensm.log_file: must not contain '#' (opensm.conf treats it as a comment)"},
      {kNode + "opensm:\n  routing_engine: ftree, updn\n",
       "t.yaml:5:19: opensm.routing_engine: must be engine names separated by commas, without "
       "spaces (got \"ftree, updn\")"},
      {kNode + "opensm:\n  routing_engine: ftree,,updn\n",
       "t.yaml:5:19: opensm.routing_engine: must be engine names separated by commas, without "
       "spaces (got \"ftree,,updn\")"},
      {kNode + "opensm:\n  routing_engine: ar_updn\n",
       "t.yaml:5:19: opensm.routing_engine: names an adaptive-routing engine but "
       "opensm.adaptive_routing is false; use the plain engine (e.g. updn) and set "
       "adaptive_routing: true"},
      // opensm.extra
      {kNode + "opensm:\n  extra:\n    priority: 3\n",
       "t.yaml:6:5: opensm.extra.priority: refused: not an OpenSM key (OpenSM ignores it); set "
       "the top-level key sm_priority"},
      {kNode + "opensm:\n  extra:\n    sm_priority: 3\n",
       "t.yaml:6:5: opensm.extra.sm_priority: smha manages this key; set sm_priority instead"},
      {kNode + "opensm:\n  extra:\n    routing_engine: minhop\n",
       "t.yaml:6:5: opensm.extra.routing_engine: smha manages this key; set opensm.routing_engine instead"},
      {kNode + "opensm:\n  extra:\n    guid: 0x5\n",
       "t.yaml:6:5: opensm.extra.guid: smha manages this key; set node.port_guid (or node.ca + node.port) instead"},
      {kNode + "opensm:\n  extra:\n    daemon: TRUE\n",
       "t.yaml:6:5: opensm.extra.daemon: refused: smhad supervises OpenSM in the foreground; "
       "daemon mode would hide it"},
      {kNode + "opensm:\n  extra:\n    ignore_other_sm: TRUE\n",
       "t.yaml:6:5: opensm.extra.ignore_other_sm: refused: OpenSMs that ignore each other can "
       "both become MASTER"},
      {kNode + "opensm:\n  extra:\n    Lmc: 1\n",
       "t.yaml:6:5: opensm.extra.Lmc: not an opensm.conf key name (lower-case letters, digits and _)"},
      {kNode + "opensm:\n  extra:\n    lmc: [1]\n",
       "t.yaml:6:10: opensm.extra.lmc: must be a single value (got a list)"},
      {kNode + "opensm:\n  extra:\n    lmc: ''\n", "t.yaml:6:10: opensm.extra.lmc: must not be empty"},
      {kNode + "opensm:\n  extra:\n    node_name_map_name: '/a#b'\n",
       "t.yaml:6:25: opensm.extra.node_name_map_name: must not contain '#' (opensm.conf treats it as a comment)"},
      {kNode + "opensm:\n  extra: [lmc]\n",
       "t.yaml:5:10: opensm.extra: must be a map of opensm.conf key: value (got a list)"},
      // control, hooks, state_dir
      {kNode + "control:\n  socket: /run/" + std::string(120, 's') + "\n",
       "t.yaml:5:11: control.socket: too long for a unix socket path (125 bytes, at most 107)"},
      {kNode + "control:\n  grp: smha\n", "t.yaml:5:3: control.grp: unknown key; did you mean 'group'?"},
      {kNode + "hooks:\n  mastr: /bin/true\n", "t.yaml:5:3: hooks.mastr: unknown key; did you mean 'master'?"},
      {kNode + "hooks:\n  master: [/bin/true, notify]\n",
       "t.yaml:5:23: hooks.master[1]: must be an absolute path (got \"notify\")"},
      {kNode + "hook_timeout_s: 0\n", "t.yaml:4:17: hook_timeout_s: must be > 0 (got 0)"},
      {kNode + "state_dir: var/lib\n", "t.yaml:4:12: state_dir: must be an absolute path (got \"var/lib\")"},
      // metrics: loopback only
      {kNode + "metrics:\n  listen: 0.0.0.0:9464\n",
       "t.yaml:5:11: metrics.listen: must be a loopback address (127.0.0.0/8, ::1 or localhost): smhad "
       "serves metrics on this host only; let node_exporter or a local proxy publish them (got \"0.0.0.0\")"},
      {kNode + "metrics:\n  listen: \"[fe80::1]:9464\"\n",
       "t.yaml:5:11: metrics.listen: must be a loopback address (127.0.0.0/8, ::1 or localhost): smhad "
       "serves metrics on this host only; let node_exporter or a local proxy publish them (got \"fe80::1\")"},
      {kNode + "metrics:\n  listen: head01.example:9464\n",
       "t.yaml:5:11: metrics.listen: must be a loopback address (127.0.0.0/8, ::1 or localhost): smhad "
       "serves metrics on this host only; let node_exporter or a local proxy publish them (got \"head01.example\")"},
      {kNode + "metrics:\n  listen: 9464\n",
       "t.yaml:5:11: metrics.listen: must be ADDRESS:PORT, e.g. 127.0.0.1:9464 or [::1]:9464 (got \"9464\")"},
      {kNode + "metrics:\n  listen: 127.0.0.1:70000\n",
       "t.yaml:5:11: metrics.listen: port must be between 1 and 65535 (got 70000)"},
      {kNode + "metrics:\n  listen: 127.0.0.1:http\n",
       "t.yaml:5:11: metrics.listen: must be ADDRESS:PORT, e.g. 127.0.0.1:9464 or [::1]:9464 (got \"127.0.0.1:http\")"},
      {kNode + "metrics:\n  textfile_dir: prom\n",
       "t.yaml:5:17: metrics.textfile_dir: must be an absolute path (got \"prom\")"},
      {kNode + "metrics:\n  textfile_interval_s: 0\n",
       "t.yaml:5:24: metrics.textfile_interval_s: must be > 0 (got 0)"},
      {kNode + "metrics:\n  port: 9464\n", "t.yaml:5:3: metrics.port: unknown key"},
      // YAML syntax.
      {kNode + "opensm:\n  sweep_interval: [1\n",
       "t.yaml:6:1: YAML syntax error: end of sequence flow not found"},
      {"node: {name: a\n", "t.yaml:2:1: YAML syntax error: end of map flow not found"},
      {"", "t.yaml: the file is empty; at least 'node' is required"},
  };
  for (const auto& c : cases) {
    INFO(c.yaml);
    CHECK(errors_of(c.yaml) == std::vector<std::string>{c.error});
  }
}

TEST_CASE("lid_continuity decides honor_guid2lid_file, a contradiction is refused") {
  CHECK(load_ok(kNode + "opensm:\n  honor_guid2lid_file: true\n").opensm.honor_guid2lid_file);
  Config off = load_ok(kNode + "opensm:\n  lid_continuity: false\n");
  CHECK_FALSE(off.opensm.lid_continuity);
  CHECK_FALSE(off.opensm.honor_guid2lid_file);
  Config own = load_ok(kNode + "opensm:\n  lid_continuity: false\n  honor_guid2lid_file: true\n");
  CHECK(own.opensm.honor_guid2lid_file);
  CHECK(errors_of(kNode + "opensm:\n  honor_guid2lid_file: false\n") ==
        std::vector<std::string>{
            "t.yaml:5:24: opensm.honor_guid2lid_file: false contradicts opensm.lid_continuity: true (OpenSM "
            "must read the guid2lid smhad keeps); set lid_continuity: false to run without it"});
  CHECK(errors_of(kNode + "opensm:\n  lid_continuity: 3\n").size() == 1);
}

TEST_CASE("metrics: off by default, loopback listen addresses and the textfile collector") {
  Config d = load_ok(kNode);
  CHECK(d.metrics.listen_address.empty());
  CHECK(d.metrics.textfile_dir.empty());
  CHECK(d.metrics.textfile_interval == std::chrono::seconds(15));
  Config c = load_ok(kNode + "metrics:\n  listen: 127.0.0.2:9464\n  textfile_dir: /var/lib/node_exporter\n"
                             "  textfile_interval_s: 30\n");
  CHECK(c.metrics.listen_address == "127.0.0.2");
  CHECK(c.metrics.listen_port == 9464);
  CHECK(c.metrics.textfile_dir == "/var/lib/node_exporter");
  CHECK(c.metrics.textfile_interval == std::chrono::seconds(30));
  CHECK(load_ok(kNode + "metrics:\n  listen: \"[::1]:1\"\n").metrics.listen_address == "::1");
  CHECK(load_ok(kNode + "metrics:\n  listen: localhost:9464\n").metrics.listen_address == "127.0.0.1");
  CHECK(is_loopback_address("127.255.0.1"));
  CHECK_FALSE(is_loopback_address("128.0.0.1"));
  CHECK_FALSE(is_loopback_address("::ffff:127.0.0.1"));
  CHECK_FALSE(is_loopback_address("localhost"));
}

TEST_CASE("all errors are reported at once, in file order") {
  auto errors = errors_of(R"(node:
  name: head01
  port_guid: 0x10
sm_priority: 99
failover:
  misses_before_takeover: 0
opensm:
  sweep_interval: -3
  flavr: auto
  extra:
    priority: 1
peers:
  - name: head01
    port_guid: 0xZZ
)");
  CHECK(errors == std::vector<std::string>{
                      "t.yaml:4:14: sm_priority: must be between 0 and 15 (got 99)",
                      "t.yaml:6:27: failover.misses_before_takeover: must be between 1 and 100 (got 0)",
                      "t.yaml:8:19: opensm.sweep_interval: must be > 0 (got -3)",
                      "t.yaml:9:3: opensm.flavr: unknown key; did you mean 'flavor'?",
                      "t.yaml:11:5: opensm.extra.priority: refused: not an OpenSM key (OpenSM "
                      "ignores it); set the top-level key sm_priority",
                      "t.yaml:13:11: peers[0].name: a peer cannot have this node's name (node.name)",
                      "t.yaml:14:16: peers[0].port_guid: must be a GUID: 0x followed by 1 to 16 "
                      "hex digits (got \"0xZZ\")",
                  });
}

TEST_CASE("load_config names the path and reports an unreadable file") {
  auto r = load_config("/nonexistent/smha.yaml");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error_text() == "/nonexistent/smha.yaml: cannot read the file (open: No such file or directory)\n");
  TempFile f(kNode + "sm_priority: 77\n");
  auto bad = load_config(f.path());
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error_text() == f.path() + ":4:14: sm_priority: must be between 0 and 15 (got 77)\n");
  TempFile good(kNode);
  auto ok = load_config(good.path());
  REQUIRE(ok.ok());
  CHECK(ok.value().source_path == good.path());
}

TEST_CASE("edit distance and did-you-mean") {
  CHECK(edit_distance("", "") == 0);
  CHECK(edit_distance("abc", "") == 3);
  CHECK(edit_distance("kitten", "sitting") == 3);
  CHECK(edit_distance("sm_priorty", "sm_priority") == 1);
  CHECK(did_you_mean("sm_priorty", {"node", "sm_priority", "sm_key"}) == "sm_priority");
  CHECK(did_you_mean("zzz", {"node", "peers"}) == std::nullopt);
  // A key far longer than any known one has no suggestion (and costs no distances).
  CHECK(did_you_mean(std::string(4096, 'x'), {"node", "sm_priority"}) == std::nullopt);
  CHECK(did_you_mean("sm_priorityy", {"sm_priority", "node"}) == "sm_priority");
  CHECK(did_you_mean("grp", {"group", "socket"}) == "group");
  CHECK(did_you_mean("nde", {"node"}) == "node");
  // Not when the edits would replace the whole word.
  CHECK(did_you_mean("ne", {"node"}) == std::nullopt);
  CHECK(did_you_mean("ab", {"cd"}) == std::nullopt);
  // A word of a longer key beats a short key two edits away.
  CHECK(did_you_mean("guid", {"name", "port_guid", "lid", "dr_path", "sm_priority"}) == "port_guid");
  CHECK(did_you_mean("priority", {"sm_priority", "sm_key"}) == "sm_priority");
  CHECK(did_you_mean("sm", {"sm_priority", "sm_key"}) == std::nullopt);  // two keys have it
  const auto errs = errors_of(kNode + "peers:\n  - {name: b, guid: 0x20}\n");
  CHECK(std::find(errs.begin(), errs.end(),
                  "t.yaml:5:15: peers[0].guid: unknown key; did you mean 'port_guid'?") != errs.end());
}

TEST_CASE("peers may carry a LID and a directed-route path") {
  const Config c = load_ok(kNode +
                           "peers:\n  - name: head02\n    port_guid: 0x20\n    lid: 7\n"
                           "    dr_path: \"0,1,3\"\n  - name: head03\n    port_guid: 0x30\n");
  REQUIRE(c.peers.size() == 2);
  REQUIRE(c.peers[0].lid);
  CHECK(c.peers[0].lid->value == 7);
  REQUIRE(c.peers[0].dr_path);
  CHECK(c.peers[0].dr_path->hops == std::vector<std::uint8_t>{1, 3});  // leading 0 = local port
  CHECK_FALSE(c.peers[1].lid);
  CHECK_FALSE(c.peers[1].dr_path);
}

TEST_CASE("a bad peer lid or dr_path is an error naming file, line and key") {
  const auto errs = errors_of(kNode +
                              "peers:\n  - name: head02\n    port_guid: 0x20\n    lid: 0\n"
                              "  - name: head03\n    port_guid: 0x30\n    lid: 49152\n"
                              "  - name: head04\n    port_guid: 0x40\n    dr_path: \"1,x\"\n");
  REQUIRE(errs.size() == 3);
  CHECK(errs[0] == "t.yaml:7:10: peers[0].lid: must be a unicast LID 1..49151 (got 0)");
  CHECK(errs[1] == "t.yaml:10:10: peers[1].lid: must be a unicast LID 1..49151 (got 49152)");
  CHECK(errs[2].find("t.yaml:13:14: peers[2].dr_path: must be a directed-route path") == 0);
}

TEST_CASE("peers[].sm_priority: per-head priorities, at most 13 distinct values") {
  auto r = load_config_from_string(kNode +
                                       "sm_priority: 15\npeers:\n  - name: head02\n    port_guid: 0x20\n"
                                       "    sm_priority: 14\n  - name: head03\n    port_guid: 0x30\n",
                                   "t.yaml");
  REQUIRE(r.ok());
  REQUIRE(r.value().peers.size() == 2);
  CHECK(r.value().peers[0].sm_priority == 14);
  CHECK_FALSE(r.value().peers[1].sm_priority.has_value());  // the same as this head's

  // 14 distinct values (this head 13, peers 0..12) cannot all be rendered in order.
  std::string y = kNode + "sm_priority: 13\npeers:\n";
  for (int i = 0; i < 13; ++i)
    y += "  - name: p" + std::to_string(i) + "\n    port_guid: 0x" + std::to_string(100 + i) +
         "\n    sm_priority: " + std::to_string(i) + "\n";
  CHECK(errors_of(y) ==
        std::vector<std::string>{
            "t.yaml:4:14: sm_priority: 14 different sm_priority values among the heads (this one and "
            "peers[].sm_priority); at most 13 fit: smha renders every standby in that order between "
            "the yield priority below them and the master and claim priorities above them"});
}

TEST_CASE("opensm restart policy: defaults, every key read, ranges and cross checks") {
  Config d = load_ok(kNode);
  CHECK(d.opensm.restart_backoff_initial == std::chrono::milliseconds(1000));
  CHECK(d.opensm.restart_backoff_max == std::chrono::seconds(60));
  CHECK(d.opensm.restart_stable == std::chrono::seconds(60));
  CHECK(d.opensm.crash_loop_count == 5);
  CHECK(d.opensm.crash_loop_window == std::chrono::seconds(300));

  Config c = load_ok(kNode +
                     "opensm:\n  restart_backoff_initial_ms: 250\n  restart_backoff_max_s: 8\n"
                     "  restart_stable_s: 20\n  crash_loop_count: 3\n  crash_loop_window_s: 30\n");
  CHECK(c.opensm.restart_backoff_initial == std::chrono::milliseconds(250));
  CHECK(c.opensm.restart_backoff_max == std::chrono::seconds(8));
  CHECK(c.opensm.restart_stable == std::chrono::seconds(20));
  CHECK(c.opensm.crash_loop_count == 3);
  CHECK(c.opensm.crash_loop_window == std::chrono::seconds(30));

  CHECK(errors_of(kNode + "opensm:\n  restart_backoff_initial_ms: 5\n") ==
        std::vector<std::string>{"t.yaml:5:31: opensm.restart_backoff_initial_ms: must be >= 10 "
                                 "(got 5)"});
  CHECK(errors_of(kNode + "opensm:\n  crash_loop_count: 0\n  restart_backoff_max_s: 0\n") ==
        std::vector<std::string>{
            "t.yaml:5:21: opensm.crash_loop_count: must be > 0 (got 0)",
            "t.yaml:6:26: opensm.restart_backoff_max_s: must be > 0 (got 0)"});
  CHECK(errors_of(kNode + "opensm:\n  crash_loop_window_s: 90000\n").size() == 1);
  CHECK(errors_of(kNode + "opensm:\n  restart_backoff_initial_ms: 5000\n  restart_backoff_max_s: 2\n") ==
        std::vector<std::string>{"t.yaml:6:26: opensm.restart_backoff_max_s: must be at least "
                                 "opensm.restart_backoff_initial_ms (5000 ms)"});
  CHECK(errors_of(kNode + "opensm:\n  restart_backoff_initial_ms: 20000\n  crash_loop_count: 5\n"
                          "  crash_loop_window_s: 60\n") ==
        std::vector<std::string>{"t.yaml:7:24: opensm.crash_loop_window_s: too short to hold "
                                 "opensm.crash_loop_count crashes at the initial backoff (5 x "
                                 "20000 ms)"});
  CHECK(errors_of(kNode + "opensm:\n  crash_loop_windw_s: 60\n") ==
        std::vector<std::string>{"t.yaml:5:3: opensm.crash_loop_windw_s: unknown key; did you "
                                 "mean 'crash_loop_window_s'?"});
}

TEST_CASE("deep nesting is refused as such, with its position (yaml-cpp says 'bad file')") {
  const std::string flow = std::string(5000, '[') + std::string(5000, ']') + "\n";
  for (const auto& text : {flow, "node:\n  name: " + flow}) {
    auto r = load_config_from_string(text, "t.yaml");
    REQUIRE_FALSE(r.ok());
    INFO(r.error_text());
    CHECK(r.error_text().find("t.yaml:") == 0);
    CHECK(r.error_text().find("YAML nesting too deep (more than ") != std::string::npos);
    CHECK(r.error_text().find("bad file") == std::string::npos);
  }
}

TEST_CASE("split_routing_engines: names in order, empty ones kept for validation") {
  using Names = std::vector<std::string>;
  CHECK(split_routing_engines("ftree,updn") == Names{"ftree", "updn"});
  CHECK(split_routing_engines("minhop") == Names{"minhop"});
  CHECK(split_routing_engines("ftree,,updn,") == Names{"ftree", "", "updn", ""});
  CHECK(split_routing_engines("") == Names{""});
}

TEST_CASE("every ranged key's range (limits::kRangedKeys) is the one doc/configuration.md states") {
  std::ifstream doc_file(SMHA_CONFIGURATION_DOC);
  REQUIRE(doc_file);
  std::vector<std::string> rows;
  for (std::string line; std::getline(doc_file, line);)
    if (line.rfind("| `", 0) == 0) rows.push_back(line);
  for (const auto& [path, range] : limits::kRangedKeys) {
    INFO(path);
    // doc/configuration.md's tables name a key by its full path or, inside its
    // section's table, by its last component.
    const std::string full(path);
    const std::string leaf = full.substr(full.rfind('.') + 1);
    std::vector<std::string> mine;
    for (const auto& r : rows)
      if (r.rfind("| `" + full + "` |", 0) == 0) mine.push_back(r);
    if (mine.empty())
      for (const auto& r : rows)
        if (r.rfind("| `" + leaf + "` |", 0) == 0) mine.push_back(r);
    REQUIRE_FALSE(mine.empty());
    const std::string stated = std::to_string(range.min) + ".." + std::to_string(range.max);
    for (const auto& r : mine) {
      INFO(r);
      CHECK(r.find(stated) != std::string::npos);
    }
  }
}

TEST_CASE("health: the error counters' rate, window, alarm and thresholds, checked at load") {
  Config c = load_ok(kNode);
  CHECK(c.health.counter_reads_per_second == 20);
  CHECK(c.health.counter_start_after_s == 30);
  CHECK(c.health.error_window_s == 3600);
  CHECK(c.health.link_errors_alarm);
  CHECK(c.health.link_errors_min_ports == 1);
  CHECK(c.health.error_thresholds.empty());
  c = load_ok(kNode + "health:\n  counter_reads_per_second: 0\n  counter_start_after_s: 5\n  error_window_s: 600\n"
                      "  link_errors_alarm: false\n  link_errors_min_ports: 3\n"
                      "  error_thresholds:\n    symbol_errors: 100\n    link_downed: 2\n");
  CHECK(c.health.counter_reads_per_second == 0);
  CHECK(c.health.counter_start_after_s == 5);
  CHECK(c.health.error_window_s == 600);
  CHECK_FALSE(c.health.link_errors_alarm);
  CHECK(c.health.link_errors_min_ports == 3);
  CHECK(c.health.error_thresholds == std::map<std::string, int>{{"symbol_errors", 100}, {"link_downed", 2}});
  auto e = errors_of(kNode + "health:\n  error_window_s: 10\n  counter_reads_per_second: 5000\n"
                             "  error_thresholds:\n    symbol_error: 5\n    link_downed: 0\n");
  REQUIRE(e.size() == 4);
  std::string all;
  for (const auto& m : e) all += m + "\n";
  INFO(all);
  CHECK(all.find("health.error_window_s") != std::string::npos);
  CHECK(all.find("health.counter_reads_per_second") != std::string::npos);
  CHECK(all.find("health.error_thresholds.symbol_error: unknown key; did you mean 'symbol_errors'?") != std::string::npos);
  CHECK(all.find("health.error_thresholds.link_downed") != std::string::npos);
  CHECK(errors_of(kNode + "health:\n  error_thresholds: 5\n").size() == 1);  // a map, not a number
}

TEST_CASE("health: the degraded-link alarm and the expected link rates, checked at load") {
  Config c = load_ok(kNode);
  CHECK(c.health.link_degraded_alarm);
  CHECK(c.health.link_degraded_min_links == 1);
  CHECK(c.health.expect_switch_links.empty());
  CHECK(c.health.expect_ca_links.empty());
  c = load_ok(kNode + "health:\n  link_degraded_alarm: false\n  link_degraded_min_links: 4\n"
                      "  expect_switch_links: 4X NDR\n  expect_ca_links: hdr\n");
  CHECK_FALSE(c.health.link_degraded_alarm);
  CHECK(c.health.link_degraded_min_links == 4);
  CHECK(c.health.expect_switch_links == "4X NDR");
  CHECK(c.health.expect_ca_links == "hdr");
  auto e = errors_of(kNode + "health:\n  expect_ca_links: 5X\n  link_degraded_min_links: 0\n  expect_switch: 4X\n");
  REQUIRE(e.size() == 3);
  CHECK(e[0].find("health.expect_ca_links") != std::string::npos);
  CHECK(e[0].find("'5X' is not a link width (1X 2X 4X 8X 12X) or speed") != std::string::npos);
  CHECK(e[1].find("health.link_degraded_min_links") != std::string::npos);
  CHECK(e[2].find("health.expect_switch: unknown key; did you mean 'expect_switch_links'?") != std::string::npos);
}

TEST_CASE("continuity: off by default, its keys, every peer's address and the sa_db_file it implies, checked at load") {
  Config c = load_ok(kNode);
  CHECK_FALSE(c.continuity.enabled);
  CHECK(c.opensm.sa_db_file.empty());
  const std::string section =
      "continuity:\n  listen: \"0.0.0.0:7390\"\n  certificate: /etc/smha/tls/head01.pem\n"
      "  private_key: /etc/smha/tls/head01.key\n  ca: /etc/smha/tls/ca.pem\n";
  const std::string peers = "peers:\n  - name: head02\n    port_guid: 0x20\n    address: \"[fd00::2]:7390\"\n";
  c = load_ok(kNode + peers + section + "  max_copy_age_s: 300\n  refresh_s: 10\n  max_copy_mib: 8\n");
  CHECK(c.continuity.enabled);
  CHECK(c.continuity.listen_address == "0.0.0.0");
  CHECK(c.continuity.listen_port == 7390);
  CHECK(c.continuity.private_key == "/etc/smha/tls/head01.key");
  CHECK(c.continuity.max_copy_age_s == 300);
  CHECK(c.continuity.refresh_s == 10);
  CHECK(c.continuity.max_copy_mib == 8);
  // What an SA copy may carry: the defaults, then each key (0: no bound).
  CHECK(c.continuity.max_services_per_port == 64);
  CHECK(c.continuity.max_services == 4096);
  CHECK(c.continuity.max_subscriptions_per_port == 64);
  CHECK(c.continuity.max_subscriptions == 4096);
  CHECK(c.continuity.max_groups == 8192);
  {
    const Config b = load_ok(kNode + peers + section +
                             "  max_services_per_port: 8\n  max_services: 0\n  max_subscriptions_per_port: 2\n"
                             "  max_subscriptions: 100\n  max_groups: 1000\n");
    CHECK(b.continuity.max_services_per_port == 8);
    CHECK(b.continuity.max_services == 0);
    CHECK(b.continuity.max_subscriptions_per_port == 2);
    CHECK(b.continuity.max_subscriptions == 100);
    CHECK(b.continuity.max_groups == 1000);
    const auto bad = errors_of(kNode + peers + section + "  max_services: -1\n");
    REQUIRE(bad.size() == 1);
    CHECK(bad[0].find("continuity.max_services") != std::string::npos);
  }
  REQUIRE(c.peers.size() == 1);
  CHECK(c.peers[0].address_host == "fd00::2");
  CHECK(c.peers[0].address_port == 7390);
  CHECK(c.opensm.sa_db_file == c.state_dir + "/opensm-sa.copy");
  // A peer without an address, a listen address that is a name, a relative
  // key path, a range broken, sa_db_dump turned off.
  auto e = errors_of(kNode + "peers:\n  - name: head02\n    port_guid: 0x20\n" +
                     "continuity:\n  listen: \"head01:7390\"\n  certificate: /etc/smha/tls/head01.pem\n"
                     "  private_key: tls/head01.key\n  ca: /etc/smha/tls/ca.pem\n  refresh_s: 1\n" +
                     "opensm:\n  sa_db_dump: false\n");
  std::string all;
  for (const auto& m : e) all += m + "\n";
  INFO(all);
  CHECK(all.find("peers[0].address: peer head02 has no address") != std::string::npos);
  CHECK(all.find("continuity.listen: the address must be an IP address") != std::string::npos);
  CHECK(all.find("continuity.private_key") != std::string::npos);
  CHECK(all.find("continuity.refresh_s") != std::string::npos);
  CHECK(all.find("opensm.sa_db_dump: is false") != std::string::npos);
  CHECK(e.size() == 5);
  e = errors_of(kNode + "continuity:\n  listen: \"0.0.0.0:7390\"\n");
  all.clear();
  for (const auto& m : e) all += m + "\n";
  INFO(all);
  CHECK(all.find("missing required key 'certificate'") != std::string::npos);
  CHECK(all.find("missing required key 'ca'") != std::string::npos);
  CHECK(errors_of(kNode + peers.substr(0, peers.find("    address")) + "    address: \"head02\"\n").size() == 1);
}
