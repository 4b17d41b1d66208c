// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// What a standby does with a copy (CopyStore) and what the master sends
// (CopySender), doc/continuity.md: every refusal in its order, nothing
// written unless applied, generations that only grow.
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "smha/peer/copy_store.hpp"
#include "test_support.hpp"

using namespace smha;
using namespace smha::peer;
using smha::opensm::test::MemoryFileSystem;

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

CopyStoreConfig store_config() {
  CopyStoreConfig c;
  c.own_name = "head02";
  c.sa_path = "/var/lib/smha/opensm-sa.copy";
  c.guid2lid_path = "/var/cache/opensm/guid2lid";
  c.max_bytes = 1 << 20;
  c.peers = {{"head01", kHead01}};
  return c;
}

CopyMeta from_head01(std::uint64_t generation) {
  CopyMeta m;
  m.from = "head01";
  m.master_guid = kHead01;
  m.generation = generation;
  return m;
}

const InBandFacts kStandbyUnderHead01{kHead01, SmState::Standby};

}  // namespace

TEST_CASE("CopyStore: a copy from the peer that is MASTER is written where OpenSM reads it, with its record",
          "[peer][copy_store]") {
  MemoryFileSystem fs;
  ManualClock clock;
  CopyStore store(store_config(), fs, clock);
  const auto v = store.offer(FrameKind::SaDump, from_head01(100), real_dump(), "head01", kStandbyUnderHead01);
  INFO(v.text);
  REQUIRE(v.applied);
  CHECK_FALSE(v.confirmed);
  CHECK(fs.files.at("/var/lib/smha/opensm-sa.copy") == real_dump());
  REQUIRE(fs.writes.size() == 2);
  CHECK(fs.writes[0].mode == 0600);
  CHECK(fs.writes[1].path == "/var/lib/smha/opensm-sa.copy.smha");
  const auto& h = store.held(FrameKind::SaDump);
  REQUIRE(h);
  CHECK(h->generation == 100);
  CHECK(h->sa.groups.size() == 3);
  CHECK(h->sa.members == 6);
  CHECK(store.applied() == 1);
  CHECK(store.highest_generation() == 100);
  const auto g = store.offer(FrameKind::Guid2Lid, from_head01(101), kGuid2Lid, "head01", kStandbyUnderHead01);
  REQUIRE(g.applied);
  CHECK(fs.files.at("/var/cache/opensm/guid2lid") == kGuid2Lid);
  CHECK(store.held(FrameKind::Guid2Lid)->guid2lid_entries == 2);
  CHECK(store.highest_generation() == 101);

  // Restarted: the record and the file agree, so the copy is held again.
  CopyStore again(store_config(), fs, clock);
  again.load();
  REQUIRE(again.held(FrameKind::SaDump));
  CHECK(again.held(FrameKind::SaDump)->generation == 100);
  CHECK(again.held(FrameKind::SaDump)->sa.members == 6);
  // A file changed behind the record's back is not held.
  fs.files["/var/cache/opensm/guid2lid"] = kGuid2Lid + "0x0000000000100007 0x0005 0x0005\n\n";
  CopyStore third(store_config(), fs, clock);
  third.load();
  CHECK_FALSE(third.held(FrameKind::Guid2Lid));
}

TEST_CASE("CopyStore: what the master left out of a copy is held with it, updated on a confirmation and kept "
          "across a restart",
          "[peer][copy_store]") {
  MemoryFileSystem fs;
  ManualClock clock;
  CopyStore store(store_config(), fs, clock);
  CopyMeta m = from_head01(100);
  m.trimmed = "1 record OpenSM could not load back: 1 registered by port GID 0xfe80000000000000:0x00000000001000ff";
  REQUIRE(store.offer(FrameKind::SaDump, m, real_dump(), "head01", kStandbyUnderHead01).applied);
  CHECK(store.held(FrameKind::SaDump)->trimmed == m.trimmed);
  CopyStore again(store_config(), fs, clock);
  again.load();
  REQUIRE(again.held(FrameKind::SaDump));
  CHECK(again.held(FrameKind::SaDump)->trimmed == m.trimmed);
  m.trimmed += ", and more";
  const auto v = store.offer(FrameKind::SaDump, m, real_dump(), "head01", kStandbyUnderHead01);
  CHECK(v.confirmed);
  CHECK(store.held(FrameKind::SaDump)->trimmed == m.trimmed);
}

TEST_CASE("CopyStore: every check refuses in its order, counted, and nothing is written", "[peer][copy_store]") {
  MemoryFileSystem fs;
  ManualClock clock;
  auto cfg = store_config();
  cfg.max_bytes = real_dump().size() + 10;
  CopyStore store(cfg, fs, clock);
  auto refused = [&](RefuseReason want, FrameKind kind, const CopyMeta& m, const std::string& body,
                     const std::string& peer, const InBandFacts& facts) {
    const auto before = fs.writes.size();
    const auto v = store.offer(kind, m, body, peer, facts);
    INFO(v.text);
    CHECK_FALSE(v.applied);
    CHECK(v.reason == want);
    CHECK(fs.writes.size() == before);
    return v.text;
  };
  const std::string dump = real_dump();
  CHECK(refused(RefuseReason::Identity, FrameKind::SaDump, from_head01(5), dump, "head03", kStandbyUnderHead01)
            .find("the certificate names \"head03\"") != std::string::npos);
  auto stranger = from_head01(5);
  stranger.from = "head09";
  refused(RefuseReason::NotAPeer, FrameKind::SaDump, stranger, dump, "head09", kStandbyUnderHead01);
  auto other_guid = from_head01(5);
  other_guid.master_guid = kHead02;
  refused(RefuseReason::NotAPeer, FrameKind::SaDump, other_guid, dump, "head01", kStandbyUnderHead01);
  auto fabric = from_head01(5);
  fabric.fabric = "rail1";
  refused(RefuseReason::WrongFabric, FrameKind::SaDump, fabric, dump, "head01", kStandbyUnderHead01);
  // Not MASTER in this head's own polling: none seen, or another SM.
  refused(RefuseReason::NotMaster, FrameKind::SaDump, from_head01(5), dump, "head01", {std::nullopt, SmState::Standby});
  CHECK(refused(RefuseReason::NotMaster, FrameKind::SaDump, from_head01(5), dump, "head01", {kHead02, SmState::Standby})
            .find("MASTER is 0x0002c90300000002") != std::string::npos);
  // Our own SM MASTER, DISCOVERING or silent: its files are its own.
  for (auto st : {std::optional<SmState>{SmState::Master}, std::optional<SmState>{SmState::Discovering},
                  std::optional<SmState>{}})
    refused(RefuseReason::LocalMaster, FrameKind::SaDump, from_head01(5), dump, "head01", {kHead01, st});
  refused(RefuseReason::TooLarge, FrameKind::SaDump, from_head01(5), dump + std::string(20, '\n'), "head01",
          kStandbyUnderHead01);
  CHECK(refused(RefuseReason::Malformed, FrameKind::SaDump, from_head01(5), "MC Group 0xc000 mgid\n", "head01",
                kStandbyUnderHead01)
            .find("line 1") != std::string::npos);
  refused(RefuseReason::Malformed, FrameKind::Guid2Lid, from_head01(5), "0x0000000000100001 0x0000 0x0000\n\n",
          "head01", kStandbyUnderHead01);
  CHECK(store.refused()[static_cast<std::size_t>(RefuseReason::LocalMaster)] == 3);
  CHECK(store.applied() == 0);
  CHECK_FALSE(store.held(FrameKind::SaDump));
  CHECK(store.last_refusal().rfind("head01: ", 0) == 0);

  // Generations: an older one is refused, the same with the same content
  // confirms (nothing written), the same with other content is a replay.
  REQUIRE(store.offer(FrameKind::SaDump, from_head01(50), dump, "head01", kStandbyUnderHead01).applied);
  refused(RefuseReason::Older, FrameKind::SaDump, from_head01(49), dump, "head01", kStandbyUnderHead01);
  clock.advance(seconds(40));
  const auto writes = fs.writes.size();
  const auto same = store.offer(FrameKind::SaDump, from_head01(50), dump, "head01", kStandbyUnderHead01);
  CHECK(same.applied);
  CHECK(same.confirmed);
  CHECK(fs.writes.size() == writes);
  CHECK(store.held(FrameKind::SaDump)->confirmed == clock.wall_now());
  const auto cut = dump.substr(0, dump.find("InformInfo"));
  refused(RefuseReason::Replayed, FrameKind::SaDump, from_head01(50), cut, "head01", kStandbyUnderHead01);
  // A write that fails leaves the held copy as it was.
  fs.write_error = make_error(Errc::Io, "disk full");
  refused(RefuseReason::WriteFailed, FrameKind::SaDump, from_head01(51), cut, "head01", kStandbyUnderHead01);
  CHECK(store.held(FrameKind::SaDump)->generation == 50);
}

TEST_CASE("CopySender: new content gets a generation above everything seen and the wall clock, unchanged "
          "content is re-sent each refresh with its own",
          "[peer][copy_store]") {
  MemoryFileSystem fs;
  ManualClock clock;
  CopySenderConfig cfg;
  cfg.sa_dump_path = "/var/log/opensm-sa.dump";
  cfg.guid2lid_path = "/var/cache/opensm/guid2lid";
  cfg.refresh = seconds(30);
  CopySender sender(cfg, fs, clock);
  // Nothing to send: said, not sent.
  for (const auto& o : sender.poll(0)) {
    CHECK(o.notice);
    CHECK(o.body.empty());
  }
  CHECK(sender.problem(FrameKind::SaDump).find("no such file") != std::string::npos);
  fs.files[cfg.sa_dump_path] = real_dump();
  fs.files[cfg.guid2lid_path] = kGuid2Lid;
  const auto wall_ms = static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(clock.wall_now().time_since_epoch()).count());
  auto out = sender.poll(0);
  REQUIRE(out.size() == 2);
  CHECK(out[0].kind == FrameKind::SaDump);
  CHECK(out[0].generation >= wall_ms);
  CHECK(out[1].generation > out[0].generation);
  CHECK(out[0].body == real_dump());
  clock.advance(seconds(10));
  CHECK(sender.poll(0).empty());
  clock.advance(seconds(25));
  auto again = sender.poll(0);
  REQUIRE(again.size() == 2);
  CHECK(again[0].generation == out[0].generation);
  // Changed content, and a floor above the clock (a generation received from
  // an earlier master): above both.
  fs.files[cfg.guid2lid_path] = kGuid2Lid + "0x0000000000100007 0x0005 0x0005\n\n";
  const std::uint64_t floor = wall_ms + 1000000;
  auto changed = sender.poll(floor);
  REQUIRE(changed.size() == 1);
  CHECK(changed[0].kind == FrameKind::Guid2Lid);
  CHECK(changed[0].generation == floor + 1);
  // A record our own OpenSM could not load back is left out; the rest flows
  // with a new generation, and trimmed() names it.
  const std::string dump = real_dump();
  const std::string split = dump.substr(0, dump.find("name='smha-workload'")) + "name='smha\nworkload'" +
                            dump.substr(dump.find("name='smha-workload'") + 20);
  fs.files[cfg.sa_dump_path] = split;
  clock.advance(seconds(60));
  auto bad = sender.poll(0);
  REQUIRE(bad.size() == 2);
  CHECK(bad[0].kind == FrameKind::SaDump);
  CHECK(bad[0].generation > changed[0].generation);
  CHECK(sender.problem(FrameKind::SaDump).empty());
  auto left = opensm::parse_sa_dump(bad[0].body);
  REQUIRE(left);
  CHECK(left->services == 3);
  CHECK(left->groups.size() == 3);
  CHECK(sender.trimmed() ==
        "1 record OpenSM could not load back: 1 registered by port GID 0xfe80000000000000:0x000000000010000a");
  // Over the bounds: the same, named as such.
  cfg.bounds.services_per_port = 1;
  CopySender bounded(cfg, fs, clock);
  fs.files[cfg.sa_dump_path] = dump;
  auto b = bounded.poll(0);
  REQUIRE(b.size() == 2);
  CHECK(opensm::parse_sa_dump(b[0].body)->services == 4);  // one a port
  // Each port registers its record again: what is left is the copy already
  // sent, so nothing new goes out, and trimmed() says what was left out.
  fs.files[cfg.sa_dump_path] = dump + dump.substr(dump.find("Service Record:"));
  clock.advance(seconds(1));
  CHECK(bounded.poll(0).empty());
  CHECK(bounded.trimmed().find("4 ServiceRecords over the bounds (1 a port, 4096 in all): 1 registered by port GID") == 0);
  // No longer MASTER, then MASTER again: everything goes out with new generations.
  sender.reset();
  fs.files[cfg.sa_dump_path] = real_dump();
  auto fresh = sender.poll(0);
  REQUIRE(fresh.size() == 2);
  CHECK(fresh[0].generation > changed[0].generation);
}

namespace {

// Files in memory with a stamp per file (its mtime the clock's wall time at
// the write, its inode bumped on every write) and a count of the reads: what
// PosixFileSystem's stat gives CopySender.
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
    ++reads;
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
  mutable int reads = 0;

 private:
  const Clock& clock_;
};

}  // namespace

TEST_CASE("CopySender: a file whose stamp did not change is not read again, a refresh re-sends what was read",
          "[peer][copy_store]") {
  ManualClock clock;
  StampedFs fs(clock);
  CopySenderConfig cfg;
  cfg.sa_dump_path = "/var/log/opensm-sa.dump";
  cfg.guid2lid_path = "/var/cache/opensm/guid2lid";
  cfg.refresh = seconds(30);
  CopySender sender(cfg, fs, clock);
  REQUIRE(fs.write_atomic(cfg.sa_dump_path, real_dump(), 0600).ok());
  REQUIRE(fs.write_atomic(cfg.guid2lid_path, kGuid2Lid, 0644).ok());
  auto first = sender.poll(0);
  REQUIRE(first.size() == 2);
  const int reads = fs.reads;
  for (int i = 0; i < 20; ++i) {
    clock.advance(seconds(1));
    CHECK(sender.poll(0).empty());
  }
  CHECK(fs.reads == reads);  // twenty polls, no read
  clock.advance(seconds(15));
  auto refresh = sender.poll(0);
  REQUIRE(refresh.size() == 2);
  CHECK(refresh[0].body == real_dump());
  CHECK(refresh[0].generation == first[0].generation);
  CHECK(fs.reads == reads);  // re-sent from what was read
  // Rewritten with the same content (OpenSM's rename): read, same generation, not sent before its refresh.
  REQUIRE(fs.write_atomic(cfg.guid2lid_path, kGuid2Lid, 0644).ok());
  clock.advance(seconds(1));
  CHECK(sender.poll(0).empty());
  CHECK(fs.reads == reads + 1);
  // Changed: read and sent with a new generation.
  REQUIRE(fs.write_atomic(cfg.guid2lid_path, kGuid2Lid + "0x0000000000100007 0x0005 0x0005\n\n", 0644).ok());
  auto changed = sender.poll(0);
  REQUIRE(changed.size() == 1);
  CHECK(changed[0].generation > first[1].generation);
}

namespace {

// A clock whose wall time can step (NTP, an operator): now() only grows.
class SteppedClock final : public Clock {
 public:
  TimePoint now() const override { return now_; }
  WallTime wall_now() const override { return wall_; }
  void advance(Duration d) {
    now_ += d;
    wall_ += std::chrono::duration_cast<WallTime::duration>(d);
  }
  void step_wall(Duration d) { wall_ += std::chrono::duration_cast<WallTime::duration>(d); }

 private:
  TimePoint now_{};
  WallTime wall_ = kVirtualEpoch;
};

std::uint64_t ms_of(WallTime t) {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count());
}

CopySenderConfig sender_config() {
  CopySenderConfig cfg;
  cfg.sa_dump_path = "/var/log/opensm-sa.dump";
  cfg.guid2lid_path = "/var/cache/opensm/guid2lid";
  cfg.refresh = seconds(30);
  return cfg;
}

const Outgoing* find(const std::vector<Outgoing>& out, FrameKind kind) {
  for (const auto& o : out)
    if (o.kind == kind) return &o;
  return nullptr;
}

}  // namespace

TEST_CASE("CopySender: a dump written before this head's OpenSM became MASTER is never sent, a notice says so, and "
          "this mastership's first dump goes out at once with its age",
          "[peer][copy_store]") {
  ManualClock clock;
  StampedFs fs(clock);
  const auto cfg = sender_config();
  // Left from this head's earlier mastership.
  REQUIRE(fs.write_atomic(cfg.sa_dump_path, real_dump(), 0600).ok());
  REQUIRE(fs.write_atomic(cfg.guid2lid_path, kGuid2Lid, 0644).ok());
  clock.advance(seconds(600));
  const WallTime became_master = clock.wall_now();
  clock.advance(seconds(2));
  CopySender sender(cfg, fs, clock);
  sender.set_master_since(became_master);
  auto out = sender.poll(0);
  const auto* sa = find(out, FrameKind::SaDump);
  REQUIRE(sa);
  CHECK(sa->notice);
  CHECK(sa->body.empty());
  CHECK(sa->problem.find("waiting for this master's first dump") != std::string::npos);
  CHECK(sa->problem.find("written 600 s before this head's OpenSM became MASTER") != std::string::npos);
  CHECK(sa->age_ms == 2000);  // this master's SA has been its own for 2 s
  CHECK(sender.problem(FrameKind::SaDump).find("waiting for this master's first dump") != std::string::npos);
  // guid2lid is not the SA: it goes.
  REQUIRE(find(out, FrameKind::Guid2Lid));
  CHECK_FALSE(find(out, FrameKind::Guid2Lid)->notice);
  // The notice is not repeated before its refresh; the stale dump is never sent.
  for (int i = 0; i < 20; ++i) {
    clock.advance(seconds(1));
    for (const auto& o : sender.poll(0)) CHECK(o.kind != FrameKind::SaDump);
  }
  clock.advance(seconds(10));
  auto again = sender.poll(0);
  REQUIRE(find(again, FrameKind::SaDump));
  CHECK(find(again, FrameKind::SaDump)->notice);
  // OpenSM dumps (its SA changed): sent at once, its age with it.
  REQUIRE(fs.write_atomic(cfg.sa_dump_path, real_dump(), 0600).ok());
  clock.advance(milliseconds(1500));
  auto fresh = sender.poll(0);
  const auto* copy = find(fresh, FrameKind::SaDump);
  REQUIRE(copy);
  CHECK_FALSE(copy->notice);
  CHECK(copy->body == real_dump());
  CHECK(copy->age_ms == 1500);
  CHECK(sender.problem(FrameKind::SaDump).empty());

  // A file whose mtime cannot be read is not this master's either.
  MemoryFileSystem plain;
  plain.files[cfg.sa_dump_path] = real_dump();
  CopySender blind(cfg, plain, clock);
  blind.set_master_since(became_master);
  auto none = blind.poll(0);
  REQUIRE(find(none, FrameKind::SaDump));
  CHECK(find(none, FrameKind::SaDump)->notice);
}

TEST_CASE("CopySender: a dump it cannot send is read once per change, and said at once and each refresh",
          "[peer][copy_store]") {
  // What OpenSM could not load back is trimmed, not refused (test_sa_trim):
  // what is left that cannot be sent is a dump over the cap.
  ManualClock clock;
  StampedFs fs(clock);
  auto cfg = sender_config();
  cfg.max_bytes = real_dump().size() + 10;
  CopySender sender(cfg, fs, clock);
  sender.set_master_since(clock.wall_now());
  clock.advance(seconds(1));
  REQUIRE(fs.write_atomic(cfg.guid2lid_path, kGuid2Lid, 0644).ok());
  REQUIRE(fs.write_atomic(cfg.sa_dump_path, real_dump(), 0600).ok());
  clock.advance(seconds(1));
  REQUIRE(find(sender.poll(0), FrameKind::SaDump));
  const std::string bad = real_dump() + std::string(100, '\n');
  REQUIRE(fs.write_atomic(cfg.sa_dump_path, bad, 0600).ok());
  clock.advance(seconds(3));
  const int reads = fs.reads;
  auto out = sender.poll(0);
  const auto* n = find(out, FrameKind::SaDump);
  REQUIRE(n);
  CHECK(n->notice);
  CHECK(n->age_ms == 3000);
  CHECK(n->problem.find("the cap is") != std::string::npos);
  CHECK(fs.reads == reads + 1);
  for (int i = 0; i < 25; ++i) {
    clock.advance(seconds(1));
    CHECK_FALSE(find(sender.poll(0), FrameKind::SaDump));
  }
  CHECK(fs.reads == reads + 1);  // parsed once, not every second
  clock.advance(seconds(5));
  auto refresh = sender.poll(0);
  REQUIRE(find(refresh, FrameKind::SaDump));
  CHECK(find(refresh, FrameKind::SaDump)->notice);
  CHECK(find(refresh, FrameKind::SaDump)->age_ms == 33000);
  CHECK(fs.reads == reads + 1);
  // Fixed, with the content sent before: sent again at once (the standby was told it moved on).
  REQUIRE(fs.write_atomic(cfg.sa_dump_path, real_dump(), 0600).ok());
  auto fixed = sender.poll(0);
  REQUIRE(find(fixed, FrameKind::SaDump));
  CHECK_FALSE(find(fixed, FrameKind::SaDump)->notice);
}

TEST_CASE("CopyStore: a copy knows its content's age apart from its confirmation, and the master's notice marks it "
          "moved on until the next copy",
          "[peer][copy_store]") {
  MemoryFileSystem fs;
  ManualClock clock;
  CopyStore store(store_config(), fs, clock);
  auto m = from_head01(ms_of(clock.wall_now()));
  m.age_ms = 90000;
  REQUIRE(store.offer(FrameKind::SaDump, m, real_dump(), "head01", kStandbyUnderHead01).applied);
  CHECK(store.held(FrameKind::SaDump)->written == clock.wall_now() - seconds(90));
  clock.advance(seconds(30));
  m.age_ms = 120000;
  REQUIRE(store.offer(FrameKind::SaDump, m, real_dump(), "head01", kStandbyUnderHead01).confirmed);
  CHECK(store.held(FrameKind::SaDump)->confirmed == clock.wall_now());
  CHECK(store.held(FrameKind::SaDump)->written == clock.wall_now() - seconds(120));
  // The record keeps it across a restart.
  CopyStore again(store_config(), fs, clock);
  again.load();
  REQUIRE(again.held(FrameKind::SaDump));
  CHECK(again.held(FrameKind::SaDump)->written == clock.wall_now() - seconds(120));

  NoticeMeta n;
  n.kind = FrameKind::SaDump;
  n.from = "head01";
  n.master_guid = kHead01;
  n.age_ms = 4000;
  n.problem = "/var/log/opensm-sa.dump: line 9: ...";
  n.counts = SaCounts{5, 9, 3, 4};
  // Checked as a copy's sender is.
  CHECK(store.notice(n, "head03", kStandbyUnderHead01).reason == RefuseReason::Identity);
  CHECK(store.notice(n, "head01", {kHead02, SmState::Standby}).reason == RefuseReason::NotMaster);
  CHECK_FALSE(store.notice(FrameKind::SaDump));
  clock.advance(seconds(5));
  REQUIRE(store.notice(n, "head01", kStandbyUnderHead01).applied);
  const auto& got = store.notice(FrameKind::SaDump);
  REQUIRE(got);
  CHECK(got->since == clock.wall_now() - seconds(4));
  CHECK(got->problem == n.problem);
  CHECK(got->counts == n.counts);
  CHECK(store.held(FrameKind::SaDump)->generation == m.generation);  // nothing written
  // The next copy of the master's current SA ends it.
  m.generation += 1;
  REQUIRE(store.offer(FrameKind::SaDump, m, real_dump(), "head01", kStandbyUnderHead01).applied);
  CHECK_FALSE(store.notice(FrameKind::SaDump));
}

TEST_CASE("CopyStore: a generation more than a day ahead is refused as future, and an implausible generation held "
          "(2^64-1, after a restart) blocks no real copy",
          "[peer][copy_store]") {
  MemoryFileSystem fs;
  ManualClock clock;
  CopyStore store(store_config(), fs, clock);
  const std::uint64_t now_ms = ms_of(clock.wall_now());
  for (std::uint64_t g : {UINT64_MAX, now_ms + kMaxGenerationAheadMs + 1}) {
    const auto v = store.offer(FrameKind::SaDump, from_head01(g), real_dump(), "head01", kStandbyUnderHead01);
    INFO(v.text);
    CHECK_FALSE(v.applied);
    CHECK(v.reason == RefuseReason::Future);
    CHECK(to_string(v.reason) == "future");
  }
  CHECK(store.refused()[static_cast<std::size_t>(RefuseReason::Future)] == 2);
  CHECK(fs.writes.empty());
  CHECK(store.offer(FrameKind::SaDump, from_head01(now_ms + kMaxGenerationAheadMs), real_dump(), "head01",
                    kStandbyUnderHead01)
            .applied);

  // An earlier smhad (an older version, or a forger with a head's key) left 2^64-1 in the record.
  const std::string record = fs.files.at("/var/lib/smha/opensm-sa.copy.smha");
  auto j = nlohmann::json::parse(record);
  j["generation"] = UINT64_MAX;
  fs.files["/var/lib/smha/opensm-sa.copy.smha"] = j.dump();
  CopyStore restarted(store_config(), fs, clock);
  restarted.load();
  REQUIRE(restarted.held(FrameKind::SaDump));
  CHECK(restarted.held(FrameKind::SaDump)->generation == UINT64_MAX);
  const auto v = restarted.offer(FrameKind::SaDump, from_head01(now_ms + 5), real_dump(), "head01",
                                 kStandbyUnderHead01);
  INFO(v.text);
  CHECK(v.applied);
  CHECK(restarted.held(FrameKind::SaDump)->generation == now_ms + 5);
  CHECK(v.held == now_ms + 5);
}

TEST_CASE("CopySender and CopyStore: a master whose clock stepped back still gets its copies through, and "
          "generations never overflow",
          "[peer][copy_store]") {
  SteppedClock master_clock, standby_clock;
  StampedFs fs(master_clock);
  MemoryFileSystem standby_fs;
  const auto cfg = sender_config();
  CopySender sender(cfg, fs, master_clock);
  CopyStore store(store_config(), standby_fs, standby_clock);
  REQUIRE(fs.write_atomic(cfg.sa_dump_path, real_dump(), 0600).ok());
  REQUIRE(fs.write_atomic(cfg.guid2lid_path, kGuid2Lid, 0644).ok());
  auto deliver = [&](const Outgoing& o) {
    CopyMeta m = from_head01(o.generation);
    m.age_ms = o.age_ms;
    return store.offer(o.kind, m, o.body, "head01", kStandbyUnderHead01);
  };
  auto first = sender.poll(0);
  REQUIRE(first.size() == 2);
  REQUIRE(deliver(first[0]).applied);
  const std::uint64_t held = first[0].generation;
  // The master's clock steps back an hour, smhad restarts, OpenSM dumps again.
  master_clock.step_wall(-std::chrono::hours(1));
  CopySender restarted(cfg, fs, master_clock);
  master_clock.advance(seconds(1));
  standby_clock.advance(seconds(1));
  std::string changed = real_dump();
  changed += "\n";
  REQUIRE(fs.write_atomic(cfg.sa_dump_path, changed, 0600).ok());
  auto out = restarted.poll(0);
  REQUIRE(find(out, FrameKind::SaDump));
  const auto refused = deliver(*find(out, FrameKind::SaDump));
  CHECK_FALSE(refused.applied);
  CHECK(refused.reason == RefuseReason::Older);
  CHECK(refused.held == held);
  // The answer tells the sender what is held: it continues above.
  CHECK(restarted.continue_above(FrameKind::SaDump, refused.held));
  master_clock.advance(seconds(1));
  auto retry = restarted.poll(0);
  const auto* again = find(retry, FrameKind::SaDump);
  REQUIRE(again);
  CHECK(again->generation == held + 1);
  CHECK(again->body == changed);
  CHECK(deliver(*again).applied);
  // Nothing to continue above: what is held is not above, or is implausible.
  CHECK_FALSE(restarted.continue_above(FrameKind::SaDump, held));
  CHECK_FALSE(restarted.continue_above(FrameKind::SaDump, UINT64_MAX));
  // A floor of 2^64-1 (a copy held here from a forger) is ignored, never wrapped to 0.
  REQUIRE(fs.write_atomic(cfg.guid2lid_path, kGuid2Lid + "0x0000000000100007 0x0005 0x0005\n\n", 0644).ok());
  auto top = restarted.poll(UINT64_MAX);
  REQUIRE(find(top, FrameKind::Guid2Lid));
  CHECK(find(top, FrameKind::Guid2Lid)->generation > held + 1);
  CHECK(find(top, FrameKind::Guid2Lid)->generation < UINT64_MAX);
}
