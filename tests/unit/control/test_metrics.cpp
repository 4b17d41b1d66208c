// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// The Prometheus renderer, checked by a real exposition-format parser
// (python3-prometheus-client's text parser), not by pattern matching.
#include <catch2/catch.hpp>

#include <cstdio>
#include <fstream>
#include <limits>

#include <nlohmann/json.hpp>

#include "smha/control/metrics.hpp"
#include "prometheus_parse.hpp"
#include "test_support.hpp"

using namespace smha::control;
using namespace smha::control::test;
using smha::testing::parse_with_prometheus_client;
using smha::testing::sample_value;
using nlohmann::json;


TEST_CASE("rendered metrics parse with a real exposition parser", "[control][metrics]") {
  MetricsSnapshot m;
  m.node = "head-a";
  m.role = "master";
  m.sms = {{"head-a", smha::Guid{0x0002c90300a1b2c3}, smha::SmState::Master, 15},
           {"head-b", smha::Guid{0x0002c90300a1b2c4}, smha::SmState::Standby, 14},
           {"head-c", smha::Guid{0x0002c90300a1b2c5}, smha::SmState::NotActive, 0, false}};
  m.failovers_by_reason = {{"peer_lost", 2}, {"planned", 1}};
  m.last_takeover_seconds = 1.25;
  m.last_report = MetricsSnapshot::LastReport{0.5, 0, true, 1};
  m.poll_rtt = Histogram{{0.0005, 0.001, 0.01}, {10, 90, 99}, 100, 0.07};
  m.missed_polls = 3;
  m.opensm_restarts = 1;
  m.active_alarms = {"no_standby", "weird \"name\"\\\n"};
  m.hold_active = true;
  m.fabric_sms = {{"master", 1}, {"standby", 2}};

  auto doc = parse_with_prometheus_client(render_prometheus(m));
  REQUIRE_FALSE(doc.contains("error"));

  CHECK(doc["smha_role"]["type"] == "gauge");
  CHECK(sample_value(doc["smha_role"], "smha_role", {{"node", "head-a"}, {"role", "master"}}) == 1.0);
  CHECK(sample_value(doc["smha_role"], "smha_role", {{"node", "head-a"}, {"role", "standby"}}) == 0.0);
  CHECK(sample_value(doc["smha_sm_state"], "smha_sm_state", {{"node", "head-b"}, {"guid", "0x0002c90300a1b2c4"}}) ==
        2.0);
  CHECK(sample_value(doc["smha_sm_up"], "smha_sm_up", {{"node", "head-b"}, {"guid", "0x0002c90300a1b2c4"}}) == 1.0);
  CHECK(sample_value(doc["smha_sm_up"], "smha_sm_up", {{"node", "head-c"}, {"guid", "0x0002c90300a1b2c5"}}) == 0.0);
  // An SM that does not answer has no state sample (unknown, not NOTACTIVE).
  CHECK(sample_value(doc["smha_sm_state"], "smha_sm_state", {{"node", "head-c"}, {"guid", "0x0002c90300a1b2c5"}})
            .is_null());
  CHECK(sample_value(doc["smha_sm_priority"], "smha_sm_priority",
                     {{"node", "head-a"}, {"guid", "0x0002c90300a1b2c3"}}) == 15.0);
  CHECK(sample_value(doc["smha_sm_master"], "smha_sm_master", {{"node", "head-a"}, {"guid", "0x0002c90300a1b2c3"}}) ==
        1.0);
  // The parser files counters under the name without _total.
  CHECK(doc["smha_failovers"]["type"] == "counter");
  CHECK(sample_value(doc["smha_failovers"], "smha_failovers_total", {{"reason", "peer_lost"}}) == 2.0);
  CHECK(sample_value(doc["smha_last_takeover_duration_seconds"], "smha_last_takeover_duration_seconds",
                     json::object()) == 1.25);
  CHECK(sample_value(doc["smha_last_takeover_sa_outage_seconds"], "smha_last_takeover_sa_outage_seconds",
                     json::object()) == 0.5);
  CHECK(sample_value(doc["smha_last_takeover_lft_entries_changed"], "smha_last_takeover_lft_entries_changed",
                     json::object()) == 0.0);
  CHECK(sample_value(doc["smha_last_takeover_sa_restored"], "smha_last_takeover_sa_restored", json::object()) == 1.0);
  CHECK(sample_value(doc["smha_last_takeover_groups_lost"], "smha_last_takeover_groups_lost", json::object()) == 1.0);
  const auto& rtt = doc["smha_poll_rtt_seconds"];
  CHECK(rtt["type"] == "histogram");
  CHECK(sample_value(rtt, "smha_poll_rtt_seconds_bucket", {{"le", "0.001"}}) == 90.0);
  CHECK(sample_value(rtt, "smha_poll_rtt_seconds_bucket", {{"le", "+Inf"}}) == 100.0);
  CHECK(sample_value(rtt, "smha_poll_rtt_seconds_count", json::object()) == 100.0);
  CHECK(sample_value(rtt, "smha_poll_rtt_seconds_sum", json::object()) == 0.07);
  CHECK(sample_value(doc["smha_missed_polls"], "smha_missed_polls_total", json::object()) == 3.0);
  CHECK(sample_value(doc["smha_opensm_restarts"], "smha_opensm_restarts_total", json::object()) == 1.0);
  // Escaped label values come back unescaped; the backslash and the newline,
  // a control character, as printable() writes them ("\\" and "\x0a").
  CHECK(sample_value(doc["smha_alarm_active"], "smha_alarm_active", {{"alarm", "weird \"name\"\\\\\\x0a"}}) ==
        1.0);
  CHECK(sample_value(doc["smha_alarms_active"], "smha_alarms_active", json::object()) == 2.0);
  CHECK(sample_value(doc["smha_hold_active"], "smha_hold_active", json::object()) == 1.0);
  // The census: SMs per state, every state present.
  CHECK(doc["smha_fabric_sms"]["type"] == "gauge");
  CHECK(sample_value(doc["smha_fabric_sms"], "smha_fabric_sms", {{"state", "master"}}) == 1.0);
  CHECK(sample_value(doc["smha_fabric_sms"], "smha_fabric_sms", {{"state", "standby"}}) == 2.0);
  CHECK(sample_value(doc["smha_fabric_sms"], "smha_fabric_sms", {{"state", "silent"}}) == 0.0);
  CHECK(sample_value(doc["smha_fabric_sms"], "smha_fabric_sms", {{"state", "unknown"}}) == 0.0);
}

TEST_CASE("an instance's metrics carry its fabric on every sample, a one-fabric head's none",
          "[control][metrics]") {
  MetricsSnapshot m;
  m.node = "head-a";
  m.role = "master";
  m.sms = {{"head-a", smha::Guid{0x10}, smha::SmState::Master, 15}};
  m.poll_rtt = Histogram{{0.001}, {1}, 1, 0.0005};
  m.fabric = "rail3";
  const auto doc = parse_with_prometheus_client(render_prometheus(m));
  REQUIRE_FALSE(doc.contains("error"));
  int samples = 0;
  for (const auto& [name, fam] : doc.items())
    for (const auto& s : fam["samples"]) {
      INFO(s.dump());
      CHECK(s[1].value("fabric", "") == "rail3");
      ++samples;
    }
  CHECK(samples > 20);
  CHECK(sample_value(doc["smha_role"], "smha_role", {{"fabric", "rail3"}, {"node", "head-a"}, {"role", "master"}}) ==
        1.0);
  CHECK(sample_value(doc["smha_missed_polls"], "smha_missed_polls_total", {{"fabric", "rail3"}}) == 0.0);
  m.fabric.clear();
  const auto plain = parse_with_prometheus_client(render_prometheus(m));
  for (const auto& [name, fam] : plain.items())
    for (const auto& s : fam["samples"]) CHECK_FALSE(s[1].contains("fabric"));
}

TEST_CASE("label values from the fabric: ANSI escapes and bytes that are not UTF-8 are escaped",
          "[control][metrics]") {
  MetricsSnapshot m;
  m.node = "head-a";
  m.role = "master";
  // An SM named by whatever the fabric said: an ANSI clear-screen, Latin-1 bytes.
  m.sms = {{"\x1b[2Jevil\xe9\xff", smha::Guid{0x0002c90300a1b2c3}, smha::SmState::Master, 15}};
  const std::string text = render_prometheus(m);
  CHECK(text.find('\x1b') == std::string::npos);
  CHECK(text.find('\xff') == std::string::npos);
  auto doc = parse_with_prometheus_client(text);
  REQUIRE_FALSE(doc.contains("error"));
  CHECK(sample_value(doc["smha_sm_up"], "smha_sm_up",
                     {{"node", "\\x1b[2Jevil\\xe9\\xff"}, {"guid", "0x0002c90300a1b2c3"}}) == 1.0);
}

TEST_CASE("fabric health: links and degraded links by kind, the worst ones by name, escaped", "[control][metrics]") {
  MetricsSnapshot m;
  m.node = "head-a";
  m.role = "master";
  CHECK(render_prometheus(m).find("smha_fabric_links") == std::string::npos);  // not assessed: absent
  MetricsSnapshot::Health h;
  h.links_by_kind = {{"switch-switch", 2}, {"switch-ca", 4}, {"other", 0}};
  h.degraded_by_kind = {{"switch-switch", 0}, {"switch-ca", 1}, {"other", 0}};
  h.degraded = 1;
  h.worst = {{"Switch2 0x0000000000200001 port 2", "\x1b[2Jhca\xff 0x000000000010000a port 1", "1X SDR", "4X SDR",
              "below_tier", 0.25}};
  m.health = h;
  const std::string text = render_prometheus(m);
  CHECK(text.find('\x1b') == std::string::npos);
  auto doc = parse_with_prometheus_client(text);
  REQUIRE_FALSE(doc.contains("error"));
  CHECK(sample_value(doc["smha_fabric_links"], "smha_fabric_links", {{"kind", "switch-ca"}}) == 4.0);
  CHECK(sample_value(doc["smha_fabric_links_degraded"], "smha_fabric_links_degraded", {{"kind", "switch-ca"}}) == 1.0);
  CHECK(sample_value(doc["smha_fabric_links_degraded"], "smha_fabric_links_degraded", {{"kind", "switch-switch"}}) ==
        0.0);
  CHECK(sample_value(doc["smha_fabric_links_unknown"], "smha_fabric_links_unknown", json::object()) == 0.0);
  CHECK(sample_value(doc["smha_fabric_link_degraded_ratio"], "smha_fabric_link_degraded_ratio",
                     {{"rank", "1"},
                      {"a", "Switch2 0x0000000000200001 port 2"},
                      {"b", "\\x1b[2Jhca\\xff 0x000000000010000a port 1"},
                      {"active", "1X SDR"},
                      {"should", "4X SDR"},
                      {"why", "below_tier"}}) == 0.25);
  CHECK(doc["smha_fabric_link_degraded_ratio"]["samples"].size() == 1);
}

TEST_CASE("error counters: ports by state and counter, reads and failures, the worst ports by name, escaped",
          "[control][metrics]") {
  MetricsSnapshot m;
  m.node = "head-a";
  m.role = "master";
  CHECK(render_prometheus(m).find("smha_fabric_counters_reading") == std::string::npos);  // off: absent
  ErrorCounterMetrics e;
  e.reading = true;
  e.ports = {{"read", 12}, {"unknown", 1}, {"with_errors", 3}, {"rising", 2}, {"over_threshold", 1}};
  e.rising_by_counter = {{"symbol_errors", 1}, {"rcv_errors", 1}, {"link_downed", 0}};
  e.reads = 410;
  e.failures = 3;
  e.wrong_port = 2;
  e.resets = 1;
  e.worst = {{"Switch2 0x0000000000200001 port 2", "SymbolErrorCounter", 25},
             {"\x1b[2Jhca\xff 0x000000000010000a port 1", "PortRcvErrors", 12}};
  m.errors = e;
  const std::string text = render_prometheus(m);
  CHECK(text.find('\x1b') == std::string::npos);
  auto doc = parse_with_prometheus_client(text);
  REQUIRE_FALSE(doc.contains("error"));
  CHECK(sample_value(doc["smha_fabric_counters_reading"], "smha_fabric_counters_reading", json::object()) == 1.0);
  CHECK(sample_value(doc["smha_fabric_error_ports"], "smha_fabric_error_ports", {{"state", "over_threshold"}}) == 1.0);
  CHECK(sample_value(doc["smha_fabric_error_ports"], "smha_fabric_error_ports", {{"state", "read"}}) == 12.0);
  CHECK(sample_value(doc["smha_fabric_error_ports_rising"], "smha_fabric_error_ports_rising",
                     {{"counter", "link_downed"}}) == 0.0);
  CHECK(sample_value(doc["smha_fabric_counter_reads"], "smha_fabric_counter_reads_total", json::object()) == 410.0);
  CHECK(sample_value(doc["smha_fabric_counter_read_failures"], "smha_fabric_counter_read_failures_total",
                     {{"reason", "wrong_port"}}) == 2.0);
  CHECK(sample_value(doc["smha_fabric_counter_resets"], "smha_fabric_counter_resets_total", json::object()) == 1.0);
  CHECK(sample_value(doc["smha_fabric_port_error_rise"], "smha_fabric_port_error_rise",
                     {{"rank", "2"}, {"port", "\\x1b[2Jhca\\xff 0x000000000010000a port 1"}, {"counter", "PortRcvErrors"}}) ==
        12.0);
  CHECK(doc["smha_fabric_port_error_rise"]["samples"].size() == 2);
}

TEST_CASE("an empty snapshot still renders valid exposition text", "[control][metrics]") {
  MetricsSnapshot m;
  m.role = "unusual-role";
  auto text = render_prometheus(m);
  auto doc = parse_with_prometheus_client(text);
  REQUIRE_FALSE(doc.contains("error"));
  CHECK_FALSE(doc.contains("smha_last_takeover_duration_seconds"));
  CHECK_FALSE(doc.contains("smha_last_takeover_sa_restored"));
  CHECK(sample_value(doc["smha_role"], "smha_role", {{"node", ""}, {"role", "unusual-role"}}) == 1.0);
  CHECK(sample_value(doc["smha_poll_rtt_seconds"], "smha_poll_rtt_seconds_count", json::object()) == 0.0);
}

TEST_CASE("the parser used by these tests rejects malformed text", "[control][metrics]") {
  // Guards the test itself: the checker must be able to fail.
  auto doc = parse_with_prometheus_client("smha_x{le=\"1\" 3\n");
  CHECK(doc.contains("error"));
}

TEST_CASE("the exposition never carries the SM_Key's fingerprint, the other digests it does",
          "[control][metrics]") {
  MetricsSnapshot m;
  m.node = "head-a";
  m.role = "master";
  m.config_digests = {{"opensm_conf", "001122334455"}, {"ha_policy", "66778899aabb"}, {"sm_key", "a1b2c3d4e5f6"}};
  const std::string text = render_prometheus(m);
  CHECK(text.find("sm_key") == std::string::npos);
  CHECK(text.find("a1b2c3d4e5f6") == std::string::npos);
  auto doc = parse_with_prometheus_client(text);
  REQUIRE_FALSE(doc.contains("error"));
  CHECK(sample_value(doc["smha_config_digest_info"], "smha_config_digest_info",
                     {{"node", "head-a"}, {"opensm_conf", "001122334455"}, {"ha_policy", "66778899aabb"}}) == 1.0);
}
