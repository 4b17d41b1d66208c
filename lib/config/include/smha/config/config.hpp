// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// smha configuration: one YAML file (default /etc/smha/smha.yaml) -> a validated
// Config. Every key is documented in doc/configuration.md; config/smha.yaml is a
// commented example.
//
// Loading never stops at the first problem: every error is collected and carries
// the file, line and column (yaml-cpp marks, printed 1-based) and the key path,
// e.g. "smha.yaml:12:5: opensm.sweep_interval: must be > 0 (got -3)".
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "smha/core/fabric_name.hpp"
#include "smha/core/types.hpp"

namespace smha::config {

inline constexpr const char* kDefaultConfigPath = "/etc/smha/smha.yaml";

// Size caps (doc/configuration.md "Limits"). A name (node.name, peers[].name)
// is at most kMaxNameBytes of UTF-8 without control characters, so it can go
// into `smctl status` text, logs and Prometheus labels as it is; any other
// string value is at most kMaxStringBytes; `peers` holds at most kMaxPeers.
inline constexpr std::size_t kMaxNameBytes = 64;
inline constexpr std::size_t kMaxStringBytes = 4096;
inline constexpr std::size_t kMaxPeers = 64;

// A place in the YAML file. line/column are 1-based; 0 means "no position"
// (e.g. a problem with the file as a whole).
struct Position {
  int line = 0;
  int column = 0;
};

// One problem found while loading. to_string() gives
// "<file>:<line>:<column>: <key_path>: <message>" (parts without a value left out).
struct Diagnostic {
  std::string file;
  Position pos;
  std::string key_path;  // dotted, with [i] for list items: "peers[1].port_guid"
  std::string message;
  std::string to_string() const;
};

enum class FailbackPolicy { Sticky, Preempt };
enum class OpensmFlavor { Auto, Upstream, Nvidia };
std::string_view to_string(FailbackPolicy policy);
std::string_view to_string(OpensmFlavor flavor);

// The local IB port smhad and OpenSM use: either a CA name and port number, or
// a port GUID (exactly one of the two forms).
struct PortSelector {
  std::string ca;                 // e.g. "mlx5_0"; empty when port_guid is set
  int port = 0;                   // 1-based; 0 when port_guid is set
  std::optional<Guid> port_guid;  // set when the YAML gives node.port_guid
};

// A peer head. smhad polls its SM by `lid` (LID-routed) and, when given, by
// `dr_path` (directed route from this node's port); a peer with neither is
// looked up at run time by its port GUID where possible (doc/configuration.md).
struct Peer {
  std::string name;
  Guid port_guid;
  std::optional<Lid> lid;         // 1..0xbfff
  std::optional<DrPath> dr_path;  // at least one hop
  // Its sm_priority (0..15), when it differs from this head's (unset: the same).
  // Every head must list the same priorities (doc/configuration.md).
  std::optional<int> sm_priority;
  // Where its smhad listens for copies (continuity.listen there): a host name
  // or IP address and a port. Required for every peer when `continuity` is set.
  std::string address_host;
  int address_port = 0;
};

struct FailoverPolicy {
  std::chrono::milliseconds poll_interval{100};
  int misses_before_takeover = 3;
  FailbackPolicy failback = FailbackPolicy::Sticky;
  std::chrono::seconds preempt_holddown{30};
  // OpenSM's own standby polling (sminfo_polling_timeout / polling_retry_number):
  // a slow backstop for when smhad itself is gone. It must be much slower than
  // smha's detection (validated), so OpenSM never races smhad.
  std::chrono::milliseconds opensm_polling_timeout{2000};
  int opensm_polling_retries = 4;
};

// A raw opensm.conf key from opensm.extra, kept with its YAML position so later
// checks (e.g. against the installed OpenSM) can point at it.
struct ExtraKey {
  std::string key;
  std::string value;  // as rendered: YAML true/false become TRUE/FALSE
  Position pos;
};

struct OpensmSettings {
  std::string binary = "/usr/sbin/opensm";
  OpensmFlavor flavor = OpensmFlavor::Auto;
  std::string routing_engine = "ftree,updn";
  int sweep_interval_s = 10;
  // SMPs OpenSM keeps on the wire at once (its max_wire_smps; OpenSM's own
  // default is 4). A takeover's first master sweep, and with it the SA
  // outage, is bound by it: doc/opensm-conf.md "max_wire_smps". Not rendered
  // when opensm.extra sets max_wire_smps (an older smha.yaml's way).
  int max_wire_smps = 8;
  bool adaptive_routing = false;
  bool sharp = false;
  bool downgrade_unsupported = false;
  std::string log_file = "/var/log/opensm.log";
  std::string dump_files_dir = "/var/log/";
  std::string cache_dir = "/var/cache/opensm";  // OSM_CACHE_DIR for the OpenSM process
  std::string conf_path = "/var/lib/smha/opensm.conf";
  // LID continuity (doc/lid-continuity.md): while our OpenSM is STANDBY,
  // smhad keeps <cache_dir>/guid2lid from the fabric's LIDs, and OpenSM gets
  // honor_guid2lid_file TRUE so it restores them when it takes over.
  bool lid_continuity = true;
  // What opensm.conf gets: TRUE with lid_continuity (an explicit false then
  // is refused); otherwise as configured (a guid2lid kept in sync by other means).
  bool honor_guid2lid_file = true;
  bool sa_db_dump = true;
  std::string sa_db_file;         // empty: not rendered
  std::vector<ExtraKey> extra;    // sorted by key
  // Supervision of the OpenSM process (doc/supervision.md): a crashed OpenSM is
  // restarted after restart_backoff_initial, doubling up to restart_backoff_max;
  // a run of restart_stable resets the doubling; crash_loop_count crashes within
  // crash_loop_window stop the restarts (reported); the crash loop is retried,
  // one start each crash_loop_retry, or crash_loop_retry_no_master while no
  // SM is MASTER on the fabric; a reload retries at once.
  std::chrono::milliseconds restart_backoff_initial{1000};
  std::chrono::seconds restart_backoff_max{60};
  std::chrono::seconds restart_stable{60};
  int crash_loop_count = 5;
  std::chrono::seconds crash_loop_window{300};
  std::chrono::seconds crash_loop_retry{600};
  std::chrono::seconds crash_loop_retry_no_master{60};
};

struct ControlSettings {
  std::string socket_path = instance_socket_path("");  // /run/smha/smhad.sock
  std::string group = "smha";
};

// Prometheus metrics (doc/configuration.md, `metrics`). Both outputs are off by
// default. The HTTP endpoint binds a loopback address only (validated).
struct MetricsSettings {
  std::string listen_address;  // "127.0.0.1", "::1", ...; empty: no HTTP endpoint
  int listen_port = 0;         // 1..65535 when listen_address is set
  std::string textfile_dir;    // node_exporter textfile directory; empty: off
  std::string textfile_name = "smha.prom";  // smha-<fabric>.prom for an instance
  std::chrono::seconds textfile_interval{15};
};

// The engine names of an opensm.routing_engine chain, in order: the value split
// at commas (the only separator the configuration accepts; OpenSM also splits at
// blanks, osm_opensm.c setup_routing_engines). Empty names are kept, so that
// validation can name them.
std::vector<std::string> split_routing_engines(std::string_view chain);

// True for a literal IPv4 address in 127.0.0.0/8 or the IPv6 loopback (::1).
bool is_loopback_address(std::string_view address);

// health.error_thresholds' keys: the error counters smha reads, in the order
// of mad::ErrorCounter (their mad::counter_key; tests/unit/config checks it).
inline constexpr std::array<std::string_view, 8> kErrorThresholdKeys{
    "symbol_errors", "link_error_recovery",      "link_downed",   "rcv_errors",
    "local_link_integrity", "excessive_buffer_overrun", "xmit_discards", "vl15_dropped"};

// Fabric health (doc/health.md, `health`): the degraded-link alarm and what
// the operator expects each kind of link to run at ("4X NDR", "4X", "HDR";
// empty: the majority of that kind).
struct HealthSettings {
  bool link_degraded_alarm = true;
  int link_degraded_min_links = 1;
  std::string expect_switch_links;
  std::string expect_ca_links;
  // The error counters (PMA PortCounters), read by the master's head.
  int counter_reads_per_second = 20;  // 0: not read
  int counter_start_after_s = 30;
  int error_window_s = 3600;
  bool link_errors_alarm = true;
  int link_errors_min_ports = 1;
  // By counter key (mad::counter_key: "symbol_errors", ...): the rise within
  // the window that counts; the ones not given keep their defaults.
  std::map<std::string, int> error_thresholds;
  friend bool operator==(const HealthSettings&, const HealthSettings&) = default;
};

// The peer channel (doc/continuity.md, `continuity`): off unless the section
// is given. TLS 1.3 with X.509 certificates from the operator's CA, each
// naming its head.
struct ContinuitySettings {
  bool enabled = false;
  std::string listen_address;  // an IP address ("0.0.0.0", "::", "10.0.0.1")
  int listen_port = 0;
  std::string certificate;     // PEM, this head's (CN or DNS SAN = node.name)
  std::string private_key;     // PEM, root-only
  std::string ca;              // PEM, the CA that signs every head's certificate
  int max_copy_age_s = 120;
  int refresh_s = 30;
  int max_copy_mib = 64;
  // What the master's SA copy may carry (opensm::SaDumpBounds; 0: no bound):
  // the records over them are left out and sa_copy_trimmed names their ports.
  int max_services_per_port = 64;
  int max_services = 4096;
  int max_subscriptions_per_port = 64;
  int max_subscriptions = 4096;
  int max_groups = 8192;
  friend bool operator==(const ContinuitySettings&, const ContinuitySettings&) = default;
};

struct Config {
  std::string source_path;  // the file (or name) it was loaded from
  // The fabric this instance serves (`fabric`, or smhad --fabric as the
  // template unit smhad@NAME passes it); empty on a one-fabric head. When set,
  // every per-instance path not given in the file defaults to one of its own
  // (instance_defaults below).
  std::string fabric;
  std::string node_name;
  PortSelector port;
  std::vector<Peer> peers;
  int sm_priority = 0;  // 0..15
  FailoverPolicy failover;
  std::uint64_t sm_key = 1;  // OpenSM's default (OSM_DEFAULT_SM_KEY) when unset
  bool sm_key_set = false;   // false: neither sm_key nor sm_key_file was given
  // The SA's key (opensm.conf sa_key): an SA request whose SM_Key field
  // carries it is trusted. Never 0. OpenSM's default (OSM_DEFAULT_SA_KEY) when
  // unset.
  std::uint64_t sa_key = 1;
  bool sa_key_set = false;   // false: neither sa_key nor sa_key_file was given
  OpensmSettings opensm;
  ControlSettings control;
  MetricsSettings metrics;
  std::map<std::string, std::vector<std::string>> hooks;  // event -> executables (absolute)
  std::chrono::seconds hook_timeout{10};
  // A peer's drift verdict unknown this long raises drift_unknown (doc/drift.md).
  HealthSettings health;
  ContinuitySettings continuity;
  std::chrono::seconds drift_unknown_alarm{300};
  std::string state_dir = "/var/lib/smha";
  // Where each key given in the YAML sits ("opensm.sharp" -> line/column of its
  // value), so later checks (e.g. against the installed OpenSM) can point at it.
  std::map<std::string, Position> positions;
  Position position_of(const std::string& key_path) const;
};

// Warning (not an error) when a config sets neither sm_key nor sm_key_file:
// OpenSM's well-known default key is then used. `smhad --check-config` prints it
// and smhad logs it at start (doc/packaging.md says why the package ships so).
inline constexpr const char* kDefaultSmKeyWarning =
    "not set: OpenSM's default SM_Key 0x1 is used; any SM on the fabric can take "
    "mastership with it. Set the same sm_key_file (or sm_key) on every head";

// Warning when sa_key is OpenSM's well-known default 0x1 (unset, or set so).
inline constexpr const char* kDefaultSaKeyWarning =
    "is OpenSM's default 0x1: any host that puts 0x1 in an SA request is a trusted SA client "
    "(every multicast member's PortGID, subscribers' QPNs, P_Key tables). Set the same "
    "sa_key_file (or sa_key) on every head";
// Warning when sa_key equals sm_key: whoever is given the SA key for trusted
// queries could then also act as a subnet manager.
inline constexpr const char* kSameSaKeyWarning =
    "equals sm_key: a host given the SA key for trusted SA queries could also take part in SM "
    "mastership. Use a key of its own (sa_key_file)";

// The key warnings of a loaded config, in this order: sm_key unset
// (kDefaultSmKeyWarning), sa_key 0x1 (kDefaultSaKeyWarning), sa_key equal to
// a set sm_key (kSameSaKeyWarning). Each names the file, the key and, when
// the YAML sets it, its position. `smhad --check-config` prints them and
// smhad logs them at start.
std::vector<Diagnostic> key_warnings(const Config& config);

// The outcome of loading: a Config, or every error found. Never both.
class [[nodiscard]] ConfigResult {
 public:
  explicit ConfigResult(Config config) : config_(std::move(config)) {}
  explicit ConfigResult(std::vector<Diagnostic> errors) : errors_(std::move(errors)) {}

  bool ok() const { return config_.has_value(); }
  explicit operator bool() const { return ok(); }
  const Config& value() const& { return *config_; }
  Config&& value() && { return std::move(*config_); }
  const std::vector<Diagnostic>& errors() const { return errors_; }
  // Every error, one per line.
  std::string error_text() const;

 private:
  std::optional<Config> config_;
  std::vector<Diagnostic> errors_;
};

struct LoadOptions {
  // The instance name from the command line (smhad --fabric, smhad@NAME): the
  // fabric unless the file names one, which must then be the same.
  std::string fabric;
};

// Reads and validates `path`. Reads sm_key_file and sa_key_file if set. Touches nothing else.
ConfigResult load_config(const std::string& path, const LoadOptions& options = {});
// Same, from text; `name` is used as the file name in diagnostics and as
// Config::source_path. sm_key_file and sa_key_file are still read from disk.
ConfigResult load_config_from_string(std::string_view text, const std::string& name,
                                     const LoadOptions& options = {});

// The per-instance defaults of fabric `name` (doc/configuration.md "Several
// fabrics on one head"): the values of state_dir, control.socket and the
// opensm paths when the file does not set them.
struct InstancePaths {
  std::string state_dir;
  std::string socket_path;
  std::string conf_path;
  std::string cache_dir;
  std::string log_file;
  std::string dump_files_dir;
  std::string textfile_name;
};
InstancePaths instance_defaults(const std::string& name);

// Levenshtein distance (for did-you-mean suggestions).
std::size_t edit_distance(std::string_view a, std::string_view b);
// The closest of `candidates` to `word`, if it is close enough to be a likely typo.
std::optional<std::string> did_you_mean(std::string_view word,
                                        const std::vector<std::string>& candidates);

// The opensm.conf keys smha renders itself (opensm.extra may not set them),
// each with the YAML key that controls it and, for messages, any alternative
// way to set it (e.g. " or sm_key_file").
struct ManagedKey {
  std::string path;
  std::string alternative;
};
const std::map<std::string, ManagedKey, std::less<>>& managed_opensm_keys();

}  // namespace smha::config
