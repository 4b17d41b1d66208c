// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// The pure codec: framing, JSON limits, request/reply validation.
#include <catch2/catch.hpp>

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "smha/control/protocol.hpp"

using namespace smha::control;
using nlohmann::json;

namespace {
std::string frame(const std::string& body) { return body + std::string(1, '\0'); }
}  // namespace

TEST_CASE("result codes round-trip through their wire names", "[control][protocol]") {
  for (int i = 0; i <= 7; ++i) {
    auto code = static_cast<ResultCode>(i);
    auto name = to_string(code);
    CAPTURE(i, name);
    REQUIRE(name != "unknown");
    REQUIRE(parse_result_code(name) == code);
  }
  CHECK(to_string(static_cast<ResultCode>(99)) == "unknown");
  CHECK_FALSE(parse_result_code("OK").has_value());
  CHECK(to_string(ResultCode::VersionMismatch) == "version_mismatch");
  CHECK(to_string(ResultCode::BadRequest) == "bad_request");
}

TEST_CASE("the method table: each name once, a valid method name, built-ins read-only, documented",
          "[control][protocol]") {
  std::set<std::string_view> names;
  for (const auto& m : kMethods) {
    CAPTURE(m.name);
    CHECK(names.insert(m.name).second);
    CHECK(parse_request(json{{"method", m.name}}.dump()).ok());
  }
  CHECK(names.size() == std::size(kMethods));
  auto access_of = [](std::string_view name) {
    for (const auto& m : kMethods)
      if (m.name == name) return std::optional<Access>(m.access);
    return std::optional<Access>();
  };
  CHECK(access_of(method::kVersion) == Access::ReadOnly);
  CHECK(access_of(method::kListMethods) == Access::ReadOnly);
  CHECK(access_of(method::kStatus) == Access::ReadOnly);
  CHECK(access_of(method::kHandover) == Access::Mutating);
  CHECK(access_of(method::kReload) == Access::Mutating);

  // doc/control-protocol.md, the contract, has a section heading naming each.
  std::ifstream doc(std::string(SMHA_SOURCE_DIR) + "/doc/control-protocol.md");
  REQUIRE(doc);
  std::string headings, line;
  while (std::getline(doc, line))
    if (line.rfind("### ", 0) == 0) headings += line + "\n";
  for (const auto& m : kMethods) {
    CAPTURE(m.name);
    CHECK(headings.find("`" + std::string(m.name) + "`") != std::string::npos);
  }
}

TEST_CASE("the method table's params: what each method takes, documented in its section",
          "[control][protocol]") {
  CHECK(method_params(method::kStatus).empty());
  CHECK(method_params(method::kEvents) == std::vector<std::string>{param::kN, param::kAfter, param::kWaitS});
  CHECK(method_params(method::kHold) == std::vector<std::string>{param::kDurationS, param::kReason});
  CHECK(method_params(method::kHandover) == std::vector<std::string>{param::kTo});
  CHECK(method_params("no-such-method").empty());
  // Each method's section in doc/control-protocol.md names each key it takes.
  std::ifstream doc(std::string(SMHA_SOURCE_DIR) + "/doc/control-protocol.md");
  REQUIRE(doc);
  std::map<std::string, std::string> sections;
  std::string current, line;
  while (std::getline(doc, line)) {
    if (line.rfind("### `", 0) == 0) current = line.substr(5, line.find('`', 5) - 5);
    else if (!current.empty()) sections[current] += line + "\n";
  }
  for (const auto& m : kMethods)
    for (auto p : m.params) {
      if (p.empty()) continue;
      CAPTURE(m.name, p);
      CHECK(sections[std::string(m.name)].find("`" + std::string(p) + "`") != std::string::npos);
    }
}

TEST_CASE("check_params: keys outside the method's list are refused by name", "[control][protocol]") {
  CHECK(check_params("hold", json::object(), {"duration_s", "reason"}).ok());
  CHECK(check_params("hold", json{{"reason", "x"}}, {"duration_s", "reason"}).ok());
  auto st = check_params("hold", json{{"duration", 5}}, {"duration_s", "reason"});
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().code == smha::Errc::BadRequest);
  CHECK(st.error().message == "method 'hold' takes no parameter \"duration\" (it takes: duration_s, reason)");
  st = check_params("status", json{{"a", 1}, {"b\x1b", 2}}, {});
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().message == "method 'status' takes no parameters \"a\", \"b\\u001b\" (it takes: none)");
  // Thousands of keys make a bounded message.
  json many = json::object();
  for (int i = 0; i < 5000; ++i) many["k" + std::to_string(i)] = i;
  st = check_params("status", many, {});
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().message.size() < 200);
  CHECK_THAT(st.error().message, Catch::Contains(", ..."));
}

TEST_CASE("decoder reassembles a frame split across reads", "[control][protocol]") {
  std::string wire = frame(R"({"method":"status"})");
  for (std::size_t cut = 0; cut <= wire.size(); ++cut) {
    FrameDecoder d;
    auto a = d.feed(std::string_view(wire).substr(0, cut));
    REQUIRE(a.ok());
    auto b = d.feed(std::string_view(wire).substr(cut));
    REQUIRE(b.ok());
    std::vector<std::string> all = *a;
    all.insert(all.end(), b->begin(), b->end());
    CAPTURE(cut);
    REQUIRE(all.size() == 1);
    CHECK(all[0] == R"({"method":"status"})");
    CHECK(d.pending() == 0);
  }
}

TEST_CASE("decoder feeds one byte at a time", "[control][protocol]") {
  std::string wire = frame(R"({"method":"a"})") + frame(R"({"method":"b"})");
  FrameDecoder d;
  std::vector<std::string> got;
  for (char c : wire) {
    auto r = d.feed(std::string_view(&c, 1));
    REQUIRE(r.ok());
    got.insert(got.end(), r->begin(), r->end());
  }
  REQUIRE(got == std::vector<std::string>{R"({"method":"a"})", R"({"method":"b"})"});
}

TEST_CASE("decoder returns several frames from one read, keeping the tail", "[control][protocol]") {
  FrameDecoder d;
  auto r = d.feed(frame("1") + frame("2") + frame("") + "{\"par");
  REQUIRE(r.ok());
  CHECK(*r == std::vector<std::string>{"1", "2", ""});
  CHECK(d.pending() == 5);
  auto r2 = d.feed(std::string("tial\"}") + '\0');
  REQUIRE(r2.ok());
  CHECK(*r2 == std::vector<std::string>{"{\"partial\"}"});
}

TEST_CASE("decoder rejects an oversized frame before its terminator", "[control][protocol]") {
  FrameDecoder d(16);
  REQUIRE(d.feed(std::string(16, 'x')).ok());  // exactly the limit is fine so far
  auto r = d.feed("y");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == smha::Errc::FrameTooLarge);
  CHECK(r.error().message.find("16 bytes") != std::string::npos);
  CHECK(d.failed());
  // Stays failed, even for a valid frame.
  auto again = d.feed(frame("{}"));
  REQUIRE_FALSE(again.ok());
  CHECK(again.error().code == smha::Errc::FrameTooLarge);
}

TEST_CASE("decoder accepts a frame of exactly the limit", "[control][protocol]") {
  FrameDecoder d(kMaxRequestBytes);
  auto r = d.feed(frame(std::string(kMaxRequestBytes, 'a')));
  REQUIRE(r.ok());
  REQUIRE(r->size() == 1);
  CHECK((*r)[0].size() == kMaxRequestBytes);
  FrameDecoder d2(kMaxRequestBytes);
  CHECK_FALSE(d2.feed(frame(std::string(kMaxRequestBytes + 1, 'a'))).ok());
}

TEST_CASE("parse_request accepts the documented envelope", "[control][protocol]") {
  auto r = parse_request(R"({"method":"status","params":{"verbose":true},"id":"abc","version":1})");
  REQUIRE(r.ok());
  CHECK(r->method == "status");
  CHECK(r->params == json{{"verbose", true}});
  REQUIRE(r->id.has_value());
  CHECK(*r->id == "abc");
  CHECK(r->version == 1);

  auto minimal = parse_request(R"({"method":"list-methods"})");
  REQUIRE(minimal.ok());
  CHECK(minimal->params == json::object());
  CHECK_FALSE(minimal->id.has_value());
  CHECK_FALSE(minimal->version.has_value());

  auto extra = parse_request(R"({"method":"x","future_field":[1,2]})");
  CHECK(extra.ok());
}

TEST_CASE("parse_request names what is wrong", "[control][protocol]") {
  struct Case {
    const char* input;
    const char* expect;
  };
  const Case cases[] = {
      {"", "invalid JSON"},
      {"garbage", "invalid JSON"},
      {R"({"method":"status")", "invalid JSON"},  // truncated
      {"\xff\xfe", "invalid JSON"},
      {R"({"method":"st\xff"})", "invalid JSON"},  // invalid UTF-8
      {"[]", "request must be a JSON object, got array"},
      {"42", "request must be a JSON object, got number"},
      {R"("status")", "request must be a JSON object, got string"},
      {"null", "request must be a JSON object, got null"},
      {R"({"params":{}})", "request has no \"method\""},
      {R"({"method":7})", "\"method\" must be a string, got number"},
      {R"({"method":["status"]})", "\"method\" must be a string, got array"},
      {R"({"method":""})", "\"method\" must be 1-64 characters"},
      {R"({"method":"Status"})", "got \"Status\""},
      {R"({"method":"a b"})", "\"method\" must be 1-64 characters"},
      {R"({"method":"status","params":[]})", "\"params\" must be an object, got array"},
      {R"({"method":"status","params":"x"})", "\"params\" must be an object, got string"},
      {R"({"method":"status","id":{}})", "\"id\" must be a string or an integer, got object"},
      {R"({"method":"status","id":1.5})", "\"id\" must be a string or an integer, got number"},
      {R"({"method":"status","version":"1"})", "\"version\" must be a non-negative integer"},
      {R"({"method":"status","version":-1})", "\"version\" must be a non-negative integer"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.input);
    auto r = parse_request(c.input);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == smha::Errc::BadRequest);
    CHECK_THAT(r.error().message, Catch::Contains(c.expect));
  }
}

TEST_CASE("parse_request reports where the JSON is broken", "[control][protocol]") {
  auto r = parse_request("{\"method\":\"status\",}");
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error().message, Catch::Contains("column"));
  CHECK_THAT(r.error().message, !Catch::Contains("json.exception"));
}

TEST_CASE("an empty frame (a NUL alone) gets the parser's own message, every time", "[control][protocol]") {
  // parse_json answers an empty frame from a message built once; it must be the
  // message the parser gives, with its position, and stay the same.
  for (int i = 0; i < 3; ++i) {
    auto r = parse_json("");
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == smha::Errc::Parse);
    CHECK(r.error().message ==
          "invalid JSON: parse error at line 1, column 1: syntax error while parsing value - "
          "unexpected end of input; "
          "expected '[', '{', or a literal");
  }
  // A frame that is not empty still gets its own position.
  auto blank = parse_json(" ");
  REQUIRE_FALSE(blank.ok());
  CHECK_THAT(blank.error().message, Catch::Contains("unexpected end of input"));
}

TEST_CASE("a long method name is quoted truncated", "[control][protocol]") {
  std::string name(5000, 'A');
  auto r = parse_request(R"({"method":")" + name + "\"}");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.size() < 200);
  CHECK_THAT(r.error().message, Catch::EndsWith("..."));
}

TEST_CASE("nesting is bounded", "[control][protocol]") {
  auto nested = [](int depth) {
    std::string s = R"({"method":"status","params":{"x":)";  // depth 2 so far
    for (int i = 0; i < depth - 2; ++i) s += "[";
    s += "1";
    for (int i = 0; i < depth - 2; ++i) s += "]";
    return s + "}}";
  };
  CHECK(parse_request(nested(kMaxJsonDepth)).ok());
  auto deep = parse_request(nested(kMaxJsonDepth + 1));
  REQUIRE_FALSE(deep.ok());
  CHECK_THAT(deep.error().message, Catch::Contains("nesting deeper than 32"));

  // 60 000 levels fit in one 64 KiB frame; parsing must neither recurse nor crash.
  std::string bomb(60'000, '[');
  auto b = parse_request(bomb);
  REQUIRE_FALSE(b.ok());
  CHECK_THAT(b.error().message, Catch::Contains("nesting deeper"));
  std::string obj_bomb;
  for (int i = 0; i < 20'000; ++i) obj_bomb += R"({"a":)";
  CHECK_FALSE(parse_request(obj_bomb).ok());
}

TEST_CASE("replies encode with version and id and parse back", "[control][protocol]") {
  Reply r = Reply::failure(ResultCode::Conflict, "handover running", json{{"since", 3}});
  r.id = json(9);
  std::string wire = encode_reply(r);
  REQUIRE(wire.back() == '\0');
  auto doc = json::parse(wire.substr(0, wire.size() - 1));
  CHECK(doc["result"] == "conflict");
  CHECK(doc["version"] == kProtocolVersion);
  CHECK(doc["id"] == 9);

  auto back = parse_reply(wire.substr(0, wire.size() - 1));
  REQUIRE(back.ok());
  CHECK(back->result == ResultCode::Conflict);
  CHECK(back->text == "handover running");
  CHECK(back->data == json{{"since", 3}});
  CHECK(back->id == json(9));
}

TEST_CASE("encoding never throws on invalid UTF-8", "[control][protocol]") {
  Reply r = Reply::ok(json{{"name", std::string("bad\xff")}}, std::string("t\xfe"));
  std::string wire;
  REQUIRE_NOTHROW(wire = encode_reply(r));
  CHECK(parse_reply(wire.substr(0, wire.size() - 1)).ok());
}

TEST_CASE("encode_request produces what parse_request accepts", "[control][protocol]") {
  Request q{"handover", json{{"to", "node-b"}}, json("x1"), std::nullopt};
  std::string wire = encode_request(q);
  REQUIRE(wire.back() == '\0');
  auto back = parse_request(wire.substr(0, wire.size() - 1));
  REQUIRE(back.ok());
  CHECK(back->method == "handover");
  CHECK(back->params["to"] == "node-b");
  CHECK(back->id == json("x1"));
  CHECK(back->version == kProtocolVersion);
}

TEST_CASE("parse_reply rejects malformed replies", "[control][protocol]") {
  CHECK_FALSE(parse_reply("[]").ok());
  CHECK_FALSE(parse_reply(R"({"result":"ok"})").ok());                    // no version
  CHECK_FALSE(parse_reply(R"({"result":"fine","version":1})").ok());      // unknown result
  CHECK_FALSE(parse_reply(R"({"result":0,"version":1})").ok());           // wrong type
  CHECK_FALSE(parse_reply(R"({"result":"ok","version":1,"text":3})").ok());
  auto r = parse_reply(R"({"result":"ok","version":1})");
  REQUIRE(r.ok());
  CHECK(r->text.empty());
}
