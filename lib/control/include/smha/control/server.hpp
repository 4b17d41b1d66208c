// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// The control-socket server: a boost::asio AF_UNIX stream acceptor, a method
// registry and SO_PEERCRED authorisation. Single-threaded: every member
// function and every handler runs on the io_context's thread; no locks.
//
// Per connection the server reads NUL-terminated requests (protocol.hpp),
// answers them in order, one at a time, and keeps the connection for further
// requests. It closes a connection when the peer closes it, after
// `idle_timeout` without a complete request, after a frame larger than
// kMaxRequestBytes (answered `bad_request` first), when a reply is not taken
// by the client within `write_timeout`, or on stop(). A slow or malicious
// client never blocks the loop: all socket I/O is asynchronous.
//
// Memory and descriptors are bounded per connection and in total: at most
// `max_clients` connections (clamped below RLIMIT_NOFILE, leaving
// kReservedFds for the daemon's own files and for spawning OpenSM), at most
// `max_clients_per_uid` per non-root user, the last `root_reserve` slots for
// uid 0 only; per connection at most kMaxQueuedRequestBytes of unanswered
// requests (then the server stops reading) and one reply, itself capped at
// kMaxReplyBytes (a larger one is replaced by an `error` reply).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/logger.h>

#include "smha/control/protocol.hpp"
#include "smha/core/result.hpp"

namespace smha::control {

// Descriptors kept free for the daemon's own work (opensm.conf, the journal,
// the pipes of a new OpenSM, MAD ports) when the connection limit is derived
// from RLIMIT_NOFILE.
inline constexpr std::size_t kReservedFds = 64;
// Unanswered request bytes a connection may have queued before the server
// stops reading from it (back-pressure: the rest stays in the kernel).
inline constexpr std::size_t kMaxQueuedRequestBytes = kMaxRequestBytes;

// The connection limit in force for `configured` under a soft RLIMIT_NOFILE of
// `nofile` (0: unlimited): min(configured, nofile - kReservedFds), at least 1.
std::size_t effective_max_clients(std::size_t configured, std::size_t nofile);

// The peer's credentials as the kernel recorded them at connect() (SO_PEERCRED).
struct PeerCredentials {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
};

// Whether user `uid` is a member of group `gid` in the user database
// (primary group from getpwuid_r, supplementary groups from getgrouplist).
// Unknown uids are members of nothing.
using GroupMembership = std::function<bool(uid_t uid, gid_t gid)>;
bool user_in_group_db(uid_t uid, gid_t gid);

// The authorisation rule: Mutating methods are allowed for root only;
// ReadOnly methods for root, for peers whose primary gid is `group`, and for
// users `membership` says belong to `group`. Pure apart from `membership`.
bool authorized(const PeerCredentials& peer, Access access, gid_t group,
                const GroupMembership& membership);

// One decoded, authorised request as a handler sees it.
struct Call {
  std::string method;
  nlohmann::json params;  // always an object
  PeerCredentials peer;
};

// Completes an asynchronous call. Move-only; call it once, from the
// io_context's thread, whenever the operation finishes. It keeps the
// connection's state alive until then; the connection answers no further
// requests meanwhile. If the client has gone away the reply is dropped. If a
// Responder is destroyed without being called, the client gets an `error`
// reply so it never hangs.
class Responder {
 public:
  class Sink;  // private to the server
  explicit Responder(std::shared_ptr<Sink> sink) : sink_(std::move(sink)) {}
  Responder(Responder&& other) noexcept = default;
  Responder& operator=(Responder&& other) noexcept;
  Responder(const Responder&) = delete;
  Responder& operator=(const Responder&) = delete;
  ~Responder();

  void operator()(Reply reply);
  // False once the client has hung up or stopped sending (EOF), or the
  // server stopped: a long operation may give up early.
  bool client_connected() const;

 private:
  std::shared_ptr<Sink> sink_;
  bool done_ = false;
};

// Handlers may throw; the exception becomes an `error` reply naming the method.
using SyncHandler = std::function<Reply(const Call&)>;
using AsyncHandler = std::function<void(const Call&, Responder)>;

struct ServerOptions {
  std::string socket_path = kDefaultSocketPath;
  // Group owning the socket; its members may call ReadOnly methods. Must
  // exist (start() fails otherwise).
  std::string group = kDefaultGroup;
  // The socket's mode: who may connect at all. The directory's mode lets
  // everyone through (0755, root's): it may hold the sockets of several
  // instances with different groups (smhad@NAME), and `smctl status --all`
  // lists it; each socket's group and mode decide who connects.
  mode_t socket_mode = 0660;
  mode_t dir_mode = 0755;
  // Close a connection that has not completed a request for this long.
  std::chrono::milliseconds idle_timeout{30'000};
  // Further connections are answered `error` and closed. The limit in force
  // is min(max_clients, RLIMIT_NOFILE - kReservedFds) (effective_max_clients).
  std::size_t max_clients = 128;
  // Connections one non-root uid may hold at once.
  std::size_t max_clients_per_uid = 16;
  // Of the max_clients slots, this many are kept for uid 0 (smctl as root
  // always gets in while other users hold every other slot).
  std::size_t root_reserve = 8;
  // A reply the client has not read completely within this time closes the
  // connection (a client that sends and never reads).
  std::chrono::milliseconds write_timeout{10'000};
  // Reported by the built-in `version` method, e.g. "smhad 0.1.0".
  std::string server_name = "smhad";
  // Logger "ctl" by default (spdlog::get("ctl"), else a clone of the default).
  std::shared_ptr<spdlog::logger> logger;
  // User-database lookup; user_in_group_db by default. Tests inject fakes.
  GroupMembership membership;
};

class ControlServer {
 public:
  ControlServer(boost::asio::io_context& io, ServerOptions options);
  ~ControlServer();  // stop()s
  ControlServer(const ControlServer&) = delete;
  ControlServer& operator=(const ControlServer&) = delete;

  // Registers a method that takes the "params" keys `params` (none by
  // default): a request with any other key is answered bad_request naming it
  // (check_params) and the handler is not called. Fails (code "conflict") if
  // the name is taken, including the built-ins, or ("bad_request") if it is
  // not a valid method name (protocol.hpp). May be called before or after start().
  Status register_method(const std::string& name, Access access, SyncHandler handler,
                         std::vector<std::string> params = {});
  Status register_async_method(const std::string& name, Access access, AsyncHandler handler,
                               std::vector<std::string> params = {});

  // Creates or checks the socket directory (must not be a symlink, must be
  // owned by this euid and not world-writable; then set to dir_mode, its
  // group left as it is), removes a stale socket (refuses if a server answers on it or if
  // the path is not a socket), binds, sets socket_mode and group, and starts
  // accepting. On failure nothing is listening and the error names the path
  // and the reason (codes "not_found" for an unknown group, "insecure" for an
  // unsafe directory, "conflict" or "busy" for what holds the socket path,
  // "invalid" for a bad path, "io" for a failed call).
  Status start();

  // Stops accepting, closes every connection (pending async calls see
  // client_connected() == false) and removes the socket file. Idempotent.
  void stop();

  std::size_t connection_count() const;
  // The connection limit in force (after start(): clamped by RLIMIT_NOFILE).
  std::size_t max_clients() const;
  const std::string& socket_path() const;
  // Registered method names with their access, built-ins included, sorted.
  std::vector<std::pair<std::string, Access>> methods() const;

  class Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace smha::control
