// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/mad/umad_transport.hpp"

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <thread>
#include <variant>
#include <vector>

#include <endian.h>
#include <infiniband/umad.h>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include "smha/mad/pma.hpp"
#include "smha/mad/sa.hpp"
#include "smha/mad/sa_records.hpp"
#include "smha/mad/service_record.hpp"
#include "smha/mad/smp.hpp"

namespace smha::mad {
namespace {

namespace asio = boost::asio;

// How long the receive thread blocks in one umad_recv() before it looks at its
// stop flag again; bounds the destructor's wait.
constexpr int kRecvSliceMs = 50;
// Closing: how long to wait for answers still in flight (quiet receive slices)
// and how many MADs to read at most meanwhile.
constexpr int kCloseDrainSlices = 4;
constexpr int kCloseDrainMaxMads = 64;

// The low 32 bits of a MAD's TID (offset 12..15), which carry our request's TID.
std::uint32_t mad_tid(const std::uint8_t* mad) {
  return (std::uint32_t{mad[12]} << 24) | (std::uint32_t{mad[13]} << 16) |
         (std::uint32_t{mad[14]} << 8) | std::uint32_t{mad[15]};
}

// QP0 carries SMPs; it needs no Q_Key.
constexpr int kQp0 = 0;

std::string errno_text(int err) { return std::string(std::strerror(err)); }

PortState port_state_from(unsigned v) {
  return v >= 1 && v <= 4 ? static_cast<PortState>(v) : PortState::Unknown;
}

LocalPortInfo info_from(const umad_port_t& p) {
  LocalPortInfo info;
  info.ca = p.ca_name;
  info.port = p.portnum;
  info.port_guid = Guid{be64toh(p.port_guid)};
  info.lid = Lid{static_cast<std::uint16_t>(p.base_lid)};
  info.sm_lid = Lid{static_cast<std::uint16_t>(p.sm_lid)};
  info.state = port_state_from(p.state);
  return info;
}

std::string describe(const PortSelector& s) {
  if (s.guid) return "port GUID " + to_string(*s.guid);
  if (s.ca.empty() && s.port == 0) return "the default port";
  return "CA " + (s.ca.empty() ? std::string("(default)") : s.ca) + " port " +
         (s.port == 0 ? std::string("(default)") : std::to_string(s.port));
}

// Finds the CA name and port number of `guid` on any CA.
Result<std::pair<std::string, int>> find_port_by_guid(Guid guid) {
  char names[UMAD_MAX_DEVICES][UMAD_CA_NAME_LEN];
  int n = umad_get_cas_names(names, UMAD_MAX_DEVICES);
  if (n < 0) return make_error(kErrNoPort, "cannot list InfiniBand CAs: " + errno_text(-n));
  for (int i = 0; i < n; ++i) {
    umad_ca_t ca;
    if (umad_get_ca(names[i], &ca) < 0) continue;
    std::optional<std::pair<std::string, int>> found;
    for (int p = 0; p < UMAD_CA_MAX_PORTS && !found; ++p) {
      if (ca.ports[p] && be64toh(ca.ports[p]->port_guid) == guid.value)
        found = std::make_pair(std::string(names[i]), ca.ports[p]->portnum);
    }
    umad_release_ca(&ca);
    if (found) return *found;
  }
  return make_error(kErrNoPort, "no local port has GUID " + to_string(guid) + " (" +
                                    std::to_string(n) + " CA(s) searched)");
}

Result<LocalPortInfo> read_port(const std::string& ca, int port) {
  umad_port_t p;
  int rc = umad_get_port(ca.empty() ? nullptr : ca.c_str(), port, &p);
  if (rc < 0)
    return make_error(kErrNoPort, "no InfiniBand port " +
                                      describe(PortSelector{ca, port, std::nullopt}) + ": " +
                                      errno_text(-rc));
  LocalPortInfo info = info_from(p);
  umad_release_port(&p);
  return info;
}

}  // namespace

Result<LocalPortInfo> query_local_port(const PortSelector& selector) {
  if (selector.guid) {
    if (!selector.ca.empty() || selector.port != 0)
      return make_error(kErrNoPort, "give either a port GUID or a CA and port, not both");
    auto where = find_port_by_guid(*selector.guid);
    if (!where) return where.error();
    return read_port(where->first, where->second);
  }
  return read_port(selector.ca, selector.port);
}

// The state shared between the transport, its timers and the receive thread's
// posted handlers. Touched only on the io_context thread, except `stop_` and the
// constants `io_` and `port_id_`, which the receive thread reads.
class UmadTransport::Core : public std::enable_shared_from_this<Core> {
 public:
  Core(asio::io_context& io, const Clock& clock, int port_id, int agent_lid, int agent_dr,
       int agent_sa, int agent_pma, LocalPortInfo info)
      : io_(io), clock_(clock), port_id_(port_id), agent_lid_(agent_lid), agent_dr_(agent_dr),
        agent_sa_(agent_sa), agent_pma_(agent_pma), info_(std::move(info)) {
    std::random_device rd;
    next_tid_ = rd();
  }

  ~Core() { close(); }

  void start() {
    std::weak_ptr<Core> weak = weak_from_this();
    thread_ = std::thread([this, weak] { receive_loop(weak); });
  }

  // Idempotent. Joins the receive thread, cancels pending requests (their
  // callbacks are posted), releases the port.
  void close() {
    if (closed_) return;
    closed_ = true;
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
    drain_answers();
    auto pending = std::move(pending_);
    pending_.clear();
    tid_owner_.clear();
    for (auto& [id, p] : pending) {
      if (p.timer) p.timer->cancel();
      asio::post(io_, [done = std::move(p.done)] {
        done(make_error(Errc::Closed, "the MAD transport was closed before an answer"));
      });
    }
    if (agent_dr_ >= 0) umad_unregister(port_id_, agent_dr_);
    if (agent_lid_ >= 0) umad_unregister(port_id_, agent_lid_);
    if (agent_sa_ >= 0) umad_unregister(port_id_, agent_sa_);
    if (agent_pma_ >= 0) umad_unregister(port_id_, agent_pma_);
    umad_close_port(port_id_);
  }

  const LocalPortInfo& info() const { return info_; }
  asio::io_context& io() { return io_; }

  Result<LocalPortInfo> refresh() {
    auto fresh = read_port(info_.ca, info_.port);
    if (fresh) info_ = *fresh;
    return fresh;
  }

  std::size_t pending() const { return pending_.size(); }

  // A decoded answer: a query's reply, or the MAD itself (raw_request).
  using Payload = std::variant<AnyReply, std::vector<std::uint8_t>>;
  struct Answer {
    Payload payload;
    Duration rtt{};
    int attempts = 1;
  };
  using Build = std::function<Result<MadBytes>(std::uint64_t)>;
  // Decodes a received MAD. An error with code kErrMadStatus ends the request;
  // any other error marks the MAD as a stray to ignore.
  using Decode = std::function<Result<Payload>(std::span<const std::uint8_t>)>;
  using Done = std::function<void(Result<Answer>)>;

  // Which agent sends a request: an SMP's (by its target), or a GSI one on
  // QP1 with the GSI Q_Key to the target LID: the SA client or the PMA client.
  enum class Gsi : std::uint8_t { None, Sa, Pma };

  // Starts a request whose MAD is `build(tid)` and whose answer `decode` reads.
  void submit(Build build, Decode decode, const Target& target, const RequestOptions& opts,
              Done done, Gsi gsi = Gsi::None) {
    auto fail = [this, &done](Error e) {
      asio::post(io_, [done = std::move(done), e = std::move(e)] { done(e); });
    };
    if (closed_) return fail(make_error(Errc::Closed, "the MAD transport is closed"));
    if (gsi == Gsi::Pma && agent_pma_ < 0)
      return fail(make_error(Errc::Io, "no PerfMgt (class 0x04) agent on this port: umad_register failed at open"));
    if (opts.timeout <= Duration::zero() || opts.retries < 0)
      return fail(make_error(kErrInvalid, "timeout must be > 0 and retries >= 0"));
    auto first = build(0);
    if (!first) return fail(first.error());
    std::uint64_t id = next_request_++;
    Request& r = pending_[id];
    r.build = std::move(build);
    r.decode = std::move(decode);
    r.opts = opts;
    r.done = std::move(done);
    if (const Lid* lid = std::get_if<Lid>(&target); lid && gsi != Gsi::None) {
      r.dlid = lid->value;
      r.agent = gsi == Gsi::Sa ? agent_sa_ : agent_pma_;
      r.qp = kQp1;
      r.qkey = kGsiQKey;
    } else if (lid) {
      r.dlid = lid->value;
      r.agent = agent_lid_;
    } else {
      r.dlid = kPermissiveDrLid;
      r.agent = agent_dr_;
    }
    r.timer = std::make_unique<asio::steady_timer>(io_);
    send_attempt(id);
  }

 private:
  struct Request {
    Build build;
    Decode decode;
    RequestOptions opts;
    Done done;
    std::uint16_t dlid = 0;
    int agent = -1;
    int qp = kQp0;
    std::uint32_t qkey = 0;
    int attempts = 0;
    std::uint32_t current_tid = 0;
    std::vector<std::uint32_t> tids;  // every attempt's TID (an answer to any of them counts)
    std::map<std::uint32_t, TimePoint> sent_at;
    std::unique_ptr<asio::steady_timer> timer;
  };

  std::uint32_t fresh_tid() {
    std::uint32_t tid;
    do {
      tid = next_tid_++;
    } while (tid == 0 || tid_owner_.count(tid));
    return tid;
  }

  void send_attempt(std::uint64_t id) {
    Request& r = pending_.at(id);
    std::uint32_t tid = fresh_tid();
    auto mad = r.build(tid);  // validated in submit(); only the TID differs
    r.attempts++;
    r.current_tid = tid;
    r.tids.push_back(tid);
    tid_owner_[tid] = id;
    r.sent_at[tid] = clock_.now();

    std::vector<std::uint8_t> umad(umad_size() + kMadSize, 0);
    std::memcpy(umad_get_mad(umad.data()), mad->data(), kMadSize);
    umad_set_addr(umad.data(), r.dlid, r.qp, 0, static_cast<int>(r.qkey));
    auto timeout_ms = std::chrono::ceil<std::chrono::milliseconds>(r.opts.timeout).count();
    // The kernel's own timeout matches ours (so a lost answer is reported by
    // either, whichever is first); the kernel never retries: we do.
    int rc = umad_send(port_id_, r.agent, umad.data(), static_cast<int>(kMadSize),
                       static_cast<int>(timeout_ms), 0);
    if (rc < 0) {
      int err = errno ? errno : -rc;
      auto self = shared_from_this();
      asio::post(io_, [self, id, err] {
        self->complete(id, make_error(Errc::Io, "umad_send failed: " + errno_text(err)));
      });
      return;
    }
    r.timer->expires_after(r.opts.timeout);
    std::weak_ptr<Core> weak = weak_from_this();
    r.timer->async_wait([weak, id, tid](const boost::system::error_code& ec) {
      if (ec) return;
      if (auto self = weak.lock()) self->attempt_failed(id, tid);
    });
  }

  // The attempt with TID `tid` of request `id` got no answer in time.
  void attempt_failed(std::uint64_t id, std::uint32_t tid) {
    auto it = pending_.find(id);
    if (it == pending_.end() || it->second.current_tid != tid) return;
    Request& r = it->second;
    if (r.attempts <= r.opts.retries) {
      r.timer->cancel();
      send_attempt(id);
      return;
    }
    char ms[32];
    std::snprintf(ms, sizeof ms, "%g", to_ms(r.opts.timeout));
    complete(id, make_error(kErrTimeout, "no answer after " + std::to_string(r.attempts) +
                                             " attempt(s) of " + ms + " ms"));
  }

  void complete(std::uint64_t id, Result<Answer> result) {
    auto it = pending_.find(id);
    if (it == pending_.end()) return;
    Request r = std::move(it->second);
    pending_.erase(it);
    for (auto tid : r.tids) tid_owner_.erase(tid);
    r.timer->cancel();
    r.done(std::move(result));  // last: it may destroy the transport
  }

  // On the io_context thread: one MAD from the receive thread.
  void on_receive(std::vector<std::uint8_t> mad, int umad_status) {
    if (closed_ || mad.size() < 16) return;
    const std::uint32_t tid = mad_tid(mad.data());
    auto owner = tid_owner_.find(tid);
    if (owner == tid_owner_.end()) return;  // late answer to a finished request
    std::uint64_t id = owner->second;
    Request& r = pending_.at(id);
    if (umad_status != 0) {
      // A send completion: the request came back unanswered.
      if (umad_status == ETIMEDOUT) {
        if (tid == r.current_tid) attempt_failed(id, tid);
        return;
      }
      complete(id, make_error(Errc::Io, "send completed with status " +
                                            std::to_string(umad_status) + " (" +
                                            errno_text(umad_status) + ")"));
      return;
    }
    auto payload = r.decode(mad);
    if (!payload) {
      // A well-formed answer with a non-zero status ends the request; garbage is
      // ignored (it may be a stray) and the deadline still runs.
      if (payload.error().code == kErrMadStatus) complete(id, payload.error());
      return;
    }
    Answer answer;
    answer.payload = std::move(*payload);
    answer.rtt = clock_.now() - r.sent_at.at(tid);
    answer.attempts = r.attempts;
    complete(id, std::move(answer));
  }

  // Before the port closes, wait a little for the answers to our requests still
  // in flight, so none arrives for a closed port: umad2sim (libumad on ibsim,
  // the test bed) crashes its receive thread on an answer for a device already
  // closed. On hardware this costs at most the answers' round trip; a lost
  // answer costs kCloseDrainSlices receive slices (200 ms) at most.
  void drain_answers() {
    std::set<std::uint32_t> awaited;
    for (const auto& [id, r] : pending_)
      if (r.current_tid != 0) awaited.insert(r.current_tid);
    std::vector<std::uint8_t> buf(umad_size() + kMadSize);
    int quiet = 0;
    for (int read = 0; !awaited.empty() && quiet < kCloseDrainSlices && read < kCloseDrainMaxMads;) {
      int length = static_cast<int>(kMadSize);
      if (umad_recv(port_id_, buf.data(), &length, kRecvSliceMs) < 0) {
        ++quiet;
        continue;
      }
      ++read;
      if (length >= 16) awaited.erase(mad_tid(static_cast<const std::uint8_t*>(umad_get_mad(buf.data()))));
    }
  }

  void receive_loop(std::weak_ptr<Core> weak) {
    std::vector<std::uint8_t> buf(umad_size() + kMadSize);
    while (!stop_.load()) {
      // Cleared each time: a MAD shorter than the buffer (an SA answer under
      // ibsim arrives 8 bytes short, doc/drift.md) must not show the last one's tail.
      std::fill(buf.begin(), buf.end(), std::uint8_t{0});
      int length = static_cast<int>(kMadSize);
      int rc = umad_recv(port_id_, buf.data(), &length, kRecvSliceMs);
      std::vector<std::uint8_t> big;
      if (rc == -ENOSPC && length > 0 && static_cast<std::size_t>(length) <= kMaxSaResponse) {
        // A reassembled RMPP transfer (an SA table) longer than one MAD: the
        // kernel keeps it queued and said how long it is; read it whole.
        big.resize(umad_size() + static_cast<std::size_t>(length));
        rc = umad_recv(port_id_, big.data(), &length, 0);
      }
      if (rc < 0) {
        if (rc == -ETIMEDOUT || rc == -EWOULDBLOCK || rc == -EINTR) continue;
        // An unexpected error: do not spin on it.
        std::this_thread::sleep_for(std::chrono::milliseconds(kRecvSliceMs));
        continue;
      }
      void* got = big.empty() ? buf.data() : big.data();
      int status = umad_status(got);
      auto* mad = static_cast<std::uint8_t*>(umad_get_mad(got));
      std::size_t n = std::min<std::size_t>(static_cast<std::size_t>(length),
                                            big.empty() ? kMadSize : big.size() - umad_size());
      std::vector<std::uint8_t> bytes(mad, mad + n);
      asio::post(io_, [weak, bytes = std::move(bytes), status]() mutable {
        if (auto self = weak.lock()) self->on_receive(std::move(bytes), status);
      });
    }
  }

  asio::io_context& io_;
  const Clock& clock_;
  const int port_id_;
  const int agent_lid_;
  const int agent_dr_;
  const int agent_sa_;
  const int agent_pma_;  // -1: not registered (PortCounters reads fail with "io")
  LocalPortInfo info_;
  std::atomic<bool> stop_{false};
  bool closed_ = false;
  std::thread thread_;
  std::uint32_t next_tid_ = 1;
  std::uint64_t next_request_ = 1;
  std::map<std::uint64_t, Request> pending_;
  std::map<std::uint32_t, std::uint64_t> tid_owner_;
};

Result<std::unique_ptr<UmadTransport>> UmadTransport::open(asio::io_context& io,
                                                           const PortSelector& selector,
                                                           const Clock& clock) {
  auto info = query_local_port(selector);
  if (!info) return info.error();
  umad_init();
  int port_id = umad_open_port(info->ca.c_str(), info->port);
  if (port_id < 0)
    return make_error(Errc::Io, "umad_open_port(" + info->ca + ", " + std::to_string(info->port) +
                                    ") failed: " + errno_text(-port_id));
  int agent_dr = umad_register(port_id, kClassSubnDirected, kSmpClassVersion, 0, nullptr);
  int agent_lid = agent_dr < 0 ? -1
                               : umad_register(port_id, kClassSubnLid, kSmpClassVersion, 0, nullptr);
  // The SA client: rmpp_version 1 lets the kernel reassemble a GetTableResp
  // that spans several RMPP segments (and acknowledge them to the SA), so the
  // receive thread reads it as one buffer (doc/census.md, "RMPP").
  int agent_sa = agent_lid < 0 ? -1
                               : umad_register(port_id, kClassSubnAdm, kSaClassVersion,
                                               kRmppVersion, nullptr);
  if (agent_dr < 0 || agent_lid < 0 || agent_sa < 0) {
    int err = errno;
    if (agent_dr >= 0) umad_unregister(port_id, agent_dr);
    if (agent_lid >= 0) umad_unregister(port_id, agent_lid);
    umad_close_port(port_id);
    return make_error(Errc::Io, "umad_register(class " +
                                    std::string(agent_dr < 0 ? "0x81" : agent_lid < 0 ? "0x01" : "0x03") +
                                    ") on " + info->ca + " port " + std::to_string(info->port) +
                                    " failed: " + errno_text(err));
  }
  // The PMA client (class 0x04 version 1, no RMPP) for fabric health's error
  // counters: optional, a port where it cannot register still does the rest.
  int agent_pma = umad_register(port_id, kClassPerfMgt, kPerfClassVersion, 0, nullptr);
  auto core = std::make_shared<Core>(io, clock, port_id, agent_lid, agent_dr, agent_sa, agent_pma, *info);
  core->start();
  return std::unique_ptr<UmadTransport>(new UmadTransport(std::move(core)));
}

UmadTransport::UmadTransport(std::shared_ptr<Core> core) : core_(std::move(core)) {}

UmadTransport::~UmadTransport() { core_->close(); }

const LocalPortInfo& UmadTransport::local_port() const { return core_->info(); }

Result<LocalPortInfo> UmadTransport::refresh_local_port() { return core_->refresh(); }

std::size_t UmadTransport::pending() const { return core_->pending(); }

namespace {

using Core = UmadTransport::Core;

// How a query goes on the wire: the MAD for a TID, where it goes, which agent
// sends it (an SMP's by its target, or a GSI one on QP1) and how its answer
// decodes into the query's reply.
struct Wire {
  Target target;
  Core::Gsi gsi = Core::Gsi::None;
  Core::Build build;
  Core::Decode decode;
};

// Reads an answer with `decode` into the reply type `Answer` (rtt and
// attempts are the core's to fill).
template <class Answer, class Decode>
Core::Decode decode_into(Decode decode) {
  return [decode](std::span<const std::uint8_t> mad) -> Result<Core::Payload> {
    auto value = decode(mad);
    if (!value) return value.error();
    return Core::Payload{AnyReply{Answer{std::move(*value)}}};
  };
}

bool unicast(Lid lid) { return lid.value != 0 && lid.value < 0xc000; }

Error not_unicast_sa(Lid sa_lid) {
  return make_error(kErrInvalid, "SA LID " + std::to_string(sa_lid.value) + " is not a unicast LID (1..49151)");
}

// An SA request to `sa_lid` whose MAD is `build(tid)`.
Result<Wire> sa_wire(Lid sa_lid, Core::Build build, Core::Decode decode) {
  if (!unicast(sa_lid)) return not_unicast_sa(sa_lid);
  return Wire{sa_lid, Core::Gsi::Sa, std::move(build), std::move(decode)};
}

Result<Wire> wire(const SmInfoGet& q, std::uint64_t m_key) {
  return Wire{q.target, Core::Gsi::None,
              [target = q.target, m_key](std::uint64_t tid) { return encode_sminfo_get(tid, target, m_key); },
              decode_into<SmInfoReply>(decode_sminfo_response)};
}

Result<Wire> wire(const SmInfoSet& q, std::uint64_t m_key) {
  return Wire{q.target, Core::Gsi::None,
              [q, m_key](std::uint64_t tid) { return encode_sminfo_set(tid, q.target, q.mod, q.payload, m_key); },
              decode_into<SmInfoReply>(decode_sminfo_response)};
}

Result<Wire> wire(const PortInfoGet& q, std::uint64_t m_key) {
  return Wire{q.target, Core::Gsi::None,
              [q, m_key](std::uint64_t tid) { return encode_portinfo_get(tid, q.target, q.port, m_key); },
              decode_into<PortInfoReply>(decode_portinfo_response)};
}

Result<Wire> wire(const NodeInfoGet& q, std::uint64_t m_key) {
  return Wire{q.target, Core::Gsi::None,
              [target = q.target, m_key](std::uint64_t tid) { return encode_nodeinfo_get(tid, target, m_key); },
              decode_into<NodeInfoReply>(decode_nodeinfo_response)};
}

Result<Wire> wire(const NodeDescriptionGet& q, std::uint64_t m_key) {
  return Wire{q.target, Core::Gsi::None,
              [target = q.target, m_key](std::uint64_t tid) {
                return encode_node_description_get(tid, target, m_key);
              },
              decode_into<NodeDescriptionReply>(decode_node_description_response)};
}

Result<Wire> wire(const SmInfoRecordsGet& q, std::uint64_t) {
  return sa_wire(q.sa_lid, [](std::uint64_t tid) -> Result<MadBytes> { return encode_sminfo_record_get_table(tid); },
                 decode_into<SmInfoRecordsReply>(decode_sminfo_record_table));
}

Result<Wire> wire(const IsSmPortRecordsGet& q, std::uint64_t) {
  return sa_wire(q.sa_lid,
                 [](std::uint64_t tid) -> Result<MadBytes> { return encode_is_sm_port_record_get_table(tid); },
                 decode_into<PortInfoRecordsReply>(decode_port_info_record_table));
}

// A ServiceRecord answer (GetResp, or DeleteResp for a Delete) carries one record.
Core::Decode service_record_answer(std::uint8_t answer_method) {
  return decode_into<ServiceRecordReply>(
      [answer_method](std::span<const std::uint8_t> mad) { return decode_service_record_response(mad, answer_method); });
}

Result<Wire> wire(const ServiceRecordSet& q, std::uint64_t) {
  return sa_wire(q.sa_lid, [record = q.record](std::uint64_t tid) { return encode_service_record_set(tid, record); },
                 service_record_answer(kMethodGetResp));
}

Result<Wire> wire(const ServiceRecordGet& q, std::uint64_t) {
  return sa_wire(q.sa_lid, [q](std::uint64_t tid) { return encode_service_record_get(tid, q.id, q.gid, q.name); },
                 service_record_answer(kMethodGetResp));
}

Result<Wire> wire(const ServiceRecordDelete& q, std::uint64_t) {
  return sa_wire(q.sa_lid,
                 [record = q.record](std::uint64_t tid) { return encode_service_record_delete(tid, record); },
                 service_record_answer(kMethodDeleteResp));
}

Result<Wire> wire(const PortCountersGet& q, std::uint64_t) {
  if (!unicast(q.lid))
    return make_error(kErrInvalid, "LID " + std::to_string(q.lid.value) + " is not a unicast LID (1..49151)");
  return Wire{q.lid, Core::Gsi::Pma,
              [port = q.port](std::uint64_t tid) -> Result<MadBytes> { return encode_port_counters_get(tid, port); },
              decode_into<PortCountersReply>(decode_port_counters_response)};
}

// The takeover report's reads (forwarding tables, multicast members).
Result<Wire> wire(const LftTopGet& q, std::uint64_t m_key) {
  return Wire{q.target, Core::Gsi::None,
              [target = q.target, m_key](std::uint64_t tid) { return encode_switchinfo_get(tid, target, m_key); },
              decode_into<LftTopReply>(decode_switchinfo_lft_top)};
}

Result<Wire> wire(const LftBlockGet& q, std::uint64_t m_key) {
  return Wire{q.target, Core::Gsi::None,
              [q, m_key](std::uint64_t tid) { return encode_lft_get(tid, q.target, q.block, m_key); },
              decode_into<LftBlockReply>(decode_lft_response)};
}

Result<Wire> wire(const McMemberGet& q, std::uint64_t) {
  if (!unicast(q.sa_lid)) return make_error(kErrInvalid, "an SA request needs the SA's unicast LID (1..49151)");
  return Wire{q.sa_lid, Core::Gsi::Sa,
              [q](std::uint64_t tid) -> Result<MadBytes> { return encode_mcmember_get(tid, q.mgid, q.port_gid); },
              [](std::span<const std::uint8_t> mad) -> Result<Core::Payload> {
                auto rec = decode_mcmember_response(mad, kMethodGetResp);
                if (!rec) return rec.error();
                return Core::Payload{AnyReply{McMemberReply{Lid{rec->mlid}}}};
              }};
}

}  // namespace

void UmadTransport::submit(Request request, ReplyCallback done) {
  auto w = std::visit([&](const auto& q) { return wire(q, request.opts.m_key); }, request.query);
  if (!w) {
    boost::asio::post(core_->io(), [done = std::move(done), e = w.error()] { done(e); });
    return;
  }
  core_->submit(std::move(w->build), std::move(w->decode), w->target, request.opts,
                [done = std::move(done)](Result<Core::Answer> r) {
                  if (!r) return done(r.error());
                  AnyReply reply = std::get<AnyReply>(std::move(r->payload));
                  set_round_trip(reply, r->rtt, r->attempts);
                  done(std::move(reply));
                },
                w->gsi);
}

void UmadTransport::raw_request(const Target& target, bool sa, RawBuild build, RawAccept accept,
                                const RequestOptions& opts, std::function<void(Result<RawReply>)> done) {
  if (sa) {
    const Lid* lid = std::get_if<Lid>(&target);
    if (lid == nullptr || lid->value == 0 || lid->value >= 0xc000) {
      boost::asio::post(core_->io(), [done = std::move(done)] {
        done(make_error(kErrInvalid, "an SA request needs the SA's unicast LID (1..49151)"));
      });
      return;
    }
  }
  core_->submit(
      std::move(build),
      [accept = std::move(accept)](std::span<const std::uint8_t> mad) -> Result<Core::Payload> {
        if (auto st = accept(mad); !st.ok()) return st.error();
        return Core::Payload{std::in_place_type<std::vector<std::uint8_t>>, mad.begin(), mad.end()};
      },
      target, opts,
      [done = std::move(done)](Result<Core::Answer> r) {
        if (!r) return done(r.error());
        done(RawReply{std::get<std::vector<std::uint8_t>>(std::move(r->payload)), r->rtt, r->attempts});
      },
      sa ? Core::Gsi::Sa : Core::Gsi::None);
}

}  // namespace smha::mad
