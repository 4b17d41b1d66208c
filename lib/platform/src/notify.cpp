// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// The only file that talks to systemd's notification socket.
#include "smha/platform/notify.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#ifdef SMHA_WITH_SYSTEMD
#include <systemd/sd-daemon.h>
#endif

namespace smha::platform {
namespace {

std::string one_line(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  }
  return out;
}

#ifndef SMHA_WITH_SYSTEMD
// sd_notify(3)'s protocol without libsystemd: one datagram to $NOTIFY_SOCKET
// (a path, or an abstract name written with a leading '@').
bool send_datagram(const char* socket_name, const std::string& message) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::size_t len = std::strlen(socket_name);
  if (len == 0 || len >= sizeof(addr.sun_path)) return false;
  if (socket_name[0] != '/' && socket_name[0] != '@') return false;
  std::memcpy(addr.sun_path, socket_name, len);
  if (addr.sun_path[0] == '@') addr.sun_path[0] = '\0';
  const int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  const auto addr_len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + len);
  const ssize_t sent = ::sendto(fd, message.data(), message.size(), MSG_NOSIGNAL,
                                reinterpret_cast<const sockaddr*>(&addr), addr_len);
  ::close(fd);
  return sent == static_cast<ssize_t>(message.size());
}
#endif

}  // namespace

bool Notifier::enabled() const {
  const char* s = std::getenv("NOTIFY_SOCKET");
  return s != nullptr && *s != '\0';
}

bool Notifier::send(const std::string& message) {
  if (!enabled()) return false;
#ifdef SMHA_WITH_SYSTEMD
  return ::sd_notify(0, message.c_str()) > 0;
#else
  return send_datagram(std::getenv("NOTIFY_SOCKET"), message);
#endif
}

bool Notifier::ready(std::string_view status) {
  std::string msg = "READY=1";
  if (!status.empty()) msg += "\nSTATUS=" + one_line(status);
  return send(msg);
}

bool Notifier::status(std::string_view line) { return send("STATUS=" + one_line(line)); }

bool Notifier::watchdog() { return send("WATCHDOG=1"); }

bool Notifier::reloading() { return send("RELOADING=1"); }

bool Notifier::stopping() { return send("STOPPING=1"); }

bool Notifier::error_number(int error, std::string_view status) {
  std::string msg = "ERRNO=" + std::to_string(error);
  if (!status.empty()) msg += "\nSTATUS=" + one_line(status);
  return send(msg);
}

std::optional<std::chrono::microseconds> Notifier::watchdog_interval() {
  std::uint64_t usec = 0;
#ifdef SMHA_WITH_SYSTEMD
  if (::sd_watchdog_enabled(0, &usec) <= 0) return std::nullopt;
#else
  const char* pid = std::getenv("WATCHDOG_PID");
  if (pid != nullptr) {
    char* end = nullptr;
    errno = 0;
    const long value = std::strtol(pid, &end, 10);
    if (errno != 0 || end == pid || *end != '\0' || value != static_cast<long>(::getpid())) {
      return std::nullopt;
    }
  }
  const char* text = std::getenv("WATCHDOG_USEC");
  if (text == nullptr || *text == '\0') return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const unsigned long long value = std::strtoull(text, &end, 10);
  if (errno != 0 || *end != '\0' || text[0] == '-') return std::nullopt;
  usec = value;
#endif
  if (usec == 0) return std::nullopt;
  return std::chrono::microseconds(usec / 2);
}

std::string role_status_line(std::string_view role, std::string_view peer,
                             std::string_view peer_state, int peer_priority) {
  std::string line(role);
  if (peer.empty()) return line + "; no peer";
  line += "; peer ";
  line += peer;
  line += ' ';
  line += peer_state;
  line += " prio " + std::to_string(peer_priority);
  return one_line(line);
}

}  // namespace smha::platform
