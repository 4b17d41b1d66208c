// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// The peer channel on a thread of its own (doc/continuity.md, "The event
// loop"). Everything peer::Continuity does — TLS handshakes, frames, reading,
// parsing, checking and writing copies — runs on this thread's io_context, so
// no peer, honest or hostile, can make smhad's main loop (the HA engine, the
// SMInfo polls, the control socket) wait.
//
// The two loops meet only here, and never wait for each other:
//   - in-band facts go out: every `facts_interval` the main loop samples its
//     engine's latest round and leaves it under a mutex for the peer thread;
//   - alarms come back: the peer thread posts each raise or clear to the main
//     loop, where the alarm sink runs as for every other alarm;
//   - status comes back: every `snapshot_interval` (and after start) the peer
//     thread leaves a snapshot of what the main loop shows (the typed status,
//     metrics, the SA copy for the takeover report) under a mutex. Readers
//     on the main loop copy it; the status reply's ages are as of the reply
//     (it keeps times), the rest is at most that interval old.
// The peer thread runs at a lower CPU priority (nice +10): under load the
// main loop's threads win.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include <boost/asio/io_context.hpp>

#include "smha/control/metrics.hpp"
#include "smha/core/alarm.hpp"
#include "smha/core/clock.hpp"
#include "smha/core/scheduler.hpp"
#include "smha/fabric/takeover_report.hpp"
#include "smha/os/asio_scheduler.hpp"
#include "smha/os/file_system.hpp"
#include "smha/peer/continuity.hpp"

namespace smha::service {

struct ContinuityThreadOptions {
  Duration facts_interval = milliseconds(100);
  Duration snapshot_interval = milliseconds(250);
  int nice = 10;
};

class ContinuityThread {
 public:
  // `facts` and `alarms` belong to the main loop (`main_sched`'s): `facts` is
  // called only there, `alarms` only from there.
  ContinuityThread(peer::ContinuityConfig cfg, os::FileSystem& fs, const Clock& clock, Scheduler& main_sched,
                   boost::asio::io_context& main_io, peer::Continuity::Facts facts, AlarmSink& alarms,
                   ContinuityThreadOptions opts = {});
  ~ContinuityThread();
  ContinuityThread(const ContinuityThread&) = delete;
  ContinuityThread& operator=(const ContinuityThread&) = delete;

  // Loads the TLS files and listens (Continuity::start, before the thread
  // runs: its errors are returned here), then starts the thread.
  Status start();
  // Stops the channel on its thread and joins it. Idempotent.
  void stop();

  // The latest snapshot (main loop).
  peer::ContinuityStatus status() const;
  control::ContinuityMetrics metrics() const;
  std::optional<fabric::SaCopyInfo> sa_copy_info() const;
  // How many snapshots the peer thread has published (tests wait on it).
  std::uint64_t snapshots() const;

 private:
  struct Snapshot {
    peer::ContinuityStatus status;
    control::ContinuityMetrics metrics;
    std::optional<fabric::SaCopyInfo> sa_copy;
    std::uint64_t count = 0;
  };
  class PostingSink;
  void sample_facts();
  void publish();  // peer thread

  const Clock& clock_;
  Scheduler& main_sched_;
  peer::Continuity::Facts facts_;
  ContinuityThreadOptions opts_;
  boost::asio::io_context io_;  // the peer thread's loop
  os::AsioScheduler sched_;     // timers on io_
  std::unique_ptr<PostingSink> sink_;
  std::unique_ptr<peer::Continuity> continuity_;
  std::thread thread_;
  std::optional<Scheduler::TimerId> facts_timer_;     // main loop
  std::optional<Scheduler::TimerId> snapshot_timer_;  // peer thread
  bool running_ = false;

  mutable std::mutex mu_;
  peer::InBandFacts facts_now_;  // guarded by mu_
  Snapshot snapshot_;            // guarded by mu_
};

}  // namespace smha::service
