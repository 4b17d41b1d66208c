// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// The peer channel on its own thread (service::ContinuityThread,
// doc/continuity.md "The event loop"): a copy's file that takes long to read
// stalls the peer thread only, never the main loop's timers or status; alarms
// raised on the peer thread reach the main loop's sink on the main loop.
#include <catch2/catch.hpp>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "smha/os/asio_scheduler.hpp"
#include "smha/os/file_system.hpp"
#include "smha/os/posix_file_system.hpp"
#include "smha/service/continuity_thread.hpp"

using namespace smha;
namespace asio = boost::asio;

namespace {

constexpr Guid kHead01{0x0002c90300000001ULL};
constexpr Guid kHead02{0x0002c90300000002ULL};

struct Dir {
  std::string path;
  Dir() {
    path = std::filesystem::temp_directory_path() / ("smha-cthread-test-" + std::to_string(::getpid()));
    std::filesystem::create_directories(path);
    const std::string mk = std::string(SMHA_SOURCE_DIR) + "/scripts/make-peer-certs ";
    REQUIRE(std::system((mk + path + "/tls head01 head02").c_str()) == 0);
  }
  ~Dir() { std::filesystem::remove_all(path); }
};

// The real file system, but the first look at `gated` (its stamp or its
// bytes) waits until release(): a read that takes as long as a test wants.
class GatedFs final : public os::FileSystem {
 public:
  explicit GatedFs(std::string gated) : gated_(std::move(gated)) {}
  Status write_atomic(const std::string& p, std::string_view c, unsigned mode) override {
    return real_.write_atomic(p, c, mode);
  }
  Result<std::string> read(const std::string& p) const override { return real_.read(p); }
  Result<Tail> read_tail(const std::string& p, std::uint64_t from, std::size_t max) const override {
    wait(p);
    return real_.read_tail(p, from, max);
  }
  Result<Stamp> stamp(const std::string& p) const override {
    wait(p);
    return real_.stamp(p);
  }
  void release() {
    std::lock_guard lock(mu_);
    released_ = true;
    cv_.notify_all();
  }
  bool entered() const { return entered_; }

 private:
  void wait(const std::string& p) const {
    if (p != gated_) return;
    entered_ = true;
    std::unique_lock lock(mu_);
    cv_.wait(lock, [this] { return released_; });
  }
  std::string gated_;
  os::PosixFileSystem real_;
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  mutable std::atomic<bool> entered_{false};
  bool released_ = false;
};

struct Sink final : AlarmSink {
  std::vector<std::pair<AlarmKind, std::thread::id>> raised;
  void alarm(const RaiseAlarm& a, TimePoint) override { raised.emplace_back(a.kind, std::this_thread::get_id()); }
  void clear(const ClearAlarm&, TimePoint) override {}
};

peer::ContinuityConfig config(const Dir& d) {
  peer::ContinuityConfig c;
  c.fabric = "fab0";
  c.own_name = "head01";
  c.own_guid = kHead01;
  c.channel.listen_host = "127.0.0.1";
  c.channel.listen_port = 0;
  c.channel.certificate = d.path + "/tls/head01.pem";
  c.channel.private_key = d.path + "/tls/head01.key";
  c.channel.ca = d.path + "/tls/ca.pem";
  c.channel.peers.push_back({"head02", kHead02, "127.0.0.1", 1});
  c.store.fabric = "fab0";
  c.store.own_name = "head01";
  c.store.sa_path = d.path + "/opensm-sa.copy";
  c.store.guid2lid_path = d.path + "/guid2lid";
  c.store.peers["head02"] = kHead02;
  c.sender.sa_dump_path = d.path + "/opensm-sa.dump";
  c.sender.guid2lid_path = d.path + "/guid2lid";
  c.tick = milliseconds(20);
  c.max_copy_age = milliseconds(50);
  return c;
}

// Runs `io` until `done` or `limit` passes.
template <typename F>
bool run_until(asio::io_context& io, F done, Duration limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > end) return false;
    io.restart();
    io.run_for(std::chrono::milliseconds(5));
  }
  return true;
}

}  // namespace

TEST_CASE("continuity thread: a copy's read that does not return stalls the peer thread, not the main loop") {
  Dir d;
  { std::ofstream(d.path + "/opensm-sa.dump") << "\n"; }
  GatedFs fs(d.path + "/opensm-sa.dump");
  SteadyClock clock;
  asio::io_context main_io;
  os::AsioScheduler main_sched(main_io, clock);
  Sink sink;
  int facts_calls = 0;
  service::ContinuityThread t(
      config(d), fs, clock, main_sched, main_io,
      [&] {
        ++facts_calls;
        return peer::InBandFacts{kHead01, SmState::Master};  // this head is MASTER: it reads its dump to send it
      },
      sink, {milliseconds(10), milliseconds(20), 10});
  struct Release {  // before `t` joins its thread, also when a check fails
    GatedFs& fs;
    ~Release() { fs.release(); }
  } release{fs};
  REQUIRE(t.start().ok());
  REQUIRE(run_until(main_io, [&] { return fs.entered(); }, seconds(10)));
  const auto frozen = t.snapshots();

  // The peer thread now waits inside the read. The main loop's timers keep
  // their time, the status answers at once, the facts keep being sampled.
  Duration worst{};
  int fired = 0;
  TimePoint due = clock.now() + milliseconds(10);
  std::function<void()> tick = [&] {
    worst = std::max(worst, clock.now() - due);
    if (++fired < 20) {
      due = clock.now() + milliseconds(10);
      main_sched.schedule_in(milliseconds(10), tick);
    }
  };
  main_sched.schedule_in(milliseconds(10), tick);
  const int facts_before = facts_calls;
  REQUIRE(run_until(main_io, [&] { return fired == 20; }, seconds(5)));
  CHECK(worst < milliseconds(50));
  CHECK(t.status().listening);
  CHECK(t.status().sa_db_file == d.path + "/opensm-sa.copy");
  CHECK(facts_calls > facts_before);
  CHECK(t.snapshots() == frozen);  // nothing was published: the peer thread is the one waiting

  fs.release();
  REQUIRE(run_until(main_io, [&] { return t.snapshots() > frozen; }, seconds(5)));
  t.stop();
  t.stop();  // idempotent
}

TEST_CASE("continuity thread: alarms raised on the peer thread reach the sink on the main loop") {
  Dir d;
  GatedFs fs("");  // nothing gated
  SteadyClock clock;
  asio::io_context main_io;
  os::AsioScheduler main_sched(main_io, clock);
  Sink sink;
  // head02 is MASTER, this head STANDBY with no copy: sa_copy_stale once the grace (50 ms) is over.
  service::ContinuityThread t(config(d), fs, clock, main_sched, main_io,
                              [] { return peer::InBandFacts{kHead02, SmState::Standby}; }, sink,
                              {milliseconds(10), milliseconds(20), 10});
  REQUIRE(t.start().ok());
  REQUIRE(run_until(main_io, [&] { return !sink.raised.empty(); }, seconds(10)));
  CHECK(sink.raised.front().first == AlarmKind::SaCopyStale);
  CHECK(sink.raised.front().second == std::this_thread::get_id());
  t.stop();
  // After stop, nothing more reaches the sink, even what was already posted.
  const auto n = sink.raised.size();
  main_io.restart();
  main_io.poll();
  CHECK(sink.raised.size() == n);
}

TEST_CASE("continuity thread: a TLS file that does not load fails start, and no thread runs") {
  Dir d;
  auto cfg = config(d);
  cfg.channel.certificate = d.path + "/tls/missing.pem";
  GatedFs fs("");
  SteadyClock clock;
  asio::io_context main_io;
  os::AsioScheduler main_sched(main_io, clock);
  Sink sink;
  service::ContinuityThread t(std::move(cfg), fs, clock, main_sched, main_io,
                              [] { return peer::InBandFacts{}; }, sink);
  auto st = t.start();
  REQUIRE_FALSE(st.ok());
  CHECK_THAT(st.error().message, Catch::Contains("missing.pem"));
  CHECK(main_sched.pending() == 0);  // the facts timer is gone too
  t.stop();
}
