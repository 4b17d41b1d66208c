// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// Continuity end to end (doc/continuity.md): head01's and head02's
// Continuity over loopback TLS (certificates from scripts/make-peer-certs),
// their ticks on a manual scheduler, their in-band facts set by the test.
// What a standby holds is the master's current SA or is said not to be:
// a dump from before this mastership is never sent and the standby is told
// at once, sa_copy_stale names its cause, the takeover report's copy says
// it was stale and what it lacked; a master whose clock stepped back gets
// its copies through.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <boost/asio/io_context.hpp>

#include "manual_scheduler.hpp"
#include "smha/peer/continuity.hpp"

using namespace smha;
using namespace smha::peer;
using smha::test::ManualScheduler;
using nlohmann::json;

namespace {

constexpr Guid kHead01{0x0002c90300000001ULL};
constexpr Guid kHead02{0x0002c90300000002ULL};

std::string real_dump() {
  std::ifstream in(std::string(SMHA_TEST_DATA_DIR) + "/sa_dump/opensm-3.3.23-workload.dump");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const std::string kGuid2Lid = "0x0000000000100001 0x0001 0x0001\n\n0x0000000000100004 0x0004 0x0004\n\n";

// The scheduler's clock, its wall time moved by `offset` (a stepped clock).
class OffsetClock final : public Clock {
 public:
  explicit OffsetClock(const Clock& base) : base_(base) {}
  TimePoint now() const override { return base_.now(); }
  WallTime wall_now() const override { return base_.wall_now() + offset; }
  WallTime::duration offset{};

 private:
  const Clock& base_;
};

// Files in memory with stamps (mtime: the head's wall clock at the write).
class StampedFs final : public os::FileSystem {
 public:
  explicit StampedFs(const Clock& clock) : clock_(clock) {}
  Status write_atomic(const std::string& path, std::string_view content, unsigned) override {
    files[path] = std::string(content);
    stamps[path].mtime_ns =
        std::chrono::duration_cast<std::chrono::nanoseconds>(clock_.wall_now().time_since_epoch()).count();
    ++stamps[path].inode;
    stamps[path].size = content.size();
    return Status::Ok();
  }
  Result<std::string> read(const std::string& path) const override {
    auto it = files.find(path);
    if (it == files.end()) return make_error(Errc::NotFound, path + ": no such file");
    return it->second;
  }
  Result<Stamp> stamp(const std::string& path) const override {
    auto it = stamps.find(path);
    if (it == stamps.end()) return make_error(Errc::NotFound, path + ": no such file");
    return it->second;
  }
  std::map<std::string, std::string> files;
  std::map<std::string, Stamp> stamps;

 private:
  const Clock& clock_;
};

struct Alarms final : AlarmSink {
  void alarm(const RaiseAlarm& a, TimePoint) override {
    if (a.kind == AlarmKind::SaCopyStale) stale = a.detail;
  }
  void clear(const ClearAlarm& a, TimePoint) override {
    if (a.kind == AlarmKind::SaCopyStale) stale.clear();
  }
  std::string stale;
};

struct Certs {
  std::string dir;
  Certs() {
    dir = std::filesystem::temp_directory_path() / ("smha-continuity-test-" + std::to_string(::getpid()));
    const std::string mk = std::string(SMHA_SOURCE_DIR) + "/scripts/make-peer-certs ";
    REQUIRE(std::system((mk + dir + " head01 head02 >/dev/null").c_str()) == 0);
  }
  ~Certs() { std::filesystem::remove_all(dir); }
};

struct Head {
  std::string name;
  Guid guid;
  OffsetClock clock;
  StampedFs fs;
  Alarms alarms;
  InBandFacts facts;
  std::unique_ptr<Continuity> c;
  Head(std::string n, Guid g, const Clock& base) : name(std::move(n)), guid(g), clock(base), fs(clock) {}
  std::string dir() const { return "/" + name; }
  std::string dump() const { return dir() + "/opensm-sa.dump"; }

  void start(boost::asio::io_context& io, Scheduler& sched, const Certs& certs, const std::string& peer, Guid peer_guid,
             std::uint16_t peer_port) {
    ContinuityConfig cc;
    cc.own_name = name;
    cc.own_guid = guid;
    cc.channel.listen_host = "127.0.0.1";
    cc.channel.listen_port = 0;
    cc.channel.certificate = certs.dir + "/" + name + ".pem";
    cc.channel.private_key = certs.dir + "/" + name + ".key";
    cc.channel.ca = certs.dir + "/ca.pem";
    cc.channel.reconnect_min = milliseconds(50);
    cc.channel.reconnect_max = milliseconds(200);
    cc.channel.peers.push_back({peer, peer_guid, "127.0.0.1", peer_port});
    cc.store.own_name = name;
    cc.store.sa_path = dir() + "/opensm-sa.copy";
    cc.store.guid2lid_path = dir() + "/guid2lid";
    cc.store.peers[peer] = peer_guid;
    cc.sender.sa_dump_path = dump();
    cc.sender.guid2lid_path = dir() + "/guid2lid";
    cc.sender.refresh = seconds(30);
    cc.sender.max_bytes = 64 * 1024;  // a dump it cannot send: one over this
    cc.max_copy_age = seconds(120);
    c = std::make_unique<Continuity>(io, cc, fs, clock, sched, [this] { return facts; }, alarms);
    REQUIRE(c->start().ok());
  }
};

// head02 listens; head01 dials it. Ticks on `sched`, the channel on `io`.
struct Pair {
  Certs certs;
  boost::asio::io_context io;
  ManualScheduler sched;
  Head h1{"head01", kHead01, sched.clock}, h2{"head02", kHead02, sched.clock};

  Pair() {
    // head02 dials nobody when it is MASTER here (port 1): head01 listens on a port of its own.
    h2.start(io, sched, certs, "head01", kHead01, 1);
    start_head01();
  }
  void start_head01() { h1.start(io, sched, certs, "head02", kHead02, h2.c->channel().listening_port()); }
  void master(Head& h) {
    h1.facts = {h.guid, h.guid == kHead01 ? SmState::Master : SmState::Standby};
    h2.facts = {h.guid, h.guid == kHead02 ? SmState::Master : SmState::Standby};
  }
  // Ticks a second at a time, the channel in between, until `done` (at most `limit` ticks).
  bool until(const std::function<bool()>& done, int limit = 20) {
    for (int i = 0; i < limit; ++i) {
      sched.run_for(seconds(1));
      for (int k = 0; k < 40 && !done(); ++k) io.run_for(std::chrono::milliseconds(10));
      if (done()) return true;
    }
    return false;
  }
  json s2() const {
    const ContinuityStatus st = h2.c->status();
    return continuity_json(&st, h2.clock.wall_now());
  }
};

}  // namespace

TEST_CASE("Continuity: a dump from before this mastership is never sent and the standby is told at once, and a dump "
          "it cannot send is said at once, and the takeover report's copy says it was stale",
          "[peer][continuity]") {
  Pair p;
  p.master(p.h1);
  REQUIRE(p.h1.fs.write_atomic(p.h1.dump(), real_dump(), 0600).ok());
  REQUIRE(p.h1.fs.write_atomic(p.h1.dir() + "/guid2lid", kGuid2Lid, 0644).ok());
  // head02 holds head01's current SA: current, no alarm.
  REQUIRE(p.until([&] { return p.s2()["copies"]["sa_dump"].is_object(); }));
  auto s = p.s2();
  INFO(s.dump(2));
  CHECK(s["copies"]["sa_dump"]["current"] == true);
  CHECK(s["copies"]["sa_dump"]["content_age_s"].get<double>() < 3);
  CHECK(p.h2.alarms.stale.empty());
  REQUIRE(p.h2.c->sa_copy_info());
  CHECK(p.h2.c->sa_copy_info()->current);

  // head02 takes over and hands back; head01's OpenSM is MASTER again and
  // has not dumped since: what is in its dump directory is its earlier
  // mastership's, never sent. head02 hears it at once.
  p.sched.run_for(seconds(100));
  p.master(p.h2);
  REQUIRE(p.until([&] { return p.h2.c->sending(); }));
  p.master(p.h1);
  REQUIRE(p.until([&] { return p.s2()["not_sent"]["sa_dump"].is_object() && !p.h2.alarms.stale.empty(); }, 5));
  s = p.s2();
  INFO(s.dump(2));
  const std::string problem = s["not_sent"]["sa_dump"]["problem"];
  CHECK(problem.find("waiting for this master's first dump") != std::string::npos);
  CHECK(s["copies"]["sa_dump"]["current"] == false);
  CHECK(p.h2.alarms.stale.rfind("not sent: waiting for this master's first dump", 0) == 0);
  CHECK(p.h2.alarms.stale.find("its content written") != std::string::npos);
  const ContinuityStatus h1st = p.h1.c->status();
  auto h1s = continuity_json(&h1st, p.h1.clock.wall_now());
  CHECK(h1s["sent"]["sa_dump_problem"].get<std::string>().find("waiting for this master's first dump") !=
        std::string::npos);

  // Its OpenSM dumps: the copy goes at once, current again.
  REQUIRE(p.h1.fs.write_atomic(p.h1.dump(), real_dump(), 0600).ok());
  REQUIRE(p.until([&] { return p.h2.alarms.stale.empty(); }, 5));
  s = p.s2();
  CHECK(s["copies"]["sa_dump"]["current"] == true);
  CHECK(s["not_sent"]["sa_dump"].is_null());

  // A dump it cannot send (what OpenSM could not load back is trimmed, not
  // refused: over the cap is what is left): not sent, and head02 is told at once.
  std::string bad = real_dump();
  const std::string sr = bad.substr(bad.find("Service Record:"), bad.find('\n', bad.find("Service Record:")) -
                                                                      bad.find("Service Record:"));
  while (bad.size() <= 64 * 1024) bad += "\n" + sr + "\n";
  p.sched.run_for(seconds(20));
  REQUIRE(p.h1.fs.write_atomic(p.h1.dump(), bad, 0600).ok());
  REQUIRE(p.until([&] { return !p.h2.alarms.stale.empty(); }, 5));
  INFO(p.h2.alarms.stale);
  CHECK(p.h2.alarms.stale.rfind("not sent: " + p.h1.dump() + " is ", 0) == 0);
  const auto info = p.h2.c->sa_copy_info();
  REQUIRE(info);
  CHECK_FALSE(info->current);
  CHECK(info->stale.rfind("not sent: ", 0) == 0);
  REQUIRE(info->missed_s);
  CHECK(*info->missed_s >= 19);
  fabric::TakeoverReport r;
  r.sa_copy = info;
  CHECK_FALSE(fabric::sa_restored(r));
  CHECK(fabric::sa_restore_text(r).rfind("SA database restored from a stale copy: generation", 0) == 0);
}

TEST_CASE("Continuity: a master whose clock stepped back (and smhad restarted) gets its copies through above "
          "the generation held, and one a day ahead is refused as future and alarmed at once",
          "[peer][continuity]") {
  Pair p;
  p.master(p.h1);
  REQUIRE(p.h1.fs.write_atomic(p.h1.dump(), real_dump(), 0600).ok());
  REQUIRE(p.until([&] { return p.s2()["copies"]["sa_dump"].is_object(); }));
  const std::uint64_t held = p.s2()["copies"]["sa_dump"]["generation"];

  p.h1.c->stop();
  p.h1.c.reset();
  p.h1.clock.offset = -std::chrono::duration_cast<WallTime::duration>(std::chrono::hours(1));
  p.start_head01();
  p.sched.run_for(seconds(1));
  REQUIRE(p.h1.fs.write_atomic(p.h1.dump(), real_dump() + "\n", 0600).ok());
  // Its first copies are below what head02 holds: refused as older, then
  // sent again above the generation the answer names.
  REQUIRE(p.until([&] {
    const json sa = p.s2()["copies"]["sa_dump"];
    return sa["generation"].get<std::uint64_t>() > held && sa["bytes"] == real_dump().size() + 1;
  }));
  auto s = p.s2();
  INFO(s.dump(2));
  CHECK(s["received"]["refused"]["older"].get<int>() >= 1);
  CHECK(s["copies"]["sa_dump"]["current"] == true);
  const std::uint64_t good = s["copies"]["sa_dump"]["generation"];
  CHECK(good <= held + 2);

  // A clock a day and more ahead: refused as future, alarmed at once, nothing written.
  p.h1.clock.offset = std::chrono::duration_cast<WallTime::duration>(std::chrono::hours(30));
  p.sched.run_for(seconds(1));
  REQUIRE(p.h1.fs.write_atomic(p.h1.dump(), real_dump() + "\n\n", 0600).ok());
  REQUIRE(p.until([&] { return !p.h2.alarms.stale.empty(); }, 5));
  INFO(p.h2.alarms.stale);
  CHECK(p.h2.alarms.stale.find("refused as future") != std::string::npos);
  CHECK(p.s2()["copies"]["sa_dump"]["generation"] == good);
}
