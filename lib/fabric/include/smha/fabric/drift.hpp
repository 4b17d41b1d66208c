// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// Config drift between heads (doc/drift.md). Each smhad registers an SA
// ServiceRecord (ServiceName "smha", ServiceGID = its port GID, a lease it
// renews) whose ServiceData carries digests of its effective configuration,
// and reads each configured peer's record (one SubnAdmGet by ServiceGID and
// name) at a bounded rate. A peer whose digests differ from ours raises alarm
// `config_drift` naming the peer and the components; it clears when they
// match. A peer without a record (no smha there, an older smha, a new master
// whose SA has not seen the renewal yet) is unknown, never drift.
//
// Everything goes through the SA of our port's MasterSMLID, on the existing
// MAD transport: no channel besides the fabric, no secret besides what the
// heads already share.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "smha/core/alarm.hpp"
#include "smha/core/scheduler.hpp"
#include "smha/core/result.hpp"
#include "smha/mad/transport.hpp"

namespace smha::fabric {

// ---- the digests (ServiceData) ------------------------------------------------

// What the digests cover, in their order in ServiceData.
enum class DriftComponent : std::uint8_t {
  OpensmConf,   // the rendered opensm.conf, per-head keys and policy-file paths left out
  Partitions,   // partition_config_file's content
  Qos,          // qos_policy_file's content
  Routing,      // the routing input files' content (guid_routing_order_file, root_guid_file, ...)
  PolicyFiles,  // the other policy files' content (per_module_logging_file, port_prof_ignore_file)
  HaPolicy,     // smha's failover section
  Opensm,       // OpenSM's version and flavor
  SmKey,        // a keyed fingerprint of the SM_Key (never the key)
};
inline constexpr std::size_t kDriftComponents = 8;
// "opensm_conf", "partitions", "qos", "routing", "policy_files", "ha_policy", "opensm", "sm_key".
std::string_view to_string(DriftComponent c);

// ServiceData layout version 1 (doc/drift.md): byte 0 the version, byte 1 the
// number of digests (8), then 8 digests of 6 bytes (bytes 2..49, in
// DriftComponent order), bytes 50..63 zero. ServiceData64[1] (bytes 56..63)
// is sent as zero and never read: under ibsim an SA answer shorter than a
// MAD arrives without its last 8 bytes (whatever the buffer held), which are
// those.
inline constexpr std::uint8_t kDigestLayoutVersion = 1;
inline constexpr std::size_t kDigestSize = 6;
using Digest = std::array<std::uint8_t, kDigestSize>;
struct ConfigDigests {
  std::array<Digest, kDriftComponents> digest{};
  const Digest& operator[](DriftComponent c) const { return digest[static_cast<std::size_t>(c)]; }
  friend bool operator==(const ConfigDigests&, const ConfigDigests&) = default;
};
// 12 lower-case hex digits.
std::string to_hex(const Digest& d);

// What the digests are computed from.
struct DigestInputs {
  std::string rendered_conf;  // opensm.conf as smhad renders it, header included
  std::string ha_policy;      // the failover section, as canonical text (one "key value" a line)
  std::string opensm;         // OpenSM's version and flavor, e.g. "3.3.23 upstream"
  std::uint64_t sm_key = 0;
  std::uint64_t sa_key = 1;  // OpenSM's default: not part of the SmKey digest
};

// The opensm.conf keys left out of the OpensmConf digest: what the render makes
// per head (guid, sm_priority), paths on the head (log_file, dump_files_dir,
// sa_db_file, node_name_map_name), sm_key and sa_key (secrets: the SmKey
// component, keyed, covers them), and the
// policy-file keys (their paths; their content has its own components).
bool is_per_head_conf_key(std::string_view key);

// The digests of `in` (SHA-1 through Boost.Uuid's name_generator_sha1, one
// namespace per component, truncated to 6 bytes). Policy files are taken
// from the rendered header's "policy-file" lines (key and content hash; the
// path is left out). SmKey: SHA-1 of the SM_Key under smha's fixed namespace,
// followed by the SA key when it is not OpenSM's default 0x1.
ConfigDigests compute_digests(const DigestInputs& in);

std::array<std::uint8_t, 64> encode_service_data(const ConfigDigests& d);
// Error code "parse" naming the byte: another layout version, another
// digest count, or non-zero reserved bytes 50..55 (56..63 are not read).
Result<ConfigDigests> decode_service_data(std::span<const std::uint8_t> data);
// The components whose digests differ, in DriftComponent order.
std::vector<DriftComponent> differing(const ConfigDigests& a, const ConfigDigests& b);

// The record's fixed fields: ServiceName "smha" and a locally administered
// ServiceID (IBA A3.2.1: top byte 0x02), "SMHA" and the layout version 1.
inline constexpr std::uint64_t kSmhaServiceId = 0x0200534d48410001ULL;
inline constexpr const char* kSmhaServiceName = "smha";

// ---- the monitor --------------------------------------------------------------

struct DriftConfig {
  std::uint32_t lease_s = 60;            // ServiceLease of our record
  Duration refresh = seconds(20);        // our record is registered again this often
  Duration read_interval = seconds(20);  // each peer's record is read this often
  Duration first_delay = seconds(3);     // after start (our port's MasterSMLID is known by then)
  // A peer whose verdict stays unknown this long (no record, an SA error, a
  // rejected record) raises drift_unknown with the last reason: a verdict
  // that cannot be had is itself worth an operator's look.
  Duration unknown_alarm = seconds(300);
  mad::RequestOptions sa{milliseconds(500), 1, 0};
  std::uint64_t subnet_prefix = mad::kDefaultSubnetPrefix;
};

enum class PeerDriftState : std::uint8_t { Unknown, Match, Drift };
std::string_view to_string(PeerDriftState s);  // "unknown", "match", "drift"

struct PeerDrift {
  std::string name;
  Guid guid;
  PeerDriftState state = PeerDriftState::Unknown;
  std::string detail;   // unknown: why; drift: the components that differ
  std::optional<ConfigDigests> digests;  // from its last record that parsed
  std::vector<DriftComponent> differing;
  std::optional<TimePoint> read_at;      // its last record that parsed
  std::optional<TimePoint> unknown_since;  // while unknown: since when (monitor start at the latest)
  std::string last_error;                // the last read's error ("" when it parsed)
};

struct DriftStats {
  std::uint64_t registrations = 0;       // Sets the SA answered
  std::uint64_t registration_errors = 0;
  std::uint64_t reads = 0;               // Gets sent
  std::uint64_t records = 0;             // records that parsed
  std::uint64_t absent = 0;              // Gets answered "no records"
  std::uint64_t read_errors = 0;         // other failures (timeouts, statuses)
  std::uint64_t rejected_foreign = 0;    // a record for another port, ServiceID or name
  std::uint64_t rejected_data = 0;       // ServiceData that does not parse
  std::uint64_t mads = 0;                // MADs sent (attempts)
  Lid sa_lid;                            // where the last request went
  std::optional<TimePoint> registered_at;
  std::string last_register_error;
};

class DriftMonitor {
 public:
  // `peers`: name and port GUID of every configured peer. `sink` gets the
  // config_drift alarm. All references must outlive the monitor.
  DriftMonitor(DriftConfig cfg, Scheduler& sched, mad::MadTransport& mad, Guid own,
               std::vector<std::pair<std::string, Guid>> peers, AlarmSink& sink);
  ~DriftMonitor();
  DriftMonitor(const DriftMonitor&) = delete;
  DriftMonitor& operator=(const DriftMonitor&) = delete;

  // Our digests. Nothing is registered, read or compared before the first
  // call; a change registers at once and compares again.
  void set_own(const ConfigDigests& d);
  // Our port's MasterSMLID (the SA), from each poll round. A new one gets our
  // record at once (a new master's SA does not have it).
  void set_sa_lid(Lid sa_lid);
  void start();
  // Cancels timers, deletes our record at the SA (no answer awaited) and
  // clears a raised config_drift.
  void stop();
  // A reload's new drift_unknown_alarm_s (the next read applies it).
  void set_unknown_alarm(Duration d) { cfg_.unknown_alarm = d; }

  const std::optional<ConfigDigests>& own() const { return own_; }
  const std::vector<PeerDrift>& peers() const { return peers_; }
  const DriftStats& stats() const { return stats_; }
  const DriftConfig& config() const { return cfg_; }
  mad::Gid own_gid() const { return mad::Gid{cfg_.subnet_prefix, own_guid_}; }
  // The alarm's text while it is raised ("" when not).
  const std::string& alarm() const { return alarm_; }

 private:
  mad::ServiceRecord record() const;
  void register_record();
  void read_peers();
  void on_record(std::size_t i, Result<mad::ServiceRecordReply> r);
  void compare(PeerDrift& p);
  void update_alarm();
  void update_unknown_alarm();
  std::string unknown_alarm_;  // the raised drift_unknown's detail, "" when clear
  void arm_register(Duration after);
  void arm_read(Duration after);
  void count_mads(const Result<mad::ServiceRecordReply>& r);

  DriftConfig cfg_;
  Scheduler& sched_;
  mad::MadTransport& mad_;
  Guid own_guid_;
  AlarmSink& sink_;
  std::optional<ConfigDigests> own_;
  std::vector<PeerDrift> peers_;
  DriftStats stats_;
  Lid sa_lid_;
  bool running_ = false;
  TimePoint started_at_{};
  bool registered_here_ = false;  // the SA at sa_lid_ answered our last Set
  std::string alarm_;
  std::optional<Scheduler::TimerId> register_timer_;
  std::optional<Scheduler::TimerId> read_timer_;
  std::shared_ptr<int> alive_;
};

}  // namespace smha::fabric
