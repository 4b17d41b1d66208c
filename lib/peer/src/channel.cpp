// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/peer/channel.hpp"

#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <deque>

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

// A file a TLS context reads: present and regular, named in the error.
Status check_file(const std::string& what, const std::string& path, bool secret) {
  if (path.empty()) return make_error(Errc::Config, "continuity." + what + " is not set");
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    return make_error(Errc::NotFound, "continuity." + what + " " + path + ": " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return make_error(Errc::NotRegular, "continuity." + what + " " + path + " is not a regular file");
  if (secret && (st.st_mode & 077) != 0)
    return make_error(Errc::Insecure, "continuity." + what + " " + path +
                                          " can be read by others (mode " + std::to_string(st.st_mode & 0777) +
                                          " octal " + [&] {
                                            char b[8];
                                            std::snprintf(b, sizeof b, "%03o", st.st_mode & 0777);
                                            return std::string(b);
                                          }() + "); make it 0600");
  if (secret && st.st_uid != ::geteuid())
    return make_error(Errc::Insecure, "continuity." + what + " " + path + " is not owned by smhad's user");
  return Status::Ok();
}

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
  for (auto st : {check_file("certificate", cfg.certificate, false), check_file("private_key", cfg.private_key, true),
                  check_file("ca", cfg.ca, false)})
    if (!st.ok()) return st;
  SSL_CTX* c = ctx.native_handle();
  SSL_CTX_set_min_proto_version(c, TLS1_3_VERSION);
  error_code ec;
  ctx.use_certificate_chain_file(cfg.certificate, ec);
  if (ec) return make_error(Errc::Config, "continuity.certificate " + cfg.certificate + ": not a PEM certificate (" + ec.message() + ")");
  ctx.use_private_key_file(cfg.private_key, ssl::context::pem, ec);
  if (ec)
    return make_error(Errc::Config, "continuity.private_key " + cfg.private_key +
                                        ": not a PEM key, or not the key of continuity.certificate " +
                                        cfg.certificate + " (" + tls_error(ec) + ")");
  if (SSL_CTX_check_private_key(c) != 1)
    return make_error(Errc::Config, "continuity.private_key " + cfg.private_key + " does not match continuity.certificate " +
                                        cfg.certificate);
  ctx.load_verify_file(cfg.ca, ec);
  if (ec) return make_error(Errc::Config, "continuity.ca " + cfg.ca + ": not a PEM certificate (" + ec.message() + ")");
  ctx.set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert);
  return Status::Ok();
}


}  // namespace

struct PeerChannel::Impl : std::enable_shared_from_this<PeerChannel::Impl> {
  Impl(asio::io_context& io, ChannelConfig cfg, const Clock& clock, Offer offer)
      : io(io), cfg(std::move(cfg)), clock(clock), offer(std::move(offer)) {
    for (const auto& p : this->cfg.peers) {
      PeerLink l;
      l.name = p.name;
      links.push_back(std::move(l));
    }
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
  std::vector<PeerLink> links;
  ChannelCounters counters;
  bool stopped = false;
  bool outbound_on = false;
  int inbound_now = 0;
  std::vector<std::weak_ptr<Inbound>> inbound;
  std::vector<std::shared_ptr<Outbound>> outbound;

  PeerLink* link(const std::string& name) {
    for (auto& l : links)
      if (l.name == name) return &l;
    return nullptr;
  }

  void accept();
  void open_outbound();
  void close_outbound();
};

// One connection a peer opened to us.
struct PeerChannel::Impl::Inbound : std::enable_shared_from_this<Inbound> {
  Inbound(std::shared_ptr<Impl> owner, Tcp::socket sock)
      : owner(owner), s(std::move(sock), owner->server_ctx), timer(owner->io) {}

  std::weak_ptr<Impl> owner;
  Stream s;
  asio::steady_timer timer;
  std::string peer;  // the configured peer its certificate names
  std::array<std::uint8_t, kFrameHeaderSize> hdr{};
  FrameHeader header;
  std::vector<std::uint8_t> buf;
  std::deque<std::shared_ptr<std::vector<std::uint8_t>>> out;
  bool writing = false;
  bool closed = false;
  TimePoint window{};
  int frames_in_window = 0;

  void arm(Duration d, const char* what) {
    timer.expires_after(d);
    timer.async_wait([weak = weak_from_this(), what](const error_code& ec) {
      if (ec) return;
      if (auto self = weak.lock()) self->fail(std::string(what), true);
    });
  }

  void start() {
    auto o = owner.lock();
    arm(o->cfg.handshake_timeout, "TLS handshake timed out");
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
      if (auto* l = o->link(self->peer)) ++l->inbound;
      self->read_header();
    });
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
      self->buf.resize(static_cast<std::size_t>(h->meta_len) + h->body_len);
      self->arm(o->cfg.frame_timeout, "a frame took longer than its timeout (slow peer)");
      asio::async_read(self->s, asio::buffer(self->buf), [self](const error_code& ec2, std::size_t) {
        auto o2 = self->owner.lock();
        if (!o2 || self->closed) return;
        if (ec2) return self->fail("read: " + tls_error(ec2), false);
        self->on_frame();
      });
    });
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
    buf.clear();
    buf.shrink_to_fit();
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
      --o->inbound_now;
      if (timeout && peer.empty()) ++o->counters.handshake_failed;
      else if (timeout) ++o->counters.protocol_errors;
      o->counters.last_inbound_error = (peer.empty() ? std::string("unauthenticated peer") : peer) + ": " + why;
      if (auto* l = peer.empty() ? nullptr : o->link(peer)) --l->inbound;
    }
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

  void set_state(const char* st) {
    if (auto* l = link()) l->outbound = st;
  }

  void connect() {
    auto o = owner.lock();
    if (!o || stopped) return;
    const std::uint64_t a = ++attempt;
    up = false;
    writing = false;
    s = std::make_shared<Stream>(o->io, o->client_ctx);
    set_state("connecting");
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
    set_state("handshake");
    // The server's certificate must name the peer (CN or DNS SAN).
    SSL_set1_host(s->native_handle(), peer.name.c_str());
    SSL_set_hostflags(s->native_handle(), X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    s->async_handshake(ssl::stream_base::client, [self = shared_from_this(), a, st = s](const error_code& ec) {
      if (self->stopped || self->attempt != a) return;
      if (ec) return self->fail("TLS handshake: " + tls_error(ec));
      self->deadline.cancel();
      self->up = true;
      if (auto o = self->owner.lock()) self->backoff = o->cfg.reconnect_min;
      self->set_state("up");
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
    set_state("retrying");
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
    set_state("off");
  }
};

void PeerChannel::Impl::accept() {
  if (!acceptor || stopped) return;
  acceptor->async_accept([self = shared_from_this()](const error_code& ec, Tcp::socket sock) {
    if (self->stopped) return;
    if (!ec) {
      if (self->inbound_now >= self->cfg.max_inbound) {
        ++self->counters.rejected_busy;
        error_code ignored;
        sock.close(ignored);
      } else {
        ++self->counters.accepted;
        ++self->inbound_now;
        auto in = std::make_shared<Inbound>(self, std::move(sock));
        self->inbound.push_back(in);
        std::erase_if(self->inbound, [](const std::weak_ptr<Inbound>& w) { return w.expired(); });
        in->start();
      }
    }
    self->accept();
  });
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
  if (!ec) acc->listen(asio::socket_base::max_listen_connections, ec);
  if (ec)
    return make_error(ec == asio::error::address_in_use ? Errc::Busy : Errc::Io,
                      "continuity.listen " + impl_->cfg.listen_host + " port " + std::to_string(impl_->cfg.listen_port) +
                          ": " + ec.message());
  impl_->acceptor = std::move(acc);
  impl_->accept();
  return Status::Ok();
}

void PeerChannel::stop() {
  if (!impl_ || impl_->stopped) return;
  impl_->stopped = true;
  impl_->close_outbound();
  error_code ignored;
  if (impl_->acceptor) impl_->acceptor->close(ignored);
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
