// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// The MadTransport seam itself: each typed helper builds its query and
// submits it through the one virtual; the reply comes back as the query's
// Answer type, and a transport that answers with another type is caught.
#include <catch2/catch.hpp>

#include <vector>

#include "smha/mad/transport.hpp"

using namespace smha;
using namespace smha::mad;

namespace {

// Keeps every request; answers later, by hand.
class Recorder final : public MadTransport {
 public:
  void submit(Request request, ReplyCallback done) override {
    requests.push_back(std::move(request));
    pending.push_back(std::move(done));
  }
  std::vector<Request> requests;
  std::vector<ReplyCallback> pending;
};

}  // namespace

TEST_CASE("typed helpers submit their query with its fields and options", "[mad][transport]") {
  Recorder t;
  RequestOptions o;
  o.retries = 2;
  o.m_key = 7;
  const Target dr = DrPath{{1, 3}};
  t.get_sminfo(dr, o, [](Result<SmInfoReply>) {});
  t.set_sminfo(Lid{4}, SmInfoModifier::Discover, SmInfo{}, o, [](Result<SmInfoReply>) {});
  t.get_port_info(dr, 5, o, [](Result<PortInfoReply>) {});
  t.get_service_record(Lid{9}, 0x1234, Gid{1, Guid{2}}, "smha", o, [](Result<ServiceRecordReply>) {});
  t.get_port_counters(Lid{11}, 3, o, [](Result<PortCountersReply>) {});
  t.get_lft_block(dr, 767, o, [](Result<LftBlockReply>) {});
  t.get_mcmember(Lid{9}, Gid{0xff, Guid{1}}, Gid{1, Guid{2}}, o, [](Result<McMemberReply>) {});
  REQUIRE(t.requests.size() == 7);
  for (const auto& r : t.requests) {
    CHECK(r.opts.retries == 2);
    CHECK(r.opts.m_key == 7);
  }
  CHECK(std::get<SmInfoGet>(t.requests[0].query).target == dr);
  const auto& set = std::get<SmInfoSet>(t.requests[1].query);
  CHECK(set.target == Target{Lid{4}});
  CHECK(set.mod == SmInfoModifier::Discover);
  CHECK(std::get<PortInfoGet>(t.requests[2].query).port == 5);
  const auto& sr = std::get<ServiceRecordGet>(t.requests[3].query);
  CHECK(sr.sa_lid == Lid{9});
  CHECK(sr.id == 0x1234);
  CHECK(sr.name == "smha");
  CHECK(std::get<PortCountersGet>(t.requests[4].query).lid == Lid{11});
  CHECK(std::get<LftBlockGet>(t.requests[5].query).block == 767);
  CHECK(std::get<McMemberGet>(t.requests[6].query).mgid == Gid{0xff, Guid{1}});
  CHECK(name(t.requests[0].query) == "SMInfo");
  CHECK(name(t.requests[1].query) == "SMInfo Set");
  CHECK(name(t.requests[5].query) == "LinearForwardingTable");
}

TEST_CASE("a reply reaches the typed callback as its own type, an error as the error", "[mad][transport]") {
  Recorder t;
  std::vector<std::string> got;
  t.get_node_description(DrPath{}, {}, [&](Result<NodeDescriptionReply> r) {
    REQUIRE(r.ok());
    got.push_back(r->info + " " + std::to_string(r->attempts));
  });
  t.get_lft_top(DrPath{}, {}, [&](Result<LftTopReply> r) {
    REQUIRE_FALSE(r.ok());
    got.push_back(std::string(to_string(r.error().code)));
  });
  REQUIRE(t.pending.size() == 2);
  AnyReply reply = NodeDescriptionReply{"sw1", {}, 1};
  set_round_trip(reply, milliseconds(2), 3);
  t.pending[0](reply);
  t.pending[1](make_error(kErrTimeout, "no answer"));
  CHECK(got == std::vector<std::string>{"sw1 3", std::string(to_string(kErrTimeout))});
}

TEST_CASE("a reply of another type than the query's is an invalid error", "[mad][transport]") {
  Recorder t;
  std::optional<Error> err;
  t.get_sminfo(Lid{1}, {}, [&](Result<SmInfoReply> r) {
    REQUIRE_FALSE(r.ok());
    err = r.error();
  });
  t.pending[0](PortInfoReply{});
  REQUIRE(err);
  CHECK(err->code == Errc::Invalid);
  CHECK_THAT(err->message, Catch::Contains("SMInfo"));
}
