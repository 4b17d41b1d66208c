// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// Parses Prometheus exposition text with a real parser
// (python3-prometheus-client's text_string_to_metric_families), so tests check
// metrics output without ad-hoc pattern matching. Header-only; Catch2 asserts.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

namespace smha::testing {

// {family: {"type": T, "samples": [[name, {labels}, value], ...]}}, or the
// parser's error as {"error": "..."}.
inline nlohmann::json parse_with_prometheus_client(const std::string& text) {
  std::string tmpl = "/tmp/smha-prom-XXXXXX";
  REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
  const std::string input = tmpl + "/metrics.prom";
  const std::string script = tmpl + "/parse.py";
  std::ofstream(input) << text;
  std::ofstream(script) << R"PY(
import json, math, sys
from prometheus_client.parser import text_string_to_metric_families
out = {}
try:
    for fam in text_string_to_metric_families(open(sys.argv[1]).read()):
        out[fam.name] = {"type": fam.type, "samples": [
            [s.name, s.labels, "+Inf" if math.isinf(s.value) else s.value] for s in fam.samples]}
except Exception as e:
    out = {"error": repr(e)}
print(json.dumps(out))
)PY";
  // Debian's interpreter, which sees python3-prometheus-client (not a pyenv shim).
  std::string cmd = "/usr/bin/python3 " + script + " " + input;
  FILE* p = ::popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  std::string result;
  char buf[4096];
  while (std::size_t n = std::fread(buf, 1, sizeof(buf), p)) result.append(buf, n);
  int rc = ::pclose(p);
  std::error_code ec;
  std::filesystem::remove_all(tmpl, ec);
  INFO(result);
  REQUIRE(rc == 0);
  return nlohmann::json::parse(result);
}

// The value of sample `name` with exactly `labels` in family `fam`, or null.
inline nlohmann::json sample_value(const nlohmann::json& fam, const std::string& name, const nlohmann::json& labels) {
  if (!fam.is_object() || !fam.contains("samples")) return nullptr;
  for (const auto& s : fam["samples"]) {
    if (s[0] == name && s[1] == labels) return s[2];
  }
  return nullptr;
}

}  // namespace smha::testing
