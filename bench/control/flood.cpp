// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// bench_control_flood: the control socket under a connection flood by a
// read-only user.
//
// A ControlServer (smhad's defaults: connection caps, write deadline, queued
// bytes) runs in a child process with RLIMIT_NOFILE 1024, as systemd gives a
// unit without LimitNOFILE. A second child, uid nobody with the socket's group
// (so it may call read-only methods), keeps --connections connections open,
// reconnects whatever is closed, and on each pipelines `status` requests with
// 60 KB ids without ever reading a reply. Before, during (every second) and
// after the flood the bench prints the server's VmRSS and open descriptors and
// the round trip of root's `status`. Targets: RSS <= 32 MiB during and after,
// root answered every time, descriptors back to the baseline after; exit
// status 3 if one is missed.
//
// Usage: bench_control_flood [--connections N] [--seconds S] [--group NAME]
// Needs root (to become nobody for the attacker and to run root's client).
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <grp.h>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <spdlog/sinks/null_sink.h>
#include <spdlog/spdlog.h>

#include "smha/control/client.hpp"
#include "smha/control/server.hpp"

using namespace smha::control;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

struct Sample {
  double rss_mib = 0;
  int fds = 0;
};

Sample sample(pid_t pid) {
  Sample s;
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmRSS:", 0) == 0) s.rss_mib = std::stod(line.substr(6)) / 1024.0;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
    ++s.fds;
  return s;
}

[[noreturn]] void run_server(const std::string& path, const std::string& group, int ready_fd) {
  rlimit rl{1024, 1024};
  ::setrlimit(RLIMIT_NOFILE, &rl);
  boost::asio::io_context io;
  ServerOptions opts;  // smhad's defaults for every limit
  opts.socket_path = path;
  opts.group = group;
  opts.logger = std::make_shared<spdlog::logger>("ctl-flood", std::make_shared<spdlog::sinks::null_sink_mt>());
  ControlServer server(io, opts);
  json status = {{"role", "master"}, {"peers", json::array()}, {"alarms", json::array()}};
  (void)server.register_method("status", Access::ReadOnly, [&status](const Call&) { return Reply::ok(status); });
  if (auto st = server.start(); !st) {
    std::fprintf(stderr, "bench_control_flood: %s\n", st.error().message.c_str());
    ::_exit(1);
  }
  (void)!::write(ready_fd, "r", 1);
  ::close(ready_fd);
  io.run();
  ::_exit(0);
}

int connect_nb(const std::string& path) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -1;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 && errno != EINPROGRESS &&
      errno != EAGAIN) {
    ::close(fd);
    return -1;
  }
  return fd;
}

[[noreturn]] void run_attacker(const std::string& path, gid_t gid, int connections) {
  rlimit rl{static_cast<rlim_t>(connections) + 64, static_cast<rlim_t>(connections) + 64};
  ::setrlimit(RLIMIT_NOFILE, &rl);
  if (::setgroups(0, nullptr) != 0 || ::setgid(gid) != 0 || ::setuid(65534) != 0) ::_exit(1);
  const std::string frame =
      encode_request(Request{"status", json::object(), json(std::string(60'000, 'x')), 1});
  struct Conn {
    int fd = -1;
    std::size_t off = 0;  // into `frame` of the request being sent
  };
  std::vector<Conn> conns(static_cast<std::size_t>(connections));
  std::vector<pollfd> pfds(conns.size());
  for (;;) {
    for (std::size_t i = 0; i < conns.size(); ++i) {
      if (conns[i].fd < 0) conns[i] = Conn{connect_nb(path), 0};
      pfds[i] = pollfd{conns[i].fd, POLLOUT, 0};
    }
    if (::poll(pfds.data(), pfds.size(), 100) < 0) continue;
    for (std::size_t i = 0; i < conns.size(); ++i) {
      auto& c = conns[i];
      if (c.fd < 0) continue;
      if (pfds[i].revents & (POLLHUP | POLLERR)) {
        ::close(c.fd);
        c.fd = -1;
        continue;
      }
      if (!(pfds[i].revents & POLLOUT)) continue;
      ssize_t n = ::send(c.fd, frame.data() + c.off, frame.size() - c.off, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0 && errno != EAGAIN) {
        ::close(c.fd);
        c.fd = -1;
      } else if (n > 0) {
        c.off = (c.off + static_cast<std::size_t>(n)) % frame.size();
      }
    }
  }
}

// Root's status round trip in ms, or -1 if it failed.
double root_status(const std::string& path) {
  auto start = Clock::now();
  auto c = ControlClient::connect(path, std::chrono::seconds(2));
  if (!c) return -1;
  auto r = c->call("status", json::object(), std::chrono::seconds(2));
  if (!r || !r->is_ok()) return -1;
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

void row(const char* phase, const Sample& s, double rtt) {
  char ms[32];
  if (rtt < 0) std::snprintf(ms, sizeof ms, "FAILED");
  else std::snprintf(ms, sizeof ms, "%.2f", rtt);
  std::printf("%-8s %10.1f %8d %14s\n", phase, s.rss_mib, s.fds, ms);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  int connections = 2000;
  int seconds = 20;
  std::string group = "root";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--connections")) connections = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--seconds")) seconds = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--group")) group = argv[i + 1];
  }
  if (connections < 1 || seconds < 1 || ::geteuid() != 0) {
    std::fprintf(stderr, "usage (as root): bench_control_flood [--connections N>=1] [--seconds S>=1] [--group NAME]\n");
    return 2;
  }
  struct group* gr = ::getgrnam(group.c_str());
  if (gr == nullptr) {
    std::fprintf(stderr, "bench_control_flood: no group %s\n", group.c_str());
    return 2;
  }
  const gid_t gid = gr->gr_gid;
  char tmpl[] = "/tmp/smha-bench-flood-XXXXXX";
  if (!::mkdtemp(tmpl)) {
    std::perror("mkdtemp");
    return 1;
  }
  const std::string dir = tmpl;
  ::chmod(dir.c_str(), 0755);
  const std::string path = dir + "/run/smhad.sock";

  int ready[2];
  if (::pipe(ready) != 0) return 1;
  pid_t server = ::fork();
  if (server < 0) return 1;
  if (server == 0) {
    ::close(ready[0]);
    run_server(path, group, ready[1]);
  }
  ::close(ready[1]);
  char c = 0;
  if (::read(ready[0], &c, 1) != 1) {
    ::waitpid(server, nullptr, 0);
    return 1;
  }
  ::close(ready[0]);

  int rc = 0;
  const double kRssTarget = 32.0;
  std::printf("control socket flood: %d connections by uid nobody (group %s), 60 KB-id status requests\n"
              "pipelined, never read; server RLIMIT_NOFILE 1024, default limits; %d s\n",
              connections, group.c_str(), seconds);
  std::printf("%-8s %10s %8s %14s\n", "phase", "RSS MiB", "fds", "root status ms");
  for (int i = 0; i < 3; ++i) (void)root_status(path);  // warm up
  Sample before = sample(server);
  row("before", before, root_status(path));

  pid_t attacker = ::fork();
  if (attacker < 0) rc = 1;
  if (attacker == 0) run_attacker(path, gid, connections);
  double max_rss = 0;
  int max_fds = 0;
  for (int s = 0; s < seconds && attacker > 0; ++s) {
    std::this_thread::sleep_for(std::chrono::seconds(1));  // the sampling period
    Sample during = sample(server);
    double rtt = root_status(path);
    row("during", during, rtt);
    max_rss = std::max(max_rss, during.rss_mib);
    max_fds = std::max(max_fds, during.fds);
    if (rtt < 0 || during.rss_mib > kRssTarget) rc = 3;
  }
  if (attacker > 0) {
    ::kill(attacker, SIGKILL);
    ::waitpid(attacker, nullptr, 0);
  }
  // After: the server notices every hang-up at once; wait until its descriptors are back.
  Sample after = sample(server);
  for (int i = 0; i < 100 && after.fds > before.fds; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    after = sample(server);
  }
  double rtt = root_status(path);
  row("after", after, rtt);
  if (rtt < 0 || after.rss_mib > kRssTarget || after.fds > before.fds) rc = 3;
  std::printf("peak during: RSS %.1f MiB, %d fds; target RSS <= %.0f MiB during and after\n", max_rss, max_fds,
              kRssTarget);
  if (rc == 3) std::printf("target missed\n");
  ::kill(server, SIGKILL);
  ::waitpid(server, nullptr, 0);
  std::filesystem::remove_all(dir);
  return rc;
}
