// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "flood.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>

namespace smha::bench {

namespace {

// A blocking TCP connection to 127.0.0.1:port with 2 s send/receive timeouts; -1 on failure.
int connect_loopback(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  timeval tv{2, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

ChannelFlood::ChannelFlood(std::vector<int> ports, int handshakers, int holders) {
  for (int port : ports) {
    for (int i = 0; i < handshakers; ++i) threads_.emplace_back([this, port] { handshaker(port); });
    for (int i = 0; i < holders; ++i) threads_.emplace_back([this, port] { holder(port); });
  }
}

ChannelFlood::~ChannelFlood() {
  stop_ = true;
  for (auto& t : threads_) t.join();
}

void ChannelFlood::handshaker(int port) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nullptr);
  SSL_CTX_set1_groups_list(ctx, "ffdhe8192");
  while (!stop_) {
    const int fd = connect_loopback(port);
    if (fd < 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      continue;
    }
    SSL* ssl = SSL_new(ctx);
    SSL_set_fd(ssl, fd);
    ++handshakes_;
    (void)SSL_connect(ssl);  // refused or not: the server did its share of the work
    SSL_free(ssl);
    ::close(fd);
  }
  SSL_CTX_free(ctx);
}

void ChannelFlood::holder(int port) {
  while (!stop_) {
    const int fd = connect_loopback(port);
    if (fd < 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      continue;
    }
    ++holds_;
    // Hold it, sending nothing, until the listener closes it; then at once again.
    pollfd p{fd, POLLIN, 0};
    while (!stop_) {
      if (::poll(&p, 1, 50) > 0) {
        char b[256];
        if (::recv(fd, b, sizeof b, 0) <= 0) break;
      }
    }
    ::close(fd);
  }
}

}  // namespace smha::bench
