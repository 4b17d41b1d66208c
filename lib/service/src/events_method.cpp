// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/service/events_method.hpp"

#include <algorithm>

#include <boost/asio/post.hpp>

#include "smha/head/event_journal.hpp"
#include "smha/head/takeover_report_json.hpp"

namespace smha::service {

using head::add_event_state_fields;
using head::event_nodes_json;
using head::EventRecord;
using head::format_utc;
using head::LogEventSink;
using head::takeover_report_json;

using control::Reply;
using control::ResultCode;
using nlohmann::json;

json event_to_json(const EventRecord& e) {
  json j{{"seq", e.seq}, {"time", format_utc(e.wall)}, {"kind", e.kind}, {"reason", e.reason},
         {"evidence", e.evidence}};
  add_event_state_fields(j, e);
  if (!e.nodes.empty()) j["nodes"] = event_nodes_json(e.nodes, true);
  if (e.report) j["report"] = takeover_report_json(*e.report);
  return j;
}

EventsMethod::EventsMethod(boost::asio::io_context& io, LogEventSink& sink, const Clock& clock)
    : io_(io), sink_(sink), clock_(clock) {
  std::weak_ptr<int> alive = alive_;
  sink_.add_listener([this, alive](const EventRecord&) {
    if (alive.expired() || waiters_.empty() || wake_posted_) return;
    wake_posted_ = true;
    boost::asio::post(io_, [this, alive] {
      if (alive.expired()) return;
      wake_posted_ = false;
      wake();
    });
  });
}

EventsMethod::~EventsMethod() {
  alive_.reset();
  for (auto& w : waiters_) {
    w->done = true;
    if (w->timer) w->timer->cancel();
  }
}

Status EventsMethod::attach(control::ControlServer& server) {
  return server.register_async_method(control::method::kEvents, control::Access::ReadOnly,
                                      [this](const control::Call& call, control::Responder r) {
                                        handle(call, std::move(r));
                                      },
                                      control::method_params(control::method::kEvents));
}

json EventsMethod::collect(std::uint64_t after, std::size_t n) const {
  json arr = json::array();
  for (const auto& e : sink_.events()) {
    if (e.seq <= after) continue;
    arr.push_back(event_to_json(e));
    if (arr.size() >= n) break;
  }
  return arr;
}

void EventsMethod::handle(const control::Call& call, control::Responder respond) {
  namespace param = control::param;
  const json& p = call.params;
  std::size_t n = 20;
  if (p.contains(param::kN)) {
    if (!p[param::kN].is_number_unsigned() || p[param::kN].get<std::size_t>() == 0) {
      respond(Reply::failure(ResultCode::BadRequest, "events: n must be a positive integer"));
      return;
    }
    n = p[param::kN].get<std::size_t>();
  }
  const auto& ev = sink_.events();
  const std::uint64_t last = ev.empty() ? 0 : ev.back().seq;
  if (!p.contains(param::kAfter)) {
    if (p.contains(param::kWaitS)) {
      respond(Reply::failure(ResultCode::BadRequest, "events: wait_s needs after"));
      return;
    }
    json arr = json::array();
    const std::size_t from = ev.size() > n ? ev.size() - n : 0;
    for (std::size_t i = from; i < ev.size(); ++i) arr.push_back(event_to_json(ev[i]));
    respond(Reply::ok(json{{"events", arr}, {"last_seq", last}}));
    return;
  }
  if (!p[param::kAfter].is_number_unsigned()) {
    respond(Reply::failure(ResultCode::BadRequest, "events: after must be a sequence number (integer >= 0)"));
    return;
  }
  const auto after = p[param::kAfter].get<std::uint64_t>();
  double wait_s = 0;
  if (p.contains(param::kWaitS)) {
    if (!p[param::kWaitS].is_number() || p[param::kWaitS].get<double>() <= 0 ||
        p[param::kWaitS].get<double>() > kMaxEventsWaitSeconds) {
      respond(Reply::failure(ResultCode::BadRequest, "events: wait_s must be a number in (0, 300]"));
      return;
    }
    wait_s = p[param::kWaitS].get<double>();
  }
  json arr = collect(after, n);
  // after > last: the history restarted below it; answer now so the client resyncs.
  if (!arr.empty() || wait_s == 0 || after > last) {
    respond(Reply::ok(json{{"events", arr}, {"last_seq", last}}));
    return;
  }
  auto w = std::make_shared<Waiter>(Waiter{after, n, std::move(respond), nullptr, false});
  w->timer = std::make_unique<boost::asio::steady_timer>(io_);
  waiters_.push_back(w);
  arm(w, clock_.now() + std::chrono::duration_cast<Duration>(std::chrono::duration<double>(wait_s)));
}

// Wakes at the deadline, and once a second before it to drop a client that hung up.
void EventsMethod::arm(const std::shared_ptr<Waiter>& w, TimePoint deadline) {
  w->timer->expires_after(std::clamp<Duration>(deadline - clock_.now(), Duration::zero(), std::chrono::seconds(1)));
  std::weak_ptr<int> alive = alive_;
  w->timer->async_wait([this, alive, w, deadline](const boost::system::error_code& ec) {
    if (ec || alive.expired() || w->done) return;
    if (!w->respond.client_connected()) {
      w->done = true;
      waiters_.remove(w);
      return;  // the Responder's reply to a gone client is dropped
    }
    if (clock_.now() >= deadline) {
      finish(w);
      return;
    }
    arm(w, deadline);
  });
}

void EventsMethod::finish(const std::shared_ptr<Waiter>& w) {
  if (w->done) return;
  w->done = true;
  if (w->timer) w->timer->cancel();
  const auto& ev = sink_.events();
  w->respond(Reply::ok(json{{"events", collect(w->after, w->n)}, {"last_seq", ev.empty() ? 0 : ev.back().seq}}));
  waiters_.remove(w);
}

void EventsMethod::wake() {
  auto ready = waiters_;  // finish() edits the list
  for (auto& w : ready)
    if (!w->done && !collect(w->after, 1).empty()) finish(w);
}

}  // namespace smha::service
