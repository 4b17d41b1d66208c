// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// The simulation's clock and event queue: order, cancellation, stale ids.
#include <catch2/catch.hpp>

#include <memory>
#include <string>

#include "smha/sim/event_queue.hpp"

using namespace smha;
using namespace std::chrono_literals;
using smha::sim::EventQueue;

TEST_CASE("EventQueue: events run by time, and in scheduling order at one instant", "[sim][event_queue]") {
  EventQueue q;
  const auto t0 = q.now();
  std::string order;
  q.schedule_at(t0 + 20ms, [&] { order += 'c'; });
  q.schedule_at(t0 + 10ms, [&] { order += 'a'; });
  q.schedule_at(t0 + 10ms, [&] {
    order += 'b';
    // Scheduled now for now: after everything already due at this instant.
    q.post([&] { order += 'e'; });
  });
  q.schedule_at(t0 + 10ms, [&] { order += 'd'; });
  q.run_until(t0 + 15ms);
  CHECK(order == "abde");
  CHECK(q.now() == t0 + 15ms);
  CHECK(q.pending() == 1);
  // In the past: runs at the current instant, not before it.
  q.schedule_at(t0, [&] { order += 'p'; });
  q.run_until(t0 + 30ms);
  CHECK(order == "abdepc");
  CHECK(q.executed() == 6);
  CHECK(q.pending() == 0);
}

TEST_CASE("EventQueue: a cancel drops the event and its callback at once", "[sim][event_queue]") {
  EventQueue q;
  auto held = std::make_shared<int>(0);
  int ran = 0;
  const auto id = q.schedule_in(5ms, [held, &ran] { ++ran; });
  q.schedule_in(6ms, [&] { ++ran; });
  CHECK(held.use_count() == 2);
  q.cancel(id);
  CHECK(held.use_count() == 1);
  CHECK(q.pending() == 1);
  q.cancel(id);  // twice: nothing
  CHECK(q.pending() == 1);
  q.run_until(q.now() + 10ms);
  CHECK(ran == 1);
  CHECK(q.executed() == 1);
}

TEST_CASE("EventQueue: a stale id never cancels the timer that reuses its slot", "[sim][event_queue]") {
  EventQueue q;
  int ran = 0;
  const auto first = q.schedule_in(1ms, [&] { ++ran; });
  q.run_until(q.now() + 2ms);
  REQUIRE(ran == 1);
  const auto second = q.schedule_in(1ms, [&] { ran += 10; });
  CHECK(second != first);
  CHECK(second != 0);
  q.cancel(first);  // already ran
  const auto third = q.schedule_in(1ms, [&] { ran += 100; });
  q.cancel(second);
  q.cancel(second);
  const auto fourth = q.schedule_in(1ms, [&] { ran += 1000; });  // reuses second's slot
  q.cancel(second);
  (void)third;
  (void)fourth;
  q.run_until(q.now() + 2ms);
  CHECK(ran == 1101);
}

TEST_CASE("EventQueue: run_until stops where the predicate holds", "[sim][event_queue]") {
  EventQueue q;
  const auto t0 = q.now();
  int n = 0;
  for (int i = 1; i <= 5; ++i) q.schedule_at(t0 + i * 1ms, [&] { ++n; });
  CHECK(q.run_until(t0 + 1s, [&] { return n == 3; }));
  CHECK(q.now() == t0 + 3ms);
  CHECK(q.pending() == 2);
  CHECK_FALSE(q.run_until(t0 + 4500us, [] { return false; }));
  CHECK(n == 4);
  CHECK(q.now() == t0 + 4500us);
}
