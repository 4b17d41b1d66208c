// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include <catch2/catch.hpp>

#include <algorithm>

#include "smha/opensm/conf.hpp"
#include "test_support.hpp"

using namespace smha;
using namespace smha::opensm;
using namespace smha::os;
using Kind = ReloadDecision::Kind;

TEST_CASE("the key table mirrors OpenSM's opt_tbl can_update") {
  const auto& table = opensm_key_table();
  // 3.3.23 opt_tbl has 161 entries (with perfmgr), plus NVIDIA's sharp_enabled.
  CHECK(table.size() == 162);
  CHECK(std::is_sorted(table.begin(), table.end(),
                       [](const KeyInfo& a, const KeyInfo& b) { return a.name < b.name; }));
  struct Row {
    const char* key;
    bool reloadable;
  };
  for (Row r : {Row{"sm_priority", true}, Row{"sminfo_polling_timeout", true},
                Row{"polling_retry_number", true}, Row{"sweep_interval", true},
                Row{"honor_guid2lid_file", true}, Row{"sa_db_dump", true}, Row{"sm_key", true},
                Row{"guid", false}, Row{"routing_engine", false}, Row{"sa_db_file", false},
                Row{"log_file", false}, Row{"dump_files_dir", false}, Row{"console", false},
                Row{"sharp_enabled", false}}) {
    INFO(r.key);
    const KeyInfo* k = find_opensm_key(r.key);
    REQUIRE(k != nullptr);
    CHECK(k->reloadable == r.reloadable);
  }
  CHECK(find_opensm_key("sharp_enabled")->origin == "nvidia");
  CHECK(find_opensm_key("sm_priority")->origin == "upstream");
  CHECK(find_opensm_key("priority") == nullptr);
  CHECK(find_opensm_key("") == nullptr);
}

TEST_CASE("classify_change: none, sighup, restart") {
  const std::string base =
      "# header\nguid 0x10\nsm_priority 14\nrouting_engine ftree,updn\nsweep_interval 10\n";
  SECTION("identical, or only comments and the header differ") {
    auto d = classify_change(base, "# other header\n" + base + "# trailing\n");
    CHECK(d.kind == Kind::None);
    CHECK(d.key.empty());
    CHECK(d.changed.empty());
  }
  SECTION("only the priority") {
    std::string next = base;
    next.replace(next.find("sm_priority 14"), 14, "sm_priority 3");
    auto d = classify_change(base, next);
    CHECK(d.kind == Kind::Sighup);
    CHECK(d.changed == std::vector<std::string>{"sm_priority"});
  }
  SECTION("reloadable keys added and removed") {
    auto d = classify_change(base + "sa_db_dump TRUE\n", base + "honor_guid2lid_file TRUE\n");
    CHECK(d.kind == Kind::Sighup);
    CHECK(d.changed == std::vector<std::string>{"honor_guid2lid_file", "sa_db_dump"});
  }
  SECTION("the routing engine forces a restart and is named") {
    std::string next = base;
    next.replace(next.find("ftree,updn"), 10, "minhop");
    next.replace(next.find("sm_priority 14"), 14, "sm_priority 3");
    auto d = classify_change(base, next);
    CHECK(d.kind == Kind::Restart);
    CHECK(d.key == "routing_engine");
    CHECK(d.changed == std::vector<std::string>{"routing_engine", "sm_priority"});
  }
  SECTION("a removed non-reloadable key restarts") {
    auto d = classify_change(base, "sm_priority 14\nrouting_engine ftree,updn\nsweep_interval 10\n");
    CHECK(d.kind == Kind::Restart);
    CHECK(d.key == "guid");
  }
  SECTION("a key missing from the table restarts") {
    auto d = classify_change(base, base + "ar_mode 2\n");
    CHECK(d.kind == Kind::Restart);
    CHECK(d.key == "ar_mode");
  }
  SECTION("the first non-reloadable key by name is reported") {
    auto d = classify_change(base, base + "sa_db_file /x\nlog_file /y\n");
    CHECK(d.kind == Kind::Restart);
    CHECK(d.key == "log_file");
    CHECK(d.changed == std::vector<std::string>{"log_file", "sa_db_file"});
  }
  CHECK(to_string(Kind::None) == "none");
  CHECK(to_string(Kind::Sighup) == "sighup");
  CHECK(to_string(Kind::Restart) == "restart");
}

TEST_CASE("classify_change on rendered files: priority only is a SIGHUP") {
  auto config = test::load_data_config("head01");
  RenderInputs in{14, Guid{0x10}, Flavor::Upstream, false, false};
  std::string a = render_opensm_conf(config, in);
  in.sm_priority = 2;
  auto d = classify_change(a, render_opensm_conf(config, in));
  CHECK(d.kind == Kind::Sighup);
  CHECK(d.changed == std::vector<std::string>{"sm_priority"});
  in.port_guid = Guid{0x11};
  d = classify_change(a, render_opensm_conf(config, in));
  CHECK(d.kind == Kind::Restart);
  CHECK(d.key == "guid");
}

TEST_CASE("diff_lines") {
  CHECK(diff_lines("a\nb\n", "a\nb\n", "old", "new").empty());
  CHECK(diff_lines("a\nb\nc\n", "a\nB\nc\n", "old", "new") ==
        "--- old\n+++ new\n a\n-b\n+B\n c\n");
  CHECK(diff_lines("", "x\n", "old", "new") == "--- old\n+++ new\n+x\n");
  CHECK(diff_lines("x\ny\n", "y\n", "o", "n") == "--- o\n+++ n\n-x\n y\n");
}
