// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// ContinuityDecisions: what Continuity (continuity.hpp) decides each tick,
// without its channel, files, timers or clock: whether outbound copies are on
// (only while this head's OpenSM is MASTER), what a change of that means (the
// dumps a new mastership may send, whether to record what the takeover
// restored), and the details of the alarms sa_copy_stale and sa_copy_trimmed
// ("" clears). Pure: every time is an argument; nothing here does I/O.
#pragma once

#include <optional>
#include <string>

#include "smha/core/clock.hpp"
#include "smha/core/types.hpp"
#include "smha/peer/copy_store.hpp"

namespace smha::peer {

// What the store holds of the SA copy (each may be null: none).
struct SaCopyFacts {
  const HeldCopy* held = nullptr;
  const MasterNotice* notice = nullptr;
  const Refusal* refusal = nullptr;
};

class ContinuityDecisions {
 public:
  ContinuityDecisions(Guid own_guid, Duration tick, Duration max_copy_age)
      : own_guid_(own_guid), tick_(tick), max_copy_age_(max_copy_age) {}

  // smhad's start: the start grace and "not MASTER since" run from here.
  void start(TimePoint now, WallTime wall);

  struct Step {
    bool master = false;   // this head's OpenSM is MASTER: outbound copies on; else off
    bool changed = false;  // `master` differs from the last step: connect (on) or disconnect (off) now
    // Became MASTER: a dump written before this is not this mastership's and is not sent.
    std::optional<WallTime> master_since;
    // Became MASTER after the first two ticks: record what the takeover restored.
    bool note_takeover = false;
  };
  // One tick with the head's polling's latest facts.
  Step step(const InBandFacts& facts, TimePoint now, WallTime wall);
  bool master() const { return master_; }

  // sa_copy_stale's detail after this tick's step ("" clears; always "" on the
  // MASTER): the master's notice that its current SA was not sent, a copy
  // refused as older/future/replayed/malformed/too_large/write_failed, no
  // MASTER seen, no copy yet or none confirmed within max_copy_age (these
  // three only after a start grace of max_copy_age), and what a takeover by
  // this head would restore.
  std::string stale_detail(const InBandFacts& facts, const SaCopyFacts& copy, TimePoint now, WallTime wall);
  // sa_copy_trimmed's detail: on the MASTER what its SA copy leaves out
  // (`sender_trimmed`), on a standby what the copy held says it lacks.
  std::string trimmed_detail(const std::string& sender_trimmed, const HeldCopy* held) const;

 private:
  Guid own_guid_;
  Duration tick_;
  Duration max_copy_age_;
  TimePoint started_{};
  bool master_ = false;
  // The last time this head was seen not MASTER (the start at first): a dump
  // older than that is not this mastership's.
  std::optional<WallTime> not_master_at_;
  std::optional<TimePoint> no_master_since_;  // this head's polling sees no MASTER
};

}  // namespace smha::peer
