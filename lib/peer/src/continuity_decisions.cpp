// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/peer/continuity_decisions.hpp"

#include <algorithm>

namespace smha::peer {

namespace {

double seconds_between(WallTime a, WallTime b) { return std::chrono::duration<double>(b - a).count(); }

std::string secs(double s) { return std::to_string(static_cast<long long>(std::max(0.0, s))) + " s"; }

// Refusals that say the master's current content cannot be held here: raised at once.
bool refused_content(RefuseReason r) {
  return r == RefuseReason::Older || r == RefuseReason::Future || r == RefuseReason::Replayed ||
         r == RefuseReason::TooLarge || r == RefuseReason::Malformed || r == RefuseReason::WriteFailed;
}

}  // namespace

void ContinuityDecisions::start(TimePoint now, WallTime wall) {
  started_ = now;
  not_master_at_ = wall;
}

ContinuityDecisions::Step ContinuityDecisions::step(const InBandFacts& f, TimePoint now, WallTime wall) {
  Step s;
  s.master = f.master && *f.master == own_guid_ && f.local_state == SmState::Master;
  if (s.master != master_) {
    master_ = s.master;
    s.changed = true;
    // A dump from before this moment is not this mastership's (it may be
    // later than OpenSM's own MASTER: the cost is a dump held back, never a
    // stale one sent).
    if (s.master) s.master_since = not_master_at_;
    // What this head's OpenSM had to restore when it became MASTER: the
    // copy in its sa_db_file then (OpenSM read it on that first master sweep).
    s.note_takeover = s.master && now - started_ > tick_ * 2;
  }
  if (!s.master) not_master_at_ = wall;
  return s;
}

std::string ContinuityDecisions::stale_detail(const InBandFacts& f, const SaCopyFacts& c, TimePoint now,
                                              WallTime wall) {
  if (master_) return {};
  if (f.master) no_master_since_.reset();
  else if (!no_master_since_) no_master_since_ = now;
  const bool grace_over = now - started_ >= max_copy_age_;
  const double bound = std::chrono::duration<double>(max_copy_age_).count();
  const HeldCopy* h = c.held;
  const MasterNotice* n = c.notice;
  const Refusal* r = c.refusal;
  const double copy_age = h ? std::max(0.0, seconds_between(h->confirmed, wall)) : 0;
  const std::string refused =
      r ? "copies from " + r->from + " refused as " + std::string(to_string(r->reason)) + ": " + r->text : "";
  std::string why;
  if (n && (h ? n->received >= h->confirmed : grace_over))
    why = "not sent: " + n->problem + " (" + n->from + "'s SA moved on from the last copy " +
          secs(seconds_between(n->since, wall)) + " ago)";
  else if (r && refused_content(r->reason))
    why = refused;
  else if (!f.master) {
    if (grace_over && no_master_since_ && now - *no_master_since_ >= max_copy_age_ && (!h || copy_age > bound))
      why = "no MASTER seen in this head's polling for " +
            secs(std::chrono::duration<double>(now - *no_master_since_).count());
  } else if (grace_over && !h)
    why = "no copy yet from the master (SM " + to_string(*f.master) + ")" + (r ? "; " + refused : "");
  else if (grace_over && copy_age > bound)
    why = "no copy or confirmation from the master for " + secs(copy_age) + " (bound " + secs(bound) + ")" +
          (r ? "; " + refused : "");
  if (why.empty()) return why;
  if (!h) return why + ": a takeover by this head now restores no multicast group, ServiceRecord or subscription";
  const double content_age = std::max(0.0, seconds_between(h->written, wall));
  return why + ": a takeover by this head now restores the SA copy from " + h->from + " generation " +
         std::to_string(h->generation) + ", its content written " + secs(content_age) + " ago (" +
         opensm::summary_text(h->sa) + ")";
}

std::string ContinuityDecisions::trimmed_detail(const std::string& sender_trimmed, const HeldCopy* held) const {
  if (master_) return sender_trimmed.empty() ? "" : "the SA copy sent to the standbys leaves out " + sender_trimmed;
  return held && !held->trimmed.empty() ? "the SA copy from " + held->from + " leaves out " + held->trimmed : "";
}

}  // namespace smha::peer
