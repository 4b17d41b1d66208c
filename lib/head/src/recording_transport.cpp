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

void RecordingTransport::submit(mad::Request request, mad::ReplyCallback done) {
  if (const auto* get = std::get_if<mad::SmInfoGet>(&request.query)) {
    const mad::Target target = get->target;
    return record_sminfo(target, std::move(request), std::move(done));
  }
  if (const auto* port = std::get_if<mad::PortInfoGet>(&request.query)) {
    const mad::PortInfoGet query = *port;
    return record_port_info(query, std::move(request), std::move(done));
  }
  if (read_only_ && std::holds_alternative<mad::SmInfoSet>(request.query)) {
    done(make_error(Errc::Observe, "SubnSet(SMInfo) refused: observe mode"));
    return;
  }
  inner_.submit(std::move(request), std::move(done));
}

void RecordingTransport::record_sminfo(const mad::Target& target, mad::Request request, mad::ReplyCallback done) {
  std::weak_ptr<State> state = state_;
  const Clock* clock = &clock_;
  const TimePoint sent = clock_.now();
  inner_.submit(std::move(request), [state, clock, sent, target, done = std::move(done)](Result<mad::AnyReply> r) {
    if (auto st = state.lock()) {
      const auto* reply = r.ok() ? std::get_if<mad::SmInfoReply>(&r.value()) : nullptr;
      const TimePoint now = clock->now();
      if (st->sminfo_tap && reply) st->sminfo_tap(reply->info, sent, now, target);
      TargetRecord rec;
      rec.at = now;
      rec.answered = reply != nullptr;
      st->stats.record(reply != nullptr, reply ? reply->rtt : Duration{});
      if (reply) {
        rec.guid = reply->info.guid;
        st->seen[reply->info.guid.value] = SmSighting{reply->info, reply->rtt, now};
        st->master.observe(reply->info, now, clock->wall_now());
      }
      st->targets[target] = rec;
    }
    done(std::move(r));
  });
}

void RecordingTransport::record_port_info(const mad::PortInfoGet& query, mad::Request request,
                                          mad::ReplyCallback done) {
  std::weak_ptr<State> state = state_;
  const Clock* clock = &clock_;
  const TimePoint sent = clock_.now();
  const auto* dr = std::get_if<DrPath>(&query.target);
  const bool local = dr != nullptr && dr->hops.empty();
  inner_.submit(std::move(request), [state, clock, sent, local, key = std::make_pair(query.target, query.port),
                                     done = std::move(done)](Result<mad::AnyReply> r) {
    if (auto st = state.lock()) {
      const auto* reply = r.ok() ? std::get_if<mad::PortInfoReply>(&r.value()) : nullptr;
      PortRecord& rec = st->ports[key];
      rec.at = clock->now();
      if (st->local_port_tap && local && reply) st->local_port_tap(reply->info, sent, rec.at);
      rec.answered = reply != nullptr;
      if (reply) {
        rec.info = reply->info;
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
