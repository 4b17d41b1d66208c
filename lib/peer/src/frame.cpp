// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/peer/frame.hpp"

#include <cstdio>
#include <cstring>

#include <nlohmann/json.hpp>

namespace smha::peer {

namespace {

using nlohmann::json;

constexpr std::array<std::uint8_t, 4> kMagic{'S', 'M', 'H', 'C'};
constexpr std::size_t kMaxName = 64;

std::uint32_t get32(std::span<const std::uint8_t> b, std::size_t off) {
  return static_cast<std::uint32_t>(b[off]) << 24 | static_cast<std::uint32_t>(b[off + 1]) << 16 |
         static_cast<std::uint32_t>(b[off + 2]) << 8 | b[off + 3];
}

void put32(std::vector<std::uint8_t>& b, std::uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<std::uint8_t>(v >> s));
}

std::vector<std::uint8_t> frame(FrameKind kind, const std::string& meta, std::string_view body) {
  std::vector<std::uint8_t> out(kMagic.begin(), kMagic.end());
  out.push_back(kFrameVersion);
  out.push_back(static_cast<std::uint8_t>(kind));
  out.push_back(0);
  out.push_back(0);
  put32(out, static_cast<std::uint32_t>(meta.size()));
  put32(out, static_cast<std::uint32_t>(body.size()));
  out.insert(out.end(), meta.begin(), meta.end());
  out.insert(out.end(), body.begin(), body.end());
  return out;
}

Error protocol(std::string what) { return make_error(Errc::Protocol, std::move(what)); }

Result<json> parse_meta(std::string_view text) {
  if (text.size() > kMaxMetaBytes)
    return make_error(Errc::FrameTooLarge, "meta is " + std::to_string(text.size()) + " bytes; at most 4096");
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return protocol("meta is not a JSON object");
  return j;
}

Result<std::string> name_field(const json& j, const char* key, bool may_be_empty) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_string()) return protocol(std::string("meta \"") + key + "\" is missing or not a string");
  auto s = it->get<std::string>();
  if (s.size() > kMaxName) return protocol(std::string("meta \"") + key + "\" is longer than 64 bytes");
  if (!may_be_empty && s.empty()) return protocol(std::string("meta \"") + key + "\" is empty");
  for (unsigned char c : s)
    if (c < 0x20 || c == 0x7f) return protocol(std::string("meta \"") + key + "\" has a control character");
  return s;
}

Result<std::uint64_t> number_field(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_unsigned())
    return protocol(std::string("meta \"") + key + "\" is missing or not an unsigned integer");
  return it->get<std::uint64_t>();
}

}  // namespace

std::string_view to_string(FrameKind k) {
  switch (k) {
    case FrameKind::SaDump: return "sa_dump";
    case FrameKind::Guid2Lid: return "guid2lid";
    case FrameKind::Answer: return "answer";
    case FrameKind::Notice: return "notice";
  }
  return "?";
}

Result<FrameHeader> decode_frame_header(std::span<const std::uint8_t> b, std::size_t max_body) {
  if (b.size() != kFrameHeaderSize)
    return protocol("frame header is " + std::to_string(b.size()) + " bytes; expected 16");
  if (!std::equal(kMagic.begin(), kMagic.end(), b.begin()))
    return protocol("frame magic at offset 0 is not \"SMHC\" (not an smha peer channel)");
  if (b[4] != kFrameVersion) return protocol("frame version " + std::to_string(b[4]) + " at offset 4; expected 1");
  if (b[5] < 1 || b[5] > 4) return protocol("frame kind " + std::to_string(b[5]) + " at offset 5 is unknown");
  if (b[6] != 0 || b[7] != 0) return protocol("frame reserved bytes 6-7 are not zero");
  FrameHeader h;
  h.kind = static_cast<FrameKind>(b[5]);
  h.meta_len = get32(b, 8);
  h.body_len = get32(b, 12);
  if (h.meta_len < 2) return protocol("frame meta length " + std::to_string(h.meta_len) + " at offset 8 is below 2");
  if (h.meta_len > kMaxMetaBytes)
    return make_error(Errc::FrameTooLarge,
                      "frame meta length " + std::to_string(h.meta_len) + " at offset 8 is over 4096");
  if ((h.kind == FrameKind::Answer || h.kind == FrameKind::Notice) && h.body_len != 0)
    return protocol(std::string(h.kind == FrameKind::Answer ? "an answer" : "a notice") + " frame has a body (" +
                    std::to_string(h.body_len) + " bytes at offset 12)");
  if (h.body_len > max_body)
    return make_error(Errc::FrameTooLarge, "frame body length " + std::to_string(h.body_len) +
                                               " at offset 12 is over the cap of " + std::to_string(max_body));
  return h;
}

namespace {

// `s` cut to at most `n` bytes, not inside a UTF-8 sequence (the JSON encoder
// would replace a cut one, and the text would not read back the same).
std::string cut_utf8(std::string s, std::size_t n) {
  if (s.size() <= n) return s;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  s.resize(n);
  return s;
}

Result<FrameKind> file_kind_field(const json& j) {
  auto kind = name_field(j, "kind", false);
  if (!kind) return kind.error();
  if (*kind == "sa_dump") return FrameKind::SaDump;
  if (*kind == "guid2lid") return FrameKind::Guid2Lid;
  return protocol("meta \"kind\" is not sa_dump or guid2lid");
}

// "fabric", "from" and "master_guid": who sends, of which fabric and master.
struct Identity {
  std::string fabric, from;
  Guid master_guid;
};

Result<Identity> identity_fields(const json& j) {
  auto fabric = name_field(j, "fabric", true);
  if (!fabric) return fabric.error();
  auto from = name_field(j, "from", false);
  if (!from) return from.error();
  auto guid_text = name_field(j, "master_guid", false);
  if (!guid_text) return guid_text.error();
  auto guid = parse_guid(*guid_text);
  if (!guid || guid_text->size() != 18 || guid->value == 0)
    return protocol("meta \"master_guid\" is not a port GUID (0x and 16 hex digits, not 0)");
  return Identity{std::move(*fabric), std::move(*from), *guid};
}

}  // namespace

Result<CopyMeta> decode_copy_meta(std::string_view text) {
  auto j = parse_meta(text);
  if (!j) return j.error();
  CopyMeta m;
  auto id = identity_fields(*j);
  if (!id) return id.error();
  auto gen = number_field(*j, "generation");
  if (!gen) return gen.error();
  if (*gen == 0) return protocol("meta \"generation\" is 0");
  auto age = number_field(*j, "age_ms");
  if (!age) return age.error();
  m.fabric = std::move(id->fabric);
  m.from = std::move(id->from);
  m.master_guid = id->master_guid;
  m.generation = *gen;
  m.age_ms = *age;
  if (auto it = j->find("trimmed"); it != j->end()) {
    if (!it->is_string()) return protocol("meta \"trimmed\" is not a string");
    const auto& t = it->get_ref<const std::string&>();
    if (t.size() > kMaxTrimmedText)
      return protocol("meta \"trimmed\" is longer than " + std::to_string(kMaxTrimmedText) + " bytes");
    for (unsigned char c : t)
      if (c < 0x20 || c == 0x7f) return protocol("meta \"trimmed\" has a control character");
    m.trimmed = t;
  }
  return m;
}

Result<AnswerMeta> decode_answer_meta(std::string_view text) {
  auto j = parse_meta(text);
  if (!j) return j.error();
  AnswerMeta m;
  auto kind = file_kind_field(*j);
  if (!kind) return kind.error();
  m.kind = *kind;
  auto gen = number_field(*j, "generation");
  if (!gen) return gen.error();
  m.generation = *gen;
  auto it = j->find("applied");
  if (it == j->end() || !it->is_boolean()) return protocol("meta \"applied\" is missing or not a boolean");
  m.applied = it->get<bool>();
  auto reason = name_field(*j, "reason", true);
  if (!reason) return reason.error();
  m.reason = std::move(*reason);
  it = j->find("text");
  if (it == j->end() || !it->is_string()) return protocol("meta \"text\" is missing or not a string");
  m.text = cut_utf8(it->get<std::string>(), 512);
  if (j->contains("held")) {
    auto held = number_field(*j, "held");
    if (!held) return held.error();
    m.held = *held;
  }
  return m;
}

Result<NoticeMeta> decode_notice_meta(std::string_view text) {
  auto j = parse_meta(text);
  if (!j) return j.error();
  NoticeMeta m;
  auto kind = file_kind_field(*j);
  if (!kind) return kind.error();
  auto id = identity_fields(*j);
  if (!id) return id.error();
  auto age = number_field(*j, "age_ms");
  if (!age) return age.error();
  auto it = j->find("problem");
  if (it == j->end() || !it->is_string()) return protocol("meta \"problem\" is missing or not a string");
  m.kind = *kind;
  m.fabric = std::move(id->fabric);
  m.from = std::move(id->from);
  m.master_guid = id->master_guid;
  m.age_ms = *age;
  m.problem = cut_utf8(it->get<std::string>(), 512);
  it = j->find("counts");
  if (it != j->end() && !it->is_null()) {
    if (!it->is_object()) return protocol("meta \"counts\" is not an object");
    SaCounts c;
    for (auto [key, field] : {std::pair{"groups", &c.groups}, std::pair{"members", &c.members},
                              std::pair{"services", &c.services}, std::pair{"subscriptions", &c.subscriptions}}) {
      auto n = number_field(*it, key);
      if (!n) return make_error(Errc::Protocol, "meta \"counts\": " + n.error().message.substr(5));
      *field = *n;
    }
    m.counts = c;
  }
  return m;
}

std::vector<std::uint8_t> encode_copy_frame(FrameKind kind, const CopyMeta& m, std::string_view body) {
  json j{{"fabric", m.fabric}, {"from", m.from}, {"master_guid", to_string(m.master_guid)}, {"generation", m.generation},
               {"age_ms", m.age_ms}};
  if (!m.trimmed.empty()) j["trimmed"] = m.trimmed.substr(0, kMaxTrimmedText);
  return frame(kind, j.dump(-1, ' ', false, json::error_handler_t::replace), body);
}

std::vector<std::uint8_t> encode_answer_frame(const AnswerMeta& m) {
  const json j{{"kind", std::string(to_string(m.kind))}, {"generation", m.generation}, {"applied", m.applied},
               {"reason", m.reason}, {"text", cut_utf8(m.text, 512)}, {"held", m.held}};
  return frame(FrameKind::Answer, j.dump(-1, ' ', false, json::error_handler_t::replace), {});
}

std::vector<std::uint8_t> encode_notice_frame(const NoticeMeta& m) {
  json j{{"kind", std::string(to_string(m.kind))}, {"fabric", m.fabric}, {"from", m.from},
         {"master_guid", to_string(m.master_guid)}, {"age_ms", m.age_ms}, {"problem", cut_utf8(m.problem, 512)},
         {"counts", nullptr}};
  if (m.counts)
    j["counts"] = {{"groups", m.counts->groups}, {"members", m.counts->members}, {"services", m.counts->services},
                   {"subscriptions", m.counts->subscriptions}};
  return frame(FrameKind::Notice, j.dump(-1, ' ', false, json::error_handler_t::replace), {});
}

}  // namespace smha::peer
