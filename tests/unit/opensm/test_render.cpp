// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>

#include "smha/config/keys.hpp"
#include "smha/opensm/conf.hpp"
#include "test_support.hpp"

using namespace smha;
using namespace smha::opensm;
using namespace smha::os;
using namespace smha::opensm::test;

namespace {

struct GoldenCase {
  std::string name;
  RenderInputs inputs;
};

std::vector<GoldenCase> golden_cases() {
  return {
      {"head01", {14, Guid{0x0002c90300a1b2c1}, Flavor::Upstream, false, false}},
      {"head02", {13, Guid{0x0002c90300a1b2c2}, Flavor::Upstream, false, false}},
      {"nvidia_ar_sharp", {14, Guid{0x0002c90300a1b2c1}, Flavor::Nvidia, true, true}},
      // ca + port in the YAML: the daemon resolves the GUID and passes it in.
      {"extra_keys", {7, Guid{0x0002c90300a1b2c9}, Flavor::Upstream, false, false}},
  };
}

// Body = everything after the header's blank line.
std::string body_of(const std::string& text) {
  auto at = text.find("\n\n");
  REQUIRE(at != std::string::npos);
  return text.substr(at + 2);
}

}  // namespace

TEST_CASE("rendered opensm.conf matches the golden files") {
  // SMHA_UPDATE_GOLDEN=1 rewrites them (then review the diff before committing).
  const bool update = std::getenv("SMHA_UPDATE_GOLDEN") != nullptr;
  for (const auto& gc : golden_cases()) {
    INFO(gc.name);
    std::string rendered = render_opensm_conf(load_data_config(gc.name), gc.inputs);
    std::string golden_path = data_path("render/" + gc.name + ".conf");
    if (update) std::ofstream(golden_path) << rendered;
    CHECK(rendered == read_data("render/" + gc.name + ".conf"));
  }
}

TEST_CASE("rendering is deterministic and the header hash covers the body") {
  for (const auto& gc : golden_cases()) {
    INFO(gc.name);
    auto config = load_data_config(gc.name);
    std::string a = render_opensm_conf(config, gc.inputs);
    std::string b = render_opensm_conf(config, gc.inputs);
    CHECK(a == b);
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx",
                  static_cast<unsigned long long>(fnv1a64(body_of(a))));
    CHECK(header_hash(a) == std::string(hex));
    CHECK(a.rfind("# opensm.conf rendered by smha from " + gc.name + ".yaml\n", 0) == 0);
  }
}

TEST_CASE("a priority change changes only sm_priority and the hash") {
  auto config = load_data_config("head01");
  RenderInputs in{14, Guid{0x10}, Flavor::Upstream, false, false};
  std::string a = render_opensm_conf(config, in);
  in.sm_priority = 3;
  std::string b = render_opensm_conf(config, in);
  CHECK(header_hash(a) != header_hash(b));
  auto pa = parse_opensm_conf(a);
  auto pb = parse_opensm_conf(b);
  CHECK(pa.at("sm_priority") == "14");
  CHECK(pb.at("sm_priority") == "3");
  pa.erase("sm_priority");
  pb.erase("sm_priority");
  CHECK(pa == pb);
}

TEST_CASE("guid is rendered only when the port GUID is known") {
  auto config = load_data_config("extra_keys");
  auto without = parse_opensm_conf(render_opensm_conf(config, RenderInputs{}));
  CHECK(without.count("guid") == 0);
  RenderInputs in;
  in.port_guid = Guid{0xabc};
  CHECK(parse_opensm_conf(render_opensm_conf(config, in)).at("guid") == "0x0000000000000abc");
}

TEST_CASE("managed keys follow the config") {
  auto conf = parse_opensm_conf(
      render_opensm_conf(load_data_config("extra_keys"), {7, std::nullopt, Flavor::Upstream, false, false}));
  CHECK(conf.at("sm_priority") == "7");
  CHECK(conf.at("sm_key") == "0x0123456789abcdef");
  CHECK(conf.at("sa_key") == "0x00000000000f00d5");
  CHECK(conf.at("routing_engine") == "updn");
  CHECK(conf.at("sweep_interval") == "15");
  CHECK(conf.at("sminfo_polling_timeout") == "3000");
  CHECK(conf.at("polling_retry_number") == "3");
  CHECK(conf.at("log_file") == "/var/log/smha/opensm.log");
  CHECK(conf.at("dump_files_dir") == "/var/lib/smha/dump/");
  CHECK(conf.at("honor_guid2lid_file") == "TRUE");
  CHECK(conf.at("sa_db_dump") == "TRUE");
  CHECK(conf.at("sa_db_file") == "/var/lib/smha/opensm-sa.dump");
  CHECK(conf.at("qos") == "TRUE");
  CHECK(conf.at("drop_event_subscriptions") == "FALSE");
  CHECK(conf.at("packet_life_time") == "0x12");
  CHECK(conf.count("sharp_enabled") == 0);
}

TEST_CASE("force_log_flush TRUE is always rendered, once, and sa_key defaults to OpenSM's 0x1") {
  // OpenSM flushes its log only for ERROR/SYS lines otherwise: SUBNET UP (INFO)
  // would stay in its buffer, unseen by smhad.
  auto count = [](const std::string& text, const std::string& line) {
    std::size_t n = 0;
    for (std::size_t at = text.find(line); at != std::string::npos; at = text.find(line, at + 1))
      if (at == 0 || text[at - 1] == '\n') ++n;
    return n;
  };
  for (const auto& name : {"head01", "extra_keys", "nvidia_ar_sharp"}) {
    INFO(name);
    const std::string text = render_opensm_conf(load_data_config(name), RenderInputs{});
    CHECK(count(text, "force_log_flush ") == 1);
    CHECK(parse_opensm_conf(text).at("force_log_flush") == "TRUE");
  }
  auto r = config::load_config_from_string(
      "node:\n  name: a\n  port_guid: 0x10\nopensm:\n  extra:\n    force_log_flush: TRUE\n", "t.yaml");
  REQUIRE(r.ok());
  const std::string text = render_opensm_conf(r.value(), RenderInputs{});
  CHECK(count(text, "force_log_flush ") == 1);
  CHECK(parse_opensm_conf(text).at("sa_key") == "0x0000000000000001");
}

TEST_CASE("NVIDIA keys appear only for the nvidia flavor with the feature on") {
  auto config = load_data_config("nvidia_ar_sharp");
  auto up = parse_opensm_conf(render_opensm_conf(config, {14, std::nullopt, Flavor::Upstream, false, false}));
  CHECK(up.at("routing_engine") == "ftree,updn");
  CHECK(up.count("sharp_enabled") == 0);
  auto nv_plain = parse_opensm_conf(render_opensm_conf(config, {14, std::nullopt, Flavor::Nvidia, false, false}));
  CHECK(nv_plain.at("routing_engine") == "ftree,updn");
  CHECK(nv_plain.count("sharp_enabled") == 0);
  auto nv = parse_opensm_conf(render_opensm_conf(config, {14, std::nullopt, Flavor::Nvidia, true, true}));
  CHECK(nv.at("routing_engine") == "ar_ftree,ar_updn");
  CHECK(nv.at("sharp_enabled") == "2");
}

TEST_CASE("AR routing engine mapping") {
  CHECK(rendered_routing_engine("ftree,updn", false) == "ftree,updn");
  CHECK(rendered_routing_engine("ftree,updn", true) == "ar_ftree,ar_updn");
  CHECK(rendered_routing_engine("updn", true) == "ar_updn");
  CHECK(rendered_routing_engine("ar_updn", true) == "ar_updn");
  CHECK(rendered_routing_engine("dor,minhop", true) == "dor,minhop");
  CHECK(rendered_routing_engine("ftree,minhop", true) == "ar_ftree,minhop");
}

TEST_CASE("FNV-1a 64 reference values") {
  CHECK(fnv1a64("") == 0xcbf29ce484222325ULL);
  CHECK(fnv1a64("a") == 0xaf63dc4c8601ec8cULL);
  CHECK(fnv1a64("foobar") == 0x85944171f73967e8ULL);
}

TEST_CASE("parse_opensm_conf reads like OpenSM") {
  auto m = parse_opensm_conf(
      "# comment\n"
      "\n"
      "sm_priority 3   # trailing comment\n"
      "  log_file\t/var/log/x.log  \n"
      "node_name_map_name \"/etc/with space\"\n"
      "sa_db_file '/x'\n"
      "sm_priority 5\n"
      "lonely\n");
  CHECK(m.size() == 5);
  CHECK(m.at("sm_priority") == "5");
  CHECK(m.at("log_file") == "/var/log/x.log");
  CHECK(m.at("node_name_map_name") == "/etc/with space");
  CHECK(m.at("sa_db_file") == "/x");
  CHECK(m.at("lonely").empty());
  CHECK(header_hash("sm_priority 1\n") == std::nullopt);
}

TEST_CASE("max_wire_smps: smha's default 8, the YAML's value, or opensm.extra's, rendered once") {
  auto render = [](const std::string& yaml) {
    auto r = config::load_config_from_string("node:\n  name: a\n  port_guid: 0x10\n" + yaml, "t.yaml");
    REQUIRE(r.ok());
    return render_opensm_conf(r.value(), RenderInputs{});
  };
  auto count = [](const std::string& text) {
    std::size_t n = 0;
    for (std::size_t at = text.find("max_wire_smps "); at != std::string::npos; at = text.find("max_wire_smps ", at + 1))
      if (at == 0 || text[at - 1] == '\n') ++n;
    return n;
  };
  const std::string by_default = render("");
  CHECK(count(by_default) == 1);
  CHECK(parse_opensm_conf(by_default).at("max_wire_smps") == "8");
  const std::string set = render("opensm:\n  max_wire_smps: 4\n");
  CHECK(count(set) == 1);
  CHECK(parse_opensm_conf(set).at("max_wire_smps") == "4");
  // An smha.yaml from before the key: opensm.extra's line stands alone.
  const std::string extra = render("opensm:\n  extra:\n    max_wire_smps: 16\n");
  CHECK(count(extra) == 1);
  CHECK(parse_opensm_conf(extra).at("max_wire_smps") == "16");
}

TEST_CASE("set_sm_priority: the bytes render_opensm_conf gives at that priority, rendered once") {
  for (const auto& g : golden_cases()) {
    INFO(g.name);
    const auto cfg = load_data_config(g.name);
    const std::string once = render_opensm_conf(cfg, g.inputs);
    for (unsigned p = 0; p <= 15; ++p) {
      RenderInputs at = g.inputs;
      at.sm_priority = static_cast<std::uint8_t>(p);
      CHECK(set_sm_priority(once, static_cast<std::uint8_t>(p)) == render_opensm_conf(cfg, at));
    }
  }
  // Not smha's file: left as it is.
  CHECK(set_sm_priority("sm_priority 3\n", 9) == "sm_priority 3\n");
}

TEST_CASE("every opensm.conf key smha manages has the Reload effect OpenSM's table gives it") {
  // config::key_table's effect of the YAML key that sets it: SIGHUP where
  // OpenSM can re-apply the key (opt_tbl can_update), else a restart.
  for (const auto& [osm_key, managed] : config::managed_opensm_keys()) {
    const auto* info = find_opensm_key(osm_key);
    const auto* key = config::find_key(managed.path);
    INFO(osm_key << " <- " << managed.path);
    REQUIRE(info != nullptr);
    REQUIRE(key != nullptr);
    if (osm_key == "guid" || osm_key == "log_file" || osm_key == "dump_files_dir" || osm_key == "sa_db_file" ||
        osm_key == "routing_engine" || osm_key == "sharp_enabled") {
      CHECK_FALSE(info->reloadable);
      CHECK(key->effect != config::ReloadEffect::Sighup);
    } else {
      CHECK(info->reloadable);
      CHECK(key->effect != config::ReloadEffect::OpensmRestart);
    }
  }
}
