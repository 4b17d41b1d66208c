// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// HandoverCall: the `handover` reply from the engine's outcome (the agent's
// callback, no polling of the event log), the MastershipWindow's verdict and
// the deadline; and the same reply whatever the events' reasons say.
#include <catch2/catch.hpp>

#include <boost/asio/io_context.hpp>

#include "smha/os/asio_scheduler.hpp"
#include "smha/head/handover.hpp"

using namespace smha;
using namespace smha::head;
using namespace std::chrono_literals;
using control::ResultCode;

namespace {

constexpr Guid kOwn{0x10}, kPeer{0x20};

struct Rig {
  boost::asio::io_context io;
  SteadyClock clock;
  os::AsioScheduler sched{io, clock};
  std::shared_ptr<MastershipWindow> window = std::make_shared<MastershipWindow>(
      kOwn, "head01", std::vector<MastershipWindow::Head>{{kPeer, "head02", Lid{2}}}, clock.now());
  std::optional<control::Reply> reply;
  int replies = 0;
  std::shared_ptr<HandoverCall> call = std::make_shared<HandoverCall>(
      sched, window, [] { return std::optional<Guid>(kPeer); }, [this](control::Reply r) {
        ++replies;
        reply = std::move(r);
      });
  control::Reply run() {
    io.run();
    REQUIRE(reply);
    CHECK(replies == 1);
    CHECK(call->finished());
    return *reply;
  }
};

sm::RecordEvent outcome(sm::EventKind k, std::string reason) { return sm::RecordEvent{k, std::move(reason), {}}; }

EventRecord transition(SmState from, SmState to, std::string reason, TimePoint at) {
  EventRecord e;
  e.type = EventType::Transition;
  e.kind = "transition";
  e.reason = std::move(reason);
  e.from = from;
  e.to = to;
  e.at = at;
  return e;
}

}  // namespace

TEST_CASE("handover reply: the engine's outcome, whatever its reason says", "[service][handover]") {
  for (const std::string& reason : {std::string("handed over"), std::string(), std::string("rolled back ->MASTER")}) {
    INFO("reason '" << reason << "'");
    {
      INFO("done");
      Rig rig;
      rig.call->start(5s);
      rig.call->outcome(outcome(sm::EventKind::HandoverDone, reason));
      CHECK_FALSE(rig.call->finished());  // replied from the io_context, after the engine's step
      auto r = rig.run();
      CHECK(r.is_ok());
      CHECK(r.data["outcome"] == "done");
      CHECK(r.data["master"] == "0x0000000000000020");
      CHECK(r.data["duration_ms"].get<double>() < 1000.0);
    }
    {
      INFO("rolled back");
      Rig rig;
      rig.call->start(5s);
      rig.call->outcome(outcome(sm::EventKind::HandoverRolledBack, reason));
      auto r = rig.run();
      CHECK(r.result == ResultCode::Error);
      CHECK_THAT(r.data["outcome"].get<std::string>(), Catch::StartsWith("handover_rolled_back"));
    }
    {
      INFO("rejected before the deadline was armed");
      Rig rig;
      rig.call->outcome(outcome(sm::EventKind::HandoverRejected, reason));
      rig.call->start(5s);
      auto r = rig.run();
      CHECK(r.result == ResultCode::Error);
      CHECK_THAT(r.data["outcome"].get<std::string>(), Catch::StartsWith("handover_rejected"));
    }
    {
      INFO("the window's verdict wins over done");
      Rig rig;
      rig.call->start(5s);
      rig.window->set_target(kPeer);
      SmInfo peer;
      peer.guid = kPeer;
      peer.state = SmState::Master;
      rig.window->sminfo(peer, rig.clock.now(), rig.clock.now(), "lid:2");
      rig.call->outcome(outcome(sm::EventKind::HandoverDone, reason));
      // In the same engine step: this head MASTER again after the target took over.
      rig.call->event(transition(SmState::Standby, SmState::Master, reason, rig.clock.now() + 1ms));
      auto r = rig.run();
      CHECK(r.result == ResultCode::Error);
      CHECK_THAT(r.data["outcome"].get<std::string>(), Catch::StartsWith("flip-back: head01 (this head) was MASTER"));
    }
  }
}

TEST_CASE("handover reply: no outcome by the deadline is a timeout", "[service][handover]") {
  // The deadline counts from when the call was made (the Rig makes it), so
  // the test's clock starts before that; started after, it read 49.8 ms once.
  const auto t0 = std::chrono::steady_clock::now();
  Rig rig;
  rig.call->start(50ms);
  auto r = rig.run();
  CHECK(std::chrono::steady_clock::now() - t0 >= 50ms);
  CHECK(r.result == ResultCode::Error);
  CHECK(r.data["outcome"] == "timeout");
  rig.call->outcome(outcome(sm::EventKind::HandoverDone, ""));  // too late: no second reply
  rig.io.restart();
  rig.io.run();
  CHECK(rig.replies == 1);
}
