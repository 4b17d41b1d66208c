// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// Synchronous control-socket client (smctl, tests, benchmarks). Plain
// blocking-with-deadline POSIX I/O; no io_context needed.
#pragma once

#include <chrono>
#include <csignal>
#include <cstdint>
#include <deque>
#include <string>

#include <nlohmann/json.hpp>

#include "smha/control/protocol.hpp"
#include "smha/core/result.hpp"

namespace smha::control {

// Error codes returned by ControlClient (Error::code).
// "cannot reach smhad": no socket, nobody listening, or connect timed out.
inline constexpr Errc kErrUnreachable = Errc::Unreachable;
// The socket or its directory is not accessible to this user (EACCES/EPERM).
inline constexpr Errc kErrPermission = Errc::Permission;
// Connected, but no complete reply within the timeout.
inline constexpr Errc kErrTimeout = Errc::Timeout;
// The server closed the connection before replying.
inline constexpr Errc kErrClosed = Errc::Closed;
// The reply was not a valid protocol message.
inline constexpr Errc kErrProtocol = Errc::Protocol;
// Any other socket error.
inline constexpr Errc kErrIo = Errc::Io;
// A signal set the interrupt flag (set_interrupt_flag) while waiting.
inline constexpr Errc kErrInterrupted = Errc::Interrupted;

class ControlClient {
 public:
  // Connects to `socket_path` within `timeout`. Errors: kErrUnreachable
  // (ENOENT, ECONNREFUSED, ENOTDIR, timeout), kErrPermission, kErrIo; the
  // message names the path.
  static Result<ControlClient> connect(const std::string& socket_path,
                                       std::chrono::milliseconds timeout = std::chrono::milliseconds(2000));

  ControlClient(ControlClient&& other) noexcept;
  ControlClient& operator=(ControlClient&& other) noexcept;
  ControlClient(const ControlClient&) = delete;
  ControlClient& operator=(const ControlClient&) = delete;
  ~ControlClient();

  // Sends one request and waits for its reply, the whole exchange bounded by
  // `timeout`. The client sets "id" (a counter) and "version" and checks the
  // reply's id. A reply with a result other than ok is still a Reply; the
  // Error cases are transport failures: kErrTimeout, kErrClosed,
  // kErrProtocol, kErrIo. After any Error the connection is unusable.
  Result<Reply> call(const std::string& method, nlohmann::json params = nlohmann::json::object(),
                     std::chrono::milliseconds timeout = std::chrono::milliseconds(10'000));

  // Sends raw bytes (tests: partial frames, garbage).
  Status send_raw(std::string_view bytes, std::chrono::milliseconds timeout = std::chrono::milliseconds(2000));
  // Reads one complete reply frame.
  Result<Reply> read_reply(std::chrono::milliseconds timeout);

  int fd() const { return fd_; }

  // While `flag` is non-zero after a signal interrupted a wait (EINTR), the
  // waiting call returns kErrInterrupted instead of waiting on; the connection
  // is then unusable. Install the handler without SA_RESTART. nullptr: off.
  void set_interrupt_flag(const volatile std::sig_atomic_t* flag) { interrupt_ = flag; }

 private:
  explicit ControlClient(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  void close();

  int fd_ = -1;
  std::string path_;
  FrameDecoder decoder_{kMaxReplyBytes};
  std::deque<std::string> frames_;  // complete frames not yet returned
  int64_t next_id_ = 1;
  const volatile std::sig_atomic_t* interrupt_ = nullptr;
};

}  // namespace smha::control
