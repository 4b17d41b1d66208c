// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// UmadTransport: MadTransport over libibumad, for real /dev/infiniband/umad*
// devices and for ibsim's libumad2sim alike. Design and the experiment behind
// it: doc/mad-transport.md.
//
// Threading: everything public is called on the owner's io_context thread and
// every callback runs there. One private receive thread blocks in umad_recv()
// with a short timeout (umad2sim's fake fds cannot be waited on by epoll, so
// Asio's reactor cannot watch them) and hands each received MAD to the
// io_context with asio::post. The thread shares no mutable state with the rest
// (the port id is fixed before it starts, it stops on an atomic flag), so there
// is no mutex.
//
// Deadlines are kept here, per attempt, on asio::steady_timer: ib_umad times a
// request out by itself, umad2sim never does (DESIGN.md), so smha keeps its own
// and gets the same behaviour in both worlds. A send completion carrying
// ETIMEDOUT (kernel timeout; under ibsim at once for "no one to handle" or a
// dropped packet) ends the attempt early. Each attempt gets its own TID, so a
// late send completion cannot end a later attempt; an answer to any attempt of
// a pending request completes it. Answers are matched on the TID's low 32 bits
// only (as libibmad's _do_madrpc does), because the kernel and umad2sim put the
// agent's id into the high 32 bits.
#pragma once

#include <cstdint>
#include <memory>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "smha/core/clock.hpp"
#include "smha/core/result.hpp"
#include "smha/core/types.hpp"
#include "smha/mad/smp.hpp"
#include "smha/mad/transport.hpp"

namespace smha::mad {

// Which local port to use. Empty `ca` and port 0 with no `guid`: libibumad's
// default (the first CA with an active port). `guid` set: the port whose port
// GUID matches, on any CA (`ca`/`port` must then be unset).
struct PortSelector {
  std::string ca;
  int port = 0;
  std::optional<Guid> guid;
};

// The local port as libibumad sees it (sysfs, or umad2sim's copy of it).
struct LocalPortInfo {
  std::string ca;
  int port = 0;
  Guid port_guid;
  Lid lid;
  Lid sm_lid;       // the master this port was told about (may be stale)
  PortState state = PortState::Unknown;
};

// Error code when the CA, port number or port GUID does not exist.
inline constexpr Errc kErrNoPort = Errc::NoPort;

// Reads the local port's info without opening it. Errors: kErrNoPort.
Result<LocalPortInfo> query_local_port(const PortSelector& selector);

class UmadTransport final : public MadTransport {
 public:
  // Opens the selected port and registers client agents (method_mask NULL:
  // only answers to our own requests arrive) for classes 0x81 and 0x01, and
  // for the SA class 0x03 version 2 with rmpp_version 1 (kernel RMPP), and,
  // if it registers, for PerfMgt class 0x04 version 1; then starts the
  // receive thread. `io` and `clock` must outlive the transport.
  // Errors: kErrNoPort (nothing matches `selector`), "io" (open or register
  // failed; message names the call and errno). On error nothing stays open.
  static Result<std::unique_ptr<UmadTransport>> open(boost::asio::io_context& io,
                                                     const PortSelector& selector,
                                                     const Clock& clock);

  // Stops the receive thread (within ~50 ms), unregisters, closes the port.
  // Requests still pending complete with "closed", posted to the io_context.
  ~UmadTransport() override;

  UmadTransport(const UmadTransport&) = delete;
  UmadTransport& operator=(const UmadTransport&) = delete;

  // The port as it was at open().
  const LocalPortInfo& local_port() const;
  // Re-reads the port's LID, SM LID and state (they change as SMs come and go).
  // On error the stored info is left unchanged.
  Result<LocalPortInfo> refresh_local_port();

  // Encodes the query (its TID, its M_Key from opts for an SMP), sends it on
  // the agent its class needs (an SA query: to a unicast LID, else "invalid";
  // PortCounters: "io" when the PerfMgt agent did not register) and decodes
  // the answer; MAD status is kErrMadStatus, a malformed answer is ignored
  // as a stray until the deadline.
  void submit(Request request, ReplyCallback done) override;

  // A request no Query makes (smha's workload tools: SA
  // MCMemberRecord and InformInfo, SMP forwarding tables; codecs in
  // sa_records.hpp and smp.hpp). `build(tid)` makes the MAD; `accept(mad)`
  // reads an arriving MAD with a matching TID: Ok takes it as the answer, an
  // error with code kErrMadStatus ends the request with that error, any other
  // error ignores the MAD as a stray. With `sa` it goes to the SA on QP1 with
  // the GSI Q_Key (`target` must be a unicast LID); else it is an SMP routed
  // by `target`. Same callback contract as submit().
  struct RawReply {
    std::vector<std::uint8_t> mad;
    Duration rtt{};
    int attempts = 1;
  };
  using RawBuild = std::function<Result<MadBytes>(std::uint64_t)>;
  using RawAccept = std::function<Status(std::span<const std::uint8_t>)>;
  void raw_request(const Target& target, bool sa, RawBuild build, RawAccept accept, const RequestOptions& opts,
                   std::function<void(Result<RawReply>)> done);

  // Requests sent but not yet completed (for tests and metrics).
  std::size_t pending() const;

  class Core;  // shared with posted handlers; private to umad_transport.cpp

 private:
  explicit UmadTransport(std::shared_ptr<Core> core);
  std::shared_ptr<Core> core_;
};

}  // namespace smha::mad
