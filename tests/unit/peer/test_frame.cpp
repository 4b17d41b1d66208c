// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// The peer channel's frames (doc/continuity.md): header, copy meta and
// answers round trip; every malformed byte is refused naming the field.
#include <catch2/catch.hpp>

#include "smha/peer/frame.hpp"

using namespace smha;
using namespace smha::peer;

namespace {

CopyMeta meta() {
  CopyMeta m;
  m.fabric = "";
  m.from = "head01";
  m.master_guid = Guid{0x0002c90300000001ULL};
  m.generation = 1765000000123ULL;
  m.age_ms = 40;
  return m;
}

std::string meta_text(const std::vector<std::uint8_t>& f) {
  const std::uint32_t n = static_cast<std::uint32_t>(f[8]) << 24 | f[9] << 16 | f[10] << 8 | f[11];
  return std::string(f.begin() + 16, f.begin() + 16 + n);
}

}  // namespace

TEST_CASE("Frames: a copy and an answer round trip, header fields at their offsets", "[peer][frame]") {
  const auto f = encode_copy_frame(FrameKind::SaDump, meta(), "MC Group ...\n");
  REQUIRE(f.size() > kFrameHeaderSize);
  CHECK(std::string(f.begin(), f.begin() + 4) == "SMHC");
  CHECK(f[4] == 1);
  CHECK(f[5] == 1);
  auto h = decode_frame_header(std::span(f).first(kFrameHeaderSize), 1024);
  REQUIRE(h);
  CHECK(h->kind == FrameKind::SaDump);
  CHECK(h->body_len == 13);
  CHECK(kFrameHeaderSize + h->meta_len + h->body_len == f.size());
  auto m = decode_copy_meta(meta_text(f));
  REQUIRE(m);
  CHECK(*m == meta());

  AnswerMeta a;
  a.kind = FrameKind::Guid2Lid;
  a.generation = 7;
  a.applied = false;
  a.reason = "not_master";
  a.text = "why";
  const auto af = encode_answer_frame(a);
  auto ah = decode_frame_header(std::span(af).first(kFrameHeaderSize), 0);
  REQUIRE(ah);
  CHECK(ah->kind == FrameKind::Answer);
  auto am = decode_answer_meta(meta_text(af));
  REQUIRE(am);
  CHECK(*am == a);
}

TEST_CASE("Frames: headers that are not ours, too large or inconsistent are refused naming the field",
          "[peer][frame]") {
  const auto good = encode_copy_frame(FrameKind::Guid2Lid, meta(), std::string(100, 'x'));
  auto bad = [&](std::size_t off, std::uint8_t v, std::size_t cap = 1024) {
    auto f = good;
    f[off] = v;
    auto h = decode_frame_header(std::span(f).first(kFrameHeaderSize), cap);
    REQUIRE_FALSE(h);
    return h.error();
  };
  CHECK(bad(0, 'G').message.find("magic") != std::string::npos);
  CHECK(bad(4, 2).message.find("version 2 at offset 4") != std::string::npos);
  CHECK(bad(5, 9).message.find("kind 9 at offset 5") != std::string::npos);
  CHECK(bad(7, 1).message.find("reserved") != std::string::npos);
  CHECK(bad(10, 0x20).code == Errc::FrameTooLarge);  // meta 8 KiB
  const auto body = decode_frame_header(std::span(good).first(kFrameHeaderSize), 99);
  REQUIRE_FALSE(body);
  CHECK(body.error().code == Errc::FrameTooLarge);
  CHECK(body.error().message.find("offset 12") != std::string::npos);
  // An answer carries no body.
  auto f = good;
  f[5] = 3;
  CHECK_FALSE(decode_frame_header(std::span(f).first(kFrameHeaderSize), 1024));
  CHECK_FALSE(decode_frame_header(std::span(good).first(15), 1024));
}

TEST_CASE("Frames: copy meta with a field missing, of the wrong type, too long or not a GUID is refused",
          "[peer][frame]") {
  auto err = [](const std::string& text) {
    auto m = decode_copy_meta(text);
    REQUIRE_FALSE(m);
    CHECK(m.error().code == Errc::Protocol);
    return m.error().message;
  };
  CHECK(err("[]") == "meta is not a JSON object");
  CHECK(err("{\"fabric\":\"\",\"master_guid\":\"0x0000000000000001\",\"generation\":1,\"age_ms\":0}")
            .find("\"from\" is missing") != std::string::npos);
  CHECK(err("{\"fabric\":\"\",\"from\":\"head01\",\"master_guid\":\"0x1\",\"generation\":1,\"age_ms\":0}")
            .find("not a port GUID") != std::string::npos);
  CHECK(err("{\"fabric\":\"\",\"from\":\"head01\",\"master_guid\":\"0x0000000000000001\",\"generation\":0,\"age_ms\":0}")
            .find("\"generation\" is 0") != std::string::npos);
  CHECK(err("{\"fabric\":\"\",\"from\":\"head01\",\"master_guid\":\"0x0000000000000001\",\"generation\":-1,\"age_ms\":0}")
            .find("unsigned") != std::string::npos);
  CHECK(err("{\"fabric\":\"\",\"from\":\"" + std::string(65, 'h') +
            "\",\"master_guid\":\"0x0000000000000001\",\"generation\":1,\"age_ms\":0}")
            .find("longer than 64") != std::string::npos);
  CHECK(err("{\"fabric\":\"\",\"from\":\"he\\u0001\",\"master_guid\":\"0x0000000000000001\",\"generation\":1,\"age_ms\":0}")
            .find("control character") != std::string::npos);
  CHECK(decode_copy_meta(std::string(5000, ' ')).error().code == Errc::FrameTooLarge);
  const std::string base = "{\"fabric\":\"\",\"from\":\"head01\",\"master_guid\":\"0x0000000000000001\",\"generation\":1,"
                           "\"age_ms\":0,\"trimmed\":";
  CHECK(err(base + "1}").find("\"trimmed\" is not a string") != std::string::npos);
  CHECK(err(base + "\"" + std::string(1025, 'x') + "\"}").find("longer than 1024") != std::string::npos);
  CHECK(err(base + "\"a\\nb\"}").find("control character") != std::string::npos);
}

TEST_CASE("Frames: what the master left out of its SA dump travels in the meta, bounded", "[peer][frame]") {
  CopyMeta m = meta();
  m.trimmed = "1 record OpenSM could not load back: 1 registered by port GID 0xfe80000000000000:0x00000000001000ff";
  auto back = decode_copy_meta(meta_text(encode_copy_frame(FrameKind::SaDump, m, "")));
  REQUIRE(back);
  CHECK(*back == m);
  // An older sender says nothing: nothing was left out.
  CHECK(decode_copy_meta(meta_text(encode_copy_frame(FrameKind::SaDump, meta(), "")))->trimmed.empty());
  m.trimmed = std::string(2000, 'x');
  CHECK(decode_copy_meta(meta_text(encode_copy_frame(FrameKind::SaDump, m, "")))->trimmed.size() == kMaxTrimmedText);
}

TEST_CASE("Frames: a notice (the master's current file not sent, and why) round trips, and an answer carries the "
          "generation held",
          "[peer][frame]") {
  NoticeMeta n;
  n.kind = FrameKind::SaDump;
  n.fabric = "rail1";
  n.from = "head01";
  n.master_guid = Guid{0x0002c90300000001ULL};
  n.age_ms = 4200;
  n.problem = "/var/log/opensm-sa.dump: line 9: Service Record: name ...";
  n.counts = SaCounts{4, 9, 3, 2};
  const auto f = encode_notice_frame(n);
  CHECK(f[5] == 4);
  auto h = decode_frame_header(std::span(f).first(kFrameHeaderSize), 0);
  REQUIRE(h);
  CHECK(h->kind == FrameKind::Notice);
  CHECK(to_string(h->kind) == "notice");
  auto m = decode_notice_meta(meta_text(f));
  REQUIRE(m);
  CHECK(*m == n);
  n.counts.reset();
  auto none = decode_notice_meta(meta_text(encode_notice_frame(n)));
  REQUIRE(none);
  CHECK(*none == n);
  // A problem cut at 512 bytes is cut between UTF-8 characters, so it reads back the same.
  n.problem = std::string(511, 'x') + "\xc3\xa9";
  auto cut = decode_notice_meta(meta_text(encode_notice_frame(n)));
  REQUIRE(cut);
  CHECK(cut->problem == std::string(511, 'x'));

  // A notice has no body.
  auto body = f;
  body[15] = 1;
  auto hb = decode_frame_header(std::span(body).first(kFrameHeaderSize), 1024);
  REQUIRE_FALSE(hb);
  CHECK(hb.error().message.find("notice frame has a body") != std::string::npos);
  auto err = [](const std::string& text) {
    auto r = decode_notice_meta(text);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == Errc::Protocol);
    return r.error().message;
  };
  const std::string id = R"("fabric":"","from":"head01","master_guid":"0x0002c90300000001")";
  CHECK(err(R"({"kind":"answer",)" + id + R"(,"age_ms":1,"problem":"x"})").find("\"kind\"") != std::string::npos);
  CHECK(err(R"({"kind":"sa_dump",)" + id + R"(,"problem":"x"})").find("\"age_ms\"") != std::string::npos);
  CHECK(err(R"({"kind":"sa_dump",)" + id + R"(,"age_ms":1})").find("\"problem\"") != std::string::npos);
  CHECK(err(R"({"kind":"sa_dump",)" + id + R"(,"age_ms":1,"problem":"x","counts":[1]})").find("\"counts\"") !=
        std::string::npos);
  CHECK(err(R"({"kind":"sa_dump",)" + id +
            R"(,"age_ms":1,"problem":"x","counts":{"groups":1,"members":-1,"services":0,"subscriptions":0}})")
            .find("\"members\"") != std::string::npos);

  // The answer says what the receiver holds; an older peer's answer, without it, reads as 0.
  AnswerMeta a;
  a.kind = FrameKind::SaDump;
  a.generation = 7;
  a.reason = "older";
  a.text = "older";
  a.held = 18446744073709551615ULL;
  auto back = decode_answer_meta(meta_text(encode_answer_frame(a)));
  REQUIRE(back);
  CHECK(back->held == a.held);
  auto old = decode_answer_meta(R"({"kind":"sa_dump","generation":7,"applied":true,"reason":"","text":""})");
  REQUIRE(old);
  CHECK(old->held == 0);
}
