// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/peer/tls_files.hpp"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <boost/asio/ssl.hpp>

namespace smha::peer {

namespace ssl = boost::asio::ssl;
using boost::system::error_code;

namespace {

// A file a TLS context reads: present and regular, named in the error.
Status check_file(const std::string& what, const std::string& path, bool secret) {
  if (path.empty()) return make_error(Errc::Config, "continuity." + what + " is not set");
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    return make_error(Errc::NotFound, "continuity." + what + " " + path + ": " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return make_error(Errc::NotRegular, "continuity." + what + " " + path + " is not a regular file");
  if (secret && (st.st_mode & 077) != 0) {
    char octal[8];
    std::snprintf(octal, sizeof octal, "%03o", st.st_mode & 0777);
    return make_error(Errc::Insecure, "continuity." + what + " " + path + " can be read by others (mode " +
                                          std::to_string(st.st_mode & 0777) + " octal " + octal + "); make it 0600");
  }
  if (secret && st.st_uid != ::geteuid())
    return make_error(Errc::Insecure, "continuity." + what + " " + path + " is not owned by smhad's user");
  return Status::Ok();
}

std::string tls_error(const error_code& ec) {
  std::string s = ec.message();
  if (ec.category() == boost::asio::error::get_ssl_category()) {
    char buf[256];
    ERR_error_string_n(static_cast<unsigned long>(ec.value()), buf, sizeof buf);
    s = buf;
  }
  return s;
}

}  // namespace

Status load_tls_files(ssl::context& ctx, const TlsFiles& f) {
  for (auto st : {check_file("certificate", f.certificate, false), check_file("private_key", f.private_key, true),
                  check_file("ca", f.ca, false)})
    if (!st.ok()) return st;
  error_code ec;
  ctx.use_certificate_chain_file(f.certificate, ec);
  if (ec) return make_error(Errc::Config, "continuity.certificate " + f.certificate + ": not a PEM certificate (" + ec.message() + ")");
  ctx.use_private_key_file(f.private_key, ssl::context::pem, ec);
  if (ec)
    return make_error(Errc::Config, "continuity.private_key " + f.private_key +
                                        ": not a PEM key, or not the key of continuity.certificate " + f.certificate +
                                        " (" + tls_error(ec) + ")");
  if (SSL_CTX_check_private_key(ctx.native_handle()) != 1)
    return make_error(Errc::Config, "continuity.private_key " + f.private_key + " does not match continuity.certificate " +
                                        f.certificate);
  ctx.load_verify_file(f.ca, ec);
  if (ec) return make_error(Errc::Config, "continuity.ca " + f.ca + ": not a PEM certificate (" + ec.message() + ")");
  return Status::Ok();
}

Status check_tls_files(const TlsFiles& files) {
  ssl::context ctx(ssl::context::tls);
  return load_tls_files(ctx, files);
}

}  // namespace smha::peer
