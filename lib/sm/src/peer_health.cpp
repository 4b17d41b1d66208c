// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/sm/peer_health.hpp"

#include <algorithm>
#include <cmath>

#include "smha/sm/ha_machine.hpp"

namespace smha::sm {
namespace {

bool answered(const PeerProbe& p) { return p.via_lid.info || p.via_dr.info; }

const SmInfo* best_info(const PeerProbe& p) {
  if (p.via_lid.info) return &*p.via_lid.info;
  if (p.via_dr.info) return &*p.via_dr.info;
  return nullptr;
}

}  // namespace

PeerHealth::PeerHealth(const std::vector<PeerSpec>& peers) {
  for (const auto& p : peers) {
    PeerTrack t;
    t.spec = p;
    peers_.push_back(t);
  }
}

void PeerHealth::observe(const PollRound& r, TimePoint now) {
  track_peers(r, now);
  update_loss(r);
}

void PeerHealth::track_peers(const PollRound& r, TimePoint now) {
  streak_miss_ *= 0.99;
  streak_total_ *= 0.99;
  for (auto& t : peers_) {
    t.answered = false;
    auto it = std::find_if(r.peers.begin(), r.peers.end(),
                           [&](const PeerProbe& p) { return p.guid == t.spec.guid; });
    if (it == r.peers.end()) continue;
    t.port = it->port;
    if (it->via_lid.queried || it->via_dr.queried) streak_total_ += 1;
    if (const SmInfo* i = best_info(*it)) {
      t.answered = true;
      streak_miss_ += t.misses;  // the streak ended: those rounds were lost MADs
      t.misses = 0;
      t.last = *i;
      t.last_answer_at = now;
      if (i->state == SmState::Master) t.master_at = now;
    } else if (it->via_lid.queried || it->via_dr.queried) {
      ++t.misses;
      t.refused = (!it->via_lid.queried || it->via_lid.refused) &&
                  (!it->via_dr.queried || it->via_dr.refused);
    }
  }
}

void PeerHealth::update_loss(const PollRound& r) {
  loss_fail_ *= 0.99;
  loss_total_ *= 0.99;
  fast_fail_ *= 0.8;
  fast_total_ *= 0.8;
  for (const auto& p : r.peers) {
    if (!p.via_lid.queried || !p.via_dr.queried || !answered(p)) continue;
    const int failed = (p.via_lid.info ? 0 : 1) + (p.via_dr.info ? 0 : 1);
    loss_fail_ += failed;
    loss_total_ += 2;
    fast_fail_ += failed;
    fast_total_ += 2;
  }
}

double PeerHealth::round_miss_estimate() const {
  // Query level: in rounds where a peer answered on one path at least, the
  // other path's failures are loss. Conditioning on "at least one answered"
  // biases the ratio r to x / (1 + x) for a true failure rate x: undo that.
  // Two windows: a slow one (~100 rounds) for steady loss and a fast one (~5
  // rounds) so the bar rises within a round or two of a loss burst starting.
  auto from_ratio = [](double fail, double total, double min_total) {
    if (total < min_total) return 0.0;
    const double r = fail / total;
    const double x = r < 0.5 ? r / (1 - r) : 1.0;
    return x * x;  // both paths must fail for a round to miss
  };
  const double q1 = std::max(from_ratio(loss_fail_, loss_total_, 5),
                             from_ratio(fast_fail_, fast_total_, 2));
  // Round level: miss streaks that ended with the peer answering again.
  double q2 = 0;
  if (streak_total_ >= 5) q2 = streak_miss_ / streak_total_;
  return std::min(1.0, std::max(q1, q2));
}

int PeerHealth::required_rounds(int misses, double false_alarm_target) const {
  const int base = misses;
  const double q = round_miss_estimate();
  if (q <= 0) return base;
  if (q >= 1) return 4 * base;
  const int n = static_cast<int>(std::ceil(std::log(false_alarm_target) / std::log(q)));
  return std::clamp(n, base, 4 * base);
}

}  // namespace smha::sm
