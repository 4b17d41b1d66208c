// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/opensm/check.hpp"

#include "smha/opensm/cli.hpp"

#include <algorithm>
#include <charconv>
#include <set>
#include <sstream>

namespace smha::opensm {

namespace {

// Routing engines built into upstream OpenSM 3.3.x (osm_opensm.c
// static_routing_modules[], plus the "no_fallback" chain modifier).
const std::set<std::string, std::less<>> kUpstreamEngines = {
    "none", "minhop", "updn", "dnup", "file", "ftree", "lash", "dor",
    "torus-2QoS", "nue", "dfsssp", "sssp", "no_fallback"};

// The YAML key that produces each managed opensm.conf key.
std::string yaml_key_for(std::string_view conf_key) {
  const auto& keys = config::managed_opensm_keys();
  if (auto it = keys.find(conf_key); it != keys.end()) return it->second.path;
  return "opensm.extra." + std::string(conf_key);
}

Diagnostic at_key(const config::Config& c, const std::string& key_path, std::string message) {
  return Diagnostic{c.source_path, c.position_of(key_path), key_path, std::move(message)};
}

std::optional<unsigned long long> as_number(std::string_view s) {
  int base = 10;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    s.remove_prefix(2);
    base = 16;
  }
  unsigned long long v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v, base);
  if (s.empty() || ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

// Same value as OpenSM prints it? Numbers compare by value (OpenSM prints some
// in hex, e.g. packet_life_time 0x12).
bool same_value(std::string_view given, std::string_view taken) {
  if (given == taken) return true;
  auto a = as_number(given);
  auto b = as_number(taken);
  return a && b && *a == *b;
}

}  // namespace

RenderPlan plan_render(const config::Config& c, const Capabilities& caps,
                       std::uint8_t sm_priority, std::optional<Guid> port_guid) {
  RenderPlan plan;
  plan.inputs.sm_priority = sm_priority;
  plan.inputs.port_guid = port_guid;
  const auto& o = c.opensm;
  switch (o.flavor) {
    case config::OpensmFlavor::Auto: plan.inputs.flavor = caps.flavor; break;
    case config::OpensmFlavor::Upstream: plan.inputs.flavor = Flavor::Upstream; break;
    case config::OpensmFlavor::Nvidia:
      plan.inputs.flavor = Flavor::Nvidia;
      if (caps.flavor != Flavor::Nvidia) {
        plan.errors.push_back(at_key(c, "opensm.flavor",
                                     "is nvidia, but " + caps.describe() +
                                         " knows none of NVIDIA SM's keys (sharp_enabled, ar_mode)"));
      }
      break;
  }
  const bool nvidia = plan.inputs.flavor == Flavor::Nvidia;
  auto unsupported = [&](const char* key, const char* what, bool& effective) {
    std::string msg = "is true, but " + caps.describe() + " cannot do " + what;
    if (o.downgrade_unsupported) {
      plan.warnings.push_back(at_key(c, key, msg + "; rendering without it (downgrade_unsupported)"));
      effective = false;
    } else {
      plan.errors.push_back(at_key(c, key, msg + " (set opensm.downgrade_unsupported: true to run without it)"));
    }
  };
  if (o.adaptive_routing) {
    if (nvidia && caps.adaptive_routing) {
      plan.inputs.adaptive_routing = true;
      std::string engines = rendered_routing_engine(o.routing_engine, true);
      if (engines.find("ar_") == std::string::npos) {
        plan.errors.push_back(at_key(c, "opensm.routing_engine",
                                     "has no engine with an adaptive-routing variant (ftree or "
                                     "updn), so adaptive_routing: true would do nothing"));
      }
    } else {
      unsupported("opensm.adaptive_routing", "adaptive routing", plan.inputs.adaptive_routing);
    }
  }
  // An NVIDIA SM that knows sharp_enabled always gets it, so `sharp: false`
  // is rendered as disabled (recent NVIDIA SM releases enable SHARP by default).
  plan.inputs.sharp_key = nvidia && caps.sharp;
  if (o.sharp) {
    if (nvidia && caps.sharp) {
      plan.inputs.sharp = true;
    } else {
      unsupported("opensm.sharp", "SHARP", plan.inputs.sharp);
    }
  }
  for (const auto& e : o.extra) {
    if (e.key == "no_clients_rereg" && e.value == "TRUE") {
      plan.warnings.push_back(at_key(c, "opensm.extra.no_clients_rereg", kNoClientsReregWarning));
    }
  }
  if (!nvidia) {
    for (const std::string& name : config::split_routing_engines(o.routing_engine)) {
      if (kUpstreamEngines.count(name) == 0) {
        plan.errors.push_back(at_key(
            c, "opensm.routing_engine",
            "engine '" + name + "' is not built into " + caps.describe() +
                "; OpenSM would fall back to minhop (built in: none, minhop, updn, dnup, file, "
                "ftree, lash, dor, torus-2QoS, nue, dfsssp, sssp)"));
      }
    }
  }
  return plan;
}

std::vector<std::string> rendered_routing_engines(const config::Config& config,
                                                  const Capabilities& caps) {
  // Priority and GUID do not change the plan's routing decision.
  const bool adaptive = plan_render(config, caps, 0, std::nullopt).inputs.adaptive_routing;
  return config::split_routing_engines(
      rendered_routing_engine(config.opensm.routing_engine, adaptive));
}

std::vector<Diagnostic> check_rendered_keys(const config::Config& c, std::string_view rendered,
                                            const Capabilities& caps) {
  std::vector<Diagnostic> errors;
  for (const auto& [key, value] : parse_opensm_conf(rendered)) {
    if (caps.knows(key)) continue;
    errors.push_back(at_key(c, yaml_key_for(key),
                            "opensm.conf key '" + key + "' is not known to " + caps.describe() +
                                " (it would ignore it with only an \"Unrecognized token\" line)"));
  }
  return errors;
}

std::vector<Diagnostic> verify_accepted(OpensmRunner& runner, const config::Config& c,
                                        std::string_view rendered, const Capabilities& caps) {
  std::vector<Diagnostic> errors;
  auto out = runner.run(caps.binary, rendered);
  if (!out.ok()) {
    errors.push_back({c.source_path, {}, "opensm.binary",
                      "could not have " + caps.binary + " read the rendered file: " +
                          out.error().message});
    return errors;
  }
  // " Unrecognized token: \"<key>\"" (osm_subn_parse_conf_file).
  std::istringstream lines(out->output);
  for (std::string line; std::getline(lines, line);) {
    auto at = line.find("Unrecognized token: \"");
    if (at == std::string::npos) continue;
    std::string key = line.substr(at + 21);
    key = key.substr(0, key.find('"'));
    errors.push_back(at_key(c, yaml_key_for(key),
                            caps.describe() + " does not know opensm.conf key '" + key +
                                "' (\"Unrecognized token\")"));
  }
  ConfMap taken = parse_opensm_conf(out->dump);
  for (const auto& [key, value] : parse_opensm_conf(rendered)) {
    auto it = taken.find(key);
    if (it == taken.end()) continue;  // reported above
    if (!same_value(value, it->second)) {
      errors.push_back(at_key(c, yaml_key_for(key),
                              caps.describe() + " read opensm.conf key '" + key + "' as '" +
                                  it->second + "', not '" + value + "'"));
    }
  }
  return errors;
}

PreparedConf prepare_opensm_conf(const config::Config& c, const Capabilities& caps,
                                 std::uint8_t sm_priority, std::optional<Guid> port_guid,
                                 const os::FileSystem* policy_fs) {
  PreparedConf out;
  auto plan = plan_render(c, caps, sm_priority, port_guid);
  out.inputs = plan.inputs;
  if (policy_fs) out.inputs.policy_files = hash_policy_files(c, *policy_fs);
  out.warnings = std::move(plan.warnings);
  if (!plan.ok()) {
    out.errors = std::move(plan.errors);
    return out;
  }
  std::string rendered = render_opensm_conf(c, out.inputs);
  out.errors = check_rendered_keys(c, rendered, caps);
  if (out.errors.empty()) out.rendered = std::move(rendered);
  return out;
}

CheckReport check_loaded_config(const config::Config& c, OpensmRunner& runner) {
  CheckReport report;
  auto caps = probe_opensm(runner, c.opensm.binary);
  if (!caps.ok()) {
    report.errors.push_back(at_key(c, "opensm.binary", "probe failed: " + caps.error().message));
    return report;
  }
  report.capabilities = *caps;
  // Every stage runs whatever the earlier ones found, so one run shows every
  // problem: the plan's, then the keys the binary does not know in what that
  // plan renders, then what the binary itself refuses or changes in it.
  const ReadOnlyFileSystem fs;
  auto plan = plan_render(c, *caps, static_cast<std::uint8_t>(c.sm_priority), c.port.port_guid);
  plan.inputs.policy_files = hash_policy_files(c, fs);
  report.warnings = std::move(plan.warnings);
  for (auto& w : config::key_warnings(c)) report.warnings.push_back(std::move(w));
  report.errors = std::move(plan.errors);
  std::string rendered = render_opensm_conf(c, plan.inputs);
  const auto unknown = check_rendered_keys(c, rendered, *caps);
  report.errors.insert(report.errors.end(), unknown.begin(), unknown.end());
  for (auto& d : verify_accepted(runner, c, rendered, *caps)) {
    // A key check_rendered_keys named is also an "Unrecognized token": once is enough.
    const bool named = std::any_of(unknown.begin(), unknown.end(),
                                   [&](const Diagnostic& u) { return u.key_path == d.key_path; });
    if (!named) report.errors.push_back(std::move(d));
  }
  if (report.errors.empty()) report.rendered = std::move(rendered);
  return report;
}

CheckReport check_config(const std::string& path, OpensmRunner& runner) {
  auto loaded = config::load_config(path);
  if (!loaded.ok()) {
    CheckReport report;
    report.errors = loaded.errors();
    return report;
  }
  return check_loaded_config(loaded.value(), runner);
}

}  // namespace smha::opensm
