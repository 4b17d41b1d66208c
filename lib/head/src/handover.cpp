// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/head/handover.hpp"

namespace smha::head {

using control::Reply;
using control::ResultCode;
using nlohmann::json;

HandoverCall::HandoverCall(Scheduler& sched, std::shared_ptr<MastershipWindow> window, Master master, Finish finish)
    : sched_(sched),
      window_(std::move(window)),
      master_(std::move(master)),
      finish_(std::move(finish)),
      t0_(sched.now()) {}

HandoverCall::~HandoverCall() {
  if (deadline_) sched_.cancel(*deadline_);
}

void HandoverCall::start(Duration limit) {
  if (finished_) return;
  if (deadline_) sched_.cancel(*deadline_);
  const Duration left = t0_ + limit - sched_.now();
  std::weak_ptr<HandoverCall> self = weak_from_this();
  deadline_ = sched_.schedule_in(left > Duration::zero() ? left : Duration::zero(), [self] {
    if (auto s = self.lock()) {
      s->deadline_.reset();
      s->end();
    }
  });
}

void HandoverCall::outcome(const sm::RecordEvent& e) {
  if (finished_) return;
  if (e.kind == sm::EventKind::HandoverDone) {
    if (outcome_.empty()) outcome_ = "done";
  } else {
    outcome_ = std::string(sm::to_string(e.kind)) + (e.reason.empty() ? "" : ": " + e.reason);
  }
  end_soon();
}

void HandoverCall::event(const EventRecord& e) {
  if (finished_) return;
  window_->event(e);
  check();
}

void HandoverCall::check() {
  if (!finished_ && window_->violation()) end_soon();
}

void HandoverCall::end_soon() {
  if (end_posted_) return;
  end_posted_ = true;
  sched_.post([self = shared_from_this()] { self->end(); });
}

void HandoverCall::end() {
  if (finished_) return;
  finished_ = true;
  if (deadline_) sched_.cancel(*deadline_);
  deadline_.reset();
  if (const auto& v = window_->violation()) outcome_ = *v;
  const double ms = std::chrono::duration<double, std::milli>(sched_.now() - t0_).count();
  const auto master = master_();
  json data{{"duration_ms", ms},
            {"master", master ? json(to_string(*master)) : json(nullptr)},
            {"mastership", window_->summary()}};
  auto finish = std::move(finish_);
  if (outcome_ == "done") {
    data["outcome"] = "done";
    finish(Reply::ok(data, "handover done in " + std::to_string(static_cast<int>(ms)) + " ms"));
  } else {
    data["outcome"] = outcome_.empty() ? "timeout" : outcome_;
    finish(Reply::failure(ResultCode::Error, "handover failed: " + data["outcome"].get<std::string>(), data));
  }
}

}  // namespace smha::head
