// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// A MAD transport without a fabric, on an asio loop: every reply is posted to
// the loop, never given from inside the call (the MadTransport contract).
#pragma once

#include <functional>
#include <optional>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include "smha/mad/transport.hpp"

namespace smha::test {

// SMInfo Gets are answered by `answer(target)` when set (nullopt: a timeout),
// else with `info`; Sets with ok; PortInfo with `port` while set; everything
// else times out.
class FakeTransport final : public mad::MadTransport {
 public:
  explicit FakeTransport(boost::asio::io_context& io) : io_(io) {}
  void submit(mad::Request request, mad::ReplyCallback done) override {
    std::optional<mad::AnyReply> reply;
    if (const auto* get = std::get_if<mad::SmInfoGet>(&request.query)) {
      std::optional<SmInfo> i = answer ? answer(get->target) : std::optional<SmInfo>(info);
      if (i) reply = mad::SmInfoReply{*i, std::chrono::milliseconds(3), 1};
    } else if (const auto* set = std::get_if<mad::SmInfoSet>(&request.query)) {
      ++sets;
      reply = mad::SmInfoReply{set->payload, std::chrono::milliseconds(1), 1};
    } else if (std::holds_alternative<mad::PortInfoGet>(request.query) && port) {
      reply = mad::PortInfoReply{*port, std::chrono::milliseconds(1), 1};
    }
    boost::asio::post(io_, [done = std::move(done), reply] {
      if (reply) done(*reply);
      else done(make_error(mad::kErrTimeout, "no answer"));
    });
  }

  std::function<std::optional<SmInfo>(const mad::Target&)> answer;
  SmInfo info{Guid{0x20}, 0, 42, 5, SmState::Standby};
  std::optional<mad::PortInfo> port;
  int sets = 0;

 private:
  boost::asio::io_context& io_;
};

}  // namespace smha::test
