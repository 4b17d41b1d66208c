// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// The peer channel over loopback TCP (doc/continuity.md), with certificates
// from scripts/make-peer-certs: a copy goes from one PeerChannel to another
// and its answer comes back; peers that are not ours (no certificate, another
// CA, a head that is no peer), bytes that are no frame, a slow peer and a
// flooding one are each refused, counted and named; the limits before
// authentication, the accept pacing, the key-exchange groups and the memory
// budget hold against hostile clients.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include <openssl/ssl.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/write.hpp>

#include "smha/peer/channel.hpp"

using namespace smha;
using namespace smha::peer;
namespace asio = boost::asio;
namespace ssl = boost::asio::ssl;
using Tcp = asio::ip::tcp;

namespace {

constexpr Guid kHead01{0x0002c90300000001ULL};

// One CA with head01..head03, and another CA with a head01 of its own.
struct Certs {
  std::string dir;
  std::string other;
  Certs() {
    dir = std::filesystem::temp_directory_path() / ("smha-peer-test-" + std::to_string(::getpid()));
    other = dir + "/other";
    const std::string mk = std::string(SMHA_SOURCE_DIR) + "/scripts/make-peer-certs ";
    REQUIRE(std::system((mk + dir + " head01 head02 head03").c_str()) == 0);
    REQUIRE(std::system((mk + other + " head01").c_str()) == 0);
  }
  ~Certs() { std::filesystem::remove_all(dir); }
  ChannelConfig config(const std::string& name) const {
    ChannelConfig c;
    c.listen_host = "127.0.0.1";
    c.listen_port = 0;
    c.certificate = dir + "/" + name + ".pem";
    c.private_key = dir + "/" + name + ".key";
    c.ca = dir + "/ca.pem";
    c.handshake_timeout = std::chrono::milliseconds(500);
    c.frame_timeout = std::chrono::milliseconds(300);
    c.max_frames_per_s = 5;
    c.max_bytes = 4096;
    return c;
  }
};

// The server's io_context on a thread of its own while a test's client runs.
struct Running {
  asio::io_context& io;
  std::thread t;
  explicit Running(asio::io_context& io) : io(io), t([&io] {
    auto guard = asio::make_work_guard(io);
    io.run();
  }) {}
  ~Running() {
    io.stop();
    t.join();
  }
};

// A client connection presenting `cert`/`key` (none when empty), trusting `ca`.
ssl::context client_context(const std::string& ca, const std::string& cert, const std::string& key,
                            const char* groups = nullptr) {
  ssl::context ctx{ssl::context::tls_client};
  if (groups) SSL_CTX_set1_groups_list(ctx.native_handle(), groups);
  ctx.load_verify_file(ca);
  if (!cert.empty()) {
    ctx.use_certificate_chain_file(cert);
    ctx.use_private_key_file(key, ssl::context::pem);
  }
  ctx.set_verify_mode(ssl::verify_none);  // the test watches the server's side
  return ctx;
}

struct Client {
  asio::io_context io;
  ssl::context ctx;
  ssl::stream<Tcp::socket> s;  // made after ctx has its certificate (SSL_new copies it)
  Client(const std::string& ca, const std::string& cert, const std::string& key, const char* groups = nullptr)
      : ctx(client_context(ca, cert, key, groups)), s(io, ctx) {}
  boost::system::error_code connect(std::uint16_t port) {
    boost::system::error_code ec;
    s.lowest_layer().connect(Tcp::endpoint(asio::ip::make_address("127.0.0.1"), port), ec);
    if (!ec) s.handshake(ssl::stream_base::client, ec);
    return ec;
  }
  // Reads until the server closes; true if it did within `limit`.
  bool closed_by_server(std::chrono::milliseconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    s.lowest_layer().non_blocking(true);
    char buf[256];
    while (std::chrono::steady_clock::now() < deadline) {
      boost::system::error_code ec;
      s.read_some(asio::buffer(buf), ec);
      if (ec && ec != asio::error::would_block) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }
};

// `f()` run on the loop of `io` (which a Running runs), its result here.
template <class F>
auto on_loop(asio::io_context& io, F f) {
  std::promise<decltype(f())> p;
  asio::post(io, [&] { p.set_value(f()); });
  return p.get_future().get();
}

// Polls `pred` on the loop of `io` until it holds; false if not within `limit`.
template <class P>
bool eventually(asio::io_context& io, P pred, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (on_loop(io, pred)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return on_loop(io, pred);
}

Tcp::endpoint loopback(const std::string& addr, std::uint16_t port) { return {asio::ip::make_address(addr), port}; }

// A plain TCP connection from `from` (any 127.x address is this host's).
std::unique_ptr<Tcp::socket> tcp_from(asio::io_context& io, const std::string& from, std::uint16_t port) {
  auto s = std::make_unique<Tcp::socket>(io);
  boost::system::error_code ec;
  s->open(Tcp::v4(), ec);
  s->bind(loopback(from, 0), ec);
  s->connect(loopback("127.0.0.1", port), ec);
  if (ec) return nullptr;
  s->non_blocking(true);
  return s;
}

// True once the server closed `s` (EOF or reset on a read).
bool closed(Tcp::socket& s) {
  char b[16];
  boost::system::error_code ec;
  s.read_some(asio::buffer(b), ec);
  return ec && ec != asio::error::would_block;
}

double rss_mib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  return 0;
}

CopyMeta meta(std::uint64_t generation) {
  CopyMeta m;
  m.from = "head01";
  m.master_guid = kHead01;
  m.generation = generation;
  return m;
}

}  // namespace

TEST_CASE("Peer channel: a copy goes from head01 to head02 over TLS 1.3 and its answer comes back",
          "[peer][channel]") {
  Certs certs;
  asio::io_context io;
  SteadyClock clock;
  int offers = 0;
  std::string seen_peer;
  auto rcfg = certs.config("head02");
  rcfg.peers = {{"head01", kHead01, "127.0.0.1", 1}};
  PeerChannel receiver(io, rcfg, clock,
                       [&](FrameKind kind, const CopyMeta& m, std::string_view body, const std::string& peer) {
                         ++offers;
                         seen_peer = peer;
                         Verdict v;
                         v.applied = kind == FrameKind::Guid2Lid && m.generation == 7 && body == "abc";
                         v.reason = RefuseReason::NotMaster;
                         v.text = "checked";
                         return v;
                       });
  REQUIRE(receiver.start().ok());
  REQUIRE(receiver.listening_port() != 0);
  auto cfg = certs.config("head01");
  cfg.listen_host.clear();
  cfg.peers = {{"head02", Guid{2}, "127.0.0.1", receiver.listening_port()}};
  PeerChannel sender(io, cfg, clock, [](FrameKind, const CopyMeta&, std::string_view, const std::string&) {
    return Verdict{};
  });
  REQUIRE(sender.start().ok());
  sender.set_outbound(true);
  sender.send(FrameKind::Guid2Lid, meta(7), "abc");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline && !sender.links()[0].answers[1]) io.run_one_for(std::chrono::milliseconds(50));
  INFO(to_string(sender.links()[0].outbound) << ": " << sender.links()[0].last_error << "; receiver: "
                                    << receiver.counters().last_inbound_error);
  REQUIRE(sender.links()[0].answers[1]);
  CHECK(sender.links()[0].answers[1]->applied);
  CHECK(sender.links()[0].answers[1]->generation == 7);
  CHECK(sender.links()[0].outbound == LinkState::Up);
  CHECK(offers == 1);
  CHECK(seen_peer == "head01");
  CHECK(receiver.counters().frames_in == 1);
  sender.set_outbound(false);
  CHECK(sender.links()[0].outbound == LinkState::Off);
}

TEST_CASE("Peer channel: no certificate, another CA and a head that is no peer are refused and counted",
          "[peer][channel]") {
  Certs certs;
  asio::io_context io;
  SteadyClock clock;
  auto cfg = certs.config("head02");
  cfg.peers = {{"head01", kHead01, "127.0.0.1", 1}};
  int offers = 0;
  PeerChannel receiver(io, cfg, clock, [&](FrameKind, const CopyMeta&, std::string_view, const std::string&) {
    ++offers;
    return Verdict{};
  });
  REQUIRE(receiver.start().ok());
  const auto port = receiver.listening_port();
  {
    Running run(io);
    Client none(certs.dir + "/ca.pem", "", "");
    (void)none.connect(port);
    CHECK(none.closed_by_server(std::chrono::seconds(3)));
    Client forged(certs.dir + "/ca.pem", certs.other + "/head01.pem", certs.other + "/head01.key");
    (void)forged.connect(port);
    CHECK(forged.closed_by_server(std::chrono::seconds(3)));
    Client stranger(certs.dir + "/ca.pem", certs.dir + "/head03.pem", certs.dir + "/head03.key");
    (void)stranger.connect(port);
    CHECK(stranger.closed_by_server(std::chrono::seconds(3)));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  INFO(receiver.counters().last_inbound_error);
  CHECK(receiver.counters().handshake_failed == 2);
  CHECK(receiver.counters().unknown_identity == 1);
  CHECK(receiver.counters().last_inbound_error.find("names no configured peer") != std::string::npos);
  CHECK(offers == 0);
}

TEST_CASE("Peer channel: bytes that are no frame, a slow peer and a flooding one are cut off and named",
          "[peer][channel]") {
  Certs certs;
  asio::io_context io;
  SteadyClock clock;
  auto cfg = certs.config("head02");
  cfg.peers = {{"head01", kHead01, "127.0.0.1", 1}};
  int offers = 0;
  PeerChannel receiver(io, cfg, clock, [&](FrameKind, const CopyMeta&, std::string_view, const std::string&) {
    ++offers;
    Verdict v;
    v.applied = true;
    return v;
  });
  REQUIRE(receiver.start().ok());
  const auto port = receiver.listening_port();
  std::string garbage_error, slow_error, flood_error;
  {
    Running run(io);
    auto head01 = [&] {
      return std::make_unique<Client>(certs.dir + "/ca.pem", certs.dir + "/head01.pem", certs.dir + "/head01.key");
    };
    auto c = head01();
    REQUIRE_FALSE(c->connect(port));
    asio::write(c->s, asio::buffer(std::string("GET / HTTP/1.1\r\n\r\n")));
    CHECK(c->closed_by_server(std::chrono::seconds(3)));
    // A header, then nothing: cut after frame_timeout (300 ms).
    c = head01();
    REQUIRE_FALSE(c->connect(port));
    const auto frame = encode_copy_frame(FrameKind::SaDump, meta(5), "body");
    asio::write(c->s, asio::buffer(frame.data(), kFrameHeaderSize + 3));
    CHECK(c->closed_by_server(std::chrono::seconds(3)));
    // Twenty frames at once: more than 5 a second.
    c = head01();
    REQUIRE_FALSE(c->connect(port));
    boost::system::error_code ec;
    for (int i = 0; i < 20 && !ec; ++i) asio::write(c->s, asio::buffer(frame), ec);
    CHECK(c->closed_by_server(std::chrono::seconds(3)));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  INFO(receiver.counters().last_inbound_error);
  CHECK(receiver.counters().protocol_errors == 3);
  CHECK(receiver.counters().last_inbound_error.find("flooding") != std::string::npos);
  CHECK(offers == 5);
}

TEST_CASE("Peer channel: a key others can read, a missing file and a key that is not the certificate's are "
          "refused at start, naming the file",
          "[peer][channel]") {
  Certs certs;
  asio::io_context io;
  SteadyClock clock;
  auto start = [&](ChannelConfig c) {
    PeerChannel ch(io, c, clock, [](FrameKind, const CopyMeta&, std::string_view, const std::string&) { return Verdict{}; });
    return ch.start();
  };
  auto cfg = certs.config("head02");
  std::filesystem::permissions(cfg.private_key, std::filesystem::perms::group_read, std::filesystem::perm_options::add);
  auto st = start(cfg);
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().code == Errc::Insecure);
  CHECK(st.error().message.find(cfg.private_key) != std::string::npos);
  std::filesystem::permissions(cfg.private_key, std::filesystem::perms::group_read, std::filesystem::perm_options::remove);
  cfg.ca = certs.dir + "/nope.pem";
  st = start(cfg);
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().message.find("continuity.ca " + cfg.ca) == 0);
  cfg = certs.config("head02");
  cfg.private_key = certs.dir + "/head01.key";
  st = start(cfg);
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().message.find("continuity.private_key " + cfg.private_key) == 0);
  CHECK(st.error().message.find("not the key of continuity.certificate") != std::string::npos);
}

TEST_CASE("Peer channel: a client offering only ffdhe8192 gets no handshake (X25519 and P-256 only) and is counted",
          "[peer][channel]") {
  Certs certs;
  asio::io_context io;
  SteadyClock clock;
  auto cfg = certs.config("head02");
  cfg.peers = {{"head01", kHead01, "127.0.0.1", 1}};
  PeerChannel receiver(io, cfg, clock, [](FrameKind, const CopyMeta&, std::string_view, const std::string&) {
    return Verdict{};
  });
  REQUIRE(receiver.start().ok());
  Running run(io);
  // head01's own certificate: only the group stands between it and a connection.
  Client ffdhe(certs.dir + "/ca.pem", certs.dir + "/head01.pem", certs.dir + "/head01.key", "ffdhe8192");
  const auto ec = ffdhe.connect(receiver.listening_port());
  INFO(ec.message());
  CHECK(ec);
  CHECK(eventually(io, [&] { return receiver.counters().handshake_failed == 1; }, std::chrono::seconds(3)));
  CHECK(on_loop(io, [&] { return receiver.counters().last_inbound_error; }).find("TLS handshake failed") !=
        std::string::npos);
  Client p256(certs.dir + "/ca.pem", certs.dir + "/head01.pem", certs.dir + "/head01.key", "P-256");
  CHECK_FALSE(p256.connect(receiver.listening_port()));
  CHECK(eventually(io, [&] { return receiver.links()[0].inbound == 1; }, std::chrono::seconds(3)));
}

TEST_CASE("Peer channel: idle TCP connections from other addresses cannot keep a peer's copy out, and are closed "
          "at the pre-authentication deadline",
          "[peer][channel]") {
  Certs certs;
  asio::io_context io;
  SteadyClock clock;
  auto rcfg = certs.config("head02");
  rcfg.peers = {{"head01", kHead01, "127.0.0.1", 1}};
  int offers = 0;
  PeerChannel receiver(io, rcfg, clock, [&](FrameKind, const CopyMeta&, std::string_view, const std::string&) {
    ++offers;
    Verdict v;
    v.applied = true;
    return v;
  });
  REQUIRE(receiver.start().ok());
  const auto port = receiver.listening_port();
  Running run(io);
  // 12 holders from 127.0.0.2..7, two each: every one the server closes
  // (deadline or refusal) is opened again at once.
  std::atomic<bool> holding{true};
  std::atomic<int> opened{0};
  std::thread holders([&] {
    asio::io_context hio;
    std::vector<std::unique_ptr<Tcp::socket>> held(12);
    while (holding) {
      for (std::size_t i = 0; i < held.size(); ++i)
        if (!held[i] || closed(*held[i])) {
          held[i] = tcp_from(hio, "127.0.0." + std::to_string(2 + i / 2), port);
          ++opened;
        }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  REQUIRE(eventually(io, [&] { return receiver.counters().pending >= 8; }, std::chrono::seconds(3)));
  asio::io_context sio;
  auto scfg = certs.config("head01");
  scfg.listen_host.clear();
  scfg.peers = {{"head02", Guid{2}, "127.0.0.1", port}};
  PeerChannel sender(sio, scfg, clock, [](FrameKind, const CopyMeta&, std::string_view, const std::string&) {
    return Verdict{};
  });
  REQUIRE(sender.start().ok());
  sender.set_outbound(true);
  sender.send(FrameKind::Guid2Lid, meta(3), "abc");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < deadline && !sender.links()[0].answers[1])
    sio.run_one_for(std::chrono::milliseconds(20));
  INFO(to_string(sender.links()[0].outbound) << ": " << sender.links()[0].last_error);
  CHECK(sender.links()[0].answers[1]);
  // The holders' connections time out at the deadline (500 ms here) and are counted.
  CHECK(eventually(io, [&] { return receiver.counters().preauth_timeouts >= 8; }, std::chrono::seconds(3)));
  holding = false;
  holders.join();
  const auto c = on_loop(io, [&] { return receiver.counters(); });
  INFO(c.last_inbound_error);
  CHECK(on_loop(io, [&] { return offers; }) == 1);
  CHECK(c.rejected_busy + c.rejected_source_limit + c.rejected_rate > 0);
  CHECK(opened > 12);
}

TEST_CASE("Peer channel: a client reconnecting in a tight loop costs a bounded number of accepts", "[peer][channel]") {
  Certs certs;
  asio::io_context io;
  SteadyClock clock;
  auto cfg = certs.config("head02");
  cfg.peers = {{"head01", kHead01, "127.0.0.1", 1}};
  PeerChannel receiver(io, cfg, clock, [](FrameKind, const CopyMeta&, std::string_view, const std::string&) {
    return Verdict{};
  });
  REQUIRE(receiver.start().ok());
  const auto port = receiver.listening_port();
  Running run(io);
  asio::io_context cio;
  int connects = 0;
  const auto t0 = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - t0 < std::chrono::seconds(1)) {
    auto s = tcp_from(cio, "127.0.0.9", port);
    connects += s != nullptr;
  }
  const double seconds_run = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto c = on_loop(io, [&] { return receiver.counters(); });
  const auto refused = c.rejected_busy + c.rejected_source_limit + c.rejected_rate;
  INFO("client connects " << connects << ", accepted " << c.accepted << ", refused " << refused << ", pauses "
                          << c.accept_pauses << " in " << seconds_run << " s");
  // handshake_burst (4) + 1 a second admitted; 2 refusals per 100 ms.
  CHECK(c.accepted <= 4 + 2 * static_cast<std::uint64_t>(seconds_run + 1));
  CHECK(refused <= 2 * static_cast<std::uint64_t>(10 * seconds_run + 2));
  CHECK(refused > 0);
  CHECK(c.accept_pauses > 0);
}

// A head02 receiving from head01 and head03 on a thread of its own, with
// the limits before authentication out of the way of many clients from 127.0.0.1.
struct Budgeted {
  Certs certs;
  asio::io_context io;
  SteadyClock clock;
  std::size_t offered = 0;
  std::unique_ptr<PeerChannel> receiver;
  std::unique_ptr<Running> run;
  explicit Budgeted(std::size_t max_bytes, std::size_t budget) {
    auto cfg = certs.config("head02");
    cfg.peers = {{"head01", kHead01, "127.0.0.1", 1}, {"head03", Guid{3}, "127.0.0.1", 1}};
    cfg.max_inbound_per_peer = 4;
    cfg.max_pending_per_source = 16;
    cfg.handshake_burst = 100;
    cfg.max_bytes = max_bytes;
    cfg.max_buffered_bytes = budget;
    cfg.frame_timeout = std::chrono::seconds(30);
    receiver = std::make_unique<PeerChannel>(io, cfg, clock,
                                             [this](FrameKind, const CopyMeta&, std::string_view body, const std::string&) {
                                               offered = body.size();
                                               Verdict v;
                                               v.applied = true;
                                               return v;
                                             });
    REQUIRE(receiver->start().ok());
    run = std::make_unique<Running>(io);
  }
  std::unique_ptr<Client> client(const char* name) {
    auto c = std::make_unique<Client>(certs.dir + "/ca.pem", certs.dir + "/" + name + ".pem",
                                      certs.dir + "/" + name + ".key");
    REQUIRE_FALSE(c->connect(receiver->listening_port()));
    return c;
  }
  ChannelCounters counters() { return on_loop(io, [&] { return receiver->counters(); }); }
};

TEST_CASE("Peer channel: 8 frame headers announcing 64 MiB bodies hold one 64 KiB chunk each, not 64 MiB",
          "[peer][channel]") {
  Budgeted r(64u << 20, 0);
  const double rss_before = rss_mib();
  auto frame = encode_copy_frame(FrameKind::SaDump, meta(5), "x");
  const std::uint32_t body = (64u << 20) - 4096;
  for (int i = 0; i < 4; ++i) frame[12 + i] = static_cast<std::uint8_t>(body >> (24 - 8 * i));
  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < 8; ++i) {
    clients.push_back(r.client(i % 2 ? "head03" : "head01"));
    asio::write(clients.back()->s, asio::buffer(frame.data(), kFrameHeaderSize));
  }
  CHECK(eventually(r.io, [&] { return r.receiver->counters().buffered_bytes == 8 * 64 * 1024; }, std::chrono::seconds(5)));
  const auto c = r.counters();
  INFO(c.last_inbound_error);
  CHECK(c.buffered_peak == 8 * 64 * 1024);
  CHECK(c.protocol_errors == 0);
  CHECK(rss_mib() - rss_before < 64);
}

TEST_CASE("Peer channel: a frame that would take all connections over the buffer budget closes its connection, "
          "and one within it arrives whole",
          "[peer][channel]") {
  Budgeted r(80000, 160000);
  const std::string body(75000, 'x');
  const auto frame = encode_copy_frame(FrameKind::SaDump, meta(5), body);
  const std::size_t part = frame.size() - 10;
  auto a = r.client("head01");
  auto b = r.client("head03");
  auto c3 = r.client("head01");
  asio::write(a->s, asio::buffer(frame.data(), part));
  asio::write(b->s, asio::buffer(frame.data(), part));
  // Two frames of ~75 KB held; a third's first 64 KiB chunk would pass 160 000 bytes.
  const std::size_t held = frame.size() - kFrameHeaderSize;
  REQUIRE(eventually(r.io, [&] { return r.receiver->counters().buffered_bytes == 2 * held; }, std::chrono::seconds(5)));
  // The server may close it before all of it is written (a broken pipe here).
  boost::system::error_code ec;
  asio::write(c3->s, asio::buffer(frame.data(), part), ec);
  CHECK(c3->closed_by_server(std::chrono::seconds(5)));
  auto c = r.counters();
  INFO(c.last_inbound_error);
  CHECK(c.rejected_memory == 1);
  CHECK(c.protocol_errors == 1);
  CHECK(c.last_inbound_error.find("bytes buffered") != std::string::npos);
  CHECK(c.buffered_peak == 2 * held);
  asio::write(a->s, asio::buffer(frame.data() + part, frame.size() - part));
  CHECK(eventually(r.io, [&] { return r.receiver->counters().frames_in == 1; }, std::chrono::seconds(5)));
  CHECK(on_loop(r.io, [&] { return r.offered; }) == body.size());
  CHECK(r.counters().buffered_bytes == held);
}
