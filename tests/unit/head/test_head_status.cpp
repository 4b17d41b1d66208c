// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// The typed status: each peer as peer_view sees it, and systemd's STATUS= line.
#include <catch2/catch.hpp>

#include <boost/asio/io_context.hpp>

#include "smha/agent/agent.hpp"
#include "smha/head/head_status.hpp"

#include "fake_transport.hpp"
#include "sample_config.hpp"

using namespace smha;
using namespace smha::head;
using namespace std::chrono_literals;
using smha::test::FakeTransport;

TEST_CASE("systemd_status_line and peer_view: local state and every peer and hold and a failed OpenSM") {
  boost::asio::io_context io;
  SteadyClock clock;
  FakeTransport inner(io);
  RecordingTransport t(inner, clock, false);
  const config::Config c = smha::test::two_heads();
  // What smhad's head_status() makes of the poller and the agent's routes.
  auto status = [&](std::optional<SmState> local, const std::vector<agent::PeerRoute>* routes) {
    HeadStatus h;
    if (local) {
      h.local.answer = SmView::Answer{*local};
      h.local.seen = head::SmSeen::Answered;
    }
    for (std::size_t i = 0; i < c.peers.size(); ++i)
      h.peers.push_back(peer_view(c.peers[i], routes ? &(*routes)[i] : nullptr, t, clock.now()));
    return h;
  };
  CHECK(systemd_status_line(status(std::nullopt, nullptr), nullptr) ==
        "no answer from local SM; peer head02 unknown, peer head03 unaddressed");

  t.get_sminfo(mad::Target{Lid{7}}, {}, [](Result<mad::SmInfoReply>) {});
  io.run();
  HeadStatus h = status(SmState::Master, nullptr);
  CHECK(systemd_status_line(h, nullptr) == "MASTER; peer head02 STANDBY prio 5, peer head03 unaddressed");
  CHECK(h.peers[0].live_standby());
  CHECK(h.peers[0].last_poll_answered == true);

  h.held = true;
  opensm::SupervisorStatus st;
  st.state = opensm::SupervisorState::Running;
  CHECK(systemd_status_line(h, &st) == "MASTER; peer head02 STANDBY prio 5, peer head03 unaddressed; HOLD");
  h.held = false;
  st.state = opensm::SupervisorState::Failed;
  st.reason = "crash loop: 2 crashes within 60s";
  CHECK(systemd_status_line(h, &st) ==
        "MASTER; peer head02 STANDBY prio 5, peer head03 unaddressed; OpenSM failed: crash loop: 2 "
        "crashes within 60s");

  // With the agent's routes: head03 (no lid) shows its discovery.
  std::vector<agent::PeerRoute> routes(2);
  routes[0].guid = c.peers[0].port_guid;
  routes[1].guid = c.peers[1].port_guid;
  routes[1].discover = true;
  routes[1].state = agent::RouteState::NotFound;
  routes[1].searched = "searched 6 nodes, 14 ports";
  CHECK(systemd_status_line(status(SmState::Master, &routes), nullptr) ==
        "MASTER; peer head02 STANDBY prio 5, peer head03 not found (searched 6 nodes, 14 ports)");
  routes[1].state = agent::RouteState::Resolving;
  CHECK(systemd_status_line(status(SmState::Master, &routes), nullptr) ==
        "MASTER; peer head02 STANDBY prio 5, peer head03 resolving");
  // Found at a DR path but no LID yet: polled by DR, unreachable when that poll went unanswered.
  routes[1].state = agent::RouteState::Resolved;
  routes[1].found = true;
  routes[1].dr = DrPath{{1, 3}};
  inner.answer = [](const mad::Target&) { return std::optional<SmInfo>(); };
  t.get_sminfo(mad::Target{*routes[1].dr}, {}, [](Result<mad::SmInfoReply>) {});
  io.restart();
  io.run();
  h = status(SmState::Master, &routes);
  CHECK(h.peers[1].shown() == "unreachable");
  CHECK_FALSE(h.peers[1].last_poll_answered);  // by LID only: no live standby without a LID
  CHECK(systemd_status_line(h, nullptr) == "MASTER; peer head02 STANDBY prio 5, peer head03 unreachable");
}
