// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/config/config.hpp"
#include "smha/config/keys.hpp"

#include "smha/core/fabric_name.hpp"
#include "smha/core/limits.hpp"
#include "smha/core/link_rate.hpp"

#include "smha/core/file_read.hpp"
#include "smha/core/text.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <optional>
#include <tuple>
#include <set>
#include <sstream>

namespace smha::config {

std::string Diagnostic::to_string() const {
  std::string out = file;
  if (pos.line > 0) {
    out += ':' + std::to_string(pos.line) + ':' + std::to_string(pos.column);
  }
  if (!out.empty()) out += ": ";
  if (!key_path.empty()) out += key_path + ": ";
  out += message;
  return out;
}

Position Config::position_of(const std::string& key_path) const {
  auto it = positions.find(key_path);
  return it == positions.end() ? Position{} : it->second;
}

std::string ConfigResult::error_text() const {
  std::string out;
  for (const auto& d : errors_) out += d.to_string() + '\n';
  return out;
}

std::string_view to_string(FailbackPolicy policy) {
  return policy == FailbackPolicy::Sticky ? "sticky" : "preempt";
}

std::string_view to_string(OpensmFlavor flavor) {
  switch (flavor) {
    case OpensmFlavor::Auto: return "auto";
    case OpensmFlavor::Upstream: return "upstream";
    case OpensmFlavor::Nvidia: return "nvidia";
  }
  return "unknown";
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t up = row[j];
      std::size_t cost = (a[i - 1] == b[j - 1]) ? 0 : 1;
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + cost});
      diag = up;
    }
  }
  return row[b.size()];
}

std::optional<std::string> did_you_mean(std::string_view word,
                                        const std::vector<std::string>& candidates) {
  // A word of a longer key ("guid" for "port_guid") beats a short key a few
  // edits away ("lid"), if only one key has that word.
  std::optional<std::string> part_of;
  int parts = 0;
  for (const auto& c : candidates) {
    if (word.empty() || c == word || c.size() <= word.size()) continue;
    const auto at = c.find(word);
    if (at == std::string::npos) continue;
    const bool starts = at == 0 || c[at - 1] == '_';
    const bool ends = at + word.size() == c.size() || c[at + word.size()] == '_';
    if (starts && ends) {
      part_of = c;
      ++parts;
    }
  }
  if (parts == 1) return part_of;
  // A likely typo: a few edits (2, or a third of a long word, at most 3), and
  // fewer edits than the word has characters (not a different word altogether).
  const std::size_t limit = std::min<std::size_t>(3, std::max<std::size_t>(2, word.size() / 3));
  std::optional<std::string> best;
  std::size_t best_distance = 0;
  for (const auto& c : candidates) {
    // The length difference is a lower bound of the distance: a candidate
    // farther than `limit` by length alone cannot be the answer, so its
    // O(|word| x |c|) distance is not computed (a 4 KiB unknown key cost
    // ~1 ms against every known key).
    const std::size_t gap = word.size() > c.size() ? word.size() - c.size() : c.size() - word.size();
    if (gap > limit) continue;
    std::size_t d = edit_distance(word, c);
    if (!best || d < best_distance) {
      best = c;
      best_distance = d;
    }
  }
  if (best && best_distance <= limit && best_distance < word.size()) return best;
  return std::nullopt;
}

namespace {


// opensm.conf keys that would break smha's supervision or HA; refused in extra.
const std::map<std::string, std::string>& forbidden_opensm_keys() {
  static const std::map<std::string, std::string> keys = {
      {"priority", "not an OpenSM key (OpenSM ignores it); set the top-level key sm_priority"},
      {"daemon", "smhad supervises OpenSM in the foreground; daemon mode would hide it"},
      {"sm_inactive", "an inactive OpenSM never answers SMInfo, so smha could not steer it"},
      {"ignore_other_sm", "OpenSMs that ignore each other can both become MASTER"},
  };
  return keys;
}

const std::vector<std::string> kHookEvents = {"master", "standby", "fault", "opensm_restart",
                                              "reload", "unknown_sm"};

Position position_of(const YAML::Node& node) {
  YAML::Mark m = node.Mark();
  if (m.is_null()) return {};
  return {m.line + 1, m.column + 1};
}

std::string join_path(const std::string& parent, const std::string& key) {
  return parent.empty() ? key : parent + "." + key;
}

std::string trim(std::string_view s) {
  std::size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Offset of the first byte of `s` that is not part of printable UTF-8 (a C0 or
// C1 control character, DEL, a zero-width, separator or bidi character
// (smha::invisible_code_point), a malformed, overlong or surrogate sequence).
std::optional<std::size_t> first_unprintable(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<unsigned char>(s[i]);
    if (b < 0x80) {
      if (b < 0x20 || b == 0x7f) return i;
      ++i;
      continue;
    }
    std::size_t len = 0;
    std::uint32_t cp = 0;
    if ((b & 0xE0) == 0xC0) { len = 2; cp = b & 0x1F; }
    else if ((b & 0xF0) == 0xE0) { len = 3; cp = b & 0x0F; }
    else if ((b & 0xF8) == 0xF0) { len = 4; cp = b & 0x07; }
    else return i;
    if (i + len > s.size()) return i;
    for (std::size_t k = 1; k < len; ++k) {
      const auto c = static_cast<unsigned char>(s[i + k]);
      if ((c & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (c & 0x3F);
    }
    static constexpr std::uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF) || invisible_code_point(cp))
      return i;
    i += len;
  }
  return std::nullopt;
}

// The first node (in document order) that carries an explicit tag such as
// "!!str" or "!!python/object:os.system". Plain scalars have tag "?", quoted
// ones "!"; an untagged map or list "?".
std::optional<YAML::Node> first_tagged(const YAML::Node& n) {
  if (!n.IsDefined()) return std::nullopt;
  const std::string& tag = n.Tag();
  if (!tag.empty() && tag != "?" && tag != "!") return n;
  if (n.IsSequence()) {
    for (const auto& item : n)
      if (auto t = first_tagged(item)) return t;
  } else if (n.IsMap()) {
    for (const auto& kv : n) {
      if (auto t = first_tagged(kv.first)) return t;
      if (auto t = first_tagged(kv.second)) return t;
    }
  }
  return std::nullopt;
}

std::string kind_of(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map: return "a map";
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Null: return "nothing";
    case YAML::NodeType::Scalar: return "a scalar";
    default: return "an undefined node";
  }
}

// One map of the YAML after its keys were checked: key -> (key node, value node).
struct Entry {
  YAML::Node key;
  YAML::Node value;
};
using CheckedMap = std::map<std::string, Entry>;

class Loader {
 public:
  Loader(std::string file, LoadOptions options) : file_(std::move(file)), options_(std::move(options)) {}

  ConfigResult load(std::string_view text);

 private:
  void load_fabric(const CheckedMap& top, Config& c);
  void apply_instance_defaults(Config& c);
  void error(const YAML::Node& at, const std::string& path, const std::string& message) {
    errors_.push_back({file_, position_of(at), path, message});
  }
  void error_at(Position pos, const std::string& path, const std::string& message) {
    errors_.push_back({file_, pos, path, message});
  }

  // Checks that `node` is a map whose keys are scalars, unique and in `allowed`.
  // Unknown keys are reported with a did-you-mean. Returns the known entries.
  std::optional<CheckedMap> check_map(const YAML::Node& node, const std::string& path,
                                      const std::vector<std::string>& allowed);
  std::optional<std::string> scalar(const YAML::Node& n, const std::string& path);
  std::optional<long long> integer(const YAML::Node& n, const std::string& path);
  // Integer in `r` (a limits:: range); the message names the bound that was broken.
  std::optional<long long> ranged(const YAML::Node& n, const std::string& path, limits::IntRange r);
  std::optional<bool> boolean(const YAML::Node& n, const std::string& path);
  std::optional<std::string> text(const YAML::Node& n, const std::string& path);
  // text() that is at most kMaxNameBytes of printable UTF-8.
  std::optional<std::string> name(const YAML::Node& n, const std::string& path);
  std::optional<std::string> absolute_path(const YAML::Node& n, const std::string& path);
  std::optional<Guid> guid(const YAML::Node& n, const std::string& path);
  // HOST:PORT, an IPv6 address in brackets; `example` goes into the error.
  std::optional<std::pair<std::string, int>> host_port(const YAML::Node& n, const std::string& path,
                                                       const std::string& example);
  // A value that goes into opensm.conf verbatim: one line, no '#', not too long.
  bool conf_safe(const YAML::Node& n, const std::string& path, const std::string& value);

  void load_node(const Entry& e, Config& c);
  void load_peers(const Entry& e, Config& c);
  void load_continuity(const Entry& e, Config& c);
  void load_failover(const Entry& e, Config& c);
  // sm_key / sm_key_file or sa_key / sa_key_file (`name` and name + "_file").
  void load_key(const CheckedMap& top, const std::string& name, std::uint64_t& ret_key, bool& ret_set);
  void load_opensm(const Entry& e, Config& c);
  void load_extra(const Entry& e, Config& c);
  bool log_key_ok(const YAML::Node& v, const std::string& key, const std::string& path, const std::string& value);
  void load_control(const Entry& e, Config& c);
  void load_metrics(const Entry& e, Config& c);
  void load_hooks(const Entry& e, Config& c);
  void load_health(const Entry& e, Config& c);
  void load_restart_policy(const CheckedMap& m, OpensmSettings& o);
  void cross_checks(const CheckedMap& top, Config& c);

  std::string file_;
  LoadOptions options_;
  std::vector<Diagnostic> errors_;
  std::map<std::string, Position> positions_;
};

std::optional<CheckedMap> Loader::check_map(const YAML::Node& node, const std::string& path,
                                            const std::vector<std::string>& allowed) {
  if (node.IsNull()) return CheckedMap{};  // "section:" with nothing: all defaults
  if (!node.IsMap()) {
    error(node, path, "must be a map (got " + kind_of(node) + ")");
    return std::nullopt;
  }
  CheckedMap out;
  std::map<std::string, Position> seen;
  for (auto it = node.begin(); it != node.end(); ++it) {
    const YAML::Node k = it->first;  // a copy: yaml-cpp iterators yield temporaries
    if (!k.IsScalar()) {
      error(k, path, "keys must be plain words (got " + kind_of(k) + ")");
      continue;
    }
    std::string name = k.Scalar();
    std::string key_path = join_path(path, name);
    if (auto prev = seen.find(name); prev != seen.end()) {
      error(k, key_path,
            "duplicate key (first set at line " + std::to_string(prev->second.line) + ")");
      continue;
    }
    seen[name] = position_of(k);
    if (std::find(allowed.begin(), allowed.end(), name) == allowed.end()) {
      std::string msg = "unknown key";
      if (auto s = did_you_mean(name, allowed)) msg += "; did you mean '" + *s + "'?";
      error(k, key_path, msg);
      continue;
    }
    out[name] = Entry{k, it->second};
  }
  return out;
}

std::optional<std::string> Loader::scalar(const YAML::Node& n, const std::string& path) {
  positions_[path] = position_of(n);
  if (!n.IsScalar()) {
    error(n, path, "must be a single value (got " + kind_of(n) + ")");
    return std::nullopt;
  }
  return n.Scalar();
}

std::optional<long long> Loader::integer(const YAML::Node& n, const std::string& path) {
  auto s = scalar(n, path);
  if (!s) return std::nullopt;
  if (n.Tag() == "!") {  // a quoted scalar: a string, even if it looks like a number
    error(n, path, "must be an integer, not a quoted string (got \"" + *s + "\")");
    return std::nullopt;
  }
  long long v = 0;
  const char* first = s->data();
  const char* last = s->data() + s->size();
  auto [ptr, ec] = std::from_chars(first, last, v, 10);
  if (s->empty() || ec == std::errc::invalid_argument || ptr != last) {
    error(n, path, "must be an integer (got \"" + *s + "\")");
    return std::nullopt;
  }
  if (ec == std::errc::result_out_of_range) {
    error(n, path, "integer out of range (got " + *s + ")");
    return std::nullopt;
  }
  return v;
}

std::optional<long long> Loader::ranged(const YAML::Node& n, const std::string& path,
                                        limits::IntRange r) {
  const long long min = r.min;
  const long long max = r.max;
  auto v = integer(n, path);
  if (!v) return std::nullopt;
  if (*v < min || *v > max) {
    std::string got = " (got " + std::to_string(*v) + ")";
    std::string rule;
    if (max - min <= 255) {
      rule = "must be between " + std::to_string(min) + " and " + std::to_string(max);
    } else if (*v < min) {
      rule = (min == 1) ? "must be > 0" : "must be >= " + std::to_string(min);
    } else {
      rule = "must be <= " + std::to_string(max);
    }
    error(n, path, rule + got);
    return std::nullopt;
  }
  return v;
}

std::optional<bool> Loader::boolean(const YAML::Node& n, const std::string& path) {
  auto s = scalar(n, path);
  if (!s) return std::nullopt;
  std::string l = lower(*s);
  if (l == "true") return true;
  if (l == "false") return false;
  error(n, path, "must be true or false (got \"" + *s + "\")");
  return std::nullopt;
}

std::optional<std::string> Loader::text(const YAML::Node& n, const std::string& path) {
  auto s = scalar(n, path);
  if (!s) return std::nullopt;
  if (s->empty()) {
    error(n, path, "must not be empty");
    return std::nullopt;
  }
  if (s->size() > kMaxStringBytes) {
    error(n, path, "is " + std::to_string(s->size()) + " bytes long, at most " + std::to_string(kMaxStringBytes));
    return std::nullopt;
  }
  return s;
}

std::optional<std::string> Loader::name(const YAML::Node& n, const std::string& path) {
  auto s = text(n, path);
  if (!s) return std::nullopt;
  if (s->size() > kMaxNameBytes) {
    error(n, path, "is " + std::to_string(s->size()) + " bytes long, at most " + std::to_string(kMaxNameBytes));
    return std::nullopt;
  }
  if (auto bad = first_unprintable(*s)) {
    error(n, path,
          "byte " + std::to_string(*bad + 1) + " is a control or invisible character or not UTF-8; a name is printable UTF-8");
    return std::nullopt;
  }
  return s;
}

std::optional<std::string> Loader::absolute_path(const YAML::Node& n, const std::string& path) {
  auto s = text(n, path);
  if (!s) return std::nullopt;
  if ((*s)[0] != '/') {
    error(n, path, "must be an absolute path (got \"" + *s + "\")");
    return std::nullopt;
  }
  return s;
}

std::optional<Guid> Loader::guid(const YAML::Node& n, const std::string& path) {
  auto s = text(n, path);
  if (!s) return std::nullopt;
  auto g = parse_guid(*s);
  if (!g) {
    error(n, path, "must be a GUID: 0x followed by 1 to 16 hex digits (got \"" + *s + "\")");
    return std::nullopt;
  }
  if (g->value == 0) {
    error(n, path, "must not be 0 (OpenSM treats GUID 0 as \"ask which port\")");
    return std::nullopt;
  }
  return g;
}

bool Loader::conf_safe(const YAML::Node& n, const std::string& path, const std::string& value) {
  // osm_subn_parse_conf_file() reads lines with fgets(line, 1023) and cuts at the
  // first '#', so such values would be silently truncated.
  if (value.find('#') != std::string::npos) {
    error(n, path, "must not contain '#' (opensm.conf treats it as a comment)");
    return false;
  }
  if (value.find_first_of("\r\n") != std::string::npos) {
    error(n, path, "must be a single line");
    return false;
  }
  if (value.size() > 900) {
    error(n, path, "too long for an opensm.conf line (" + std::to_string(value.size()) +
                       " characters, at most 900)");
    return false;
  }
  return true;
}

void Loader::load_node(const Entry& e, Config& c) {
  auto m = check_map(e.value, "node", key_names("node"));
  if (!m) return;
  if (auto it = m->find("name"); it != m->end()) {
    if (auto s = name(it->second.value, "node.name")) c.node_name = *s;
  } else {
    error(e.key, "node", "missing required key 'name'");
  }
  bool has_ca = m->count("ca") != 0;
  bool has_port = m->count("port") != 0;
  bool has_guid = m->count("port_guid") != 0;
  if (has_guid && (has_ca || has_port)) {
    error(m->at("port_guid").key, "node.port_guid",
          "give either port_guid or ca + port, not both");
  } else if (!has_guid && !has_ca) {
    error(e.key, "node", "missing the IB port: set 'port_guid', or 'ca' (and 'port')");
  }
  if (has_guid) {
    if (auto g = guid(m->at("port_guid").value, "node.port_guid")) c.port.port_guid = *g;
  }
  if (has_ca) {
    if (auto s = text(m->at("ca").value, "node.ca")) c.port.ca = *s;
    c.port.port = 1;
  }
  if (has_port) {
    if (!has_ca && !has_guid) {
      error(m->at("port").key, "node.port", "needs 'ca' too");
    }
    if (auto v = ranged(m->at("port").value, "node.port", limits::kHcaPort)) c.port.port = static_cast<int>(*v);
  }
}

void Loader::load_peers(const Entry& e, Config& c) {
  const YAML::Node& seq = e.value;
  if (seq.IsNull()) return;  // "peers:" with nothing: no peers
  if (!seq.IsSequence()) {
    error(seq, "peers", "must be a list of {name, port_guid} (got " + kind_of(seq) + ")");
    return;
  }
  if (seq.size() > kMaxPeers) {
    error(seq, "peers", "lists " + std::to_string(seq.size()) + " peers, at most " + std::to_string(kMaxPeers));
    return;
  }
  std::map<std::string, int> names;
  std::map<std::uint64_t, int> guids;
  for (std::size_t i = 0; i < seq.size(); ++i) {
    std::string path = "peers[" + std::to_string(i) + "]";
    auto m = check_map(seq[i], path, key_names("peers[]"));
    if (!m) continue;
    Peer p;
    bool good = true;
    if (auto it = m->find("name"); it != m->end()) {
      auto s = name(it->second.value, path + ".name");
      if (s) {
        p.name = *s;
        if (auto prev = names.find(p.name); prev != names.end()) {
          error(it->second.value, path + ".name",
                "peer name \"" + p.name + "\" already used by peers[" +
                    std::to_string(prev->second) + "]");
          good = false;
        }
        names.emplace(p.name, static_cast<int>(i));
      } else {
        good = false;
      }
    } else {
      error(seq[i], path, "missing required key 'name'");
      good = false;
    }
    if (auto it = m->find("port_guid"); it != m->end()) {
      auto g = guid(it->second.value, path + ".port_guid");
      if (g) {
        p.port_guid = *g;
        if (auto prev = guids.find(g->value); prev != guids.end()) {
          error(it->second.value, path + ".port_guid",
                "port GUID " + smha::to_string(*g) + " already used by peers[" +
                    std::to_string(prev->second) + "]");
          good = false;
        }
        guids.emplace(g->value, static_cast<int>(i));
      } else {
        good = false;
      }
    } else {
      error(seq[i], path, "missing required key 'port_guid'");
      good = false;
    }
    if (auto it = m->find("lid"); it != m->end()) {
      const YAML::Node& v = it->second.value;
      unsigned long lid = 0;
      bool parsed = false;
      if (v.IsScalar()) {
        const std::string& t = v.Scalar();
        auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), lid);
        parsed = !t.empty() && ec == std::errc() && ptr == t.data() + t.size();
      }
      if (!parsed || lid < 1 || lid > 0xbfff) {
        error(v, path + ".lid",
              "must be a unicast LID 1..49151 (got " + (v.IsScalar() ? v.Scalar() : kind_of(v)) + ")");
        good = false;
      } else {
        p.lid = Lid{static_cast<std::uint16_t>(lid)};
      }
    }
    if (auto it = m->find("dr_path"); it != m->end()) {
      const YAML::Node& v = it->second.value;
      std::optional<DrPath> dr;
      if (v.IsScalar()) dr = parse_dr_path(v.Scalar());
      if (!dr || dr->hops.empty()) {
        error(v, path + ".dr_path",
              "must be a directed-route path of out-ports such as \"0,1,3\" (got " +
                  (v.IsScalar() ? v.Scalar() : kind_of(v)) + ")");
        good = false;
      } else {
        p.dr_path = *dr;
      }
    }
    if (auto it = m->find("sm_priority"); it != m->end()) {
      if (auto v = ranged(it->second.value, path + ".sm_priority", limits::kSmPriority))
        p.sm_priority = static_cast<int>(*v);
      else
        good = false;
    }
    if (auto it = m->find("address"); it != m->end()) {
      if (auto hp = host_port(it->second.value, path + ".address", "head02.mgmt:7390 or 10.0.0.2:7390")) {
        p.address_host = hp->first;
        p.address_port = hp->second;
      } else {
        good = false;
      }
    }
    if (good) c.peers.push_back(p);
  }
}

void Loader::load_failover(const Entry& e, Config& c) {
  auto m = check_map(e.value, "failover", key_names("failover"));
  if (!m) return;
  auto& f = c.failover;
  if (auto it = m->find("poll_interval_ms"); it != m->end()) {
    if (auto v = ranged(it->second.value, "failover.poll_interval_ms", limits::kPollIntervalMs))
      f.poll_interval = std::chrono::milliseconds(*v);
  }
  if (auto it = m->find("misses_before_takeover"); it != m->end()) {
    if (auto v = ranged(it->second.value, "failover.misses_before_takeover", limits::kMisses))
      f.misses_before_takeover = static_cast<int>(*v);
  }
  if (auto it = m->find("failback"); it != m->end()) {
    if (auto s = scalar(it->second.value, "failover.failback")) {
      if (*s == "sticky") {
        f.failback = FailbackPolicy::Sticky;
      } else if (*s == "preempt") {
        f.failback = FailbackPolicy::Preempt;
      } else {
        std::string msg = "must be sticky or preempt (got \"" + *s + "\")";
        if (auto d = did_you_mean(*s, {"sticky", "preempt"})) msg += "; did you mean '" + *d + "'?";
        error(it->second.value, "failover.failback", msg);
      }
    }
  }
  if (auto it = m->find("preempt_holddown_s"); it != m->end()) {
    if (auto v = ranged(it->second.value, "failover.preempt_holddown_s", limits::kPreemptHolddownS))
      f.preempt_holddown = std::chrono::seconds(*v);
  }
  if (auto it = m->find("opensm_polling_timeout_ms"); it != m->end()) {
    if (auto v = ranged(it->second.value, "failover.opensm_polling_timeout_ms", limits::kOpensmPollingTimeoutMs))
      f.opensm_polling_timeout = std::chrono::milliseconds(*v);
  }
  if (auto it = m->find("opensm_polling_retries"); it != m->end()) {
    if (auto v = ranged(it->second.value, "failover.opensm_polling_retries", limits::kOpensmPollingRetries))
      f.opensm_polling_retries = static_cast<int>(*v);
  }
}

void Loader::load_key(const CheckedMap& top, const std::string& name, std::uint64_t& ret_key, bool& ret_set) {
  const std::string file_key = name + "_file";
  auto inline_it = top.find(name);
  auto file_it = top.find(file_key);
  if (inline_it != top.end() && file_it != top.end()) {
    error(file_it->second.key, file_key, "give either " + name + " or " + file_key + ", not both");
    return;
  }
  auto parse_key = [&](const std::string& s, const YAML::Node& at, const std::string& path,
                       const std::string& where) {
    auto g = parse_guid(s);
    if (!g) {
      error(at, path,
            where + "must be 0x followed by 1 to 16 hex digits (got \"" +
                (s.size() > 40 ? s.substr(0, 40) + "..." : s) + "\")");
      return;
    }
    // OpenSM's P_KeyTableRecord check is "SM_Key != sa_key": with sa_key 0
    // every plain (SM_Key 0) request would be trusted (osm_sa_pkey_record.c).
    if (name == "sa_key" && g->value == 0) {
      error(at, path,
            where + "must not be 0: OpenSM would then trust every SA request that carries no key");
      return;
    }
    ret_key = g->value;
    ret_set = true;
  };
  if (inline_it != top.end()) {
    if (auto s = text(inline_it->second.value, name)) parse_key(*s, inline_it->second.value, name, "");
  }
  if (file_it != top.end()) {
    auto p = absolute_path(file_it->second.value, file_key);
    if (!p) return;
    unsigned mode = 0;
    auto content = read_regular_file(*p, kMaxKeyFileBytes, &mode);
    if (!content) {
      error(file_it->second.value, file_key, "cannot read " + *p + ": " + content.error().message);
      return;
    }
    if ((mode & 077) != 0) {
      char octal[8];
      std::snprintf(octal, sizeof octal, "%04o", mode & 07777);
      const std::string what = name == "sa_key" ? "the SA key" : "the SM_Key";
      error(file_it->second.value, file_key,
            *p + " has mode " + octal + "; it holds " + what + ", so it must not be readable by others: chmod 600 " +
                *p);
      return;
    }
    parse_key(trim(*content), file_it->second.value, file_key, "the key in " + *p + " ");
  }
}

// smhad reads OpenSM's log as OpenSM writes it (SUBNET UP, state changes,
// routing results, ERR lines: doc/opensm-conf.md). OpenSM flushes only ERROR
// and SYS lines unless force_log_flush is TRUE (osm_log.c), and logs SUBNET UP
// at INFO (osm_state_mgr.c), so force_log_flush must stay TRUE and log_flags
// must keep ERROR (0x01) and INFO (0x02).
bool Loader::log_key_ok(const YAML::Node& v, const std::string& key, const std::string& path,
                        const std::string& value) {
  if (key == "force_log_flush" && value != "TRUE") {
    error(v, path,
          "refused: smha renders force_log_flush TRUE (smhad reads OpenSM's log as it is written: "
          "SUBNET UP, takeover reports, start-up errors); drop the key");
    return false;
  }
  if (key == "log_flags") {
    char* end = nullptr;
    errno = 0;
    const unsigned long flags = std::strtoul(value.c_str(), &end, 0);
    if (errno != 0 || end == value.c_str() || *end != '\0' || flags > 0xff) {
      error(v, path, "must be a number 0..0xff (OpenSM's log levels), e.g. 0x03 (got \"" + value + "\")");
      return false;
    }
    if ((flags & 0x03) != 0x03) {
      error(v, path,
            "must keep ERROR (0x01) and INFO (0x02): smhad reads OpenSM's SUBNET UP, state and routing "
            "lines (INFO) and its ERR lines from the log (got " + value + ")");
      return false;
    }
  }
  return true;
}

void Loader::load_extra(const Entry& e, Config& c) {
  const YAML::Node& m = e.value;
  if (m.IsNull()) return;
  if (!m.IsMap()) {
    error(m, "opensm.extra", "must be a map of opensm.conf key: value (got " + kind_of(m) + ")");
    return;
  }
  std::set<std::string> seen;
  for (auto it = m.begin(); it != m.end(); ++it) {
    const YAML::Node k = it->first;  // a copy: yaml-cpp iterators yield temporaries
    const YAML::Node v = it->second;
    if (!k.IsScalar()) {
      error(k, "opensm.extra", "keys must be opensm.conf key names (got " + kind_of(k) + ")");
      continue;
    }
    std::string key = k.Scalar();
    std::string path = "opensm.extra." + key;
    if (!seen.insert(key).second) {
      error(k, path, "duplicate key");
      continue;
    }
    bool name_ok = !key.empty() && std::all_of(key.begin(), key.end(), [](char ch) {
      return std::islower(static_cast<unsigned char>(ch)) ||
             std::isdigit(static_cast<unsigned char>(ch)) || ch == '_';
    });
    if (!name_ok) {
      error(k, path, "not an opensm.conf key name (lower-case letters, digits and _)");
      continue;
    }
    if (auto f = forbidden_opensm_keys().find(key); f != forbidden_opensm_keys().end()) {
      error(k, path, "refused: " + f->second);
      continue;
    }
    if (auto mk = managed_opensm_keys().find(key); mk != managed_opensm_keys().end()) {
      std::string yaml = mk->second.path;
      if (!mk->second.alternative.empty()) yaml += mk->second.alternative;
      error(k, path, "smha manages this key; set " + yaml + " instead");
      continue;
    }
    if (!v.IsScalar()) {
      error(v, path, "must be a single value (got " + kind_of(v) + ")");
      continue;
    }
    std::string value = v.Scalar();
    std::string l = lower(value);
    // OpenSM compares booleans with strcmp("TRUE"): "true" would mean FALSE.
    if (l == "true") value = "TRUE";
    if (l == "false") value = "FALSE";
    if (value.empty()) {
      error(v, path, "must not be empty");
      continue;
    }
    if (!conf_safe(v, path, value)) continue;
    if (!log_key_ok(v, key, path, value)) continue;
    // smha renders force_log_flush TRUE itself: the same value here is no
    // conflict, and is not rendered twice.
    if (key == "force_log_flush") continue;
    positions_[path] = position_of(k);
    c.opensm.extra.push_back({key, value, position_of(k)});
  }
  std::sort(c.opensm.extra.begin(), c.opensm.extra.end(),
            [](const ExtraKey& a, const ExtraKey& b) { return a.key < b.key; });
}

void Loader::load_opensm(const Entry& e, Config& c) {
  auto m = check_map(e.value, "opensm", key_names("opensm"));
  if (!m) return;
  auto& o = c.opensm;
  auto path_key = [&](const char* key, std::string& out) {
    if (auto it = m->find(key); it != m->end()) {
      std::string p = std::string("opensm.") + key;
      if (auto s = absolute_path(it->second.value, p)) {
        if (conf_safe(it->second.value, p, *s)) out = *s;
      }
    }
  };
  auto bool_key = [&](const char* key, bool& out) {
    if (auto it = m->find(key); it != m->end()) {
      if (auto b = boolean(it->second.value, std::string("opensm.") + key)) out = *b;
    }
  };
  auto bool_key_opt = [&](const char* key, std::optional<bool>& out) {
    if (auto it = m->find(key); it != m->end()) {
      if (auto b = boolean(it->second.value, std::string("opensm.") + key)) out = *b;
    }
  };
  path_key("binary", o.binary);
  if (auto it = m->find("flavor"); it != m->end()) {
    if (auto s = scalar(it->second.value, "opensm.flavor")) {
      if (*s == "auto") {
        o.flavor = OpensmFlavor::Auto;
      } else if (*s == "upstream") {
        o.flavor = OpensmFlavor::Upstream;
      } else if (*s == "nvidia") {
        o.flavor = OpensmFlavor::Nvidia;
      } else {
        std::string msg = "must be auto, upstream or nvidia (got \"" + *s + "\")";
        if (auto d = did_you_mean(*s, {"auto", "upstream", "nvidia"}))
          msg += "; did you mean '" + *d + "'?";
        error(it->second.value, "opensm.flavor", msg);
      }
    }
  }
  if (auto it = m->find("routing_engine"); it != m->end()) {
    const YAML::Node& v = it->second.value;
    if (auto s = text(v, "opensm.routing_engine")) {
      // A comma-separated chain of engine names, as OpenSM's routing_engine.
      bool ok = true;
      for (const std::string& name : split_routing_engines(*s)) {
        bool name_ok = !name.empty() && std::all_of(name.begin(), name.end(), [](char ch) {
          return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '-';
        });
        if (!name_ok) {
          error(v, "opensm.routing_engine",
                "must be engine names separated by commas, without spaces (got \"" + *s + "\")");
          ok = false;
          break;
        }
      }
      if (ok) o.routing_engine = *s;
    }
  }
  if (auto it = m->find("sweep_interval"); it != m->end()) {
    if (auto v = ranged(it->second.value, "opensm.sweep_interval", limits::kSweepIntervalS))
      o.sweep_interval_s = static_cast<int>(*v);
  }
  if (auto it = m->find("max_wire_smps"); it != m->end()) {
    if (auto v = ranged(it->second.value, "opensm.max_wire_smps", limits::kMaxWireSmps))
      o.max_wire_smps = static_cast<int>(*v);
  }
  bool_key("adaptive_routing", o.adaptive_routing);
  bool_key("sharp", o.sharp);
  bool_key("downgrade_unsupported", o.downgrade_unsupported);
  path_key("log_file", o.log_file);
  path_key("dump_files_dir", o.dump_files_dir);
  path_key("cache_dir", o.cache_dir);
  path_key("conf_path", o.conf_path);
  bool_key("lid_continuity", o.lid_continuity);
  // One source of truth: lid_continuity decides honor_guid2lid_file unless it
  // is off, when honor_guid2lid_file is what the operator says (default FALSE).
  {
    std::optional<bool> honor;
    bool_key_opt("honor_guid2lid_file", honor);
    if (o.lid_continuity) {
      if (honor && !*honor)
        error(m->find("honor_guid2lid_file")->second.value, "opensm.honor_guid2lid_file",
              "false contradicts opensm.lid_continuity: true (OpenSM must read the guid2lid smhad keeps); "
              "set lid_continuity: false to run without it");
      o.honor_guid2lid_file = true;
    } else {
      o.honor_guid2lid_file = honor.value_or(false);
    }
  }
  bool_key("sa_db_dump", o.sa_db_dump);
  if (auto it = m->find("sa_db_file"); it != m->end() && !it->second.value.IsNull()) {
    path_key("sa_db_file", o.sa_db_file);
  }
  if (auto it = m->find("extra"); it != m->end()) load_extra(it->second, c);
  // max_wire_smps in opensm.extra (as before the key existed) is rendered as
  // it stands; both at once would leave the reader guessing which one counts.
  if (auto it = m->find("max_wire_smps"); it != m->end())
    for (const auto& x : o.extra)
      if (x.key == "max_wire_smps")
        error(it->second.value, "opensm.max_wire_smps",
              "also set as opensm.extra.max_wire_smps (line " + std::to_string(x.pos.line) + "): set one");
  load_restart_policy(*m, o);

  // AR engines (NVIDIA's ar_*) with adaptive_routing off contradict each other.
  if (!o.adaptive_routing && o.routing_engine.find("ar_") != std::string::npos) {
    if (auto it = m->find("routing_engine"); it != m->end()) {
      error(it->second.value, "opensm.routing_engine",
            "names an adaptive-routing engine but opensm.adaptive_routing is false; "
            "use the plain engine (e.g. updn) and set adaptive_routing: true");
    }
  }
}

void Loader::load_restart_policy(const CheckedMap& m, OpensmSettings& o) {
  if (auto it = m.find("restart_backoff_initial_ms"); it != m.end()) {
    if (auto v = ranged(it->second.value, "opensm.restart_backoff_initial_ms", limits::kRestartBackoffInitialMs))
      o.restart_backoff_initial = std::chrono::milliseconds(*v);
  }
  auto max_it = m.find("restart_backoff_max_s");
  if (max_it != m.end()) {
    if (auto v = ranged(max_it->second.value, "opensm.restart_backoff_max_s", limits::kRestartBackoffMaxS))
      o.restart_backoff_max = std::chrono::seconds(*v);
  }
  if (auto it = m.find("restart_stable_s"); it != m.end()) {
    if (auto v = ranged(it->second.value, "opensm.restart_stable_s", limits::kRestartStableS))
      o.restart_stable = std::chrono::seconds(*v);
  }
  if (auto it = m.find("crash_loop_count"); it != m.end()) {
    if (auto v = ranged(it->second.value, "opensm.crash_loop_count", limits::kCrashLoopCount))
      o.crash_loop_count = static_cast<int>(*v);
  }
  auto window_it = m.find("crash_loop_window_s");
  if (window_it != m.end()) {
    if (auto v = ranged(window_it->second.value, "opensm.crash_loop_window_s", limits::kCrashLoopWindowS))
      o.crash_loop_window = std::chrono::seconds(*v);
  }
  if (auto it = m.find("crash_loop_retry_s"); it != m.end()) {
    if (auto v = ranged(it->second.value, "opensm.crash_loop_retry_s", limits::kCrashLoopRetryS))
      o.crash_loop_retry = std::chrono::seconds(*v);
  }
  auto nm_it = m.find("crash_loop_retry_no_master_s");
  if (nm_it != m.end()) {
    if (auto v = ranged(nm_it->second.value, "opensm.crash_loop_retry_no_master_s", limits::kCrashLoopRetryS))
      o.crash_loop_retry_no_master = std::chrono::seconds(*v);
  }
  // Without a master anywhere the retry must not come later than with one.
  if (nm_it != m.end() && o.crash_loop_retry_no_master > o.crash_loop_retry) {
    error(nm_it->second.value, "opensm.crash_loop_retry_no_master_s",
          "must be at most opensm.crash_loop_retry_s (" + std::to_string(o.crash_loop_retry.count()) + " s)");
  }
  if (max_it != m.end() && o.restart_backoff_max < o.restart_backoff_initial) {
    error(max_it->second.value, "opensm.restart_backoff_max_s",
          "must be at least opensm.restart_backoff_initial_ms (" +
              std::to_string(o.restart_backoff_initial.count()) + " ms)");
  }
  // The restarts of one crash loop must fit in the window, or the loop is never
  // detected: the first (crash_loop_count - 1) backoffs at the initial delay.
  if (window_it != m.end() &&
      o.crash_loop_window < o.restart_backoff_initial * std::max(1, o.crash_loop_count - 1)) {
    error(window_it->second.value, "opensm.crash_loop_window_s",
          "too short to hold opensm.crash_loop_count crashes at the initial backoff (" +
              std::to_string(o.crash_loop_count) + " x " +
              std::to_string(o.restart_backoff_initial.count()) + " ms)");
  }
}

void Loader::load_control(const Entry& e, Config& c) {
  auto m = check_map(e.value, "control", key_names("control"));
  if (!m) return;
  if (auto it = m->find("socket"); it != m->end()) {
    if (auto s = absolute_path(it->second.value, "control.socket")) {
      // sun_path holds 108 bytes including the terminating NUL.
      if (s->size() > 107) {
        error(it->second.value, "control.socket",
              "too long for a unix socket path (" + std::to_string(s->size()) +
                  " bytes, at most 107)");
      } else {
        c.control.socket_path = *s;
      }
    }
  }
  if (auto it = m->find("group"); it != m->end()) {
    if (auto s = text(it->second.value, "control.group")) c.control.group = *s;
  }
}

void Loader::load_health(const Entry& e, Config& c) {
  auto m = check_map(e.value, "health", key_names("health"));
  if (!m) return;
  if (auto it = m->find("link_errors_alarm"); it != m->end()) {
    if (auto b = boolean(it->second.value, "health.link_errors_alarm")) c.health.link_errors_alarm = *b;
  }
  const std::array<std::pair<const char*, std::pair<int*, limits::IntRange>>, 4> ints{{
      {"counter_reads_per_second", {&c.health.counter_reads_per_second, limits::kCounterReadsPerSecond}},
      {"counter_start_after_s", {&c.health.counter_start_after_s, limits::kCounterStartAfterS}},
      {"error_window_s", {&c.health.error_window_s, limits::kErrorWindowS}},
      {"link_errors_min_ports", {&c.health.link_errors_min_ports, limits::kLinkErrorsMinPorts}},
  }};
  for (const auto& [key, target] : ints) {
    if (auto it = m->find(key); it != m->end()) {
      if (auto v = ranged(it->second.value, std::string("health.") + key, target.second))
        *target.first = static_cast<int>(*v);
    }
  }
  if (auto it = m->find("error_thresholds"); it != m->end()) {
    const std::vector<std::string> keys(kErrorThresholdKeys.begin(), kErrorThresholdKeys.end());
    if (auto t = check_map(it->second.value, "health.error_thresholds", keys)) {
      for (const auto& [key, entry] : *t)
        if (auto v = ranged(entry.value, "health.error_thresholds." + key, limits::kErrorThreshold))
          c.health.error_thresholds[key] = static_cast<int>(*v);
    }
  }
  if (auto it = m->find("link_degraded_alarm"); it != m->end()) {
    if (auto b = boolean(it->second.value, "health.link_degraded_alarm")) c.health.link_degraded_alarm = *b;
  }
  if (auto it = m->find("link_degraded_min_links"); it != m->end()) {
    if (auto v = ranged(it->second.value, "health.link_degraded_min_links", limits::kLinkDegradedMinLinks))
      c.health.link_degraded_min_links = static_cast<int>(*v);
  }
  for (const char* key : {"expect_switch_links", "expect_ca_links"}) {
    auto it = m->find(key);
    if (it == m->end()) continue;
    const std::string path = std::string("health.") + key;
    auto s = text(it->second.value, path);
    if (!s) continue;
    if (auto r = parse_link_rate(*s); !r) {
      error(it->second.value, path, r.error().message);
    } else {
      (std::string(key) == "expect_switch_links" ? c.health.expect_switch_links : c.health.expect_ca_links) = *s;
    }
  }
}

std::optional<std::pair<std::string, int>> Loader::host_port(const YAML::Node& v, const std::string& path,
                                                             const std::string& example) {
  auto s = text(v, path);
  if (!s) return std::nullopt;
  std::string addr, port_text;
  const auto colon = s->rfind(':');
  if (colon != std::string::npos) {
    addr = s->substr(0, colon);
    port_text = s->substr(colon + 1);
  }
  if (addr.size() >= 2 && addr.front() == '[' && addr.back() == ']') addr = addr.substr(1, addr.size() - 2);
  int port = 0;
  auto [ptr, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port, 10);
  if (colon == std::string::npos || addr.empty() || port_text.empty() || ec != std::errc() ||
      ptr != port_text.data() + port_text.size()) {
    error(v, path, "must be ADDRESS:PORT, e.g. " + example + " (got \"" + *s + "\")");
    return std::nullopt;
  }
  if (port < 1 || port > 65535) {
    error(v, path, "port must be between 1 and 65535 (got " + port_text + ")");
    return std::nullopt;
  }
  return std::make_pair(addr, port);
}

void Loader::load_continuity(const Entry& e, Config& c) {
  auto m = check_map(e.value, "continuity", key_names("continuity"));
  if (!m) return;
  auto& k = c.continuity;
  k.enabled = true;
  if (auto it = m->find("listen"); it != m->end()) {
    if (auto hp = host_port(it->second.value, "continuity.listen", "0.0.0.0:7390 or [::]:7390")) {
      in6_addr a6{};
      in_addr a4{};
      if (inet_pton(AF_INET, hp->first.c_str(), &a4) != 1 && inet_pton(AF_INET6, hp->first.c_str(), &a6) != 1)
        error(it->second.value, "continuity.listen",
              "the address must be an IP address to bind (0.0.0.0, ::, or one of this host's), got \"" + hp->first +
                  "\"");
      else
        k.listen_address = hp->first, k.listen_port = hp->second;
    }
  } else {
    error(e.key, "continuity", "missing required key 'listen' (ADDRESS:PORT where copies are received)");
  }
  for (auto [key, target] : {std::pair<const char*, std::string*>{"certificate", &k.certificate},
                             {"private_key", &k.private_key},
                             {"ca", &k.ca}}) {
    if (auto it = m->find(key); it != m->end()) {
      if (auto p = absolute_path(it->second.value, std::string("continuity.") + key)) *target = *p;
    } else {
      error(e.key, "continuity", std::string("missing required key '") + key + "'");
    }
  }
  const std::array<std::pair<const char*, std::pair<int*, limits::IntRange>>, 8> ints{{
      {"max_copy_age_s", {&k.max_copy_age_s, limits::kMaxCopyAgeS}},
      {"refresh_s", {&k.refresh_s, limits::kCopyRefreshS}},
      {"max_copy_mib", {&k.max_copy_mib, limits::kMaxCopyMiB}},
      {"max_services_per_port", {&k.max_services_per_port, limits::kCopyRecords}},
      {"max_services", {&k.max_services, limits::kCopyRecords}},
      {"max_subscriptions_per_port", {&k.max_subscriptions_per_port, limits::kCopyRecords}},
      {"max_subscriptions", {&k.max_subscriptions, limits::kCopyRecords}},
      {"max_groups", {&k.max_groups, limits::kCopyRecords}},
  }};
  for (const auto& [key, target] : ints)
    if (auto it = m->find(key); it != m->end())
      if (auto v = ranged(it->second.value, std::string("continuity.") + key, target.second))
        *target.first = static_cast<int>(*v);
}

void Loader::load_metrics(const Entry& e, Config& c) {
  auto m = check_map(e.value, "metrics", key_names("metrics"));
  if (!m) return;
  if (auto it = m->find("listen"); it != m->end()) {
    const YAML::Node& v = it->second.value;
    if (auto hp = host_port(v, "metrics.listen", "127.0.0.1:9464 or [::1]:9464")) {
      // localhost:9464 is 127.0.0.1.
      const std::string addr = hp->first == "localhost" ? std::string("127.0.0.1") : hp->first;
      if (!is_loopback_address(addr)) {
        error(v, "metrics.listen",
              "must be a loopback address (127.0.0.0/8, ::1 or localhost): smhad serves metrics "
              "on this host only; let node_exporter or a local proxy publish them (got \"" +
                  addr + "\")");
      } else {
        c.metrics.listen_address = addr;
        c.metrics.listen_port = hp->second;
      }
    }
  }
  if (auto it = m->find("textfile_dir"); it != m->end()) {
    if (auto s = absolute_path(it->second.value, "metrics.textfile_dir")) c.metrics.textfile_dir = *s;
  }
  if (auto it = m->find("textfile_interval_s"); it != m->end()) {
    if (auto v = ranged(it->second.value, "metrics.textfile_interval_s", limits::kTextfileIntervalS))
      c.metrics.textfile_interval = std::chrono::seconds(*v);
  }
}

void Loader::load_hooks(const Entry& e, Config& c) {
  if (e.value.IsNull()) return;
  auto m = check_map(e.value, "hooks", kHookEvents);
  if (!m) return;
  for (const auto& [event, entry] : *m) {
    std::string path = "hooks." + event;
    std::vector<std::string> programs;
    if (entry.value.IsSequence()) {
      for (std::size_t i = 0; i < entry.value.size(); ++i) {
        if (auto p = absolute_path(entry.value[i], path + "[" + std::to_string(i) + "]"))
          programs.push_back(*p);
      }
    } else if (auto p = absolute_path(entry.value, path)) {
      programs.push_back(*p);
    }
    c.hooks[event] = programs;
  }
}

void Loader::load_fabric(const CheckedMap& top, Config& c) {
  if (!options_.fabric.empty()) {
    if (auto why = fabric_name_problem(options_.fabric)) {
      error_at({}, "fabric", "the instance name '" + options_.fabric + "' (smhad --fabric) " + *why);
      return;
    }
    c.fabric = options_.fabric;
  }
  auto it = top.find("fabric");
  if (it == top.end()) return;
  auto s = text(it->second.value, "fabric");
  if (!s) return;
  if (auto why = fabric_name_problem(*s)) {
    error(it->second.value, "fabric", "'" + *s + "' " + *why);
    return;
  }
  if (!options_.fabric.empty() && *s != options_.fabric) {
    error(it->second.value, "fabric",
          "'" + *s + "' is not this instance's name '" + options_.fabric +
              "' (smhad --fabric, the unit smhad@" + options_.fabric + "); remove the key or make them the same");
    return;
  }
  c.fabric = *s;
}

// A key the file leaves out gets the instance's own default, so that two
// instances on one head share no file, socket or lock.
void Loader::apply_instance_defaults(Config& c) {
  if (c.fabric.empty()) return;
  const InstancePaths d = instance_defaults(c.fabric);
  auto given = [&](const char* key) { return positions_.count(key) > 0; };
  if (!given("state_dir")) c.state_dir = d.state_dir;
  if (!given("control.socket")) c.control.socket_path = d.socket_path;
  if (!given("opensm.conf_path")) c.opensm.conf_path = d.conf_path;
  if (!given("opensm.cache_dir")) c.opensm.cache_dir = d.cache_dir;
  if (!given("opensm.log_file")) c.opensm.log_file = d.log_file;
  if (!given("opensm.dump_files_dir")) c.opensm.dump_files_dir = d.dump_files_dir;
  c.metrics.textfile_name = d.textfile_name;
}

void Loader::cross_checks(const CheckedMap& top, Config& c) {
  // Peers must differ from this node.
  if (auto it = top.find("peers"); it != top.end() && it->second.value.IsSequence()) {
    const YAML::Node& seq = it->second.value;
    for (std::size_t i = 0; i < seq.size(); ++i) {
      if (!seq[i].IsMap()) continue;
      std::string path = "peers[" + std::to_string(i) + "]";
      const YAML::Node name = seq[i]["name"];
      if (name && name.IsScalar() && !c.node_name.empty() && name.Scalar() == c.node_name) {
        error(name, path + ".name", "a peer cannot have this node's name (node.name)");
      }
      const YAML::Node g = seq[i]["port_guid"];
      if (g && g.IsScalar() && c.port.port_guid) {
        auto pg = parse_guid(g.Scalar());
        if (pg && *pg == *c.port.port_guid) {
          error(g, path + ".port_guid", "a peer cannot have this node's port GUID (node.port_guid)");
        }
      }
    }
  }
  // Configured priorities: smha renders the standbys in their order below the
  // master and claim values and above the yield value (doc/ha-engine.md), so at
  // most 13 distinct values fit in OpenSM's 0..15.
  {
    std::vector<int> levels{c.sm_priority};
    for (const auto& p : c.peers) levels.push_back(p.sm_priority.value_or(c.sm_priority));
    std::sort(levels.begin(), levels.end());
    levels.erase(std::unique(levels.begin(), levels.end()), levels.end());
    if (levels.size() > 13) {
      auto it = top.find("sm_priority");
      Position pos = it != top.end() ? position_of(it->second.value) : Position{};
      error_at(pos, "sm_priority",
               std::to_string(levels.size()) +
                   " different sm_priority values among the heads (this one and peers[].sm_priority); "
                   "at most 13 fit: smha renders every standby in that order between the yield "
                   "priority below them and the master and claim priorities above them");
    }
  }
  // OpenSM's own polling must stay a slow backstop: it gives up on the master after
  // (polling_retry_number + 2) * sminfo_polling_timeout (osm_sm_state_mgr.c). It must
  // not fire before smha has noticed the loss itself.
  const auto& f = c.failover;
  auto smha_detect = f.poll_interval * (f.misses_before_takeover + 1);
  auto opensm_detect = f.opensm_polling_timeout * (f.opensm_polling_retries + 2);
  if (opensm_detect <= 2 * smha_detect) {
    auto it = top.find("failover");
    Position pos = it != top.end() ? position_of(it->second.key) : Position{};
    error_at(pos, "failover.opensm_polling_timeout_ms",
             "OpenSM's own takeover after " + std::to_string(opensm_detect.count()) +
                 " ms must be more than twice smha's detection time (" +
                 std::to_string(smha_detect.count()) +
                 " ms = poll_interval_ms * (misses_before_takeover + 1)); raise "
                 "opensm_polling_timeout_ms or opensm_polling_retries");
  }
  // The peer channel (doc/continuity.md): every peer needs its address; the
  // master's copies are its own sa_db_dump, and a standby's OpenSM reads the
  // copy as its sa_db_file (default: state_dir/opensm-sa.copy).
  if (c.continuity.enabled) {
    auto it = top.find("continuity");
    const Position pos = it != top.end() ? position_of(it->second.key) : Position{};
    for (std::size_t i = 0; i < c.peers.size(); ++i)
      if (c.peers[i].address_host.empty())
        error_at(pos, "peers[" + std::to_string(i) + "].address",
                 "peer " + c.peers[i].name +
                     " has no address: with continuity set, every peer needs the ADDRESS:PORT its smhad listens on "
                     "(its continuity.listen)");
    if (!c.opensm.sa_db_dump)
      error_at(pos, "opensm.sa_db_dump",
               "is false, but continuity sends the master's SA dump: it must be true (the default)");
    if (c.opensm.sa_db_file.empty()) c.opensm.sa_db_file = c.state_dir + "/opensm-sa.copy";
  }
}

// Records where each document starts; the node content is read by YAML::Load.
class DocumentStarts : public YAML::EventHandler {
 public:
  std::vector<YAML::Mark> starts;
  void OnDocumentStart(const YAML::Mark& mark) override { starts.push_back(mark); }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

// Anything after the first document. YAML::LoadAll is not used: on a stray flow
// indicator at document level (a lone ',' or ']') yaml-cpp 0.7 starts an empty
// document at that token without consuming it, forever. At most two documents
// are read here; a second one that does not start with '---' is such a token.
std::optional<Diagnostic> trailing_content(const std::string& text, const std::string& file) {
  std::istringstream in(text);
  YAML::Parser parser(in);
  DocumentStarts docs;
  if (!parser.HandleNextDocument(docs) || !parser.HandleNextDocument(docs) || docs.starts.size() < 2)
    return std::nullopt;
  const YAML::Mark& mark = docs.starts[1];
  Position pos;
  if (!mark.is_null()) pos = {mark.line + 1, mark.column + 1};
  const auto at = static_cast<std::size_t>(std::max(mark.pos, 0));
  if (text.compare(at, 3, "---") == 0)
    return Diagnostic{file, pos, "", "a second YAML document ('---') would be ignored; the file must hold exactly one"};
  std::string what = "end of file";
  if (at < text.size()) {
    const auto c = static_cast<unsigned char>(text[at]);
    char hex[8];
    std::snprintf(hex, sizeof hex, "0x%02x", c);
    what = std::isprint(c) ? "'" + std::string(1, static_cast<char>(c)) + "'" : std::string("byte ") + hex;
  }
  return Diagnostic{file, pos, "", "YAML syntax error: unexpected " + what + " where the document should end"};
}

ConfigResult Loader::load(std::string_view text) {
  YAML::Node root;
  try {
    const std::string whole(text);
    if (auto extra = trailing_content(whole, file_)) {
      errors_.push_back(std::move(*extra));
      return ConfigResult(std::move(errors_));
    }
    root = YAML::Load(whole);
  } catch (const YAML::DeepRecursion& ex) {
    // yaml-cpp's own message for this is "bad file".
    Position pos;
    if (!ex.mark.is_null()) pos = {ex.mark.line + 1, ex.mark.column + 1};
    errors_.push_back({file_, pos, "",
                       "YAML nesting too deep (more than " + std::to_string(ex.depth()) +
                           " levels of lists or maps; smha.yaml needs a few)"});
    return ConfigResult(std::move(errors_));
  } catch (const YAML::ParserException& ex) {
    Position pos;
    if (!ex.mark.is_null()) pos = {ex.mark.line + 1, ex.mark.column + 1};
    errors_.push_back({file_, pos, "", "YAML syntax error: " + ex.msg});
    return ConfigResult(std::move(errors_));
  } catch (const YAML::Exception& ex) {
    errors_.push_back({file_, {}, "", std::string("cannot parse YAML: ") + ex.what()});
    return ConfigResult(std::move(errors_));
  }
  if (auto tagged = first_tagged(root)) {
    error(*tagged, "",
          "YAML tag '" + tagged->Tag() + "' is not supported; write the plain value (smha.yaml uses no tags)");
    return ConfigResult(std::move(errors_));
  }
  if (root.IsNull()) {
    errors_.push_back({file_, {}, "", "the file is empty; at least 'node' is required"});
    return ConfigResult(std::move(errors_));
  }
  Config c;
  c.source_path = file_;
  // Every key the loader accepts is one of config::key_table() (keys.hpp).
  auto top = check_map(root, "", key_names(""));
  if (!top) return ConfigResult(std::move(errors_));

  if (auto it = top->find("node"); it != top->end()) {
    load_node(it->second, c);
  } else {
    error(root, "node", "missing required key 'node' (this node's name and IB port)");
  }
  if (auto it = top->find("peers"); it != top->end()) load_peers(it->second, c);
  if (auto it = top->find("sm_priority"); it != top->end()) {
    if (auto v = ranged(it->second.value, "sm_priority", limits::kSmPriority)) c.sm_priority = static_cast<int>(*v);
  }
  if (auto it = top->find("failover"); it != top->end()) load_failover(it->second, c);
  load_key(*top, "sm_key", c.sm_key, c.sm_key_set);
  load_key(*top, "sa_key", c.sa_key, c.sa_key_set);
  if (auto it = top->find("opensm"); it != top->end()) load_opensm(it->second, c);
  if (auto it = top->find("control"); it != top->end()) load_control(it->second, c);
  if (auto it = top->find("metrics"); it != top->end()) load_metrics(it->second, c);
  if (auto it = top->find("hooks"); it != top->end()) load_hooks(it->second, c);
  if (auto it = top->find("health"); it != top->end()) load_health(it->second, c);
  if (auto it = top->find("continuity"); it != top->end()) load_continuity(it->second, c);
  if (auto it = top->find("drift_unknown_alarm_s"); it != top->end()) {
    if (auto v = ranged(it->second.value, "drift_unknown_alarm_s", limits::kDriftUnknownAlarmS))
      c.drift_unknown_alarm = std::chrono::seconds(*v);
  }
  if (auto it = top->find("hook_timeout_s"); it != top->end()) {
    if (auto v = ranged(it->second.value, "hook_timeout_s", limits::kHookTimeoutS))
      c.hook_timeout = std::chrono::seconds(*v);
  }
  if (auto it = top->find("state_dir"); it != top->end()) {
    if (auto s = absolute_path(it->second.value, "state_dir")) c.state_dir = *s;
  }
  load_fabric(*top, c);
  apply_instance_defaults(c);
  cross_checks(*top, c);

  if (!errors_.empty()) {
    std::stable_sort(errors_.begin(), errors_.end(), [](const Diagnostic& a, const Diagnostic& b) {
      return std::tie(a.pos.line, a.pos.column) < std::tie(b.pos.line, b.pos.column);
    });
    return ConfigResult(std::move(errors_));
  }
  c.positions = std::move(positions_);
  return ConfigResult(std::move(c));
}

}  // namespace

ConfigResult load_config_from_string(std::string_view text, const std::string& name, const LoadOptions& options) {
  return Loader(name, options).load(text);
}

ConfigResult load_config(const std::string& path, const LoadOptions& options) {
  auto text = read_regular_file(path, kMaxConfigFileBytes);
  if (!text) {
    return ConfigResult(std::vector<Diagnostic>{{path, {}, "", "cannot read the file (" + text.error().message + ")"}});
  }
  return load_config_from_string(*text, path, options);
}

InstancePaths instance_defaults(const std::string& name) {
  InstancePaths p;
  p.state_dir = "/var/lib/smha/" + name;
  p.socket_path = instance_socket_path(name);
  p.conf_path = p.state_dir + "/opensm.conf";
  p.cache_dir = "/var/cache/opensm/" + name;
  p.log_file = "/var/log/opensm-" + name + ".log";
  p.dump_files_dir = "/var/log/opensm-" + name + "/";
  p.textfile_name = "smha-" + name + ".prom";
  return p;
}

std::vector<std::string> split_routing_engines(std::string_view chain) {
  std::vector<std::string> names;
  std::size_t pos = 0;
  while (pos <= chain.size()) {
    std::size_t comma = chain.find(',', pos);
    if (comma == std::string_view::npos) comma = chain.size();
    names.emplace_back(chain.substr(pos, comma - pos));
    pos = comma + 1;
  }
  return names;
}

bool is_loopback_address(std::string_view address) {
  const std::string a(address);
  in_addr v4{};
  if (::inet_pton(AF_INET, a.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  if (::inet_pton(AF_INET6, a.c_str(), &v6) == 1) return IN6_IS_ADDR_LOOPBACK(&v6);
  return false;
}

const std::map<std::string, ManagedKey, std::less<>>& managed_opensm_keys() {
  static const std::map<std::string, ManagedKey, std::less<>> keys = {
      {"guid", {"node.port_guid", " (or node.ca + node.port)"}},
      {"sm_priority", {"sm_priority", ""}},
      {"sm_key", {"sm_key", " or sm_key_file"}},
      {"sa_key", {"sa_key", " or sa_key_file"}},
      {"routing_engine", {"opensm.routing_engine", ""}},
      {"sweep_interval", {"opensm.sweep_interval", ""}},
      {"sminfo_polling_timeout", {"failover.opensm_polling_timeout_ms", ""}},
      {"polling_retry_number", {"failover.opensm_polling_retries", ""}},
      {"log_file", {"opensm.log_file", ""}},
      {"dump_files_dir", {"opensm.dump_files_dir", ""}},
      {"honor_guid2lid_file", {"opensm.honor_guid2lid_file", ""}},
      {"sa_db_dump", {"opensm.sa_db_dump", ""}},
      {"sa_db_file", {"opensm.sa_db_file", ""}},
      {"sharp_enabled", {"opensm.sharp", ""}},
  };
  return keys;
}

std::vector<Diagnostic> key_warnings(const Config& c) {
  std::vector<Diagnostic> out;
  auto at = [&c](const std::string& key) {
    const Position inline_pos = c.position_of(key);
    return inline_pos.line > 0 ? inline_pos : c.position_of(key + "_file");
  };
  if (!c.sm_key_set) out.push_back({c.source_path, {}, "sm_key", kDefaultSmKeyWarning});
  if (c.sa_key == 1) out.push_back({c.source_path, at("sa_key"), "sa_key", kDefaultSaKeyWarning});
  else if (c.sm_key_set && c.sa_key == c.sm_key)
    out.push_back({c.source_path, at("sa_key"), "sa_key", kSameSaKeyWarning});
  return out;
}

}  // namespace smha::config
