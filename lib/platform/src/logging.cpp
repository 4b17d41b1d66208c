// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/platform/logging.hpp"

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <sys/stat.h>
#include <sys/uio.h>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#ifdef SMHA_WITH_SYSTEMD
#include <systemd/sd-journal.h>
#include <spdlog/sinks/systemd_sink.h>
#endif

namespace smha::platform {
namespace {

// Journal: the journal adds time and priority; the logger name says the module.
constexpr const char* kJournalPattern = "[%n] %v";
constexpr const char* kStderrPattern = "%Y-%m-%d %H:%M:%S.%e %^%l%$ [%n] %v";

// `pattern` with "<prefix>: " before the message (%v); '%' in the prefix is
// escaped for spdlog.
std::string with_prefix(const char* pattern, const std::string& prefix) {
  std::string p(pattern);
  std::string escaped;
  for (char ch : prefix) {
    if (ch == '%') escaped += '%';
    escaped += ch;
  }
  const auto at = p.rfind("%v");
  return at == std::string::npos ? p : p.substr(0, at) + escaped + ": " + p.substr(at);
}

#ifdef SMHA_WITH_SYSTEMD
// spdlog's systemd sink, plus what log_event() needs to send its own entries.
class JournalSink final : public spdlog::sinks::systemd_sink_mt {
 public:
  explicit JournalSink(std::string ident) : systemd_sink(std::move(ident), true) {}
  const std::string& ident() const { return ident_; }
};
#endif

bool needs_quotes(std::string_view value) {
  if (value.empty()) return true;
  for (char c : value) {
    if (c == ' ' || c == '"' || c == '=' || c == '\\') return true;
  }
  return false;
}

std::string clean(std::string_view value) {
  std::string out(value);
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  }
  return out;
}

int syslog_priority(spdlog::level::level_enum level) {
  switch (level) {
    case spdlog::level::critical: return 2;
    case spdlog::level::err: return 3;
    case spdlog::level::warn: return 4;
    case spdlog::level::info: return 6;
    default: return 7;
  }
}

}  // namespace

bool running_under_systemd() {
  if (const char* stream = std::getenv("JOURNAL_STREAM"); stream != nullptr) {
    unsigned long long dev = 0;
    unsigned long long ino = 0;
    struct stat st {};
    if (std::sscanf(stream, "%llu:%llu", &dev, &ino) == 2 && ::fstat(2, &st) == 0 &&
        static_cast<unsigned long long>(st.st_dev) == dev &&
        static_cast<unsigned long long>(st.st_ino) == ino) {
      return true;
    }
  }
  const char* invocation = std::getenv("INVOCATION_ID");
  return invocation != nullptr && *invocation != '\0';
}

Status setup_logging(const LogOptions& options) {
  spdlog::sink_ptr sink = options.sink_override;
  spdlog::sink_ptr osm_sink;
  const char* pattern = kStderrPattern;
  if (!sink) {
    const bool journal = options.destination == LogDestination::Journal ||
                         (options.destination == LogDestination::Auto && running_under_systemd());
#ifdef SMHA_WITH_SYSTEMD
    if (journal) {
      sink = std::make_shared<JournalSink>(options.ident);
      osm_sink = std::make_shared<JournalSink>(options.opensm_ident);
      pattern = kJournalPattern;
    }
#else
    if (journal && options.destination == LogDestination::Journal) {
      return make_error(Errc::Unsupported, "logging to journald: smha was built without libsystemd "
                                       "(SMHA_WITH_SYSTEMD=OFF)");
    }
#endif
    if (!sink) sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
  }
  for (std::string_view name : kLoggerNames) {
    spdlog::drop(std::string(name));
    auto logger = std::make_shared<spdlog::logger>(
        std::string(name), name == "osm" && osm_sink ? osm_sink : sink);
    logger->set_pattern(options.prefix.empty() ? std::string(pattern)
                                               : with_prefix(pattern, options.prefix));
    logger->set_level(options.level);
    spdlog::register_logger(logger);
  }
  spdlog::set_default_logger(spdlog::get("svc"));
  return Status::Ok();
}

std::optional<LogDestination> parse_log_destination(std::string_view text) {
  if (text == "auto") return LogDestination::Auto;
  if (text == "journal") return LogDestination::Journal;
  if (text == "stderr") return LogDestination::Stderr;
  return std::nullopt;
}

const std::vector<MessageId>& known_message_ids() {
  static const std::vector<MessageId> ids = {
      kSmTransition, kHookFailed,   kHookTimeout,      kHookRefused,        kHookDropped,
      kSmEvent,      kSmAlarm,      kSmAlarmCleared,   kSmActionFailed,     kSmhadReload,
      kSmhadReloadRefused, kSmhadHold, kSmhadHoldExpired, kSmhadRelease,  kSmhadHandoverRequest,
      kSmhadStarted, kSmhadStopping,    kSmhadNote,         kSmTakeoverReport, kSmRole};
  return ids;
}

std::optional<MessageId> find_message_id(std::string_view name) {
  for (const auto& id : known_message_ids())
    if (id.name == name) return id;
  return std::nullopt;
}

std::shared_ptr<spdlog::logger> module_logger(std::string_view name) {
  const std::string key(name);
  if (auto logger = spdlog::get(key)) return logger;
  auto logger = std::make_shared<spdlog::logger>(
      key, std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
  logger->set_pattern(kStderrPattern);
  try {
    spdlog::register_logger(logger);
  } catch (const spdlog::spdlog_ex&) {
    // Registered concurrently by someone else: use theirs.
    if (auto existing = spdlog::get(key)) return existing;
  }
  return logger;
}

std::string format_event(const MessageId& id, const LogFields& fields) {
  std::string line(id.name);
  for (const auto& [key, raw] : fields) {
    const std::string value = clean(raw);
    line += ' ';
    line += key;
    line += '=';
    if (!needs_quotes(value)) {
      line += value;
      continue;
    }
    line += '"';
    for (char c : value) {
      if (c == '"' || c == '\\') line += '\\';
      line += c;
    }
    line += '"';
  }
  return line;
}

std::vector<std::string> journal_fields(const MessageId& id, const LogFields& fields,
                                        spdlog::level::level_enum level,
                                        std::string_view logger_name) {
  std::vector<std::string> out;
  out.push_back("MESSAGE=[" + std::string(logger_name) + "] " + format_event(id, fields));
  out.push_back("MESSAGE_ID=" + std::string(id.id));
  out.push_back("SMHA_EVENT=" + std::string(id.name));
  for (const auto& [key, value] : fields) {
    std::string name = "SMHA_";
    for (char c : key) {
      name += std::isalnum(static_cast<unsigned char>(c))
                  ? static_cast<char>(std::toupper(static_cast<unsigned char>(c)))
                  : '_';
    }
    out.push_back(name + "=" + value);
  }
  out.push_back("PRIORITY=" + std::to_string(syslog_priority(level)));
  out.push_back("SMHA_LOGGER=" + std::string(logger_name));
  return out;
}

void log_event(spdlog::logger& logger, const MessageId& id, const LogFields& fields,
               spdlog::level::level_enum level) {
  if (!logger.should_log(level)) return;
#ifdef SMHA_WITH_SYSTEMD
  for (const auto& sink : logger.sinks()) {
    auto* journal = dynamic_cast<JournalSink*>(sink.get());
    if (journal == nullptr) continue;
    std::vector<std::string> entries = journal_fields(id, fields, level, logger.name());
    if (!journal->ident().empty()) entries.push_back("SYSLOG_IDENTIFIER=" + journal->ident());
    std::vector<iovec> iov;
    iov.reserve(entries.size());
    for (auto& entry : entries) iov.push_back(iovec{entry.data(), entry.size()});
    ::sd_journal_sendv(iov.data(), static_cast<int>(iov.size()));
    return;
  }
#endif
  logger.log(level, "{}", format_event(id, fields));
}

void log_transition(spdlog::logger& logger, std::string_view from, std::string_view to,
                    std::string_view reason, std::string_view peer,
                    std::string_view peer_state, int peer_priority) {
  LogFields fields{{"from", std::string(from)}, {"to", std::string(to)},
                   {"reason", std::string(reason)}};
  if (!peer.empty()) {
    fields.emplace_back("peer", std::string(peer));
    fields.emplace_back("peer_state", std::string(peer_state));
    fields.emplace_back("peer_prio", std::to_string(peer_priority));
  }
  log_event(logger, kSmTransition, fields, spdlog::level::info);
}

}  // namespace smha::platform
