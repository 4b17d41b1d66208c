// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// bench_channel: what hostile clients cost the peer channel's listener
// (doc/continuity.md), measured as the CPU time of the thread running the
// listening PeerChannel's io_context (smhad's event loop in the daemon):
//   - ffdhe8192: --attempts TLS 1.3 handshakes from a client offering only
//     the ffdhe8192 key-exchange group (with a valid head certificate), one
//     after the other (the channel's handshake rate limit lifted, as they
//     all come from 127.0.0.1); CPU per attempt and how many completed;
//   - x25519: the same with a client offering X25519 (what a peer does);
//   - both again against a bare TLS 1.3 server set up as the channel was
//     before it limited the groups (OpenSSL's defaults: the "before" rows);
//   - reconnect: --idle idle TCP connections from 127.0.0.2.. hold what
//     slots they get, while one client from 127.0.0.200 connects and closes
//     in a tight loop for --seconds; the server's accepts, refusals and CPU,
//     and whether a real peer's (head01 from 127.0.0.1) copy still arrives.
// Certificates come from scripts/make-peer-certs in a temporary directory.
//
//   bench_channel [--attempts N (20)] [--idle I (8)] [--seconds S (1)]
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <openssl/ssl.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>

#include "smha/peer/channel.hpp"

namespace {

using namespace smha;
using namespace smha::peer;
namespace asio = boost::asio;
namespace ssl = boost::asio::ssl;
using Tcp = asio::ip::tcp;
using Steady = std::chrono::steady_clock;

struct Certs {
  std::string dir = std::filesystem::temp_directory_path() / ("smha-bench-channel-" + std::to_string(::getpid()));
  Certs() {
    const std::string cmd = std::string(SMHA_SOURCE_DIR) + "/scripts/make-peer-certs " + dir + " head01 head02 >/dev/null";
    if (std::system(cmd.c_str()) != 0) throw std::runtime_error("make-peer-certs failed");
  }
  ~Certs() { std::filesystem::remove_all(dir); }
  ChannelConfig config(const std::string& name) const {
    ChannelConfig c;
    c.listen_host = "127.0.0.1";
    c.certificate = dir + "/" + name + ".pem";
    c.private_key = dir + "/" + name + ".key";
    c.ca = dir + "/ca.pem";
    return c;
  }
};

Tcp::endpoint at(const std::string& addr, std::uint16_t port) { return {asio::ip::make_address(addr), port}; }

double thread_cpu_s(std::thread& t) {
  clockid_t id;
  pthread_getcpuclockid(t.native_handle(), &id);
  timespec ts{};
  clock_gettime(id, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

// A listening head02 whose io_context runs on a thread of its own.
struct Server {
  asio::io_context io;
  SteadyClock clock;
  std::atomic<int> copies{0};
  std::unique_ptr<PeerChannel> ch;
  std::thread t;
  // `handshake_rows`: no handshake rate limit (the rows measure handshakes, all from 127.0.0.1).
  explicit Server(const Certs& certs, bool handshake_rows = true) {
    auto cfg = certs.config("head02");
    cfg.listen_host = "0.0.0.0";
    if (handshake_rows) cfg.handshake_burst = 1 << 20;
    cfg.peers = {{"head01", Guid{1}, "127.0.0.1", 1}};
    ch = std::make_unique<PeerChannel>(io, cfg, clock,
                                       [this](FrameKind, const CopyMeta&, std::string_view, const std::string&) {
                                         ++copies;
                                         Verdict v;
                                         v.applied = true;
                                         return v;
                                       });
    if (auto st = ch->start(); !st.ok()) throw std::runtime_error(st.error().message);
    t = std::thread([this] {
      auto guard = asio::make_work_guard(io);
      io.run();
    });
  }
  ~Server() { halt(); }
  void halt() {
    io.stop();
    if (t.joinable()) t.join();
  }
  double cpu_s() { return thread_cpu_s(t); }
  std::uint16_t port() const { return ch->listening_port(); }
};


// The channel's server context as it was before the groups were limited
// (TLS 1.3, head02's certificate, the CA, a peer certificate required),
// handshaking one connection after another on a thread of its own.
struct DefaultGroupsServer {
  asio::io_context io;
  ssl::context ctx{ssl::context::tls_server};
  Tcp::acceptor acc{io, at("127.0.0.1", 0)};
  std::atomic<bool> run{true};
  std::thread t;
  explicit DefaultGroupsServer(const Certs& certs) {
    SSL_CTX_set_min_proto_version(ctx.native_handle(), TLS1_3_VERSION);
    ctx.use_certificate_chain_file(certs.dir + "/head02.pem");
    ctx.use_private_key_file(certs.dir + "/head02.key", ssl::context::pem);
    ctx.load_verify_file(certs.dir + "/ca.pem");
    ctx.set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert);
    t = std::thread([this] {
      while (run) {
        ssl::stream<Tcp::socket> s(io, ctx);
        boost::system::error_code ec;
        acc.accept(s.lowest_layer(), ec);
        if (ec || !run) break;
        s.handshake(ssl::stream_base::server, ec);
      }
    });
  }
  ~DefaultGroupsServer() {
    run = false;
    Tcp::socket wake(io);
    boost::system::error_code ec;
    wake.connect(acc.local_endpoint(), ec);
    t.join();
  }
  double cpu_s() { return thread_cpu_s(t); }
  std::uint16_t port() const { return acc.local_endpoint().port(); }
};

// One handshake offering only `groups`; true if it completed on the client's side.
bool handshake(const Certs& certs, std::uint16_t port, const char* groups) {
  asio::io_context io;
  ssl::context ctx{ssl::context::tls_client};
  ctx.load_verify_file(certs.dir + "/ca.pem");
  ctx.use_certificate_chain_file(certs.dir + "/head01.pem");
  ctx.use_private_key_file(certs.dir + "/head01.key", ssl::context::pem);
  ctx.set_verify_mode(ssl::verify_none);
  SSL_CTX_set_min_proto_version(ctx.native_handle(), TLS1_3_VERSION);
  SSL_CTX_set1_groups_list(ctx.native_handle(), groups);
  ssl::stream<Tcp::socket> s(io, ctx);
  boost::system::error_code ec;
  s.lowest_layer().connect(at("127.0.0.1", port), ec);
  if (!ec) s.handshake(ssl::stream_base::client, ec);
  return !ec;
}

template <class S>
void handshakes(const Certs& certs, const char* server, const char* groups, int attempts) {
  S srv(certs);
  int ok = 0;
  const double cpu0 = srv.cpu_s();
  const auto t0 = Steady::now();
  for (int i = 0; i < attempts; ++i) ok += handshake(certs, srv.port(), groups);
  const double wall = std::chrono::duration<double>(Steady::now() - t0).count();
  const double cpu = srv.cpu_s() - cpu0;
  std::printf("%-22s %-10s %8d %10d %18.2f %12.2f\n", server, groups, attempts, ok, cpu * 1000 / attempts,
              wall * 1000 / attempts);
}

void reconnect(const Certs& certs, int idle, double seconds) {
  Server srv(certs, false);
  asio::io_context cio;
  std::vector<std::unique_ptr<Tcp::socket>> holders;
  for (int i = 0; i < idle; ++i) {
    auto s = std::make_unique<Tcp::socket>(cio);
    s->open(Tcp::v4());
    s->bind(at("127.0.0." + std::to_string(2 + i), 0));
    boost::system::error_code ec;
    s->connect(at("127.0.0.1", srv.port()), ec);
    holders.push_back(std::move(s));
  }
  std::atomic<bool> run{true};
  std::atomic<long> connects{0};
  std::thread loop([&] {
    while (run) {
      Tcp::socket s(cio);
      boost::system::error_code ec;
      s.open(Tcp::v4(), ec);
      s.bind(at("127.0.0.200", 0), ec);
      s.connect(at("127.0.0.1", srv.port()), ec);
      if (!ec) ++connects;
      s.close(ec);
    }
  });
  const double cpu0 = srv.cpu_s();
  // A real peer's copy, sent while the loop runs.
  asio::io_context pio;
  SteadyClock clock;
  auto pcfg = certs.config("head01");
  pcfg.listen_host.clear();
  pcfg.peers = {{"head02", Guid{2}, "127.0.0.1", srv.port()}};
  PeerChannel peer(pio, pcfg, clock, [](FrameKind, const CopyMeta&, std::string_view, const std::string&) { return Verdict{}; });
  if (auto st = peer.start(); !st.ok()) throw std::runtime_error(st.error().message);
  peer.set_outbound(true);
  CopyMeta m;
  m.from = "head01";
  m.master_guid = Guid{1};
  m.generation = 1;
  peer.send(FrameKind::Guid2Lid, m, "0x0002c90300000001 1 1\n");
  const auto t0 = Steady::now();
  double arrived_ms = -1;
  while (Steady::now() - t0 < std::chrono::duration<double>(seconds)) {
    pio.run_one_for(std::chrono::milliseconds(10));
    if (arrived_ms < 0 && srv.copies > 0) arrived_ms = std::chrono::duration<double>(Steady::now() - t0).count() * 1000;
  }
  run = false;
  loop.join();
  const double cpu = srv.cpu_s() - cpu0;
  srv.halt();
  const auto& c = srv.ch->counters();
  const std::uint64_t refused = c.rejected_busy + c.rejected_source_limit + c.rejected_rate;
  std::printf("idle holders %d, reconnect loop %.1f s: client connects %ld, server accepts %llu + refused %llu "
              "(%.0f a second), server CPU %.1f %% of a core; real peer's copy %s",
              idle, seconds, connects.load(), static_cast<unsigned long long>(c.accepted),
              static_cast<unsigned long long>(refused), static_cast<double>(c.accepted + refused) / seconds,
              cpu / seconds * 100, arrived_ms < 0 ? "did not arrive\n" : "arrived after ");
  if (arrived_ms >= 0) std::printf("%.0f ms\n", arrived_ms);
}

}  // namespace

int main(int argc, char** argv) {
  int attempts = 20, idle = 8;
  double seconds = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--attempts")) attempts = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--idle")) idle = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--seconds")) seconds = std::atof(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: bench_channel [--attempts N] [--idle I] [--seconds S]\n");
      return 2;
    }
  }
  try {
    Certs certs;
    std::printf("%-22s %-10s %8s %10s %18s %12s\n", "server", "client", "attempts", "completed", "server CPU ms/each",
                "wall ms/each");
    handshakes<DefaultGroupsServer>(certs, "OpenSSL default groups", "ffdhe8192", attempts);
    handshakes<DefaultGroupsServer>(certs, "OpenSSL default groups", "X25519", attempts);
    handshakes<Server>(certs, "PeerChannel", "ffdhe8192", attempts);
    handshakes<Server>(certs, "PeerChannel", "X25519", attempts);
    reconnect(certs, idle, seconds);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_channel: %s\n", e.what());
    return 1;
  }
  return 0;
}
