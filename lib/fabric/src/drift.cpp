// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/fabric/drift.hpp"

#include <algorithm>
#include <cstdio>

#include <boost/uuid/name_generator_sha1.hpp>
#include <boost/uuid/uuid.hpp>

#include "smha/core/text.hpp"
#include "smha/opensm/conf.hpp"

namespace smha::fabric {

std::string_view to_string(DriftComponent c) {
  switch (c) {
    case DriftComponent::OpensmConf: return "opensm_conf";
    case DriftComponent::Partitions: return "partitions";
    case DriftComponent::Qos: return "qos";
    case DriftComponent::Routing: return "routing";
    case DriftComponent::PolicyFiles: return "policy_files";
    case DriftComponent::HaPolicy: return "ha_policy";
    case DriftComponent::Opensm: return "opensm";
    case DriftComponent::SmKey: return "sm_key";
  }
  return "unknown";
}

std::string_view to_string(PeerDriftState s) {
  switch (s) {
    case PeerDriftState::Unknown: return "unknown";
    case PeerDriftState::Match: return "match";
    case PeerDriftState::Drift: return "drift";
  }
  return "unknown";
}

std::string to_hex(const Digest& d) { return hex_string(d); }

namespace {

// One name_generator_sha1 namespace per component (RFC 4122 name-based UUIDs
// under smha's own namespace): the same text gives different digests in
// different components. The root namespace is a fixed random UUID.
constexpr boost::uuids::uuid kRoot = {{0x6f, 0x1c, 0x2e, 0x93, 0x4b, 0x57, 0x4d, 0x0a, 0x9e, 0x31, 0xc8,
                                       0x52, 0x07, 0xb4, 0xd6, 0x19}};

Digest digest(DriftComponent c, std::string_view text) {
  const boost::uuids::name_generator_sha1 root(kRoot);
  const boost::uuids::uuid ns = root(std::string(to_string(c)));
  const boost::uuids::uuid u = boost::uuids::name_generator_sha1(ns)(text.data(), text.size());
  // Bytes 6 and 8 carry the UUID's version and variant: the 6 bytes before them.
  static_assert(kDigestSize <= 6);
  Digest d{};
  std::copy_n(u.begin(), kDigestSize, d.begin());
  return d;
}

// Which component a policy file's content belongs to.
DriftComponent policy_component(std::string_view key) {
  if (key == "partition_config_file") return DriftComponent::Partitions;
  if (key == "qos_policy_file") return DriftComponent::Qos;
  if (key == "per_module_logging_file" || key == "port_prof_ignore_file") return DriftComponent::PolicyFiles;
  return DriftComponent::Routing;  // the routing engines' and unicast manager's input files
}

constexpr std::size_t kDataSize = 64;
constexpr std::size_t kFirstDigest = 2;
constexpr std::size_t kServiceDataRead = 56;

}  // namespace

bool is_per_head_conf_key(std::string_view key) {
  static const std::vector<std::string_view> keys{"guid",     "sm_priority",    "sm_key",     "sa_key",
                                                  "log_file", "dump_files_dir", "sa_db_file", "node_name_map_name"};
  if (std::find(keys.begin(), keys.end(), key) != keys.end()) return true;
  const auto& policy = opensm::sweep_read_policy_keys();
  return std::binary_search(policy.begin(), policy.end(), std::string(key));
}

ConfigDigests compute_digests(const DigestInputs& in) {
  ConfigDigests out;
  auto set = [&out](DriftComponent c, std::string_view text) {
    out.digest[static_cast<std::size_t>(c)] = digest(c, text);
  };
  std::string conf;
  for (const auto& [key, value] : opensm::parse_opensm_conf(in.rendered_conf))  // sorted by key
    if (!is_per_head_conf_key(key)) conf += key + " " + value + "\n";
  set(DriftComponent::OpensmConf, conf);
  std::array<std::string, kDriftComponents> files;
  for (const auto& [key, where] : opensm::header_policy_files(in.rendered_conf))  // sorted by key
    files[static_cast<std::size_t>(policy_component(key))] += key + " " + where.second + "\n";
  for (auto c : {DriftComponent::Partitions, DriftComponent::Qos, DriftComponent::Routing,
                 DriftComponent::PolicyFiles})
    set(c, files[static_cast<std::size_t>(c)]);
  set(DriftComponent::HaPolicy, in.ha_policy);
  set(DriftComponent::Opensm, in.opensm);
  std::string key;
  auto append = [&key](std::uint64_t v) {
    for (int i = 0; i < 8; ++i) key += static_cast<char>(v >> (56 - 8 * i));
  };
  append(in.sm_key);
  // OpenSM's default SA key adds nothing: a config without sa_key keeps the
  // SmKey digest it had before smhad rendered sa_key.
  if (in.sa_key != 1) append(in.sa_key);
  set(DriftComponent::SmKey, key);
  return out;
}

std::array<std::uint8_t, 64> encode_service_data(const ConfigDigests& d) {
  std::array<std::uint8_t, kDataSize> b{};
  b[0] = kDigestLayoutVersion;
  b[1] = static_cast<std::uint8_t>(kDriftComponents);
  for (std::size_t i = 0; i < kDriftComponents; ++i)
    std::copy(d.digest[i].begin(), d.digest[i].end(), b.begin() + static_cast<std::ptrdiff_t>(kFirstDigest + i * kDigestSize));
  return b;
}

Result<ConfigDigests> decode_service_data(std::span<const std::uint8_t> b) {
  auto bad = [](std::string what) { return make_error(Errc::Parse, std::move(what)); };
  if (b.size() != kDataSize)
    return bad("ServiceData is " + std::to_string(b.size()) + " bytes; 64 expected");
  if (b[0] != kDigestLayoutVersion)
    return bad("ServiceData layout version " + std::to_string(b[0]) + " (byte 0); this smhad reads version " +
               std::to_string(kDigestLayoutVersion));
  if (b[1] != kDriftComponents)
    return bad("ServiceData says " + std::to_string(b[1]) + " digests (byte 1); layout 1 has " +
               std::to_string(kDriftComponents));
  const std::size_t end = kFirstDigest + kDriftComponents * kDigestSize;
  // Bytes 56..63 (ServiceData64[1]) are not read: ibsim does not deliver them.
  for (std::size_t i = end; i < kServiceDataRead; ++i)
    if (b[i] != 0) return bad("ServiceData reserved byte " + std::to_string(i) + " is not 0");
  ConfigDigests d;
  for (std::size_t i = 0; i < kDriftComponents; ++i)
    std::copy_n(b.begin() + static_cast<std::ptrdiff_t>(kFirstDigest + i * kDigestSize), kDigestSize,
                d.digest[i].begin());
  return d;
}

std::vector<DriftComponent> differing(const ConfigDigests& a, const ConfigDigests& b) {
  std::vector<DriftComponent> out;
  for (std::size_t i = 0; i < kDriftComponents; ++i)
    if (a.digest[i] != b.digest[i]) out.push_back(static_cast<DriftComponent>(i));
  return out;
}

// ---- DriftMonitor -------------------------------------------------------------

DriftMonitor::DriftMonitor(DriftConfig cfg, Scheduler& sched, mad::MadTransport& mad, Guid own,
                           std::vector<std::pair<std::string, Guid>> peers, AlarmSink& sink)
    : cfg_(cfg), sched_(sched), mad_(mad), own_guid_(own), sink_(sink) {
  for (auto& [name, guid] : peers) {
    PeerDrift p;
    p.name = std::move(name);
    p.guid = guid;
    p.detail = "not read yet";
    peers_.push_back(std::move(p));
  }
}

DriftMonitor::~DriftMonitor() {
  if (running_) {
    // Destroyed while running (a test or a crash path): timers only, no MADs.
    if (register_timer_) sched_.cancel(*register_timer_);
    if (read_timer_) sched_.cancel(*read_timer_);
  }
}

mad::ServiceRecord DriftMonitor::record() const {
  mad::ServiceRecord r;
  r.id = kSmhaServiceId;
  r.gid = own_gid();
  r.pkey = 0;  // no P_Key: OpenSM then checks none when others read it
  r.lease = cfg_.lease_s;
  r.name = kSmhaServiceName;
  if (own_) r.data = encode_service_data(*own_);
  return r;
}

void DriftMonitor::start() {
  if (running_) return;
  running_ = true;
  started_at_ = sched_.now();
  alive_ = std::make_shared<int>(0);
  arm_register(cfg_.first_delay);
  arm_read(cfg_.first_delay + milliseconds(500));
}

void DriftMonitor::stop() {
  if (!running_) return;
  running_ = false;
  alive_.reset();
  if (register_timer_) sched_.cancel(*register_timer_);
  if (read_timer_) sched_.cancel(*read_timer_);
  register_timer_.reset();
  read_timer_.reset();
  // A clean stop takes our record away now, not at the end of its lease.
  if (registered_here_ && own_) {
    mad::RequestOptions o = cfg_.sa;
    o.retries = 0;
    ++stats_.mads;
    mad_.delete_service_record(sa_lid_, record(), o, [](Result<mad::ServiceRecordReply>) {});
  }
  registered_here_ = false;
  // The verdicts go with the monitor: a raised alarm is not left behind for
  // a sink that outlives it (an engine restarted by a reload).
  if (!alarm_.empty()) {
    alarm_.clear();
    sink_.clear(ClearAlarm{AlarmKind::ConfigDrift}, sched_.now());
  }
}

void DriftMonitor::set_own(const ConfigDigests& d) {
  if (own_ && *own_ == d) return;
  own_ = d;
  for (auto& p : peers_)
    if (p.digests) compare(p);
  update_alarm();
  if (running_ && sa_lid_.value != 0) register_record();
}

void DriftMonitor::set_sa_lid(Lid sa_lid) {
  if (sa_lid == sa_lid_) return;
  sa_lid_ = sa_lid;
  registered_here_ = false;
  if (running_ && own_ && sa_lid.value != 0) register_record();
}

void DriftMonitor::arm_register(Duration after) {
  if (register_timer_) sched_.cancel(*register_timer_);
  std::weak_ptr<int> alive = alive_;
  register_timer_ = sched_.schedule_at(sched_.now() + after, [this, alive] {
    if (alive.expired()) return;
    register_timer_.reset();
    register_record();
  });
}

void DriftMonitor::arm_read(Duration after) {
  if (read_timer_) sched_.cancel(*read_timer_);
  std::weak_ptr<int> alive = alive_;
  read_timer_ = sched_.schedule_at(sched_.now() + after, [this, alive] {
    if (alive.expired()) return;
    read_timer_.reset();
    read_peers();
  });
}

void DriftMonitor::count_mads(const Result<mad::ServiceRecordReply>& r) {
  stats_.mads += r.ok() ? static_cast<std::uint64_t>(r->attempts)
                        : r.error().code == mad::kErrTimeout ? static_cast<std::uint64_t>(cfg_.sa.retries) + 1 : 1;
}

void DriftMonitor::register_record() {
  if (!running_) return;
  arm_register(cfg_.refresh);
  if (!own_) return;
  if (sa_lid_.value == 0 || sa_lid_.value >= 0xc000) {
    stats_.last_register_error = "no master SM LID on our port yet";
    return;
  }
  stats_.sa_lid = sa_lid_;
  std::weak_ptr<int> alive = alive_;
  const Lid to = sa_lid_;
  mad_.set_service_record(to, record(), cfg_.sa, [this, alive, to](Result<mad::ServiceRecordReply> r) {
    if (alive.expired()) return;
    count_mads(r);
    if (!r.ok()) {
      ++stats_.registration_errors;
      stats_.last_register_error = to_string(r.error());
      return;
    }
    ++stats_.registrations;
    stats_.registered_at = sched_.now();
    stats_.last_register_error.clear();
    if (to == sa_lid_) registered_here_ = true;
  });
}

void DriftMonitor::read_peers() {
  if (!running_) return;
  arm_read(cfg_.read_interval);
  if (!own_) return;  // nothing to compare with
  if (sa_lid_.value == 0 || sa_lid_.value >= 0xc000) {
    for (auto& p : peers_)
      if (!p.read_at) p.detail = "no master SM LID on our port yet";
    update_alarm();
    return;
  }
  std::weak_ptr<int> alive = alive_;
  for (std::size_t i = 0; i < peers_.size(); ++i) {
    ++stats_.reads;
    const mad::Gid gid{cfg_.subnet_prefix, peers_[i].guid};
    mad_.get_service_record(sa_lid_, kSmhaServiceId, gid, kSmhaServiceName, cfg_.sa,
                            [this, alive, i](Result<mad::ServiceRecordReply> r) {
                              if (alive.expired()) return;
                              on_record(i, std::move(r));
                            });
  }
}

void DriftMonitor::on_record(std::size_t i, Result<mad::ServiceRecordReply> r) {
  count_mads(r);
  PeerDrift& p = peers_[i];
  const TimePoint now = sched_.now();
  // A failed read keeps the last verdict while the peer's last record's lease
  // would still run; after that the peer is unknown.
  auto failed = [&](std::string why) {
    p.last_error = why;
    if (p.read_at && now - *p.read_at < seconds(cfg_.lease_s)) return;
    p.state = PeerDriftState::Unknown;
    p.detail = std::move(why);
    p.digests.reset();
    p.differing.clear();
  };
  if (!r.ok()) {
    const bool none = r.error().code == mad::kErrMadStatus && r.error().mad_status == mad::kSaStatusNoRecords;
    if (none) ++stats_.absent;
    else ++stats_.read_errors;
    failed(none ? "no smha record at the SA (no smha there, or not registered yet)"
                : to_string(r.error()));
    update_alarm();
    return;
  }
  const mad::ServiceRecord& rec = r->info;
  // The SA answered a Get by ServiceGID and name: anything else is not the
  // peer's record (a misbehaving SA, or a record forged for another port).
  if (rec.gid.guid != p.guid || rec.gid.prefix != cfg_.subnet_prefix || rec.name != kSmhaServiceName ||
      rec.id != kSmhaServiceId) {
    ++stats_.rejected_foreign;
    failed("rejected a record for " + mad::to_string(rec.gid) + " ServiceID " + std::to_string(rec.id) +
           " (asked for " + mad::to_string(mad::Gid{cfg_.subnet_prefix, p.guid}) + ", a configured head)");
    update_alarm();
    return;
  }
  auto d = decode_service_data(rec.data);
  if (!d) {
    ++stats_.rejected_data;
    failed("rejected its record: " + d.error().message);
    update_alarm();
    return;
  }
  ++stats_.records;
  p.last_error.clear();
  p.read_at = now;
  p.digests = *d;
  compare(p);
  update_alarm();
}

void DriftMonitor::compare(PeerDrift& p) {
  if (!own_ || !p.digests) return;
  p.differing = differing(*own_, *p.digests);
  if (p.differing.empty()) {
    p.state = PeerDriftState::Match;
    p.detail = "same configuration";
    return;
  }
  p.state = PeerDriftState::Drift;
  p.detail.clear();
  for (auto c : p.differing) p.detail += (p.detail.empty() ? "" : ", ") + std::string(to_string(c));
  p.detail += " differ";
}

void DriftMonitor::update_unknown_alarm() {
  const TimePoint now = sched_.now();
  std::string text;
  for (auto& p : peers_) {
    if (p.state != PeerDriftState::Unknown) {
      p.unknown_since.reset();
      continue;
    }
    if (!p.unknown_since) p.unknown_since = started_at_;
    const Duration d = now - *p.unknown_since;
    if (d < cfg_.unknown_alarm) continue;
    text += (text.empty() ? "" : "; ") + p.name + " (" + to_string(p.guid) + ") unknown for " +
            std::to_string(std::chrono::duration_cast<std::chrono::seconds>(d).count()) + " s: " +
            (p.last_error.empty() ? p.detail : p.last_error);
  }
  // Raised once per episode; the detail is not re-raised as its age grows.
  if (text.empty() == unknown_alarm_.empty()) return;
  unknown_alarm_ = text;
  if (text.empty()) sink_.clear(ClearAlarm{AlarmKind::DriftUnknown}, now);
  else sink_.alarm(RaiseAlarm{AlarmKind::DriftUnknown, text}, now);
}

void DriftMonitor::update_alarm() {
  update_unknown_alarm();
  std::string text;
  for (const auto& p : peers_) {
    if (p.state != PeerDriftState::Drift) continue;
    text += (text.empty() ? "" : "; ") + p.name + " (" + to_string(p.guid) + "): " + p.detail;
  }
  if (text == alarm_) return;
  alarm_ = text;
  const TimePoint now = sched_.now();
  if (text.empty()) sink_.clear(ClearAlarm{AlarmKind::ConfigDrift}, now);
  else sink_.alarm(RaiseAlarm{AlarmKind::ConfigDrift, text}, now);
}

}  // namespace smha::fabric
