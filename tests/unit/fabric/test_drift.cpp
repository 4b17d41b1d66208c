// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// Config drift (doc/drift.md): the digests (what they cover and leave out),
// the ServiceData layout, and DriftMonitor against a scripted SA.
#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <vector>

#include "smha/fabric/drift.hpp"
#include "smha/core/clock.hpp"
#include "manual_scheduler.hpp"

using namespace smha;
using namespace smha::fabric;

using smha::test::ManualScheduler;

namespace {

// A rendered opensm.conf as opensm::render_opensm_conf writes it for `guid`,
// `prio`, with a partitions file of content hash `parts`.
std::string conf(const std::string& guid, int prio, const std::string& parts,
                 const std::string& log = "/var/log/opensm.log", const std::string& engine = "ftree,updn") {
  return "# opensm.conf rendered by smha from /etc/smha/smha.yaml\n"
         "# flavor upstream\n"
         "# policy-file partition_config_file /etc/opensm/partitions.conf fnv1a64:" + parts + "\n"
         "# body-hash fnv1a64:0123456789abcdef\n\n"
         "# Keys managed by smha\n"
         "guid " + guid + "\n"
         "sm_priority " + std::to_string(prio) + "\n"
         "sm_key 0x0000000000000001\n"
         "routing_engine " + engine + "\n"
         "log_file " + log + "\n"
         "\n# opensm.extra\n"
         "partition_config_file /etc/opensm/partitions.conf\n";
}

DigestInputs inputs(const std::string& c) {
  DigestInputs in;
  in.rendered_conf = c;
  in.ha_policy = "poll_interval_ms 100\nmisses_before_takeover 3\n";
  in.opensm = "3.3.23 upstream";
  in.sm_key = 1;
  return in;
}

std::vector<std::string> names(const std::vector<DriftComponent>& v) {
  std::vector<std::string> out;
  for (auto c : v) out.emplace_back(to_string(c));
  return out;
}

// An SA that keeps records by GID (answers after 1 ms); `forge` answers every
// Get with that record instead.
struct FakeSa : mad::MadTransport {
  ManualScheduler& s;
  std::map<mad::Gid, mad::ServiceRecord> records;
  std::optional<mad::ServiceRecord> forge;
  std::vector<Lid> sets_to;
  int deletes = 0;
  explicit FakeSa(ManualScheduler& sch) : s(sch) {}
  template <typename T, typename F>
  void later(F done, Result<T> r) {
    s.schedule_at(s.now() + milliseconds(1), [done, r] { done(r); });
  }
  void submit(mad::Request req, mad::ReplyCallback done) override {
    std::visit([&](const auto& q) { on(q, std::move(done)); }, req.query);
  }
  template <class Q>
  void on(const Q&, mad::ReplyCallback) {}  // nothing else is asked: no answer
  void on(const mad::ServiceRecordSet& q, mad::ReplyCallback done) {
    const mad::ServiceRecord& r = q.record;
    sets_to.push_back(q.sa_lid);
    records[r.gid] = r;
    later<mad::ServiceRecordReply>(done, mad::ServiceRecordReply{r, milliseconds(1), 1});
  }
  std::vector<std::uint64_t> got_ids;  // the ServiceID of every Get
  void on(const mad::ServiceRecordGet& q, mad::ReplyCallback done) {
    const mad::Gid& gid = q.gid;
    got_ids.push_back(q.id);
    if (forge) return later<mad::ServiceRecordReply>(done, mad::ServiceRecordReply{*forge, milliseconds(1), 1});
    auto it = records.find(gid);
    if (it == records.end())
      return later<mad::ServiceRecordReply>(done, mad::mad_status_error(mad::kSaStatusNoRecords, "SA status 0x0300: no records"));
    later<mad::ServiceRecordReply>(done, mad::ServiceRecordReply{it->second, milliseconds(1), 1});
  }
  void on(const mad::ServiceRecordDelete& q, mad::ReplyCallback done) {
    const mad::ServiceRecord& r = q.record;
    ++deletes;
    records.erase(r.gid);
    later<mad::ServiceRecordReply>(done, mad::ServiceRecordReply{r, milliseconds(1), 1});
  }
};

struct Alarms : AlarmSink {
  std::vector<std::string> log;  // "raise: ...", "clear"
  std::vector<std::string> unknown;  // drift_unknown: "raise: ..." / "clear"
  void alarm(const RaiseAlarm& a, TimePoint) override {
    if (a.kind == AlarmKind::DriftUnknown) return unknown.push_back("raise: " + a.detail);
    CHECK(a.kind == AlarmKind::ConfigDrift);
    log.push_back("raise: " + a.detail);
  }
  void clear(const ClearAlarm& a, TimePoint) override {
    if (a.kind == AlarmKind::DriftUnknown) return unknown.push_back("clear");
    CHECK(a.kind == AlarmKind::ConfigDrift);
    log.push_back("clear");
  }
};

constexpr Guid kA{0xa1};
constexpr Guid kB{0xb2};

}  // namespace

TEST_CASE("digests leave out what the render makes per head", "[drift]") {
  const auto a = compute_digests(inputs(conf("0x00000000000000a1", 15, "1111")));
  // Another GUID, priority and log path: the same configuration.
  const auto b = compute_digests(inputs(conf("0x00000000000000b2", 1, "1111", "/var/log/other.log")));
  CHECK(differing(a, b).empty());
  CHECK(a == b);
}

TEST_CASE("digests name the component that changed", "[drift]") {
  const auto a = compute_digests(inputs(conf("0xa1", 15, "1111")));
  CHECK(names(differing(a, compute_digests(inputs(conf("0xa1", 15, "2222"))))) ==
        std::vector<std::string>{"partitions"});
  CHECK(names(differing(a, compute_digests(inputs(conf("0xa1", 15, "1111", "/l", "minhop"))))) ==
        std::vector<std::string>{"opensm_conf"});
  auto in = inputs(conf("0xa1", 15, "1111"));
  in.sm_key = 2;
  in.opensm = "3.3.24 upstream";
  in.ha_policy += "failback preempt\n";
  CHECK(names(differing(a, compute_digests(in))) == std::vector<std::string>{"ha_policy", "opensm", "sm_key"});
}

TEST_CASE("the SM_Key is never in the record, only its keyed fingerprint", "[drift]") {
  auto in = inputs(conf("0xa1", 15, "1111"));
  in.sm_key = 0x0123456789abcdefULL;
  const auto data = encode_service_data(compute_digests(in));
  const std::string bytes(data.begin(), data.end());
  const std::string key("\x01\x23\x45\x67\x89\xab\xcd\xef", 8);
  CHECK(bytes.find(key) == std::string::npos);
  CHECK(bytes.find(key.substr(0, 4)) == std::string::npos);
}

TEST_CASE("the SA key is a secret too: out of opensm_conf, in the keyed sm_key component", "[drift]") {
  auto with_sa_key = [](const std::string& key) {
    std::string c = conf("0xa1", 15, "1111");
    const std::string after = "sm_key 0x0000000000000001\n";
    c.insert(c.find(after) + after.size(), "sa_key " + key + "\n");
    return c;
  };
  auto in = inputs(with_sa_key("0x000000005a5a0001"));
  in.sa_key = 0x5a5a0001;
  const auto a = compute_digests(in);
  // Another SA key: the sm_key component differs, opensm_conf does not.
  auto other = inputs(with_sa_key("0x000000005a5a0002"));
  other.sa_key = 0x5a5a0002;
  CHECK(names(differing(a, compute_digests(other))) == std::vector<std::string>{"sm_key"});
  // OpenSM's default (unset) leaves the SmKey digest as it was without sa_key.
  auto unset = inputs(with_sa_key("0x0000000000000001"));
  CHECK(compute_digests(unset) == compute_digests(inputs(conf("0xa1", 15, "1111"))));
  CHECK(names(differing(a, compute_digests(unset))) == std::vector<std::string>{"sm_key"});
  // Never in the record.
  const auto data = encode_service_data(a);
  const std::string bytes(data.begin(), data.end());
  CHECK(bytes.find(std::string("\x5a\x5a\x00\x01", 4)) == std::string::npos);
}

TEST_CASE("ServiceData layout 1: encode, decode, and what is rejected", "[drift]") {
  const auto d = compute_digests(inputs(conf("0xa1", 15, "1111")));
  auto data = encode_service_data(d);
  CHECK(data[0] == 1);
  CHECK(data[1] == 8);
  // Digests in bytes 2..49; ServiceData64[1] (56..63) carries nothing (ibsim cuts it).
  for (std::size_t i = 50; i < 64; ++i) CHECK(data[i] == 0);
  CHECK(std::equal(d.digest[0].begin(), d.digest[0].end(), data.begin() + 2));
  CHECK(std::equal(d.digest[7].begin(), d.digest[7].end(), data.begin() + 44));
  auto back = decode_service_data(data);
  REQUIRE(back.ok());
  CHECK(*back == d);
  SECTION("another version") {
    data[0] = 2;
    auto e = decode_service_data(data);
    REQUIRE_FALSE(e.ok());
    CHECK(e.error().code == Errc::Parse);
    CHECK(e.error().message.find("version 2 (byte 0)") != std::string::npos);
  }
  SECTION("another count") {
    data[1] = 9;
    REQUIRE_FALSE(decode_service_data(data).ok());
  }
  SECTION("reserved bytes") {
    data[55] = 1;
    auto e = decode_service_data(data);
    REQUIRE_FALSE(e.ok());
    CHECK(e.error().message.find("byte 55") != std::string::npos);
  }
  SECTION("ServiceData64[1] is not read (ibsim delivers whatever its buffer held there)") {
    for (std::size_t i = 56; i < 64; ++i) data[i] = 0xa5;
    auto again = decode_service_data(data);
    REQUIRE(again.ok());
    CHECK(*again == d);
  }
  SECTION("length") {
    REQUIRE_FALSE(decode_service_data(std::span<const std::uint8_t>(data).first(63)).ok());
  }
}

TEST_CASE("DriftMonitor: registers, reads the peer, raises and clears config_drift", "[drift]") {
  ManualScheduler s;
  FakeSa sa(s);
  Alarms sink;
  DriftConfig cfg;
  DriftMonitor a(cfg, s, sa, kA, {{"head02", kB}}, sink);
  DriftMonitor b(cfg, s, sa, kB, {{"head01", kA}}, sink);
  a.set_sa_lid(Lid{1});
  b.set_sa_lid(Lid{1});
  a.start();
  b.start();
  // Nothing is sent before our digests are known.
  s.run_for(seconds(10));
  CHECK(sa.sets_to.empty());
  CHECK(a.peers()[0].state == PeerDriftState::Unknown);
  a.set_own(compute_digests(inputs(conf("0xa1", 15, "1111"))));
  s.run_for(seconds(25));
  // b has no record yet: unknown, never drift.
  CHECK(a.peers()[0].state == PeerDriftState::Unknown);
  CHECK(a.peers()[0].detail.find("no smha record") != std::string::npos);
  CHECK(a.stats().absent >= 1);
  CHECK(sink.log.empty());
  b.set_own(compute_digests(inputs(conf("0xb2", 1, "2222"))));
  s.run_for(seconds(21));
  CHECK(a.peers()[0].state == PeerDriftState::Drift);
  CHECK(b.peers()[0].state == PeerDriftState::Drift);
  CHECK(a.alarm() == "head02 (0x00000000000000b2): partitions differ");
  REQUIRE(sink.log.size() == 2);
  CHECK(sink.log[0] == "raise: head02 (0x00000000000000b2): partitions differ");
  CHECK(sink.log[1] == "raise: head01 (0x00000000000000a1): partitions differ");
  // Fixed on b: both clear.
  b.set_own(compute_digests(inputs(conf("0xb2", 1, "1111"))));
  CHECK(b.peers()[0].state == PeerDriftState::Match);  // at once against a's last record
  s.run_for(seconds(21));
  CHECK(a.peers()[0].state == PeerDriftState::Match);
  CHECK(a.alarm().empty());
  REQUIRE(sink.log.size() == 4);
  CHECK(sink.log[2] == "clear");
  CHECK(sink.log[3] == "clear");
  // Registrations are bounded: one Set per refresh interval and head.
  CHECK(sa.sets_to.size() <= 2 + 2 * (25 + 21 + 21) / 20 + 2);
  // A clean stop deletes the record.
  b.stop();
  CHECK(sa.deletes == 1);
  CHECK(sa.records.count(mad::Gid{mad::kDefaultSubnetPrefix, kB}) == 0);
  a.stop();
}

TEST_CASE("DriftMonitor: a foreign record and bad ServiceData are rejected and counted", "[drift]") {
  ManualScheduler s;
  FakeSa sa(s);
  Alarms sink;
  DriftMonitor a(DriftConfig{}, s, sa, kA, {{"head02", kB}}, sink);
  a.set_sa_lid(Lid{1});
  a.set_own(compute_digests(inputs(conf("0xa1", 15, "1111"))));
  a.start();
  mad::ServiceRecord forged;
  forged.id = kSmhaServiceId;
  forged.name = kSmhaServiceName;
  forged.gid = mad::Gid{mad::kDefaultSubnetPrefix, Guid{0xee}};  // no configured head
  forged.data = encode_service_data(compute_digests(inputs(conf("0xee", 1, "9999"))));
  sa.forge = forged;
  s.run_for(seconds(5));
  CHECK(a.stats().rejected_foreign == 1);
  CHECK(a.peers()[0].state == PeerDriftState::Unknown);
  CHECK(a.peers()[0].detail.find("rejected a record for 0xfe80000000000000:0x00000000000000ee") != std::string::npos);
  CHECK(sink.log.empty());
  forged.gid.guid = kB;
  forged.data[0] = 7;  // layout version 7
  sa.forge = forged;
  s.run_for(seconds(20));
  CHECK(a.stats().rejected_data == 1);
  CHECK(a.peers()[0].state == PeerDriftState::Unknown);
  CHECK(a.peers()[0].detail.find("layout version 7") != std::string::npos);
  CHECK(sink.log.empty());
  a.stop();
}

TEST_CASE("DriftMonitor: a stop clears a raised config_drift, a master change registers at once", "[drift]") {
  ManualScheduler s;
  FakeSa sa(s);
  Alarms sink;
  DriftMonitor a(DriftConfig{}, s, sa, kA, {{"head02", kB}}, sink);
  DriftMonitor b(DriftConfig{}, s, sa, kB, {{"head01", kA}}, sink);
  for (auto* m : {&a, &b}) {
    m->set_sa_lid(Lid{1});
    m->start();
  }
  a.set_own(compute_digests(inputs(conf("0xa1", 15, "1111"))));
  b.set_own(compute_digests(inputs(conf("0xb2", 1, "2222"))));
  s.run_for(seconds(5));
  REQUIRE(a.alarm() == "head02 (0x00000000000000b2): partitions differ");
  const std::size_t sets = sa.sets_to.size();
  a.set_sa_lid(Lid{7});  // a new master: its SA has none of our records
  CHECK(sa.sets_to.size() == sets + 1);
  CHECK(sa.sets_to.back() == Lid{7});
  const std::size_t raised = sink.log.size();
  a.stop();
  REQUIRE(sink.log.size() == raised + 1);
  CHECK(sink.log.back() == "clear");
  CHECK(a.alarm().empty());
  b.stop();
}

TEST_CASE("DriftMonitor: the Get names the ServiceID, and a verdict unknown past its bound raises drift_unknown "
          "with the SA's reason",
          "[drift]") {
  ManualScheduler s;
  FakeSa sa(s);
  Alarms sink;
  DriftConfig cfg;
  cfg.unknown_alarm = seconds(120);
  DriftMonitor a(cfg, s, sa, kA, {{"head02", kB}}, sink);
  a.set_sa_lid(Lid{1});
  a.start();
  a.set_own(compute_digests(inputs(conf("0xa1", 15, "1111"))));
  // head02 never registers: unknown, and no alarm before the bound.
  s.run_for(seconds(100));
  CHECK(a.peers()[0].state == PeerDriftState::Unknown);
  CHECK(sink.unknown.empty());
  CHECK(sa.got_ids.size() >= 1);
  for (auto id : sa.got_ids) CHECK(id == kSmhaServiceId);
  s.run_for(seconds(41));
  REQUIRE(sink.unknown.size() == 1);
  CHECK(sink.unknown[0].find("raise: head02 (0x00000000000000b2) unknown for 1") == 0);
  CHECK(sink.unknown[0].find("no smha record at the SA") != std::string::npos);
  // Raised once, not at every read.
  s.run_for(seconds(100));
  CHECK(sink.unknown.size() == 1);
  // The peer registers: a verdict again, the alarm clears.
  DriftMonitor b(cfg, s, sa, kB, {{"head01", kA}}, sink);
  b.set_sa_lid(Lid{1});
  b.start();
  b.set_own(compute_digests(inputs(conf("0xb2", 1, "1111"))));
  s.run_for(seconds(45));
  CHECK(a.peers()[0].state == PeerDriftState::Match);
  REQUIRE(sink.unknown.size() >= 2);
  CHECK(sink.unknown[1] == "clear");
  a.stop();
  b.stop();
}
