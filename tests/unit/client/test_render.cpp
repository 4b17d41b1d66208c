// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// smctl's human rendering of smhad's replies: status (master, drift, SMs,
// guid2lid, escaping), sms, health, and durations rounded for people.
#include <catch2/catch.hpp>

#include <string>

#include <nlohmann/json.hpp>

#include "smha/client/render.hpp"

using namespace smha;
using namespace smha::client;

TEST_CASE("status shows the master, since when, and the last takeover or handover") {
  auto j = nlohmann::json::parse(R"({
    "node":"head01","role":"standby",
    "mastership":{"guid":"0x20","node":"head02","since":"2026-12-03T15:02:11.123Z","for_s":7980.2,"exact":true},
    "last_change":{"kind":"handover","reason":"by request: push: target head02","outcome":"done",
                   "time":"2026-12-03T15:02:10.900Z","duration_s":0.2234}})");
  std::string t = render_status_text(j);
  CHECK(t.find("Master: head02 (0x20) since 2026-12-03T15:02:11.123Z, 2h13m\n") != std::string::npos);
  CHECK(t.find("Changed: handover (by request: push: target head02) at 2026-12-03T15:02:10.900Z, done in 223ms\n") !=
        std::string::npos);
  j["mastership"]["exact"] = false;
  j["mastership"]["node"] = "";
  t = render_status_text(j);
  CHECK(t.find("Master: unknown SM (0x20) since at least 2026-12-03T15:02:11.123Z, 2h13m") != std::string::npos);
  j["mastership"]["guid"] = nullptr;
  t = render_status_text(j);
  CHECK(t.find("Master: none since 2026-12-03T15:02:11.123Z, 2h13m") != std::string::npos);
}

TEST_CASE("status shows each peer's config drift verdict (doc/drift.md)") {
  auto j = nlohmann::json::parse(R"({
    "node":"head01","role":"master",
    "drift":{"own":{"partitions":"00112233445566"},
             "peers":[{"name":"head02","state":"drift","detail":"partitions, qos differ"},
                      {"name":"head03","state":"unknown","detail":"no smha record at the SA"}]},
    "alarms":[{"kind":"config_drift","detail":"head02 (0x20): partitions, qos differ"}]})");
  std::string t = render_status_text(j);
  CHECK(t.find("    Drift: head02 drift (partitions, qos differ)\n"
               "           head03 unknown (no smha record at the SA)\n") != std::string::npos);
  CHECK(t.find("Alarms: config_drift (head02 (0x20): partitions, qos differ)") != std::string::npos);
  j["drift"]["own"] = nullptr;
  t = render_status_text(j);
  CHECK(t.find("Drift: (own digests not computed) head02 drift") != std::string::npos);
  j.erase("drift");
  CHECK(render_status_text(j).find("Drift:") == std::string::npos);
}

TEST_CASE("SMs on the fabric: status lines and the smctl sms table, escaped") {
  using nlohmann::json;
  const json sms = json::parse(R"([
    {"guid":"0x10","head":"head01","local":true,"node_description":"head01","lid":1,"state":"MASTER",
     "priority":14,"switch_guid":"0x200000","switch_port":3,"last_answer_age_s":0.05},
    {"guid":"0x100009","head":null,"local":false,"node_description":"node07 \u001b[2J","lid":5,
     "state":"STANDBY","priority":0,"switch_guid":"0x200001","switch_port":3,"last_answer_age_s":1.5},
    {"guid":"0x100011","head":null,"local":false,"node_description":null,"lid":null,"state":"unknown",
     "priority":null,"switch_guid":null,"switch_port":null,"last_answer_age_s":null}])");
  json st = json::object();
  st["sms"] = sms;
  const std::string t = render_status_text(st);
  CHECK(t.find("      SMs:\n           this node  MASTER  prio 14  guid 0x10  lid 1  \"head01\"  at 0x200000 port 3\n") !=
        std::string::npos);
  CHECK(t.find("NOT A HEAD  STANDBY  prio 0  guid 0x100009  lid 5  \"node07 \\x1b[2J\"  at 0x200001 port 3\n") !=
        std::string::npos);
  const json reply = {{"sms", sms},
                      {"census", {{"enabled", true}, {"walks", 2}, {"walk_mads", 62}, {"query_mads", 4},
                                  {"last_walk_age_s", 3.0}, {"next_walk_in_s", 57.0},
                                  {"last_walk", {{"nodes", 6}, {"ports", 22}, {"mads", 31}, {"sm_ports", 3}}}}}};
  const std::string tab = render_sms_text(reply);
  INFO(tab);
  CHECK(tab.find("* 0x10") != std::string::npos);
  CHECK(tab.find("! 0x100009") != std::string::npos);
  CHECK(tab.find("node07 \\x1b[2J") != std::string::npos);
  CHECK(tab.find('\x1b') == std::string::npos);
  CHECK(tab.find("! 0x100011           unknown") != std::string::npos);
  CHECK(tab.find("never") != std::string::npos);
  CHECK(tab.find("Census: 2 walks (62 MADs), 4 SMInfo MADs; last walk 3.0s ago: 6 nodes, 22 ports, 31 MADs, 3 IsSM ports; next in 57s") !=
        std::string::npos);
  CHECK(tab.find("SA table") == std::string::npos);  // an smhad without it: no line

  // The SA table line: asked, answered, records of claimed, truncated, the last error.
  json with_sa = reply;
  with_sa["census"]["sa"] = {{"sa_lid", 3}, {"queries", 4}, {"tables", 3}, {"mads", 5}, {"last_age_s", 12.0},
                             {"records", 6}, {"claimed", 9}, {"truncated", true},
                             {"last_error", "timeout: no answer after 2 attempt(s) of 500 ms"}};
  const std::string sa = render_sms_text(with_sa);
  INFO(sa);
  CHECK(sa.find("SA table: lid 3, 3 of 4 answered (5 MADs); last 12s ago: 6 records of 9, TRUNCATED; "
                "last error: timeout: no answer after 2 attempt(s) of 500 ms\n") != std::string::npos);
  with_sa["census"]["sa"] = {{"sa_lid", nullptr}, {"queries", 0}, {"tables", 0}, {"mads", 0},
                             {"last_age_s", nullptr}, {"records", nullptr}, {"claimed", nullptr},
                             {"truncated", false}, {"last_error", nullptr}};
  CHECK(render_sms_text(with_sa).find("SA table: not asked yet\n") != std::string::npos);
}

TEST_CASE("smctl health: off, not yet assessed, healthy, and degraded links worst first, escaped") {
  CHECK(render_health_text(nlohmann::json::parse(R"({"health":{"enabled":false}})")).find("Fabric health is off") == 0);
  CHECK(render_health_text(nlohmann::json::parse(R"({"health":{"enabled":true,"assessed":false}})"))
            .find("No census walk assessed yet") == 0);
  auto reply = nlohmann::json::parse(R"({"node":"head01","health":{"enabled":true,"assessed":true,"walk_age_s":12,
    "links":6,"links_by_kind":{"switch-switch":2,"switch-ca":4,"other":0},"unknown":0,"degraded_total":0,
    "degraded":[]}})");
  std::string t = render_health_text(reply);
  CHECK(t.find("Links: 6 assessed (switch-ca 4, switch-switch 2), 0 not decoded; census walk 12s ago\n") == 0);
  CHECK(t.find("Degraded links: none\n") != std::string::npos);
  reply["health"]["degraded_total"] = 2;
  reply["health"]["degraded"] = nlohmann::json::parse(R"([{"a":{"guid":"0x0000000000200001","port":2,
      "node_description":"Switch2"},"b":{"guid":"0x000000000010000a","port":1,"node_description":"h\u001b[2J"},
      "kind":"switch-ca","active":"1X SDR","should":"4X SDR","why":"below_tier",
      "detail":"3 of 4 switch-ca links run at 4X","degraded_for_s":125}])");
  t = render_health_text(reply);
  CHECK(t.find("Degraded links: 2 (the worst 1 shown), worst first\n") != std::string::npos);
  CHECK(t.find("1X SDR   4X SDR   below_tier       2m05s  \"Switch2\" 0x0000000000200001 port 2 <-> \"h") !=
        std::string::npos);
  CHECK(t.find('\x1b') == std::string::npos);
  CHECK(t.find("(switch-ca: 3 of 4 switch-ca links run at 4X)") != std::string::npos);
}

TEST_CASE("the human status shows role, local SM, OpenSM, peers and alarms") {
  const auto j = nlohmann::json::parse(R"({
    "node":"head01","role":"Master","observe":false,"smhad_version":"0.1.0","uptime_s":7980.4,
    "local":{"state":"MASTER","priority":14,"guid":"0x10","lid":1,"act_count":99,"last_poll_age_s":0.05,
             "port_state":"DOWN","port_state_source":"smp","port_state_age_s":0.02},
    "opensm":{"supervisor":"running","pid":1234,"uptime_s":12.5,"restarts":1,"adopted":true,"reason":""},
    "peers":[{"name":"head02","state":"STANDBY","priority":13,"guid":"0x20","lid":7,"rtt_ms":0.4,"last_answer_age_s":0.1,
              "node_description":"head02 mlx5_0\\x0a","dr_path":"0,1,3,1"}],
    "policy":{"poll_interval_ms":100,"misses":3,"failback":"sticky","base_priority":13},
    "alarms":[{"kind":"two_masters","detail":"x"}],
    "hold":{"held":false},
    "last_transition":{"reason":"STANDBY->MASTER","evidence":"takeover_done","time":"T"}})");
  const std::string t = render_status_text(j);
  CHECK(t.find(" smhad head01 - managing OpenSM\n") != std::string::npos);
  CHECK(t.find("Role: Master") != std::string::npos);
  auto instance = j;
  instance["fabric"] = "rail1";
  CHECK(render_status_text(instance).find(" smhad@rail1 head01 - managing OpenSM\n") != std::string::npos);
  instance["fabric"] = nullptr;  // a one-fabric head
  CHECK(render_status_text(instance).find(" smhad head01 - managing OpenSM\n") != std::string::npos);
  CHECK(t.find("Local SM: MASTER  prio 14") != std::string::npos);
  CHECK(t.find("Port: DOWN  (smp, PortInfo 20ms ago)") != std::string::npos);
  CHECK(t.find("smhad: 0.1.0, up 2h13m") != std::string::npos);
  CHECK(t.find("uptime 12s") != std::string::npos);
  CHECK(t.find("rtt 0.40 ms  (100ms ago)") != std::string::npos);
  CHECK(t.find("pid 1234") != std::string::npos);
  CHECK(t.find("(adopted)") != std::string::npos);
  CHECK(t.find("head02  STANDBY  prio 13") != std::string::npos);
  CHECK(t.find("(100ms ago)  \"head02 mlx5_0\\x0a\"  dr 0,1,3,1") != std::string::npos);
  CHECK(t.find("two_masters") != std::string::npos);
  CHECK(t.find("STANDBY->MASTER (takeover_done)") != std::string::npos);
}

TEST_CASE("the human status and events escape what the fabric or OpenSM wrote") {
  // As smctl gets it: JSON carries ESC as \u001b; invalid UTF-8 was replaced
  // by the server, but a raw byte string is escaped all the same.
  auto j = nlohmann::json::parse(R"({
    "node":"head01","role":"Master",
    "opensm":{"supervisor":"failed","pid":0,"restarts":0,"reason":"OpenSM: \"\u001b[2J\u001b]0;owned\u0007\""},
    "peers":[{"name":"head02","state":"STANDBY"}],
    "alarms":[{"kind":"unknown_sm","detail":"node \u009b31mred\u202e"}]})");
  j["peers"][0]["name"] = std::string("head02\xe9\x1b[31m");
  const std::string t = render_status_text(j);
  INFO(t);
  CHECK(t.find('\x1b') == std::string::npos);
  CHECK(t.find('\x07') == std::string::npos);
  CHECK(t.find("OpenSM: \"\\x1b[2J\\x1b]0;owned\\x07\"") != std::string::npos);
  CHECK(t.find("head02\\xe9\\x1b[31m  STANDBY") != std::string::npos);
  CHECK(t.find("unknown_sm (node \\u009b31mred\\u202e)") != std::string::npos);

  const auto ev = nlohmann::json::parse(
      R"({"events":[{"time":"T","kind":"opensm_state","reason":"log \u001b[1mbold","evidence":"x\ny"}]})");
  const std::string e = render_events_text(ev);
  CHECK(e == "T  opensm_state  log \\x1b[1mbold  [x\\x0ay]\n");
}

TEST_CASE("durations and round-trip times are rounded for people") {
  CHECK(human_duration(0.384122) == "384ms");
  CHECK(human_duration(4.26) == "4.3s");
  CHECK(human_duration(42.9) == "42s");
  CHECK(human_duration(1918.028497873) == "31m58s");
  CHECK(human_duration(7980) == "2h13m");
  CHECK(human_duration(3 * 86400 + 4 * 3600 + 59) == "3d04h");
  CHECK(human_duration(-1) == "-");
  CHECK(human_ms(0.384122) == "0.38 ms");
  CHECK(human_ms(12.34) == "12.3 ms");
  CHECK(human_ms(250.4) == "250 ms");
}

TEST_CASE("status shows the guid2lid smhad keeps (LID continuity), or that it keeps none") {
  auto j = nlohmann::json::parse(R"({"lid_continuity":{"enabled":true,"honor_guid2lid_file":true,
    "path":"/var/cache/opensm/guid2lid","state":"writing","entries":6,"kept":2,"writes":3,
    "last_written_age_s":41.2,"file_skipped":1,"last_error":null,
    "rejected":{"bad_lid":1,"duplicate_lid":2,"conflict":0}}})");
  std::string t = render_status_text(j);
  CHECK(t.find(" guid2lid: 6 entries (2 kept for ports not seen now), writing, written 3x, last 41s ago; "
               "/var/cache/opensm/guid2lid\n"
               "           refused: 1 bad LID, 2 duplicate LID, 0 conflicting; file records skipped 1\n") !=
        std::string::npos);
  j["lid_continuity"]["state"] = "error";
  j["lid_continuity"]["last_error"] = "write /var/cache/opensm/guid2lid: No space left on device";
  t = render_status_text(j);
  CHECK(t.find("file records skipped 1; error: write /var/cache/opensm/guid2lid: No space left on device\n") !=
        std::string::npos);
  t = render_status_text(nlohmann::json::parse(R"({"lid_continuity":{"enabled":false,"honor_guid2lid_file":false}})"));
  CHECK(t.find(" guid2lid: not kept by smhad (honor_guid2lid_file FALSE)\n") != std::string::npos);
}
