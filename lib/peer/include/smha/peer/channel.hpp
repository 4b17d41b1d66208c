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
// Bounds: a handshake gets handshake_timeout, a frame frame_timeout once its
// header arrived (a slow peer is cut off); at most max_inbound connections
// at once (more are closed at accept); a connection sending more than
// max_frames_per_s frames a second is closed (flooding); frames are at most
// max_bytes; the outgoing queue holds the latest copy of each kind only.
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
  Duration handshake_timeout = seconds(10);
  Duration frame_timeout = seconds(30);
  Duration reconnect_min = seconds(1);
  Duration reconnect_max = seconds(30);
  int max_inbound = 8;
  int max_frames_per_s = 20;
};

// What the channel says of one peer.
struct PeerLink {
  std::string name;
  // Outbound (this head MASTER): "off" (not master), "connecting",
  // "handshake", "up", "retrying" (after an error, see last_error).
  std::string outbound = "off";
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
  std::uint64_t rejected_busy = 0;        // over max_inbound
  std::uint64_t handshake_failed = 0;     // TLS refused (wrong CA, no certificate, TLS < 1.3, timeout)
  std::uint64_t unknown_identity = 0;     // a valid certificate naming no configured peer
  std::uint64_t protocol_errors = 0;      // frames that break the protocol, too large, flooding, slow
  std::uint64_t frames_in = 0;
  std::uint64_t frames_out = 0;
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
