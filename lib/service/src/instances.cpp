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

// What one instance holds that no other may: its IB port, every file or
// directory it writes (one namespace: a state_dir may not be another's
// cache_dir either) and every TCP port it listens on (one namespace too: the
// metrics endpoint and the peer channel bind the same kind of port).
enum class Kind { Port, Path, Listen };
struct Resource {
  Kind kind;
  std::string what;   // the key, as written in the YAML
  std::string value;  // as shown
  std::string host;   // Listen: the address bound
  int port = 0;       // Listen: the TCP port
};

std::vector<Resource> resources(const config::Config& c) {
  std::vector<Resource> r;
  if (c.port.port_guid) r.push_back({Kind::Port, "node.port_guid", to_string(*c.port.port_guid), {}, 0});
  else if (!c.port.ca.empty()) r.push_back({Kind::Port, "node.ca/node.port", c.port.ca + " port " + std::to_string(c.port.port), {}, 0});
  auto path = [&r](const char* what, const std::string& value) {
    if (!value.empty()) r.push_back({Kind::Path, what, value, {}, 0});
  };
  path("state_dir", c.state_dir);
  path("control.socket", c.control.socket_path);
  path("opensm.conf_path", c.opensm.conf_path);
  path("opensm.cache_dir", c.opensm.cache_dir);
  path("opensm.log_file", c.opensm.log_file);
  path("opensm.dump_files_dir", c.opensm.dump_files_dir);
  // OpenSM loads it at a takeover and, with continuity, smhad writes the
  // peer's copy there: two instances' SA state in one file.
  path("opensm.sa_db_file", c.opensm.sa_db_file);
  if (!c.metrics.textfile_dir.empty()) path("metrics textfile", c.metrics.textfile_dir + "/" + c.metrics.textfile_name);
  if (!c.metrics.listen_address.empty())
    r.push_back({Kind::Listen, "metrics.listen", c.metrics.listen_address + " port " + std::to_string(c.metrics.listen_port),
                 c.metrics.listen_address, c.metrics.listen_port});
  if (c.continuity.enabled)
    r.push_back({Kind::Listen, "continuity.listen",
                 c.continuity.listen_address + " port " + std::to_string(c.continuity.listen_port),
                 c.continuity.listen_address, c.continuity.listen_port});
  return r;
}

// Two spellings of one directory or file ("/var/log/" and "/var/log").
std::string normal(const std::string& v) {
  if (v.empty() || v[0] != '/') return v;
  std::string n = fs::path(v).lexically_normal().string();
  while (n.size() > 1 && n.back() == '/') n.pop_back();
  return n;
}

// Whether a bind of `a` and one of `b`, on the same port, exclude each other
// (Linux, net.ipv6.bindv6only 0): the same address; :: against any address
// (it takes IPv4 too); 0.0.0.0 against any IPv4 address.
bool binds_overlap(const std::string& a, const std::string& b) {
  const auto v4 = [](const std::string& h) { return h.find(':') == std::string::npos; };
  return a == b || a == "::" || b == "::" || (a == "0.0.0.0" && v4(b)) || (b == "0.0.0.0" && v4(a));
}

// Whether the two cannot both be had: the same port, the same file or
// directory, or two listeners whose binds exclude each other.
bool same(const Resource& a, const Resource& b) {
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Kind::Port:
      return a.value == b.value;
    case Kind::Path:
      return normal(a.value) == normal(b.value);
    case Kind::Listen:
      return a.port == b.port && binds_overlap(a.host, b.host);
  }
  return false;
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
    const auto theirs = resources(oc);
    for (const auto& m : own)
      for (const auto& t : theirs)
        if (same(m, t))
          out.push_back(m.what + " " + m.value + " is also the " + t.what + " " +
                        (t.value == m.value ? std::string() : t.value + " ") + "of " + f.string() + " (" +
                        unit_of(oc) + "): two instances may not share it; give each its own");
  }
  return out;
}

}  // namespace smha::service
