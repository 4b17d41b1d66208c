// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// SystemdReporter: every sd_notify message smhad sends, through
// platform::Notifier (doc/systemd.md): READY=1 once, STATUS= on change,
// WATCHDOG=1 from the event loop, RELOADING/STOPPING/ERRNO. Runs on the
// daemon's io_context thread.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "smha/platform/notify.hpp"

namespace smha::service {

// Sends smhad's notifications. Without $NOTIFY_SOCKET every call is a no-op.
// start() arms two timers on `io`:
//   - every `refresh`: if READY=1 was not sent and `is_ready()` is true, send
//     READY=1 with STATUS=status_line(); after that, send STATUS= whenever
//     status_line() differs from the last one sent;
//   - if the watchdog is enabled (WATCHDOG_USEC for this pid), WATCHDOG=1 every
//     Notifier::watchdog_interval() (half of WatchdogSec). Sent from the event
//     loop, so a stuck loop stops the pings and systemd restarts smhad.
class SystemdReporter {
 public:
  SystemdReporter(boost::asio::io_context& io, std::function<bool()> is_ready,
                  std::function<std::string()> status_line,
                  std::chrono::milliseconds refresh = std::chrono::milliseconds(100));
  ~SystemdReporter();
  SystemdReporter(const SystemdReporter&) = delete;
  SystemdReporter& operator=(const SystemdReporter&) = delete;

  void start();
  // Checks readiness and the status line now (e.g. after an engine event).
  void refresh();
  // RELOADING=1 before a reload; reloaded() sends READY=1 and the status after it.
  void reloading();
  void reloaded();
  // STOPPING=1 with STATUS=<why>; timers stop.
  void stopping(const std::string& why);
  // ERRNO=<error> with STATUS=<text>: start-up failed.
  void failed(int error, const std::string& text);

  bool ready_sent() const { return ready_sent_; }
  std::optional<std::chrono::microseconds> watchdog_interval() const { return watchdog_; }

 private:
  void arm_refresh();
  void arm_watchdog();

  platform::Notifier notifier_;
  std::function<bool()> is_ready_;
  std::function<std::string()> status_line_;
  std::chrono::milliseconds refresh_;
  std::optional<std::chrono::microseconds> watchdog_;
  bool ready_sent_ = false;
  bool stopped_ = false;
  std::string last_status_;
  boost::asio::steady_timer refresh_timer_;
  boost::asio::steady_timer watchdog_timer_;
};

}  // namespace smha::service
