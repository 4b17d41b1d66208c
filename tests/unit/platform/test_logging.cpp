// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <sstream>

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include "smha/platform/logging.hpp"
#include "test_util.hpp"

namespace platform = smha::platform;
using smha::platform::test::ScopedEnv;

namespace {

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

void drop_module_loggers() {
  for (auto name : platform::kLoggerNames) spdlog::drop(std::string(name));
}

// Routes every module logger into `out`; restores the default logger after.
struct CapturedLogging {
  std::ostringstream out;
  std::shared_ptr<spdlog::logger> old_default = spdlog::default_logger();
  explicit CapturedLogging(spdlog::level::level_enum level = spdlog::level::info) {
    platform::LogOptions options;
    options.level = level;
    options.sink_override = std::make_shared<spdlog::sinks::ostream_sink_mt>(out);
    REQUIRE(platform::setup_logging(options).ok());
  }
  ~CapturedLogging() {
    drop_module_loggers();
    spdlog::set_default_logger(old_default);
  }
};

}  // namespace

TEST_CASE("setup_logging creates every module logger on one sink", "[logging]") {
  CapturedLogging log;
  for (auto name : platform::kLoggerNames) {
    auto logger = spdlog::get(std::string(name));
    REQUIRE(logger != nullptr);
    logger->info("hello from {}", name);
  }
  const auto got = lines(log.out.str());
  REQUIRE(got.size() == std::size(platform::kLoggerNames));
  CHECK_THAT(got[0], Catch::EndsWith("[mad] hello from mad"));
  CHECK_THAT(got[5], Catch::EndsWith("[svc] hello from svc"));
  CHECK(spdlog::default_logger()->name() == "svc");
}

TEST_CASE("setup_logging replaces loggers registered earlier", "[logging]") {
  auto early = platform::module_logger("osm");  // as lib/opensm would before set-up
  REQUIRE(spdlog::get("osm") == early);
  CapturedLogging log;
  CHECK(spdlog::get("osm") != early);
  platform::module_logger("osm")->warn("from osm");
  CHECK_THAT(log.out.str(), Catch::Contains("warning [osm] from osm"));
}

TEST_CASE("log_transition writes exactly one line with id and fields", "[logging]") {
  CapturedLogging log;
  platform::log_transition(*spdlog::get("sm"), "STANDBY", "MASTER", "peer_lost", "head02",
                           "NOTACTIVE", 1);
  const auto got = lines(log.out.str());
  REQUIRE(got.size() == 1);
  CHECK_THAT(got[0], Catch::EndsWith("info [sm] SM_TRANSITION from=STANDBY to=MASTER "
                                     "reason=peer_lost peer=head02 peer_state=NOTACTIVE "
                                     "peer_prio=1"));
}

TEST_CASE("log_event honours the logger level", "[logging]") {
  CapturedLogging log(spdlog::level::warn);
  platform::log_transition(*spdlog::get("sm"), "STANDBY", "MASTER", "peer_lost");
  CHECK(log.out.str().empty());
  platform::log_event(*spdlog::get("svc"), platform::kHookFailed, {{"hook", "/x"}},
                      spdlog::level::err);
  CHECK_THAT(log.out.str(), Catch::Contains("[svc] HOOK_FAILED hook=/x"));
}

TEST_CASE("format_event quotes values that need it", "[logging]") {
  CHECK(platform::format_event(platform::kSmTransition,
                               {{"reason", "peer lost"}, {"x", ""}, {"q", "a\"b\\c"},
                                {"nl", "a\nb"}, {"eq", "a=b"}}) ==
        R"(SM_TRANSITION reason="peer lost" x="" q="a\"b\\c" nl="a b" eq="a=b")");
}

TEST_CASE("journal_fields carries MESSAGE_ID and one field per key", "[logging]") {
  auto fields = platform::journal_fields(platform::kSmTransition,
                                         {{"from", "STANDBY"}, {"peer_prio", "1"}},
                                         spdlog::level::info, "sm");
  CHECK(fields == std::vector<std::string>{
                      "MESSAGE=[sm] SM_TRANSITION from=STANDBY peer_prio=1",
                      "MESSAGE_ID=6d2c7ab1f0e34b0c9a1e5d7f3c2b8a01",
                      "SMHA_EVENT=SM_TRANSITION", "SMHA_FROM=STANDBY", "SMHA_PEER_PRIO=1",
                      "PRIORITY=6", "SMHA_LOGGER=sm"});
}

TEST_CASE("message ids are 32 hex digits, distinct, and found by name", "[logging]") {
  const auto& ids = platform::known_message_ids();
  CHECK(ids.size() == 20);
  for (std::size_t i = 0; i < ids.size(); ++i) {
    CHECK(ids[i].id.size() == 32);
    CHECK(ids[i].id.find_first_not_of("0123456789abcdef") == std::string_view::npos);
    for (std::size_t j = i + 1; j < ids.size(); ++j) {
      CHECK(ids[i].id != ids[j].id);
      CHECK(ids[i].name != ids[j].name);
    }
    auto found = platform::find_message_id(ids[i].name);
    REQUIRE(found);
    CHECK(found->id == ids[i].id);
  }
  CHECK_FALSE(platform::find_message_id("NO_SUCH_EVENT"));
}

TEST_CASE("parse_log_destination", "[logging]") {
  CHECK(platform::parse_log_destination("auto") == platform::LogDestination::Auto);
  CHECK(platform::parse_log_destination("journal") == platform::LogDestination::Journal);
  CHECK(platform::parse_log_destination("stderr") == platform::LogDestination::Stderr);
  CHECK_FALSE(platform::parse_log_destination("syslog"));
}

TEST_CASE("running_under_systemd looks at INVOCATION_ID and JOURNAL_STREAM", "[logging]") {
  ScopedEnv invocation("INVOCATION_ID", std::nullopt);
  SECTION("neither") {
    ScopedEnv stream("JOURNAL_STREAM", std::nullopt);
    CHECK_FALSE(platform::running_under_systemd());
  }
  SECTION("INVOCATION_ID") {
    ScopedEnv id("INVOCATION_ID", "0123456789abcdef0123456789abcdef");
    ScopedEnv stream("JOURNAL_STREAM", std::nullopt);
    CHECK(platform::running_under_systemd());
  }
  SECTION("JOURNAL_STREAM naming stderr") {
    struct stat st {};
    REQUIRE(::fstat(2, &st) == 0);
    ScopedEnv stream("JOURNAL_STREAM", std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino));
    CHECK(platform::running_under_systemd());
  }
  SECTION("JOURNAL_STREAM naming something else") {
    struct stat st {};
    REQUIRE(::fstat(2, &st) == 0);
    ScopedEnv stream("JOURNAL_STREAM",
                     std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino + 1));
    CHECK_FALSE(platform::running_under_systemd());
  }
}

TEST_CASE("a journald destination needs libsystemd", "[logging]") {
  auto old_default = spdlog::default_logger();
  platform::LogOptions options;
  options.destination = platform::LogDestination::Journal;
  smha::Status status = platform::setup_logging(options);
#ifdef SMHA_WITH_SYSTEMD
  CHECK(status.ok());
  CHECK(spdlog::get("sm") != nullptr);
#else
  REQUIRE_FALSE(status.ok());
  CHECK(status.error().code == smha::Errc::Unsupported);
#endif
  drop_module_loggers();
  spdlog::set_default_logger(old_default);
}
