// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// RecordingTransport: the MadTransport decorator smhad polls through. It
// remembers what the poller saw (status, metrics, the mastership verdict's
// taps) and refuses Sets in observe mode or during a maintenance hold.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <sys/types.h>

#include "smha/core/clock.hpp"
#include "smha/core/sminfo.hpp"
#include "smha/mad/transport.hpp"

namespace smha::head {

// Maintenance hold: while held, nothing smha does moves mastership (no Set to
// the local SM, no priority change, no stop/restart of OpenSM). Starting an
// OpenSM that is not running stays allowed. Expires on its own.
struct HoldState {
  bool held = false;
  std::optional<TimePoint> until;
  std::string reason;
  uid_t by_uid = 0;
};

// The last SMInfo answer from one SM, as the poller saw it.
struct SmSighting {
  SmInfo info;
  Duration rtt{};
  TimePoint at{};
};
// Which SM answers MASTER and since when, from the SMInfo answers seen (smctl
// status "Master"). A change is stamped when the first answer shows it; so the
// time is exact to a poll interval unless the SM was already MASTER at its
// first answer after smhad started (`exact` false: "since at least").
struct MasterRecord {
  std::optional<Guid> guid;  // nullopt: the last master left MASTER, none since
  TimePoint since{};
  std::chrono::system_clock::time_point since_wall{};
  bool exact = false;
};
class MasterWatch {
 public:
  void observe(const SmInfo& info, TimePoint now, std::chrono::system_clock::time_point wall);
  const std::optional<MasterRecord>& current() const { return rec_; }

 private:
  std::optional<MasterRecord> rec_;
  std::set<std::uint64_t> seen_not_master_;  // SMs seen in another state first
};

// Every SMInfo Get the poller made, for metrics: answered ones by round-trip
// time (cumulative buckets, seconds), unanswered ones (after the transport's
// retries) counted as missed.
struct PollStats {
  static constexpr double kBounds[] = {0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25};
  std::uint64_t buckets[std::size(kBounds)] = {};  // answers with rtt <= kBounds[i]
  std::uint64_t answered = 0;
  double rtt_sum_s = 0;
  std::uint64_t missed = 0;
  void record(bool ok, Duration rtt);
};

// The last query to one target.
struct TargetRecord {
  bool answered = false;
  TimePoint at{};
  std::optional<Guid> guid;  // from the last answer
};

// The last PortInfo query of one port: when, whether it was answered, and the
// last answer (kept across later unanswered queries).
struct PortRecord {
  bool answered = false;
  TimePoint at{};
  std::optional<mad::PortInfo> info;
  TimePoint info_at{};
};

// MadTransport decorator: passes every call through, remembers the last answer
// per SM GUID, the last outcome per target and the last PortInfo per port, and
// with `read_only` (observe mode) refuses SMInfo Sets with Error "observe". (A
// maintenance hold is the engine's: sm::HoldChanged.)
class RecordingTransport final : public mad::MadTransport {
 public:
  RecordingTransport(mad::MadTransport& inner, const Clock& clock, bool read_only)
      : inner_(inner), clock_(clock), read_only_(read_only) {}
  // SMInfo Gets and PortInfo Gets are recorded, SMInfo Sets refused when
  // read-only; everything else passes straight through (nothing to remember).
  void submit(mad::Request request, mad::ReplyCallback done) override;
  std::optional<SmSighting> last_seen(Guid guid) const;
  std::optional<TargetRecord> last_query(const mad::Target& target) const;
  const PollStats& poll_stats() const { return state_->stats; }
  std::optional<PortRecord> last_port_info(const mad::Target& target, std::uint8_t port) const;
  const std::optional<MasterRecord>& master() const { return state_->master.current(); }
  // Every SMInfo answer (with the target it was asked at: via_text() names
  // it "lid:N" or "dr:PATH") and every PortInfo answer of a DR hop 0 query
  // (our own port), with the time the query was sent and the answer
  // received. For MastershipWindow; empty functions: none.
  using SmInfoTap = std::function<void(const SmInfo&, TimePoint sent, TimePoint received, const mad::Target& via)>;
  using LocalPortTap = std::function<void(const mad::PortInfo&, TimePoint sent, TimePoint received)>;
  void set_taps(SmInfoTap sminfo, LocalPortTap local_port) {
    state_->sminfo_tap = std::move(sminfo);
    state_->local_port_tap = std::move(local_port);
  }
  static std::string via_text(const mad::Target& target);

 private:
  // A query's target as a map key: by LID, or by DR path.
  struct TargetLess {
    bool operator()(const mad::Target& a, const mad::Target& b) const;
  };
  void record_sminfo(const mad::Target& target, mad::Request request, mad::ReplyCallback done);
  void record_port_info(const mad::PortInfoGet& query, mad::Request request, mad::ReplyCallback done);
  struct PortKeyLess {
    bool operator()(const std::pair<mad::Target, std::uint8_t>& a,
                    const std::pair<mad::Target, std::uint8_t>& b) const;
  };
  // What the answers' callbacks write, held by weak reference: a callback
  // that runs after this transport is gone writes nothing.
  struct State {
    SmInfoTap sminfo_tap;
    LocalPortTap local_port_tap;
    std::map<std::uint64_t, SmSighting> seen;
    std::map<mad::Target, TargetRecord, TargetLess> targets;
    PollStats stats;
    MasterWatch master;
    std::map<std::pair<mad::Target, std::uint8_t>, PortRecord, PortKeyLess> ports;
  };
  std::shared_ptr<State> state_ = std::make_shared<State>();
  mad::MadTransport& inner_;
  const Clock& clock_;
  bool read_only_;
};

}  // namespace smha::head
