// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// MadTransport: the seam through which smha sends SubnGet/SubnSet(SMInfo),
// SubnGet(PortInfo, NodeInfo, NodeDescription, SwitchInfo, LinearForwardingTable),
// SubnAdmGetTable(SMInfoRecord, PortInfoRecord), SubnAdmSet/Get/Delete(ServiceRecord),
// SubnAdmGet(MCMemberRecord) and PerfMgtGet(PortCounters): one virtual,
// submit(Request), and a typed helper per query above it.
// Real implementation: UmadTransport (libibumad). Test implementations: the
// in-process simulated fabric (lib/sim) and scripted fakes.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include "smha/core/clock.hpp"
#include "smha/core/result.hpp"
#include "smha/core/sminfo.hpp"
#include "smha/core/types.hpp"

namespace smha::mad {

// Where a request goes: LID-routed (class 0x01) or directed route (class 0x81).
// An empty DrPath is the local port's own SM (hop count 0).
using Target = std::variant<Lid, DrPath>;

struct RequestOptions {
  Duration timeout = std::chrono::milliseconds(200);  // per attempt
  int retries = 0;                                     // extra attempts after the first
  std::uint64_t m_key = 0;                             // M_Key carried in the SMP
};

// PortInfo PortState values (IBA 14.2.5.6 PortInfo, "PortState": 1 Down,
// 2 Initialize, 3 Armed, 4 Active), as PortInfo and sysfs report them.
enum class PortState : std::uint8_t { Unknown = 0, Down = 1, Init = 2, Armed = 3, Active = 4 };
// "DOWN", "INIT", "ARMED", "ACTIVE"; "unknown" for anything else.
std::string_view to_string(PortState state);

// What a port's link trains at and could train at (PortInfo, IBA 14.2.5.6
// Table 155; fabric health, doc/health.md). Widths are LinkWidth bit masks
// (1 1X, 2 4X, 4 8X, 8 12X, 16 2X); speeds LinkSpeed masks (1 SDR 2.5, 2 DDR
// 5, 4 QDR 10 Gb/s) and, where the port has IsExtendedSpeedsSupported,
// LinkSpeedExt masks (1 FDR, 2 EDR, 4 HDR, 8 NDR). An Active field holds one
// bit; Enabled of width may be 0xff ("all supported"), of speed 0xf.
struct LinkInfo {
  std::uint8_t width_enabled = 0;
  std::uint8_t width_supported = 0;
  std::uint8_t width_active = 0;
  std::uint8_t speed_supported = 0;
  std::uint8_t speed_enabled = 0;
  std::uint8_t speed_active = 0;
  std::uint8_t ext_supported = 0;   // LinkSpeedExtSupported (0: none)
  std::uint8_t ext_enabled = 0;     // LinkSpeedExtEnabled (5 bits)
  std::uint8_t ext_active = 0;      // LinkSpeedExtActive (0: not extended)
  std::uint8_t phys_state = 0;      // PortPhysicalState (5 LinkUp)
  friend bool operator==(const LinkInfo&, const LinkInfo&) = default;
};

// CapabilityMask bit 14: the port has the LinkSpeedExt fields.
inline constexpr std::uint32_t kCapExtendedSpeeds = 1u << 14;

// The PortInfo fields smha reads.
struct PortInfo {
  Lid lid;
  Lid sm_lid;                  // MasterSMLID
  std::uint8_t local_port = 0; // LocalPortNum: the port the SMP came in on
  PortState state = PortState::Unknown;
  // CapabilityMask (IBA 14.2.5.6 Table 155): bit 1 IsSM is set on a port
  // where an SM runs (the census looks for it, doc/census.md).
  std::uint32_t capability_mask = 0;
  LinkInfo link{};
  friend bool operator==(const PortInfo&, const PortInfo&) = default;
};

// PortInfo CapabilityMask bit 1: an SM is bound to this port (IsSM).
inline constexpr std::uint32_t kCapIsSm = 1u << 1;
inline bool is_sm(const PortInfo& p) { return (p.capability_mask & kCapIsSm) != 0; }

// NodeInfo NodeType (IBA 14.2.5.3, Table 146: 1 channel adapter, 2 switch, 3 router).
enum class NodeType : std::uint8_t { Unknown = 0, Ca = 1, Switch = 2, Router = 3 };
// "CA", "switch", "router"; "unknown" for anything else.
std::string_view to_string(NodeType type);

// The NodeInfo attribute (IBA 14.2.5.3, Table 146), all of it.
struct NodeInfo {
  std::uint8_t base_version = 1;
  std::uint8_t class_version = 1;
  NodeType type = NodeType::Unknown;
  std::uint8_t num_ports = 0;       // physical ports (a switch's port 0 not counted)
  Guid system_image_guid;
  Guid node_guid;
  Guid port_guid;                   // the port the SMP came in on (a switch: port 0)
  std::uint16_t partition_cap = 0;
  std::uint16_t device_id = 0;
  std::uint32_t revision = 0;
  std::uint8_t local_port = 0;      // LocalPortNum: the port the SMP came in on
  std::uint32_t vendor_id = 0;      // 24 bits
  friend bool operator==(const NodeInfo&, const NodeInfo&) = default;
};

// An answer: its decoded payload, the round trip of the answered attempt
// (send -> receipt) and the attempts used (1: the first try answered). Every
// query's answer is one of these (the aliases below name them).
template <class T>
struct Reply {
  T info{};
  Duration rtt{};
  int attempts = 1;
};
using SmInfoReply = Reply<SmInfo>;
using PortInfoReply = Reply<PortInfo>;

// Error codes a transport reports in Error::code:
//   "timeout"     no answer within timeout x (retries + 1)
//   "mad_status"  answered with a non-zero MAD status (message names it)
//   "io"          the request could not be sent (message names errno)
//   "parse"       the answer was malformed (message says how)
//   "closed"      the transport was closed before an answer
//   "invalid"     options or a target the transport cannot use
inline constexpr Errc kErrTimeout = Errc::Timeout;
inline constexpr Errc kErrMadStatus = Errc::MadStatus;
// A kErrMadStatus error: `status` in Error::mad_status, `message` naming it.
inline Error mad_status_error(std::uint16_t status, std::string message) {
  return Error{kErrMadStatus, std::move(message), status};
}
// SA class-specific status (IBA 15.2.1.1) a caller branches on: no record matched.
inline constexpr std::uint16_t kSaStatusNoRecords = 0x0300;

using NodeInfoReply = Reply<NodeInfo>;

// NodeDescription (IBA 14.2.5.2): up to 64 bytes of UTF-8, NUL-padded. `text`
// (`info`) is the bytes before the first NUL, unescaped (smha::printable() shows it).
using NodeDescriptionReply = Reply<std::string>;

// One SM as the SA lists it. OpenSM fills `info.sm_key` with 0 (it never
// reveals SM_Key through the SA) and, for itself, ActCount = its QP0 MADs sent.
struct SmInfoRecord {
  Lid lid;
  SmInfo info;
  friend bool operator==(const SmInfoRecord&, const SmInfoRecord&) = default;
};

// A decoded GetTableResp(SMInfoRecord).
struct SmInfoRecordTable {
  std::vector<SmInfoRecord> records;  // the records that arrived
  // How many the response says the whole table has (from the RMPP
  // PayloadLength); nullopt when it does not say (PayloadLength 0: ibsim, whose
  // umad2sim carries one MAD and fills in no RMPP header).
  std::optional<std::uint32_t> claimed;
  // Fewer records arrived than the table has: `claimed` > records, or, with no
  // claim, non-zero bytes of a further, partial record after the whole ones
  // (ibsim cuts the stream at 256 bytes, inside the 7th record).
  bool truncated = false;
  friend bool operator==(const SmInfoRecordTable&, const SmInfoRecordTable&) = default;
};

using SmInfoRecordsReply = Reply<SmInfoRecordTable>;

// One port as the SA lists it in a PortInfoRecord (IBA 15.2.5.3): its LID
// (EndportLID), its number on its node and the PortInfo the master's sweeps
// last read (M_Key zeroed for an untrusted requester).
struct PortInfoRecord {
  Lid lid;
  std::uint8_t port_num = 0;
  PortInfo info;
  friend bool operator==(const PortInfoRecord&, const PortInfoRecord&) = default;
};

// A decoded GetTableResp(PortInfoRecord); `claimed` and `truncated` as in
// SmInfoRecordTable.
struct PortInfoRecordTable {
  std::vector<PortInfoRecord> records;
  std::optional<std::uint32_t> claimed;
  bool truncated = false;
  friend bool operator==(const PortInfoRecordTable&, const PortInfoRecordTable&) = default;
};

using PortInfoRecordsReply = Reply<PortInfoRecordTable>;

// A port GID (IBA 4.1.1): the subnet prefix and the port GUID (its interface
// ID), as a ServiceRecord's ServiceGID carries it.
struct Gid {
  std::uint64_t prefix = 0;
  Guid guid;
  friend constexpr auto operator<=>(const Gid&, const Gid&) = default;
};
// OpenSM's default subnet_prefix, the link-local prefix (IBA 4.1.1).
inline constexpr std::uint64_t kDefaultSubnetPrefix = 0xfe80000000000000ULL;
// "0xfe80000000000000:0x0002c90000000001" (prefix, then port GUID).
std::string to_string(const Gid& gid);

// A ServiceRecord (IBA 15.2.5.14; OpenSM ib_service_record_t): what a port
// registers with the SA. `name` is the ServiceName's bytes before the first
// NUL (at most 64); `data` is ServiceData8/16/32/64 as 64 raw bytes.
struct ServiceRecord {
  std::uint64_t id = 0;           // ServiceID
  Gid gid;                        // ServiceGID
  std::uint16_t pkey = 0;         // ServiceP_Key
  std::uint32_t lease = 0;        // ServiceLease, seconds; 0xffffffff: infinite
  std::array<std::uint8_t, 16> key{};  // ServiceKey (the SA zeroes it for an untrusted reader)
  std::string name;               // ServiceName
  std::array<std::uint8_t, 64> data{};  // ServiceData
  friend bool operator==(const ServiceRecord&, const ServiceRecord&) = default;
};

// What the SA answered with: the record registered, found or deleted.
using ServiceRecordReply = Reply<ServiceRecord>;

// The error counters smha keeps (PMA PortCounters, IBA 16.1.3.5 Table 247; codec: pma.hpp). The traffic
// counters (PortXmitData and the like) are not read.
enum class ErrorCounter : std::uint8_t {
  SymbolErrors,            // SymbolErrorCounter, 16 bits: bad symbols on the wire (a dirty fibre, a failing transceiver)
  LinkErrorRecovery,       // LinkErrorRecoveryCounter, 8 bits: link retrains that recovered
  LinkDowned,              // LinkDownedCounter, 8 bits: retrains that failed (the link went down)
  RcvErrors,               // PortRcvErrors, 16 bits: packets received with errors
  LocalLinkIntegrity,      // LocalLinkIntegrityErrors, 4 bits
  ExcessiveBufferOverrun,  // ExcessiveBufferOverrunErrors, 4 bits
  XmitDiscards,            // PortXmitDiscards, 16 bits: packets dropped on the way out (congestion, a port down)
  Vl15Dropped,             // VL15Dropped, 16 bits: SMPs dropped
};
inline constexpr std::size_t kErrorCounterCount = 8;
inline constexpr std::array<ErrorCounter, kErrorCounterCount> kErrorCounters{
    ErrorCounter::SymbolErrors,       ErrorCounter::LinkErrorRecovery,      ErrorCounter::LinkDowned,
    ErrorCounter::RcvErrors,          ErrorCounter::LocalLinkIntegrity,     ErrorCounter::ExcessiveBufferOverrun,
    ErrorCounter::XmitDiscards,       ErrorCounter::Vl15Dropped};
// The name the IBA, perfquery and ibqueryerrors give it: "SymbolErrorCounter", ...
std::string_view counter_name(ErrorCounter c);
// The smha.yaml / JSON / metrics key: "symbol_errors", "link_error_recovery", ...
std::string_view counter_key(ErrorCounter c);
// The largest value the counter holds: it stops there (saturates, IBA 16.1.3.5).
std::uint32_t counter_max(ErrorCounter c);

using ErrorCounts = std::array<std::uint32_t, kErrorCounterCount>;
inline std::uint32_t& at(ErrorCounts& c, ErrorCounter k) { return c[static_cast<std::size_t>(k)]; }
inline std::uint32_t at(const ErrorCounts& c, ErrorCounter k) { return c[static_cast<std::size_t>(k)]; }

// A decoded PortCounters answer.
struct PortCounters {
  std::uint8_t port_select = 0;  // the port the counters are of (as the answer says)
  ErrorCounts errors{};
  friend bool operator==(const PortCounters&, const PortCounters&) = default;
};

using PortCountersReply = Reply<PortCounters>;

// A switch's linear forwarding table as SwitchInfo and LinearForwardingTable
// blocks give it (IBA 14.2.5.4, 14.2.5.10; codecs in smp.hpp): the takeover
// report compares them before and after (doc/takeover-report.md).
// SwitchInfo LinearFDBTop: the highest LID the LFT holds.
using LftTopReply = Reply<std::uint16_t>;
// One LFT block: the out port of LIDs 64*block .. 64*block+63 (255: none).
using LftBlock = std::array<std::uint8_t, 64>;
using LftBlockReply = Reply<LftBlock>;
// The MLID the SA gives a group's member (SubnAdmGet MCMemberRecord by MGID
// and PortGID).
using McMemberReply = Reply<Lid>;

using SmInfoCallback = std::function<void(Result<SmInfoReply>)>;
using SmInfoRecordsCallback = std::function<void(Result<SmInfoRecordsReply>)>;
using PortInfoCallback = std::function<void(Result<PortInfoReply>)>;
using PortInfoRecordsCallback = std::function<void(Result<PortInfoRecordsReply>)>;
using NodeInfoCallback = std::function<void(Result<NodeInfoReply>)>;
using NodeDescriptionCallback = std::function<void(Result<NodeDescriptionReply>)>;
using ServiceRecordCallback = std::function<void(Result<ServiceRecordReply>)>;
using PortCountersCallback = std::function<void(Result<PortCountersReply>)>;
using LftTopCallback = std::function<void(Result<LftTopReply>)>;
using LftBlockCallback = std::function<void(Result<LftBlockReply>)>;
using McMemberCallback = std::function<void(Result<McMemberReply>)>;

// ---- Requests ---------------------------------------------------------------
// One struct per query: what it asks (its MAD's target and fields), the reply
// it gets (`Answer`) and its name (`kName`, the attribute, as logs and
// counters give it). A transport dispatches on the type; a new query is a new
// struct here, its alternative in Query, a helper on MadTransport and its
// encoding in UmadTransport.

// SubnGet(SMInfo).
struct SmInfoGet {
  static constexpr std::string_view kName = "SMInfo";
  using Answer = SmInfoReply;
  Target target;
};

// SubnSet(SMInfo) with attribute modifier `mod` and `payload` (OpenSM only
// accepts a payload whose state is MASTER).
struct SmInfoSet {
  static constexpr std::string_view kName = "SMInfo Set";
  using Answer = SmInfoReply;
  Target target;
  SmInfoModifier mod{};
  SmInfo payload;
};

// SubnGet(PortInfo) of port `port` (the attribute modifier) of the node at
// `target`; DrPath{} with our own port number asks our own port (the SMA
// answers it whatever the link state).
struct PortInfoGet {
  static constexpr std::string_view kName = "PortInfo";
  using Answer = PortInfoReply;
  Target target;
  std::uint8_t port = 0;
};

// SubnGet(NodeInfo) of the node at `target` (discovery).
struct NodeInfoGet {
  static constexpr std::string_view kName = "NodeInfo";
  using Answer = NodeInfoReply;
  Target target;
};

// SubnGet(NodeDescription) of the node at `target`.
struct NodeDescriptionGet {
  static constexpr std::string_view kName = "NodeDescription";
  using Answer = NodeDescriptionReply;
  Target target;
};

// SubnAdmGetTable(SMInfoRecord) to the SA at `sa_lid` (the master SM's LID),
// on QP1 with the GSI Q_Key (doc/census.md, source 5). `opts.m_key` is not
// used (the SA's SM_Key field is sent as 0). A table cut short is not an
// error (SmInfoRecordTable::truncated).
struct SmInfoRecordsGet {
  static constexpr std::string_view kName = "SMInfoRecord";
  using Answer = SmInfoRecordsReply;
  Lid sa_lid;
};

// SubnAdmGetTable(PortInfoRecord) of the ports whose CapabilityMask has IsSM
// (what `saquery -s` asks) to the SA at `sa_lid` (doc/census.md, source 6):
// every port an SM is bound to, as the master's sweeps saw them, whatever the
// SM's SM_Key or state. As SmInfoRecordsGet.
struct IsSmPortRecordsGet {
  static constexpr std::string_view kName = "PortInfoRecord";
  using Answer = PortInfoRecordsReply;
  Lid sa_lid;
};

// ServiceRecords at the SA at `sa_lid` (doc/drift.md), one MAD each way, on
// QP1 like SmInfoRecordsGet; `opts.m_key` is not used. An SA status (e.g.
// 0x0300 no records) is kErrMadStatus.
// SubnAdmSet: registers (or renews) `record`, ServiceLease included.
struct ServiceRecordSet {
  static constexpr std::string_view kName = "ServiceRecord Set";
  using Answer = ServiceRecordReply;
  Lid sa_lid;
  ServiceRecord record;
};
// SubnAdmGet: the one record with this ServiceID, ServiceGID and ServiceName
// (records other ports register under other IDs or names cannot match).
struct ServiceRecordGet {
  static constexpr std::string_view kName = "ServiceRecord";
  using Answer = ServiceRecordReply;
  Lid sa_lid;
  std::uint64_t id = 0;
  Gid gid;
  std::string name;
};
// SubnAdmDelete: removes `record` (matched by ServiceID, ServiceGID, name).
struct ServiceRecordDelete {
  static constexpr std::string_view kName = "ServiceRecord Delete";
  using Answer = ServiceRecordReply;
  Lid sa_lid;
  ServiceRecord record;
};

// PerfMgtGet(PortCounters) of port `port` (PortSelect) from the PMA at `lid`
// (a switch's LID for any of its ports, a CA port's own LID for that port),
// on QP1 with the GSI Q_Key (doc/health.md); `opts.m_key` is not used. A PMA
// status is kErrMadStatus.
struct PortCountersGet {
  static constexpr std::string_view kName = "PortCounters";
  using Answer = PortCountersReply;
  Lid lid;
  std::uint8_t port = 0;
};

// SubnGet(SwitchInfo) of the switch at `target`: its LinearFDBTop.
struct LftTopGet {
  static constexpr std::string_view kName = "SwitchInfo";
  using Answer = LftTopReply;
  Target target;
};
// SubnGet(LinearForwardingTable) block `block` (0..767) of the switch at `target`.
struct LftBlockGet {
  static constexpr std::string_view kName = "LinearForwardingTable";
  using Answer = LftBlockReply;
  Target target;
  std::uint16_t block = 0;
};
// SubnAdmGet(MCMemberRecord) of port `port_gid` in group `mgid` at the SA at
// `sa_lid`: the group's MLID. Status 0x0300 (kSaStatusNoRecords) when the
// port is no member or there is no such group. As ServiceRecordGet.
struct McMemberGet {
  static constexpr std::string_view kName = "MCMemberRecord";
  using Answer = McMemberReply;
  Lid sa_lid;
  Gid mgid;
  Gid port_gid;
};

using Query = std::variant<SmInfoGet, SmInfoSet, PortInfoGet, NodeInfoGet, NodeDescriptionGet, SmInfoRecordsGet,
                           IsSmPortRecordsGet, ServiceRecordSet, ServiceRecordGet, ServiceRecordDelete,
                           PortCountersGet, LftTopGet, LftBlockGet, McMemberGet>;

// The query's kName.
inline std::string_view name(const Query& q) {
  return std::visit([](const auto& x) { return std::remove_cvref_t<decltype(x)>::kName; }, q);
}

struct Request {
  Query query;
  RequestOptions opts;
};

// Any reply: the one of the request's Answer type.
using AnyReply = std::variant<SmInfoReply, PortInfoReply, NodeInfoReply, NodeDescriptionReply, SmInfoRecordsReply,
                              PortInfoRecordsReply, ServiceRecordReply, PortCountersReply, LftTopReply,
                              LftBlockReply, McMemberReply>;

namespace detail {
template <class R, class V>
struct IsAlternative : std::false_type {};
template <class R, class... Ts>
struct IsAlternative<R, std::variant<Ts...>> : std::bool_constant<(std::is_same_v<R, Ts> || ...)> {};
}  // namespace detail
// One of AnyReply's alternatives.
template <class R>
concept ReplyType = detail::IsAlternative<std::remove_cvref_t<R>, AnyReply>::value;

// Sets the round trip and attempts of whichever reply `r` holds.
inline void set_round_trip(AnyReply& r, Duration rtt, int attempts) {
  std::visit(
      [&](auto& x) {
        x.rtt = rtt;
        x.attempts = attempts;
      },
      r);
}

// How a transport answers a request: exactly once, with a reply of the
// request's Answer type or an Error. Callable with a reply of any type, a
// Result of one, an Error or a Result<AnyReply>; so it also converts to each
// typed callback above.
class ReplyCallback {
 public:
  ReplyCallback() = default;
  template <class F>
    requires(!std::is_same_v<std::decay_t<F>, ReplyCallback> && std::is_invocable_v<F&, Result<AnyReply>>)
  ReplyCallback(F fn) : fn_(std::move(fn)) {}  // NOLINT(google-explicit-constructor)

  void operator()(Result<AnyReply> r) const { fn_(std::move(r)); }
  void operator()(Error e) const { fn_(std::move(e)); }
  template <ReplyType R>
  void operator()(R reply) const {
    fn_(AnyReply{std::move(reply)});
  }
  template <ReplyType R>
  void operator()(Result<R> r) const {
    if (!r) return fn_(r.error());
    fn_(AnyReply{std::move(r).value()});
  }
  explicit operator bool() const { return static_cast<bool>(fn_); }

 private:
  std::function<void(Result<AnyReply>)> fn_;
};

// The seam every MAD goes through. An implementation implements submit()
// alone (dispatching on the request's query type); callers use the typed
// helpers, which build the request and hand the reply back as its own type.
class MadTransport {
 public:
  virtual ~MadTransport() = default;

  // Sends `request`. `done` is called exactly once, on the transport owner's
  // event loop, never from inside this call, with the reply type
  // request.query's Answer names, or an Error (codes above).
  virtual void submit(Request request, ReplyCallback done) = 0;

  // Submits `query` with `opts`; `done` gets the query's Answer. A transport
  // that answers with another reply type is a bug: `done` then gets an
  // Errc::Invalid error naming the query.
  template <class Q>
  void send(Q query, const RequestOptions& opts, std::function<void(Result<typename Q::Answer>)> done) {
    submit(Request{Query{std::move(query)}, opts}, [done = std::move(done)](Result<AnyReply> r) {
      if (!r) return done(r.error());
      if (auto* reply = std::get_if<typename Q::Answer>(&r.value())) return done(std::move(*reply));
      done(make_error(Errc::Invalid, "the transport answered " + std::string(Q::kName) + " with another reply"));
    });
  }

  // The queries, one helper each (see the request structs above).
  void get_sminfo(const Target& target, const RequestOptions& opts, SmInfoCallback done) {
    send(SmInfoGet{target}, opts, std::move(done));
  }
  void set_sminfo(const Target& target, SmInfoModifier mod, const SmInfo& payload, const RequestOptions& opts,
                  SmInfoCallback done) {
    send(SmInfoSet{target, mod, payload}, opts, std::move(done));
  }
  void get_port_info(const Target& target, std::uint8_t port, const RequestOptions& opts, PortInfoCallback done) {
    send(PortInfoGet{target, port}, opts, std::move(done));
  }
  void get_node_info(const Target& target, const RequestOptions& opts, NodeInfoCallback done) {
    send(NodeInfoGet{target}, opts, std::move(done));
  }
  void get_node_description(const Target& target, const RequestOptions& opts, NodeDescriptionCallback done) {
    send(NodeDescriptionGet{target}, opts, std::move(done));
  }
  void get_sminfo_records(Lid sa_lid, const RequestOptions& opts, SmInfoRecordsCallback done) {
    send(SmInfoRecordsGet{sa_lid}, opts, std::move(done));
  }
  void get_is_sm_port_records(Lid sa_lid, const RequestOptions& opts, PortInfoRecordsCallback done) {
    send(IsSmPortRecordsGet{sa_lid}, opts, std::move(done));
  }
  void set_service_record(Lid sa_lid, const ServiceRecord& record, const RequestOptions& opts,
                          ServiceRecordCallback done) {
    send(ServiceRecordSet{sa_lid, record}, opts, std::move(done));
  }
  void get_service_record(Lid sa_lid, std::uint64_t id, const Gid& gid, const std::string& name,
                          const RequestOptions& opts, ServiceRecordCallback done) {
    send(ServiceRecordGet{sa_lid, id, gid, name}, opts, std::move(done));
  }
  void delete_service_record(Lid sa_lid, const ServiceRecord& record, const RequestOptions& opts,
                             ServiceRecordCallback done) {
    send(ServiceRecordDelete{sa_lid, record}, opts, std::move(done));
  }
  void get_port_counters(Lid lid, std::uint8_t port, const RequestOptions& opts, PortCountersCallback done) {
    send(PortCountersGet{lid, port}, opts, std::move(done));
  }
  void get_lft_top(const Target& target, const RequestOptions& opts, LftTopCallback done) {
    send(LftTopGet{target}, opts, std::move(done));
  }
  void get_lft_block(const Target& target, std::uint16_t block, const RequestOptions& opts, LftBlockCallback done) {
    send(LftBlockGet{target, block}, opts, std::move(done));
  }
  void get_mcmember(Lid sa_lid, const Gid& mgid, const Gid& port_gid, const RequestOptions& opts,
                    McMemberCallback done) {
    send(McMemberGet{sa_lid, mgid, port_gid}, opts, std::move(done));
  }
};

}  // namespace smha::mad
