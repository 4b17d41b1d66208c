// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// A minimal HTTP/1.x endpoint for Prometheus scrapes, bound to a loopback
// address only. Single-threaded on the caller's io_context; no locks.
//
// `GET /metrics` (or `HEAD`) answers 200 with the text `render()` returns,
// Content-Type `text/plain; version=0.0.4; charset=utf-8`. Any other path is
// 404, any other method 405. Every answer closes the connection (Connection:
// close). A request head larger than kMaxHeadBytes gets 431, one not complete
// within `request_timeout` is dropped, and beyond `max_connections` open
// connections a new one is closed at once. A slow client never blocks others.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <boost/asio/io_context.hpp>

#include "smha/core/result.hpp"

namespace smha::control {

struct MetricsHttpOptions {
  std::string address = "127.0.0.1";  // must be a loopback address
  std::uint16_t port = 0;              // 0: an ephemeral port (tests)
  std::chrono::milliseconds request_timeout{5000};
  std::size_t max_connections = 64;
};

class MetricsHttpServer {
 public:
  static constexpr std::size_t kMaxHeadBytes = 8192;

  MetricsHttpServer(boost::asio::io_context& io, MetricsHttpOptions options,
                    std::function<std::string()> render);
  ~MetricsHttpServer();  // stop()s
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  // Binds and listens. Errors: "bad_address" (not a loopback literal),
  // "bind" (naming address, port and the OS error). On error nothing listens.
  Status start();
  // Closes the listener and every open connection. Idempotent.
  void stop();
  // The bound port (useful with port 0), 0 before start().
  std::uint16_t port() const;
  std::size_t connection_count() const;

  class Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace smha::control
