// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// Test rig for HaMachine: strong argument types for table rows (Kea style).
#pragma once

#include <algorithm>
#include <optional>
#include <vector>

#include "smha/sm/ha_machine.hpp"

namespace smha::sm::test {

inline constexpr Guid kOwn{0x10};
inline constexpr Guid kPeer{0x20};
inline constexpr Guid kPeer2{0x30};
inline constexpr std::uint64_t kKey = 1;

inline HaPolicy policy(std::vector<PeerSpec> peers = {{"head02", kPeer}}, Guid own = kOwn) {
  HaPolicy p;
  p.node_name = "head01";
  p.own_guid = own;
  p.peers = std::move(peers);
  p.poll_interval = milliseconds(100);
  p.misses = 3;
  p.takeover_bound = milliseconds(1000);
  p.handover_bound = milliseconds(2000);
  p.start_grace = milliseconds(300);
  p.preempt_hold_down = seconds(2);
  p.base_priority = 10;
  return p;
}

// What the local SM answers on DR hop 0 (nullopt state: no answer).
struct Local {
  std::optional<SmState> state;
  std::uint8_t prio = 10;
  bool stopped = true;  // when silent: the kernel shows the process stopped (a hang)
};
// What a peer answers on LID and DR, and its port state.
struct Peer {
  std::optional<SmState> state;
  std::uint8_t prio = 10;
  PortState port = PortState::Unknown;
  Guid guid = kPeer;
  bool dr_answers = true;   // false: only the LID query answers (a lost MAD)
  std::uint64_t key = kKey;
  bool refused = false;     // silent state: both queries refused at once (no SM bound)
  std::uint32_t act = 0;    // ActCount it answers with
};
struct Link {
  PortState state = PortState::Up;
};

inline SmInfo info(Guid g, SmState s, std::uint8_t prio, std::uint64_t key = kKey) {
  SmInfo i;
  i.guid = g;
  i.state = s;
  i.priority = prio;
  i.sm_key = key;
  return i;
}

inline PollRound round(Local l, std::vector<Peer> peers, Link link = {},
                       ProcessState proc = ProcessState::Running) {
  PollRound r;
  r.process = proc;
  r.local_port = link.state;
  r.local_stopped = !l.state && l.stopped;
  r.local = l.state ? Probe::answered(info(kOwn, *l.state, l.prio)) : Probe::unanswered(3);
  for (const auto& p : peers) {
    PeerProbe pp;
    pp.guid = p.guid;
    pp.port = p.port;
    if (p.state) {
      auto i = info(p.guid, *p.state, p.prio, p.key);
      i.act_count = p.act;
      pp.via_lid = Probe::answered(i);
      pp.via_dr = p.dr_answers ? Probe::answered(i) : Probe::unanswered(3);
    } else {
      pp.via_lid = p.refused ? Probe::refused_by_all(3) : Probe::unanswered(3);
      pp.via_dr = p.refused ? Probe::refused_by_all(3) : Probe::unanswered(3);
    }
    r.peers.push_back(pp);
  }
  return r;
}

// The priorities rendered by `acts`, in order.
inline std::vector<std::uint8_t> priorities_set(const std::vector<Action>& acts) {
  std::vector<std::uint8_t> out;
  for (const auto& a : acts)
    if (const auto* s = std::get_if<SetPriority>(&a)) out.push_back(s->priority);
  return out;
}

struct Rig {
  HaMachine m;
  TimePoint t{};
  std::vector<Action> log;  // every action, in order
  explicit Rig(HaPolicy p = policy()) : m(std::move(p)) {}

  Decision step(const Observation& o) {
    auto d = m.step(o, t);
    log.insert(log.end(), d.actions.begin(), d.actions.end());
    return d;
  }
  // One poll round, then the clock moves one poll interval.
  Decision poll(const PollRound& r) {
    auto d = step(r);
    t += m.policy().poll_interval;
    return d;
  }
  std::vector<Action> polls(int n, const PollRound& r) {
    std::vector<Action> out;
    for (int i = 0; i < n; ++i) {
      auto d = poll(r);
      out.insert(out.end(), d.actions.begin(), d.actions.end());
    }
    return out;
  }
};

template <typename T>
int count(const std::vector<Action>& v) {
  return static_cast<int>(std::count_if(v.begin(), v.end(),
                                        [](const Action& a) { return std::holds_alternative<T>(a); }));
}
template <typename T>
std::optional<T> first(const std::vector<Action>& v) {
  for (const auto& a : v)
    if (const auto* x = std::get_if<T>(&a)) return *x;
  return std::nullopt;
}
inline bool has_event(const std::vector<Action>& v, EventKind k) {
  return std::any_of(v.begin(), v.end(), [&](const Action& a) {
    const auto* e = std::get_if<RecordEvent>(&a);
    return e && e->kind == k;
  });
}
inline bool has_alarm(const std::vector<Action>& v, AlarmKind k) {
  return std::any_of(v.begin(), v.end(), [&](const Action& a) {
    const auto* e = std::get_if<RaiseAlarm>(&a);
    return e && e->kind == k;
  });
}

}  // namespace smha::sm::test
