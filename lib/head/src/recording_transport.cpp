// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/head/recording_transport.hpp"

namespace smha::head {

bool RecordingTransport::TargetLess::operator()(const mad::Target& a, const mad::Target& b) const {
  if (a.index() != b.index()) return a.index() < b.index();
  if (const auto* la = std::get_if<Lid>(&a)) return la->value < std::get<Lid>(b).value;
  return std::get<DrPath>(a).hops < std::get<DrPath>(b).hops;
}

bool RecordingTransport::PortKeyLess::operator()(const std::pair<mad::Target, std::uint8_t>& a,
                                                 const std::pair<mad::Target, std::uint8_t>& b) const {
  const TargetLess less;
  if (less(a.first, b.first)) return true;
  if (less(b.first, a.first)) return false;
  return a.second < b.second;
}

std::string RecordingTransport::via_text(const mad::Target& t) {
  if (const auto* lid = std::get_if<Lid>(&t)) return "lid:" + std::to_string(lid->value);
  return "dr:" + to_string(std::get<DrPath>(t));
}

void PollStats::record(bool ok, Duration rtt) {
  if (!ok) {
    ++missed;
    return;
  }
  const double s = std::chrono::duration<double>(rtt).count();
  ++answered;
  rtt_sum_s += s;
  for (std::size_t i = 0; i < std::size(kBounds); ++i)
    if (s <= kBounds[i]) ++buckets[i];
}

void RecordingTransport::get_sminfo(const mad::Target& target, const mad::RequestOptions& opts,
                                    mad::SmInfoCallback done) {
  std::weak_ptr<State> state = state_;
  const Clock* clock = &clock_;
  const TimePoint sent = clock_.now();
  inner_.get_sminfo(target, opts, [state, clock, sent, target, done = std::move(done)](Result<mad::SmInfoReply> r) {
    if (auto st = state.lock()) {
      const TimePoint now = clock->now();
      if (st->sminfo_tap && r.ok()) st->sminfo_tap(r.value().info, sent, now, target);
      TargetRecord rec;
      rec.at = now;
      rec.answered = r.ok();
      st->stats.record(r.ok(), r.ok() ? r.value().rtt : Duration{});
      if (r.ok()) {
        rec.guid = r.value().info.guid;
        st->seen[r.value().info.guid.value] = SmSighting{r.value().info, r.value().rtt, now};
        st->master.observe(r.value().info, now, clock->wall_now());
      }
      st->targets[target] = rec;
    }
    done(std::move(r));
  });
}

void RecordingTransport::set_sminfo(const mad::Target& target, SmInfoModifier mod,
                                    const SmInfo& payload, const mad::RequestOptions& opts,
                                    mad::SmInfoCallback done) {
  if (read_only_) {
    done(make_error(Errc::Observe, "SubnSet(SMInfo) refused: observe mode"));
    return;
  }
  inner_.set_sminfo(target, mod, payload, opts, std::move(done));
}

void RecordingTransport::get_port_info(const mad::Target& target, std::uint8_t port,
                                       const mad::RequestOptions& opts,
                                       mad::PortInfoCallback done) {
  std::weak_ptr<State> state = state_;
  const Clock* clock = &clock_;
  const TimePoint sent = clock_.now();
  const auto* dr = std::get_if<DrPath>(&target);
  const bool local = dr != nullptr && dr->hops.empty();
  inner_.get_port_info(target, port, opts,
                       [state, clock, sent, local, key = std::make_pair(target, port),
                        done = std::move(done)](Result<mad::PortInfoReply> r) {
                         if (auto st = state.lock()) {
                           PortRecord& rec = st->ports[key];
                           rec.at = clock->now();
                           if (st->local_port_tap && local && r.ok()) st->local_port_tap(r.value().info, sent, rec.at);
                           rec.answered = r.ok();
                           if (r.ok()) {
                             rec.info = r.value().info;
                             rec.info_at = rec.at;
                           }
                         }
                         done(std::move(r));
                       });
}

std::optional<PortRecord> RecordingTransport::last_port_info(const mad::Target& target,
                                                             std::uint8_t port) const {
  auto it = state_->ports.find(std::make_pair(target, port));
  if (it == state_->ports.end()) return std::nullopt;
  return it->second;
}

void MasterWatch::observe(const SmInfo& info, TimePoint now, std::chrono::system_clock::time_point wall) {
  if (info.state == SmState::Master) {
    if (rec_ && rec_->guid == info.guid) return;
    // Exact when something was known before (another master, or none after
    // one), or this SM was seen in another state first.
    const bool exact = rec_.has_value() || seen_not_master_.count(info.guid.value) != 0;
    rec_ = MasterRecord{info.guid, now, wall, exact};
    return;
  }
  if (seen_not_master_.size() < 4096) seen_not_master_.insert(info.guid.value);
  if (rec_ && rec_->guid == info.guid) rec_ = MasterRecord{std::nullopt, now, wall, true};
}

std::optional<SmSighting> RecordingTransport::last_seen(Guid guid) const {
  auto it = state_->seen.find(guid.value);
  if (it == state_->seen.end()) return std::nullopt;
  return it->second;
}

std::optional<TargetRecord> RecordingTransport::last_query(const mad::Target& target) const {
  auto it = state_->targets.find(target);
  if (it == state_->targets.end()) return std::nullopt;
  return it->second;
}

}  // namespace smha::head
