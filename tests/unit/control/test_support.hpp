// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// Helpers for the control-socket tests: a scratch directory, a server running
// on its own io thread, a log capture and the test group.
#pragma once

#include <grp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>

#include "smha/control/server.hpp"

namespace smha::control::test {

// A scratch directory under /tmp, mode 0755 so a setuid child can reach into
// it; removed with its contents on destruction.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = "/tmp/smha-ctl-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
    ::chmod(path_.c_str(), 0755);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string sub(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// The group the tests give the socket: "users" exists on every Debian system
// and `nobody` is not a member of it.
inline const char* kTestGroup = "users";
inline gid_t test_group_gid() {
  struct group* g = ::getgrnam(kTestGroup);
  if (g == nullptr) throw std::runtime_error("test group 'users' missing");
  return g->gr_gid;
}

// A logger whose output the test can read.
struct LogCapture {
  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> sink =
      std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(1024);
  std::shared_ptr<spdlog::logger> logger;
  LogCapture() {
    static std::atomic<int> n{0};
    logger = std::make_shared<spdlog::logger>("ctl-test-" + std::to_string(n++), sink);
    logger->set_level(spdlog::level::debug);
    logger->set_pattern("%l %v");
  }
  bool contains(const std::string& needle) const {
    for (const auto& line : sink->last_formatted()) {
      if (line.find(needle) != std::string::npos) return true;
    }
    return false;
  }
};

inline ServerOptions test_options(const TempDir& dir, const LogCapture& log) {
  ServerOptions o;
  o.socket_path = dir.sub("run/smhad.sock");
  o.group = kTestGroup;
  o.idle_timeout = std::chrono::milliseconds(10'000);
  o.server_name = "smhad-test";
  o.logger = log.logger;
  return o;
}

// A started server whose io_context runs on a background thread once run() is
// called (tests that fork do so before run(), while single-threaded). The
// server is touched only on that thread after run(); on destruction stop() is
// posted there and the thread joined.
class ThreadedServer {
 public:
  explicit ThreadedServer(ServerOptions options) : server_(std::make_unique<ControlServer>(io_, std::move(options))) {}
  ~ThreadedServer() {
    if (thread_.joinable()) {
      boost::asio::post(io_, [this] { server_->stop(); });
      thread_.join();
    }
    server_.reset();
  }
  ControlServer& server() { return *server_; }
  boost::asio::io_context& io() { return io_; }
  void run() {
    thread_ = std::thread([this] { io_.run(); });
  }

 private:
  boost::asio::io_context io_;
  std::unique_ptr<ControlServer> server_;
  std::thread thread_;
};

}  // namespace smha::control::test
