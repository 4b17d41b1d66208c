// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// smhad --check-config: every stage's problems in one run, the TLS files,
// hooks, and the route warnings when the fabric answers.
#include <catch2/catch.hpp>

#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include "smha/core/limits.hpp"
#include "smha/head/head_events.hpp"
#include "smha/head/head_status.hpp"
#include "smha/service/check_config.hpp"
#include "smha/service/hook_dispatcher.hpp"
#include "smha/service/systemd_reporter.hpp"
#include "smha/service/service.hpp"
#include "smha/os/posix_process_runner.hpp"

#include "fake_transport.hpp"
#include "sample_config.hpp"
#include "temp_dir.hpp"

using namespace smha;
using namespace smha::service;
using namespace smha::head;
using namespace std::chrono_literals;
using smha::test::FakeTransport;
using smha::test::TempDir;
using smha::test::slurp;

TEST_CASE("smhad --check-config also refuses an insecure hook") {
  TempDir dir;
  const std::string hook = dir.path() + "/hook";
  std::ofstream(hook) << "#!/bin/sh\n";
  REQUIRE(::chmod(hook.c_str(), 0757) == 0);
  const std::string yaml = dir.path() + "/smha.yaml";
  std::ofstream(yaml) << "node:\n  name: head01\n  port_guid: 0x10\nsm_key: 0x5\nsa_key: 0x6\n"
                      << "peers:\n  - name: head02\n    port_guid: 0x20\n"
                      << "opensm:\n  conf_path: " << dir.path() << "/opensm.conf\n"
                      << "hooks:\n  master: " << hook << "\n";
  opensm::ExecOpensmRunner runner;
  std::ostringstream out, err;
  CHECK(run_check_config(yaml, runner, out, err) == 1);
  CHECK(out.str().empty());
  CHECK(err.str() == "error: " + yaml + ": hooks.master: hook '" + hook +
                         "': writable by group or others (mode 0757)\n" + yaml + ": 1 error(s)\n");
  REQUIRE(::chmod(hook.c_str(), 0755) == 0);
  std::ostringstream out2, err2;
  CHECK(run_check_config(yaml, runner, out2, err2) == 0);
  CHECK(out2.str().find(yaml + ": OK for OpenSM") == 0);
}

// One run shows every problem of every stage (OpenSM's keys, the hooks, the
// state_dir, the HA policy), not only the first stage's.
TEST_CASE("smhad --check-config reports the problems of every stage in one run") {
  TempDir dir;
  const std::string hook = dir.path() + "/hook";
  std::ofstream(hook) << "#!/bin/sh\n";
  REQUIRE(::chmod(hook.c_str(), 0757) == 0);
  const std::string yaml = dir.path() + "/smha.yaml";
  std::ofstream(yaml) << "node:\n  name: head01\n  port_guid: 0x10\nsm_key: 0x5\n"
                      << "state_dir: /proc/smha-no-such-dir\n"
                      << "opensm:\n  conf_path: " << dir.path() << "/opensm.conf\n"
                      << "  extra:\n    no_such_key: 1\n    no_clients_rereg: TRUE\n"
                      << "hooks:\n  master: " << hook << "\n";
  opensm::ExecOpensmRunner runner;
  std::ostringstream out, err;
  CHECK(run_check_config(yaml, runner, out, err) == 1);
  CHECK(out.str().empty());
  const std::string e = err.str();
  INFO(e);
  CHECK(e.find("warning: " + yaml + ":10:5: opensm.extra.no_clients_rereg: is TRUE") == 0);
  CHECK(e.find("error: " + yaml + ":9:5: opensm.extra.no_such_key: opensm.conf key 'no_such_key' is not known") !=
        std::string::npos);
  CHECK(e.find("Unrecognized token\")") == std::string::npos);  // the same key once
  CHECK(e.find("error: " + yaml + ": hooks.master: hook '" + hook + "': writable by group or others") !=
        std::string::npos);
  CHECK(e.find("error: " + yaml + ": state_dir /proc/smha-no-such-dir is not usable: ") != std::string::npos);
  CHECK(e.find("error: " + yaml + ": peers: HA policy: peers: at least one other head is needed\n") !=
        std::string::npos);
  CHECK(e.find(yaml + ": 4 error(s)\n") != std::string::npos);
}

// Start-up's policy check (map_config) runs in --check-config too: a file with
// no peer loads, and smhad would refuse to start with it.
TEST_CASE("smhad --check-config refuses what start-up refuses: no peer") {
  TempDir dir;
  const std::string yaml = dir.path() + "/smha.yaml";
  std::ofstream(yaml) << "node:\n  name: head01\n  port_guid: 0x10\nsm_key: 0x5\nsa_key: 0x6\n"
                      << "opensm:\n  conf_path: " << dir.path() << "/opensm.conf\n";
  opensm::ExecOpensmRunner runner;
  std::ostringstream out, err;
  CHECK(run_check_config(yaml, runner, out, err) == 1);
  CHECK(out.str().empty());
  CHECK(err.str() == "error: " + yaml + ": peers: HA policy: peers: at least one other head is needed\n" + yaml +
                         ": 1 error(s)\n");
}

namespace {

// A head's files: its YAML, and certificates from scripts/make-peer-certs.
struct TlsHead {
  std::filesystem::path dir;
  TlsHead() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "smha-tls-XXXXXX").string();
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    dir = tmpl;
    const std::string mk = std::string(SMHA_SOURCE_DIR) + "/scripts/make-peer-certs " + (dir / "pki").string();
    REQUIRE(std::system((mk + " head01").c_str()) == 0);
  }
  ~TlsHead() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  std::string pki(const std::string& f) const { return (dir / "pki" / f).string(); }
  std::string write(const std::string& certificate, const std::string& key) const {
    const std::string path = (dir / "smha.yaml").string();
    std::ofstream(path) << "node:\n  name: head01\n  port_guid: 0x10\nsm_key: 0x5\nsa_key: 0x6\n"
                        << "peers:\n  - name: head02\n    port_guid: 0x20\n    address: 10.0.0.2:7390\n"
                        << "state_dir: " << (dir / "state").string() << "\n"
                        << "opensm:\n  conf_path: " << (dir / "opensm.conf").string() << "\n"
                        << "continuity:\n  listen: 127.0.0.1:7390\n  certificate: " << certificate
                        << "\n  private_key: " << key << "\n  ca: " << pki("ca.pem") << "\n";
    return path;
  }
};

int check_config(const std::string& path, std::string& err) {
  opensm::ExecOpensmRunner runner;
  std::ostringstream out, e;
  const int rc = run_check_config(path, runner, out, e, {});
  err = e.str();
  return rc;
}

}  // namespace

TEST_CASE("smhad --check-config refuses the TLS files start-up refuses: a missing certificate, a key others can read") {
  TlsHead h;
  std::string err;
  const std::string good = h.write(h.pki("head01.pem"), h.pki("head01.key"));
  const int rc = check_config(good, err);
  INFO(err);
  REQUIRE(rc == 0);

  const std::string missing = h.write(h.pki("nope.pem"), h.pki("head01.key"));
  CHECK(check_config(missing, err) == 1);
  CHECK_THAT(err, Catch::Contains("error: " + missing + ": continuity.certificate " + h.pki("nope.pem") +
                                  ": No such file or directory\n"));

  REQUIRE(::chmod(h.pki("head01.key").c_str(), 0644) == 0);
  const std::string readable = h.write(h.pki("head01.pem"), h.pki("head01.key"));
  CHECK(check_config(readable, err) == 1);
  CHECK_THAT(err, Catch::Contains("error: " + readable + ": continuity.private_key " + h.pki("head01.key") +
                                  " can be read by others (mode 420 octal 644); make it 0600\n"));
}

TEST_CASE("route_warnings: a GUID on no port, a lid or dr_path discovery contradicts") {
  auto c = smha::test::two_heads();
  c.peers[0].dr_path = DrPath{{1, 3, 1}};
  fabric::DiscoveryResult r;
  r.nodes = 6;
  r.ports = 18;
  fabric::ResolvedPort p;
  p.port_guid = Guid{0x20};
  p.path = DrPath{{1, 5, 1}};
  p.lid = Lid{9};
  p.lid_known = true;
  r.found[Guid{0x20}] = p;
  r.missing = {Guid{0x30}};
  auto w = route_warnings(c, r);
  REQUIRE(w.size() == 3);
  CHECK(w[0].key_path == "peers[0].lid");
  CHECK(w[0].message == "peer head02 is at LID 9, not 7 (directed-route discovery)");
  CHECK(w[1].key_path == "peers[0].dr_path");
  CHECK(w[1].message == "peer head02 is at directed route 0,1,5,1, not 0,1,3,1 (directed-route discovery)");
  CHECK(w[2].key_path == "peers[1].port_guid");
  CHECK(w[2].message == "peer head03 (0x0000000000000030) is on no port of the fabric: not found "
                        "(searched 6 nodes, 18 ports)");
  CHECK(w[2].to_string().find("t.yaml:") == 0);
  // What discovery confirms is not warned about.
  r.found[Guid{0x20}].lid = Lid{7};
  r.found[Guid{0x20}].path = DrPath{{1, 3, 1}};
  r.found[Guid{0x30}] = p;
  CHECK(route_warnings(c, r).empty());
}

TEST_CASE("smhad --check-config prints route warnings when the fabric answers, and still passes") {
  TempDir dir;
  const std::string yaml = dir.path() + "/smha.yaml";
  std::ofstream(yaml) << "node:\n  name: head01\n  port_guid: 0x10\nsm_key: 0x5\nsa_key: 0x6\n"
                      << "peers:\n  - name: head02\n    port_guid: 0x20\n"
                      << "opensm:\n  conf_path: " << dir.path() << "/opensm.conf\n";
  opensm::ExecOpensmRunner runner;
  std::ostringstream out, err;
  RouteProbe none_found = [](const config::Config&) {
    fabric::DiscoveryResult r;
    r.nodes = 3;
    r.ports = 4;
    r.missing = {Guid{0x20}};
    return std::optional<fabric::DiscoveryResult>(r);
  };
  CHECK(run_check_config(yaml, runner, out, err, none_found) == 0);
  CHECK(out.str().find(yaml + ": OK for OpenSM") == 0);
  CHECK(err.str() == "warning: " + yaml + ":8:16: peers[0].port_guid: peer head02 (0x0000000000000020) is on no "
                     "port of the fabric: not found (searched 3 nodes, 4 ports)\n");
  // No fabric: nothing checked, nothing printed.
  std::ostringstream out2, err2;
  CHECK(run_check_config(yaml, runner, out2, err2, [](const config::Config&) {
          return std::optional<fabric::DiscoveryResult>();
        }) == 0);
  CHECK(err2.str().empty());
}
