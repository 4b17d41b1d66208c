// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// Metrics from daemon state: the snapshot built from a status reply and the
// event stream, served over HTTP on loopback and written to a textfile, each
// read back with a real exposition parser (python3-prometheus-client).
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <future>
#include <sstream>
#include <thread>

#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>
#include <filesystem>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include "prometheus_parse.hpp"
#include "smha/control/metrics_http.hpp"
#include "smha/os/posix_file_system.hpp"
#include "sm_view.hpp"
#include "smha/head/event_journal.hpp"
#include "smha/service/metrics_service.hpp"
#include "test_support.hpp"

using namespace smha;
using namespace smha::service;
using namespace smha::head;
using smha::test::sm_view;
using namespace std::chrono_literals;
using smha::control::test::TempDir;
using smha::testing::parse_with_prometheus_client;
using smha::testing::sample_value;
using nlohmann::json;

namespace {

HeadStatus status_fixture() {
  HeadStatus s;
  s.node = "head01";
  s.role = sm::Role::Master;
  s.local = sm_view("head01", 0x10, SmState::Master, 11);
  s.peers = {sm_view("head02", 0x20, SmState::Standby, 10), sm_view("head03", 0x30, std::nullopt, 0, "unreachable")};
  s.peers[0].last_poll_answered = true;
  s.peers[1].last_poll_answered = false;
  s.alarms = {{AlarmKind::UnknownSm, "0x99"}};
  // The census: two heads and an SM answering STANDBY, one silent.
  s.fabric_sms = {{"master", 1}, {"standby", 2}, {"silent", 1}};
  s.held = true;
  s.hold_reason = "x";
  s.opensm_restarts = 2;
  s.version = "1.2.3";
  s.started = *parse_utc("2026-12-03T10:00:00.500Z");
  s.config_loaded = *parse_utc("2026-12-03T11:30:00.000Z");
  return s;
}

// An event as LogEventSink records it: typed by its kind; a transition's
// "FROM->TO" (this test's shorthand) gives from and to.
EventRecord ev(const std::string& kind, const std::string& reason, const std::string& evidence, TimePoint at) {
  EventRecord e;
  e.kind = kind;
  e.reason = reason;
  e.evidence = evidence;
  e.at = at;
  set_type_from_kind(e);
  if (const auto arrow = reason.find("->"); arrow != std::string::npos && e.type == EventType::Transition) {
    e.from = sm_state_named(reason.substr(0, arrow));
    e.to = sm_state_named(reason.substr(arrow + 2));
  }
  return e;
}

// GET `path` from 127.0.0.1:port; the whole HTTP response.
std::string http_get(std::uint16_t port, const std::string& path) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  const std::string req = "GET " + path + " HTTP/1.1\r\nHost: localhost\r\n\r\n";
  REQUIRE(::send(fd, req.data(), req.size(), 0) == static_cast<ssize_t>(req.size()));
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) out.append(buf, static_cast<std::size_t>(n));
  ::close(fd);
  return out;
}

std::string body_of(const std::string& response) {
  const auto at = response.find("\r\n\r\n");
  REQUIRE(at != std::string::npos);
  return response.substr(at + 4);
}

}  // namespace

TEST_CASE("failover stats: cause and duration from the event stream", "[service][metrics]") {
  FailoverStats f;
  const TimePoint t0{std::chrono::seconds(100)};
  f.observe(ev("opensm_started", "start", "", t0));
  f.observe(ev("transition", "NOTACTIVE->MASTER", "opensm_started: start", t0 + 2s));
  f.observe(ev("transition", "MASTER->STANDBY", "handover_done: handed over", t0 + 3s));
  f.observe(ev("takeover_started", "master lost", "", t0 + 10s));
  f.observe(ev("takeover_done", "local SM is MASTER", "", t0 + 10s + 100ms));
  f.observe(ev("transition", "STANDBY->MASTER", "takeover_done: local SM is MASTER", t0 + 10s + 120ms));
  CHECK(f.by_reason() == std::map<std::string, std::uint64_t>{{"start", 1}, {"takeover", 1}});
  REQUIRE(f.last_takeover_seconds());
  CHECK(*f.last_takeover_seconds() == Approx(0.12));
  // An aborted takeover is not counted; a pulled handover is, whatever event preceded the transition.
  f.observe(ev("takeover_started", "master lost", "", t0 + 20s));
  f.observe(ev("takeover_aborted", "a master answered", "", t0 + 21s));
  CHECK(*f.last_takeover_seconds() == Approx(0.12));
  f.observe(ev("handover_started", "by request: pull", "target head01", t0 + 29s));
  f.observe(ev("priority_changed", "10->12 as handing_over", "", t0 + 29s));
  f.observe(ev("transition", "STANDBY->MASTER", "priority_changed: 10->12 as handing_over", t0 + 30s));
  CHECK(f.by_reason().at("handover") == 1);
  CHECK(*f.last_takeover_seconds() == Approx(1.0));
}

// The counters follow the engine's typed events (sm::RecordEvent's kind,
// from/to, preempt) as LogEventSink records them: with every reason and
// evidence reworded or empty, they count the same.
TEST_CASE("failover stats do not depend on the wording of events", "[service][metrics]") {
  using sm::EventKind;
  auto run = [](const std::function<std::string(std::string)>& word) {
    LogEventSink sink;
    FailoverStats f;
    sink.add_listener([&](const EventRecord& e) { f.observe(e); });
    const TimePoint t0{std::chrono::seconds(100)};
    auto engine = [&](EventKind k, std::string reason, TimePoint at, bool preempt = false) {
      sm::RecordEvent e{k, word(std::move(reason)), word("evidence")};
      e.preempt = preempt;
      sink.event(e, at);
    };
    auto change = [&](SmState from, SmState to, TimePoint at) {
      sm::RecordEvent e{EventKind::StateChanged,
                        word(std::string(to_string(from)) + "->" + std::string(to_string(to))), {}};
      e.from = from;
      e.to = to;
      sink.event(e, at);
    };
    engine(EventKind::OpensmStarted, "start", t0);
    change(SmState::NotActive, SmState::Master, t0 + 2s);
    change(SmState::Master, SmState::Standby, t0 + 3s);
    engine(EventKind::TakeoverStarted, "master lost", t0 + 10s);
    engine(EventKind::TakeoverDone, "local SM is MASTER", t0 + 10s + 100ms);
    change(SmState::Standby, SmState::Master, t0 + 10s + 120ms);
    change(SmState::Master, SmState::Standby, t0 + 15s);
    engine(EventKind::HandoverStarted, "preempt: preferred head takes mastership back", t0 + 20s, true);
    engine(EventKind::HandoverDone, "took over by request", t0 + 20s + 300ms);
    change(SmState::Standby, SmState::Master, t0 + 20s + 400ms);
    change(SmState::Master, SmState::Standby, t0 + 25s);
    engine(EventKind::HandoverStarted, "by request: pull", t0 + 30s);
    engine(EventKind::HandoverRolledBack, "master did not hand over", t0 + 31s);
    engine(EventKind::HandoverStarted, "by request: pull", t0 + 40s);
    change(SmState::Standby, SmState::Master, t0 + 40s + 250ms);
    return f;
  };
  const auto worded = run([](std::string s) { return s; });
  const auto blank = run([](std::string) { return std::string(); });
  const auto reworded = run([](std::string s) { return "preempt->MASTER " + s + " ->MASTER"; });
  const std::map<std::string, std::uint64_t> expected{{"start", 1}, {"takeover", 1}, {"preempt", 1}, {"handover", 1}};
  for (const auto* f : {&worded, &blank, &reworded}) {
    CHECK(f->by_reason() == expected);
    REQUIRE(f->last_takeover_seconds());
    CHECK(*f->last_takeover_seconds() == Approx(0.25));
    REQUIRE(f->last_change());
    CHECK(f->last_change()->kind == "handover");
    CHECK(f->last_change()->outcome == "running");
  }
}

TEST_CASE("the metrics snapshot covers every SM, alarms, hold, polls and restarts", "[service][metrics]") {
  PollStats polls;
  polls.record(true, std::chrono::microseconds(400));
  polls.record(true, std::chrono::milliseconds(3));
  polls.record(false, {});
  FailoverStats f;
  const auto text = control::render_prometheus(metrics_snapshot(status_fixture(), polls, f));
  auto doc = parse_with_prometheus_client(text);
  REQUIRE_FALSE(doc.contains("error"));
  CHECK(sample_value(doc["smha_role"], "smha_role", {{"node", "head01"}, {"role", "master"}}) == 1.0);
  CHECK(sample_value(doc["smha_role"], "smha_role", {{"node", "head01"}, {"role", "taking_over"}}) == 0.0);
  CHECK(sample_value(doc["smha_sm_state"], "smha_sm_state", {{"node", "head01"}, {"guid", "0x0000000000000010"}}) == 3.0);
  CHECK(sample_value(doc["smha_sm_priority"], "smha_sm_priority",
                     {{"node", "head02"}, {"guid", "0x0000000000000020"}}) == 10.0);
  CHECK(sample_value(doc["smha_sm_up"], "smha_sm_up", {{"node", "head03"}, {"guid", "0x0000000000000030"}}) == 0.0);
  CHECK(sample_value(doc["smha_sm_state"], "smha_sm_state", {{"node", "head03"}, {"guid", "0x0000000000000030"}})
            .is_null());
  const auto& rtt = doc["smha_poll_rtt_seconds"];
  CHECK(sample_value(rtt, "smha_poll_rtt_seconds_bucket", {{"le", "0.0005"}}) == 1.0);
  CHECK(sample_value(rtt, "smha_poll_rtt_seconds_bucket", {{"le", "0.005"}}) == 2.0);
  CHECK(sample_value(rtt, "smha_poll_rtt_seconds_count", json::object()) == 2.0);
  CHECK(sample_value(doc["smha_missed_polls"], "smha_missed_polls_total", json::object()) == 1.0);
  CHECK(sample_value(doc["smha_opensm_restarts"], "smha_opensm_restarts_total", json::object()) == 2.0);
  CHECK(sample_value(doc["smha_alarm_active"], "smha_alarm_active", {{"alarm", "unknown_sm"}}) == 1.0);
  CHECK(sample_value(doc["smha_hold_active"], "smha_hold_active", json::object()) == 1.0);
  // The census's SMs per state (an entry without a state is not counted).
  CHECK(sample_value(doc["smha_fabric_sms"], "smha_fabric_sms", {{"state", "master"}}) == 1.0);
  CHECK(sample_value(doc["smha_fabric_sms"], "smha_fabric_sms", {{"state", "standby"}}) == 2.0);
  CHECK(sample_value(doc["smha_fabric_sms"], "smha_fabric_sms", {{"state", "silent"}}) == 1.0);
  CHECK(sample_value(doc["smha_fabric_sms"], "smha_fabric_sms", {{"state", "discovering"}}) == 0.0);
}

TEST_CASE("every alarm and failover cause is present from the start, at 0, build, start and reload times",
          "[service][metrics]") {
  PollStats polls;
  FailoverStats f;
  auto doc = parse_with_prometheus_client(control::render_prometheus(metrics_snapshot(status_fixture(), polls, f)));
  REQUIRE_FALSE(doc.contains("error"));
  for (const char* a : {"two_masters", "sm_key_mismatch", "ignore_other_sm", "local_sm_hung", "no_master",
                        "handover_failed", "priority_mismatch", "priority_not_applied", "opensm_failed"})
    CHECK(sample_value(doc["smha_alarm_active"], "smha_alarm_active", {{"alarm", a}}) == 0.0);
  CHECK(sample_value(doc["smha_alarm_active"], "smha_alarm_active", {{"alarm", "unknown_sm"}}) == 1.0);
  CHECK(sample_value(doc["smha_alarms_active"], "smha_alarms_active", json::object()) == 1.0);
  for (const char* r : {"takeover", "handover", "preempt", "start"})
    CHECK(sample_value(doc["smha_failovers"], "smha_failovers_total", {{"reason", r}}) == 0.0);
  CHECK(sample_value(doc["smha_build_info"], "smha_build_info", {{"version", "1.2.3"}}) == 1.0);
  // 2026-12-03T10:00:00.500Z and 11:30:00Z as Unix time.
  CHECK(sample_value(doc["smha_start_time_seconds"], "smha_start_time_seconds", json::object()) ==
        Approx(1796292000.5));
  CHECK(sample_value(doc["smha_config_last_reload_success_timestamp_seconds"],
                     "smha_config_last_reload_success_timestamp_seconds", json::object()) == Approx(1796297400.0));
}

TEST_CASE("the last takeover or handover: kind, reason, outcome and duration", "[service][metrics]") {
  FailoverStats f;
  const TimePoint t0{std::chrono::seconds(100)};
  CHECK_FALSE(f.last_change());
  auto started = ev("takeover_started", "master lost", "head02 silent 3 rounds", t0);
  started.wall = std::chrono::system_clock::time_point(std::chrono::seconds(1796292000));
  f.observe(started);
  REQUIRE(f.last_change());
  CHECK(f.last_change()->kind == "takeover");
  CHECK(f.last_change()->reason == "master lost: head02 silent 3 rounds");
  CHECK(f.last_change()->outcome == "running");
  CHECK_FALSE(f.last_change()->duration_s);
  f.observe(ev("takeover_done", "local SM is MASTER", "", t0 + 380ms));
  CHECK(f.last_change()->outcome == "done");
  REQUIRE(f.last_change()->duration_s);
  CHECK(*f.last_change()->duration_s == Approx(0.38));
  CHECK(f.last_change()->started == started.wall);
  f.observe(ev("handover_started", "by request: push", "target head02", t0 + 60s));
  f.observe(ev("handover_rolled_back", "no new master", "", t0 + 65s));
  CHECK(f.last_change()->kind == "handover");
  CHECK(f.last_change()->outcome == "rolled_back");
  CHECK(*f.last_change()->duration_s == Approx(5.0));
  auto preempt = ev("handover_started", "preempt: preferred head takes mastership back", "", t0 + 90s);
  preempt.preempt = true;  // the engine's typed field, not the reason's wording
  f.observe(preempt);
  CHECK(f.last_change()->kind == "preempt");
  // A later done without a start does not touch a finished record.
  f.observe(ev("handover_done", "handed over", "", t0 + 91s));
  f.observe(ev("handover_done", "handed over", "", t0 + 99s));
  CHECK(*f.last_change()->duration_s == Approx(1.0));
}

TEST_CASE("metrics served over loopback HTTP and written to the textfile", "[service][metrics]") {
  TempDir dir;
  boost::asio::io_context io;
  os::PosixFileSystem fs;
  config::MetricsSettings settings;
  settings.listen_address = "127.0.0.1";
  settings.listen_port = 0;  // ephemeral
  settings.textfile_dir = dir.path();
  settings.textfile_interval = std::chrono::seconds(1);
  int renders = 0;
  // This head's config digests, the SM_Key's fingerprint among them: what any
  // local user reads from the listener and the 0644 textfile leaves it out.
  HeadStatus status = status_fixture();
  status.drift.own = {{"opensm_conf", "001122334455"}, {"sm_key", "a1b2c3d4e5f6"}};
  MetricsService svc(io, settings, fs, [&] {
    ++renders;
    PollStats p;
    FailoverStats f;
    return control::render_prometheus(metrics_snapshot(status, p, f));
  });
  REQUIRE(svc.start().ok());
  REQUIRE(svc.http_port() != 0);
  const std::uint16_t port = svc.http_port();
  std::promise<std::pair<std::string, std::string>> got;
  std::thread scraper([&] {
    auto metrics = http_get(port, "/metrics");
    auto other = http_get(port, "/");
    got.set_value({metrics, other});
    boost::asio::post(io, [&] { svc.stop(); });
  });
  io.run();
  scraper.join();
  auto [metrics, other] = got.get_future().get();
  CHECK(metrics.rfind("HTTP/1.1 200 OK\r\n", 0) == 0);
  CHECK_THAT(metrics, Catch::Contains("Content-Type: text/plain; version=0.0.4"));
  auto doc = parse_with_prometheus_client(body_of(metrics));
  REQUIRE_FALSE(doc.contains("error"));
  CHECK(sample_value(doc["smha_hold_active"], "smha_hold_active", json::object()) == 1.0);
  CHECK(other.rfind("HTTP/1.1 404", 0) == 0);
  CHECK(sample_value(doc["smha_config_digest_info"], "smha_config_digest_info",
                     {{"node", "head01"}, {"opensm_conf", "001122334455"}}) == 1.0);
  CHECK(metrics.find("a1b2c3d4e5f6") == std::string::npos);

  std::ifstream in(svc.textfile_path());
  std::stringstream file;
  file << in.rdbuf();
  auto fdoc = parse_with_prometheus_client(file.str());
  REQUIRE_FALSE(fdoc.contains("error"));
  CHECK(file.str().find("a1b2c3d4e5f6") == std::string::npos);
  CHECK(sample_value(fdoc["smha_config_digest_info"], "smha_config_digest_info",
                     {{"node", "head01"}, {"opensm_conf", "001122334455"}}) == 1.0);
  CHECK(sample_value(fdoc["smha_sm_up"], "smha_sm_up", {{"node", "head02"}, {"guid", "0x0000000000000020"}}) == 1.0);
  CHECK(svc.textfile_path() == dir.sub("smha.prom"));
  CHECK(renders >= 2);  // the /metrics scrape and the textfile (the 404 renders nothing)
}

TEST_CASE("the metrics endpoint refuses a non-loopback address", "[service][metrics]") {
  boost::asio::io_context io;
  control::MetricsHttpOptions o;
  o.address = "0.0.0.0";
  control::MetricsHttpServer s(io, o, [] { return std::string(); });
  auto st = s.start();
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().code == Errc::Config);
  o.address = "::1";
  control::MetricsHttpServer v6(io, o, [] { return std::string("x 1\n"); });
  // ::1 may be unavailable in a container without IPv6; then bind fails, never bad_address.
  auto st6 = v6.start();
  if (!st6.ok()) CHECK(st6.error().code == Errc::Io);
}

TEST_CASE("a failed textfile write is reported and nothing is left behind", "[service][metrics]") {
  TempDir dir;
  boost::asio::io_context io;
  os::PosixFileSystem fs;
  config::MetricsSettings settings;
  settings.textfile_dir = dir.sub("missing");
  MetricsService svc(io, settings, fs, [] { return std::string("x 1\n"); });
  auto st = svc.write_textfile();
  REQUIRE_FALSE(st.ok());
  CHECK_THAT(st.error().message, Catch::Contains(dir.sub("missing")));
}

TEST_CASE("a failing textfile write is logged once, and its recovery once", "[service][metrics]") {
  TempDir dir;
  boost::asio::io_context io;
  os::PosixFileSystem fs;
  config::MetricsSettings settings;
  settings.textfile_dir = dir.sub("later");
  MetricsService svc(io, settings, fs, [] { return std::string("x 1\n"); });

  auto sink = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(64);
  auto previous = spdlog::default_logger();
  spdlog::set_default_logger(std::make_shared<spdlog::logger>("metrics-textfile-test", sink));
  struct Restore {
    std::shared_ptr<spdlog::logger> l;
    ~Restore() { spdlog::set_default_logger(l); }
  } restore{previous};
  auto count = [&](const std::string& needle) {
    int n = 0;
    for (const auto& line : sink->last_formatted()) n += line.find(needle) != std::string::npos;
    return n;
  };

  // Each failed attempt names a different temporary file; still one warning.
  for (int i = 0; i < 5; ++i) REQUIRE_FALSE(svc.write_textfile().ok());
  CHECK(count("cannot write " + dir.sub("later/smha.prom")) == 1);
  std::filesystem::create_directory(dir.sub("later"));
  for (int i = 0; i < 3; ++i) REQUIRE(svc.write_textfile().ok());
  CHECK(count("writing " + dir.sub("later/smha.prom") + " again") == 1);
  std::filesystem::remove_all(dir.sub("later"));
  REQUIRE_FALSE(svc.write_textfile().ok());
  CHECK(count("cannot write") == 2);
}

TEST_CASE("LID continuity metrics from the status: entries, writes, errors, refusals by reason, absent while off",
          "[service][metrics]") {
  PollStats polls;
  FailoverStats f;
  HeadStatus st = status_fixture();
  auto off = parse_with_prometheus_client(control::render_prometheus(metrics_snapshot(st, polls, f)));
  REQUIRE_FALSE(off.contains("error"));
  CHECK_FALSE(off.contains("smha_lid_continuity_entries"));
  st.lid_continuity = HeadStatus::LidContinuity{6, 3, 1, {{"bad_lid", 2}, {"duplicate_lid", 4}, {"conflict", 0}}};
  auto doc = parse_with_prometheus_client(control::render_prometheus(metrics_snapshot(st, polls, f)));
  REQUIRE_FALSE(doc.contains("error"));
  CHECK(sample_value(doc["smha_lid_continuity_entries"], "smha_lid_continuity_entries", json::object()) == 6.0);
  CHECK(sample_value(doc["smha_lid_continuity_writes"], "smha_lid_continuity_writes_total", json::object()) == 3.0);
  CHECK(sample_value(doc["smha_lid_continuity_write_errors"], "smha_lid_continuity_write_errors_total",
                     json::object()) == 1.0);
  CHECK(sample_value(doc["smha_lid_continuity_rejected"], "smha_lid_continuity_rejected_total",
                     {{"reason", "bad_lid"}}) == 2.0);
  CHECK(sample_value(doc["smha_lid_continuity_rejected"], "smha_lid_continuity_rejected_total",
                     {{"reason", "duplicate_lid"}}) == 4.0);
  CHECK(sample_value(doc["smha_lid_continuity_rejected"], "smha_lid_continuity_rejected_total",
                     {{"reason", "conflict"}}) == 0.0);
}
