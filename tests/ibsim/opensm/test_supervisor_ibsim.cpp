// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// OpensmSupervisor driving the real OpenSM under ibsim: it reaches MASTER, a
// kill -9 is followed by a restart to MASTER, a smhad restart adopts the running
// OpenSM (same PID, still MASTER), and an OpenSM that cannot bind is reported as
// a permanent failure instead of spinning.
#include <catch2/catch.hpp>

#include <signal.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <sstream>

#include "ibsim_harness.hpp"
#include "process_test_util.hpp"
#include "smhad_heads.hpp"
#include "smha/opensm/supervisor.hpp"
#include "smha/os/asio_scheduler.hpp"
#include "smha/os/posix_file_system.hpp"
#include "smha/os/posix_process_runner.hpp"

using namespace smha;
using namespace smha::opensm;
using namespace smha::os;
using namespace smha::testing;
using namespace std::chrono_literals;

namespace {

// smhad's OpenSM supervision on node `node` of `fabric`, rebuildable to simulate a
// smhad restart.
struct Smhad {
  Smhad(IbsimFabric& f, std::string n, std::string g, std::string d, ProcessGuard& pg, boost::asio::io_context& i)
      : fabric(f), node(std::move(n)), guid(std::move(g)), dir(std::move(d)), guard(pg), io(i) {}
  IbsimFabric& fabric;
  std::string node;
  std::string guid;  // -g
  std::string dir;
  ProcessGuard& guard;
  boost::asio::io_context& io;
  SteadyClock clock;
  os::AsioScheduler sched{io, clock};
  PosixFileSystem fs;
  std::unique_ptr<PosixProcessRunner> runner;
  std::unique_ptr<OpensmSupervisor> sup;
  int entered_master = 0;  // stdout (SYS) lines

  // "SUBNET UP" lines in OpenSM's log file: OpenSM 3.3.23 logs the first one at
  // INFO level (0x02), not SYS, so it does not reach stdout (measured here).
  int subnet_up() const {
    const std::string log = read_text(dir + "/opensm.log");
    int n = 0;
    for (auto pos = log.find("SUBNET UP"); pos != std::string::npos; pos = log.find("SUBNET UP", pos + 1)) ++n;
    return n;
  }

  void start_daemon() {
    sup.reset();
    runner = std::make_unique<PosixProcessRunner>(io);
    SupervisorOptions o;
    o.conf_path = dir + "/opensm.conf";
    o.pidfile_path = dir + "/opensm.pid";
    o.backoff_initial = 200ms;
    o.backoff_max = 1s;
    o.crash_loop_count = 3;
    o.stop_timeout = 3s;
    o.on_change = [this](const SupervisorStatus& s) { guard.add(s.pid); };
    o.on_line = [this](int, std::string_view line) {
      if (line.find("Entering MASTER state") != std::string_view::npos) ++entered_master;
    };
    sup = std::make_unique<OpensmSupervisor>(
        sched, *runner, fs,
        [this] {
          ProcessSpec spec{"/usr/sbin/opensm",
                           {"opensm", "-F", dir + "/opensm.conf", "-g", guid, "-f", dir + "/opensm.log"},
                           fabric.client_env(node),
                           dir};
          spec.env.emplace_back("OSM_CACHE_DIR", dir);
          spec.env.emplace_back("OSM_TMP_DIR", dir);
          return spec;
        },
        o);
  }
};

std::string tail(const std::string& text, std::size_t n = 3000) {
  return text.size() <= n ? text : text.substr(text.size() - n);
}

constexpr const char* kConf = "# rendered by smhad (test)\nforce_log_flush TRUE\nsm_priority 0\n";

}  // namespace

TEST_CASE("supervised real OpenSM reaches MASTER and survives kill -9 and a smhad restart",
          "[ibsim][supervisor]") {
  IbsimFabric fabric(topology_path("two-switch-4hca.net"));
  ProcessGuard guard;  // destroyed before the fabric: OpenSM goes before ibsim
  boost::asio::io_context io;
  const auto hca1 = fabric.node_port("Hca1");
  REQUIRE(hca1);
  char guid[32];
  std::snprintf(guid, sizeof guid, "0x%016llx", static_cast<unsigned long long>(hca1->port_guid));
  const std::string dir = fabric.scratch_dir() + "/smhad-Hca1";
  std::filesystem::create_directories(dir);
  Smhad smhad{fabric, "Hca1", guid, dir, guard, io};
  smhad.start_daemon();

  // Start: OpenSM reaches MASTER, seen from a third node.
  REQUIRE(smhad.sup->start(kConf).ok());
  const int first = smhad.sup->status().pid;
  if (!run_until(io, [&] { return smhad.entered_master == 1 && smhad.subnet_up() >= 1; }, 20s))
    FAIL("no MASTER / SUBNET UP; OpenSM log (tail):\n" << tail(read_text(dir + "/opensm.log")));
  auto master = query_sm(fabric, "Hca3");
  CHECK(master.state == 3);
  CHECK(master.guid == hca1->port_guid);

  // kill -9: restarted with a new PID, MASTER again.
  REQUIRE(::kill(first, SIGKILL) == 0);
  REQUIRE(run_until(io, [&] { return smhad.sup->status().state == SupervisorState::Backoff; }, 5s));
  CHECK(smhad.sup->status().last_exit->status == SIGKILL);
  free_ibsim_slot(fabric, first);
  REQUIRE(run_until(io, [&] { return smhad.sup->status().state == SupervisorState::Running; }, 5s));
  const int second = smhad.sup->status().pid;
  CHECK(second != first);
  if (!run_until(io, [&] { return smhad.entered_master == 2 && smhad.subnet_up() >= 2; }, 20s))
    FAIL("no MASTER / SUBNET UP after the restart; OpenSM log (tail):\n" << tail(read_text(dir + "/opensm.log")));
  master = query_sm(fabric, "Hca3");
  CHECK(master.state == 3);
  CHECK(master.guid == hca1->port_guid);

  // smhad restarts: the supervisor goes away without stopping OpenSM; the new one
  // adopts the same process and the fabric keeps its master.
  smhad.runner.reset();
  smhad.sup.reset();
  REQUIRE(alive(second));
  smhad.start_daemon();
  auto r = smhad.sup->start(kConf);
  REQUIRE(r.ok());
  CHECK(r->adopted);
  CHECK_FALSE(r->conf_differs);
  CHECK(smhad.sup->status().pid == second);
  CHECK(smhad.sup->status().spawns == 0);
  master = query_sm(fabric, "Hca3");
  CHECK(master.state == 3);
  CHECK(master.guid == hca1->port_guid);

  // A priority-only reload is a SIGHUP: same process.
  auto reload = smhad.sup->reload("# rendered by smhad (test)\nforce_log_flush TRUE\nsm_priority 5\n",
                                  {ConfChangeKind::Sighup, ""});
  REQUIRE(reload.ok());
  CHECK(*reload == ReloadAction::Signalled);
  CHECK(smhad.sup->status().pid == second);
  // OpenSM re-read the file: the master now reports priority 5 (polled, bounded).
  MasterView after;
  CHECK(run_until(io, [&] {
    after = query_sm(fabric, "Hca3");
    return after.priority == 5;
  }, 10s));
  CHECK(after.state == 3);
  CHECK(after.guid == hca1->port_guid);
  CHECK(alive(second));

  // A clean stop takes OpenSM down (SIGTERM is enough for it).
  bool stopped = false;
  smhad.sup->stop([&] { stopped = true; });
  REQUIRE(run_until(io, [&] { return stopped; }, 10s));
  CHECK_FALSE(alive(second));
  CHECK(smhad.sup->status().state == SupervisorState::Stopped);
}

TEST_CASE("supervised real OpenSM that cannot bind its port fails permanently", "[ibsim][supervisor]") {
  IbsimFabric fabric(topology_path("two-switch-4hca.net"));
  ProcessGuard guard;
  boost::asio::io_context io;
  const std::string dir = fabric.scratch_dir() + "/smhad-Hca1";
  std::filesystem::create_directories(dir);
  // A port GUID that is not on this node.
  Smhad smhad{fabric, "Hca1", "0x0badc0ffee000001", dir, guard, io};
  smhad.start_daemon();
  REQUIRE(smhad.sup->start(kConf).ok());
  REQUIRE(run_until(io, [&] { return smhad.sup->status().state == SupervisorState::Failed; }, 20s));
  const auto& st = smhad.sup->status();
  INFO(st.reason);
  CHECK(st.spawns == 1);
  CHECK(st.last_exit_class == ExitClass::Permanent);
  CHECK(st.reason.find("cannot bind to the port") != std::string::npos);
  REQUIRE(st.last_exit);
  CHECK(st.last_exit->status == 0);  // OpenSM itself exits 0 here
}
