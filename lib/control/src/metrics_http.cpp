// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/control/metrics_http.hpp"

#include <array>
#include <set>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>

namespace smha::control {

namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

std::string response(int code, const char* reason, const std::string& type, const std::string& body,
                     bool head_only) {
  std::string out = "HTTP/1.1 " + std::to_string(code) + " " + reason + "\r\n";
  out += "Content-Type: " + type + "\r\n";
  out += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  out += "Connection: close\r\n\r\n";
  if (!head_only) out += body;
  return out;
}

}  // namespace

class MetricsHttpServer::Impl : public std::enable_shared_from_this<MetricsHttpServer::Impl> {
 public:
  struct Conn : std::enable_shared_from_this<Conn> {
    Conn(asio::io_context& io, std::weak_ptr<Impl> owner) : socket(io), timer(io), owner(std::move(owner)) {}
    tcp::socket socket;
    asio::steady_timer timer;
    std::weak_ptr<Impl> owner;
    std::string head;
    std::array<char, 2048> buf{};
    std::string out;
    bool closed = false;

    void close() {
      if (closed) return;
      closed = true;
      boost::system::error_code ec;
      socket.shutdown(tcp::socket::shutdown_both, ec);
      socket.close(ec);
      timer.cancel();
      if (auto o = owner.lock()) o->conns_.erase(shared_from_this());
    }
    void read() {
      socket.async_read_some(asio::buffer(buf), [self = shared_from_this()](auto ec, std::size_t n) {
        if (ec || self->closed) return self->close();
        self->head.append(self->buf.data(), n);
        const auto end = self->head.find("\r\n\r\n");
        if (end == std::string::npos && self->head.find("\n\n") == std::string::npos) {
          if (self->head.size() > kMaxHeadBytes)
            return self->answer(response(431, "Request Header Fields Too Large", "text/plain", "too large\n", false));
          return self->read();
        }
        self->dispatch();
      });
    }
    void dispatch() {
      const auto eol = head.find_first_of("\r\n");
      const std::string line = head.substr(0, eol);
      const auto sp1 = line.find(' ');
      const auto sp2 = sp1 == std::string::npos ? std::string::npos : line.find(' ', sp1 + 1);
      if (sp1 == std::string::npos || sp2 == std::string::npos)
        return answer(response(400, "Bad Request", "text/plain", "bad request line\n", false));
      const std::string method = line.substr(0, sp1);
      std::string target = line.substr(sp1 + 1, sp2 - sp1 - 1);
      if (auto q = target.find('?'); q != std::string::npos) target.resize(q);
      const bool head_only = method == "HEAD";
      if (method != "GET" && !head_only)
        return answer(response(405, "Method Not Allowed", "text/plain", "only GET and HEAD\n", false));
      if (target != "/metrics")
        return answer(response(404, "Not Found", "text/plain", "metrics are at /metrics\n", head_only));
      auto o = owner.lock();
      if (!o) return close();
      std::string body;
      try {
        body = o->render_();
      } catch (const std::exception& e) {
        return answer(response(500, "Internal Server Error", "text/plain", std::string(e.what()) + "\n", head_only));
      }
      answer(response(200, "OK", "text/plain; version=0.0.4; charset=utf-8", body, head_only));
    }
    void answer(std::string text) {
      out = std::move(text);
      asio::async_write(socket, asio::buffer(out), [self = shared_from_this()](auto, std::size_t) { self->close(); });
    }
  };

  Impl(asio::io_context& io, MetricsHttpOptions options, std::function<std::string()> render)
      : io_(io), options_(std::move(options)), render_(std::move(render)), acceptor_(io) {}

  Status start() {
    boost::system::error_code ec;
    const auto addr = asio::ip::make_address(options_.address, ec);
    if (ec || !addr.is_loopback())
      return make_error(Errc::BadAddress, "metrics: " + options_.address + " is not a loopback address");
    const tcp::endpoint ep(addr, options_.port);
    const std::string where = "metrics: cannot listen on " + options_.address + " port " + std::to_string(options_.port);
    acceptor_.open(ep.protocol(), ec);
    if (!ec) acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
    if (!ec) acceptor_.bind(ep, ec);
    if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) {
      boost::system::error_code ignored;
      acceptor_.close(ignored);
      return make_error(Errc::Bind, where + ": " + ec.message());
    }
    port_ = acceptor_.local_endpoint(ec).port();
    accept();
    return Status::Ok();
  }

  void accept() {
    auto conn = std::make_shared<Conn>(io_, weak_from_this());
    acceptor_.async_accept(conn->socket, [self = shared_from_this(), conn](auto ec) {
      if (ec == asio::error::operation_aborted || !self->acceptor_.is_open()) return;
      if (!ec) {
        if (self->conns_.size() >= self->options_.max_connections) {
          boost::system::error_code ignored;
          conn->socket.close(ignored);
        } else {
          self->conns_.insert(conn);
          conn->timer.expires_after(self->options_.request_timeout);
          conn->timer.async_wait([c = std::weak_ptr<Conn>(conn)](auto tec) {
            if (tec) return;
            if (auto s = c.lock()) s->close();
          });
          conn->read();
        }
      }
      self->accept();
    });
  }

  void stop() {
    boost::system::error_code ec;
    acceptor_.close(ec);
    auto conns = conns_;
    for (const auto& c : conns) c->close();
    conns_.clear();
  }

  asio::io_context& io_;
  MetricsHttpOptions options_;
  std::function<std::string()> render_;
  tcp::acceptor acceptor_;
  std::set<std::shared_ptr<Conn>> conns_;
  std::uint16_t port_ = 0;
};

MetricsHttpServer::MetricsHttpServer(asio::io_context& io, MetricsHttpOptions options,
                                     std::function<std::string()> render)
    : impl_(std::make_shared<Impl>(io, std::move(options), std::move(render))) {}

MetricsHttpServer::~MetricsHttpServer() { stop(); }

Status MetricsHttpServer::start() { return impl_->start(); }
void MetricsHttpServer::stop() { impl_->stop(); }
std::uint16_t MetricsHttpServer::port() const { return impl_->port_; }
std::size_t MetricsHttpServer::connection_count() const { return impl_->conns_.size(); }

}  // namespace smha::control
