// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// The peer channel's TLS files (continuity.certificate, continuity.private_key,
// continuity.ca; doc/continuity.md): the one check the channel makes at start
// and `smhad --check-config` makes too, so a file set --check-config passes
// is one smhad starts with.
#pragma once

#include <string>

#include <boost/asio/ssl/context.hpp>

#include "smha/core/result.hpp"

namespace smha::peer {

struct TlsFiles {
  std::string certificate;  // PEM chain of this head
  std::string private_key;  // PEM, root-only
  std::string ca;           // PEM of the CA that signs every head's certificate
};

// Loads `files` into `ctx`: each must be set and a regular file; the private
// key owned by this process's euid with no group or other permission bits;
// the certificate PEM, the key PEM and the certificate's key, the CA PEM.
// The first problem is returned naming the key and the file, e.g.
// "continuity.private_key /etc/smha/head01.key can be read by others (mode 420
// octal 644); make it 0600" (Insecure), "continuity.certificate /x.pem: No such
// file or directory" (NotFound), or Config for a file that does not parse or a
// key that is not the certificate's. On failure `ctx` may hold part of them.
Status load_tls_files(boost::asio::ssl::context& ctx, const TlsFiles& files);

// load_tls_files() into a context of its own, thrown away after: the check
// `smhad --check-config` runs. Reads the files, changes nothing.
Status check_tls_files(const TlsFiles& files);

}  // namespace smha::peer
