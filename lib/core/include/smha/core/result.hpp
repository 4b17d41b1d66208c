// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// Expected failures as values (leveldb Status style): Result<T> holds a T or an Error.
#pragma once

#include <cassert>
#include <cstdint>
#include <string>
#include <utility>
#include <variant>

#include "smha/core/errc.hpp"

namespace smha {

// GCC 12 at -O2 warns that the implicit copy of an Error held in a
// std::variant "may be used uninitialized" where the variant provably holds
// it (a known false positive of -Wmaybe-uninitialized with variants). The
// warning points at this struct; it is silenced here alone.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
struct Error {
  Error() = default;
  Error(Errc c, std::string m, std::uint16_t status = 0) : code(c), mad_status(status), message(std::move(m)) {}

  // What kind of failure (errc.hpp; to_string gives its stable token).
  Errc code = Errc::Failed;
  // With code MadStatus: the answer's MAD Status field (for an SA answer its
  // class-specific bits too, e.g. 0x0300 "no records"), for callers to branch
  // on; 0 otherwise.
  std::uint16_t mad_status = 0;
  // What went wrong and where, for a human.
  std::string message;
};
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}          // NOLINT(google-explicit-constructor)
  Result(Error error) : v_(std::move(error)) {}      // NOLINT(google-explicit-constructor)

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { assert(ok()); return std::get<0>(v_); }
  const T& value() const& { assert(ok()); return std::get<0>(v_); }
  T&& value() && { assert(ok()); return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  const Error& error() const { assert(!ok()); return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

// Result<void>.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error error) : error_(std::move(error)), ok_(false) {}  // NOLINT(google-explicit-constructor)
  static Status Ok() { return Status(); }
  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const { assert(!ok_); return error_; }

 private:
  Error error_;
  bool ok_ = true;
};

inline Error make_error(Errc code, std::string message) {
  return Error{code, std::move(message)};
}

// "<code>: <message>", as status fields and command-line tools show a failure.
inline std::string to_string(const Error& e) { return std::string(to_string(e.code)) + ": " + e.message; }

}  // namespace smha
