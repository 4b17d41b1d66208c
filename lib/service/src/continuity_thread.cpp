// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/service/continuity_thread.hpp"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <spdlog/spdlog.h>

#include "smha/service/metrics_service.hpp"

namespace smha::service {

namespace asio = boost::asio;

// The alarm sink the peer thread's Continuity raises into: each call is
// posted to the main loop, where the real sink runs. Posts that arrive after
// stop() find `alive` false and do nothing.
class ContinuityThread::PostingSink final : public AlarmSink {
 public:
  PostingSink(asio::io_context& main_io, AlarmSink& target)
      : main_io_(main_io), target_(target), alive_(std::make_shared<bool>(true)) {}
  void alarm(const RaiseAlarm& a, TimePoint at) override {
    asio::post(main_io_, [alive = alive_, &t = target_, a, at] {
      if (*alive) t.alarm(a, at);
    });
  }
  void clear(const ClearAlarm& a, TimePoint at) override {
    asio::post(main_io_, [alive = alive_, &t = target_, a, at] {
      if (*alive) t.clear(a, at);
    });
  }
  // Main loop only.
  void disconnect() { *alive_ = false; }

 private:
  asio::io_context& main_io_;
  AlarmSink& target_;
  std::shared_ptr<bool> alive_;  // read and written on the main loop only
};

ContinuityThread::ContinuityThread(peer::ContinuityConfig cfg, os::FileSystem& fs, const Clock& clock,
                                   Scheduler& main_sched, asio::io_context& main_io, peer::Continuity::Facts facts,
                                   AlarmSink& alarms, ContinuityThreadOptions opts)
    : clock_(clock),
      main_sched_(main_sched),
      facts_(std::move(facts)),
      opts_(opts),
      sched_(io_, clock),
      sink_(std::make_unique<PostingSink>(main_io, alarms)) {
  continuity_ = std::make_unique<peer::Continuity>(
      io_, std::move(cfg), fs, clock_, sched_,
      [this] {
        std::lock_guard lock(mu_);
        return facts_now_;
      },
      *sink_);
}

ContinuityThread::~ContinuityThread() { stop(); }

void ContinuityThread::sample_facts() {
  facts_timer_ = main_sched_.schedule_in(opts_.facts_interval, [this] { sample_facts(); });
  const peer::InBandFacts f = facts_();
  std::lock_guard lock(mu_);
  facts_now_ = f;
}

void ContinuityThread::publish() {
  snapshot_timer_ = sched_.schedule_in(opts_.snapshot_interval, [this] { publish(); });
  Snapshot s;
  s.status = continuity_->status();
  s.metrics = continuity_metrics(*continuity_);
  s.sa_copy = continuity_->sa_copy_info();
  std::lock_guard lock(mu_);
  s.count = snapshot_.count + 1;
  snapshot_ = std::move(s);
}

Status ContinuityThread::start() {
  if (running_) return Status::Ok();
  // The first sample on the main loop's next turn (the engine it reads may
  // not exist before the head starts), well before the channel's first tick.
  facts_timer_ = main_sched_.schedule_in(Duration::zero(), [this] { sample_facts(); });
  if (auto st = continuity_->start(); !st.ok()) {
    if (facts_timer_) main_sched_.cancel(*facts_timer_);
    facts_timer_.reset();
    return st;
  }
  publish();  // the io_context does not run yet: this thread may still touch it
  running_ = true;
  thread_ = std::thread([this] {
    // Lower this thread's CPU priority only (a Linux thread id is a process
    // id to setpriority). Failing to is harmless: it runs at smhad's.
    if (::setpriority(PRIO_PROCESS, static_cast<id_t>(::syscall(SYS_gettid)), opts_.nice) != 0)
      spdlog::debug("continuity: could not lower the peer thread's priority: {}", std::strerror(errno));
    auto guard = asio::make_work_guard(io_);
    io_.run();
  });
  return Status::Ok();
}

void ContinuityThread::stop() {
  if (facts_timer_) main_sched_.cancel(*facts_timer_);
  facts_timer_.reset();
  sink_->disconnect();
  if (!running_) return;
  running_ = false;
  asio::post(io_, [this] {
    if (snapshot_timer_) sched_.cancel(*snapshot_timer_);
    snapshot_timer_.reset();
    continuity_->stop();
    io_.stop();
  });
  thread_.join();
}

peer::ContinuityStatus ContinuityThread::status() const {
  std::lock_guard lock(mu_);
  return snapshot_.status;
}

control::ContinuityMetrics ContinuityThread::metrics() const {
  std::lock_guard lock(mu_);
  return snapshot_.metrics;
}

std::optional<fabric::SaCopyInfo> ContinuityThread::sa_copy_info() const {
  std::lock_guard lock(mu_);
  return snapshot_.sa_copy;
}

std::uint64_t ContinuityThread::snapshots() const {
  std::lock_guard lock(mu_);
  return snapshot_.count;
}

}  // namespace smha::service
