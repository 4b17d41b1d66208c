// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// SystemdReporter on a real datagram socket: READY, STATUS, RELOADING, STOPPING, WATCHDOG.
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

namespace {

// NOTIFY_SOCKET pointing at a bound datagram socket for the test's lifetime.
class NotifySink {
 public:
  explicit NotifySink(const std::string& path) : path_(path) {
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd_ >= 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, path.data(), path.size());
    REQUIRE(::bind(fd_, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0);
    ::setenv("NOTIFY_SOCKET", path.c_str(), 1);
    ::unsetenv("WATCHDOG_USEC");
  }
  ~NotifySink() {
    ::unsetenv("NOTIFY_SOCKET");
    ::close(fd_);
  }
  // Every datagram waiting now.
  std::vector<std::string> drain() {
    std::vector<std::string> out;
    char buf[2048];
    ssize_t n;
    while ((n = ::recv(fd_, buf, sizeof buf, MSG_DONTWAIT)) >= 0) out.emplace_back(buf, static_cast<std::size_t>(n));
    return out;
  }

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace

TEST_CASE("SystemdReporter: READY once when ready and STATUS only on change and RELOADING and STOPPING") {
  TempDir dir;
  NotifySink sink(dir.path() + "/notify");
  boost::asio::io_context io;
  bool ready = false;
  std::string line = "STANDBY; no peer";
  SystemdReporter r(io, [&] { return ready; }, [&] { return line; }, 10ms);
  r.start();
  r.refresh();
  CHECK(sink.drain().empty());  // not ready: nothing (no watchdog configured)
  CHECK_FALSE(r.ready_sent());
  ready = true;
  io.run_for(50ms);  // the refresh timer notices
  CHECK(r.ready_sent());
  CHECK(sink.drain() == std::vector<std::string>{"READY=1\nSTATUS=STANDBY; no peer"});
  r.refresh();
  CHECK(sink.drain().empty());  // unchanged
  line = "MASTER; no peer";
  r.refresh();
  CHECK(sink.drain() == std::vector<std::string>{"STATUS=MASTER; no peer"});
  r.reloading();
  r.reloaded();
  CHECK(sink.drain() ==
        std::vector<std::string>{"RELOADING=1", "READY=1\nSTATUS=MASTER; no peer"});
  r.stopping("SIGTERM");
  CHECK(sink.drain() == std::vector<std::string>{"STOPPING=1", "STATUS=stopping: SIGTERM"});
  line = "STANDBY; no peer";
  r.refresh();
  CHECK(sink.drain().empty());  // stopped: nothing more
}

TEST_CASE("SystemdReporter pings WATCHDOG at half of WATCHDOG_USEC") {
  TempDir dir;
  NotifySink sink(dir.path() + "/notify");
  ::setenv("WATCHDOG_USEC", "40000", 1);  // 20 ms
  ::unsetenv("WATCHDOG_PID");
  boost::asio::io_context io;
  SystemdReporter r(io, [] { return false; }, [] { return std::string("x"); }, 1000ms);
  r.start();
  REQUIRE(r.watchdog_interval());
  CHECK(*r.watchdog_interval() == 20ms);
  io.run_for(110ms);
  const auto got = sink.drain();
  ::unsetenv("WATCHDOG_USEC");
  // One at start, then every 20 ms: 5 or 6 in 110 ms (timers may run late, never early).
  CHECK(got.size() >= 3);
  CHECK(got.size() <= 6);
  for (const auto& m : got) CHECK(m == "WATCHDOG=1");
}
