// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// Several instances on one head: what two of them may not share, found from
// the files beside each other and the units that are enabled.
#include <catch2/catch.hpp>

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "smha/service/instances.hpp"

using namespace smha;
using namespace smha::service;
namespace fs = std::filesystem;

namespace {

struct Dir {
  fs::path root;
  Dir() {
    std::string tmpl = (fs::temp_directory_path() / "smha-instances-XXXXXX").string();
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    root = tmpl;
    fs::create_directories(root / "etc");
    fs::create_directories(root / "units" / "multi-user.target.wants");
  }
  ~Dir() {
    std::error_code ec;
    fs::remove_all(root, ec);
  }
  std::string write(const std::string& name, const std::string& yaml) {
    const auto p = root / "etc" / name;
    std::ofstream(p) << yaml;
    return p.string();
  }
  void enable(const std::string& unit) {
    fs::create_symlink("/lib/systemd/system/smhad@.service", root / "units" / "multi-user.target.wants" / unit);
  }
  std::string units() const { return (root / "units").string(); }
};

std::string instance(const std::string& guid, const std::string& extra = {}) {
  return "node:\n  name: head01\n  port_guid: " + guid + "\n" + extra;
}

config::Config load(const std::string& path, const std::string& fabric) {
  auto r = config::load_config(path, config::LoadOptions{fabric});
  INFO(r.error_text());
  REQUIRE(r.ok());
  return r.value();
}

}  // namespace

TEST_CASE("instances: the file names the instance") {
  CHECK(instance_of_file("/etc/smha/smha.yaml").empty());
  CHECK(instance_of_file("/etc/smha/rail0.yaml") == "rail0");
  CHECK(instance_of_file("/etc/smha/rail0.yml").empty());
}

TEST_CASE("instances: two fabrics with their own ports share nothing") {
  Dir d;
  const auto f0 = d.write("fab0.yaml", instance("0x10"));
  d.write("fab1.yaml", instance("0x20"));
  d.write("smha.yaml", instance("0x30"));
  d.enable("smhad@fab1.service");
  d.enable("smhad.service");
  CHECK(instance_conflicts(load(f0, "fab0"), d.units()).empty());
}

TEST_CASE("instances: a shared port, socket, state dir or metrics port names the other instance's file") {
  Dir d;
  const auto f0 = d.write("fab0.yaml", instance("0x10", "metrics:\n  listen: 127.0.0.1:9101\n"));
  const auto f1 = d.write("fab1.yaml", instance("0x10", "state_dir: /var/lib/smha/fab0\ncontrol:\n  socket: "
                                                        "/run/smha/fab0.sock\nmetrics:\n  listen: 127.0.0.1:9101\n"));
  d.enable("smhad@fab1.service");
  const auto got = instance_conflicts(load(f0, "fab0"), d.units());
  const std::vector<std::string> want = {
      "node.port_guid 0x0000000000000010 is also the node.port_guid of " + f1 +
          " (smhad@fab1): two instances may not share it; give each its own",
      "state_dir /var/lib/smha/fab0 is also the state_dir of " + f1 +
          " (smhad@fab1): two instances may not share it; give each its own",
      "control.socket /run/smha/fab0.sock is also the control.socket of " + f1 +
          " (smhad@fab1): two instances may not share it; give each its own",
      "metrics.listen 127.0.0.1 port 9101 is also the metrics.listen of " + f1 +
          " (smhad@fab1): two instances may not share it; give each its own"};
  CHECK(got == want);
}

TEST_CASE("instances: the one-fabric smha.yaml and an instance with its defaults differ in every path") {
  Dir d;
  const auto main = d.write("smha.yaml", instance("0x10"));
  d.write("fab0.yaml", instance("0x10"));  // the same port: the only clash
  d.enable("smhad@fab0.service");
  const auto got = instance_conflicts(load(main, ""), d.units());
  REQUIRE(got.size() == 1);
  CHECK(got[0].rfind("node.port_guid 0x0000000000000010 is also the node.port_guid of", 0) == 0);
  CHECK(got[0].find("(smhad@fab0)") != std::string::npos);
}

TEST_CASE("instances: a spare copy is not an instance until enabled or running") {
  Dir d;
  const auto f0 = d.write("fab0.yaml", instance("0x10"));
  const auto spare = d.write("fab0-old.yaml", instance("0x10", "fabric: fab0-old\n"));
  d.write("broken.yaml", "node: [\n");
  d.enable("smhad@fab0.service");
  CHECK(instance_conflicts(load(f0, "fab0"), d.units()).empty());
  // Running: its control socket exists.
  const auto sock = (d.root / "old.sock").string();
  d.write("fab0-old.yaml", instance("0x10", "fabric: fab0-old\ncontrol:\n  socket: " + sock + "\n"));
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::snprintf(sa.sun_path, sizeof sa.sun_path, "%s", sock.c_str());
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0);
  const auto running = instance_conflicts(load(f0, "fab0"), d.units());
  ::close(fd);
  REQUIRE(running.size() == 1);
  CHECK(running[0].find(spare + " (smhad@fab0-old)") != std::string::npos);
  // Enabled.
  fs::remove(sock);
  d.enable("smhad@fab0-old.service");
  CHECK(instance_conflicts(load(f0, "fab0"), d.units()).size() == 1);
}

TEST_CASE("instances: a shared sa_db_file is a clash, also when it is the other's file of another kind") {
  Dir d;
  const auto f0 = d.write("fab0.yaml", instance("0x10", "opensm:\n  sa_db_file: /var/lib/smha/sa.db\n"));
  const auto f1 = d.write("fab1.yaml", instance("0x20", "opensm:\n  sa_db_file: /var/lib/smha/sa.db\n"));
  const auto f2 = d.write("fab2.yaml", instance("0x30", "opensm:\n  conf_path: /var/lib/smha/sa.db\n"));
  d.enable("smhad@fab1.service");
  d.enable("smhad@fab2.service");
  const auto got = instance_conflicts(load(f0, "fab0"), d.units());
  const std::vector<std::string> want = {
      "opensm.sa_db_file /var/lib/smha/sa.db is also the opensm.sa_db_file of " + f1 +
          " (smhad@fab1): two instances may not share it; give each its own",
      "opensm.sa_db_file /var/lib/smha/sa.db is also the opensm.conf_path of " + f2 +
          " (smhad@fab2): two instances may not share it; give each its own"};
  CHECK(got == want);
}

TEST_CASE("instances: continuity.listen clashes with another's on the same port, wildcard or metrics alike") {
  const std::string certs = "  certificate: /etc/smha/head01.pem\n  private_key: /etc/smha/head01.key\n"
                            "  ca: /etc/smha/ca.pem\n";
  auto channel = [&](const std::string& guid, const std::string& listen, const std::string& extra = {}) {
    return "node:\n  name: head01\n  port_guid: " + guid +
           "\npeers:\n  - name: head02\n    port_guid: 0x99\n    address: 10.0.0.2:7390\n"
           "continuity:\n  listen: " + listen + "\n" + certs + extra;
  };
  Dir d;
  const auto f0 = d.write("fab0.yaml", channel("0x10", "0.0.0.0:7390"));
  const auto f1 = d.write("fab1.yaml", channel("0x20", "10.0.0.1:7390"));
  const auto f2 = d.write("fab2.yaml", channel("0x30", "10.0.0.1:7391", "metrics:\n  listen: 127.0.0.1:7390\n"));
  d.write("fab3.yaml", channel("0x40", "10.0.0.1:7392"));
  d.write("fab4.yaml", channel("0x50", "\"[::1]:7390\""));  // IPv6 only: 0.0.0.0 does not take it
  d.enable("smhad@fab1.service");
  d.enable("smhad@fab2.service");
  d.enable("smhad@fab3.service");
  d.enable("smhad@fab4.service");
  const auto got = instance_conflicts(load(f0, "fab0"), d.units());
  const std::vector<std::string> want = {
      "continuity.listen 0.0.0.0 port 7390 is also the continuity.listen 10.0.0.1 port 7390 of " + f1 +
          " (smhad@fab1): two instances may not share it; give each its own",
      "continuity.listen 0.0.0.0 port 7390 is also the metrics.listen 127.0.0.1 port 7390 of " + f2 +
          " (smhad@fab2): two instances may not share it; give each its own"};
  CHECK(got == want);
  // Seen from the instance on the one address.
  d.enable("smhad@fab0.service");
  const auto mine = instance_conflicts(load(f1, "fab1"), d.units());
  REQUIRE(mine.size() == 1);
  CHECK(mine[0] == "continuity.listen 10.0.0.1 port 7390 is also the continuity.listen 0.0.0.0 port 7390 of " + f0 +
                       " (smhad@fab0): two instances may not share it; give each its own");
}
