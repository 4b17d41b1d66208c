// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/control/metrics_http.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>

#include <algorithm>
#include <list>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <spdlog/spdlog.h>

#include "smha/control/server.hpp"  // kReservedFds

namespace smha::control {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using asio::ip::tcp;
using boost::system::error_code;

namespace {

constexpr auto kAcceptRetry = std::chrono::milliseconds(100);
constexpr const char* kMetricsType = "text/plain; version=0.0.4; charset=utf-8";

bool is_http_error(const error_code& ec) {
  return ec.category() == make_error_code(http::error::header_limit).category();
}

}  // namespace

std::size_t effective_max_metrics_connections(std::size_t configured, std::size_t nofile) {
  std::size_t limit = configured;
  if (nofile != 0) limit = std::min(limit, nofile > kReservedFds ? (nofile - kReservedFds) / 2 : std::size_t{1});
  return std::max<std::size_t>(limit, 1);
}

class MetricsHttpServer::Impl : public std::enable_shared_from_this<MetricsHttpServer::Impl> {
 public:
  class Conn;
  using Conns = std::list<std::shared_ptr<Conn>>;

  // One accepted connection: read one request head (deadline request_timeout),
  // write one answer (deadline write_timeout), close.
  class Conn : public std::enable_shared_from_this<Conn> {
   public:
    Conn(const std::shared_ptr<Impl>& owner, tcp::socket socket)
        : owner_(owner), stream_(std::move(socket)), buffer_(kMaxHeadBytes + 1024) {
      parser_.header_limit(kMaxHeadBytes);
    }
    bool reading() const { return reading_; }

    void start(std::chrono::milliseconds deadline, Conns::iterator pos) {
      pos_ = pos;
      stream_.expires_after(deadline);
      http::async_read(stream_, buffer_, parser_,
                       [self = shared_from_this()](const error_code& ec, std::size_t) { self->on_read(ec); });
    }

    void close() {
      if (closed_) return;
      closed_ = true;
      auto keep = shared_from_this();  // the owner's list may hold the last reference
      error_code ignored;
      stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
      stream_.close();
      if (auto o = owner_.lock()) o->forget(pos_);
    }

   private:
    void on_read(const error_code& ec) {
      if (closed_) return;
      if (ec == beast::error::timeout) {
        if (auto o = owner_.lock()) ++o->stats_.timed_out;
        return close();
      }
      if (ec == http::error::header_limit || ec == http::error::buffer_overflow)
        return answer(http::status::request_header_fields_too_large, "text/plain", "request head too large\n", false);
      // The client hung up (before or in the middle of its head) or the socket failed.
      if (ec == http::error::end_of_stream || ec == http::error::partial_message || (ec && !is_http_error(ec)))
        return close();
      if (ec) return answer(http::status::bad_request, "text/plain", "bad request: " + ec.message() + "\n", false);
      dispatch();
    }

    void dispatch() {
      const auto& req = parser_.get();
      const bool head_only = req.method() == http::verb::head;
      if (req.method() != http::verb::get && !head_only)
        return answer(http::status::method_not_allowed, "text/plain", "only GET and HEAD\n", false);
      auto target = req.target();
      if (const auto q = target.find('?'); q != beast::string_view::npos) target = target.substr(0, q);
      if (target != "/metrics")
        return answer(http::status::not_found, "text/plain", "metrics are at /metrics\n", head_only);
      auto o = owner_.lock();
      if (!o) return close();
      std::string body;
      try {
        body = o->render_();
      } catch (const std::exception& e) {
        return answer(http::status::internal_server_error, "text/plain", std::string(e.what()) + "\n", head_only);
      }
      answer(http::status::ok, kMetricsType, std::move(body), head_only);
    }

    void answer(http::status status, const char* type, std::string body, bool head_only) {
      auto o = owner_.lock();
      if (!o) return close();
      reading_ = false;
      res_.version(11);
      res_.result(status);
      res_.set(http::field::content_type, type);
      res_.keep_alive(false);
      res_.content_length(body.size());
      if (!head_only) res_.body() = std::move(body);
      stream_.expires_after(o->options_.write_timeout);
      http::async_write(stream_, res_, [self = shared_from_this()](const error_code& ec, std::size_t) {
        if (auto owner = self->owner_.lock(); owner && !self->closed_) {
          if (!ec) ++owner->stats_.answered;
          if (ec == beast::error::timeout) ++owner->stats_.timed_out;
        }
        self->close();
      });
    }

    std::weak_ptr<Impl> owner_;
    beast::tcp_stream stream_;
    beast::flat_buffer buffer_;
    http::request_parser<http::empty_body> parser_;
    http::response<http::string_body> res_;
    Conns::iterator pos_;
    bool reading_ = true;
    bool closed_ = false;
  };

  Impl(asio::io_context& io, MetricsHttpOptions options, std::function<std::string()> render)
      : io_(io), options_(std::move(options)), render_(std::move(render)), acceptor_(io), retry_(io) {}

  Status start() {
    error_code ec;
    const auto addr = asio::ip::make_address(options_.address, ec);
    if (ec || !addr.is_loopback())
      return make_error(Errc::Config, "metrics: " + options_.address + " is not a loopback address");
    const tcp::endpoint ep(addr, options_.port);
    const std::string where = "metrics: cannot listen on " + options_.address + " port " + std::to_string(options_.port);
    acceptor_.open(ep.protocol(), ec);
    if (!ec) acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
    if (!ec) acceptor_.bind(ep, ec);
    // The kernel hands a connection over only once its first bytes arrived
    // (or request_timeout passed): a scrape is accepted with its request
    // already there and answered on the next turn of the loop, so a flood of
    // connections reopened faster than that cannot make it the oldest
    // unfinished one between its connect and its send.
    if (!ec) {
      const auto secs = std::chrono::ceil<std::chrono::seconds>(options_.request_timeout).count();
      acceptor_.set_option(asio::detail::socket_option::integer<IPPROTO_TCP, TCP_DEFER_ACCEPT>(
                               static_cast<int>(std::max<long long>(1, secs))),
                           ec);
    }
    if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) {
      error_code ignored;
      acceptor_.close(ignored);
      return make_error(Errc::Io, where + ": " + ec.message());
    }
    port_ = acceptor_.local_endpoint(ec).port();
    rlimit rl{};
    std::size_t nofile = 0;
    if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) nofile = rl.rlim_cur;
    max_ = effective_max_metrics_connections(options_.max_connections, nofile);
    if (max_ < options_.max_connections)
      spdlog::warn("metrics: at most {} connections (configured {}, RLIMIT_NOFILE {})", max_,
                   options_.max_connections, nofile);
    accept();
    return Status::Ok();
  }

  void accept() {
    acceptor_.async_accept(io_, [self = shared_from_this()](const error_code& ec, tcp::socket socket) {
      if (ec == asio::error::operation_aborted || !self->acceptor_.is_open()) return;
      if (ec) return self->pause_accepting(ec);
      if (self->accept_failing_) spdlog::info("metrics: accepting connections again");
      self->accept_failing_ = false;
      self->admit(std::move(socket));
      self->accept();
    });
  }

  // EMFILE and friends: the pending connection stays in the backlog and the
  // listener stays readable, so retrying at once would spin.
  void pause_accepting(const error_code& ec) {
    ++stats_.accept_errors;
    if (!accept_failing_)
      spdlog::warn("metrics: cannot accept a connection: {} (retried every {} ms; logged again when it works)",
                   ec.message(), kAcceptRetry.count());
    accept_failing_ = true;
    retry_.expires_after(kAcceptRetry);
    retry_.async_wait([self = shared_from_this()](const error_code& tec) {
      if (!tec && self->acceptor_.is_open()) self->accept();
    });
  }

  void admit(tcp::socket socket) {
    ++stats_.accepted;
    if (conns_.size() >= max_) {
      auto victim = std::find_if(conns_.begin(), conns_.end(), [](const auto& c) { return c->reading(); });
      if (victim == conns_.end()) victim = conns_.begin();
      if (!evicting_)
        spdlog::warn("metrics: {} connections open, the limit: each new one closes the oldest unfinished "
                     "request (logged again once the load has passed)",
                     max_);
      evicting_ = true;
      ++stats_.evicted;
      (*victim)->close();
    }
    auto conn = std::make_shared<Conn>(shared_from_this(), std::move(socket));
    conn->start(options_.request_timeout, conns_.insert(conns_.end(), conn));
  }

  void forget(Conns::iterator pos) {
    conns_.erase(pos);
    if (evicting_ && conns_.size() < max_ / 2) {
      evicting_ = false;
      spdlog::info("metrics: connection load has passed ({} connections closed to make room so far)",
                   stats_.evicted);
    }
  }

  void stop() {
    error_code ec;
    acceptor_.close(ec);
    retry_.cancel();
    const auto conns = conns_;
    for (const auto& c : conns) c->close();
    conns_.clear();
  }

  asio::io_context& io_;
  MetricsHttpOptions options_;
  std::function<std::string()> render_;
  tcp::acceptor acceptor_;
  asio::steady_timer retry_;
  Conns conns_;  // in accept order: the front is the oldest
  std::size_t max_ = 1;
  std::uint16_t port_ = 0;
  bool accept_failing_ = false;
  bool evicting_ = false;
  MetricsHttpStats stats_;
};

MetricsHttpServer::MetricsHttpServer(asio::io_context& io, MetricsHttpOptions options,
                                     std::function<std::string()> render)
    : impl_(std::make_shared<Impl>(io, std::move(options), std::move(render))) {}

MetricsHttpServer::~MetricsHttpServer() { stop(); }

Status MetricsHttpServer::start() { return impl_->start(); }
void MetricsHttpServer::stop() { impl_->stop(); }
std::uint16_t MetricsHttpServer::port() const { return impl_->port_; }
std::size_t MetricsHttpServer::connection_count() const { return impl_->conns_.size(); }
std::size_t MetricsHttpServer::max_connections() const { return impl_->max_; }
const MetricsHttpStats& MetricsHttpServer::stats() const { return impl_->stats_; }

}  // namespace smha::control
