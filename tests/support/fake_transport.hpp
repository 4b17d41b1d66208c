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
  void get_sminfo(const mad::Target& target, const mad::RequestOptions&, mad::SmInfoCallback done) override {
    std::optional<SmInfo> reply = answer ? answer(target) : std::optional<SmInfo>(info);
    boost::asio::post(io_, [done, reply] {
      if (reply) done(mad::SmInfoReply{*reply, std::chrono::milliseconds(3), 1});
      else done(make_error(mad::kErrTimeout, "no answer"));
    });
  }
  void set_sminfo(const mad::Target&, SmInfoModifier, const SmInfo& p, const mad::RequestOptions&,
                  mad::SmInfoCallback done) override {
    ++sets;
    boost::asio::post(io_, [done, p] { done(mad::SmInfoReply{p, std::chrono::milliseconds(1), 1}); });
  }
  void get_port_info(const mad::Target&, std::uint8_t, const mad::RequestOptions&,
                     mad::PortInfoCallback done) override {
    boost::asio::post(io_, [done, port = port] {
      if (port) done(mad::PortInfoReply{*port, std::chrono::milliseconds(1), 1});
      else done(make_error(mad::kErrTimeout, "no answer"));
    });
  }
  void get_node_info(const mad::Target&, const mad::RequestOptions&, mad::NodeInfoCallback done) override {
    timeout(std::move(done));
  }
  void get_node_description(const mad::Target&, const mad::RequestOptions&,
                            mad::NodeDescriptionCallback done) override {
    timeout(std::move(done));
  }
  void get_sminfo_records(Lid, const mad::RequestOptions&, mad::SmInfoRecordsCallback done) override {
    timeout(std::move(done));
  }
  void get_is_sm_port_records(Lid, const mad::RequestOptions&, mad::PortInfoRecordsCallback done) override {
    timeout(std::move(done));
  }
  void set_service_record(Lid, const mad::ServiceRecord&, const mad::RequestOptions&,
                          mad::ServiceRecordCallback done) override {
    timeout(std::move(done));
  }
  void get_service_record(Lid, std::uint64_t, const mad::Gid&, const std::string&, const mad::RequestOptions&,
                          mad::ServiceRecordCallback done) override {
    timeout(std::move(done));
  }
  void delete_service_record(Lid, const mad::ServiceRecord&, const mad::RequestOptions&,
                             mad::ServiceRecordCallback done) override {
    timeout(std::move(done));
  }
  void get_port_counters(Lid, std::uint8_t, const mad::RequestOptions&, mad::PortCountersCallback done) override {
    timeout(std::move(done));
  }
  void get_lft_top(const mad::Target&, const mad::RequestOptions&, mad::LftTopCallback done) override {
    timeout(std::move(done));
  }
  void get_lft_block(const mad::Target&, std::uint16_t, const mad::RequestOptions&,
                     mad::LftBlockCallback done) override {
    timeout(std::move(done));
  }
  void get_mcmember(Lid, const mad::Gid&, const mad::Gid&, const mad::RequestOptions&,
                    mad::McMemberCallback done) override {
    timeout(std::move(done));
  }

  std::function<std::optional<SmInfo>(const mad::Target&)> answer;
  SmInfo info{Guid{0x20}, 0, 42, 5, SmState::Standby};
  std::optional<mad::PortInfo> port;
  int sets = 0;

 private:
  template <typename Callback>
  void timeout(Callback done) {
    boost::asio::post(io_, [done = std::move(done)] { done(make_error(mad::kErrTimeout, "no answer")); });
  }
  boost::asio::io_context& io_;
};

}  // namespace smha::test
