// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// Continuity: one head's part in keeping the SA database and guid2lid across
// a takeover (doc/continuity.md). Every second it asks the head's own SMInfo
// polling who is MASTER:
//   - this head's OpenSM MASTER: outbound connections on; CopySender's due
//     copies go to every peer;
//   - otherwise: outbound off; copies and notices that arrive are judged by
//     CopyStore; the alarm sa_copy_stale names why the SA copy held here is
//     not the master's current SA: the master's notice ("not sent: ..."), a
//     copy refused as older/future/replayed/malformed/too_large/write_failed
//     (both at once), no MASTER seen, no copy yet, or no confirmation within
//     max_copy_age (these after a start grace of the same length).
// An SA dump written before this head's OpenSM became MASTER (the last tick
// that saw it not MASTER, or smhad's start) is never sent.
// sa_copy_trimmed is raised on the master while its SA copy leaves records
// out (CopySender::trimmed()), and on a standby while the copy it holds says
// so (HeldCopy::trimmed).
// The channel never takes part in a decision: the agent's engine neither
// reads nor waits for anything here.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/io_context.hpp>

#include "smha/core/alarm.hpp"
#include "smha/core/clock.hpp"
#include "smha/core/scheduler.hpp"
#include "smha/fabric/takeover_report.hpp"
#include "smha/os/file_system.hpp"
#include "smha/peer/channel.hpp"
#include "smha/peer/continuity_decisions.hpp"
#include "smha/peer/continuity_status.hpp"
#include "smha/peer/copy_store.hpp"

namespace smha::peer {

struct ContinuityConfig {
  std::string fabric;
  std::string own_name;
  Guid own_guid;
  ChannelConfig channel;
  CopyStoreConfig store;
  CopySenderConfig sender;
  Duration tick = seconds(1);
  Duration max_copy_age = seconds(120);
};

class Continuity {
 public:
  using Facts = std::function<InBandFacts()>;
  Continuity(boost::asio::io_context& io, ContinuityConfig cfg, os::FileSystem& fs, const Clock& clock,
             Scheduler& sched, Facts facts, AlarmSink& alarms);
  ~Continuity();
  Continuity(const Continuity&) = delete;
  Continuity& operator=(const Continuity&) = delete;

  // Reads what an earlier run left, loads the TLS files, listens. On an error
  // (named: the file, the address) nothing runs.
  Status start();
  void stop();

  // status.continuity, typed (continuity_status.hpp): the store's copies and
  // counts, the sender's, the channel's links and counters. Runs on the peer
  // thread; ContinuityThread hands it to the main loop, which renders it.
  ContinuityStatus status() const;
  const CopyStore& store() const { return store_; }
  const CopySender& sender() const { return sender_; }
  const PeerChannel& channel() const { return *channel_; }
  bool sending() const { return decisions_.master(); }
  // Seconds since the master last confirmed the copy of `kind` held; nullopt: none held.
  std::optional<double> copy_age_s(FrameKind kind = FrameKind::SaDump) const;
  // Seconds since the master's OpenSM wrote the content of the copy held; nullopt: none held.
  std::optional<double> content_age_s(FrameKind kind = FrameKind::SaDump) const;
  // Whether the SA copy held is current (doc/continuity.md): confirmed within
  // max_copy_age and no notice since. Otherwise `ret_why` says why.
  bool sa_copy_current(std::string* ret_why = nullptr) const;
  // The SA copy held, for the takeover report (nullopt: none).
  std::optional<fabric::SaCopyInfo> sa_copy_info() const;

 private:
  void tick();
  void note_takeover();
  std::optional<CopyStatus> copy_status(FrameKind kind) const;
  // Answers `older` holding a generation above ours: continue above it.
  void follow_answers();
  ContinuityConfig cfg_;
  const Clock& clock_;
  Scheduler& sched_;
  Facts facts_;
  AlarmSink& alarms_;
  CopyStore store_;
  CopySender sender_;
  std::unique_ptr<PeerChannel> channel_;
  ContinuityDecisions decisions_;  // outbound on or off, the alarms' details
  std::optional<Scheduler::TimerId> timer_;
  std::string alarm_;           // the sa_copy_stale detail raised ("" none)
  std::string trim_alarm_;      // the sa_copy_trimmed detail raised ("" none)
  std::string logged_refusal_;  // the last refusal logged
  std::string logged_notice_;   // the last notice logged (sent or received)
  std::optional<TakeoverCopies> at_takeover_;  // note_takeover()'s record
};

}  // namespace smha::peer
