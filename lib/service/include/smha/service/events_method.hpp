// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// The `events` control method (doc/control-protocol.md): the recent history of
// a LogEventSink, and long polling for `smctl events --follow`.
//
//   params {"n": N}                      the newest N events (default 20)
//   params {"after": S}                  events with seq > S, oldest first, at most n
//   params {"after": S, "wait_s": W}     the same, but if there is none yet the reply
//                                        waits up to W seconds (0 < W <= 300) for one
//   data   {"events": [...], "last_seq": newest seq, 0 if none}
//
// A waiting call is answered as soon as an event arrives (events recorded in the
// same step of the event loop come together), at W with no events, or dropped when
// the client hangs up. Single-threaded (the io_context's thread).
#pragma once

#include <cstdint>
#include <list>
#include <memory>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <nlohmann/json.hpp>

#include "smha/control/server.hpp"
#include "smha/service/service.hpp"

namespace smha::service {

inline constexpr double kMaxEventsWaitSeconds = 300;

// {"seq","time","kind","reason","evidence"} of one event, and "from", "to",
// "preempt" and "nodes" where set.
nlohmann::json event_to_json(const head::EventRecord& e);

class EventsMethod {
 public:
  // `sink` and `clock` must outlive this object.
  EventsMethod(boost::asio::io_context& io, head::LogEventSink& sink, const Clock& clock);
  ~EventsMethod();
  EventsMethod(const EventsMethod&) = delete;
  EventsMethod& operator=(const EventsMethod&) = delete;

  // Registers "events" (read-only, async) on `server`.
  Status attach(control::ControlServer& server);
  void handle(const control::Call& call, control::Responder respond);
  std::size_t waiting() const { return waiters_.size(); }

 private:
  struct Waiter {
    std::uint64_t after = 0;
    std::size_t n = 0;
    control::Responder respond;
    std::unique_ptr<boost::asio::steady_timer> timer;
    bool done = false;
  };
  nlohmann::json collect(std::uint64_t after, std::size_t n) const;
  void wake();
  void arm(const std::shared_ptr<Waiter>& w, TimePoint deadline);
  void finish(const std::shared_ptr<Waiter>& w);

  boost::asio::io_context& io_;
  head::LogEventSink& sink_;
  const Clock& clock_;
  std::list<std::shared_ptr<Waiter>> waiters_;
  bool wake_posted_ = false;
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
};

}  // namespace smha::service
