// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/control/server.hpp"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/resource.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <filesystem>
#include <map>
#include <unordered_map>
#include <utility>

#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <spdlog/spdlog.h>

namespace smha::control {

namespace asio = boost::asio;
using Local = asio::local::stream_protocol;
using nlohmann::json;

namespace {

std::string errno_text(int err) { return std::strerror(err); }

Error fail(Errc code, std::string message) { return make_error(code, std::move(message)); }

Result<gid_t> lookup_group(const std::string& name) {
  std::vector<char> buf(16 * 1024);
  struct group gr {};
  struct group* found = nullptr;
  for (;;) {
    int rc = getgrnam_r(name.c_str(), &gr, buf.data(), buf.size(), &found);
    if (rc == ERANGE && buf.size() < (1u << 22)) {
      buf.resize(buf.size() * 2);
      continue;
    }
    if (rc != 0) return fail(Errc::Io, "cannot look up group '" + name + "': " + errno_text(rc));
    if (found == nullptr) {
      return fail(Errc::NotFound, "control socket group '" + name +
                                 "' does not exist; create it (groupadd --system " + name +
                                 ") or configure another group");
    }
    return gr.gr_gid;
  }
}

// Creates `dir` if missing, then checks it and sets its mode via an
// O_NOFOLLOW descriptor so a swapped-in symlink cannot redirect the chmod.
// Its group is left alone: the directory may hold the sockets of several
// instances, each with a group of its own (smhad@NAME), so each socket
// carries its group and the directory only has to let every one through.
Status prepare_directory(const std::string& dir, mode_t mode) {
  if (::mkdir(dir.c_str(), mode) != 0 && errno != EEXIST) {
    return fail(Errc::Io, "cannot create socket directory " + dir + ": " + errno_text(errno));
  }
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) {
    return fail(Errc::Io, "cannot stat socket directory " + dir + ": " + errno_text(errno));
  }
  if (S_ISLNK(st.st_mode)) return fail(Errc::Insecure, "socket directory " + dir + " is a symlink; refusing it");
  if (!S_ISDIR(st.st_mode)) return fail(Errc::Insecure, "socket directory " + dir + " is not a directory");
  if (st.st_uid != ::geteuid()) {
    return fail(Errc::Insecure, "socket directory " + dir + " is owned by uid " + std::to_string(st.st_uid) +
                                ", expected uid " + std::to_string(::geteuid()));
  }
  if (st.st_mode & S_IWOTH) return fail(Errc::Insecure, "socket directory " + dir + " is world-writable; refusing it");
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return fail(Errc::Io, "cannot open socket directory " + dir + ": " + errno_text(errno));
  Status status;
  if (::fchmod(fd, mode) != 0) status = fail(Errc::Io, "cannot set mode of " + dir + ": " + errno_text(errno));
  ::close(fd);
  return status;
}

// True if something accepts connections on `path`.
bool socket_is_live(const std::string& path) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  bool live = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd);
  return live;
}

Status remove_stale_socket(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return Status::Ok();
    return fail(Errc::Io, "cannot stat " + path + ": " + errno_text(errno));
  }
  if (!S_ISSOCK(st.st_mode)) return fail(Errc::Conflict, path + " exists and is not a socket; refusing to remove it");
  if (socket_is_live(path)) return fail(Errc::Busy, "another server is already listening on " + path);
  if (::unlink(path.c_str()) != 0) return fail(Errc::Io, "cannot remove stale " + path + ": " + errno_text(errno));
  return Status::Ok();
}

}  // namespace

bool user_in_group_db(uid_t uid, gid_t gid) {
  std::vector<char> buf(16 * 1024);
  struct passwd pw {};
  struct passwd* found = nullptr;
  while (getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) == ERANGE && buf.size() < (1u << 22)) {
    buf.resize(buf.size() * 2);
  }
  if (found == nullptr) return false;
  if (pw.pw_gid == gid) return true;
  int count = 64;
  std::vector<gid_t> groups(static_cast<std::size_t>(count));
  while (getgrouplist(pw.pw_name, pw.pw_gid, groups.data(), &count) < 0) {
    if (count <= static_cast<int>(groups.size())) return false;  // defensive: no progress
    groups.resize(static_cast<std::size_t>(count));
  }
  groups.resize(static_cast<std::size_t>(count));
  return std::find(groups.begin(), groups.end(), gid) != groups.end();
}

std::size_t effective_max_clients(std::size_t configured, std::size_t nofile) {
  std::size_t limit = configured;
  if (nofile != 0) limit = std::min(limit, nofile > kReservedFds ? nofile - kReservedFds : std::size_t{1});
  return std::max<std::size_t>(limit, 1);
}

bool authorized(const PeerCredentials& peer, Access access, gid_t group,
                const GroupMembership& membership) {
  if (peer.uid == 0) return true;
  if (access == Access::Mutating) return false;
  if (peer.gid == group) return true;
  return membership && membership(peer.uid, group);
}

// ---------------------------------------------------------------------------

class Responder::Sink {
 public:
  virtual ~Sink() = default;
  virtual void complete(Reply reply) = 0;
  virtual bool open() const = 0;
};

Responder& Responder::operator=(Responder&& other) noexcept {
  if (this != &other) {
    if (!done_ && sink_) sink_->complete(Reply::failure(ResultCode::Error, "the method finished without an answer"));
    sink_ = std::move(other.sink_);
    done_ = other.done_;
    other.done_ = true;
  }
  return *this;
}

Responder::~Responder() {
  if (!done_ && sink_) sink_->complete(Reply::failure(ResultCode::Error, "the method finished without an answer"));
}

void Responder::operator()(Reply reply) {
  if (done_ || !sink_) return;
  done_ = true;
  auto sink = std::move(sink_);
  sink->complete(std::move(reply));
}

bool Responder::client_connected() const { return sink_ && !done_ && sink_->open(); }

// ---------------------------------------------------------------------------

namespace {
struct Method {
  Access access;
  SyncHandler sync;
  AsyncHandler async;
  std::vector<std::string> params;  // the "params" keys it takes
};
class Connection;
}  // namespace

class ControlServer::Impl : public std::enable_shared_from_this<ControlServer::Impl> {
 public:
  Impl(asio::io_context& io, ServerOptions options)
      : io_(io), options_(std::move(options)), acceptor_(io), retry_timer_(io) {
    if (!options_.logger) {
      options_.logger = spdlog::get("ctl");
      if (!options_.logger) options_.logger = spdlog::default_logger()->clone("ctl");
    }
    if (!options_.membership) options_.membership = user_in_group_db;
  }

  Status add(const std::string& name, Method method) {
    auto valid = parse_request(json{{"method", name}}.dump());
    if (!valid) return fail(Errc::BadRequest, "invalid method name '" + name + "'");
    if (name == method::kVersion || name == method::kListMethods || methods_.count(name)) {
      return fail(Errc::Conflict, "method '" + name + "' is already registered");
    }
    methods_.emplace(name, std::move(method));
    return Status::Ok();
  }

  Status start();
  void stop();
  void accept();
  Reply dispatch_builtin(const std::string& name) const;
  // Empty if a connection from `peer` may be admitted now, else why not;
  // `limit` gets the limit that refused it.
  std::string refusal(const PeerCredentials& peer, std::size_t& limit) const;
  void forget(Connection* conn, uid_t uid);

  asio::io_context& io_;
  ServerOptions options_;
  Local::acceptor acceptor_;
  asio::steady_timer retry_timer_;
  gid_t gid_ = 0;
  bool listening_ = false;
  std::size_t max_clients_ = 0;  // in force, set by start()
  bool accept_failing_ = false;  // CTL_ACCEPT_FAILED logged; not again until an accept succeeds
  std::map<std::string, Method> methods_;
  std::unordered_map<Connection*, std::weak_ptr<Connection>> connections_;
  std::unordered_map<uid_t, std::size_t> per_uid_;
};

namespace {

// One client connection. Reads continuously (so a hang-up is noticed even
// while an async method runs), queues complete frames (at most kMaxQueued and
// kMaxQueuedRequestBytes, then stops reading: back-pressure), and answers them
// one at a time, in order; the next request waits until the previous reply is
// written, so a connection holds at most one reply.
class Connection final : public Responder::Sink, public std::enable_shared_from_this<Connection> {
 public:
  static constexpr std::size_t kMaxQueued = 16;
  using IdleClock = asio::steady_timer::clock_type;

  Connection(std::shared_ptr<ControlServer::Impl> server, Local::socket socket, PeerCredentials peer)
      : server_(std::move(server)),
        socket_(std::move(socket)),
        idle_timer_(server_->io_),
        write_timer_(server_->io_),
        peer_(peer) {}

  void start() {
    log().debug("CTL_CONNECT uid={} gid={} pid={}", peer_.uid, peer_.gid, peer_.pid);
    process_queue();
  }

  void close() {
    if (closed_) return;
    closed_ = true;
    boost::system::error_code ignored;
    socket_.shutdown(Local::socket::shutdown_both, ignored);
    socket_.close(ignored);
    idle_timer_.cancel();
    write_timer_.cancel();
    // Give the memory back now, not when the last handler lets go of us.
    std::deque<std::string>().swap(queue_);
    queued_bytes_ = 0;
    decoder_ = FrameDecoder();
    std::string().swap(out_);
    server_->forget(this, peer_.uid);
  }

  // Sends the reply to the request in progress; ignored when none is (a
  // duplicate or late completion) or the connection has closed.
  void complete(Reply reply) override {
    if (closed_ || !busy_ || writing_) return;
    reply.id = std::move(current_id_);
    current_id_.reset();
    send(encode_reply(reply), /*then_close=*/false);
  }
  bool open() const override { return !closed_ && !eof_; }

 private:
  spdlog::logger& log() { return *server_->options_.logger; }

  // Starts the next queued request; when there is none, answers a pending
  // framing error and closes, closes after the client's EOF, or waits (idle
  // timer armed). Keeps a read outstanding unless back-pressured.
  void process_queue() {
    if (closed_ || busy_) return;
    if (!queue_.empty()) {
      std::string frame = std::move(queue_.front());
      queue_.pop_front();
      queued_bytes_ -= frame.size();
      busy_ = true;
      dispatch(frame);
    } else if (frame_error_) {
      busy_ = true;
      send(encode_reply(bad_request_reply(*frame_error_)), /*then_close=*/true);
      return;
    } else if (eof_) {
      close();
      return;
    } else {
      arm_idle_timer();
    }
    maybe_read();
  }

  void maybe_read() {
    // The unfinished frame is bounded by the decoder (kMaxRequestBytes).
    if (closed_ || reading_ || eof_ || frame_error_ || queue_.size() >= kMaxQueued ||
        queued_bytes_ >= kMaxQueuedRequestBytes)
      return;
    reading_ = true;
    socket_.async_read_some(asio::buffer(buffer_), [self = shared_from_this()](auto ec, std::size_t n) {
      self->reading_ = false;
      self->on_read(ec, n);
    });
  }

  void on_read(const boost::system::error_code& ec, std::size_t n) {
    if (closed_) return;
    if (ec) {
      if (decoder_.pending() > 0) {
        log().debug("CTL_DISCONNECT_MID_REQUEST uid={} pid={} pending_bytes={}", peer_.uid, peer_.pid,
                    decoder_.pending());
      }
      if (ec != asio::error::eof) {
        close();
        return;
      }
      eof_ = true;  // finish what was asked, then close
      process_queue();
      return;
    }
    auto frames = decoder_.feed(std::string_view(buffer_.data(), n));
    if (!frames) {
      log().warn("CTL_BAD_FRAME uid={} pid={} error=\"{}\"", peer_.uid, peer_.pid, frames.error().message);
      frame_error_ = frames.error();
    } else {
      for (auto& f : *frames) {
        queued_bytes_ += f.size();
        queue_.push_back(std::move(f));
      }
    }
    process_queue();
    maybe_read();
  }

  // The idle deadline moves with every completed request, but the timer is
  // re-armed only when it fires (lazily), not per request: moving the
  // earliest timer costs a timerfd update, which would be paid per request.
  void arm_idle_timer() {
    idle_since_ = IdleClock::now();
    if (!idle_armed_) start_idle_wait(idle_since_ + server_->options_.idle_timeout);
  }

  void start_idle_wait(IdleClock::time_point when) {
    idle_armed_ = true;
    idle_timer_.expires_at(when);
    idle_timer_.async_wait([weak = weak_from_this()](const boost::system::error_code& ec) {
      if (auto self = weak.lock()) self->on_idle_timer(ec);
    });
  }

  void on_idle_timer(const boost::system::error_code& ec) {
    idle_armed_ = false;
    // A request in progress re-arms when it completes; a reply being written is
    // bounded by the write deadline instead.
    if (ec || closed_ || busy_) return;
    auto deadline = idle_since_ + server_->options_.idle_timeout;
    if (IdleClock::now() < deadline) {
      start_idle_wait(deadline);
      return;
    }
    log().debug("CTL_IDLE_TIMEOUT uid={} pid={}", peer_.uid, peer_.pid);
    close();
  }

  void dispatch(const std::string& frame) {
    auto request = parse_request(frame);
    if (!request) {
      complete(bad_request_reply(request.error()));
      return;
    }
    current_id_ = request->id;
    const std::string& name = request->method;
    if (request->version && *request->version < kMinCompatibleVersion) {
      complete(Reply::failure(ResultCode::VersionMismatch,
                              "client protocol version " + std::to_string(*request->version) +
                                  " is older than the oldest supported, " +
                                  std::to_string(kMinCompatibleVersion),
                              json{{"protocol", kProtocolVersion}, {"min_compatible", kMinCompatibleVersion}}));
      return;
    }
    const auto& opts = server_->options_;
    bool builtin = name == method::kVersion || name == method::kListMethods;
    auto it = server_->methods_.find(name);
    if (!builtin && it == server_->methods_.end()) {
      complete(Reply::failure(ResultCode::Unsupported, "unknown method '" + name + "' (see list-methods)"));
      return;
    }
    Access access = builtin ? Access::ReadOnly : it->second.access;
    if (!authorized(peer_, access, server_->gid_, opts.membership)) {
      log().warn("CTL_DENIED method={} access={} uid={} gid={} pid={}", name, to_string(access), peer_.uid,
                 peer_.gid, peer_.pid);
      complete(Reply::failure(ResultCode::Unauthorized,
                              access == Access::Mutating
                                  ? "method '" + name + "' requires root"
                                  : "method '" + name + "' requires root or membership of group " + opts.group));
      return;
    }
    if (auto st = check_params(name, request->params, builtin ? std::vector<std::string>{} : it->second.params);
        !st.ok()) {
      complete(bad_request_reply(st.error()));
      return;
    }
    if (builtin) {
      complete(server_->dispatch_builtin(name));
      return;
    }
    Call call{name, std::move(request->params), peer_};
    try {
      if (it->second.sync) {
        complete(it->second.sync(call));
      } else {
        // A copy: the handler object must outlive this call even if the map changes.
        AsyncHandler handler = it->second.async;
        handler(call, Responder(shared_from_this()));
      }
    } catch (const std::exception& e) {
      log().error("CTL_METHOD_EXCEPTION method={} what=\"{}\"", name, e.what());
      complete(Reply::failure(ResultCode::Error, "method '" + name + "' failed: " + e.what()));
    }
  }

  // Writes one reply. A reply larger than kMaxReplyBytes (no client would
  // accept it) is replaced by an `error` reply saying so. The client must take
  // the whole reply within write_timeout, else the connection is closed.
  void send(std::string bytes, bool then_close) {
    if (bytes.size() > kMaxReplyBytes + 1) {
      log().warn("CTL_REPLY_TOO_LARGE uid={} pid={} bytes={} limit={}", peer_.uid, peer_.pid, bytes.size(),
                 kMaxReplyBytes);
      Reply too_large = Reply::failure(ResultCode::Error, "reply too large (" + std::to_string(bytes.size()) +
                                                              " bytes, limit " + std::to_string(kMaxReplyBytes) +
                                                              "); ask for less");
      bytes = encode_reply(too_large);
    }
    writing_ = true;
    out_ = std::move(bytes);
    write_timer_.expires_after(server_->options_.write_timeout);
    write_timer_.async_wait([weak = weak_from_this()](const boost::system::error_code& ec) {
      auto self = weak.lock();
      if (ec || !self || self->closed_ || !self->writing_) return;
      self->log().warn("CTL_WRITE_TIMEOUT uid={} pid={} unsent_reply_bytes={} timeout_ms={}", self->peer_.uid,
                       self->peer_.pid, self->out_.size(), self->server_->options_.write_timeout.count());
      self->close();
    });
    asio::async_write(socket_, asio::buffer(out_),
                      [self = shared_from_this(), then_close](const boost::system::error_code& ec, std::size_t) {
                        self->writing_ = false;
                        self->busy_ = false;
                        self->write_timer_.cancel();
                        std::string().swap(self->out_);
                        if (ec || then_close) {
                          self->close();
                          return;
                        }
                        self->process_queue();
                      });
  }

  std::shared_ptr<ControlServer::Impl> server_;
  Local::socket socket_;
  asio::steady_timer idle_timer_;
  asio::steady_timer write_timer_;
  PeerCredentials peer_;
  FrameDecoder decoder_;
  std::array<char, 4096> buffer_{};
  std::deque<std::string> queue_;
  std::size_t queued_bytes_ = 0;  // sum of queue_'s frame sizes
  std::optional<Error> frame_error_;
  std::optional<json> current_id_;
  std::string out_;
  IdleClock::time_point idle_since_;
  bool idle_armed_ = false;
  bool busy_ = false;      // a request is being answered
  bool writing_ = false;   // its reply is being written
  bool reading_ = false;   // a read is outstanding
  bool eof_ = false;       // the client will send nothing more
  bool closed_ = false;
};

}  // namespace

Reply ControlServer::Impl::dispatch_builtin(const std::string& name) const {
  if (name == method::kVersion) {
    return Reply::ok(json{{"protocol", kProtocolVersion},
                          {"min_compatible", kMinCompatibleVersion},
                          {"server", options_.server_name}});
  }
  json list = json::array();
  list.push_back({{"name", method::kListMethods},
                  {"access", std::string(to_string(Access::ReadOnly))},
                  {"params", json::array()}});
  list.push_back(
      {{"name", method::kVersion}, {"access", std::string(to_string(Access::ReadOnly))}, {"params", json::array()}});
  for (const auto& [n, m] : methods_)
    list.push_back({{"name", n}, {"access", std::string(to_string(m.access))}, {"params", m.params}});
  std::sort(list.begin(), list.end(), [](const json& a, const json& b) { return a["name"] < b["name"]; });
  return Reply::ok(json{{"methods", list}});
}

Status ControlServer::Impl::start() {
  if (listening_) return fail(Errc::Conflict, "control server already started on " + options_.socket_path);
  auto gid = lookup_group(options_.group);
  if (!gid) return gid.error();
  gid_ = *gid;

  const std::string& path = options_.socket_path;
  if (path.empty() || path.size() >= sizeof(sockaddr_un::sun_path)) {
    return fail(Errc::Invalid, "socket path '" + path + "' is empty or longer than " +
                               std::to_string(sizeof(sockaddr_un::sun_path) - 1) + " bytes");
  }
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  if (auto st = prepare_directory(dir, options_.dir_mode); !st) return st;
  if (auto st = remove_stale_socket(path); !st) return st;

  boost::system::error_code ec;
  acceptor_.open(Local(), ec);
  if (!ec) acceptor_.bind(Local::endpoint(path), ec);
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  auto undo = [&](const std::string& what) {
    boost::system::error_code ignored;
    acceptor_.close(ignored);
    ::unlink(path.c_str());
    return fail(Errc::Io, what);
  };
  if (ec) return undo("cannot listen on " + path + ": " + ec.message());
  if (::chown(path.c_str(), static_cast<uid_t>(-1), gid_) != 0) {
    return undo("cannot set group of " + path + ": " + errno_text(errno));
  }
  if (::chmod(path.c_str(), options_.socket_mode) != 0) {
    return undo("cannot set mode of " + path + ": " + errno_text(errno));
  }
  struct rlimit rl {};
  std::size_t nofile = 0;
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) nofile = rl.rlim_cur;
  max_clients_ = effective_max_clients(options_.max_clients, nofile);
  if (max_clients_ < options_.max_clients) {
    options_.logger->warn("CTL_CLIENT_LIMIT_CLAMPED configured={} in_force={} rlimit_nofile={} reserved_fds={}",
                          options_.max_clients, max_clients_, nofile, kReservedFds);
  }
  listening_ = true;
  options_.logger->info("CTL_LISTEN path={} group={} mode={:o} max_clients={} per_uid={} root_reserve={}", path,
                        options_.group, options_.socket_mode, max_clients_, options_.max_clients_per_uid,
                        std::min(options_.root_reserve, max_clients_));
  accept();
  return Status::Ok();
}

void ControlServer::Impl::accept() {
  acceptor_.async_accept([self = shared_from_this()](const boost::system::error_code& ec, Local::socket socket) {
    if (!self->listening_) return;
    if (ec) {
      if (ec == asio::error::operation_aborted) return;
      // EMFILE and friends: back off instead of spinning on a full fd table;
      // logged once per episode, not at every retry.
      if (!self->accept_failing_) self->options_.logger->warn("CTL_ACCEPT_FAILED error=\"{}\"", ec.message());
      self->accept_failing_ = true;
      self->retry_timer_.expires_after(std::chrono::milliseconds(100));
      self->retry_timer_.async_wait([self](const boost::system::error_code& tec) {
        if (!tec && self->listening_) self->accept();
      });
      return;
    }
    if (self->accept_failing_) self->options_.logger->info("CTL_ACCEPT_RECOVERED");
    self->accept_failing_ = false;
    ucred cred{};
    socklen_t len = sizeof(cred);
    boost::system::error_code ignored;
    std::size_t limit = 0;
    if (::getsockopt(socket.native_handle(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
      self->options_.logger->warn("CTL_PEERCRED_FAILED error=\"{}\"", errno_text(errno));
      socket.close(ignored);
    } else if (PeerCredentials peer{cred.pid, cred.uid, cred.gid}; !self->refusal(peer, limit).empty()) {
      std::string why = self->refusal(peer, limit);
      self->options_.logger->warn("CTL_TOO_MANY_CLIENTS limit={} uid={} pid={} reason=\"{}\"", limit, peer.uid,
                                  peer.pid, why);
      std::string reply = encode_reply(Reply::failure(ResultCode::Error, why));
      socket.non_blocking(true, ignored);
      socket.write_some(asio::buffer(reply), ignored);
      socket.close(ignored);
    } else {
      auto conn = std::make_shared<Connection>(self, std::move(socket), peer);
      self->connections_.emplace(conn.get(), conn);
      ++self->per_uid_[peer.uid];
      conn->start();
    }
    self->accept();
  });
}

std::string ControlServer::Impl::refusal(const PeerCredentials& peer, std::size_t& limit) const {
  const std::size_t total = connections_.size();
  limit = max_clients_;
  if (total >= max_clients_) return "too many clients (" + std::to_string(max_clients_) + ")";
  if (peer.uid == 0) return {};
  const std::size_t reserve = std::min(options_.root_reserve, max_clients_ - 1);
  limit = max_clients_ - reserve;
  if (total >= max_clients_ - reserve) {
    return "too many clients (" + std::to_string(max_clients_ - reserve) + " for users other than root)";
  }
  auto it = per_uid_.find(peer.uid);
  limit = options_.max_clients_per_uid;
  if (it != per_uid_.end() && it->second >= options_.max_clients_per_uid) {
    return "too many connections from uid " + std::to_string(peer.uid) + " (" +
           std::to_string(options_.max_clients_per_uid) + ")";
  }
  return {};
}

void ControlServer::Impl::forget(Connection* conn, uid_t uid) {
  if (connections_.erase(conn) == 0) return;
  auto it = per_uid_.find(uid);
  if (it != per_uid_.end() && --it->second == 0) per_uid_.erase(it);
}

void ControlServer::Impl::stop() {
  if (!listening_) return;
  listening_ = false;
  boost::system::error_code ignored;
  acceptor_.close(ignored);
  retry_timer_.cancel();
  struct stat st {};
  if (::lstat(options_.socket_path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) ::unlink(options_.socket_path.c_str());
  auto conns = connections_;
  for (auto& [ptr, weak] : conns) {
    if (auto c = weak.lock()) c->close();
  }
  connections_.clear();
  per_uid_.clear();
  options_.logger->info("CTL_STOPPED path={}", options_.socket_path);
}

// ---------------------------------------------------------------------------

ControlServer::ControlServer(asio::io_context& io, ServerOptions options)
    : impl_(std::make_shared<Impl>(io, std::move(options))) {}

ControlServer::~ControlServer() { impl_->stop(); }

Status ControlServer::register_method(const std::string& name, Access access, SyncHandler handler,
                                      std::vector<std::string> params) {
  return impl_->add(name, Method{access, std::move(handler), nullptr, std::move(params)});
}

Status ControlServer::register_async_method(const std::string& name, Access access, AsyncHandler handler,
                                            std::vector<std::string> params) {
  return impl_->add(name, Method{access, nullptr, std::move(handler), std::move(params)});
}

Status ControlServer::start() { return impl_->start(); }
void ControlServer::stop() { impl_->stop(); }
std::size_t ControlServer::connection_count() const { return impl_->connections_.size(); }
std::size_t ControlServer::max_clients() const {
  return impl_->max_clients_ != 0 ? impl_->max_clients_ : impl_->options_.max_clients;
}
const std::string& ControlServer::socket_path() const { return impl_->options_.socket_path; }

std::vector<std::pair<std::string, Access>> ControlServer::methods() const {
  std::vector<std::pair<std::string, Access>> out{{method::kListMethods, Access::ReadOnly},
                                                      {method::kVersion, Access::ReadOnly}};
  for (const auto& [n, m] : impl_->methods_) out.emplace_back(n, m.access);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace smha::control
