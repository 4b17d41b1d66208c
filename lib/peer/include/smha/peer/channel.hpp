// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// The peer channel (doc/continuity.md): smhad to smhad over TCP with TLS 1.3
// (OpenSSL through Boost.Asio's SSL streams), both ends authenticated by
// X.509 certificates from the operator's CA, each naming its head (CN or
// DNS SAN = the head's name in smha.yaml).
//
// Every head listens (continuity.listen) for copies. The head whose OpenSM
// is MASTER connects to each peer's continuity address and sends the copies
// CopySender gives it; the peer answers each with what became of it
// (CopyStore's verdict). Nothing here decides anything about mastership:
// the channel only carries files, and a head with no channel behaves as one
// whose channel is down.
//
// Bounds (doc/continuity.md, "Bounds and the event loop"):
//   - TLS 1.3 with the X25519 and P-256 key-exchange groups only: no client
//     can make the handshake cost more than an elliptic-curve one.
//   - Before authentication (TCP accepted, TLS handshake and identity not
//     yet done), a connection is "pending": it must authenticate within
//     handshake_timeout or is closed; at most max_pending_per_source pending
//     from one address; at most max_pending pending from addresses that are
//     no peer's, while a configured peer's address (continuity address, or
//     one it authenticated from before) has slots of its own, so strangers
//     never hold the slots a peer needs; handshakes from one address are
//     rate-limited (a token bucket, handshakes_per_s_per_source with a burst
//     of handshake_burst) and from strangers together (max_handshakes_per_s).
//   - After: at most max_inbound_per_peer connections per peer (a further
//     one closes that peer's oldest).
//   - A connection refused for a limit is closed at once, counted and logged
//     (rate-limited, naming the address and the limit); after a tenth of
//     max_refusals_per_s refusals within 100 ms, accepting pauses for the
//     rest of those 100 ms (the kernel's backlog, listen_backlog, holds or
//     drops the rest), so refusing costs a bounded number of accepts.
//   - A frame gets frame_timeout once its header arrived (a slow peer is cut
//     off); more than max_frames_per_s frames a second closes the connection
//     (flooding); frames are at most max_bytes; the body is read in 64 KiB
//     chunks and its buffer grows with the bytes received, never to the
//     announced length up front; all connections together buffer at most
//     max_buffered_bytes (a frame that would take them over closes its
//     connection).
//   - The outgoing queue holds the latest copy of each kind only.
// Everything runs on the owner's io_context; nothing blocks it.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "smha/core/clock.hpp"
#include "smha/core/result.hpp"
#include "smha/peer/copy_store.hpp"
#include "smha/peer/frame.hpp"

namespace smha::peer {

struct ChannelPeer {
  std::string name;
  Guid guid;
  std::string host;  // continuity address: an IP address or a host name
  std::uint16_t port = 0;
};

struct ChannelConfig {
  std::string listen_host;  // "" : do not listen
  std::uint16_t listen_port = 0;
  std::string certificate;  // PEM chain of this head
  std::string private_key;  // PEM, root-only (mode 0600 or stricter, owned by our uid)
  std::string ca;           // PEM of the CA that signs every head's certificate
  std::vector<ChannelPeer> peers;
  std::size_t max_bytes = opensm::kMaxSaDumpBytes;
  // From TCP accept to identity checked (a TLS 1.3 handshake on a LAN takes
  // milliseconds); also the outbound connect-and-handshake deadline.
  Duration handshake_timeout = seconds(3);
  Duration frame_timeout = seconds(30);
  Duration reconnect_min = seconds(1);
  Duration reconnect_max = seconds(30);
  int max_pending = 8;             // pending from addresses that are no peer's, together
  int max_pending_per_source = 2;  // pending from one address
  double handshakes_per_s_per_source = 1;
  int handshake_burst = 4;
  int max_handshakes_per_s = 20;   // from addresses that are no peer's, together
  int max_inbound_per_peer = 2;    // authenticated, per configured peer
  int max_refusals_per_s = 20;     // then accepting pauses (in 100 ms steps)
  int listen_backlog = 16;
  int max_frames_per_s = 20;
  std::size_t max_buffered_bytes = 0;  // all inbound frames together; 0: 2 x max_bytes + 1 MiB
};

// The outbound connection to a peer (this head MASTER).
enum class LinkState : std::uint8_t {
  Off,         // "off": not master
  Connecting,  // "connecting"
  Handshake,   // "handshake": TLS
  Up,          // "up"
  Retrying,    // "retrying": after an error (PeerLink::last_error)
};
std::string_view to_string(LinkState s);

// What the channel says of one peer.
struct PeerLink {
  std::string name;
  LinkState outbound = LinkState::Off;
  std::string last_error;
  std::uint64_t connects = 0;
  std::uint64_t failures = 0;
  // Its last answer per kind (sa_dump, guid2lid).
  std::array<std::optional<AnswerMeta>, kCopyKinds> answers;
  std::array<WallTime, kCopyKinds> answered_at{};
  // Inbound: connections from it now, and when its last copy arrived.
  int inbound = 0;
  std::optional<WallTime> last_copy_at;
};

struct ChannelCounters {
  std::uint64_t accepted = 0;
  std::uint64_t rejected_busy = 0;          // max_pending strangers already pending
  std::uint64_t rejected_source_limit = 0;  // max_pending_per_source already pending from its address
  std::uint64_t rejected_rate = 0;          // over its address's or the strangers' handshake rate
  std::uint64_t accept_pauses = 0;          // max_refusals_per_s reached: accepting paused
  std::uint64_t handshake_failed = 0;       // TLS refused (wrong CA, no certificate, TLS < 1.3, no common group, timeout)
  std::uint64_t preauth_timeouts = 0;       // of those, not authenticated within handshake_timeout
  std::uint64_t unknown_identity = 0;       // a valid certificate naming no configured peer
  std::uint64_t replaced = 0;               // a peer's oldest connection, closed for its newest (max_inbound_per_peer)
  std::uint64_t protocol_errors = 0;        // frames that break the protocol, too large, flooding, slow, over budget
  std::uint64_t rejected_memory = 0;        // of those, frames over max_buffered_bytes
  std::uint64_t frames_in = 0;
  std::uint64_t frames_out = 0;
  std::uint64_t buffered_bytes = 0;         // frame bytes buffered now, all inbound connections
  std::uint64_t buffered_peak = 0;          // the most ever buffered at once
  int pending = 0;                          // connections not yet authenticated, now
  std::string last_inbound_error;
};

class PeerChannel {
 public:
  // `offer` judges a copy from `tls_peer` (CopyStore::offer with the in-band facts).
  using Offer = std::function<Verdict(FrameKind, const CopyMeta&, std::string_view body, const std::string& tls_peer)>;
  PeerChannel(boost::asio::io_context& io, ChannelConfig cfg, const Clock& clock, Offer offer);
  // `notice` takes a master's notice from `tls_peer` (CopyStore::notice); none: notices are dropped.
  using Notice = std::function<void(const NoticeMeta&, const std::string& tls_peer)>;
  void on_notice(Notice notice);
  ~PeerChannel();
  PeerChannel(const PeerChannel&) = delete;
  PeerChannel& operator=(const PeerChannel&) = delete;

  // Loads the certificate, key and CA (errors name the file: missing,
  // unreadable, not PEM, a key others can read, a certificate the key does
  // not match) and starts listening. Nothing runs after an error.
  Status start();
  void stop();

  // Outbound connections on (this head's OpenSM is MASTER) or off.
  void set_outbound(bool on);
  // Queues a copy to every peer (replacing a queued one of the same kind);
  // sent when its connection is up.
  void send(FrameKind kind, const CopyMeta& meta, const std::string& body);
  // Queues a notice to every peer in the place of a copy of its kind: the
  // latest word on that file, sent again on a new connection as a copy is.
  void send_notice(const NoticeMeta& meta);

  const std::vector<PeerLink>& links() const;
  const ChannelCounters& counters() const;
  bool listening() const;
  // The port listened on (continuity.listen's, or the kernel's pick for 0); 0 when not listening.
  std::uint16_t listening_port() const;

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace smha::peer
