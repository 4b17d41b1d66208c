// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// An event as the events method shows it (event_to_json, smctl events' text);
// the events method over a real control socket: newest N, after/wait_s long
// polling woken by a new event, timeouts, bad params; and follow_events (smctl
// events --follow) printing new events, stopping on a signal and on smhad going away.
#include <catch2/catch.hpp>

#include <pthread.h>
#include <signal.h>

#include <functional>
#include <new>
#include <stdexcept>
#include <future>
#include <sstream>
#include <thread>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>

#include "smha/client/follow.hpp"
#include "smha/client/render.hpp"
#include "smha/control/client.hpp"
#include "smha/core/text.hpp"
#include "smha/service/events_method.hpp"
#include "named_events.hpp"
#include "test_support.hpp"

using namespace smha;
using namespace smha::service;
using namespace smha::head;
using namespace smha::client;
using namespace smha::control::test;
using namespace std::chrono_literals;
using nlohmann::json;

namespace {

// A control server with EventsMethod over a sink, on its own io thread.
// EventsMethod lives and dies on the server's thread; a work guard keeps that
// thread running until it is gone.
struct EventsRig {
  TempDir dir;
  LogCapture log;
  LogEventSink sink;
  SteadyClock clock;
  ThreadedServer ts{test_options(dir, log)};
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work{ts.io().get_executor()};
  std::unique_ptr<EventsMethod> method;
  EventsRig() {
    method = std::make_unique<EventsMethod>(ts.io(), sink, clock);
    REQUIRE(method->attach(ts.server()).ok());
    REQUIRE(ts.server().start().ok());
    ts.run();
  }
  ~EventsRig() {
    std::promise<void> done;
    boost::asio::post(ts.io(), [&] {
      method.reset();
      done.set_value();
    });
    done.get_future().wait();
    work.reset();
  }
  // Records a note on the server's thread and waits until it is in.
  void note(const std::string& kind) {
    std::promise<void> done;
    boost::asio::post(ts.io(), [&] {
      sink.note(kind, "r");
      done.set_value();
    });
    done.get_future().wait();
  }
  // EventsMethod::waiting(), read on the server's thread.
  std::size_t waiting() {
    std::promise<std::size_t> n;
    boost::asio::post(ts.io(), [&] { n.set_value(method->waiting()); });
    return n.get_future().get();
  }
  control::ControlClient client() {
    auto c = control::ControlClient::connect(ts.server().socket_path());
    REQUIRE(c);
    return std::move(c).value();
  }
};

std::vector<std::string> kinds(const json& data) {
  std::vector<std::string> out;
  for (const auto& e : data["events"]) out.push_back(e["kind"]);
  return out;
}

// Polls `pred` every 5 ms for up to 5 s.
bool wait_until(const std::function<bool()>& pred) {
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

volatile std::sig_atomic_t g_stop = 0;
extern "C" void on_usr1(int) {}

}  // namespace

TEST_CASE("event_to_json escapes the SMs' descriptions and smctl events shows each SM after the event",
          "[service][events]") {
  LogEventSink sink;
  smha::test::record_named_events(sink);
  const auto& ev = sink.events();
  REQUIRE(ev.size() == 3);
  const auto j = event_to_json(ev[0]);
  CHECK(j["nodes"][1]["node_description"] == printable("head02 \x01HCA-1"));
  CHECK(j["nodes"][1]["node_description"] != "head02 \x01HCA-1");
  CHECK(event_to_json(ev[2]).count("nodes") == 0);
  const std::string text = render_events_text(nlohmann::json{{"events", {j, event_to_json(ev[1])}}});
  CHECK(text.find("(head01 0x0002c90300000001 \"head01 HCA-1\"; head02 0x0002c90300000002 \"head02 ") !=
        std::string::npos);
  CHECK(text.find("no live standby  (head01 0x0002c90300000001 \"head01 HCA-1\"; 0x0002c90300000009)") !=
        std::string::npos);
}

TEST_CASE("events: newest n, after, and bad params", "[service][events]") {
  EventsRig rig;
  for (auto k : {"A", "B", "C"}) rig.note(k);
  auto c = rig.client();
  auto r = c.call("events", json{{"n", 2}});
  REQUIRE(r);
  REQUIRE(r->is_ok());
  CHECK(kinds(r->data) == std::vector<std::string>{"B", "C"});
  CHECK(r->data["last_seq"] == 3);
  r = c.call("events", json{{"after", 1}, {"n", 1}});
  REQUIRE(r);
  CHECK(kinds(r->data) == std::vector<std::string>{"B"});
  for (const json& bad : {json{{"n", 0}}, json{{"after", -1}}, json{{"after", 1}, {"wait_s", 0}},
                          json{{"after", 1}, {"wait_s", 301}}, json{{"wait_s", 5}}}) {
    r = c.call("events", bad);
    REQUIRE(r);
    CHECK(r->result == control::ResultCode::BadRequest);
  }
}

TEST_CASE("events long poll: answered when an event arrives, or empty at wait_s", "[service][events]") {
  EventsRig rig;
  rig.note("A");
  auto c = rig.client();
  const auto t0 = std::chrono::steady_clock::now();
  auto later = std::async(std::launch::async, [&] {
    REQUIRE(wait_until([&] { return rig.waiting() == 1; }));
    rig.note("B");
  });
  auto r = c.call("events", json{{"after", 1}, {"wait_s", 20}}, 30s);
  later.get();
  REQUIRE(r);
  REQUIRE(r->is_ok());
  CHECK(kinds(r->data) == std::vector<std::string>{"B"});
  CHECK(std::chrono::steady_clock::now() - t0 < 10s);
  // Nothing new: an empty answer after wait_s.
  const auto t1 = std::chrono::steady_clock::now();
  r = c.call("events", json{{"after", 2}, {"wait_s", 0.3}}, 5s);
  REQUIRE(r);
  CHECK(r->data["events"].empty());
  CHECK(std::chrono::steady_clock::now() - t1 >= 300ms);
  // after beyond the history (a reset journal): answered at once.
  r = c.call("events", json{{"after", 99}, {"wait_s", 20}}, 2s);
  REQUIRE(r);
  CHECK(r->data["last_seq"] == 2);
}

TEST_CASE("follow_events prints new events and stops on a signal", "[service][events]") {
  EventsRig rig;
  rig.note("OLD1");
  rig.note("OLD2");
  struct sigaction sa {};
  sa.sa_handler = on_usr1;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART, as smctl installs it
  REQUIRE(::sigaction(SIGUSR1, &sa, nullptr) == 0);
  client::CliOptions o;
  o.socket_path = rig.ts.server().socket_path();
  o.json = true;
  std::ostringstream out, err;
  g_stop = 0;
  std::promise<pthread_t> self;
  auto follower = std::async(std::launch::async, [&] {
    self.set_value(::pthread_self());
    return follow_events(o, 1, out, err, &g_stop);
  });
  const pthread_t thread = self.get_future().get();
  REQUIRE(wait_until([&] { return rig.waiting() == 1; }));
  rig.note("NEW");
  REQUIRE(wait_until([&] { return rig.waiting() == 1; }));  // printed, polling again
  g_stop = 1;
  ::pthread_kill(thread, SIGUSR1);
  REQUIRE(follower.wait_for(5s) == std::future_status::ready);
  CHECK(follower.get() == 0);
  std::vector<std::string> lines;
  std::istringstream in(out.str());
  for (std::string l; std::getline(in, l);) lines.push_back(json::parse(l)["kind"]);
  CHECK(lines == std::vector<std::string>{"OLD2", "NEW"});
  CHECK(err.str().empty());
}

TEST_CASE("follow_events exits 6 when smhad goes away, 6 when it is not there", "[service][events]") {
  client::CliOptions o;
  std::ostringstream out, err;
  {
    EventsRig rig;
    o.socket_path = rig.ts.server().socket_path();
    g_stop = 0;
    auto follower = std::async(std::launch::async, [&] { return follow_events(o, 5, out, err, &g_stop); });
    REQUIRE(wait_until([&] { return rig.waiting() == 1; }));
    boost::asio::post(rig.ts.io(), [&] { rig.ts.server().stop(); });
    REQUIRE(follower.wait_for(10s) == std::future_status::ready);
    CHECK(follower.get() == 6);
  }
  CHECK_THAT(err.str(), Catch::Contains("smhad went away"));
  std::ostringstream err2;
  CHECK(follow_events(o, 5, out, err2, &g_stop) == 6);
  CHECK_THAT(err2.str(), Catch::Contains("cannot reach smhad"));
}

TEST_CASE("a daemon note keeps at most kMaxEventTextBytes of reason and evidence", "[service][events]") {
  LogEventSink sink;
  std::string errors;
  for (int i = 0; i < 100'000; ++i) errors += "smha.yaml:" + std::to_string(i) + ":1: peers: bad\n";
  sink.note("RELOAD_REFUSED", "100000 error(s)", errors);
  REQUIRE_FALSE(sink.events().empty());
  const auto& e = sink.events().back();
  CHECK(e.evidence.size() < kMaxEventTextBytes + 64);
  CHECK(e.evidence.rfind("smha.yaml:0:1: peers: bad\n", 0) == 0);
  CHECK_THAT(e.evidence, Catch::Contains("more bytes not kept)"));
  CHECK(e.reason == "100000 error(s)");
  CHECK(cap_event_text("short") == "short");
}

TEST_CASE("a reload that throws is refused and recorded, whatever it throws (SIGHUP and smctl reload)",
          "[service][reload]") {
  LogEventSink sink;
  const int which = GENERATE(0, 1, 2);
  auto reply = guard_reload("SIGHUP", sink, [which]() -> smha::control::Reply {
    if (which == 0) throw std::bad_alloc();
    if (which == 1) throw std::runtime_error("boom");
    throw 42;
  });
  CHECK_FALSE(reply.is_ok());
  const std::string what = which == 0   ? "std::bad_alloc"
                           : which == 1 ? "boom"
                                        : "an exception that is not a std::exception";
  CHECK(reply.text == "reload failed, old configuration kept: " + what);
  REQUIRE_FALSE(sink.events().empty());
  const auto& e = sink.events().back();
  CHECK(e.kind == "RELOAD_REFUSED");
  CHECK(e.reason == "reload failed: " + what);
  CHECK(e.evidence == "SIGHUP");
  // A reload that does not throw passes its reply through.
  auto ok = guard_reload("smctl reload", sink, [] { return smha::control::Reply::ok(nlohmann::json::object(), "fine"); });
  CHECK(ok.is_ok());
  CHECK(ok.text == "fine");
}
