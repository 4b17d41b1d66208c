// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// Exhaustive decision table: after a steady warm-up (this head STANDBY beside a
// healthy master, or MASTER beside a healthy standby), eight poll rounds (800 ms,
// past hang_timeout 400 ms and a peer's wait for a silent master, 650 ms) of one
// combination of local view, peer view and local link; the expected actions are
// written out per row, not computed.
#include <catch2/catch.hpp>

#include <sstream>

#include "rig.hpp"

using namespace smha;
using namespace smha::sm;
using namespace smha::sm::test;

namespace {

constexpr auto S = SmState::Standby;
constexpr auto M = SmState::Master;
constexpr auto D = SmState::Discovering;
constexpr auto kSilent = std::nullopt;

enum class Was { Standby, Master };

struct Expect {
  bool discover = false;
  bool restart_standby = false;  // RestartOpensm at the standby priority (yield or fence)
  bool force = false;            // ... with SIGKILL (fence)
  bool stop_force = false;       // StopOpensm{force}: fence of a hung master, restart deferred
  bool two_masters = false;      // TwoMasters alarm raised
};

void check(Was was, Local local, Peer peer, Link link, Expect e) {
  Rig rig;
  std::ostringstream name;
  name << "was " << (was == Was::Master ? "MASTER" : "STANDBY") << ", local "
       << (local.state ? to_string(*local.state) : "silent") << "/" << int(local.prio) << ", peer "
       << (peer.state ? to_string(*peer.state) : "silent") << "/" << int(peer.prio) << " port "
       << to_string(peer.port) << ", link " << to_string(link.state);
  INFO(name.str());
  // Warm-up.
  if (was == Was::Standby)
    rig.polls(5, round(Local{S}, {Peer{M, 11, PortState::Up}}));
  else
    rig.polls(5, round(Local{M, 11}, {Peer{S, 10, PortState::Up}}));
  auto acts = rig.polls(8, round(local, {peer}, link));
  CHECK((count<SendDiscover>(acts) > 0) == e.discover);
  CHECK(count<SendDiscover>(acts) <= 1);
  auto restart = first<RestartOpensm>(acts);
  CHECK(restart.has_value() == e.restart_standby);
  if (restart) {
    CHECK(restart->priority == 10);
    CHECK(restart->force == e.force);
  }
  auto stop = first<StopOpensm>(acts);
  CHECK(stop.has_value() == e.stop_force);
  if (stop) CHECK(stop->force);
  CHECK(has_alarm(acts, AlarmKind::TwoMasters) == e.two_masters);
  // Never a fresh start in eight rounds (a fenced master waits for the recovery delay).
  CHECK(count<StartOpensm>(acts) == 0);
}

}  // namespace

TEST_CASE("Standby head: decision table", "[sm][table]") {
  using P = PortState;
  // Healthy master: nothing, whatever our link says.
  check(Was::Standby, Local{S}, Peer{M, 11, P::Up}, Link{P::Up}, Expect{});
  check(Was::Standby, Local{S}, Peer{M, 11, P::Unknown}, Link{P::Up}, Expect{});
  check(Was::Standby, Local{S}, Peer{M, 11, P::Up}, Link{P::Down}, Expect{});
  // Master answers on LID only (DR lost): still healthy.
  check(Was::Standby, Local{S}, Peer{M, 11, P::Up, kPeer, false}, Link{P::Up}, Expect{});
  // Master silent: dead (port down), hung (port up) or unknown: DISCOVER (for
  // silence only after the wait for its smhad's fence); refused: dead, DISCOVER.
  check(Was::Standby, Local{S}, Peer{kSilent, 11, P::Down}, Link{P::Up}, Expect{.discover = true});
  check(Was::Standby, Local{S}, Peer{kSilent, 11, P::Up}, Link{P::Up}, Expect{.discover = true});
  check(Was::Standby, Local{S}, Peer{kSilent, 11, P::Unknown}, Link{P::Up}, Expect{.discover = true});
  check(Was::Standby, Local{S}, Peer{kSilent, 11, P::Unknown, kPeer, true, kKey, true}, Link{P::Up},
        Expect{.discover = true});
  // Our own link down: we cannot tell a dead master from our own isolation.
  check(Was::Standby, Local{S}, Peer{kSilent, 11, P::Down}, Link{P::Down}, Expect{});
  check(Was::Standby, Local{S}, Peer{kSilent, 11, P::Unknown}, Link{P::Down}, Expect{});
  // Master now answers STANDBY (it restarted) and ranks below us: we act.
  check(Was::Standby, Local{S}, Peer{S, 10, P::Up}, Link{P::Up}, Expect{.discover = true});
  // ... ranks above us (priority): it acts first; we wait longer than eight rounds.
  check(Was::Standby, Local{S}, Peer{S, 12, P::Up}, Link{P::Up}, Expect{});
  // ... it is sweeping (DISCOVERING): it decides for itself.
  check(Was::Standby, Local{S}, Peer{D, 10, P::Up}, Link{P::Up}, Expect{});
  // Our own SM is sweeping or already MASTER: no Set to it.
  check(Was::Standby, Local{D}, Peer{kSilent, 11, P::Down}, Link{P::Up}, Expect{});
  check(Was::Standby, Local{M, 10}, Peer{kSilent, 11, P::Down}, Link{P::Up}, Expect{});
  // Our own SM silent (hung) while standby: fence by forced restart.
  check(Was::Standby, Local{kSilent}, Peer{M, 11, P::Up}, Link{P::Up},
        Expect{.restart_standby = true, .force = true});
  check(Was::Standby, Local{kSilent}, Peer{kSilent, 11, P::Up}, Link{P::Up},
        Expect{.restart_standby = true, .force = true});
  // ... unless our port is down (the SM may just be waiting for the link).
  check(Was::Standby, Local{kSilent}, Peer{kSilent, 11, P::Up}, Link{P::Down}, Expect{});
}

TEST_CASE("Master head: decision table", "[sm][table]") {
  using P = PortState;
  check(Was::Master, Local{M, 11}, Peer{S, 10, P::Up}, Link{P::Up}, Expect{});
  check(Was::Master, Local{M, 11}, Peer{kSilent, 10, P::Down}, Link{P::Up}, Expect{});
  check(Was::Master, Local{M, 11}, Peer{S, 12, P::Up}, Link{P::Up}, Expect{});
  // Two masters, we are lower-ranked (priority): yield at once.
  check(Was::Master, Local{M, 11}, Peer{M, 12, P::Up}, Link{P::Up},
        Expect{.restart_standby = true, .two_masters = true});
  // Equal priority, our GUID is lower: we outrank; the other did not yield: yield after a poll.
  check(Was::Master, Local{M, 11}, Peer{M, 11, P::Up}, Link{P::Up},
        Expect{.restart_standby = true, .two_masters = true});
  // Hung while master: fence with SIGKILL, restart deferred for the peer's takeover.
  check(Was::Master, Local{kSilent}, Peer{S, 10, P::Up}, Link{P::Up}, Expect{.stop_force = true});
  // Our SM went DISCOVERING (its port went down): no action beyond re-rendering.
  check(Was::Master, Local{D, 11}, Peer{S, 10, P::Up}, Link{P::Down}, Expect{});
}
