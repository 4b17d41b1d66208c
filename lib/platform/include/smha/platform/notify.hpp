// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// Notifier: every sd_notify(3) message smhad sends to systemd, in one place.
//
// The protocol: each call sends one datagram ("READY=1", "STATUS=...", ...) to
// the AF_UNIX socket named by $NOTIFY_SOCKET. Without $NOTIFY_SOCKET (not
// started by systemd, or Type= is not notify) every call is a no-op that
// returns false. Failures to send are never fatal: the return value says
// whether the datagram went out, nothing else changes.
//
// Built with SMHA_WITH_SYSTEMD (default) the calls go through libsystemd's
// sd_notify()/sd_watchdog_enabled(); built without, the same datagrams are sent
// by a small built-in implementation (path and abstract "@" sockets), so the
// behaviour is the same.
//
// The environment is read at each call (not cached) and left in place, so
// children (OpenSM, hooks) inherit NOTIFY_SOCKET; the unit's NotifyAccess=main
// makes systemd ignore anything they send.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace smha::platform {

class Notifier {
 public:
  // True if $NOTIFY_SOCKET is set (systemd expects notifications).
  bool enabled() const;

  // READY=1 (with STATUS= if `status` is not empty). Send once: after the
  // configuration is valid, the control socket is bound and the first poll
  // round finished.
  bool ready(std::string_view status = {});
  // STATUS=<line>: one line for `systemctl status`. Newlines and other control
  // characters in `line` are replaced by spaces (a newline would start another
  // notify field).
  bool status(std::string_view line);
  // WATCHDOG=1: call from the event loop every watchdog_interval().
  bool watchdog();
  // RELOADING=1 on SIGHUP; follow with ready() when the reload is done.
  bool reloading();
  // STOPPING=1 when shutdown begins.
  bool stopping();
  // ERRNO=<error> (with STATUS= if not empty): why smhad is about to fail.
  bool error_number(int error, std::string_view status = {});

  // How often to send WATCHDOG=1: half of WatchdogSec (WATCHDOG_USEC), or
  // nullopt if the watchdog is not enabled for this process (WATCHDOG_PID
  // names another process, or WATCHDOG_USEC is unset or invalid).
  static std::optional<std::chrono::microseconds> watchdog_interval();

 private:
  bool send(const std::string& message);
};

// The one-line role summary used for STATUS=, e.g.
// "MASTER; peer head02 STANDBY prio 1". An empty `peer` gives "MASTER; no peer".
std::string role_status_line(std::string_view role, std::string_view peer,
                             std::string_view peer_state, int peer_priority);

}  // namespace smha::platform
