// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/head/recording_transport.hpp"

namespace smha::head {

namespace {

std::string target_key(const mad::Target& t) {
  if (const auto* lid = std::get_if<Lid>(&t)) return "lid:" + std::to_string(lid->value);
  return "dr:" + to_string(std::get<DrPath>(t));
}

std::string port_key(const mad::Target& t, std::uint8_t port) {
  return target_key(t) + " port " + std::to_string(port);
}

}  // namespace

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
  std::weak_ptr<std::map<std::uint64_t, SmSighting>> seen = seen_;
  std::weak_ptr<std::map<std::string, TargetRecord>> targets = targets_;
  std::weak_ptr<PollStats> stats = stats_;
  std::weak_ptr<MasterWatch> master = master_;
  std::weak_ptr<Taps> taps = taps_;
  const Clock* clock = &clock_;
  const TimePoint sent = clock_.now();
  inner_.get_sminfo(target, opts,
                    [seen, targets, stats, master, taps, clock, sent, key = target_key(target),
                     done = std::move(done)](Result<mad::SmInfoReply> r) {
                      auto s = seen.lock();
                      auto t = targets.lock();
                      if (s && t) {
                        const TimePoint now = clock->now();
                        if (auto tp = taps.lock(); tp && tp->sminfo && r.ok()) tp->sminfo(r.value().info, sent, now, key);
                        TargetRecord rec;
                        rec.at = now;
                        rec.answered = r.ok();
                        if (auto st = stats.lock()) st->record(r.ok(), r.ok() ? r.value().rtt : Duration{});
                        if (r.ok()) {
                          rec.guid = r.value().info.guid;
                          (*s)[r.value().info.guid.value] = SmSighting{r.value().info, r.value().rtt, now};
                          if (auto m = master.lock())
                            m->observe(r.value().info, now, clock->wall_now());
                        }
                        (*t)[key] = rec;
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
  std::weak_ptr<std::map<std::string, PortRecord>> ports = ports_;
  std::weak_ptr<Taps> taps = taps_;
  const Clock* clock = &clock_;
  const TimePoint sent = clock_.now();
  const auto* dr = std::get_if<DrPath>(&target);
  const bool local = dr != nullptr && dr->hops.empty();
  inner_.get_port_info(target, port, opts,
                       [ports, taps, clock, sent, local, key = port_key(target, port),
                        done = std::move(done)](Result<mad::PortInfoReply> r) {
                         if (auto p = ports.lock()) {
                           PortRecord& rec = (*p)[key];
                           rec.at = clock->now();
                           if (auto tp = taps.lock(); tp && tp->local_port && local && r.ok())
                             tp->local_port(r.value().info, sent, rec.at);
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
  auto it = ports_->find(port_key(target, port));
  if (it == ports_->end()) return std::nullopt;
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
  auto it = seen_->find(guid.value);
  if (it == seen_->end()) return std::nullopt;
  return it->second;
}

std::optional<TargetRecord> RecordingTransport::last_query(const mad::Target& target) const {
  auto it = targets_->find(target_key(target));
  if (it == targets_->end()) return std::nullopt;
  return it->second;
}

}  // namespace smha::head
