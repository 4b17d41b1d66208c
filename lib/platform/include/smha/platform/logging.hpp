// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// Logging set-up for smhad and smctl: spdlog, one logger per module, to journald
// when running under systemd and to stderr otherwise.
//
// Loggers (spdlog registry names): mad, sm, osm, ctl, cfg, svc — modules look
// them up with spdlog::get("<name>"). setup_logging() (re)creates all of them
// with the same sink, replacing any logger already registered under those names,
// and makes "svc" the default logger.
//
// Events that operators and tools key on (a role transition, a hook failure)
// are logged through log_event(): exactly one line whose first word is the
// event's stable name followed by key=value fields, e.g.
//   SM_TRANSITION from=STANDBY to=MASTER reason=peer_lost peer=head02 peer_prio=1
// In the journal the same event carries MESSAGE_ID=<the event's 128-bit id>,
// SMHA_EVENT=<name> and one SMHA_<KEY>=<value> field per key, so
//   journalctl MESSAGE_ID=<id>   or   journalctl SMHA_EVENT=SM_TRANSITION
// find it. Names and ids are listed in doc/log-messages.md and never change.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <spdlog/common.h>
#include <spdlog/logger.h>

#include "smha/core/result.hpp"

namespace smha::platform {

inline constexpr std::string_view kLoggerNames[] = {"mad", "sm", "osm", "ctl", "cfg", "svc"};

enum class LogDestination {
  Auto,     // journald if running_under_systemd(), else stderr
  Journal,  // journald (error if built without SMHA_WITH_SYSTEMD)
  Stderr,
};

// Parses "auto", "journal", "stderr" (smhad --log-target).
std::optional<LogDestination> parse_log_destination(std::string_view text);

struct LogOptions {
  LogDestination destination = LogDestination::Auto;
  spdlog::level::level_enum level = spdlog::level::info;
  // SYSLOG_IDENTIFIER in the journal.
  std::string ident = "smhad";
  // SYSLOG_IDENTIFIER of the "osm" logger (OpenSM's own output) in the journal,
  // so `journalctl -t opensm` shows what OpenSM printed.
  std::string opensm_ident = "opensm";
  // Put before every message ("fab0: ..."), so that the lines of several
  // instances on one head tell apart; empty: none.
  std::string prefix;
  // Tests: log to this sink instead (destination is then ignored).
  spdlog::sink_ptr sink_override;
};

// True if stderr is connected to the journal ($JOURNAL_STREAM names stderr's
// device:inode) or the process is a systemd service ($INVOCATION_ID is set).
bool running_under_systemd();

// Creates the module loggers as described above. Errors: "unsupported"
// (Journal requested in a build without libsystemd); the registry is then
// unchanged.
Status setup_logging(const LogOptions& options);

// The logger registered as `name`; if there is none (setup_logging() not
// called, e.g. in a unit test), a stderr logger of that name is created and
// registered. Never null.
std::shared_ptr<spdlog::logger> module_logger(std::string_view name);

// A stable event id: `name` is the word in the text line, `id` the journal's
// MESSAGE_ID (32 lowercase hex digits, like systemd's catalog ids).
struct MessageId {
  std::string_view name;
  std::string_view id;
};

// Ids defined by lib/platform (doc/log-messages.md, section "platform").
inline constexpr MessageId kSmTransition{"SM_TRANSITION", "6d2c7ab1f0e34b0c9a1e5d7f3c2b8a01"};
inline constexpr MessageId kHookFailed{"HOOK_FAILED", "6d2c7ab1f0e34b0c9a1e5d7f3c2b8a02"};
inline constexpr MessageId kHookTimeout{"HOOK_TIMEOUT", "6d2c7ab1f0e34b0c9a1e5d7f3c2b8a03"};
inline constexpr MessageId kHookRefused{"HOOK_REFUSED", "6d2c7ab1f0e34b0c9a1e5d7f3c2b8a04"};
inline constexpr MessageId kHookDropped{"HOOK_DROPPED", "6d2c7ab1f0e34b0c9a1e5d7f3c2b8a05"};
// Ids of the daemon's events (lib/service; doc/log-messages.md).
inline constexpr MessageId kSmEvent{"SM_EVENT", "6d2c7ab1f0e34b0c9a1e5d7f3c2b8a06"};
inline constexpr MessageId kSmAlarm{"SM_ALARM", "6d2c7ab1f0e34b0c9a1e5d7f3c2b8a07"};
inline constexpr MessageId kSmAlarmCleared{"SM_ALARM_CLEARED", "6d2c7ab1f0e34b0c9a1e5d7f3c2b8a08"};
inline constexpr MessageId kSmActionFailed{"SM_ACTION_FAILED", "6d2c7ab1f0e34b0c9a1e5d7f3c2b8a09"};
inline constexpr MessageId kSmhadReload{"SMHAD_RELOAD", "6d2c7ab1f0e34b0c9a1e5d7f3c2b8a0a"};
inline constexpr MessageId kSmhadReloadRefused{"SMHAD_RELOAD_REFUSED",
                                               "6d2c7ab1f0e34b0c9a1e5d7f3c2b8a0b"};
inline constexpr MessageId kSmhadHold{"SMHAD_HOLD", "6d2c7ab1f0e34b0c9a1e5d7f3c2b8a0c"};
inline constexpr MessageId kSmhadHoldExpired{"SMHAD_HOLD_EXPIRED",
                                             "6d2c7ab1f0e34b0c9a1e5d7f3c2b8a0d"};
inline constexpr MessageId kSmhadRelease{"SMHAD_RELEASE", "6d2c7ab1f0e34b0c9a1e5d7f3c2b8a0e"};
inline constexpr MessageId kSmhadHandoverRequest{"SMHAD_HANDOVER_REQUEST",
                                                 "6d2c7ab1f0e34b0c9a1e5d7f3c2b8a0f"};
inline constexpr MessageId kSmhadStarted{"SMHAD_STARTED", "6d2c7ab1f0e34b0c9a1e5d7f3c2b8a10"};
inline constexpr MessageId kSmhadStopping{"SMHAD_STOPPING", "6d2c7ab1f0e34b0c9a1e5d7f3c2b8a11"};
inline constexpr MessageId kSmTakeoverReport{"SM_TAKEOVER_REPORT", "6d2c7ab1f0e34b0c9a1e5d7f3c2b8a13"};
inline constexpr MessageId kSmRole{"SM_ROLE", "6d2c7ab1f0e34b0c9a1e5d7f3c2b8a14"};
// Any other daemon note (SMHAD_<KIND> without an id of its own above).
inline constexpr MessageId kSmhadNote{"SMHAD_NOTE", "6d2c7ab1f0e34b0c9a1e5d7f3c2b8a12"};

// Every id above, for lookups by name and the uniqueness test.
const std::vector<MessageId>& known_message_ids();
// The id registered for `name` ("SMHAD_RELOAD"), or nullopt.
std::optional<MessageId> find_message_id(std::string_view name);

using LogFields = std::vector<std::pair<std::string, std::string>>;

// "NAME k1=v1 k2=v2": a value that is empty or contains a space, '"', '=' or
// '\' is written in double quotes with '"' and '\' backslash-escaped; control
// characters become spaces. Keys are written as given (use snake_case).
std::string format_event(const MessageId& id, const LogFields& fields);

// The journal fields of the event ("MESSAGE=...", "MESSAGE_ID=...",
// "SMHA_EVENT=...", "SMHA_<KEY>=..." with the key upper-cased, "PRIORITY=<n>",
// "SMHA_LOGGER=<logger>"), in that order.
std::vector<std::string> journal_fields(const MessageId& id, const LogFields& fields,
                                        spdlog::level::level_enum level,
                                        std::string_view logger_name);

// Logs the event once at `level` through `logger`: with structured fields if
// the logger writes to journald, as format_event()'s line otherwise.
void log_event(spdlog::logger& logger, const MessageId& id, const LogFields& fields,
               spdlog::level::level_enum level = spdlog::level::info);

// One SM_TRANSITION line (info): from, to, reason, then peer, peer_state,
// peer_prio when `peer` is not empty.
void log_transition(spdlog::logger& logger, std::string_view from, std::string_view to,
                    std::string_view reason, std::string_view peer = {},
                    std::string_view peer_state = {}, int peer_priority = -1);

}  // namespace smha::platform
