// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/service/instances.hpp"

#include <algorithm>
#include <filesystem>
#include <functional>
#include <system_error>

namespace smha::service {

namespace fs = std::filesystem;

std::string instance_of_file(const std::string& path) {
  const fs::path p(path);
  if (p.extension() != ".yaml") return {};
  const std::string stem = p.stem().string();
  return stem == "smha" ? std::string() : stem;
}

namespace {

std::string unit_of(const config::Config& c) {
  return c.fabric.empty() ? std::string("smhad.service") : "smhad@" + c.fabric;
}

// What two instances may not share, as (name, value) pairs: empty values are
// not in use.
std::vector<std::pair<std::string, std::string>> resources(const config::Config& c) {
  std::vector<std::pair<std::string, std::string>> r;
  if (c.port.port_guid) r.emplace_back("node.port_guid", to_string(*c.port.port_guid));
  else if (!c.port.ca.empty()) r.emplace_back("node.ca/node.port", c.port.ca + " port " + std::to_string(c.port.port));
  r.emplace_back("state_dir", c.state_dir);
  r.emplace_back("control.socket", c.control.socket_path);
  r.emplace_back("opensm.conf_path", c.opensm.conf_path);
  r.emplace_back("opensm.cache_dir", c.opensm.cache_dir);
  r.emplace_back("opensm.log_file", c.opensm.log_file);
  r.emplace_back("opensm.dump_files_dir", c.opensm.dump_files_dir);
  if (!c.metrics.listen_address.empty())
    r.emplace_back("metrics.listen", c.metrics.listen_address + " port " + std::to_string(c.metrics.listen_port));
  if (!c.metrics.textfile_dir.empty())
    r.emplace_back("metrics textfile", c.metrics.textfile_dir + "/" + c.metrics.textfile_name);
  return r;
}

// Two spellings of one directory or file ("/var/log/" and "/var/log").
std::string normal(const std::string& v) {
  if (v.empty() || v[0] != '/') return v;
  std::string n = fs::path(v).lexically_normal().string();
  while (n.size() > 1 && n.back() == '/') n.pop_back();
  return n;
}

}  // namespace

bool instance_enabled(const std::string& name, const std::string& units_dir) {
  const std::string unit = name.empty() ? std::string("smhad.service") : "smhad@" + name + ".service";
  std::error_code ec;
  std::size_t seen = 0;
  for (fs::directory_iterator it(units_dir, ec), end; !ec && it != end && seen < 1024; it.increment(ec), ++seen) {
    const auto& d = it->path();
    if (d.extension() != ".wants") continue;
    std::error_code lec;
    if (fs::is_symlink(d / unit, lec) || fs::exists(d / unit, lec)) return true;
  }
  return false;
}

std::vector<std::string> instance_conflicts(const config::Config& mine, const std::string& units_dir,
                                            std::size_t max_files) {
  std::vector<std::string> out;
  if (mine.source_path.empty()) return out;
  const fs::path dir = fs::path(mine.source_path).parent_path();
  std::error_code ec;
  std::vector<fs::path> files;
  for (fs::directory_iterator it(dir.empty() ? fs::path(".") : dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().extension() != ".yaml") continue;
    std::error_code tec;
    if (!it->is_regular_file(tec)) continue;
    if (fs::equivalent(it->path(), mine.source_path, tec)) continue;
    files.push_back(it->path());
    if (files.size() >= max_files) break;
  }
  std::sort(files.begin(), files.end());
  const auto own = resources(mine);
  for (const auto& f : files) {
    const std::string name = instance_of_file(f.string());
    auto other = config::load_config(f.string(), config::LoadOptions{name});
    if (!other.ok()) continue;
    const auto& oc = other.value();
    std::error_code sec;
    const bool running = fs::is_socket(oc.control.socket_path, sec);
    if (!running && !instance_enabled(name, units_dir)) continue;
    for (const auto& [what, value] : resources(oc)) {
      const bool shared = std::any_of(own.begin(), own.end(), [&, &w = what, &v = value](const auto& m) {
        return m.first == w && normal(m.second) == normal(v);
      });
      if (shared)
        out.push_back(what + " " + value + " is also the " + what + " of " + f.string() + " (" + unit_of(oc) +
                      "): two instances may not share it; give each its own");
    }
  }
  return out;
}

}  // namespace smha::service
