// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// A minimal HTTP/1.x endpoint for Prometheus scrapes, bound to a loopback
// address only, on Boost.Beast's parser and serializer. Single-threaded on the
// caller's io_context; no locks.
//
// `GET /metrics` (or `HEAD`) answers 200 with the text `render()` returns,
// Content-Type `text/plain; version=0.0.4; charset=utf-8`. Any other path is
// 404, any other method 405, a request Beast cannot parse (or one with a body)
// 400, a request head larger than kMaxHeadBytes 431. Every answer closes the
// connection (Connection: close).
//
// Any local user can connect, so the listener is built to keep scrapes
// working while one client holds many connections open:
// - a deadline for the whole request head (`request_timeout` from the accept,
//   not per byte), and one for the whole answer (`write_timeout`); a
//   connection past either is closed;
// - at most `max_connections` open connections (clamped to half of
//   RLIMIT_NOFILE - kReservedFds, leaving the rest to the control socket and
//   the daemon's files). A connection arriving when the table is full is kept
//   and the OLDEST connection still sending its request head is closed to make
//   room (the oldest of all if none is). A scrape sends its request at once,
//   so it is answered before it could become the oldest; a client that holds
//   many unfinished requests only displaces its own;
// - a connection is never closed at once on arrival (that invites an
//   immediate reconnect: the accept-then-close spin): below the cap a held
//   connection costs nothing until its deadline;
// - a failed accept (EMFILE, ENFILE, ENOBUFS) pauses accepting for 100 ms
//   instead of retrying at once; logged once per episode.
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
  // From the accept to the end of the request head.
  std::chrono::milliseconds request_timeout{3000};
  // For the client to take the whole answer.
  std::chrono::milliseconds write_timeout{5000};
  std::size_t max_connections = 1024;
};

// Counters since start() (tests and the benchmark read them).
struct MetricsHttpStats {
  std::uint64_t accepted = 0;       // connections accepted
  std::uint64_t answered = 0;       // answers written in full (any status)
  std::uint64_t evicted = 0;        // closed to make room for a newer connection
  std::uint64_t timed_out = 0;      // request head or answer past its deadline
  std::uint64_t accept_errors = 0;  // failed accepts, each followed by a 100 ms pause
};

class MetricsHttpServer {
 public:
  static constexpr std::size_t kMaxHeadBytes = 8192;

  MetricsHttpServer(boost::asio::io_context& io, MetricsHttpOptions options,
                    std::function<std::string()> render);
  ~MetricsHttpServer();  // stop()s
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  // Binds and listens. Errors: "config" (not a loopback literal),
  // "io" (naming address, port and the OS error). On error nothing listens.
  Status start();
  // Closes the listener and every open connection. Idempotent.
  void stop();
  // The bound port (useful with port 0), 0 before start().
  std::uint16_t port() const;
  std::size_t connection_count() const;
  // The connection cap in force (after the RLIMIT_NOFILE clamp), once started.
  std::size_t max_connections() const;
  const MetricsHttpStats& stats() const;

  class Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

// The connection cap in force for `configured` under a soft RLIMIT_NOFILE of
// `nofile` (0: unlimited): min(configured, (nofile - kReservedFds) / 2), at
// least 1.
std::size_t effective_max_metrics_connections(std::size_t configured, std::size_t nofile);

}  // namespace smha::control
