// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/fabric/port_errors.hpp"

#include <algorithm>
#include <chrono>
#include <set>
#include <tuple>


namespace smha::fabric {

namespace {

using Key = std::pair<Guid, std::uint8_t>;

// The rises at or after `cut`, summed per counter.
template <typename Rises>
mad::ErrorCounts summed(const Rises& rises, TimePoint cut) {
  mad::ErrorCounts sum{};
  for (const auto& [at, d] : rises)
    if (at >= cut)
      for (std::size_t i = 0; i < d.size(); ++i) sum[i] += d[i];
  return sum;
}

bool any(const mad::ErrorCounts& c) {
  return std::any_of(c.begin(), c.end(), [](std::uint32_t v) { return v != 0; });
}

std::uint64_t sum(const mad::ErrorCounts& c) {
  std::uint64_t s = 0;
  for (auto v : c) s += v;
  return s;
}

// How far past its threshold a port's worst rise is (1 = at it).
double score(const ErrorPort& p, const mad::ErrorCounts& thresholds) {
  double worst = 0;
  for (auto c : mad::kErrorCounters) {
    const auto t = std::max<std::uint32_t>(1, mad::at(thresholds, c));
    worst = std::max(worst, static_cast<double>(mad::at(p.rise, c)) / t);
  }
  return worst;
}


std::string window_text(Duration w) {
  const auto s = std::chrono::duration_cast<std::chrono::seconds>(w).count();
  if (s % 3600 == 0) return std::to_string(s / 3600) + "h";
  if (s % 60 == 0) return std::to_string(s / 60) + "m";
  return std::to_string(s) + "s";
}

}  // namespace

struct PortErrors::Port {
  LinkEndRef where;
  Lid lid;
  std::optional<mad::ErrorCounts> last;
  std::optional<TimePoint> read_at;
  // Vectors, not deques: most ports never have an entry, and an empty
  // deque costs a block of its own (thousands of ports).
  std::vector<std::pair<TimePoint, mad::ErrorCounts>> rises;  // oldest first
  std::vector<TimePoint> resets;
  std::array<bool, mad::kErrorCounterCount> saturated{};
  std::optional<TimePoint> since;
  bool unknown = false;
  std::string why_unknown;
};

PortErrors::PortErrors(ErrorsConfig cfg, Scheduler& sched, mad::MadTransport& mad, AlarmSink& sink)
    : cfg_(cfg), sched_(sched), mad_(mad), sink_(sink) {
  if (!cfg_.enabled || cfg_.reads_per_second <= 0) state_ = "off";
}

PortErrors::~PortErrors() {
  generation_.reset();
  if (timer_) sched_.cancel(*timer_);
}

void PortErrors::stop() {
  set_reading(false, "off");
}

void PortErrors::set_reading(bool on, const std::string& why_not) {
  const bool able = cfg_.enabled && cfg_.reads_per_second > 0;
  on = on && able;
  if (!on) state_ = able ? why_not : "off";
  if (on == reading_) return;
  reading_ = on;
  if (on) {
    state_ = "reading";
    generation_ = std::make_shared<int>(0);
    in_flight_ = false;
    // Each port is read afresh: a rise spans two reads of this run.
    for (auto& [key, p] : ports_) p.last.reset();
    next_ = 0;
    pass_started_ = sched_.now();
    pass_descriptions_ = 0;
    arm();
    return;
  }
  generation_.reset();
  in_flight_ = false;
  if (timer_) sched_.cancel(*timer_);
  timer_.reset();
  over_.clear();
  set_alarm(sink_, AlarmKind::LinkErrors, "", alarm_detail_, sched_.now());
}

void PortErrors::on_walk(const DiscoveryResult& walk) {
  if (!cfg_.enabled) return;
  // The PMA's LID: a switch's port 0 LID for all its ports, a CA port's own.
  std::map<Guid, Lid> switch_lid;
  std::map<Key, Lid> ca_lid;
  for (const auto& p : walk.probed) {
    if (p.lid.value == 0) continue;
    if (p.node_type == mad::NodeType::Switch) {
      if (p.port_num == 0) switch_lid[p.node_guid] = p.lid;
    } else {
      ca_lid[{p.node_guid, p.port_num}] = p.lid;
    }
  }
  for (const auto& sm : walk.sm_ports)
    if (sm.description_known) names_[sm.node_guid] = sm.description;
  std::map<Key, Port> next;
  std::vector<Key> order;
  auto add = [&](Guid node, mad::NodeType type, std::uint8_t port, const DrPath& path) {
    const Key key{node, port};
    if (port == 0 || order.size() >= cfg_.max_tracked || next.count(key)) return;
    Lid lid;
    if (type == mad::NodeType::Switch) {
      if (auto it = switch_lid.find(node); it != switch_lid.end()) lid = it->second;
    } else if (auto it = ca_lid.find(key); it != ca_lid.end()) {
      lid = it->second;
    }
    if (lid.value == 0 || lid.value >= 0xc000) return;
    Port p;
    if (auto old = ports_.find(key); old != ports_.end()) p = std::move(old->second);
    p.where.node = node;
    p.where.type = type;
    p.where.port = port;
    p.where.path = path;
    p.lid = lid;
    next.emplace(key, std::move(p));
    order.push_back(key);
  };
  std::map<Key, mad::PortState> state;
  for (const auto& e : walk.link_ends) {
    state[{e.node_guid, e.port_num}] = e.state;
    if (e.state == mad::PortState::Active) add(e.node_guid, e.node_type, e.port_num, e.path);
  }
  // The port each switch was entered through is not among the walk's link
  // ends (its PortInfo is not read); it is Active when the end the walk
  // left from is.
  for (const auto& c : walk.cables) {
    if (c.b_type != mad::NodeType::Switch) continue;
    const auto from = state.find({c.a_node, c.a_port});
    if (from != state.end() && from->second == mad::PortState::Active) add(c.b_node, c.b_type, c.b_port, c.b_path);
  }
  ports_ = std::move(next);
  order_ = std::move(order);
  bool dropped = false;
  for (auto it = over_.begin(); it != over_.end();)
    if (!ports_.count(*it)) it = over_.erase(it), dropped = true;
    else ++it;
  if (dropped) update_alarm();
  if (next_ >= order_.size()) next_ = 0;
  if (names_.size() > 4 * cfg_.max_ports + 64) names_.clear();  // bounded
}

void PortErrors::arm() {
  if (!reading_) return;
  const auto interval = std::chrono::duration_cast<Duration>(std::chrono::duration<double>(1.0 / cfg_.reads_per_second));
  timer_ = sched_.schedule_in(std::max<Duration>(interval, microseconds(1)), [this] {
    timer_.reset();
    tick();
    arm();
  });
}

void PortErrors::tick() {
  if (!reading_ || in_flight_ || order_.empty()) return;
  // A listed port's node without a name first, a few a pass.
  while (!to_name_.empty() && pass_descriptions_ < cfg_.max_descriptions) {
    const Guid node = to_name_.front().first;
    const DrPath path = to_name_.front().second;
    to_name_.pop_front();
    naming_.erase(node);
    if (names_.count(node)) continue;
    ++pass_descriptions_;
    ++counts_.description_mads;
    in_flight_ = true;
    std::weak_ptr<int> gen = generation_;
    mad_.get_node_description(path, cfg_.request, [this, gen, node](Result<mad::NodeDescriptionReply> r) {
      if (gen.expired()) return;
      in_flight_ = false;
      if (r) names_[node] = r->info;
    });
    return;
  }
  if (next_ >= order_.size()) next_ = 0;
  const Key key = order_[next_++];
  if (next_ >= order_.size()) {
    // The last port of a pass is on its way.
    const TimePoint now = sched_.now();
    if (pass_started_) counts_.last_pass = now - *pass_started_;
    ++counts_.passes;
    pass_started_ = now;
    pass_descriptions_ = 0;
    next_ = 0;
  }
  read_counters(key);
}

void PortErrors::read_counters(const Key& key) {
  auto it = ports_.find(key);
  if (it == ports_.end()) return;
  ++counts_.reads;
  in_flight_ = true;
  std::weak_ptr<int> gen = generation_;
  mad_.get_port_counters(it->second.lid, key.second, cfg_.request,
                         [this, gen, key](Result<mad::PortCountersReply> r) {
                           if (gen.expired()) return;
                           in_flight_ = false;
                           on_counters(key, std::move(r));
                         });
}

void PortErrors::forget_old(Port& p, TimePoint now) {
  const TimePoint cut = now - cfg_.window;
  std::erase_if(p.rises, [cut](const auto& r) { return r.first < cut; });
  std::erase_if(p.resets, [cut](TimePoint t) { return t < cut; });
  if (p.rises.empty()) p.since.reset();
}

void PortErrors::on_counters(const Key& key, Result<mad::PortCountersReply> r) {
  auto it = ports_.find(key);
  if (it == ports_.end()) return;  // gone with a newer walk
  Port& p = it->second;
  if (!r) {
    ++counts_.failures;
    p.unknown = true;
    p.why_unknown = "read failed: " + r.error().message;
    note_over(key, false);
    return;
  }
  if (r->info.port_select != key.second) {
    ++counts_.wrong_port;
    p.unknown = true;
    p.why_unknown = "the PMA at LID " + std::to_string(p.lid.value) + " answered for port " +
                    std::to_string(r->info.port_select) + ", asked for port " + std::to_string(key.second);
    note_over(key, false);
    return;
  }
  const TimePoint now = sched_.now();
  forget_old(p, now);
  const mad::ErrorCounts& v = r->info.errors;
  if (p.last) {
    mad::ErrorCounts delta{};
    bool reset = false;
    for (auto c : mad::kErrorCounters) {
      const auto i = static_cast<std::size_t>(c);
      const std::uint32_t was = (*p.last)[i];
      const std::uint32_t is = std::min(v[i], mad::counter_max(c));
      if (is < was) {
        reset = true;  // cleared since: what it holds rose after the clear
        delta[i] = is;
      } else {
        delta[i] = is - was;
      }
    }
    if (reset) {
      ++counts_.resets;
      p.resets.push_back(now);
    }
    if (any(delta)) {
      p.rises.emplace_back(now, delta);
      if (!p.since) p.since = now;
      if (p.rises.size() > kMaxSamples) {
        // Merge the two oldest: the sum within the window stays right to
        // within one sample's age.
        const auto first = p.rises.front();
        p.rises.erase(p.rises.begin());
        for (std::size_t i = 0; i < first.second.size(); ++i) p.rises.front().second[i] += first.second[i];
      }
    }
  }
  for (auto c : mad::kErrorCounters) {
    const auto i = static_cast<std::size_t>(c);
    p.saturated[i] = v[i] >= mad::counter_max(c);
  }
  p.last = v;
  p.read_at = now;
  if (p.resets.size() > static_cast<std::size_t>(kMaxResets)) {
    p.unknown = true;
    p.why_unknown = "its counters went down " + std::to_string(p.resets.size()) + " times within " +
                    window_text(cfg_.window);
  } else {
    p.unknown = false;
    p.why_unknown.clear();
  }
  if ((any(v) || !p.rises.empty()) && !names_.count(key.first) && p.where.path &&
      to_name_.size() < cfg_.max_ports && naming_.insert(key.first).second)
    to_name_.emplace_back(key.first, *p.where.path);
  note_over(key, is_over(p));
}

bool PortErrors::is_over(const Port& p) const {
  if (p.unknown) return false;
  const mad::ErrorCounts rise = summed(p.rises, TimePoint::min());  // forget_old() has trimmed them to the window
  for (auto c : mad::kErrorCounters)
    if (mad::at(rise, c) > 0 && mad::at(rise, c) >= std::max<std::uint32_t>(1, mad::at(cfg_.thresholds, c)))
      return true;
  return false;
}

// The alarm is looked at again only when a port is, or was, over a threshold.
void PortErrors::note_over(const Key& key, bool over) {
  const bool was = over ? !over_.insert(key).second : over_.erase(key) > 0;
  if (over || was) update_alarm();
}

ErrorsSnapshot PortErrors::snapshot() const {
  ErrorsSnapshot s = counts_;
  s.listed.clear();
  s.state = state_;
  s.ports = ports_.size();
  const TimePoint now = sched_.now();
  const TimePoint cut = now - cfg_.window;
  const double hours = std::chrono::duration<double>(cfg_.window).count() / 3600.0;
  std::vector<ErrorPort> all;
  for (const auto& [key, p] : ports_) {
    ErrorPort e;
    e.where = p.where;
    if (auto n = names_.find(key.first); n != names_.end()) e.where.description = n->second, e.where.description_known = true;
    e.lid = p.lid;
    if (p.last) e.value = *p.last;
    e.rise = summed(p.rises, cut);
    e.saturated = p.saturated;
    e.since = any(e.rise) ? p.since : std::nullopt;
    e.read_at = p.read_at;
    e.per_hour = hours > 0 ? static_cast<double>(sum(e.rise)) / hours : 0;
    e.unknown = p.unknown;
    e.why_unknown = p.why_unknown;
    e.resets = static_cast<int>(std::count_if(p.resets.begin(), p.resets.end(), [&](TimePoint t) { return t >= cut; }));
    e.over = !e.unknown && over_.count(key) > 0;
    if (p.read_at) ++s.read;
    if (e.unknown) ++s.unknown;
    if (any(e.value)) ++s.with_errors;
    if (any(e.rise)) {
      ++s.rising;
      for (auto c : mad::kErrorCounters)
        if (mad::at(e.rise, c) > 0) ++s.rising_by_counter[c];
    }
    if (e.over) ++s.over;
    if (e.over || any(e.rise) || any(e.value) || e.unknown) all.push_back(std::move(e));
  }
  const auto& th = cfg_.thresholds;
  std::stable_sort(all.begin(), all.end(), [&th](const ErrorPort& x, const ErrorPort& y) {
    const auto rank = [&th](const ErrorPort& p) {
      return std::make_tuple(p.over, score(p, th), !p.unknown, sum(p.value));
    };
    return rank(x) > rank(y);
  });
  if (all.size() > cfg_.max_ports) all.resize(cfg_.max_ports);
  s.listed = std::move(all);
  return s;
}

void PortErrors::update_alarm() {
  std::string detail;
  if (cfg_.alarm && reading_) {
    const ErrorsSnapshot s = snapshot();
    if (s.over >= std::max<std::size_t>(1, cfg_.alarm_min_ports) && !s.listed.empty() && s.listed.front().over) {
      const ErrorPort& w = s.listed.front();
      std::string rises;
      for (auto c : mad::kErrorCounters)
        if (mad::at(w.rise, c) > 0)
          rises += (rises.empty() ? "" : ", ") + std::string(mad::counter_name(c)) + " +" +
                   std::to_string(mad::at(w.rise, c));
      detail = std::to_string(s.over) + " port" + (s.over == 1 ? "" : "s") + " with error counters rising; worst: " +
               end_text(w.where) + ": " + rises + " within " + window_text(cfg_.window);
    }
  }
  set_alarm(sink_, AlarmKind::LinkErrors, detail, alarm_detail_, sched_.now());
}

}  // namespace smha::fabric
