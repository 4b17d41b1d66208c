// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/service/systemd_reporter.hpp"

#include "smha/platform/logging.hpp"

namespace smha::service {

SystemdReporter::SystemdReporter(boost::asio::io_context& io, std::function<bool()> is_ready,
                                 std::function<std::string()> status_line,
                                 std::chrono::milliseconds refresh)
    : is_ready_(std::move(is_ready)),
      status_line_(std::move(status_line)),
      refresh_(refresh),
      refresh_timer_(io),
      watchdog_timer_(io) {}

SystemdReporter::~SystemdReporter() {
  refresh_timer_.cancel();
  watchdog_timer_.cancel();
}

void SystemdReporter::start() {
  watchdog_ = platform::Notifier::watchdog_interval();
  if (watchdog_) {
    platform::module_logger("svc")->info("systemd watchdog: WATCHDOG=1 every {} ms",
                                         watchdog_->count() / 1000);
    notifier_.watchdog();
    arm_watchdog();
  }
  refresh();
  arm_refresh();
}

void SystemdReporter::arm_refresh() {
  refresh_timer_.expires_after(refresh_);
  refresh_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || stopped_) return;
    refresh();
    arm_refresh();
  });
}

void SystemdReporter::arm_watchdog() {
  watchdog_timer_.expires_after(*watchdog_);
  watchdog_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || stopped_) return;
    notifier_.watchdog();
    arm_watchdog();
  });
}

void SystemdReporter::refresh() {
  if (stopped_) return;
  if (!ready_sent_) {
    if (!is_ready_()) return;
    last_status_ = status_line_();
    ready_sent_ = true;
    notifier_.ready(last_status_);
    platform::module_logger("svc")->info("ready: {}", last_status_);
    return;
  }
  std::string line = status_line_();
  if (line == last_status_) return;
  last_status_ = std::move(line);
  notifier_.status(last_status_);
}

void SystemdReporter::reloading() {
  if (!stopped_) notifier_.reloading();
}

void SystemdReporter::reloaded() {
  if (stopped_) return;
  if (!ready_sent_) {  // not ready yet: the first READY=1 still comes from refresh()
    refresh();
    return;
  }
  last_status_ = status_line_();
  notifier_.ready(last_status_);
}

void SystemdReporter::stopping(const std::string& why) {
  if (stopped_) return;
  stopped_ = true;
  refresh_timer_.cancel();
  watchdog_timer_.cancel();
  notifier_.stopping();
  notifier_.status("stopping: " + why);
}

void SystemdReporter::failed(int error, const std::string& text) {
  notifier_.error_number(error, "failed: " + text);
}

}  // namespace smha::service
