// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// The control-socket protocol between smhad and its clients (smctl, monitoring).
// This header and doc/control-protocol.md are the contract; keep them in step.
//
// Transport: AF_UNIX SOCK_STREAM. Each message is one JSON object, UTF-8,
// terminated by a single NUL byte (JSON text never contains a raw NUL, so the
// terminator cannot occur inside a message). A connection carries any number of
// request/reply exchanges; the server answers requests in the order received.
//
//   request: {"method":"status","params":{},"id":7,"version":1}
//            method required; params optional (default {}), only the keys
//            the method takes (kMethods), others are bad_request; id optional, any
//            string or integer, echoed in the reply; version optional: the
//            protocol version the client speaks (checked against
//            kMinCompatibleVersion). Unknown top-level keys are ignored.
//   reply:   {"result":"ok","text":"","data":{},"version":1[,"id":7]}
//
// Everything here is pure (no I/O) so the fuzzer and the tests drive it directly.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "smha/core/result.hpp"

namespace smha::control {

// Protocol version carried in every reply.
// Bump it only when an existing message changes meaning or shape; adding a
// method or an optional field needs no bump (chrony candm.h policy).
// Change log:
//   1  (smha 0.1) first version: NUL framing, envelope, result codes,
//      built-in "version" and "list-methods".
inline constexpr int kProtocolVersion = 1;
// The oldest client protocol version this server still answers. A request
// that declares an older "version" gets ResultCode::VersionMismatch.
inline constexpr int kMinCompatibleVersion = 1;

// The frame terminator.
inline constexpr char kFrameTerminator = '\0';
// Largest request (excluding the terminator) the server accepts.
inline constexpr std::size_t kMaxRequestBytes = 64 * 1024;
// Largest reply a client accepts (status/events replies can be larger).
inline constexpr std::size_t kMaxReplyBytes = 4 * 1024 * 1024;
// Deepest JSON nesting accepted in a request (the envelope itself uses 2).
inline constexpr int kMaxJsonDepth = 32;
// Longest method name; names are lowercase ASCII letters, digits and '-'.
inline constexpr std::size_t kMaxMethodLength = 64;

// Longest maintenance hold (`hold` duration_s) smhad accepts: 7 days.
inline constexpr double kMaxHoldSeconds = 7 * 24 * 3600.0;

inline constexpr const char* kDefaultSocketPath = "/run/smha/smhad.sock";
inline constexpr const char* kDefaultGroup = "smha";

// The closed set of results (Kea CONTROL_RESULT_*, chrony STT_*). On the wire
// each is the lowercase string returned by to_string().
enum class ResultCode : uint8_t {
  Ok = 0,
  Error = 1,            // the method ran and failed
  Unsupported = 2,      // no such method
  NotFound = 3,         // the method's target (peer, event, ...) does not exist
  Conflict = 4,         // refused in the current state (e.g. a handover is running)
  VersionMismatch = 5,  // the client's declared protocol version is too old/new
  Unauthorized = 6,     // the peer's credentials do not allow this method
  BadRequest = 7,       // malformed frame, JSON or envelope
};

// "ok", "error", "unsupported", "not_found", "conflict", "version_mismatch",
// "unauthorized", "bad_request"; "unknown" for values outside the enum.
std::string_view to_string(ResultCode code);
// Inverse of to_string(); nullopt for any other string.
std::optional<ResultCode> parse_result_code(std::string_view text);

// Whether a method only reads state or changes it (decides authorisation).
enum class Access : uint8_t { ReadOnly, Mutating };
std::string_view to_string(Access access);

// Method names, the built-ins ControlServer answers itself first, then
// smhad's (doc/control-protocol.md has a section on each). Both sides use
// these: the server registers them, smctl calls them.
namespace method {
inline constexpr const char* kVersion = "version";
inline constexpr const char* kListMethods = "list-methods";
inline constexpr const char* kStatus = "status";
inline constexpr const char* kSms = "sms";
inline constexpr const char* kHealth = "health";
inline constexpr const char* kEvents = "events";
inline constexpr const char* kMetrics = "metrics";
inline constexpr const char* kHandover = "handover";
inline constexpr const char* kDrill = "drill";
inline constexpr const char* kHold = "hold";
inline constexpr const char* kRelease = "release";
inline constexpr const char* kReload = "reload";
}  // namespace method

// Request parameter keys ("params" members), by method.
namespace param {
// events: the newest `n` events, or those after seq `after`, waiting up to
// `wait_s` seconds for the first one.
inline constexpr const char* kN = "n";
inline constexpr const char* kAfter = "after";
inline constexpr const char* kWaitS = "wait_s";
// handover, drill: the peer to hand mastership to.
inline constexpr const char* kTo = "to";
// hold: how long, and why (shown in status and events).
inline constexpr const char* kDurationS = "duration_s";
inline constexpr const char* kReason = "reason";
}  // namespace param

// The most "params" keys one method takes.
inline constexpr std::size_t kMaxMethodParams = 3;

// One method of the protocol, who may call it and the "params" keys it takes.
// A request with any other key is refused (bad_request naming the key), so a
// misspelt or unsupported parameter never passes silently.
struct MethodSpec {
  std::string_view name;
  Access access;
  std::array<std::string_view, kMaxMethodParams> params{};  // unused slots empty
};

// Every method smhad answers, with its access and params: what `list-methods`
// returns.
inline constexpr MethodSpec kMethods[] = {
    {method::kVersion, Access::ReadOnly, {}},
    {method::kListMethods, Access::ReadOnly, {}},
    {method::kStatus, Access::ReadOnly, {}},
    {method::kSms, Access::ReadOnly, {}},
    {method::kHealth, Access::ReadOnly, {}},
    {method::kEvents, Access::ReadOnly, {param::kN, param::kAfter, param::kWaitS}},
    {method::kMetrics, Access::ReadOnly, {}},
    {method::kHandover, Access::Mutating, {param::kTo}},
    {method::kDrill, Access::Mutating, {param::kTo}},
    {method::kHold, Access::Mutating, {param::kDurationS, param::kReason}},
    {method::kRelease, Access::Mutating, {}},
    {method::kReload, Access::Mutating, {}},
};

// The params keys kMethods gives `method`; empty for a method not listed.
std::vector<std::string> method_params(std::string_view method);

// Ok if every key of `params` (an object) is in `allowed`; otherwise
// bad_request naming each other key, the method and the keys it takes, e.g.
// "method 'hold' takes no parameter \"durations\" (it takes: duration_s, reason)".
Status check_params(std::string_view method, const nlohmann::json& params,
                    const std::vector<std::string>& allowed);

struct Request {
  std::string method;
  nlohmann::json params = nlohmann::json::object();
  // Echoed in the reply when present (a string or an integer).
  std::optional<nlohmann::json> id;
  // The protocol version the client declared, if any.
  std::optional<int> version;
};

struct Reply {
  ResultCode result = ResultCode::Ok;
  std::string text;
  nlohmann::json data = nlohmann::json::object();
  // Filled from the reply's "version" by parse_reply(); ignored by encode_reply().
  int version = kProtocolVersion;
  std::optional<nlohmann::json> id;

  static Reply ok(nlohmann::json data = nlohmann::json::object(), std::string text = {});
  static Reply failure(ResultCode code, std::string text,
                       nlohmann::json data = nlohmann::json::object());
  bool is_ok() const { return result == ResultCode::Ok; }
};

// Incremental NUL-framing decoder. Feed it bytes as they arrive, in pieces of
// any size; it returns every frame completed by those bytes (without the
// terminator), in order. A frame longer than `max_frame` bytes is a framing
// error (code "frame_too_large"), reported as soon as the pending bytes exceed
// the limit, without waiting for the terminator. After an error the decoder
// stays failed: every later feed() returns the same error and the caller must
// drop the connection.
class FrameDecoder {
 public:
  explicit FrameDecoder(std::size_t max_frame = kMaxRequestBytes) : max_frame_(max_frame) {}

  Result<std::vector<std::string>> feed(std::string_view bytes);

  // Bytes of an unfinished frame held so far.
  std::size_t pending() const { return partial_.size(); }
  bool failed() const { return failed_; }

 private:
  std::size_t max_frame_;
  std::string partial_;
  bool failed_ = false;
};

// Parses JSON text with the protocol's limits: no exceptions escape, nesting
// deeper than kMaxJsonDepth is rejected. Error codes: "parse" (syntax, with the
// byte offset), "too_large" (too deep).
Result<nlohmann::json> parse_json(std::string_view text);

// Parses and validates one request frame. Error code "bad_request"; the message
// names the offending field and what was expected, e.g.
// "\"params\" must be an object, got array".
Result<Request> parse_request(std::string_view frame);
// The envelope checks of parse_request on a document parse_json already made
// (errors as parse_request's after the JSON step).
Result<Request> request_from_json(const nlohmann::json& doc);

// Parses one reply frame (client side). Error code "protocol".
Result<Reply> parse_reply(std::string_view frame);
// The envelope checks of parse_reply on a document parse_json already made.
Result<Reply> reply_from_json(const nlohmann::json& doc);

// Encode a message including the trailing NUL. Invalid UTF-8 in strings is
// replaced (U+FFFD), so encoding never throws.
std::string encode_request(const Request& request);
std::string encode_reply(const Reply& reply);

// Builds the reply for a frame that could not be parsed as a request.
Reply bad_request_reply(const Error& error);

}  // namespace smha::control
