// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/peer/channel.hpp"
#include "smha/peer/tls_files.hpp"

#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <deque>
#include <map>
#include <set>

#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>

namespace smha::peer {

namespace asio = boost::asio;
namespace ssl = boost::asio::ssl;
using Tcp = boost::asio::ip::tcp;
using Stream = ssl::stream<Tcp::socket>;
using boost::system::error_code;

namespace {

// The TLS 1.3 key-exchange groups both ends offer: each costs well under a
// millisecond of CPU.
constexpr const char* kGroups = "X25519:P-256";
// A body is read this much at a time; its buffer grows with what arrived.
constexpr std::size_t kReadChunk = 64 * 1024;
// Refusals are budgeted per window of this length (max_refusals_per_s / 10 each).
constexpr Duration kRefusalWindow = std::chrono::milliseconds(100);
// Refusals and failures of inbound connections are logged at most this often.
constexpr Duration kLogEvery = seconds(10);

// An address as the kernel gives it, IPv4-mapped IPv6 as IPv4.
asio::ip::address plain(const asio::ip::address& a) {
  if (a.is_v6() && a.to_v6().is_v4_mapped()) return asio::ip::make_address_v4(asio::ip::v4_mapped, a.to_v6());
  return a;
}

// A token bucket: `rate` a second, at most `burst` at once.
struct Bucket {
  double tokens = -1;  // < 0: full
  TimePoint at{};
  bool take(TimePoint now, double rate, double burst) {
    if (tokens < 0) tokens = burst;
    else tokens = std::min(burst, tokens + std::chrono::duration<double>(now - at).count() * rate);
    at = now;
    if (tokens < 1) return false;
    tokens -= 1;
    return true;
  }
  bool full(TimePoint now, double rate, double burst) const {
    return tokens < 0 || tokens + std::chrono::duration<double>(now - at).count() * rate >= burst;
  }
};

std::string tls_error(const error_code& ec) {
  std::string s = ec.message();
  if (ec.category() == asio::error::get_ssl_category()) {
    const unsigned long e = static_cast<unsigned long>(ec.value());
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    s = buf;
  }
  return s;
}

Status setup_context(ssl::context& ctx, const ChannelConfig& cfg) {
  if (auto st = load_tls_files(ctx, {cfg.certificate, cfg.private_key, cfg.ca}); !st.ok()) return st;
  SSL_CTX* c = ctx.native_handle();
  SSL_CTX_set_min_proto_version(c, TLS1_3_VERSION);
  // OpenSSL 3 accepts ffdhe2048..8192 by default: a ClientHello offering
  // only ffdhe8192 costs the server ~190 ms of CPU. Elliptic curves only.
  if (SSL_CTX_set1_groups_list(c, kGroups) != 1)
    return make_error(Errc::Config, std::string("continuity: this OpenSSL does not offer the key-exchange groups ") + kGroups);
  ctx.set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert);
  return Status::Ok();
}


}  // namespace

struct PeerChannel::Impl : std::enable_shared_from_this<PeerChannel::Impl> {
  Impl(asio::io_context& io, ChannelConfig cfg, const Clock& clock, Offer offer)
      : io(io), cfg(std::move(cfg)), clock(clock), offer(std::move(offer)), accept_timer(io), resolver(io) {
    for (const auto& p : this->cfg.peers) {
      PeerLink l;
      l.name = p.name;
      links.push_back(std::move(l));
    }
    budget = this->cfg.max_buffered_bytes ? this->cfg.max_buffered_bytes : 2 * this->cfg.max_bytes + (1u << 20);
  }

  struct Inbound;
  struct Outbound;

  asio::io_context& io;
  ChannelConfig cfg;
  const Clock& clock;
  Offer offer;
  Notice notice;
  ssl::context server_ctx{ssl::context::tls_server};
  ssl::context client_ctx{ssl::context::tls_client};
  std::unique_ptr<Tcp::acceptor> acceptor;
  asio::steady_timer accept_timer;
  Tcp::resolver resolver;
  std::vector<PeerLink> links;
  ChannelCounters counters;
  bool stopped = false;
  bool outbound_on = false;
  std::vector<std::weak_ptr<Inbound>> inbound;
  std::vector<std::shared_ptr<Outbound>> outbound;

  // Addresses of configured peers (continuity addresses, resolved, and
  // those a peer authenticated from): their pending connections do not
  // count against max_pending or max_handshakes_per_s.
  std::set<asio::ip::address> peer_addresses;
  std::map<asio::ip::address, int> pending_by_source;
  int pending_strangers = 0;
  std::map<asio::ip::address, Bucket> buckets;
  Bucket strangers_bucket;
  TimePoint refusal_window{};
  int refusals_in_window = 0;
  TimePoint logged_at{};
  bool logged_once = false;
  std::uint64_t unlogged = 0;
  std::size_t budget = 0;

  PeerLink* link(const std::string& name) {
    for (auto& l : links)
      if (l.name == name) return &l;
    return nullptr;
  }

  // One warning per kLogEvery at most; the next says how many were not logged.
  void note(const std::string& line) {
    const TimePoint now = clock.now();
    if (logged_once && now - logged_at < kLogEvery) {
      ++unlogged;
      return;
    }
    if (unlogged) spdlog::warn("continuity: {} ({} more refused or closed since the last such line)", line, unlogged);
    else spdlog::warn("continuity: {}", line);
    logged_once = true;
    logged_at = now;
    unlogged = 0;
  }

  // Frame bytes held by inbound connections; false (nothing taken) over the budget.
  bool take_buffer(std::size_t n) {
    if (counters.buffered_bytes + n > budget) return false;
    counters.buffered_bytes += n;
    counters.buffered_peak = std::max(counters.buffered_peak, counters.buffered_bytes);
    return true;
  }
  void give_buffer(std::size_t n) { counters.buffered_bytes -= std::min<std::uint64_t>(n, counters.buffered_bytes); }

  // Why a connection from `from` is refused before TLS (why "" to take it),
  // and the counter of that limit.
  struct Refusal {
    std::uint64_t* counter = nullptr;
    std::string why;
  };
  Refusal admit(const asio::ip::address& from);
  void on_accept(Tcp::socket sock);
  void accept();
  void resolve_peers(std::size_t i);
  void open_outbound();
  void close_outbound();
};

// One connection a peer opened to us.
struct PeerChannel::Impl::Inbound : std::enable_shared_from_this<Inbound> {
  Inbound(std::shared_ptr<Impl> owner, Tcp::socket sock, asio::ip::address from, bool peer_address)
      : owner(owner),
        s(std::move(sock), owner->server_ctx),
        timer(owner->io),
        from(from),
        peer_address(peer_address),
        started(owner->clock.now()) {}

  std::weak_ptr<Impl> owner;
  Stream s;
  asio::steady_timer timer;
  asio::ip::address from;
  bool peer_address;  // counted among a peer's pending, not the strangers'
  bool pending = true;
  TimePoint started;
  std::string peer;  // the configured peer its certificate names
  std::array<std::uint8_t, kFrameHeaderSize> hdr{};
  FrameHeader header;
  std::vector<std::uint8_t> buf;
  std::size_t held = 0;  // buf's capacity, counted in the owner's buffered_bytes
  std::deque<std::shared_ptr<std::vector<std::uint8_t>>> out;
  bool writing = false;
  bool closed = false;
  TimePoint window{};
  int frames_in_window = 0;

  std::string who() const { return (peer.empty() ? std::string("unauthenticated peer") : peer) + " from " + from.to_string(); }

  void arm(Duration d, const char* what) {
    timer.expires_after(d);
    timer.async_wait([weak = weak_from_this(), what](const error_code& ec) {
      if (ec) return;
      if (auto self = weak.lock()) self->fail(std::string(what), true);
    });
  }

  void leave_pending(Impl& o) {
    if (!pending) return;
    pending = false;
    --o.counters.pending;
    if (!peer_address) --o.pending_strangers;
    if (auto it = o.pending_by_source.find(from); it != o.pending_by_source.end() && --it->second <= 0)
      o.pending_by_source.erase(it);
  }

  void start() {
    auto o = owner.lock();
    arm(o->cfg.handshake_timeout, "not authenticated within the pre-authentication deadline");
    s.async_handshake(ssl::stream_base::server, [self = shared_from_this()](const error_code& ec) {
      auto o = self->owner.lock();
      if (!o || self->closed) return;
      if (ec) {
        ++o->counters.handshake_failed;
        return self->fail("TLS handshake failed: " + tls_error(ec), false);
      }
      X509* cert = SSL_get1_peer_certificate(self->s.native_handle());
      for (const auto& p : o->cfg.peers)
        if (cert && X509_check_host(cert, p.name.c_str(), p.name.size(), X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS, nullptr) == 1) {
          self->peer = p.name;
          break;
        }
      X509_free(cert);
      if (self->peer.empty()) {
        ++o->counters.unknown_identity;
        return self->fail("its certificate names no configured peer", false);
      }
      self->leave_pending(*o);
      // Its address is a peer's from now on (bounded: a peer's addresses are few).
      if (o->peer_addresses.size() < 4 * o->cfg.peers.size() + 16) o->peer_addresses.insert(self->from);
      if (auto* l = o->link(self->peer)) ++l->inbound;
      self->make_room(*o);
      self->read_header();
    });
  }

  // At most max_inbound_per_peer connections of one peer: the oldest goes
  // (a restarted peer's half-open one, most likely).
  void make_room(Impl& o) {
    std::vector<std::shared_ptr<Inbound>> mine;
    for (auto& w : o.inbound)
      if (auto in = w.lock(); in && !in->closed && !in->pending && in->peer == peer) mine.push_back(in);
    std::sort(mine.begin(), mine.end(), [](const auto& a, const auto& b) { return a->started < b->started; });
    for (std::size_t i = 0; mine.size() - i > static_cast<std::size_t>(std::max(1, o.cfg.max_inbound_per_peer)); ++i) {
      ++o.counters.replaced;
      mine[i]->fail("replaced by a newer connection from the same peer (at most " +
                        std::to_string(o.cfg.max_inbound_per_peer) + " per peer)",
                    false);
    }
  }

  void read_header() {
    auto o = owner.lock();
    if (!o || closed) return;
    // Idle between copies: the master refreshes every 30 s; a connection
    // silent for 4 minutes is a dead one.
    arm(std::chrono::minutes(4), "idle for 4 minutes");
    asio::async_read(s, asio::buffer(hdr), [self = shared_from_this()](const error_code& ec, std::size_t) {
      auto o = self->owner.lock();
      if (!o || self->closed) return;
      if (ec) return self->fail(ec == asio::error::eof || ec == ssl::error::stream_truncated ? "closed by the peer"
                                                                                              : "read: " + tls_error(ec),
                                false);
      auto h = decode_frame_header(self->hdr, o->cfg.max_bytes);
      if (!h) {
        ++o->counters.protocol_errors;
        return self->fail(h.error().message, false);
      }
      // Flooding: more than max_frames_per_s frames within a second.
      const TimePoint now = o->clock.now();
      if (now - self->window >= seconds(1)) {
        self->window = now;
        self->frames_in_window = 0;
      }
      if (++self->frames_in_window > o->cfg.max_frames_per_s) {
        ++o->counters.protocol_errors;
        return self->fail("more than " + std::to_string(o->cfg.max_frames_per_s) + " frames a second (flooding)", false);
      }
      self->header = *h;
      self->arm(o->cfg.frame_timeout, "a frame took longer than its timeout (slow peer)");
      self->read_body();
    });
  }

  // The meta and body, kReadChunk at a time: the buffer grows (doubling, up
  // to the announced length) only as bytes arrive, within the owner's budget.
  void read_body() {
    auto o = owner.lock();
    if (!o || closed) return;
    const std::size_t need = static_cast<std::size_t>(header.meta_len) + header.body_len;
    const std::size_t have = buf.size();
    if (have == need) return on_frame();
    const std::size_t chunk = std::min(kReadChunk, need - have);
    if (have + chunk > held) {
      const std::size_t cap = std::min(need, std::max(held * 2, have + chunk));
      if (!o->take_buffer(cap - held)) {
        ++o->counters.protocol_errors;
        ++o->counters.rejected_memory;
        return fail("its " + std::to_string(need) + "-byte frame would take the frames being received over " +
                        std::to_string(o->budget) + " bytes buffered (" + std::to_string(o->counters.buffered_bytes) +
                        " now, all connections)",
                    false);
      }
      buf.reserve(cap);
      held = cap;
    }
    buf.resize(have + chunk);
    s.async_read_some(asio::buffer(buf.data() + have, chunk), [self = shared_from_this(), have](const error_code& ec,
                                                                                               std::size_t n) {
      auto o = self->owner.lock();
      if (!o || self->closed) return;
      if (ec) return self->fail("read: " + tls_error(ec), false);
      self->buf.resize(have + n);
      self->read_body();
    });
  }

  void release_buffer() {
    buf.clear();
    buf.shrink_to_fit();
    if (auto o = owner.lock()) o->give_buffer(held);
    held = 0;
  }

  void on_frame() {
    auto o = owner.lock();
    ++o->counters.frames_in;
    const std::string_view meta_text(reinterpret_cast<const char*>(buf.data()), header.meta_len);
    if (header.kind == FrameKind::Answer) {
      ++o->counters.protocol_errors;
      return fail("sent an answer frame where copies are expected", false);
    }
    if (header.kind == FrameKind::Notice) {
      auto n = decode_notice_meta(meta_text);
      if (!n) {
        ++o->counters.protocol_errors;
        return fail(n.error().message, false);
      }
      if (o->notice) o->notice(*n, peer);
      if (auto* l = o->link(peer)) l->last_copy_at = o->clock.wall_now();
      buf.clear();
      return read_header();
    }
    auto meta = decode_copy_meta(meta_text);
    if (!meta) {
      ++o->counters.protocol_errors;
      return fail(meta.error().message, false);
    }
    const std::string_view body(reinterpret_cast<const char*>(buf.data()) + header.meta_len, header.body_len);
    const Verdict v = o->offer(header.kind, *meta, body, peer);
    if (auto* l = o->link(peer)) l->last_copy_at = o->clock.wall_now();
    AnswerMeta a;
    a.kind = header.kind;
    a.generation = meta->generation;
    a.applied = v.applied;
    a.reason = v.applied ? std::string() : std::string(to_string(v.reason));
    a.text = v.text;
    a.held = v.held;
    release_buffer();
    write(std::make_shared<std::vector<std::uint8_t>>(encode_answer_frame(a)));
    read_header();
  }

  void write(std::shared_ptr<std::vector<std::uint8_t>> bytes) {
    out.push_back(std::move(bytes));
    if (writing) return;
    flush();
  }

  void flush() {
    if (out.empty() || closed) return;
    writing = true;
    auto next = out.front();
    out.pop_front();
    asio::async_write(s, asio::buffer(*next), [self = shared_from_this(), next](const error_code& ec, std::size_t) {
      self->writing = false;
      if (ec) return self->fail("write: " + tls_error(ec), false);
      self->flush();
    });
  }

  void fail(const std::string& why, bool timeout) {
    if (closed) return;
    closed = true;
    if (auto o = owner.lock()) {
      const bool was_pending = pending;
      leave_pending(*o);
      if (timeout && was_pending) {
        ++o->counters.handshake_failed;
        ++o->counters.preauth_timeouts;
      } else if (timeout) {
        ++o->counters.protocol_errors;
      }
      o->counters.last_inbound_error = who() + ": " + why;
      if (!was_pending) {
        if (auto* l = o->link(peer)) --l->inbound;
      }
      if (why != "closed by the peer" && why != "smhad stopping") o->note("connection from " + who() + " closed: " + why);
    }
    release_buffer();
    timer.cancel();
    error_code ignored;
    s.lowest_layer().shutdown(Tcp::socket::shutdown_both, ignored);
    s.lowest_layer().close(ignored);
  }
};

// Our connection to one peer, while this head is MASTER.
struct PeerChannel::Impl::Outbound : std::enable_shared_from_this<Outbound> {
  Outbound(std::shared_ptr<Impl> owner, ChannelPeer peer)
      : owner(owner), peer(std::move(peer)), resolver(owner->io), deadline(owner->io), retry(owner->io) {}

  std::weak_ptr<Impl> owner;
  ChannelPeer peer;
  Tcp::resolver resolver;
  asio::steady_timer deadline;
  asio::steady_timer retry;
  // Handlers hold the stream they started on: a failed attempt's stream
  // lives until its last handler has run.
  std::shared_ptr<Stream> s;
  std::array<std::shared_ptr<std::vector<std::uint8_t>>, kCopyKinds> queued;
  // The last frame of each kind written on a connection: sent again on the
  // next one (a restarted peer gets the copies at once, not at the next
  // refresh).
  std::array<std::shared_ptr<std::vector<std::uint8_t>>, kCopyKinds> last;
  bool up = false;
  bool writing = false;
  bool stopped = false;
  Duration backoff{};
  std::array<std::uint8_t, kFrameHeaderSize> hdr{};
  std::vector<std::uint8_t> meta;
  std::uint64_t attempt = 0;  // handlers of an older attempt do nothing

  PeerLink* link() {
    auto o = owner.lock();
    return o ? o->link(peer.name) : nullptr;
  }

  void set_state(LinkState st) {
    if (auto* l = link()) l->outbound = st;
  }

  void connect() {
    auto o = owner.lock();
    if (!o || stopped) return;
    const std::uint64_t a = ++attempt;
    up = false;
    writing = false;
    s = std::make_shared<Stream>(o->io, o->client_ctx);
    set_state(LinkState::Connecting);
    if (auto* l = link()) ++l->connects;
    deadline.expires_after(o->cfg.handshake_timeout);
    deadline.async_wait([weak = weak_from_this(), a](const error_code& ec) {
      if (ec) return;
      if (auto self = weak.lock(); self && self->attempt == a && !self->up) self->fail("connect or handshake timed out");
    });
    resolver.async_resolve(peer.host, std::to_string(peer.port),
                           [self = shared_from_this(), a](const error_code& ec, Tcp::resolver::results_type results) {
                             if (self->stopped || self->attempt != a) return;
                             if (ec) return self->fail("resolve " + self->peer.host + ": " + ec.message());
                             auto st = self->s;
                             asio::async_connect(st->lowest_layer(), results,
                                                 [self, a, st](const error_code& ec2, const Tcp::endpoint&) {
                                                   if (self->stopped || self->attempt != a) return;
                                                   if (ec2) return self->fail("connect: " + ec2.message());
                                                   self->handshake(a);
                                                 });
                           });
  }

  void handshake(std::uint64_t a) {
    set_state(LinkState::Handshake);
    // The server's certificate must name the peer (CN or DNS SAN).
    SSL_set1_host(s->native_handle(), peer.name.c_str());
    SSL_set_hostflags(s->native_handle(), X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    s->async_handshake(ssl::stream_base::client, [self = shared_from_this(), a, st = s](const error_code& ec) {
      if (self->stopped || self->attempt != a) return;
      if (ec) return self->fail("TLS handshake: " + tls_error(ec));
      self->deadline.cancel();
      self->up = true;
      if (auto o = self->owner.lock()) self->backoff = o->cfg.reconnect_min;
      self->set_state(LinkState::Up);
      if (auto* l = self->link()) l->last_error.clear();
      for (std::size_t i = 0; i < kCopyKinds; ++i)
        if (!self->queued[i]) self->queued[i] = self->last[i];
      self->read_answer(a);
      self->flush();
    });
  }

  void read_answer(std::uint64_t a) {
    asio::async_read(*s, asio::buffer(hdr), [self = shared_from_this(), a, st = s](const error_code& ec, std::size_t) {
      if (self->stopped || self->attempt != a) return;
      if (ec) return self->fail("read: " + tls_error(ec));
      auto h = decode_frame_header(self->hdr, 0);
      if (!h || h->kind != FrameKind::Answer) return self->fail(h ? "sent a copy where answers are expected" : h.error().message);
      self->meta.resize(h->meta_len);
      asio::async_read(*st, asio::buffer(self->meta), [self, a, st](const error_code& ec2, std::size_t) {
        if (self->stopped || self->attempt != a) return;
        if (ec2) return self->fail("read: " + tls_error(ec2));
        auto m = decode_answer_meta(std::string_view(reinterpret_cast<const char*>(self->meta.data()), self->meta.size()));
        if (!m) return self->fail(m.error().message);
        if (auto* l = self->link()) {
          const std::size_t i = kind_index(m->kind);
          l->answers[i] = *m;
          if (auto o = self->owner.lock()) l->answered_at[i] = o->clock.wall_now();
        }
        self->read_answer(a);
      });
    });
  }

  void enqueue(FrameKind kind, std::shared_ptr<std::vector<std::uint8_t>> frame) {
    queued[kind_index(kind)] = std::move(frame);
    flush();
  }

  void flush() {
    if (!up || writing || stopped) return;
    for (std::size_t i = 0; i < kCopyKinds; ++i) {
      auto& q = queued[i];
      if (!q) continue;
      auto next = std::move(q);
      q.reset();
      last[i] = next;
      writing = true;
      const std::uint64_t a = attempt;
      asio::async_write(*s, asio::buffer(*next), [self = shared_from_this(), next, a, st = s](const error_code& ec, std::size_t) {
        if (self->stopped || self->attempt != a) return;
        self->writing = false;
        if (ec) return self->fail("write: " + tls_error(ec));
        if (auto o = self->owner.lock()) ++o->counters.frames_out;
        self->flush();
      });
      return;
    }
  }

  void fail(const std::string& why) {
    auto o = owner.lock();
    if (!o || stopped) return;
    ++attempt;  // the old attempt's handlers stop here
    up = false;
    writing = false;
    close_stream();
    if (auto* l = link()) {
      l->last_error = why;
      ++l->failures;
    }
    set_state(LinkState::Retrying);
    backoff = backoff < o->cfg.reconnect_min ? o->cfg.reconnect_min : std::min(backoff * 2, o->cfg.reconnect_max);
    retry.expires_after(backoff);
    retry.async_wait([weak = weak_from_this()](const error_code& ec) {
      if (ec) return;
      if (auto self = weak.lock()) self->connect();
    });
  }

  void close_stream() {
    deadline.cancel();
    resolver.cancel();
    if (!s) return;
    error_code ignored;
    s->lowest_layer().shutdown(Tcp::socket::shutdown_both, ignored);
    s->lowest_layer().close(ignored);
  }

  void stop() {
    stopped = true;
    ++attempt;
    retry.cancel();
    close_stream();
    set_state(LinkState::Off);
  }
};

PeerChannel::Impl::Refusal PeerChannel::Impl::admit(const asio::ip::address& from) {
  const bool is_peer = peer_addresses.count(from) != 0;
  if (const auto it = pending_by_source.find(from);
      it != pending_by_source.end() && it->second >= cfg.max_pending_per_source)
    return {&counters.rejected_source_limit,
            fmt::format("{} connections from this address not yet authenticated (at most {})", it->second,
                        cfg.max_pending_per_source)};
  if (!is_peer && pending_strangers >= cfg.max_pending)
    return {&counters.rejected_busy,
            fmt::format("{} connections from addresses that are no peer's not yet authenticated (at most {})",
                        pending_strangers, cfg.max_pending)};
  const TimePoint now = clock.now();
  // Forget the buckets that have refilled (a full bucket is as good as a new one).
  if (buckets.size() > 1024)
    std::erase_if(buckets, [&](const auto& kv) {
      return kv.second.full(now, cfg.handshakes_per_s_per_source, cfg.handshake_burst);
    });
  // Still more addresses than that within seconds: the strangers' bucket holds them.
  if (buckets.size() > 4096) buckets.clear();
  if (!buckets[from].take(now, cfg.handshakes_per_s_per_source, cfg.handshake_burst))
    return {&counters.rejected_rate, fmt::format("more than {} handshakes from this address at once, or {:g} a second",
                                                 cfg.handshake_burst, cfg.handshakes_per_s_per_source)};
  if (!is_peer && !strangers_bucket.take(now, cfg.max_handshakes_per_s, cfg.max_handshakes_per_s))
    return {&counters.rejected_rate,
            fmt::format("more than {} handshakes a second from addresses that are no peer's", cfg.max_handshakes_per_s)};
  return {};
}

void PeerChannel::Impl::on_accept(Tcp::socket sock) {
  auto refused = [this] {
    const TimePoint now = clock.now();
    if (now - refusal_window >= kRefusalWindow) {
      refusal_window = now;
      refusals_in_window = 0;
    }
    ++refusals_in_window;
  };
  error_code ec;
  const auto ep = sock.remote_endpoint(ec);
  if (ec) return refused();  // reset before we got to it: paced like a refusal
  const auto from = plain(ep.address());
  if (const auto refusal = admit(from); refusal.counter) {
    ++*refusal.counter;
    note("refused a connection from " + from.to_string() + ": " + refusal.why);
    sock.close(ec);
    return refused();
  }
  ++counters.accepted;
  ++counters.pending;
  ++pending_by_source[from];
  const bool is_peer = peer_addresses.count(from) != 0;
  if (!is_peer) ++pending_strangers;
  auto in = std::make_shared<Inbound>(shared_from_this(), std::move(sock), from, is_peer);
  std::erase_if(inbound, [](const std::weak_ptr<Inbound>& w) { return w.expired(); });
  inbound.push_back(in);
  in->start();
}

void PeerChannel::Impl::accept() {
  if (!acceptor || stopped) return;
  acceptor->async_accept([self = shared_from_this()](const error_code& ec, Tcp::socket sock) {
    if (self->stopped) return;
    Duration pause{};
    if (!ec) {
      self->on_accept(std::move(sock));
      // Refusing at the pace of a client that reconnects in a loop would
      // cost a core: after a tenth of max_refusals_per_s within a tenth of
      // a second, wait out that tenth (a peer's connection waits in the
      // backlog that long at most).
      if (self->refusals_in_window >= std::max(1, self->cfg.max_refusals_per_s / 10)) {
        pause = kRefusalWindow - (self->clock.now() - self->refusal_window);
        self->refusals_in_window = 0;
        self->refusal_window += kRefusalWindow;
        ++self->counters.accept_pauses;
      }
    } else if (ec != asio::error::operation_aborted) {
      // Out of descriptors (EMFILE, ENFILE) or memory: retrying at once would spin.
      self->note("accept: " + ec.message() + "; accepting again in 100 ms");
      pause = std::chrono::milliseconds(100);
    }
    if (pause <= Duration::zero()) return self->accept();
    self->accept_timer.expires_after(pause);
    self->accept_timer.async_wait([self](const error_code& ec2) {
      if (!ec2) self->accept();
    });
  });
}

// A configured peer's continuity address is a peer's address (a host name
// resolved once, in the background; a connection it authenticates from is
// added then).
void PeerChannel::Impl::resolve_peers(std::size_t i) {
  for (; i < cfg.peers.size(); ++i) {
    error_code ec;
    const auto a = asio::ip::make_address(cfg.peers[i].host, ec);
    if (!ec) {
      peer_addresses.insert(plain(a));
      continue;
    }
    resolver.async_resolve(cfg.peers[i].host, "0",
                           [self = shared_from_this(), i](const error_code& ec2, Tcp::resolver::results_type r) {
                             if (self->stopped) return;
                             if (!ec2)
                               for (const auto& e : r) self->peer_addresses.insert(plain(e.endpoint().address()));
                             self->resolve_peers(i + 1);
                           });
    return;
  }
}

void PeerChannel::Impl::open_outbound() {
  for (const auto& p : cfg.peers) {
    auto o = std::make_shared<Outbound>(shared_from_this(), p);
    outbound.push_back(o);
    o->connect();
  }
}

void PeerChannel::Impl::close_outbound() {
  for (auto& o : outbound) o->stop();
  outbound.clear();
}

std::string_view to_string(LinkState s) {
  switch (s) {
    case LinkState::Off: return "off";
    case LinkState::Connecting: return "connecting";
    case LinkState::Handshake: return "handshake";
    case LinkState::Up: return "up";
    case LinkState::Retrying: return "retrying";
  }
  return "unknown";
}

PeerChannel::PeerChannel(boost::asio::io_context& io, ChannelConfig cfg, const Clock& clock, Offer offer)
    : impl_(std::make_shared<Impl>(io, std::move(cfg), clock, std::move(offer))) {}

PeerChannel::~PeerChannel() { stop(); }

Status PeerChannel::start() {
  for (auto* ctx : {&impl_->server_ctx, &impl_->client_ctx})
    if (auto st = setup_context(*ctx, impl_->cfg); !st.ok()) return st;
  if (impl_->cfg.listen_host.empty()) return Status::Ok();
  error_code ec;
  const auto addr = asio::ip::make_address(impl_->cfg.listen_host, ec);
  if (ec) return make_error(Errc::Config, "continuity.listen: \"" + impl_->cfg.listen_host + "\" is not an IP address");
  auto acc = std::make_unique<Tcp::acceptor>(impl_->io);
  const Tcp::endpoint ep(addr, impl_->cfg.listen_port);
  acc->open(ep.protocol(), ec);
  if (!ec) acc->set_option(Tcp::acceptor::reuse_address(true), ec);
  if (!ec) acc->bind(ep, ec);
  if (!ec) acc->listen(std::max(1, impl_->cfg.listen_backlog), ec);
  if (ec)
    return make_error(ec == asio::error::address_in_use ? Errc::Busy : Errc::Io,
                      "continuity.listen " + impl_->cfg.listen_host + " port " + std::to_string(impl_->cfg.listen_port) +
                          ": " + ec.message());
  impl_->acceptor = std::move(acc);
  impl_->resolve_peers(0);
  impl_->accept();
  return Status::Ok();
}

void PeerChannel::stop() {
  if (!impl_ || impl_->stopped) return;
  impl_->stopped = true;
  impl_->close_outbound();
  error_code ignored;
  if (impl_->acceptor) impl_->acceptor->close(ignored);
  impl_->accept_timer.cancel();
  impl_->resolver.cancel();
  for (auto& w : impl_->inbound)
    if (auto in = w.lock()) in->fail("smhad stopping", false);
}

void PeerChannel::set_outbound(bool on) {
  if (impl_->stopped || on == impl_->outbound_on) return;
  impl_->outbound_on = on;
  if (on) impl_->open_outbound();
  else impl_->close_outbound();
}

void PeerChannel::send(FrameKind kind, const CopyMeta& meta, const std::string& body) {
  if (!impl_->outbound_on) return;
  auto frame = std::make_shared<std::vector<std::uint8_t>>(encode_copy_frame(kind, meta, body));
  for (auto& o : impl_->outbound) o->enqueue(kind, frame);
}

void PeerChannel::on_notice(Notice notice) { impl_->notice = std::move(notice); }

void PeerChannel::send_notice(const NoticeMeta& meta) {
  if (!impl_->outbound_on) return;
  auto frame = std::make_shared<std::vector<std::uint8_t>>(encode_notice_frame(meta));
  for (auto& o : impl_->outbound) o->enqueue(meta.kind, frame);
}

const std::vector<PeerLink>& PeerChannel::links() const { return impl_->links; }
const ChannelCounters& PeerChannel::counters() const { return impl_->counters; }
bool PeerChannel::listening() const { return impl_->acceptor != nullptr; }

std::uint16_t PeerChannel::listening_port() const {
  if (!impl_->acceptor) return 0;
  error_code ec;
  const auto ep = impl_->acceptor->local_endpoint(ec);
  return ec ? 0 : ep.port();
}

}  // namespace smha::peer
