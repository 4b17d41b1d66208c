// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// Fabric health (doc/health.md): link rates, assess_links over a census walk's
// PortInfo answers, and LinkHealth (names, since, the link_degraded alarm)
// against a scripted NodeDescription source.
#include <catch2/catch.hpp>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "smha/core/link_rate.hpp"
#include "smha/fabric/health.hpp"
#include "smha/fabric/port_errors.hpp"
#include "manual_scheduler.hpp"

using namespace smha;
using namespace smha::fabric;

using smha::test::ManualScheduler;

namespace {

constexpr Guid kSw1{0x5001};
constexpr Guid kSw2{0x5002};

// ibsim's defaults: 4X of 1X/4X/8X/12X/2X, SDR of SDR/DDR/QDR, LinkUp.
mad::LinkInfo link(std::uint8_t width_active = 2, std::uint8_t width_enabled = 2, std::uint8_t speed_active = 1,
                   std::uint8_t speed_enabled = 1) {
  return mad::LinkInfo{.width_enabled = width_enabled, .width_supported = 31, .width_active = width_active,
                       .speed_supported = 7, .speed_enabled = speed_enabled, .speed_active = speed_active,
                       .ext_supported = 0, .ext_enabled = 0, .ext_active = 0, .phys_state = 5};
}

// The lab's two-switch fabric as a survey finds it from Hca1: Switch1 (ports 1
// Hca1, 2 Hca3, 3 and 4 to Switch2), Switch2 (1 Hca2, 2 Hca4, 3 and 4 to
// Switch1). `ca` is every CA port's link (both ends), `narrow` Hca4's.
DiscoveryResult lab_walk(mad::LinkInfo ca = link(), mad::LinkInfo narrow = link()) {
  DiscoveryResult r;
  auto end = [&](Guid node, mad::NodeType t, std::uint8_t port, const mad::LinkInfo& l, DrPath path = {}) {
    r.link_ends.push_back(LinkEnd{node, t, path, port, mad::PortState::Active, l});
  };
  auto cable = [&](Guid a, std::uint8_t ap, Guid b, std::uint8_t bp, mad::NodeType bt, DrPath path) {
    r.cables.push_back(Cable{a, ap, b, bp, bt, path});
  };
  const Guid hca1{0x101}, hca2{0x102}, hca3{0x103}, hca4{0x104};
  end(hca1, mad::NodeType::Ca, 1, ca);
  cable(hca1, 1, kSw1, 1, mad::NodeType::Switch, DrPath{{1}});
  for (std::uint8_t p : {2, 3, 4}) end(kSw1, mad::NodeType::Switch, p, link(), DrPath{{1}});
  cable(kSw1, 2, hca3, 1, mad::NodeType::Ca, DrPath{{1, 2}});
  end(hca3, mad::NodeType::Ca, 1, ca, DrPath{{1, 2}});
  cable(kSw1, 3, kSw2, 3, mad::NodeType::Switch, DrPath{{1, 3}});
  cable(kSw1, 4, kSw2, 4, mad::NodeType::Switch, DrPath{{1, 4}});  // a revisit: parallel cable
  for (std::uint8_t p : {1, 2, 4}) end(kSw2, mad::NodeType::Switch, p, p == 2 ? narrow : link(), DrPath{{1, 3}});
  cable(kSw2, 1, hca2, 1, mad::NodeType::Ca, DrPath{{1, 3, 1}});
  end(hca2, mad::NodeType::Ca, 1, ca, DrPath{{1, 3, 1}});
  cable(kSw2, 2, hca4, 1, mad::NodeType::Ca, DrPath{{1, 3, 2}});
  end(hca4, mad::NodeType::Ca, 1, narrow, DrPath{{1, 3, 2}});
  cable(kSw2, 4, kSw1, 4, mad::NodeType::Switch, DrPath{{1, 3, 4}});  // the same cable, the other way
  return r;
}

struct Alarms : AlarmSink {
  AlarmKind kind = AlarmKind::LinkDegraded;
  std::vector<std::string> log;  // "raise: ...", "refresh: ...", "clear"
  void alarm(const RaiseAlarm& a, TimePoint) override {
    CHECK(a.kind == kind);
    log.push_back((a.refresh ? "refresh: " : "raise: ") + a.detail);
  }
  void clear(const ClearAlarm& a, TimePoint) override {
    CHECK(a.kind == kind);
    log.push_back("clear");
  }
};

// Answers NodeDescription reads from `names` after 1 ms (a missing node: a timeout).
struct Names : mad::MadTransport {
  ManualScheduler& s;
  std::map<std::vector<std::uint8_t>, std::string> names;  // by DR path
  int reads = 0;
  explicit Names(ManualScheduler& sch) : s(sch) {}
  void submit(mad::Request req, mad::ReplyCallback done) override {
    std::visit([&](const auto& q) { on(q, req.opts, std::move(done)); }, req.query);
  }
  template <class Q>
  void on(const Q&, const mad::RequestOptions&, mad::ReplyCallback) {}  // nothing else is asked: no answer
  void on(const mad::NodeDescriptionGet& q, const mad::RequestOptions&, mad::ReplyCallback done) {
    ++reads;
    const auto* path = std::get_if<DrPath>(&q.target);
    REQUIRE(path);
    auto it = names.find(path->hops);
    Result<mad::NodeDescriptionReply> r = it == names.end()
                                              ? Result<mad::NodeDescriptionReply>(make_error(mad::kErrTimeout, "no answer"))
                                              : Result<mad::NodeDescriptionReply>(mad::NodeDescriptionReply{it->second, milliseconds(1), 1});
    s.schedule_at(s.now() + milliseconds(1), [done, r] { done(r); });
  }
  // The PMAs: counters by (LID, port), answered after 1 ms; `silent` LIDs
  // never answer (a timeout after the request's deadline); `misport` LIDs
  // answer for the next port.
  std::map<std::pair<std::uint16_t, std::uint8_t>, mad::ErrorCounts> pma;
  std::set<std::uint16_t> silent, misport;
  std::vector<std::pair<std::uint16_t, std::uint8_t>> pma_reads;
  void on(const mad::PortCountersGet& q, const mad::RequestOptions& o, mad::ReplyCallback done) {
    const Lid lid = q.lid;
    const std::uint8_t port = q.port;
    pma_reads.emplace_back(lid.value, port);
    if (silent.count(lid.value)) {
      s.schedule_at(s.now() + o.timeout * (o.retries + 1), [done] { done(make_error(mad::kErrTimeout, "no answer")); });
      return;
    }
    mad::PortCounters pc;
    pc.port_select = misport.count(lid.value) ? static_cast<std::uint8_t>(port + 1) : port;
    pc.errors = pma[{lid.value, port}];
    s.schedule_at(s.now() + milliseconds(1), [done, pc] { done(mad::PortCountersReply{pc, milliseconds(1), 1}); });
  }
  // Forwarding tables: nothing programmed (LinearFDBTop 0).
  void on(const mad::LftTopGet&, const mad::RequestOptions&, mad::ReplyCallback done) {
    s.schedule_at(s.now() + milliseconds(1), [done] { done(mad::LftTopReply{0, milliseconds(1), 1}); });
  }
  void on(const mad::LftBlockGet&, const mad::RequestOptions&, mad::ReplyCallback) {
    FAIL("no LFT block to read when LinearFDBTop is 0");
  }
};

}  // namespace

TEST_CASE("link rates: names, Gb/s and the expectation syntax", "[health]") {
  CHECK(to_string(LinkRate{4, 3}) == "4X QDR");
  CHECK(to_string(LinkRate{1, 0}) == "1X ?");
  CHECK(gbps(LinkRate{4, 1}) == Approx(10));
  CHECK(gbps(LinkRate{4, 0}) == 0);
  CHECK(*parse_link_rate("4x ndr") == LinkRate{4, 7});
  CHECK(*parse_link_rate(" HDR ") == LinkRate{0, 6});
  CHECK(*parse_link_rate("12X") == LinkRate{12, 0});
  CHECK(*parse_link_rate("NDR 2X") == LinkRate{2, 7});
  for (const char* bad : {"5X", "4X 4X", "", "QDR HDR", "fast", "4X\tNDR extra"}) {
    INFO(bad);
    auto r = parse_link_rate(bad);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == Errc::Invalid);
  }
  CHECK(parse_link_rate("fast").error().message.find("'fast' is not a link width") != std::string::npos);
}

TEST_CASE("active and capable rates: widths, speeds, extended speeds only where both ends have them", "[health]") {
  CHECK(active_rate(link()) == LinkRate{4, 1});
  CHECK(active_rate(link(1)) == LinkRate{1, 1});
  CHECK(active_rate(link(16, 16, 4, 4)) == LinkRate{2, 3});
  CHECK(active_rate(link(0)) == LinkRate{0, 1});    // no width bit: unknown
  CHECK(active_rate(link(3)) == LinkRate{0, 1});    // two bits: not an Active value
  auto ndr = link();
  ndr.ext_supported = 0xf;
  ndr.ext_enabled = 0x1f;  // all supported
  ndr.ext_active = 4;      // HDR
  CHECK(active_rate(ndr) == LinkRate{4, 6});
  // An NDR-capable link running at HDR is below what both ends enable.
  DiscoveryResult r = lab_walk();
  for (auto& e : r.link_ends)
    if (e.node_guid == Guid{0x104} || (e.node_guid == kSw2 && e.port_num == 2)) e.link = ndr;
  auto a = assess_links(r, {});
  REQUIRE(a.degraded.size() == 1);
  CHECK(a.degraded[0].why == DegradedWhy::BelowEnds);
  CHECK(a.degraded[0].active == LinkRate{4, 6});
  CHECK(a.degraded[0].should == LinkRate{4, 7});
  CHECK(a.degraded[0].detail == "4X NDR enabled and supported at both ends");
  // Only one end has extended speeds: the base speeds decide (QDR here).
  for (auto& e : r.link_ends)
    if (e.node_guid == Guid{0x104}) e.link = link(2, 2, 4, 7), e.link.speed_enabled = 7;
  for (auto& e : r.link_ends)
    if (e.node_guid == kSw2 && e.port_num == 2) e.link.speed_enabled = 7, e.link.speed_active = 4, e.link.ext_active = 0;
  a = assess_links(r, {});
  CHECK(a.degraded.empty());
}

TEST_CASE("assess_links: the one 1X link among 4X ones is below its tier, named switch end first", "[health]") {
  // ibsim's `lid 0 1xSDR` on both ends: each end enables 1X only.
  auto a = assess_links(lab_walk(link(), link(1, 1)), {});
  CHECK(a.links == 6);  // 4 CA links, 2 inter-switch cables (each once, whichever way crossed)
  CHECK(a.by_kind[LinkKind::SwitchCa] == 4);
  CHECK(a.by_kind[LinkKind::SwitchSwitch] == 2);
  CHECK(a.unknown == 0);
  REQUIRE(a.degraded.size() == 1);
  const auto& d = a.degraded[0];
  CHECK(d.why == DegradedWhy::BelowTier);
  CHECK(d.a.node == kSw2);
  CHECK(d.a.port == 2);
  CHECK(d.a.type == mad::NodeType::Switch);
  CHECK(d.b.node == Guid{0x104});
  CHECK(d.b.port == 1);
  REQUIRE(d.b.path);
  CHECK(d.b.path->hops == std::vector<std::uint8_t>{1, 3, 2});
  CHECK(d.active == LinkRate{1, 1});
  CHECK(d.should == LinkRate{4, 1});
  CHECK(d.detail == "3 of 4 switch-ca links run at 4X");
  CHECK(d.fraction == Approx(0.25));
}

TEST_CASE("assess_links: below what both ends enable, an expectation, and what is not judged", "[health]") {
  SECTION("ends enable 4X, the link trained at 1X") {
    auto a = assess_links(lab_walk(link(), link(1, 2)), {});
    REQUIRE(a.degraded.size() == 1);
    CHECK(a.degraded[0].why == DegradedWhy::BelowEnds);
    CHECK(a.degraded[0].detail == "4X SDR enabled and supported at both ends");
  }
  SECTION("an expectation replaces the majority: every CA link below 4X QDR") {
    HealthExpectation e;
    e.switch_ca = LinkRate{4, 3};
    auto a = assess_links(lab_walk(), e);
    REQUIRE(a.degraded.size() == 4);
    for (const auto& d : a.degraded) {
      CHECK(d.why == DegradedWhy::BelowExpected);
      CHECK(d.should == LinkRate{4, 3});
      CHECK(d.detail == "smha.yaml expects switch-ca links at 4X QDR");
      CHECK(d.kind == LinkKind::SwitchCa);
    }
    // Width only: a 1X link is below it, the 4X SDR ones are not.
    e.switch_ca = LinkRate{4, 0};
    a = assess_links(lab_walk(link(), link(1, 1)), e);
    REQUIRE(a.degraded.size() == 1);
    CHECK(a.degraded[0].should == LinkRate{4, 1});
  }
  SECTION("fewer than three links of a kind, or no majority: no tier") {
    auto r = lab_walk();
    for (auto& e : r.link_ends)
      if (e.node_guid == kSw1 && e.port_num == 3) e.link = link(1, 1);
    for (auto& e : r.link_ends)
      if (e.node_guid == kSw2 && e.port_num == 3) e.link = link(1, 1);
    CHECK(assess_links(r, {}).degraded.empty());  // 1 of 2 switch-switch cables at 1X
  }
  SECTION("an Active field that does not decode is counted unknown, never degraded; a Down port is neither") {
    auto r = lab_walk(link(), link(0, 2));
    auto a = assess_links(r, {});
    CHECK(a.unknown == 1);
    CHECK(a.links == 5);
    CHECK(a.degraded.empty());
    for (auto& e : r.link_ends)
      if (e.node_guid == Guid{0x104} || (e.node_guid == kSw2 && e.port_num == 2)) e.state = mad::PortState::Down;
    a = assess_links(r, {});
    CHECK(a.unknown == 0);
    CHECK(a.links == 5);
  }
  SECTION("a link running faster than both ends enable contradicts them: not judged") {
    auto r = lab_walk(link(), link(2, 2, 4, 1));  // QDR active, SDR enabled
    auto a = assess_links(r, {});
    CHECK(a.unknown == 1);
    CHECK(a.degraded.empty());
  }
  SECTION("a narrower link that is faster than its tier should keep its speed: 1X QDR among 4X SDR") {
    auto r = lab_walk(link(), link(1, 1, 4, 7));
    for (auto& e : r.link_ends)
      if (e.node_guid == Guid{0x104} || (e.node_guid == kSw2 && e.port_num == 2)) e.link.speed_enabled = 7;
    auto a = assess_links(r, {});
    REQUIRE(a.degraded.size() == 1);
    CHECK(a.degraded[0].active == LinkRate{1, 3});
    CHECK(a.degraded[0].should == LinkRate{4, 3});
    CHECK(a.degraded[0].fraction == Approx(0.25));
  }
  SECTION("absurd masks (every bit) are not a rate") {
    auto r = lab_walk(link(), link(0xff, 0xff, 0xf, 0xf));
    auto a = assess_links(r, {});
    CHECK(a.unknown == 1);
    CHECK(a.degraded.empty());
  }
}

TEST_CASE("LinkHealth names the ends, keeps since when, raises and clears link_degraded", "[health]") {
  ManualScheduler s;
  Names mad(s);
  mad.names[{1, 3}] = "Switch2";
  mad.names[{1, 3, 2}] = "head04 \x1b[31m";  // a node's claim: shown escaped
  Alarms alarms;
  HealthConfig cfg;
  LinkHealth h(cfg, s, mad, alarms);
  h.on_walk(lab_walk());
  s.run_for(seconds(1));
  CHECK(h.snapshot().assessed);
  CHECK(h.snapshot().degraded_total == 0);
  CHECK(alarms.log.empty());
  CHECK(mad.reads == 0);

  s.run_for(seconds(60));
  const TimePoint first = s.now();
  h.on_walk(lab_walk(link(), link(1, 1)));
  CHECK_FALSE(h.snapshot().degraded_total);  // published once both names are read
  s.run_for(seconds(1));
  CHECK(mad.reads == 2);
  REQUIRE(h.snapshot().degraded.size() == 1);
  const auto& e = h.snapshot().degraded[0];
  CHECK(e.link.a.description == "Switch2");
  CHECK(e.link.b.description_known);
  CHECK(e.since == first);
  REQUIRE(alarms.log.size() == 1);
  CHECK(alarms.log[0] ==
        "raise: 1 degraded link; worst: \"Switch2\" 0x0000000000005002 port 2 <-> \"head04 \\x1b[31m\" "
        "0x0000000000000104 port 1 runs at 1X SDR, should run at 4X SDR (below_tier: 3 of 4 switch-ca links run at 4X)");

  // The next walk: the same link, names known (no read), since kept, no new alarm.
  s.run_for(seconds(60));
  h.on_walk(lab_walk(link(), link(1, 1)));
  s.run_for(seconds(1));
  CHECK(mad.reads == 2);
  REQUIRE(h.snapshot().degraded.size() == 1);
  CHECK(h.snapshot().degraded[0].since == first);
  CHECK(h.snapshot().walks == 3);
  CHECK(alarms.log.size() == 1);

  // Fixed: cleared.
  h.on_walk(lab_walk());
  s.run_for(seconds(1));
  REQUIRE(alarms.log.size() == 2);
  CHECK(alarms.log[1] == "clear");
  CHECK(h.snapshot().degraded.empty());
}

TEST_CASE("LinkHealth: a threshold, the alarm off, bounded names, a newer walk wins", "[health]") {
  ManualScheduler s;
  Names mad(s);  // names nothing: every read times out
  Alarms alarms;
  HealthConfig cfg;
  cfg.alarm_min_links = 2;
  cfg.max_descriptions = 1;
  LinkHealth h(cfg, s, mad, alarms);
  h.on_walk(lab_walk(link(), link(1, 1)));
  // A second walk before the first one's names are read replaces it.
  h.on_walk(lab_walk(link(), link(1, 1)));
  s.run_for(seconds(1));
  CHECK(mad.reads == 2);  // one per walk (max_descriptions 1)
  CHECK(h.snapshot().walks == 1);
  REQUIRE(h.snapshot().degraded.size() == 1);
  CHECK_FALSE(h.snapshot().degraded[0].link.a.description_known);
  CHECK(alarms.log.empty());  // 1 degraded, threshold 2

  cfg.alarm = false;
  cfg.alarm_min_links = 1;
  LinkHealth off(cfg, s, mad, alarms);
  off.on_walk(lab_walk(link(), link(1, 1)));
  s.run_for(seconds(1));
  CHECK(off.snapshot().degraded_total == 1);
  CHECK(alarms.log.empty());

  // Bounded: every CA link below an expectation, two kept, all counted.
  cfg.max_links = 2;
  cfg.expect.switch_ca = LinkRate{4, 3};
  LinkHealth capped(cfg, s, mad, alarms);
  capped.on_walk(lab_walk());
  s.run_for(seconds(1));
  CHECK(capped.snapshot().degraded_total == 4);
  CHECK(capped.snapshot().degraded.size() == 2);
  CHECK(capped.snapshot().degraded_by_kind.at(LinkKind::SwitchCa) == 4);  // every one counted, not only those kept

  cfg.enabled = false;
  LinkHealth disabled(cfg, s, mad, alarms);
  disabled.on_walk(lab_walk(link(), link(1, 1)));
  s.run_for(seconds(1));
  CHECK_FALSE(disabled.snapshot().assessed);
}

// ---- error counters (PortErrors)

namespace {

// lab_walk() with the PMAs' LIDs a survey reads: the switches' port 0 (10,
// 11) and each CA port's own (1..4).
DiscoveryResult lab_walk_with_lids() {
  DiscoveryResult r = lab_walk();
  auto probed = [&](Guid node, mad::NodeType t, std::uint8_t port, std::uint16_t lid) {
    SmPort p;
    p.node_guid = node;
    p.node_type = t;
    p.port_num = port;
    p.lid = Lid{lid};
    r.probed.push_back(p);
  };
  probed(kSw1, mad::NodeType::Switch, 0, 10);
  probed(kSw2, mad::NodeType::Switch, 0, 11);
  for (std::uint16_t i = 1; i <= 4; ++i) probed(Guid{0x100u + i}, mad::NodeType::Ca, 1, i);
  return r;
}

ErrorsConfig errors_config() {
  ErrorsConfig cfg;
  cfg.reads_per_second = 10;  // about a pass over the lab's 12 active ports a second
  cfg.window = seconds(600);
  return cfg;
}

}  // namespace

TEST_CASE("PortErrors reads at its rate, only while told to, and a rise is one between two reads", "[health]") {
  ManualScheduler s;
  Names mad(s);
  mad.names[{1, 3, 2}] = "Hca4";
  Alarms alarms;
  alarms.kind = AlarmKind::LinkErrors;
  PortErrors e(errors_config(), s, mad, alarms);
  e.on_walk(lab_walk_with_lids());
  // The 10 Active ports the walk read, and the two it entered the switches
  // through (Switch1 port 1 from Hca1, Switch2 port 3 from Switch1).
  CHECK(e.snapshot().ports == 12);
  CHECK(e.snapshot().state == "off");
  // Old errors at Hca4's port before the first read: shown, not rising.
  mad.pma[{4, 1}][0] = 7;
  s.run_for(seconds(5));
  CHECK(mad.pma_reads.empty());  // not reading: no MAD

  e.set_reading(true);
  s.run_for(seconds(10) + milliseconds(50));
  // 10 MADs a second: one NodeDescription (the port with errors' node),
  // the rest PortCounters, the switches' ports at the switch's LID.
  CHECK(mad.reads == 1);
  CHECK(mad.pma_reads.size() == 99);
  std::set<std::pair<std::uint16_t, std::uint8_t>> asked(mad.pma_reads.begin(), mad.pma_reads.end());
  CHECK(asked == std::set<std::pair<std::uint16_t, std::uint8_t>>{
                     {1, 1}, {2, 1}, {3, 1}, {4, 1}, {10, 1}, {10, 2}, {10, 3}, {10, 4}, {11, 1}, {11, 2}, {11, 3},
                     {11, 4}});
  auto snap = e.snapshot();
  CHECK(snap.state == "reading");
  CHECK(snap.read == 12);
  CHECK(snap.with_errors == 1);
  CHECK(snap.rising == 0);
  CHECK(snap.passes >= 8);
  REQUIRE(snap.listed.size() == 1);
  CHECK(snap.listed[0].where.node == Guid{0x104});
  CHECK(mad::at(snap.listed[0].value, mad::ErrorCounter::SymbolErrors) == 7);
  CHECK_FALSE(snap.listed[0].since);
  CHECK(alarms.log.empty());

  // Symbol errors rise by 25 at Switch2 port 2: over the threshold (10).
  const TimePoint rose = s.now();
  mad.pma[{11, 2}][0] = 25;
  s.run_for(seconds(2));
  snap = e.snapshot();
  CHECK(snap.rising == 1);
  CHECK(snap.over == 1);
  CHECK(snap.rising_by_counter.at(mad::ErrorCounter::SymbolErrors) == 1);
  REQUIRE(snap.listed.size() == 2);
  const ErrorPort& w = snap.listed[0];
  CHECK(w.where.node == kSw2);
  CHECK(w.where.port == 2);
  CHECK(w.lid == Lid{11});
  CHECK(w.over);
  CHECK(mad::at(w.rise, mad::ErrorCounter::SymbolErrors) == 25);
  REQUIRE(w.since);
  CHECK(*w.since - rose <= seconds(1));
  CHECK(w.per_hour == Approx(25 * 6.0));  // 25 within a 10-minute window
  REQUIRE(alarms.log.size() == 1);
  CHECK(alarms.log[0].rfind("raise: 1 port with error counters rising; worst: ", 0) == 0);
  CHECK(alarms.log[0].find(to_string(kSw2) + " port 2: SymbolErrorCounter +25 within 10m") != std::string::npos);

  // Hca4's old errors grow by 2: rising, under its threshold, and named.
  mad.pma[{4, 1}][0] = 9;
  s.run_for(seconds(2));
  snap = e.snapshot();
  CHECK(snap.rising == 2);
  CHECK(snap.over == 1);
  REQUIRE(snap.listed.size() == 2);
  CHECK(snap.listed[1].where.node == Guid{0x104});
  CHECK(snap.listed[1].where.description_known);
  CHECK(snap.listed[1].where.description == "Hca4");
  CHECK_FALSE(snap.listed[1].over);
  CHECK(snap.description_mads >= 1);

  // The window passes without a further rise: nothing rising, alarm cleared.
  s.run_for(seconds(601));
  snap = e.snapshot();
  CHECK(snap.rising == 0);
  CHECK(snap.over == 0);
  CHECK(snap.with_errors == 2);
  REQUIRE(alarms.log.size() == 2);
  CHECK(alarms.log[1] == "clear");

  // Not master any more: no MAD, the picture stays, state says why.
  e.set_reading(false, "standby");
  const auto sent = mad.pma_reads.size();
  s.run_for(seconds(5));
  CHECK(mad.pma_reads.size() == sent);
  CHECK(e.snapshot().state == "standby");
  CHECK(e.snapshot().with_errors == 2);
}

TEST_CASE("PortErrors: cleared counters, saturation, wrong ports, silence and a flapping PMA are never a storm",
          "[health]") {
  ManualScheduler s;
  Names mad(s);
  Alarms alarms;
  alarms.kind = AlarmKind::LinkErrors;
  PortErrors e(errors_config(), s, mad, alarms);
  e.on_walk(lab_walk_with_lids());
  e.set_reading(true);
  mad.pma[{1, 1}][1] = 4;  // LinkErrorRecovery at Hca1
  s.run_for(seconds(2));

  // Cleared by someone (ibqueryerrors -k), then 2 more: a rise of 2, a reset.
  mad.pma[{1, 1}][1] = 2;
  s.run_for(seconds(2));
  auto snap = e.snapshot();
  CHECK(snap.resets == 1);
  REQUIRE_FALSE(snap.listed.empty());
  CHECK(snap.listed[0].where.node == Guid{0x101});
  CHECK(mad::at(snap.listed[0].rise, mad::ErrorCounter::LinkErrorRecovery) == 2);
  CHECK(snap.listed[0].resets == 1);
  CHECK(snap.over == 0);  // threshold 3

  // Back and forth more than kMaxResets times: unknown, never over.
  for (std::uint32_t v : {50u, 1u, 60u, 2u, 70u, 3u}) {
    mad.pma[{1, 1}][1] = v;
    s.run_for(seconds(2));  // a pass or more: every value read
  }
  snap = e.snapshot();
  REQUIRE_FALSE(snap.listed.empty());
  const auto flapping = std::find_if(snap.listed.begin(), snap.listed.end(),
                                     [](const ErrorPort& p) { return p.where.node == Guid{0x101}; });
  REQUIRE(flapping != snap.listed.end());
  CHECK(flapping->unknown);
  CHECK(flapping->why_unknown.find("went down") != std::string::npos);
  CHECK_FALSE(flapping->over);
  CHECK(snap.over == 0);
  // It was over (+49 recoveries) on the way: raised once, then cleared as unknown.
  REQUIRE_FALSE(alarms.log.empty());
  CHECK(alarms.log.back() == "clear");

  // Saturated: a 16-bit counter at 0xffff is flagged and rises no further.
  mad.pma[{2, 1}][0] = 0xffff;
  s.run_for(seconds(2));
  snap = e.snapshot();
  auto sat = std::find_if(snap.listed.begin(), snap.listed.end(),
                          [](const ErrorPort& p) { return p.where.node == Guid{0x102}; });
  REQUIRE(sat != snap.listed.end());
  CHECK(sat->saturated[0]);
  const auto rise = mad::at(sat->rise, mad::ErrorCounter::SymbolErrors);
  s.run_for(seconds(3));
  snap = e.snapshot();
  sat = std::find_if(snap.listed.begin(), snap.listed.end(), [](const ErrorPort& p) { return p.where.node == Guid{0x102}; });
  REQUIRE(sat != snap.listed.end());
  CHECK(mad::at(sat->rise, mad::ErrorCounter::SymbolErrors) == rise);

  // An answer for another port, and a PMA that went silent: unknown, counted.
  mad.misport.insert(3);
  mad.silent.insert(10);
  const auto raised = alarms.log.size();
  s.run_for(seconds(15));  // a silent PMA holds the next read back for its deadline (2 x 200 ms)
  snap = e.snapshot();
  CHECK(snap.wrong_port >= 4);
  CHECK(snap.failures >= 16);
  CHECK(snap.unknown >= 4);  // Hca3, Switch1's three ports (and the flapping one)
  for (const auto& p : snap.listed)
    if (p.where.node == kSw1 || p.where.node == Guid{0x103}) {
      CHECK(p.unknown);
      CHECK_FALSE(p.over);
    }
  CHECK(alarms.log.size() == raised);

  // A walk without Hca3's port forgets it.
  auto walk = lab_walk_with_lids();
  std::erase_if(walk.link_ends, [](const LinkEnd& l) { return l.node_guid == Guid{0x103}; });
  e.on_walk(walk);
  CHECK(e.snapshot().ports == 11);
}

TEST_CASE("PortErrors: bounds on ports kept and listed, the alarm's threshold, off", "[health]") {
  ManualScheduler s;
  Names mad(s);
  Alarms alarms;
  alarms.kind = AlarmKind::LinkErrors;
  ErrorsConfig cfg = errors_config();
  cfg.max_tracked = 4;
  cfg.max_ports = 2;
  cfg.alarm_min_ports = 3;
  PortErrors e(cfg, s, mad, alarms);
  e.on_walk(lab_walk_with_lids());
  CHECK(e.snapshot().ports == 4);
  e.set_reading(true);
  s.run_for(seconds(2));
  CHECK(mad.pma.size() == 4);             // the four kept: Hca1's port, Switch1's three
  for (auto& [key, c] : mad.pma) c[2] = 5;  // LinkDowned +5 on every port read
  s.run_for(seconds(2));
  auto snap = e.snapshot();
  CHECK(snap.over == 4);
  CHECK(snap.listed.size() == 2);
  // Raised at the third port over, its detail refreshed at the fourth.
  REQUIRE(alarms.log.size() == 2);
  CHECK(alarms.log[0].rfind("raise: 3 ports with error counters rising", 0) == 0);
  CHECK(alarms.log[1].rfind("refresh: 4 ports with error counters rising", 0) == 0);
  e.stop();
  REQUIRE(alarms.log.size() == 3);
  CHECK(alarms.log[2] == "clear");

  cfg.alarm_min_ports = 5;
  PortErrors quiet(cfg, s, mad, alarms);
  quiet.on_walk(lab_walk_with_lids());
  quiet.set_reading(true);
  s.run_for(seconds(2));
  for (auto& [key, c] : mad.pma) c[2] += 5;
  s.run_for(seconds(2));
  CHECK(quiet.snapshot().over == 4);
  CHECK(alarms.log.size() == 3);  // 4 of 5: not raised

  cfg.reads_per_second = 0;
  PortErrors off(cfg, s, mad, alarms);
  off.on_walk(lab_walk_with_lids());
  off.set_reading(true);
  const auto sent = mad.pma_reads.size();
  quiet.stop();
  s.run_for(seconds(2));
  CHECK(mad.pma_reads.size() == sent);
  CHECK(off.snapshot().state == "off");
}
