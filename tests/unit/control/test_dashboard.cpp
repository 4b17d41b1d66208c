// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// The shipped Grafana dashboard (packaging/grafana/smha-dashboard.json):
// Grafana's classic dashboard model, checked field by field (what Grafana
// needs to load it: uid, title, schemaVersion, panels with an id, a type, a
// gridPos within the 24-column grid and targets with an expression and a
// refId, the template variables the panels use), and every metric an
// expression names is one smhad renders, so a renamed metric cannot leave an
// empty panel.
#include <catch2/catch.hpp>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "rendered_names.hpp"

using namespace smha::control;
using nlohmann::json;


TEST_CASE("the Grafana dashboard loads: the classic model's fields, panels on the grid, metrics that exist",
          "[control][metrics]") {
  std::ifstream in(SMHA_SOURCE_DIR "/packaging/grafana/smha-dashboard.json");
  REQUIRE(in);
  const json d = json::parse(in);  // throws (fails the test) on a syntax error
  CHECK(d.at("uid").get<std::string>().size() <= 40);
  CHECK_FALSE(d.at("title").get<std::string>().empty());
  CHECK(d.at("schemaVersion").get<int>() >= 36);
  CHECK(d.at("time").at("from").is_string());
  CHECK(d.at("annotations").at("list").is_array());
  std::set<std::string> vars;
  for (const auto& v : d.at("templating").at("list")) {
    CHECK(v.at("type").is_string());
    vars.insert(v.at("name").get<std::string>());
  }
  CHECK(vars == std::set<std::string>{"datasource", "fabric"});

  const auto names = smha::control::test::rendered_metric_names();
  const std::regex metric(R"(\b(smha_[a-z0-9_]+)\b)");
  const std::regex variable(R"(\$\{?([a-z_]+)\}?)");
  const std::set<std::string> types{"row", "stat", "timeseries", "table", "state-timeline"};
  std::set<int> ids;
  std::set<std::string> used;
  std::size_t queried = 0;
  for (const auto& p : d.at("panels")) {
    INFO(p.dump());
    CHECK(ids.insert(p.at("id").get<int>()).second);
    CHECK(types.count(p.at("type").get<std::string>()));
    CHECK_FALSE(p.at("title").get<std::string>().empty());
    const auto& g = p.at("gridPos");
    CHECK(g.at("w").get<int>() >= 1);
    CHECK(g.at("h").get<int>() >= 1);
    CHECK(g.at("x").get<int>() >= 0);
    CHECK(g.at("x").get<int>() + g.at("w").get<int>() <= 24);
    CHECK(g.at("y").get<int>() >= 0);
    if (p["type"] == "row") continue;
    CHECK(p.at("datasource").at("uid") == "${datasource}");
    std::set<std::string> refs;
    for (const auto& t : p.at("targets")) {
      CHECK(refs.insert(t.at("refId").get<std::string>()).second);
      const std::string expr = t.at("expr").get<std::string>();
      REQUIRE_FALSE(expr.empty());
      ++queried;
      for (std::sregex_iterator it(expr.begin(), expr.end(), metric), end; it != end; ++it) {
        INFO(expr);
        CHECK(names.count((*it)[1].str()));
      }
      for (std::sregex_iterator it(expr.begin(), expr.end(), variable), end; it != end; ++it) {
        const std::string v = (*it)[1].str();
        if (v.rfind("__", 0) == 0) continue;  // Grafana's own ($__rate_interval)
        INFO(expr);
        CHECK(vars.count(v));
        used.insert(v);
      }
    }
  }
  CHECK(queried >= 10);
  CHECK(used.count("fabric"));
}
