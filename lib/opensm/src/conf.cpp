// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/opensm/conf.hpp"

#include "smha/os/file_system.hpp"

#include <algorithm>
#include <cctype>
#include <cinttypes>
#include <cstdio>
#include <sstream>

namespace smha::opensm {

namespace detail {
extern const char kOpensmKeysTsv[];
}

std::string_view to_string(Flavor flavor) {
  return flavor == Flavor::Nvidia ? "nvidia" : "upstream";
}

std::string_view to_string(ReloadDecision::Kind kind) {
  switch (kind) {
    case ReloadDecision::Kind::None: return "none";
    case ReloadDecision::Kind::Sighup: return "sighup";
    case ReloadDecision::Kind::Restart: return "restart";
  }
  return "unknown";
}

std::uint64_t fnv1a64(std::string_view data) {
  std::uint64_t h = 0xcbf29ce484222325ULL;  // FNV offset basis
  for (unsigned char c : data) {
    h ^= c;
    h *= 0x100000001b3ULL;  // FNV prime
  }
  return h;
}

namespace {

constexpr std::string_view kHashTag = "# body-hash fnv1a64:";
constexpr std::string_view kPolicyTag = "# policy-file ";

std::string hex64(std::uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, v);
  return buf;
}

const char* boolean(bool b) { return b ? "TRUE" : "FALSE"; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    lines.push_back(text.substr(pos, nl - pos));
    pos = nl + 1;
  }
  return lines;
}

}  // namespace

std::string rendered_routing_engine(std::string_view config_value, bool adaptive_routing) {
  if (!adaptive_routing) return std::string(config_value);
  std::string out;
  for (const std::string& name : config::split_routing_engines(config_value)) {
    if (!out.empty()) out += ',';
    // NVIDIA SM's AR variants of the upstream engines (IB cluster bring-up guide,
    // "Adaptive Routing": ar_updn is its default; ar_ftree for fat trees).
    if (name == "ftree" || name == "updn") out += "ar_";
    out += name;
  }
  return out;
}

std::string render_opensm_conf(const config::Config& config, const RenderInputs& in) {
  const auto& o = config.opensm;
  std::ostringstream body;
  body << "# Keys managed by smha\n";
  if (in.port_guid) body << "guid " << to_string(*in.port_guid) << '\n';
  body << "sm_priority " << static_cast<unsigned>(in.sm_priority) << '\n';
  body << "sm_key 0x" << hex64(config.sm_key) << '\n';
  body << "sa_key 0x" << hex64(config.sa_key) << '\n';
  body << "routing_engine " << rendered_routing_engine(o.routing_engine, in.adaptive_routing)
       << '\n';
  body << "sweep_interval " << o.sweep_interval_s << '\n';
  const bool wire_in_extra = std::any_of(o.extra.begin(), o.extra.end(),
                                         [](const config::ExtraKey& e) { return e.key == "max_wire_smps"; });
  if (!wire_in_extra) body << "max_wire_smps " << o.max_wire_smps << '\n';
  body << "sminfo_polling_timeout " << config.failover.opensm_polling_timeout.count() << '\n';
  body << "polling_retry_number " << config.failover.opensm_polling_retries << '\n';
  body << "log_file " << o.log_file << '\n';
  // OpenSM flushes only ERROR and SYS lines otherwise; SUBNET UP is INFO and
  // would sit in stdio's buffer, unseen by smhad (osm_log.c, osm_state_mgr.c).
  body << "force_log_flush TRUE\n";
  body << "dump_files_dir " << o.dump_files_dir << '\n';
  body << "honor_guid2lid_file " << boolean(o.honor_guid2lid_file) << '\n';
  body << "sa_db_dump " << boolean(o.sa_db_dump) << '\n';
  if (!o.sa_db_file.empty()) body << "sa_db_file " << o.sa_db_file << '\n';
  if (in.flavor == Flavor::Nvidia && (in.sharp || in.sharp_key)) {
    // osm_capability_type: 0 ignored, 1 disabled, 2 enabled (doc/opensm-conf.md).
    body << "sharp_enabled " << (in.sharp ? 2 : 1) << '\n';
  }
  if (!o.extra.empty()) {
    body << "\n# opensm.extra\n";
    for (const auto& e : o.extra) body << e.key << ' ' << e.value << '\n';
  }
  std::string b = body.str();

  std::string out;
  out += "# opensm.conf rendered by smha from " + config.source_path + "\n";
  out += "# Do not edit: smhad rewrites this file. Edit the YAML and reload smhad.\n";
  out += "# flavor " + std::string(to_string(in.flavor)) + "\n";
  for (const auto& p : in.policy_files)
    out += std::string(kPolicyTag) + p.key + " " + p.path + " " + p.hash + "\n";
  out += std::string(kHashTag) + hex64(fnv1a64(b)) + "\n\n";
  out += b;
  return out;
}

std::string set_sm_priority(std::string_view conf_text, std::uint8_t priority) {
  const std::size_t header_end = conf_text.find("\n\n");
  if (header_end == std::string_view::npos) return std::string(conf_text);
  std::string header(conf_text.substr(0, header_end + 1));
  std::string body(conf_text.substr(header_end + 2));
  constexpr std::string_view kKey = "\nsm_priority ";
  const std::size_t at = body.find(kKey);
  const std::size_t hash_at = header.find(kHashTag);
  if (at == std::string::npos || hash_at == std::string::npos) return std::string(conf_text);
  const std::size_t from = at + kKey.size();
  body.replace(from, body.find('\n', from) - from, std::to_string(static_cast<unsigned>(priority)));
  const std::size_t hex_at = hash_at + kHashTag.size();
  header.replace(hex_at, header.find('\n', hex_at) - hex_at, hex64(fnv1a64(body)));
  return header + "\n" + body;
}

std::optional<std::string> header_hash(std::string_view conf_text) {
  for (auto line : split_lines(conf_text)) {
    if (line.empty()) break;  // the header ends at the first blank line
    if (line.substr(0, kHashTag.size()) == kHashTag) {
      return std::string(line.substr(kHashTag.size()));
    }
  }
  return std::nullopt;
}

const std::vector<std::string>& sweep_read_policy_keys() {
  static const std::vector<std::string> keys = [] {
    std::vector<std::string> k{
        "cn_guid_file",           "dimn_ports_file",     "guid_routing_order_file",
        "hop_weights_file",       "ids_guid_file",       "io_guid_file",
        "lfts_file",              "lid_matrix_dump_file", "partition_config_file",
        "per_module_logging_file", "port_prof_ignore_file", "port_search_ordering_file",
        "prefix_routes_file",     "qos_policy_file",     "root_guid_file"};
    std::sort(k.begin(), k.end());
    return k;
  }();
  return keys;
}

std::vector<PolicyFileHash> hash_policy_files(const config::Config& config, const os::FileSystem& fs) {
  std::vector<PolicyFileHash> out;
  const auto& keys = sweep_read_policy_keys();
  for (const auto& e : config.opensm.extra) {  // sorted by key
    if (!std::binary_search(keys.begin(), keys.end(), e.key) || e.value.empty()) continue;
    PolicyFileHash h{e.key, e.value, {}};
    if (auto r = fs.read(e.value); r.ok()) {
      h.hash = "fnv1a64:" + hex64(fnv1a64(r.value()));
    } else {
      h.hash = r.error().code == Errc::NotFound ? "missing" : "unreadable";
    }
    out.push_back(std::move(h));
  }
  return out;
}

std::map<std::string, std::pair<std::string, std::string>> header_policy_files(std::string_view conf_text) {
  std::map<std::string, std::pair<std::string, std::string>> out;
  for (auto line : split_lines(conf_text)) {
    if (line.empty()) break;  // the header ends at the first blank line
    if (line.substr(0, kPolicyTag.size()) != kPolicyTag) continue;
    line.remove_prefix(kPolicyTag.size());
    const auto sp1 = line.find(' ');
    const auto sp2 = line.rfind(' ');
    if (sp1 == std::string_view::npos || sp2 == sp1) continue;
    out[std::string(line.substr(0, sp1))] = {std::string(line.substr(sp1 + 1, sp2 - sp1 - 1)),
                                             std::string(line.substr(sp2 + 1))};
  }
  return out;
}

ConfMap parse_opensm_conf(std::string_view text) {
  ConfMap out;
  for (auto line : split_lines(text)) {
    if (auto hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    line = trim(line);
    if (line.empty()) continue;
    std::size_t sp = line.find_first_of(" \t");
    std::string_view key = line.substr(0, sp);
    std::string_view value = sp == std::string_view::npos ? std::string_view{} : trim(line.substr(sp));
    if (value.size() >= 2 && ((value.front() == '"' && value.back() == '"') ||
                              (value.front() == '\'' && value.back() == '\''))) {
      value = value.substr(1, value.size() - 2);
    }
    out[std::string(key)] = std::string(value);
  }
  return out;
}

const std::vector<KeyInfo>& opensm_key_table() {
  static const std::vector<KeyInfo> table = [] {
    std::vector<KeyInfo> t;
    for (auto line : split_lines(detail::kOpensmKeysTsv)) {
      line = trim(line);
      if (line.empty() || line.front() == '#') continue;
      std::size_t a = line.find('\t');
      std::size_t b = line.find('\t', a + 1);
      if (a == std::string_view::npos || b == std::string_view::npos) continue;
      t.push_back({std::string(line.substr(0, a)), line.substr(a + 1, b - a - 1) == "1",
                   std::string(line.substr(b + 1))});
    }
    std::sort(t.begin(), t.end(), [](const KeyInfo& x, const KeyInfo& y) { return x.name < y.name; });
    return t;
  }();
  return table;
}

const KeyInfo* find_opensm_key(std::string_view name) {
  const auto& t = opensm_key_table();
  auto it = std::lower_bound(t.begin(), t.end(), name,
                             [](const KeyInfo& k, std::string_view n) { return k.name < n; });
  if (it == t.end() || it->name != name) return nullptr;
  return &*it;
}

ReloadDecision classify_change(const ConfMap& old_conf, const ConfMap& new_conf) {
  ReloadDecision d;
  auto consider = [&](const std::string& key) {
    d.changed.push_back(key);
    const KeyInfo* info = find_opensm_key(key);
    if ((info == nullptr || !info->reloadable) && d.kind != ReloadDecision::Kind::Restart) {
      d.kind = ReloadDecision::Kind::Restart;
      d.key = key;
    } else if (d.kind == ReloadDecision::Kind::None) {
      d.kind = ReloadDecision::Kind::Sighup;
    }
  };
  // Both maps are sorted, so keys are considered in name order.
  auto a = old_conf.begin();
  auto b = new_conf.begin();
  while (a != old_conf.end() || b != new_conf.end()) {
    if (b == new_conf.end() || (a != old_conf.end() && a->first < b->first)) {
      consider(a->first);  // removed
      ++a;
    } else if (a == old_conf.end() || b->first < a->first) {
      consider(b->first);  // added
      ++b;
    } else {
      if (a->second != b->second) consider(a->first);
      ++a;
      ++b;
    }
  }
  return d;
}

ReloadDecision classify_change(std::string_view old_text, std::string_view new_text) {
  const ConfMap old_conf = parse_opensm_conf(old_text);
  const ConfMap new_conf = parse_opensm_conf(new_text);
  ReloadDecision d = classify_change(old_conf, new_conf);
  // A policy file edited in place: same key and path in opensm.conf (so the
  // key itself is unchanged), another content hash in the header.
  const auto old_files = header_policy_files(old_text);
  for (const auto& [key, now] : header_policy_files(new_text)) {
    auto o = old_conf.find(key);
    auto n = new_conf.find(key);
    if (o == old_conf.end() || n == new_conf.end() || o->second != n->second) continue;
    auto was = old_files.find(key);
    if (was != old_files.end() && was->second == now) continue;
    d.changed.push_back(key + " (content)");
    if (d.kind == ReloadDecision::Kind::None) d.kind = ReloadDecision::Kind::Sighup;
  }
  std::sort(d.changed.begin(), d.changed.end());
  return d;
}

std::string diff_lines(std::string_view old_text, std::string_view new_text,
                       std::string_view old_label, std::string_view new_label) {
  if (old_text == new_text) return {};
  auto a = split_lines(old_text);
  auto b = split_lines(new_text);
  // Longest common subsequence table (files are small: a few hundred lines).
  std::vector<std::vector<std::uint32_t>> lcs(a.size() + 1, std::vector<std::uint32_t>(b.size() + 1));
  for (std::size_t i = a.size(); i-- > 0;) {
    for (std::size_t j = b.size(); j-- > 0;) {
      lcs[i][j] = a[i] == b[j] ? lcs[i + 1][j + 1] + 1 : std::max(lcs[i + 1][j], lcs[i][j + 1]);
    }
  }
  std::string out = "--- " + std::string(old_label) + "\n+++ " + std::string(new_label) + "\n";
  std::size_t i = 0, j = 0;
  while (i < a.size() || j < b.size()) {
    if (i < a.size() && j < b.size() && a[i] == b[j]) {
      out += " " + std::string(a[i]) + "\n";
      ++i;
      ++j;
    } else if (i < a.size() && (j == b.size() || lcs[i + 1][j] >= lcs[i][j + 1])) {
      out += "-" + std::string(a[i]) + "\n";
      ++i;
    } else {
      out += "+" + std::string(b[j]) + "\n";
      ++j;
    }
  }
  return out;
}

}  // namespace smha::opensm
