// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/control/protocol.hpp"

#include <algorithm>
#include <array>
#include <utility>

namespace smha::control {
namespace {

using nlohmann::json;

constexpr std::array<std::pair<ResultCode, std::string_view>, 8> kResultNames{{
    {ResultCode::Ok, "ok"},
    {ResultCode::Error, "error"},
    {ResultCode::Unsupported, "unsupported"},
    {ResultCode::NotFound, "not_found"},
    {ResultCode::Conflict, "conflict"},
    {ResultCode::VersionMismatch, "version_mismatch"},
    {ResultCode::Unauthorized, "unauthorized"},
    {ResultCode::BadRequest, "bad_request"},
}};

std::string dump_safe(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

// At most `limit` characters of `s`, for quoting client input in messages.
std::string quote_prefix(std::string_view s, std::size_t limit = kMaxMethodLength) {
  std::string out = dump_safe(json(std::string(s.substr(0, limit))));
  if (s.size() > limit) out += "...";
  return out;
}

bool valid_method_name(std::string_view name) {
  if (name.empty() || name.size() > kMaxMethodLength) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
  });
}

Error bad(std::string message) { return make_error(Errc::BadRequest, std::move(message)); }
Error proto(std::string message) { return make_error(Errc::Protocol, std::move(message)); }

std::string got(const json& j) { return std::string("got ") + j.type_name(); }

// Shared by request and reply: an optional "id" that must be a string or an integer.
Result<std::optional<json>> read_id(const json& doc) {
  auto it = doc.find("id");
  if (it == doc.end() || it->is_null()) return std::optional<json>{};
  if (!it->is_string() && !it->is_number_integer()) {
    return make_error(Errc::Invalid, "\"id\" must be a string or an integer, " + got(*it));
  }
  return std::optional<json>{*it};
}

}  // namespace

std::string_view to_string(ResultCode code) {
  for (const auto& [c, name] : kResultNames) {
    if (c == code) return name;
  }
  return "unknown";
}

std::optional<ResultCode> parse_result_code(std::string_view text) {
  for (const auto& [c, name] : kResultNames) {
    if (name == text) return c;
  }
  return std::nullopt;
}

std::string_view to_string(Access access) {
  return access == Access::Mutating ? "mutating" : "read-only";
}

Reply Reply::ok(nlohmann::json data, std::string text) {
  Reply r;
  r.data = std::move(data);
  r.text = std::move(text);
  return r;
}

Reply Reply::failure(ResultCode code, std::string text, nlohmann::json data) {
  Reply r;
  r.result = code;
  r.text = std::move(text);
  r.data = std::move(data);
  return r;
}

Result<std::vector<std::string>> FrameDecoder::feed(std::string_view bytes) {
  auto too_large = [this] {
    failed_ = true;
    partial_.clear();
    partial_.shrink_to_fit();
    return make_error(Errc::FrameTooLarge,
                      "message exceeds " + std::to_string(max_frame_) + " bytes without a terminator");
  };
  if (failed_) return too_large();
  std::vector<std::string> frames;
  while (!bytes.empty()) {
    std::size_t end = bytes.find(kFrameTerminator);
    std::string_view piece = bytes.substr(0, end);
    if (partial_.size() + piece.size() > max_frame_) return too_large();
    partial_.append(piece);
    if (end == std::string_view::npos) break;
    frames.push_back(std::move(partial_));
    partial_.clear();
    bytes.remove_prefix(end + 1);
  }
  return frames;
}

namespace {

// A first pass over the text that checks syntax and depth without building
// anything and without exceptions: a syntax error is reported to parse_error()
// as an object, not thrown. Throwing one per bad frame cost ~100 us each
// (a client sending NULs makes one empty frame per byte).
class CheckingSax {
 public:
  bool null() { return true; }
  bool boolean(bool) { return true; }
  bool number_integer(json::number_integer_t) { return true; }
  bool number_unsigned(json::number_unsigned_t) { return true; }
  bool number_float(json::number_float_t, const json::string_t&) { return true; }
  bool string(json::string_t&) { return true; }
  bool binary(json::binary_t&) { return true; }
  bool start_object(std::size_t) { return open(); }
  bool key(json::string_t&) { return true; }
  bool end_object() { return close(); }
  bool start_array(std::size_t) { return open(); }
  bool end_array() { return close(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& ex) {
    error = ex.what();
    return false;
  }

  std::string error;  // set on a syntax error
  bool too_deep = false;

 private:
  bool open() {
    if (++depth_ > kMaxJsonDepth) {
      too_deep = true;
      return false;
    }
    return true;
  }
  bool close() {
    --depth_;
    return true;
  }
  int depth_ = 0;
};

Result<nlohmann::json> parse_text(std::string_view text) {
  CheckingSax check;
  if (!json::sax_parse(text.begin(), text.end(), &check, nlohmann::detail::input_format_t::json, /*strict=*/true,
                       /*ignore_comments=*/false)) {
    if (check.too_deep) {
      return make_error(Errc::TooLarge, "JSON nesting deeper than " + std::to_string(kMaxJsonDepth) + " levels");
    }
    // Drop the "[json.exception.parse_error.101] " prefix; keep line/column.
    std::string_view what = check.error;
    if (auto pos = what.find("] "); pos != std::string_view::npos) what.remove_prefix(pos + 2);
    return make_error(Errc::Parse, "invalid JSON: " + std::string(what));
  }
  auto doc = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false, /*ignore_comments=*/false);
  if (doc.is_discarded()) return make_error(Errc::Parse, "invalid JSON");  // not reached: checked above
  return doc;
}

}  // namespace

Result<nlohmann::json> parse_json(std::string_view text) {
  if (text.empty()) {
    // A client sending NULs makes one empty frame per byte (most frames of a
    // fuzzed input): their error, the parser's own, is built once. Building it
    // (nlohmann's parse_error and its message) was most of an empty frame's cost.
    static const Error empty = parse_text({}).error();
    return empty;
  }
  return parse_text(text);
}

Result<Request> parse_request(std::string_view frame) {
  auto parsed = parse_json(frame);
  if (!parsed) return bad(parsed.error().message);
  return request_from_json(*parsed);
}

Result<Request> request_from_json(const nlohmann::json& doc) {
  if (!doc.is_object()) return bad("request must be a JSON object, " + got(doc));

  Request req;
  auto method = doc.find("method");
  if (method == doc.end()) return bad("request has no \"method\"");
  if (!method->is_string()) return bad("\"method\" must be a string, " + got(*method));
  const auto& name = method->get_ref<const std::string&>();
  if (!valid_method_name(name)) {
    return bad("\"method\" must be 1-" + std::to_string(kMaxMethodLength) +
               " characters of a-z, 0-9 and '-', got " + quote_prefix(name));
  }
  req.method = name;

  if (auto params = doc.find("params"); params != doc.end() && !params->is_null()) {
    if (!params->is_object()) return bad("\"params\" must be an object, " + got(*params));
    req.params = *params;
  }
  auto id = read_id(doc);
  if (!id) return bad(id.error().message);
  req.id = std::move(*id);

  if (auto v = doc.find("version"); v != doc.end() && !v->is_null()) {
    if (!v->is_number_integer() || v->get<int64_t>() < 0 || v->get<int64_t>() > 1'000'000) {
      return bad("\"version\" must be a non-negative integer, got " + dump_safe(*v).substr(0, 32));
    }
    req.version = static_cast<int>(v->get<int64_t>());
  }
  return req;
}

Result<Reply> parse_reply(std::string_view frame) {
  auto parsed = parse_json(frame);
  if (!parsed) return proto("reply: " + parsed.error().message);
  return reply_from_json(*parsed);
}

Result<Reply> reply_from_json(const nlohmann::json& doc) {
  if (!doc.is_object()) return proto("reply must be a JSON object, " + got(doc));

  Reply reply;
  auto result = doc.find("result");
  if (result == doc.end() || !result->is_string()) return proto("reply has no string \"result\"");
  auto code = parse_result_code(result->get_ref<const std::string&>());
  if (!code) return proto("reply has unknown result " + quote_prefix(result->get_ref<const std::string&>()));
  reply.result = *code;

  auto version = doc.find("version");
  if (version == doc.end() || !version->is_number_integer()) {
    return proto("reply has no integer \"version\"");
  }
  reply.version = version->get<int>();
  if (auto text = doc.find("text"); text != doc.end()) {
    if (!text->is_string()) return proto("reply \"text\" must be a string, " + got(*text));
    reply.text = text->get<std::string>();
  }
  if (auto data = doc.find("data"); data != doc.end()) reply.data = *data;
  auto id = read_id(doc);
  if (!id) return proto("reply " + id.error().message);
  reply.id = std::move(*id);
  return reply;
}

std::string encode_request(const Request& request) {
  json doc = {{"method", request.method}, {"params", request.params}};
  if (request.id) doc["id"] = *request.id;
  doc["version"] = request.version.value_or(kProtocolVersion);
  std::string out = dump_safe(doc);
  out.push_back(kFrameTerminator);
  return out;
}

std::string encode_reply(const Reply& reply) {
  // Assembled by hand so `data` (the big part) is serialised without a copy.
  std::string out;
  out.reserve(64 + reply.text.size());
  out += R"({"result":")";
  out += to_string(reply.result);
  out += R"(","text":)";
  out += dump_safe(json(reply.text));
  out += R"(,"data":)";
  out += dump_safe(reply.data);
  out += R"(,"version":)";
  out += std::to_string(kProtocolVersion);
  if (reply.id) {
    out += R"(,"id":)";
    out += dump_safe(*reply.id);
  }
  out += '}';
  out.push_back(kFrameTerminator);
  return out;
}

std::vector<std::string> method_params(std::string_view method) {
  std::vector<std::string> out;
  for (const auto& spec : kMethods) {
    if (spec.name != method) continue;
    for (auto p : spec.params)
      if (!p.empty()) out.emplace_back(p);
  }
  return out;
}

Status check_params(std::string_view method, const nlohmann::json& params,
                    const std::vector<std::string>& allowed) {
  if (!params.is_object()) return bad("\"params\" must be an object, " + got(params));
  std::string unknown;
  std::size_t count = 0;
  for (const auto& item : params.items()) {
    if (std::find(allowed.begin(), allowed.end(), item.key()) != allowed.end()) continue;
    if (count < 8) unknown += (count == 0 ? "" : ", ") + quote_prefix(item.key());
    else if (count == 8) unknown += ", ...";
    ++count;
  }
  if (count == 0) return Status::Ok();
  std::string takes;
  for (const auto& a : allowed) takes += (takes.empty() ? "" : ", ") + a;
  return bad("method '" + std::string(method) + "' takes no parameter" + (count > 1 ? "s " : " ") + unknown +
             " (it takes: " + (takes.empty() ? std::string("none") : takes) + ")");
}

Reply bad_request_reply(const Error& error) {
  return Reply::failure(ResultCode::BadRequest, error.message);
}

}  // namespace smha::control
