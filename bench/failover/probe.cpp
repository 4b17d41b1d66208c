// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// bench_failover_probe: the failover benchmark's observer. Attached at a third
// node (through umad2sim), it polls SubnGet(SMInfo) of the given LIDs one
// after the other, every --interval-ms, with smha::mad::UmadTransport, and
// prints one line per change of what a LID answers:
//
//   <steady_clock ns> <lid> <STATE|error:code>
//
// steady_clock is CLOCK_MONOTONIC, shared by all processes on the host, so the
// benchmark compares these stamps with its own fault time. The first line for
// each LID is printed as soon as it is known. With `--every 1` every answer
// is printed, not only changes (the ibsim drills use that to tell two MASTERs
// answering in turn from one master handing over). With `--sa-lid N` it also
// asks the SA at LID N for its SMInfoRecord table (SubnAdmGetTable, what
// `saquery SMIR` asks) every interval, on a loop of its own, and prints
//
//   <steady_clock ns> <N> SA_OK | SA_error:code
//
// on each change: when a new master's SA answers again (the SA outage; an
// OpenSM answers no SA query until its first master sweep ends). Runs until
// SIGTERM.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "smha/core/clock.hpp"
#include "smha/mad/umad_transport.hpp"

namespace {

volatile std::sig_atomic_t g_stop = 0;
void on_term(int) { g_stop = 1; }

struct Options {
  std::vector<std::uint16_t> lids;
  std::uint16_t sa_lid = 0;
  int interval_ms = 5;
  int timeout_ms = 50;
  bool every = false;
};

bool parse(int argc, char** argv, Options& o) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i];
    const long v = std::strtol(argv[i + 1], nullptr, 10);
    if (v <= 0 || v > 65535) return false;
    if (key == "--lid") o.lids.push_back(static_cast<std::uint16_t>(v));
    else if (key == "--interval-ms") o.interval_ms = static_cast<int>(v);
    else if (key == "--timeout-ms") o.timeout_ms = static_cast<int>(v);
    else if (key == "--every") o.every = v == 1;
    else if (key == "--sa-lid") o.sa_lid = static_cast<std::uint16_t>(v);
    else return false;
  }
  return argc % 2 == 1 && !o.lids.empty();
}

}  // namespace

int main(int argc, char** argv) {
  Options opts;
  if (!parse(argc, argv, opts)) {
    std::fprintf(stderr,
                 "usage: bench_failover_probe --lid N [--lid M ...] [--interval-ms 5] "
                 "[--timeout-ms 50] [--every 1] [--sa-lid N]\n");
    return 2;
  }
  std::signal(SIGTERM, on_term);
  std::signal(SIGINT, on_term);

  boost::asio::io_context io;
  smha::SteadyClock clock;
  auto opened = smha::mad::UmadTransport::open(io, smha::mad::PortSelector{}, clock);
  if (!opened) {
    std::fprintf(stderr, "bench_failover_probe: %s\n", smha::to_string(opened.error()).c_str());
    return 1;
  }
  auto& transport = **opened;

  std::map<std::uint16_t, std::string> last;
  boost::asio::steady_timer timer(io);
  std::size_t next = 0;
  std::function<void()> poll_one;
  poll_one = [&] {
    if (g_stop) {
      io.stop();
      return;
    }
    const std::uint16_t lid = opts.lids[next];
    next = (next + 1) % opts.lids.size();
    smha::mad::RequestOptions ro;
    ro.timeout = std::chrono::milliseconds(opts.timeout_ms);
    transport.get_sminfo(smha::Lid{lid}, ro, [&, lid](smha::Result<smha::mad::SmInfoReply> r) {
      const auto now = std::chrono::steady_clock::now().time_since_epoch();
      std::string what = r ? std::string(smha::to_string(r->info.state)) : "error:" + std::string(smha::to_string(r.error().code));
      if (opts.every || last[lid] != what) {
        last[lid] = what;
        std::printf("%lld %u %s\n",
                    static_cast<long long>(
                        std::chrono::duration_cast<std::chrono::nanoseconds>(now).count()),
                    lid, what.c_str());
        std::fflush(stdout);
      }
      timer.expires_after(std::chrono::milliseconds(opts.interval_ms));
      timer.async_wait([&](const boost::system::error_code&) { poll_one(); });
    });
  };
  // The SA loop: its own timer, the same interval and timeout.
  boost::asio::steady_timer sa_timer(io);
  std::string sa_last;
  std::function<void()> ask_sa;
  ask_sa = [&] {
    if (g_stop) return;
    smha::mad::RequestOptions ro;
    ro.timeout = std::chrono::milliseconds(opts.timeout_ms);
    transport.get_sminfo_records(smha::Lid{opts.sa_lid}, ro, [&](smha::Result<smha::mad::SmInfoRecordsReply> r) {
      const auto now = std::chrono::steady_clock::now().time_since_epoch();
      const std::string what = r ? "SA_OK" : "SA_error:" + std::string(smha::to_string(r.error().code));
      if (opts.every || what != sa_last) {
        sa_last = what;
        std::printf("%lld %u %s\n",
                    static_cast<long long>(std::chrono::duration_cast<std::chrono::nanoseconds>(now).count()),
                    opts.sa_lid, what.c_str());
        std::fflush(stdout);
      }
      sa_timer.expires_after(std::chrono::milliseconds(opts.interval_ms));
      sa_timer.async_wait([&](const boost::system::error_code&) { ask_sa(); });
    });
  };
  poll_one();
  if (opts.sa_lid != 0) ask_sa();
  io.run();
  return 0;
}
