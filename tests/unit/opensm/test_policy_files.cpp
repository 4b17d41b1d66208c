// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// Policy files opensm.conf names (partitions, QoS, routing inputs): their
// content hash is in the rendered header, so an edit in place changes the
// rendered text and classify_change asks for a SIGHUP.
#include <catch2/catch.hpp>

#include <string>

#include "smha/opensm/conf.hpp"
#include "test_support.hpp"

using namespace smha;
using namespace smha::opensm;
using namespace smha::os;
using namespace smha::opensm::test;
using Kind = ReloadDecision::Kind;

namespace {

config::Config policy_config() {
  const std::string yaml = R"(node:
  name: head01
  ca: mlx5_0
  port: 1
peers:
  - name: head02
    port_guid: 0x0002c90300a1b2c2
sm_key: 0x0123456789abcdef
opensm:
  extra:
    qos: true
    partition_config_file: /etc/smha/partitions.conf
    qos_policy_file: /etc/smha/qos-policy.conf
    root_guid_file: /etc/smha/roots
    node_name_map_name: /etc/smha/node-names
)";
  auto r = config::load_config_from_string(yaml, "policy.yaml");
  INFO(r.error_text());
  REQUIRE(r.ok());
  return r.value();
}

std::string render_with(const config::Config& c, const FileSystem& fs) {
  RenderInputs in;
  in.sm_priority = 10;
  in.policy_files = hash_policy_files(c, fs);
  return render_opensm_conf(c, in);
}

}  // namespace

TEST_CASE("policy files: hashed in the header, an edit asks for a SIGHUP") {
  const auto c = policy_config();
  MemoryFileSystem fs;
  fs.files["/etc/smha/partitions.conf"] = "Default=0x7fff, ipoib : ALL=full;\n";
  fs.files["/etc/smha/qos-policy.conf"] = "qos-ulps\n  default : 0\nend-qos-ulps\n";
  fs.files["/etc/smha/node-names"] = "0x0002c90300a1b2c1 head01\n";
  // root_guid_file is left missing.

  const auto hashes = hash_policy_files(c, fs);
  REQUIRE(hashes.size() == 3);  // node_name_map_name is read only at OpenSM's start
  CHECK(hashes[0].key == "partition_config_file");
  CHECK(hashes[0].path == "/etc/smha/partitions.conf");
  CHECK(hashes[0].hash.rfind("fnv1a64:", 0) == 0);
  CHECK(hashes[1].key == "qos_policy_file");
  CHECK(hashes[2].key == "root_guid_file");
  CHECK(hashes[2].hash == "missing");

  const std::string before = render_with(c, fs);
  CHECK(before.find("# policy-file partition_config_file /etc/smha/partitions.conf fnv1a64:") !=
        std::string::npos);
  CHECK(before.find("# policy-file root_guid_file /etc/smha/roots missing\n") != std::string::npos);
  CHECK(header_policy_files(before).size() == 3);
  // The same files: the same bytes, nothing to do.
  CHECK(render_with(c, fs) == before);
  CHECK(classify_change(before, render_with(c, fs)).kind == Kind::None);

  SECTION("a new PKey in the partitions file") {
    fs.files["/etc/smha/partitions.conf"] += "storage=0x8001 : ALL=full;\n";
    const std::string after = render_with(c, fs);
    CHECK(after != before);
    const auto d = classify_change(before, after);
    CHECK(d.kind == Kind::Sighup);
    REQUIRE(d.changed.size() == 1);
    CHECK(d.changed[0] == "partition_config_file (content)");
    CHECK(diff_lines(before, after, "a", "b").find("+# policy-file partition_config_file") != std::string::npos);
  }
  SECTION("a QoS policy edited and the missing root GUID file created") {
    fs.files["/etc/smha/qos-policy.conf"] = "qos-ulps\n  default : 1\nend-qos-ulps\n";
    fs.files["/etc/smha/roots"] = "0x0002c90300a1b2c9\n";
    const auto d = classify_change(before, render_with(c, fs));
    CHECK(d.kind == Kind::Sighup);
    CHECK(d.changed == std::vector<std::string>{"qos_policy_file (content)", "root_guid_file (content)"});
  }
  SECTION("the node name map is not tracked (OpenSM reads it only at start)") {
    fs.files["/etc/smha/node-names"] += "0x0002c90300a1b2c2 head02\n";
    CHECK(render_with(c, fs) == before);
  }
  SECTION("a content change never turns a restart into a SIGHUP") {
    fs.files["/etc/smha/partitions.conf"] += "storage=0x8001 : ALL=full;\n";
    std::string after = render_with(c, fs);
    after += "lmc 1\n";  // not reloadable
    const auto d = classify_change(before, after);
    CHECK(d.kind == Kind::Restart);
    CHECK(d.key == "lmc");
  }
}

TEST_CASE("policy files: a file that cannot be read is 'unreadable', and a render without a file system has no hashes") {
  const auto c = policy_config();
  MemoryFileSystem fs;
  fs.read_error = Error{Errc::Io, "permission denied"};
  const auto hashes = hash_policy_files(c, fs);
  REQUIRE(hashes.size() == 3);
  for (const auto& h : hashes) CHECK(h.hash == "unreadable");
  RenderInputs in;
  in.sm_priority = 10;
  CHECK(render_opensm_conf(c, in).find("# policy-file") == std::string::npos);
}
