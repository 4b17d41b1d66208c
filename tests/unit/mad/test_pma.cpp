// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// PerfMgt PortCounters on the wire (IBA 16.1.3.5, Table 247): the request
// smha sends and the answers it reads, byte by byte.
#include <catch2/catch.hpp>

#include <random>

#include "smha/mad/pma.hpp"

using namespace smha;
using namespace smha::mad;

TEST_CASE("PortCounters Get: PerfMgt class 1, attribute 0x0012, PortSelect at offset 65", "[pma]") {
  const auto b = encode_port_counters_get(0x1122334455667788ULL, 7);
  CHECK(b[0] == 1);     // base version
  CHECK(b[1] == 0x04);  // PerfMgt
  CHECK(b[2] == 1);     // class version
  CHECK(b[3] == 0x01);  // Get
  CHECK(b[8] == 0x11);
  CHECK(b[15] == 0x88);
  CHECK(b[16] == 0x00);
  CHECK(b[17] == 0x12);
  CHECK(b[65] == 7);
  CHECK(b[66] == 0);    // CounterSelect
  CHECK(b[67] == 0);
}

TEST_CASE("PortCounters GetResp: every error counter at its offset, the nibbles of byte 19", "[pma]") {
  MadBytes b{};
  b[0] = 1;
  b[1] = 0x04;
  b[2] = 1;
  b[3] = 0x81;
  b[17] = 0x12;
  std::uint8_t* d = b.data() + 64;
  d[1] = 3;                 // PortSelect
  d[4] = 0x01, d[5] = 0x02; // SymbolErrorCounter 258
  d[6] = 5;                 // LinkErrorRecoveryCounter
  d[7] = 6;                 // LinkDownedCounter
  d[8] = 0x00, d[9] = 0x09; // PortRcvErrors
  d[10] = 0xff, d[11] = 0xff;  // PortRcvRemotePhysicalErrors: not kept
  d[14] = 0x10, d[15] = 0x00;  // PortXmitDiscards 4096
  d[19] = 0x5a;             // LocalLinkIntegrity 5, ExcessiveBufferOverrun 10
  d[22] = 0x00, d[23] = 0x0b;  // VL15Dropped 11
  d[24] = 0xff;             // PortXmitData: not kept
  auto pc = decode_port_counters_response(b);
  REQUIRE(pc);
  CHECK(pc->port_select == 3);
  CHECK(at(pc->errors, ErrorCounter::SymbolErrors) == 258);
  CHECK(at(pc->errors, ErrorCounter::LinkErrorRecovery) == 5);
  CHECK(at(pc->errors, ErrorCounter::LinkDowned) == 6);
  CHECK(at(pc->errors, ErrorCounter::RcvErrors) == 9);
  CHECK(at(pc->errors, ErrorCounter::LocalLinkIntegrity) == 5);
  CHECK(at(pc->errors, ErrorCounter::ExcessiveBufferOverrun) == 10);
  CHECK(at(pc->errors, ErrorCounter::XmitDiscards) == 4096);
  CHECK(at(pc->errors, ErrorCounter::Vl15Dropped) == 11);
  // The encoder writes the same bytes.
  auto again = encode_port_counters_response(0, *pc);
  CHECK(std::equal(again.begin() + 64, again.begin() + 64 + 10, b.begin() + 64));
  CHECK(again[64 + 19] == 0x5a);
  CHECK(again[64 + 23] == 0x0b);
}

TEST_CASE("PortCounters names and keys and maxima and a round trip at random values within each width", "[pma]") {
  CHECK(counter_name(ErrorCounter::SymbolErrors) == "SymbolErrorCounter");
  CHECK(counter_name(ErrorCounter::Vl15Dropped) == "VL15Dropped");
  CHECK(counter_key(ErrorCounter::ExcessiveBufferOverrun) == "excessive_buffer_overrun");
  CHECK(counter_max(ErrorCounter::LinkDowned) == 0xff);
  CHECK(counter_max(ErrorCounter::LocalLinkIntegrity) == 0xf);
  CHECK(counter_max(ErrorCounter::RcvErrors) == 0xffff);
  std::mt19937 rng(7);
  for (int i = 0; i < 200; ++i) {
    PortCounters pc;
    pc.port_select = static_cast<std::uint8_t>(rng());
    for (auto c : kErrorCounters) at(pc.errors, c) = static_cast<std::uint32_t>(rng()) % (counter_max(c) + 1);
    auto back = decode_port_counters_response(encode_port_counters_response(42, pc));
    REQUIRE(back);
    CHECK(*back == pc);
  }
}

TEST_CASE("PortCounters answers that are not: each refused naming what and where", "[pma]") {
  PortCounters pc;
  pc.port_select = 1;
  const auto good = encode_port_counters_response(1, pc);
  auto refused = [&](auto mutate, const std::string& says) {
    auto b = good;
    mutate(b);
    auto r = decode_port_counters_response(b);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == Errc::Parse);
    INFO(r.error().message);
    CHECK(r.error().message.find(says) != std::string::npos);
  };
  refused([](MadBytes& b) { b[1] = 0x81; }, "not PerfMgt (0x04)");
  refused([](MadBytes& b) { b[0] = 2; }, "base version 2 at offset 0");
  refused([](MadBytes& b) { b[2] = 2; }, "class version 2 at offset 2");
  refused([](MadBytes& b) { b[3] = 0x01; }, "not GetResp");
  refused([](MadBytes& b) { b[17] = 0x13; }, "attribute 0x0013 at offset 16");
  auto shorter = decode_port_counters_response(std::span<const std::uint8_t>(good.data(), 100));
  REQUIRE_FALSE(shorter);
  CHECK(shorter.error().message.find("100 bytes; at least 108") != std::string::npos);
  std::vector<std::uint8_t> longer(good.begin(), good.end());
  longer.push_back(0);
  CHECK_FALSE(decode_port_counters_response(longer));
  auto status = decode_port_counters_response(encode_port_counters_response(1, pc, 0x001c));
  REQUIRE_FALSE(status);
  CHECK(status.error().code == Errc::MadStatus);
  CHECK(status.error().mad_status == 0x001c);
}
