// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// The shipped Prometheus alerting rules (packaging/prometheus/smha-alerts.yml):
// the file parses, every rule has what Prometheus and the operator need, and
// every metric an expression names is one smhad renders (or node_exporter's
// textfile mtime), so a renamed metric cannot leave a rule that never fires.
#include <catch2/catch.hpp>

#include <regex>
#include <set>
#include <sstream>
#include <string>

#include <yaml-cpp/yaml.h>

#include "rendered_names.hpp"

using namespace smha::control;


TEST_CASE("alert rules: every rule is complete and names metrics that exist", "[control][metrics]") {
  const YAML::Node doc = YAML::LoadFile(SMHA_SOURCE_DIR "/packaging/prometheus/smha-alerts.yml");
  const auto names = smha::control::test::rendered_metric_names();
  CHECK(names.count("smha_config_digest_info") == 1);
  const std::set<std::string> external{"node_textfile_mtime_seconds"};
  std::set<std::string> alerts;
  REQUIRE(doc["groups"].IsSequence());
  for (const auto& group : doc["groups"]) {
    REQUIRE(group["name"].IsScalar());
    for (const auto& rule : group["rules"]) {
      const std::string alert = rule["alert"].as<std::string>();
      INFO("alert " << alert);
      alerts.insert(alert);
      REQUIRE(rule["expr"].IsScalar());
      CHECK(rule["labels"]["severity"].IsScalar());
      CHECK(rule["annotations"]["summary"].IsScalar());
      const std::string expr = rule["expr"].as<std::string>();
      const std::regex metric(R"(\b(smha|node)_[a-z_]+)");
      int found = 0;
      for (auto it = std::sregex_iterator(expr.begin(), expr.end(), metric); it != std::sregex_iterator(); ++it) {
        const std::string name = it->str();
        INFO("metric " << name);
        CHECK((names.count(name) == 1 || external.count(name) == 1));
        ++found;
      }
      CHECK(found > 0);
      // Per fabric: every aggregation keeps the fabric label apart, so that
      // one fabric's master never hides another's absence.
      const std::regex aggregation(R"(\b(sum|max|min|count|avg)\b\s*(by\s*\(([^)]*)\))?\s*\()");
      for (auto it = std::sregex_iterator(expr.begin(), expr.end(), aggregation); it != std::sregex_iterator(); ++it) {
        INFO("aggregation " << it->str());
        CHECK((*it)[3].str().find("fabric") != std::string::npos);
      }
    }
  }
  // The textfile rule matches an instance's file too.
  CHECK(std::regex_search("/var/lib/prometheus/node-exporter/smha-rail1.prom", std::regex(".*smha(-[A-Za-z0-9_-]+)?\\.prom")));
  CHECK(alerts == std::set<std::string>{"SmhaTwoMasters", "SmhaNoMaster", "SmhaConfigDrift", "SmhaLinkDegraded",
                                        "SmhaLinkErrors", "SmhaSaCopyStale", "SmhaSaCopyTrimmed", "SmhaTakeoverLostGroups",
                                        "SmhaMetricsTextfileStale"});
}
