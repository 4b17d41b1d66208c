// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// AsioScheduler: the Scheduler on an io_context, in time order.
#include <catch2/catch.hpp>

#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "smha/core/clock.hpp"
#include "smha/os/asio_scheduler.hpp"

using namespace smha;
using namespace std::chrono_literals;

TEST_CASE("AsioScheduler fires timers in time order and not after cancel") {
  boost::asio::io_context io;
  SteadyClock clock;
  os::AsioScheduler sched(io, clock);
  std::vector<int> fired;
  const auto now = clock.now();
  sched.schedule_at(now + 30ms, [&] { fired.push_back(3); });
  sched.schedule_at(now + 10ms, [&] { fired.push_back(1); });
  auto id = sched.schedule_at(now + 20ms, [&] { fired.push_back(2); });
  sched.schedule_at(now - 5ms, [&] { fired.push_back(0); });  // past: at once
  sched.cancel(id);
  sched.cancel(9999);  // unknown: no-op
  io.run();
  CHECK(fired == std::vector<int>{0, 1, 3});
  CHECK(sched.pending() == 0);
  CHECK(clock.now() - now >= 30ms);
}

TEST_CASE("AsioScheduler keeps time order when the loop arms timers late") {
  // A loop that is late arming timers (a busy machine) must not reorder them:
  // a time already past stays earlier than a later time armed before it.
  boost::asio::io_context io;
  SteadyClock clock;
  os::AsioScheduler sched(io, clock);
  std::vector<int> fired;
  const auto now = clock.now();
  sched.schedule_at(now + 30ms, [&] { fired.push_back(3); });
  // The late loop: arm the next timers only once now + 30 ms has passed.
  std::this_thread::sleep_until(now + 40ms);
  sched.schedule_at(now + 10ms, [&] { fired.push_back(1); });
  sched.schedule_at(now - 5ms, [&] { fired.push_back(0); });
  io.run();
  CHECK(fired == std::vector<int>{0, 1, 3});
}
