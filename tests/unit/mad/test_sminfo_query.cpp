// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// The `smctl sminfo` logic without a device: a scripted MadTransport.
#include <catch2/catch.hpp>

#include <boost/asio/post.hpp>
#include <nlohmann/json.hpp>

#include "smha/mad/sminfo_query.hpp"

using namespace smha;
using namespace smha::mad;

namespace {

// Answers every Get with `answer`, posted (never inline), or drops it.
class ScriptedTransport : public MadTransport {
 public:
  ScriptedTransport(boost::asio::io_context& io, std::optional<Result<SmInfoReply>> answer)
      : io_(io), answer_(std::move(answer)) {}
  void submit(Request request, ReplyCallback done) override {
    const auto* get = std::get_if<SmInfoGet>(&request.query);
    if (get == nullptr) FAIL("sminfo must send SMInfo Gets only, not " << name(request.query));
    targets.push_back(get->target);
    options.push_back(request.opts);
    if (!answer_) return;
    boost::asio::post(io_, [done = std::move(done), a = *answer_] { done(a); });
  }
  std::vector<Target> targets;
  std::vector<RequestOptions> options;

 private:
  boost::asio::io_context& io_;
  std::optional<Result<SmInfoReply>> answer_;
};

SminfoReport sample_report(Target target) {
  SminfoReport r{std::move(target), {}, {}};
  r.local_port = LocalPortInfo{"ibsim0", 1, Guid{0x100007}, Lid{5}, Lid{3}, PortState::Active};
  r.reply.info = SmInfo{Guid{0x100001}, 0x0123456789abcdef, 76, 15, SmState::Master};
  r.reply.rtt = std::chrono::microseconds(1500);
  r.reply.attempts = 2;
  return r;
}

}  // namespace

TEST_CASE("No target means the local SM by directed route 0", "[mad][smctl]") {
  SminfoQuery q;
  CHECK(std::get<DrPath>(query_target(q)).hops.empty());
  q.lid = Lid{7};
  CHECK(std::get<Lid>(query_target(q)) == Lid{7});
  q.lid.reset();
  q.dr = DrPath{{1, 3}};
  CHECK(std::get<DrPath>(query_target(q)).hops == std::vector<std::uint8_t>{1, 3});
}

TEST_CASE("Errors map to the outcomes smctl turns into exit codes", "[mad][smctl]") {
  CHECK(classify(make_error(kErrTimeout, "")) == SminfoOutcome::Timeout);
  CHECK(classify(make_error(kErrMadStatus, "")) == SminfoOutcome::MadStatus);
  CHECK(classify(make_error(kErrNoPort, "")) == SminfoOutcome::NoPort);
  CHECK(classify(make_error(Errc::Io, "")) == SminfoOutcome::Failure);
  CHECK(classify(make_error(Errc::Parse, "")) == SminfoOutcome::Failure);
  CHECK(classify(make_error(Errc::Closed, "")) == SminfoOutcome::Failure);
}

TEST_CASE("Text output hides the SM_Key unless asked", "[mad][smctl]") {
  auto r = sample_report(Lid{3});
  std::string hidden = format_sminfo_text(r, false);
  CHECK(hidden.find("0x0123456789abcdef") == std::string::npos);
  CHECK(hidden.find("sm_key:     hidden") != std::string::npos);
  CHECK(hidden.find("target:     LID 3\n") != std::string::npos);
  CHECK(hidden.find("guid:       0x0000000000100001\n") != std::string::npos);
  CHECK(hidden.find("act_count:  76\n") != std::string::npos);
  CHECK(hidden.find("priority:   15\n") != std::string::npos);
  CHECK(hidden.find("state:      3 MASTER\n") != std::string::npos);
  CHECK(hidden.find("rtt_ms:     1.500 (attempts 2)\n") != std::string::npos);
  std::string shown = format_sminfo_text(r, true);
  CHECK(shown.find("sm_key:     0x0123456789abcdef\n") != std::string::npos);
  CHECK(format_sminfo_text(sample_report(DrPath{}), false).find("local SM (directed route 0)") !=
        std::string::npos);
  CHECK(format_sminfo_text(sample_report(DrPath{{1, 3}}), false).find("directed route 0,1,3") !=
        std::string::npos);
}

TEST_CASE("JSON output has every field, sm_key null unless asked", "[mad][smctl]") {
  auto j = nlohmann::json::parse(format_sminfo_json(sample_report(DrPath{{1, 1}}), false));
  CHECK(j["target"]["dr"] == "0,1,1");
  CHECK(j["guid"] == "0x0000000000100001");
  CHECK(j["sm_key"].is_null());
  CHECK(j["act_count"] == 76);
  CHECK(j["priority"] == 15);
  CHECK(j["state"] == 3);
  CHECK(j["state_name"] == "MASTER");
  CHECK(j["local_port"]["ca"] == "ibsim0");
  CHECK(j["local_port"]["lid"] == 5);
  CHECK(j["local_port"]["state"] == "ACTIVE");
  CHECK(j["attempts"] == 2);
  CHECK(j["rtt_ms"].get<double>() == Approx(1.5));
  auto k = nlohmann::json::parse(format_sminfo_json(sample_report(Lid{3}), true));
  CHECK(k["sm_key"] == "0x0123456789abcdef");
  CHECK(k["target"]["lid"] == 3);
  auto e = nlohmann::json::parse(format_error_json(make_error(kErrTimeout, "LID 9: no answer")));
  CHECK(e["error"]["code"] == "timeout");
  CHECK(e["error"]["message"] == "LID 9: no answer");
}

TEST_CASE("run_sminfo_get waits for the transport's answer on the io_context", "[mad][smctl]") {
  boost::asio::io_context io;
  SmInfoReply reply;
  reply.info = SmInfo{Guid{0x100004}, 0, 5, 1, SmState::Standby};
  ScriptedTransport t(io, Result<SmInfoReply>(reply));
  RequestOptions opts{std::chrono::milliseconds(250), 2, 7};
  auto r = run_sminfo_get(io, t, Lid{1}, opts);
  REQUIRE(r.ok());
  CHECK(r->info == reply.info);
  REQUIRE(t.targets.size() == 1);
  CHECK(std::get<Lid>(t.targets[0]) == Lid{1});
  CHECK(t.options[0].timeout == std::chrono::milliseconds(250));
  CHECK(t.options[0].retries == 2);
  CHECK(t.options[0].m_key == 7);

  ScriptedTransport failing(io, Result<SmInfoReply>(make_error(kErrMadStatus, "0x0700")));
  auto f = run_sminfo_get(io, failing, DrPath{}, opts);
  REQUIRE_FALSE(f.ok());
  CHECK(f.error().code == kErrMadStatus);
}

TEST_CASE("run_sminfo_get does not hang when the transport never calls back", "[mad][smctl]") {
  boost::asio::io_context io;
  ScriptedTransport silent(io, std::nullopt);
  auto r = run_sminfo_get(io, silent, Lid{1}, RequestOptions{});
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == Errc::Failed);
  CHECK(r.error().message.find("ran out of work") != std::string::npos);
}

TEST_CASE("Opening a port that does not exist is NoPort and changes nothing", "[mad][smctl]") {
  SminfoQuery q;
  q.port.ca = "smha-no-such-ca";
  q.port.port = 1;
  SteadyClock clock;
  auto res = run_sminfo_command(q, true, false, clock);
  CHECK(res.outcome == SminfoOutcome::NoPort);
  auto j = nlohmann::json::parse(res.out);
  CHECK(j["error"]["code"] == "no_port");
  CHECK(res.err.find("smha-no-such-ca") != std::string::npos);

  PortSelector both{"mlx5_0", 1, Guid{1}};
  auto r = query_local_port(both);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == kErrNoPort);
}
