// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// EventJournal: the format round-trips, events survive a "restart" (a new
// journal and sink on the same file), the file stays within its bound, and bad
// lines are skipped.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "smha/core/text.hpp"
#include "smha/os/posix_file_system.hpp"
#include "smha/head/event_journal.hpp"
#include "smha/head/takeover_report_json.hpp"
#include "named_events.hpp"
#include "temp_dir.hpp"

using namespace smha;
using namespace smha::head;
using smha::test::TempDir;

namespace {

os::PosixFileSystem posix_fs;

std::size_t count_lines(const std::string& path) {
  std::ifstream in(path);
  std::size_t n = 0;
  for (std::string l; std::getline(in, l);) ++n;
  return n;
}

}  // namespace

TEST_CASE("event lines round-trip, with UTC millisecond times", "[head][events]") {
  EventRecord e;
  e.seq = 42;
  e.wall = std::chrono::system_clock::from_time_t(1796221800) + std::chrono::milliseconds(123);
  e.kind = "transition";
  e.reason = "STANDBY->MASTER";
  e.evidence = "takeover_done: \"quoted\"\nnewline";
  const std::string line = encode_event_line(e);
  CHECK(line.find('\n') == std::string::npos);
  CHECK(format_utc(e.wall) == "2026-12-02T14:30:00.123Z");
  auto back = decode_event_line(line);
  REQUIRE(back);
  CHECK(back->seq == 42);
  CHECK(back->wall == e.wall);
  CHECK(back->kind == e.kind);
  CHECK(back->reason == e.reason);
  CHECK(back->evidence == e.evidence);
  // An older smhad's line (no typed states): typed by its kind, states unknown.
  CHECK(back->type == EventType::Transition);
  CHECK_FALSE(back->from);
  CHECK_FALSE(back->to);
  e.from = SmState::Standby;
  e.to = SmState::Master;
  CHECK_THAT(encode_event_line(e), Catch::Contains("\"from\":\"STANDBY\"") && Catch::Contains("\"to\":\"MASTER\""));
  back = decode_event_line(encode_event_line(e));
  REQUIRE(back);
  CHECK(back->from == SmState::Standby);
  CHECK(back->to == SmState::Master);
  EventRecord preempt;
  preempt.seq = 43;
  preempt.kind = "handover_started";
  preempt.preempt = true;
  back = decode_event_line(encode_event_line(preempt));
  REQUIRE(back);
  CHECK(back->type == EventType::Engine);
  CHECK(back->engine_kind == sm::EventKind::HandoverStarted);
  CHECK(back->preempt);
  back = decode_event_line(R"({"seq":7,"time":"2026-12-02T14:30:00.123Z","kind":"alarm","reason":"two_masters","evidence":"x"})");
  REQUIRE(back);
  CHECK(back->type == EventType::Alarm);
  CHECK(back->alarm == AlarmKind::TwoMasters);
  CHECK_FALSE(decode_event_line("{\"seq\":1,\"time\":\"yesterday\",\"kind\":\"a\",\"reason\":\"\",\"evidence\":\"\"}"));
  CHECK_FALSE(decode_event_line("{\"seq\":1,\"time\":\"2026-12-02T14:30:00.1"));  // cut by a crash
  CHECK_FALSE(parse_utc("2026-13-02T14:30:00.123Z"));
}

TEST_CASE("engine events name their SMs with head name, GUID and NodeDescription, in the journal, "
          "replies and smctl events", "[head][events]") {
  LogEventSink sink;
  const Guid peer = test::kNamedPeer;
  test::record_named_events(sink);
  const auto& ev = sink.events();
  REQUIRE(ev.size() == 3);
  REQUIRE(ev[0].nodes.size() == 2);
  CHECK(ev[0].nodes[0].name == "head01");
  CHECK(ev[0].nodes[0].description == "head01 HCA-1");
  CHECK(ev[0].nodes[1].guid == peer);
  CHECK(ev[0].nodes[1].description == "head02 \x01HCA-1");
  REQUIRE(ev[1].nodes.size() == 2);
  CHECK(ev[1].nodes[1].name.empty());
  CHECK(ev[2].nodes.empty());

  // The journal keeps them (raw) and an older line without them still loads.
  auto back = decode_event_line(encode_event_line(ev[0]));
  REQUIRE(back);
  REQUIRE(back->nodes.size() == 2);
  CHECK(back->nodes[1].name == "head02");
  CHECK(back->nodes[1].guid == peer);
  CHECK(back->nodes[1].description == "head02 \x01HCA-1");
  // Malformed entries are left out, the event kept; the count is bounded.
  std::string line = "{\"seq\":3,\"time\":\"2026-12-02T14:30:00.123Z\",\"kind\":\"a\",\"reason\":\"\","
                     "\"evidence\":\"\",\"nodes\":[1,{\"guid\":\"zz\"},{\"guid\":\"0x5\",\"name\":7}";
  for (int i = 0; i < 20; ++i) line += ",{\"guid\":\"0x6\"}";
  line += "]}";
  back = decode_event_line(line);
  REQUIRE(back);
  REQUIRE(back->nodes.size() == kMaxEventNodes);
  CHECK(back->nodes[0].guid == Guid{5});
  CHECK(back->nodes[0].name.empty());
  CHECK(decode_event_line("{\"seq\":4,\"time\":\"2026-12-02T14:30:00.123Z\",\"kind\":\"a\",\"reason\":\"\","
                          "\"evidence\":\"\",\"nodes\":\"x\"}"));

}

TEST_CASE("long fields are cut so a line stays bounded", "[head][events]") {
  EventRecord e;
  e.seq = 1;
  e.kind = "error";
  e.reason = std::string(10 * kMaxFieldBytes, 'r');
  e.evidence = std::string(10 * kMaxFieldBytes, 'e');
  const std::string line = encode_event_line(e);
  CHECK(line.size() < 2 * kMaxFieldBytes + 200);
  auto back = decode_event_line(line);
  REQUIRE(back);
  CHECK(back->reason.size() == kMaxFieldBytes + 3);
}

TEST_CASE("events survive a restart: the new sink continues the sequence", "[head][events]") {
  TempDir dir;
  const std::string path = dir.sub("events.jsonl");
  {
    EventJournal journal(posix_fs, path);
    REQUIRE(journal.load().ok());
    LogEventSink sink;
    sink.add_listener([&](const EventRecord& e) { REQUIRE(journal.append(e).ok()); });
    sink.note("HOLD", "frozen", "uid 0");
    sink.event(sm::RecordEvent{sm::EventKind::TakeoverStarted, "master lost", "3 rounds"}, TimePoint{});
    // The agent hands the cause from the same step as the evidence.
    sm::RecordEvent changed{sm::EventKind::StateChanged, "STANDBY->MASTER", "takeover_started: master lost"};
    changed.from = SmState::Standby;
    changed.to = SmState::Master;
    sink.event(changed, TimePoint{});
  }
  EventJournal journal(posix_fs, path);
  auto loaded = journal.load();
  REQUIRE(loaded.ok());
  CHECK(loaded.value().skipped == 0);
  REQUIRE(loaded.value().events.size() == 3);
  // The typed fields come back with the text.
  const auto& ev = loaded.value().events;
  CHECK(ev[0].type == EventType::Note);
  CHECK(ev[1].type == EventType::Engine);
  CHECK(ev[1].engine_kind == sm::EventKind::TakeoverStarted);
  CHECK(ev[2].type == EventType::Transition);
  CHECK(ev[2].from == SmState::Standby);
  CHECK(ev[2].to == SmState::Master);
  LogEventSink sink;
  sink.restore(loaded.value().events);
  REQUIRE(sink.last_transition());
  CHECK(sink.last_transition()->reason == "STANDBY->MASTER");
  CHECK(sink.last_transition()->evidence == "takeover_started: master lost");
  sink.note("RELEASE", "resumed");
  REQUIRE(sink.events().size() == 4);
  CHECK(sink.events().front().kind == "HOLD");
  CHECK(sink.events().back().seq == 4);
}

namespace {

fabric::TakeoverReport sample_report() {
  fabric::TakeoverReport r;
  r.previous_master = Guid{0x100001};
  r.cause = "master lost: 3 rounds unanswered";
  r.detection = milliseconds(101);
  r.to_master = microseconds(2500);
  r.discovering_to_master = microseconds(4300);
  r.master_to_subnet_up = microseconds(7500);
  r.routing_engine = "minhop";
  r.routing_failures = {"ftree: cannot build lid matrices"};
  r.routing_fallback = true;
  r.ports_compared = 6;
  r.lids_changed = 1;
  r.lid_changed_ports = {Guid{0x100009}};
  r.ports_sampled = 6;
  r.ports_on_new_master = 5;
  r.ports_elsewhere = {Guid{0x100009}};
  r.master_lid = Lid{4};
  r.lft_entries_compared = 12;
  r.lft_entries_changed = 2;
  r.lft_changed_switches = {Guid{0x200001}};
  r.sa_after_master = microseconds(30500);
  r.sa_outage = microseconds(131500);
  fabric::SaCopyInfo copy;
  copy.generation = 1765090000123;
  copy.sender = "head01";
  copy.age_s = 12.5;
  copy.groups = 4;
  copy.members = 8;
  copy.services = 2;
  copy.informs = 4;
  r.sa_copy = copy;
  r.groups_checked = 4;
  r.groups_kept = 3;
  r.groups_lost = {"0xff12601bffff0000:0x00000001ff000002: not on the new master (was MLID 0xc002)"};
  return r;
}

}  // namespace

TEST_CASE("a takeover report survives a restart as status's last_takeover", "[head][events][report]") {
  TempDir dir;
  const std::string path = dir.sub("events.jsonl");
  const auto report = sample_report();
  {
    EventJournal journal(posix_fs, path);
    REQUIRE(journal.load().ok());
    LogEventSink sink;
    sink.add_listener([&](const EventRecord& e) { REQUIRE(journal.append(e).ok()); });
    sink.takeover_report(report, TimePoint{});
    REQUIRE(sink.last_takeover());
    CHECK(sink.last_takeover()->reason == fabric::summary(report));
    sink.note("HOLD", "frozen", "uid 0");
  }
  EventJournal journal(posix_fs, path);
  auto loaded = journal.load();
  REQUIRE(loaded.ok());
  REQUIRE(loaded.value().events.size() == 2);
  const auto& ev = loaded.value().events[0];
  CHECK(ev.kind == "takeover_report");
  CHECK(ev.type == EventType::TakeoverReport);
  REQUIRE(ev.report);
  CHECK(*ev.report == report);  // durations in whole 0.1 ms survive exactly
  LogEventSink sink;
  sink.restore(loaded.value().events);
  REQUIRE(sink.last_takeover());
  CHECK(sink.last_takeover()->seq == 1);
  REQUIRE(sink.last_takeover()->report);
  CHECK(*sink.last_takeover()->report == report);
}

TEST_CASE("a journal's takeover report that does not parse is left out, the event kept", "[head][events][report]") {
  const auto good = takeover_report_json(sample_report());
  REQUIRE(takeover_report_from_json(good));
  CHECK(*takeover_report_from_json(good) == sample_report());
  auto bad = [&](const char* ptr, nlohmann::json v) {
    auto j = good;
    j[nlohmann::json::json_pointer(ptr)] = std::move(v);
    return takeover_report_from_json(j);
  };
  CHECK_FALSE(bad("/kind", "coup"));
  CHECK_FALSE(bad("/detection_ms", -1));
  CHECK_FALSE(bad("/detection_ms", 1e12));
  CHECK_FALSE(bad("/detection_ms", "fast"));
  CHECK_FALSE(bad("/previous_master", "0xnotaguid"));
  CHECK_FALSE(bad("/routing", 7));
  CHECK_FALSE(bad("/routing/failures", nlohmann::json::array({1})));
  CHECK_FALSE(bad("/lids/changed", -3));
  CHECK_FALSE(bad("/lids/changed_ports", nlohmann::json::array({"x"})));
  CHECK_FALSE(bad("/master_sm_lid/master_lid", 70000));
  CHECK_FALSE(takeover_report_from_json(nlohmann::json::array()));
  // Oversized lists and texts are cut to what a report keeps.
  auto big = good;
  big["routing"]["failures"] = nlohmann::json::array();
  for (int i = 0; i < 1000; ++i) big["routing"]["failures"].push_back(std::string(10000, 'x'));
  auto cut = takeover_report_from_json(big);
  REQUIRE(cut);
  CHECK(cut->routing_failures.size() == fabric::kReportRoutingFailures);
  CHECK(cut->routing_failures[0].size() == 160);
  // In a journal line: the event loads without its report.
  std::string line = R"({"seq":3,"time":"2026-12-04T20:11:19.412Z","kind":"takeover_report","reason":"r",)"
                     R"("evidence":"takeover","report":{"kind":"takeover","detection_ms":"x"}})";
  auto e = decode_event_line(line);
  REQUIRE(e);
  CHECK(e->type == EventType::TakeoverReport);
  CHECK_FALSE(e->report);
}

TEST_CASE("the journal never holds more than 2 x keep lines and keeps the newest", "[head][events]") {
  TempDir dir;
  const std::string path = dir.sub("events.jsonl");
  constexpr std::size_t kKeep = 10;
  EventJournal journal(posix_fs, path, kKeep);
  REQUIRE(journal.load().ok());
  std::size_t max_lines = 0;
  for (std::uint64_t i = 1; i <= 57; ++i) {
    EventRecord e;
    e.seq = i;
    e.kind = "note";
    e.reason = "event " + std::to_string(i);
    REQUIRE(journal.append(e).ok());
    max_lines = std::max(max_lines, count_lines(path));
  }
  CHECK(max_lines <= 2 * kKeep);
  CHECK(max_lines >= kKeep);  // it did grow past kKeep before compacting
  EventJournal again(posix_fs, path, kKeep);
  auto loaded = again.load();
  REQUIRE(loaded.ok());
  REQUIRE(loaded.value().events.size() == kKeep);
  CHECK(loaded.value().events.front().seq == 48);
  CHECK(loaded.value().events.back().seq == 57);
  // No temporary file is left behind by the atomic rewrites.
  std::size_t files = 0;
  for ([[maybe_unused]] const auto& f : std::filesystem::directory_iterator(dir.path())) ++files;
  CHECK(files == 1);
}

TEST_CASE("unparsable and out-of-order lines are skipped and counted", "[head][events]") {
  TempDir dir;
  const std::string path = dir.sub("events.jsonl");
  EventRecord a;
  a.seq = 5;
  a.kind = "x";
  EventRecord b = a;
  b.seq = 3;  // goes back: not trusted
  EventRecord c = a;
  c.seq = 9;
  std::ofstream(path) << encode_event_line(a) << "\nnot json\n" << encode_event_line(b) << "\n"
                      << encode_event_line(c) << "\n{\"seq\":10,\"ti";
  EventJournal journal(posix_fs, path);
  auto loaded = journal.load();
  REQUIRE(loaded.ok());
  CHECK(loaded.value().skipped == 3);
  REQUIRE(loaded.value().events.size() == 2);
  CHECK(loaded.value().events[1].seq == 9);
  // The next event goes on a line of its own, not glued to the cut one.
  EventRecord d = a;
  d.seq = 10;
  REQUIRE(journal.append(d).ok());
  EventJournal reread(posix_fs, path);
  auto again = reread.load();
  REQUIRE(again.ok());
  CHECK(again.value().skipped == 3);
  REQUIRE(again.value().events.size() == 3);
  CHECK(again.value().events.back().seq == 10);
  // A missing file is an empty journal.
  EventJournal none(posix_fs, dir.sub("absent.jsonl"));
  auto empty = none.load();
  REQUIRE(empty.ok());
  CHECK(empty.value().events.empty());
}

TEST_CASE("a seq that would wrap is a bad line, and the events after it load", "[head][events]") {
  TempDir dir;
  const std::string path = dir.sub("events.jsonl");
  EventRecord top;
  top.seq = std::numeric_limits<std::uint64_t>::max();
  top.kind = "x";
  EventRecord next = top;
  next.seq = 7;
  std::ofstream(path) << encode_event_line(top) << "\n" << encode_event_line(next) << "\n";
  CHECK_FALSE(decode_event_line(encode_event_line(top)));
  top.seq = kMaxEventSeq;
  CHECK(decode_event_line(encode_event_line(top)));
  EventJournal journal(posix_fs, path);
  auto loaded = journal.load();
  REQUIRE(loaded.ok());
  CHECK(loaded.value().skipped == 1);
  REQUIRE(loaded.value().events.size() == 1);
  CHECK(loaded.value().events[0].seq == 7);
}

TEST_CASE("after a write cut by a full disk the next event starts on a fresh line", "[head][events]") {
  TempDir dir;
  const std::string path = dir.sub("events.jsonl");
  EventJournal journal(posix_fs, path);
  REQUIRE(journal.load().ok());
  EventRecord e;
  e.kind = "note";
  e.reason = std::string(200, 'r');
  e.seq = 1;
  REQUIRE(journal.append(e).ok());
  const auto size = std::filesystem::file_size(path);
  // RLIMIT_FSIZE lets only part of the next line through, then write() fails
  // (EFBIG) as it would on ENOSPC.
  struct sigaction ign {}, old {};
  ign.sa_handler = SIG_IGN;
  REQUIRE(::sigaction(SIGXFSZ, &ign, &old) == 0);
  struct rlimit saved {};
  REQUIRE(::getrlimit(RLIMIT_FSIZE, &saved) == 0);
  struct rlimit small = saved;
  small.rlim_cur = size + 50;
  REQUIRE(::setrlimit(RLIMIT_FSIZE, &small) == 0);
  e.seq = 2;
  const bool second_ok = journal.append(e).ok();
  REQUIRE(::setrlimit(RLIMIT_FSIZE, &saved) == 0);
  REQUIRE(::sigaction(SIGXFSZ, &old, nullptr) == 0);
  CHECK_FALSE(second_ok);
  REQUIRE(std::filesystem::file_size(path) == size + 50);
  e.seq = 3;
  REQUIRE(journal.append(e).ok());
  EventJournal reread(posix_fs, path);
  auto loaded = reread.load();
  REQUIRE(loaded.ok());
  CHECK(loaded.value().skipped == 1);  // the cut line only
  REQUIRE(loaded.value().events.size() == 2);
  CHECK(loaded.value().events[1].seq == 3);
}

TEST_CASE("loading reads only the newest end of a huge journal", "[head][events]") {
  TempDir dir;
  const std::string path = dir.sub("events.jsonl");
  constexpr std::size_t kKeep = 10;
  std::uint64_t seq = 0;
  {
    std::ofstream out(path);
    EventRecord e;
    e.kind = "note";
    e.reason = std::string(100, 'r');
    std::size_t bytes = 0;
    while (bytes < 2 * kMaxJournalReadBytes) {
      e.seq = ++seq;
      const std::string line = encode_event_line(e) + "\n";
      out << line;
      bytes += line.size();
    }
  }
  EventJournal journal(posix_fs, path, kKeep);
  auto loaded = journal.load();
  REQUIRE(loaded.ok());
  // Only the last kMaxJournalReadBytes are read: far fewer lines than written,
  // and the part line at the start of the read is skipped.
  CHECK(journal.lines() >= 2 * kKeep);
  CHECK(loaded.value().skipped == 1);
  REQUIRE(loaded.value().events.size() == kKeep);
  CHECK(loaded.value().events.back().seq == seq);
  // The next append rewrites the file with the newest `keep`.
  EventRecord e;
  e.kind = "note";
  e.seq = seq + 1;
  REQUIRE(journal.append(e).ok());
  CHECK(count_lines(path) == kKeep);
}

TEST_CASE("a FIFO in the journal's place is an error, not a hang", "[head][events]") {
  TempDir dir;
  const std::string path = dir.sub("events.jsonl");
  REQUIRE(::mkfifo(path.c_str(), 0600) == 0);
  EventJournal journal(posix_fs, path);
  auto loaded = journal.load();
  REQUIRE_FALSE(loaded.ok());
  CHECK(loaded.error().code == Errc::Io);
  CHECK(loaded.error().message.find("FIFO") != std::string::npos);
  CHECK(loaded.error().message.find(path) != std::string::npos);
}
