// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include <catch2/catch.hpp>

#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>

#include "smha/platform/notify.hpp"
#include "test_util.hpp"

using smha::platform::Notifier;
using smha::platform::test::ScopedEnv;
using smha::platform::test::TempDir;

namespace {

// The receiving end systemd would hold: an AF_UNIX datagram socket.
class NotifySocket {
 public:
  explicit NotifySocket(const std::string& name) {
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd_ >= 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    REQUIRE(name.size() < sizeof(addr.sun_path));
    std::memcpy(addr.sun_path, name.data(), name.size());
    if (name[0] == '@') addr.sun_path[0] = '\0';
    const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size());
    REQUIRE(::bind(fd_, reinterpret_cast<const sockaddr*>(&addr), len) == 0);
    timeval tv{5, 0};  // upper bound on waiting for a datagram that must come
    REQUIRE(::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) == 0);
  }
  ~NotifySocket() { ::close(fd_); }
  NotifySocket(const NotifySocket&) = delete;
  NotifySocket& operator=(const NotifySocket&) = delete;

  std::string receive() {
    char buf[4096];
    const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    REQUIRE(n >= 0);
    return std::string(buf, static_cast<std::size_t>(n));
  }
  bool empty() {
    char buf[16];
    return ::recv(fd_, buf, sizeof buf, MSG_DONTWAIT) < 0 && errno == EAGAIN;
  }

 private:
  int fd_ = -1;
};

}  // namespace

TEST_CASE("Notifier sends READY, STATUS, WATCHDOG, RELOADING, STOPPING, ERRNO datagrams",
          "[notify]") {
  TempDir dir;
  const std::string path = (dir.path() / "notify").string();
  NotifySocket sock(path);
  ScopedEnv env("NOTIFY_SOCKET", path);
  Notifier notifier;
  REQUIRE(notifier.enabled());

  CHECK(notifier.ready());
  CHECK(sock.receive() == "READY=1");
  CHECK(notifier.ready("STANDBY; peer head01 MASTER prio 15"));
  CHECK(sock.receive() == "READY=1\nSTATUS=STANDBY; peer head01 MASTER prio 15");
  CHECK(notifier.status("MASTER; peer head02 STANDBY prio 1"));
  CHECK(sock.receive() == "STATUS=MASTER; peer head02 STANDBY prio 1");
  CHECK(notifier.watchdog());
  CHECK(sock.receive() == "WATCHDOG=1");
  CHECK(notifier.reloading());
  CHECK(sock.receive() == "RELOADING=1");
  CHECK(notifier.stopping());
  CHECK(sock.receive() == "STOPPING=1");
  CHECK(notifier.error_number(EACCES, "cannot open /dev/infiniband/umad0"));
  CHECK(sock.receive() == "ERRNO=13\nSTATUS=cannot open /dev/infiniband/umad0");
  CHECK(sock.empty());
}

TEST_CASE("Notifier keeps STATUS to one line", "[notify]") {
  TempDir dir;
  const std::string path = (dir.path() / "notify").string();
  NotifySocket sock(path);
  ScopedEnv env("NOTIFY_SOCKET", path);
  Notifier notifier;
  CHECK(notifier.status("MASTER\nREADY=1"));
  CHECK(sock.receive() == "STATUS=MASTER READY=1");
}

TEST_CASE("Notifier reaches an abstract socket", "[notify]") {
  const std::string name = "@smha-test-notify-" + std::to_string(::getpid());
  NotifySocket sock(name);
  ScopedEnv env("NOTIFY_SOCKET", name);
  Notifier notifier;
  CHECK(notifier.watchdog());
  CHECK(sock.receive() == "WATCHDOG=1");
}

TEST_CASE("Notifier is a no-op without NOTIFY_SOCKET", "[notify]") {
  TempDir dir;
  const std::string path = (dir.path() / "notify").string();
  NotifySocket sock(path);
  ScopedEnv env("NOTIFY_SOCKET", std::nullopt);
  Notifier notifier;
  CHECK_FALSE(notifier.enabled());
  CHECK_FALSE(notifier.ready());
  CHECK_FALSE(notifier.status("MASTER"));
  CHECK_FALSE(notifier.watchdog());
  CHECK(sock.empty());
}

TEST_CASE("Watchdog ping interval is half of WATCHDOG_USEC", "[notify]") {
  SECTION("enabled for this process") {
    ScopedEnv usec("WATCHDOG_USEC", "10000000");
    ScopedEnv pid("WATCHDOG_PID", std::to_string(::getpid()));
    auto interval = Notifier::watchdog_interval();
    REQUIRE(interval.has_value());
    CHECK(*interval == std::chrono::seconds(5));
  }
  SECTION("WATCHDOG_PID absent") {
    ScopedEnv usec("WATCHDOG_USEC", "3000000");
    ScopedEnv pid("WATCHDOG_PID", std::nullopt);
    auto interval = Notifier::watchdog_interval();
    REQUIRE(interval.has_value());
    CHECK(*interval == std::chrono::milliseconds(1500));
  }
  SECTION("meant for another process") {
    ScopedEnv usec("WATCHDOG_USEC", "10000000");
    ScopedEnv pid("WATCHDOG_PID", std::to_string(::getpid() + 1));
    CHECK_FALSE(Notifier::watchdog_interval().has_value());
  }
  SECTION("not enabled") {
    ScopedEnv usec("WATCHDOG_USEC", std::nullopt);
    CHECK_FALSE(Notifier::watchdog_interval().has_value());
  }
  SECTION("garbage") {
    ScopedEnv usec("WATCHDOG_USEC", "ten");
    ScopedEnv pid("WATCHDOG_PID", std::nullopt);
    CHECK_FALSE(Notifier::watchdog_interval().has_value());
  }
}

TEST_CASE("role_status_line", "[notify]") {
  CHECK(smha::platform::role_status_line("MASTER", "head02", "STANDBY", 1) ==
        "MASTER; peer head02 STANDBY prio 1");
  CHECK(smha::platform::role_status_line("STANDBY", "", "", 0) == "STANDBY; no peer");
}
