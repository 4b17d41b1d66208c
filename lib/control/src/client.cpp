// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/control/client.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace smha::control {
namespace {

using Clock = std::chrono::steady_clock;

int remaining_ms(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<long long>(left, 1'000'000));
}

enum class Wait { Ready, Timeout, Interrupted };

// Waits until fd is ready for `events` or the deadline passes.
Wait wait_ready(int fd, short events, Clock::time_point deadline,
                const volatile std::sig_atomic_t* interrupt = nullptr) {
  for (;;) {
    if (interrupt && *interrupt) return Wait::Interrupted;
    pollfd p{fd, events, 0};
    int rc = ::poll(&p, 1, remaining_ms(deadline));
    if (rc > 0) return Wait::Ready;
    if (rc == 0) return Wait::Timeout;
    if (errno != EINTR) return Wait::Ready;  // let the following read/write report the error
    if (interrupt && *interrupt) return Wait::Interrupted;
  }
}

}  // namespace

Result<ControlClient> ControlClient::connect(const std::string& socket_path, std::chrono::milliseconds timeout) {
  sockaddr_un addr{};
  if (socket_path.empty() || socket_path.size() >= sizeof(addr.sun_path)) {
    return make_error(kErrUnreachable, "invalid socket path '" + socket_path + "'");
  }
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return make_error(kErrIo, std::string("socket(): ") + std::strerror(errno));
  // A blocking AF_UNIX connect waits for backlog room for at most SO_SNDTIMEO.
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(timeout.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((timeout.count() % 1000) * 1000);
  if (tv.tv_sec == 0 && tv.tv_usec == 0) tv.tv_usec = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, socket_path.c_str(), socket_path.size() + 1);
  int rc;
  do {
    rc = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    int err = errno;
    ::close(fd);
    std::string where = "cannot reach smhad at " + socket_path + ": ";
    switch (err) {
      case ENOENT:
      case ECONNREFUSED:
      case ENOTDIR:
        return make_error(kErrUnreachable, where + std::strerror(err));
      case EAGAIN:
      case EINPROGRESS:
      case ETIMEDOUT:
        return make_error(kErrUnreachable, where + "connect timed out");
      case EACCES:
      case EPERM:
        return make_error(kErrPermission, "permission denied on " + socket_path +
                                              " (root or membership of its group is required)");
      default:
        return make_error(kErrIo, where + std::strerror(err));
    }
  }
  timeval zero{};
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &zero, sizeof(zero));
  return ControlClient(fd, socket_path);
}

ControlClient::ControlClient(ControlClient&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      path_(std::move(other.path_)),
      decoder_(std::move(other.decoder_)),
      frames_(std::move(other.frames_)),
      next_id_(other.next_id_),
      interrupt_(other.interrupt_) {}

ControlClient& ControlClient::operator=(ControlClient&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = std::exchange(other.fd_, -1);
    path_ = std::move(other.path_);
    decoder_ = std::move(other.decoder_);
    frames_ = std::move(other.frames_);
    next_id_ = other.next_id_;
    interrupt_ = other.interrupt_;
  }
  return *this;
}

ControlClient::~ControlClient() { close(); }

void ControlClient::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Status ControlClient::send_raw(std::string_view bytes, std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  while (!bytes.empty()) {
    if (fd_ < 0) return make_error(kErrIo, "connection already failed");
    ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      bytes.remove_prefix(static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      const Wait w = wait_ready(fd_, POLLOUT, deadline, interrupt_);
      if (w != Wait::Ready) {
        close();
        if (w == Wait::Interrupted) return make_error(kErrInterrupted, "interrupted");
        return make_error(kErrTimeout, "timed out sending to " + path_);
      }
      continue;
    }
    int err = errno;
    if (err == EPIPE || err == ECONNRESET) {
      // The server may have answered before closing (e.g. "too many clients"):
      // keep what it sent, so the caller can read that answer.
      char buf[16 * 1024];
      ssize_t got;
      while ((got = ::recv(fd_, buf, sizeof buf, MSG_DONTWAIT)) > 0) {
        auto frames = decoder_.feed(std::string_view(buf, static_cast<std::size_t>(got)));
        if (!frames) break;
        for (auto& f : *frames) frames_.push_back(std::move(f));
      }
    }
    close();
    if (err == EPIPE || err == ECONNRESET) return make_error(kErrClosed, "smhad closed the connection on " + path_);
    return make_error(kErrIo, "send to " + path_ + ": " + std::strerror(err));
  }
  return Status::Ok();
}

Result<Reply> ControlClient::read_reply(std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  char buf[16 * 1024];
  while (frames_.empty()) {
    if (fd_ < 0) return make_error(kErrIo, "connection already failed");
    ssize_t n = ::recv(fd_, buf, sizeof(buf), MSG_DONTWAIT);
    if (n > 0) {
      auto frames = decoder_.feed(std::string_view(buf, static_cast<std::size_t>(n)));
      if (!frames) {
        close();
        return make_error(kErrProtocol, "reply from " + path_ + ": " + frames.error().message);
      }
      for (auto& f : *frames) frames_.push_back(std::move(f));
      continue;
    }
    if (n == 0) {
      close();
      return make_error(kErrClosed, "smhad closed the connection on " + path_ + " without replying");
    }
    if (errno == EINTR) {
      if (interrupt_ && *interrupt_) {
        close();
        return make_error(kErrInterrupted, "interrupted");
      }
      continue;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      const Wait w = wait_ready(fd_, POLLIN, deadline, interrupt_);
      if (w == Wait::Interrupted) {
        close();
        return make_error(kErrInterrupted, "interrupted");
      }
      if (w == Wait::Timeout) {
        close();
        return make_error(kErrTimeout, "no reply from smhad on " + path_ + " within " +
                                           std::to_string(timeout.count()) + " ms");
      }
      continue;
    }
    int err = errno;
    close();
    if (err == ECONNRESET) return make_error(kErrClosed, "smhad reset the connection on " + path_);
    return make_error(kErrIo, "recv from " + path_ + ": " + std::strerror(err));
  }
  std::string frame = std::move(frames_.front());
  frames_.pop_front();
  auto reply = parse_reply(frame);
  if (!reply) {
    close();
    return make_error(kErrProtocol, reply.error().message);
  }
  return reply;
}

Result<Reply> ControlClient::call(const std::string& method, nlohmann::json params,
                                  std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  Request req{method, std::move(params), nlohmann::json(next_id_++), kProtocolVersion};
  if (auto st = send_raw(encode_request(req), timeout); !st) {
    // Closed by the server, which answered first (a refusal): that answer.
    if (st.error().code == kErrClosed && !frames_.empty()) {
      std::string frame = std::move(frames_.front());
      frames_.pop_front();
      if (auto refusal = parse_reply(frame)) return refusal;
    }
    return st.error();
  }
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  auto reply = read_reply(std::max(left, std::chrono::milliseconds(0)));
  if (!reply) return reply;
  // A reply to a frame the server could not parse carries no id; otherwise it must match.
  if (reply->id && *reply->id != *req.id) {
    close();
    return make_error(kErrProtocol, "reply id " + reply->id->dump() + " does not match request id " + req.id->dump());
  }
  return reply;
}

}  // namespace smha::control
