// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// RecordingTransport: what the poller saw, per SM and per port, and the
// refusal of Sets in observe mode.
#include <catch2/catch.hpp>

#include <boost/asio/io_context.hpp>

#include "smha/head/recording_transport.hpp"

#include "fake_transport.hpp"

using namespace smha;
using namespace smha::head;
using namespace std::chrono_literals;
using smha::test::FakeTransport;

TEST_CASE("RecordingTransport remembers answers per SM and refuses Sets in observe mode only") {
  boost::asio::io_context io;
  SteadyClock clock;
  FakeTransport inner(io);
  RecordingTransport t(inner, clock, false);
  bool got = false;
  t.get_sminfo(mad::Target{Lid{7}}, {}, [&](Result<mad::SmInfoReply> r) { got = r.ok(); });
  io.run();
  io.restart();
  CHECK(got);
  auto seen = t.last_seen(Guid{0x20});
  REQUIRE(seen);
  CHECK(seen->info.act_count == 42);
  CHECK(seen->rtt == 3ms);
  auto q = t.last_query(mad::Target{Lid{7}});
  REQUIRE(q);
  CHECK(q->answered);
  CHECK_FALSE(t.last_query(mad::Target{Lid{8}}));

  t.set_sminfo(mad::Target{DrPath{}}, SmInfoModifier::Discover, SmInfo{}, {}, [](Result<mad::SmInfoReply>) {});
  io.run();
  io.restart();
  CHECK(inner.sets == 1);

  RecordingTransport observing(inner, clock, true);
  std::optional<Error> err;
  observing.set_sminfo(mad::Target{DrPath{}}, SmInfoModifier::Discover, SmInfo{}, {},
                       [&](Result<mad::SmInfoReply> r) { if (!r) err = r.error(); });
  CHECK(err);
  CHECK(err->code == Errc::Observe);
  CHECK(inner.sets == 1);
}

TEST_CASE("RecordingTransport keeps the last PortInfo answer per port across a silent query") {
  boost::asio::io_context io;
  SteadyClock clock;
  FakeTransport inner(io);
  RecordingTransport t(inner, clock, true);  // read-only: Gets still pass
  CHECK_FALSE(t.last_port_info(DrPath{}, 1));
  inner.port = mad::PortInfo{Lid{3}, Lid{1}, 1, mad::PortState::Down};
  std::optional<mad::PortState> got;
  t.get_port_info(DrPath{}, 1, {}, [&](Result<mad::PortInfoReply> r) { if (r) got = r->info.state; });
  io.run();
  io.restart();
  CHECK(got == mad::PortState::Down);
  auto rec = t.last_port_info(DrPath{}, 1);
  REQUIRE(rec);
  CHECK(rec->answered);
  REQUIRE(rec->info);
  CHECK(rec->info->state == mad::PortState::Down);
  CHECK_FALSE(t.last_port_info(DrPath{}, 2));
  CHECK_FALSE(t.last_port_info(mad::Target{Lid{3}}, 1));

  inner.port.reset();
  bool failed = false;
  t.get_port_info(DrPath{}, 1, {}, [&](Result<mad::PortInfoReply> r) { failed = !r.ok(); });
  io.run();
  CHECK(failed);
  rec = t.last_port_info(DrPath{}, 1);
  REQUIRE(rec);
  CHECK_FALSE(rec->answered);
  REQUIRE(rec->info);  // the last answer is kept
  CHECK(rec->info->state == mad::PortState::Down);
}
