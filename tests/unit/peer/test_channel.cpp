// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// The peer channel over loopback TCP (doc/continuity.md), with certificates
// from scripts/make-peer-certs: a copy goes from one PeerChannel to another
// and its answer comes back; peers that are not ours (no certificate, another
// CA, a head that is no peer), bytes that are no frame, a slow peer and a
// flooding one are each refused, counted and named.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include <boost/asio/connect.hpp>
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
ssl::context client_context(const std::string& ca, const std::string& cert, const std::string& key) {
  ssl::context ctx{ssl::context::tls_client};
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
  Client(const std::string& ca, const std::string& cert, const std::string& key)
      : ctx(client_context(ca, cert, key)), s(io, ctx) {}
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
  INFO(sender.links()[0].outbound << ": " << sender.links()[0].last_error << "; receiver: "
                                    << receiver.counters().last_inbound_error);
  REQUIRE(sender.links()[0].answers[1]);
  CHECK(sender.links()[0].answers[1]->applied);
  CHECK(sender.links()[0].answers[1]->generation == 7);
  CHECK(sender.links()[0].outbound == "up");
  CHECK(offers == 1);
  CHECK(seen_peer == "head01");
  CHECK(receiver.counters().frames_in == 1);
  sender.set_outbound(false);
  CHECK(sender.links()[0].outbound == "off");
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
