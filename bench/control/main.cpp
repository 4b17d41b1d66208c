// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// bench_control: status round trip over the control socket.
//
// A ControlServer with a canned `status` handler runs on its own thread (as in
// smhad: one io_context thread). N clients, each its own connection, run on a
// second thread, in two modes: closed loop (next request as soon as the reply
// arrives: saturation, where latency is queueing, ~N x service time) and paced
// (one request per client every --pace-ms, staggered: many concurrent users).
// For N in 1, 10, 100 it measures every round trip and prints p50/p99 and the
// max, each the median over several runs. Target: p99 <= 2 ms at 100 clients
// (paced); the exit status is 3 if missed.
//
// Then (when built with SMHA_TESTS=ON) smhad's idle RSS and CPU at 10 Hz polling
// under ibsim beside OpenSM's (idle.cpp), the median of --idle-runs runs of
// --idle-seconds each; exit status 3 if a target (16 MiB, 1 % of a core) is missed.
//
// Usage: bench_control [--runs R] [--requests-per-run M] [--pace-ms MS] [--group NAME]
//                      [--idle-runs R (0: skip)] [--idle-seconds S]
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/write.hpp>
#include <spdlog/sinks/null_sink.h>
#include <spdlog/spdlog.h>

#include "smha/control/server.hpp"
#ifdef SMHA_BENCH_IDLE
#include "idle.hpp"
#endif

namespace asio = boost::asio;
using namespace smha::control;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

json canned_status() {
  json peer = {{"node", "head-b"}, {"guid", "0x0002c90300a1b2c4"}, {"lid", 2}, {"state", "standby"},
               {"priority", 14}, {"act_count", 1187}};
  return json{{"role", "master"},
              {"local", {{"node", "head-a"}, {"guid", "0x0002c90300a1b2c3"}, {"lid", 1}, {"state", "master"},
                         {"priority", 15}, {"act_count", 88123}}},
              {"peers", json::array({peer})},
              {"last_poll", {{"age_ms", 42.0}, {"rtt_us", 180.0}}},
              {"policy", "prefer-local"},
              {"alarms", json::array()},
              {"last_transition", {{"from", "standby"}, {"to", "master"}, {"reason", "peer_lost"},
                                   {"at", "2026-12-02T10:00:00Z"}}},
              {"opensm", {{"pid", 4242}, {"uptime_s", 86400}, {"restarts", 0}}},
              {"hold", nullptr}};
}

// One client: send status, wait for the reply, record, repeat. Closed loop
// (interval 0: the next request right after the reply) or paced (one request
// per interval, on a fixed schedule starting at `first`).
struct Client : std::enable_shared_from_this<Client> {
  Client(asio::io_context& io, std::vector<double>* samples, int requests, std::atomic<int>* done)
      : socket(io), timer(io), samples(samples), remaining(requests), done(done) {}

  void next() {
    if (remaining-- == 0) {
      ++*done;
      return;
    }
    if (interval.count() > 0) {
      timer.expires_at(slot);
      slot += interval;
      timer.async_wait([self = shared_from_this()](auto ec) {
        if (!ec) self->send();
      });
      return;
    }
    send();
  }
  void send() {
    sent = Clock::now();
    asio::async_write(socket, asio::buffer(wire), [self = shared_from_this()](auto ec, std::size_t) {
      if (ec) return self->fail(ec);
      asio::async_read_until(self->socket, self->in, '\0', [self](auto rec, std::size_t n) {
        if (rec) return self->fail(rec);
        self->samples->push_back(std::chrono::duration<double, std::micro>(Clock::now() - self->sent).count());
        self->in.consume(n);
        self->next();
      });
    });
  }
  void fail(const boost::system::error_code& ec) {
    std::fprintf(stderr, "bench_control: client error: %s\n", ec.message().c_str());
    std::exit(1);
  }

  asio::local::stream_protocol::socket socket;
  asio::steady_timer timer;
  Clock::duration interval{0};
  Clock::time_point slot;
  asio::streambuf in;
  std::string wire;
  Clock::time_point sent;
  std::vector<double>* samples;
  int remaining;
  std::atomic<int>* done;
};

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  auto idx = static_cast<std::size_t>(std::lround(p * static_cast<double>(v.size() - 1)));
  return v[std::min(idx, v.size() - 1)];
}

double median(std::vector<double> v) { return percentile(std::move(v), 0.5); }

struct RunResult {
  double p50_us, p99_us, max_us, throughput, server_cpu_us_per_req;
};

// CPU time consumed so far by the thread behind `clock` (pthread_getcpuclockid).
double cpu_us(clockid_t clock) {
  timespec ts{};
  ::clock_gettime(clock, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
}

RunResult run_once(const std::string& path, int clients, int total_requests, Clock::duration interval,
                   clockid_t server_cpu) {
  asio::io_context io;
  std::vector<double> samples;
  samples.reserve(static_cast<std::size_t>(total_requests) + 16);
  std::atomic<int> done{0};
  int per_client = std::max(1, total_requests / clients);
  std::vector<std::shared_ptr<Client>> cs;
  for (int i = 0; i < clients; ++i) cs.push_back(std::make_shared<Client>(io, &samples, per_client, &done));
  for (auto& c : cs) c->socket.connect(path);
  auto start = Clock::now();
  double cpu0 = cpu_us(server_cpu);
  for (std::size_t i = 0; i < cs.size(); ++i) {
    auto& c = cs[i];
    c->wire = encode_request(Request{"status", json::object(), std::nullopt, std::nullopt});
    c->interval = interval;
    c->slot = start + interval * static_cast<int>(i) / clients;  // staggered
    c->next();
  }
  io.run();
  double secs = std::chrono::duration<double>(Clock::now() - start).count();
  double cpu = cpu_us(server_cpu) - cpu0;
  return RunResult{percentile(samples, 0.5), percentile(samples, 0.99), percentile(samples, 1.0),
                   static_cast<double>(samples.size()) / secs, cpu / static_cast<double>(samples.size())};
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 5;
  int requests = 20'000;
  int pace_ms = 100;
  std::string group = "root";
  int idle_runs = 3;
  int idle_seconds = 10;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--idle-runs")) idle_runs = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--idle-seconds")) idle_seconds = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--runs")) runs = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--requests-per-run")) requests = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--group")) group = argv[i + 1];
    else if (!std::strcmp(argv[i], "--pace-ms")) pace_ms = std::atoi(argv[i + 1]);
  }
  if (runs < 0 || requests < 100 || pace_ms < 1 || idle_runs < 0 || idle_seconds < 1) {
    std::fprintf(stderr,
                 "usage: bench_control [--runs R>=0] [--requests-per-run M>=100] [--pace-ms MS>=1] [--group NAME]"
                 " [--idle-runs R>=0] [--idle-seconds S>=1]\n");
    return 2;
  }
  char tmpl[] = "/tmp/smha-bench-ctl-XXXXXX";
  if (!::mkdtemp(tmpl)) {
    std::perror("mkdtemp");
    return 1;
  }
  std::string dir = tmpl;

  asio::io_context server_io;
  ServerOptions opts;
  opts.socket_path = dir + "/run/smhad.sock";
  opts.group = group;
  opts.logger = std::make_shared<spdlog::logger>("ctl-bench", std::make_shared<spdlog::sinks::null_sink_mt>());
  ControlServer server(server_io, opts);
  const json status = canned_status();
  (void)server.register_method("status", Access::ReadOnly, [&status](const Call&) { return Reply::ok(status); });
  if (auto st = server.start(); !st) {
    std::fprintf(stderr, "bench_control: %s\n", st.error().message.c_str());
    return 1;
  }
  std::thread server_thread([&] { server_io.run(); });
  clockid_t server_cpu{};
  if (::pthread_getcpuclockid(server_thread.native_handle(), &server_cpu) != 0) {
    std::fprintf(stderr, "bench_control: pthread_getcpuclockid failed\n");
    return 1;
  }

  std::printf("control socket status round trip (reply %zu bytes), %d runs x %d requests, median of runs\n",
              encode_reply(Reply::ok(status)).size(), runs, requests);
  std::printf("closed loop: each client sends its next request as soon as the reply arrives (saturation);\n"
              "paced: each client sends one request every %d ms, clients staggered\n", pace_ms);
  std::printf("%-12s %8s %10s %10s %10s %12s %14s\n", "mode", "clients", "p50 us", "p99 us", "max us", "req/s",
              "srv cpu us/req");
  int rc = 0;
  {
    double load[3] = {0, 0, 0};
    if (::getloadavg(load, 3) == 3)
      std::printf("load average at start: %.2f %.2f %.2f on %ld CPU(s)\n", load[0], load[1], load[2],
                  ::sysconf(_SC_NPROCESSORS_ONLN));
  }
  for (int paced = 0; paced < 2 && runs > 0; ++paced) {
    for (int clients : {1, 10, 100}) {
      auto interval = paced ? Clock::duration(std::chrono::milliseconds(pace_ms)) : Clock::duration(0);
      // Paced runs are time-bound: 2 s of requests per run.
      int n = paced ? clients * std::max(1, 2000 / pace_ms) : requests;
      std::vector<double> p50, p99, mx, tput, cpu;
      for (int r = 0; r < runs; ++r) {
        auto res = run_once(opts.socket_path, clients, n, interval, server_cpu);
        p50.push_back(res.p50_us);
        p99.push_back(res.p99_us);
        mx.push_back(res.max_us);
        tput.push_back(res.throughput);
        cpu.push_back(res.server_cpu_us_per_req);
      }
      double m99 = median(p99);
      std::printf("%-12s %8d %10.1f %10.1f %10.1f %12.0f %14.1f\n", paced ? "paced" : "closed-loop", clients,
                  median(p50), m99, median(mx), median(tput), median(cpu));
      if (paced && clients == 100 && m99 > 2000.0) rc = 3;
    }
  }
  if (rc != 0) std::printf("target missed: paced p99 at 100 clients > 2 ms\n");

  asio::post(server_io, [&] { server.stop(); });
  server_thread.join();
  std::filesystem::remove_all(dir);
#ifdef SMHA_BENCH_IDLE
  if (idle_runs > 0) {
    const int idle_rc = run_idle_bench(idle_runs, idle_seconds);
    if (rc == 0) rc = idle_rc;
  }
#else
  if (idle_runs > 0) std::printf("\nidle RSS/CPU: not built (configure with SMHA_TESTS=ON)\n");
#endif
  return rc;
}
