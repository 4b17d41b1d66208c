// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// bench_metrics: the metrics listener (metrics.listen) while a local user
// holds half-sent requests open.
//
// A MetricsHttpServer with smhad's defaults runs in a child process under
// RLIMIT_NOFILE 4096 (the unit's LimitNOFILE), serving a rendered snapshot of
// a two-head fabric. For each load in --loads (0 is the baseline, no load), a
// second child (uid nobody when run as root, as in the issue) opens that many
// connections on 127.0.0.1, sends each a request head without its final blank
// line, and reopens (and half-sends again) whatever the server closes, as fast
// as it can. Once all are open, the bench scrapes `GET /metrics` through a
// fresh connection every --interval-ms for --seconds, each with a 10 s timeout
// (Prometheus' default scrape_timeout), and reads the server's and the
// client's CPU time (utime + stime from /proc) over the same window. Every
// load runs once per run, in the same run as the baseline; the table gives
// the median over --runs runs (max ms: the worst of all). The server's log
// is off. Exit status 3 if a scrape failed.
//
// Usage: bench_metrics [--runs R] [--loads N,N,...] [--seconds S] [--interval-ms MS]
//                      [--max-connections N]
#include <arpa/inet.h>
#include <grp.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <spdlog/spdlog.h>

#include "smha/control/metrics.hpp"
#include "smha/control/metrics_http.hpp"

using namespace smha::control;
using Clock = std::chrono::steady_clock;

namespace {

// What the children report, in memory shared with the parent.
struct Shared {
  std::atomic<std::uint16_t> port{0};
  std::atomic<int> open{0};            // holder: connections open
  std::atomic<long> reconnects{0};     // holder: connections reopened
  std::atomic<std::uint64_t> accepted{0};  // server: its stats, copied every 50 ms
  std::atomic<std::uint64_t> evicted{0};
  std::atomic<std::uint64_t> timed_out{0};
  std::atomic<std::uint64_t> connections{0};  // server: open now
  std::atomic<std::uint64_t> max_connections{0};  // server: its cap
};

const std::string kHalfRequest = "GET /metrics HTTP/1.1\r\nHost: localhost\r\n";

std::string sample_text() {
  MetricsSnapshot m;
  m.node = "head01";
  m.role = "master";
  m.sms = {{"head01", smha::Guid{0x0002c90300a1b2c3}, smha::SmState::Master, 15},
           {"head02", smha::Guid{0x0002c90300a1b2c4}, smha::SmState::Standby, 14}};
  m.poll_rtt = Histogram{{0.0005, 0.001, 0.005, 0.01, 0.05}, {10, 90, 99, 100, 100}, 100, 0.07};
  m.known_alarms = {"two_masters", "no_master", "unknown_sm", "config_drift", "opensm_failed"};
  m.version = "bench";
  m.config_digests = {{"opensm_conf", "001122334455"}, {"partitions", "66778899aabb"}};
  m.drift_peers = {{"head02", "match"}};
  return render_prometheus(m);
}

[[noreturn]] void run_server(Shared* shared, std::size_t max_connections) {
  rlimit rl{4096, 4096};
  ::setrlimit(RLIMIT_NOFILE, &rl);
  spdlog::set_level(spdlog::level::off);
  boost::asio::io_context io;
  MetricsHttpOptions o;  // smhad's defaults
  if (max_connections != 0) o.max_connections = max_connections;
  // The renderer runs per scrape, as smhad's does.
  MetricsHttpServer server(io, o, [] { return sample_text(); });
  if (auto st = server.start(); !st.ok()) {
    std::fprintf(stderr, "bench_metrics: %s\n", st.error().message.c_str());
    ::_exit(1);
  }
  boost::asio::steady_timer copy(io);
  std::function<void()> tick = [&] {
    shared->accepted = server.stats().accepted;
    shared->evicted = server.stats().evicted;
    shared->timed_out = server.stats().timed_out;
    shared->connections = server.connection_count();
    copy.expires_after(std::chrono::milliseconds(50));
    copy.async_wait([&](const boost::system::error_code& ec) {
      if (!ec) tick();
    });
  };
  tick();
  shared->max_connections = server.max_connections();
  shared->port = server.port();
  io.run();
  ::_exit(0);
}

int connect_loopback(std::uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

[[noreturn]] void run_holder(Shared* shared, std::uint16_t port, int count) {
  rlimit rl{static_cast<rlim_t>(count) + 64, static_cast<rlim_t>(count) + 64};
  ::setrlimit(RLIMIT_NOFILE, &rl);
  if (::geteuid() == 0 && (::setgroups(0, nullptr) != 0 || ::setgid(65534) != 0 || ::setuid(65534) != 0)) ::_exit(1);
  auto open = [&] {
    int fd = connect_loopback(port);
    if (fd >= 0 && ::send(fd, kHalfRequest.data(), kHalfRequest.size(), MSG_NOSIGNAL) < 0) {
      ::close(fd);
      fd = -1;
    }
    return fd;
  };
  std::vector<int> fds(static_cast<std::size_t>(count), -1);
  for (auto& fd : fds) fd = open();
  std::vector<pollfd> p(fds.size());
  for (;;) {
    int n = 0;
    for (std::size_t i = 0; i < fds.size(); ++i) {
      if (fds[i] < 0) {
        ++shared->reconnects;
        fds[i] = open();
      }
      n += fds[i] >= 0;
      p[i] = pollfd{fds[i], POLLIN | POLLRDHUP, 0};
    }
    shared->open = n;
    if (::poll(p.data(), p.size(), 20) <= 0) continue;
    for (std::size_t i = 0; i < fds.size(); ++i)
      if (p[i].revents != 0) {
        ::close(fds[i]);
        fds[i] = -1;
      }
  }
}

// utime + stime of `pid`, in seconds.
double cpu_seconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::istringstream rest(all.substr(all.rfind(')') + 2));
  std::string field;
  unsigned long long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14) utime = std::stoull(field);
    if (i == 15) stime = std::stoull(field);
  }
  return static_cast<double>(utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

// One scrape: the latency in ms, or -1 if it failed (no 200 within 10 s).
double scrape(std::uint16_t port) {
  const auto t0 = Clock::now();
  int fd = connect_loopback(port);
  if (fd < 0) return -1;
  timeval tv{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  const std::string req = "GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n";
  std::string out;
  if (::send(fd, req.data(), req.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(req.size())) {
    char buf[8192];
    for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) out.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  if (out.rfind("HTTP/1.1 200 OK\r\n", 0) != 0 || out.find("smha_role") == std::string::npos) return -1;
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

struct Result {
  int ok = 0;
  int tried = 0;
  double median_ms = -1;
  double max_ms = -1;
  double cpu_pct = 0;
  double reconnects_per_s = 0;
  double accepts_per_s = 0;
  double evicted_per_s = 0;
  double holder_cpu_pct = 0;
};

double median(std::vector<double> v) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

Result measure(pid_t server, Shared* shared, int load, int seconds, int interval_ms) {
  pid_t holder = 0;
  shared->open = 0;
  shared->reconnects = 0;
  if (load > 0) {
    holder = ::fork();
    if (holder == 0) run_holder(shared, shared->port, load);
    // Until every connection is open and the server holds them (or its cap),
    // so that the window counts none of the first accepts (bounded: 10 s).
    const auto held = std::min<std::uint64_t>(static_cast<std::uint64_t>(load), shared->max_connections);
    for (int i = 0; i < 1000 && (shared->open < load || shared->connections < held); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  Result r;
  std::vector<double> ms;
  const long rec0 = shared->reconnects;
  const auto acc0 = shared->accepted.load();
  const auto ev0 = shared->evicted.load();
  const double cpu0 = cpu_seconds(server);
  const double hcpu0 = holder > 0 ? cpu_seconds(holder) : 0;
  const auto t0 = Clock::now();
  const auto end = t0 + std::chrono::seconds(seconds);
  while (Clock::now() < end) {
    const auto next = Clock::now() + std::chrono::milliseconds(interval_ms);
    const double t = scrape(shared->port);
    ++r.tried;
    if (t >= 0) {
      ++r.ok;
      ms.push_back(t);
    }
    std::this_thread::sleep_until(next);  // the scrape interval
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(60));  // one copy of the server's stats
  const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
  r.cpu_pct = 100.0 * (cpu_seconds(server) - cpu0) / wall;
  if (holder > 0) r.holder_cpu_pct = 100.0 * (cpu_seconds(holder) - hcpu0) / wall;
  r.reconnects_per_s = static_cast<double>(shared->reconnects - rec0) / wall;
  r.accepts_per_s = static_cast<double>(shared->accepted - acc0) / wall;
  r.evicted_per_s = static_cast<double>(shared->evicted - ev0) / wall;
  r.median_ms = median(ms);
  r.max_ms = ms.empty() ? -1 : *std::max_element(ms.begin(), ms.end());
  if (holder > 0) {
    ::kill(holder, SIGKILL);
    ::waitpid(holder, nullptr, 0);
  }
  // Until the server has seen every hang-up (bounded: 5 s), so that the next
  // load starts from an empty table.
  for (int i = 0; i < 500 && shared->connections > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return r;
}

std::vector<int> parse_list(const char* s) {
  std::vector<int> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) out.push_back(std::atoi(item.c_str()));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 3;
  int seconds = 5;
  int interval_ms = 100;
  std::size_t max_connections = 0;
  std::vector<int> loads{0, 70, 500};
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--runs")) runs = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--seconds")) seconds = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--interval-ms")) interval_ms = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--max-connections")) max_connections = std::strtoul(argv[i + 1], nullptr, 10);
    else if (!std::strcmp(argv[i], "--loads")) loads = parse_list(argv[i + 1]);
  }
  if (runs < 1 || seconds < 1 || interval_ms < 1 || loads.empty() ||
      std::any_of(loads.begin(), loads.end(), [](int n) { return n < 0; })) {
    std::fprintf(stderr,
                 "usage: bench_metrics [--runs R>=1] [--loads N,N,...] [--seconds S>=1] [--interval-ms MS>=1] "
                 "[--max-connections N]\n");
    return 2;
  }
  auto* shared = static_cast<Shared*>(
      ::mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  if (shared == MAP_FAILED) return 1;
  new (shared) Shared;
  pid_t server = ::fork();
  if (server < 0) return 1;
  if (server == 0) run_server(shared, max_connections);
  for (int i = 0; i < 500 && shared->port == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (shared->port == 0) {
    ::kill(server, SIGKILL);
    ::waitpid(server, nullptr, 0);
    return 1;
  }
  for (int i = 0; i < 3; ++i) (void)scrape(shared->port);  // warm up

  std::printf("metrics listener: half-sent requests held by one local user (%s), reopened when closed;\n"
              "a scrape every %d ms for %d s per load, median of %d runs; server RLIMIT_NOFILE 4096\n",
              ::geteuid() == 0 ? "uid nobody" : "this uid", interval_ms, seconds, runs);
  std::vector<std::vector<Result>> all(loads.size());
  for (int run = 0; run < runs; ++run)
    for (std::size_t l = 0; l < loads.size(); ++l) all[l].push_back(measure(server, shared, loads[l], seconds, interval_ms));

  int rc = 0;
  std::printf("%-6s %11s %10s %9s %10s %13s %10s %10s %13s\n", "held", "scrapes ok", "median ms", "max ms",
              "srv CPU %", "reconnects/s", "accepts/s", "evicted/s", "client CPU %");
  for (std::size_t l = 0; l < loads.size(); ++l) {
    auto pick = [&](auto f) {
      std::vector<double> v;
      for (const auto& r : all[l]) v.push_back(f(r));
      return median(v);
    };
    int ok = 0, tried = 0;
    double worst = -1;
    for (const auto& r : all[l]) {
      ok += r.ok;
      tried += r.tried;
      worst = std::max(worst, r.max_ms);
    }
    if (ok != tried) rc = 3;
    char label[32];
    std::snprintf(label, sizeof label, "%s", loads[l] == 0 ? "none" : std::to_string(loads[l]).c_str());
    char okcol[32];
    std::snprintf(okcol, sizeof okcol, "%d/%d", ok, tried);
    std::printf("%-6s %11s %10.2f %9.2f %10.1f %13.0f %10.0f %10.0f %13.1f\n", label, okcol,
                pick([](const Result& r) { return r.median_ms; }), worst, pick([](const Result& r) { return r.cpu_pct; }),
                pick([](const Result& r) { return r.reconnects_per_s; }),
                pick([](const Result& r) { return r.accepts_per_s; }),
                pick([](const Result& r) { return r.evicted_per_s; }),
                pick([](const Result& r) { return r.holder_cpu_pct; }));
  }
  if (rc == 3) std::printf("some scrapes failed\n");
  ::kill(server, SIGKILL);
  ::waitpid(server, nullptr, 0);
  return rc;
}
