// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// smhad's Prometheus metrics (doc/control-protocol.md "metrics", doc/configuration.md
// "metrics"): a snapshot built from the status reply plus counters the status does
// not carry, the `metrics` control method, and the two optional outputs: an HTTP
// endpoint on a loopback address and a file in node_exporter's textfile directory,
// rewritten atomically every interval. Single-threaded (the io_context's thread).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <nlohmann/json.hpp>

#include "smha/config/config.hpp"
#include "smha/control/metrics.hpp"
#include "smha/control/metrics_http.hpp"
#include "smha/control/server.hpp"
#include "smha/os/file_system.hpp"
#include "smha/peer/continuity.hpp"
#include "smha/head/failover_stats.hpp"
#include "smha/head/head_status.hpp"
#include "smha/service/service.hpp"

namespace smha::service {

// Builds the metrics snapshot from this head's status, the poller's
// statistics and the failover counters. Pure.
// The peer channel's part of the metrics (doc/continuity.md).
control::ContinuityMetrics continuity_metrics(const peer::Continuity& c);

control::MetricsSnapshot metrics_snapshot(const head::HeadStatus& status, const head::PollStats& polls,
                                          const head::FailoverStats& failovers);

class MetricsService {
 public:
  using Render = std::function<std::string()>;
  // `fs` must outlive this object; `render` produces the exposition text.
  MetricsService(boost::asio::io_context& io, config::MetricsSettings settings, os::FileSystem& fs,
                 Render render);
  ~MetricsService();

  // Registers "metrics" (read-only): data {"text": exposition text}, content type
  // in data.content_type.
  Status attach(control::ControlServer& server);
  // Starts the configured outputs: binds the HTTP endpoint (error "io" or
  // "config" naming the address; nothing else started then) and writes the
  // textfile as soon as the io_context runs and then every interval (a failed
  // write is logged once per change of error and retried at the next interval).
  // render() is first called from the io_context, never from start().
  Status start();
  void stop();
  // Writes the textfile once (also used by start()). Error "io" naming the path.
  Status write_textfile();
  std::uint16_t http_port() const { return http_ ? http_->port() : 0; }
  std::string textfile_path() const;

 private:
  void arm_textfile();

  boost::asio::io_context& io_;
  config::MetricsSettings settings_;
  os::FileSystem& fs_;
  Render render_;
  std::unique_ptr<control::MetricsHttpServer> http_;
  std::unique_ptr<boost::asio::steady_timer> timer_;
  bool textfile_failing_ = false;
};

}  // namespace smha::service
