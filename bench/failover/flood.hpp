// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// A hostile client of the peer channel for bench_failover --flood-runs
// (doc/performance.md "The peer channel under a flood"): while a drill runs,
// it keeps every head's continuity listener busy the two ways a host with no
// certificate can:
//   - handshakers: TLS 1.3 ClientHellos offering only ffdhe8192, the most
//     expensive key exchange OpenSSL has, one after another;
//   - holders: plain TCP connections that never send a byte, re-opened at
//     once when the listener closes them (slot holding).
// Loopback only. Stops and joins its threads when destroyed.
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

namespace smha::bench {

struct FloodCounts {
  std::uint64_t handshakes = 0;  // ClientHellos sent
  std::uint64_t holds = 0;       // idle connections opened
};

class ChannelFlood {
 public:
  ChannelFlood(std::vector<int> ports, int handshakers, int holders);
  ~ChannelFlood();
  ChannelFlood(const ChannelFlood&) = delete;
  ChannelFlood& operator=(const ChannelFlood&) = delete;
  FloodCounts counts() const { return {handshakes_.load(), holds_.load()}; }

 private:
  void handshaker(int port);
  void holder(int port);
  std::atomic<bool> stop_{false};
  std::atomic<std::uint64_t> handshakes_{0};
  std::atomic<std::uint64_t> holds_{0};
  std::vector<std::thread> threads_;
};

}  // namespace smha::bench
