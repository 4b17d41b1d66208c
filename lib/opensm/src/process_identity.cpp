// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/opensm/process_identity.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <optional>
#include <sstream>
#include <system_error>

#include "smha/core/file_read.hpp"

namespace smha::opensm {

namespace {
// A /proc file's bytes, at most `cap`, with plain open/read: no streams, one
// descriptor held briefly (the scan runs right before a spawn, which may be
// short of descriptors). nullopt when it cannot be opened (gone, no access).
std::optional<std::string> read_proc_file(const std::string& path, std::size_t cap) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return std::nullopt;
  std::string out;
  char buf[4096];
  while (out.size() < cap) {
    const ssize_t n = ::read(fd, buf, std::min(sizeof buf, cap - out.size()));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return out;
}
}  // namespace

namespace {

std::string errno_text(int err) { return std::error_code(err, std::system_category()).message(); }

template <typename T>
bool parse_number(std::string_view s, T& out) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

constexpr std::string_view kDeletedSuffix = " (deleted)";

}  // namespace

Result<std::chrono::nanoseconds> process_age(std::uint64_t start_time) {
  timespec ts{};
  if (::clock_gettime(CLOCK_BOOTTIME, &ts) != 0) return make_error(Errc::Io, "CLOCK_BOOTTIME: " + errno_text(errno));
  const long ticks = ::sysconf(_SC_CLK_TCK);
  if (ticks <= 0) return make_error(Errc::Io, "_SC_CLK_TCK: " + errno_text(errno));
  const auto now = std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
  const auto started = std::chrono::nanoseconds(static_cast<std::int64_t>(
      static_cast<long double>(start_time) * 1e9L / static_cast<long double>(ticks)));
  if (started > now) return make_error(Errc::Invalid, "process start time " + std::to_string(start_time) +
                                                      " ticks lies after now");
  return now - started;
}

Result<std::uint64_t> parse_proc_stat_start_time(std::string_view line) {
  auto close = line.rfind(')');
  if (close == std::string_view::npos) return make_error(Errc::Parse, "/proc stat line has no ')'");
  // After ')' come fields 3 (state), 4, ...; starttime is field 22.
  std::string_view rest = line.substr(close + 1);
  int field = 2;
  std::size_t pos = 0;
  while (pos < rest.size()) {
    while (pos < rest.size() && rest[pos] == ' ') ++pos;
    if (pos >= rest.size()) break;
    auto end = rest.find(' ', pos);
    if (end == std::string_view::npos) end = rest.size();
    ++field;
    if (field == 22) {
      std::uint64_t v = 0;
      std::string_view token = rest.substr(pos, end - pos);
      if (!token.empty() && token.back() == '\n') token.remove_suffix(1);
      if (!parse_number(token, v)) return make_error(Errc::Parse, "/proc stat field 22 is not a number");
      return v;
    }
    pos = end;
  }
  return make_error(Errc::Parse, "/proc stat line has fewer than 22 fields");
}

Result<ProcessIdentity> read_process_identity(int pid, bool* ret_exe_deleted) {
  if (pid <= 0) return make_error(Errc::NotFound, "no process " + std::to_string(pid));
  const std::string dir = "/proc/" + std::to_string(pid);
  const auto stat = read_proc_file(dir + "/stat", 4096);
  if (!stat || stat->empty()) return make_error(Errc::NotFound, "no process " + std::to_string(pid));
  const std::string line = stat->substr(0, stat->find('\n'));
  auto close = line.rfind(')');
  if (close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'Z')
    return make_error(Errc::NotFound, "process " + std::to_string(pid) + " is a zombie");
  auto start = parse_proc_stat_start_time(line);
  if (!start) return make_error(Errc::Io, dir + "/stat: " + start.error().message);

  char buf[4096];
  ssize_t n = ::readlink((dir + "/exe").c_str(), buf, sizeof buf - 1);
  if (n < 0) {
    int e = errno;
    return make_error(e == ENOENT ? Errc::NotFound : Errc::Io, "readlink " + dir + "/exe: " + errno_text(e));
  }
  std::string exe(buf, static_cast<std::size_t>(n));
  bool deleted = exe.size() > kDeletedSuffix.size() && exe.ends_with(kDeletedSuffix);
  if (deleted) exe.resize(exe.size() - kDeletedSuffix.size());
  if (ret_exe_deleted) *ret_exe_deleted = deleted;
  return ProcessIdentity{pid, *start, exe};
}

Result<std::vector<std::string>> read_process_cmdline(int pid) {
  if (pid <= 0) return make_error(Errc::NotFound, "no process " + std::to_string(pid));
  const auto text = read_proc_file("/proc/" + std::to_string(pid) + "/cmdline", 128 * 1024);
  if (!text) return make_error(Errc::NotFound, "no process " + std::to_string(pid));
  std::vector<std::string> argv;
  std::string arg;
  for (char c : *text) {
    if (c == '\0') {
      argv.push_back(std::move(arg));
      arg.clear();
    } else {
      arg += c;
    }
  }
  if (!arg.empty()) argv.push_back(std::move(arg));
  return argv;
}

namespace {
// The value after `short_opt` or `long_opt` ("-F x", "--config x", "--config=x").
std::optional<std::string> option_value(const std::vector<std::string>& argv, std::string_view short_opt,
                                        std::string_view long_opt) {
  for (std::size_t i = 1; i < argv.size(); ++i) {
    if ((argv[i] == short_opt || argv[i] == long_opt) && i + 1 < argv.size()) return argv[i + 1];
    const std::string prefix = std::string(long_opt) + "=";
    if (argv[i].rfind(prefix, 0) == 0) return argv[i].substr(prefix.size());
  }
  return std::nullopt;
}

std::optional<std::uint64_t> guid_number(std::string_view s) { return parse_guid_value(s); }

std::string_view basename_of(std::string_view path) {
  auto slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

// The value of `name` in a NUL-separated environment block, or nullopt.
std::optional<std::string> env_value(std::string_view block, std::string_view name) {
  while (!block.empty()) {
    auto end = block.find('\0');
    std::string_view entry = block.substr(0, end);
    block = end == std::string_view::npos ? std::string_view{} : block.substr(end + 1);
    if (entry.size() > name.size() && entry.substr(0, name.size()) == name && entry[name.size()] == '=')
      return std::string(entry.substr(name.size() + 1));
  }
  return std::nullopt;
}
}  // namespace

std::optional<std::uint64_t> parse_guid_value(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) s.remove_prefix(2);
  std::uint64_t v = 0;
  if (s.empty()) return std::nullopt;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v, 16);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

std::optional<std::uint64_t> opensm_argv_guid(const std::vector<std::string>& argv) {
  if (auto g = option_value(argv, "-g", "--guid")) return guid_number(*g);
  auto conf = option_value(argv, "-F", "--config");
  if (!conf) return std::nullopt;
  auto text = read_regular_file(*conf, kMaxConfigFileBytes);
  if (!text) return std::nullopt;
  std::string_view rest = *text;
  while (!rest.empty()) {
    auto nl = rest.find('\n');
    std::string_view line = rest.substr(0, nl);
    rest = nl == std::string_view::npos ? std::string_view{} : rest.substr(nl + 1);
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
    if (line.substr(0, 4) != "guid" || line.size() < 5 || (line[4] != ' ' && line[4] != '\t')) continue;
    auto v = guid_number(line.substr(5));
    if (v && *v != 0) return v;  // "guid 0x0000000000000000": the first active port
    return std::nullopt;
  }
  return std::nullopt;
}

bool looks_like_opensm(const std::vector<std::string>& argv, const std::string& exe) {
  if (basename_of(exe) == "opensm") return true;
  for (std::size_t i = 0; i < argv.size() && i < 2; ++i)
    if (basename_of(argv[i]) == "opensm") return true;
  return false;
}

std::vector<BoundOpensm> find_opensm_bound_to(std::uint64_t guid, int except_pid) {
  std::vector<BoundOpensm> found;
  const char* own_sock = std::getenv("IBSIM_SOCKNAME");
  DIR* proc = ::opendir("/proc");
  if (!proc) return found;
  while (dirent* e = ::readdir(proc)) {
    int pid = 0;
    std::string_view name = e->d_name;
    if (!parse_number(name, pid) || pid <= 0 || pid == except_pid || pid == ::getpid()) continue;
    auto argv = read_process_cmdline(pid);
    if (!argv || argv->empty()) continue;  // gone, a kernel thread or a zombie
    std::string exe;
    char buf[4096];
    if (ssize_t n = ::readlink(("/proc/" + std::string(name) + "/exe").c_str(), buf, sizeof buf - 1); n > 0)
      exe.assign(buf, static_cast<std::size_t>(n));
    if (exe.ends_with(kDeletedSuffix)) exe.resize(exe.size() - kDeletedSuffix.size());
    if (!looks_like_opensm(*argv, exe)) continue;
    auto bound = opensm_argv_guid(*argv);
    if (!bound || *bound != guid) continue;
    // umad2sim: the port is the simulator's; another IBSIM_SOCKNAME is another fabric.
    {
      const std::string block =
          read_proc_file("/proc/" + std::string(name) + "/environ", 256 * 1024).value_or(std::string());
      auto theirs = env_value(block, "IBSIM_SOCKNAME");
      if (theirs.has_value() != (own_sock != nullptr) || (theirs && *theirs != own_sock)) continue;
    }
    found.push_back({pid, std::move(*argv), std::move(exe)});
  }
  ::closedir(proc);
  return found;
}

bool opensm_argv_matches(const std::vector<std::string>& argv, const std::string& conf_path,
                         const std::string& guid) {
  if (!conf_path.empty()) {
    auto f = option_value(argv, "-F", "--config");
    if (!f || *f != conf_path) return false;
  }
  if (!guid.empty()) {
    auto g = option_value(argv, "-g", "--guid");
    auto want = guid_number(guid);
    if (!g || !want || guid_number(*g) != want) return false;
  }
  return true;
}

std::string format_pidfile(const ProcessIdentity& id) {
  std::ostringstream out;
  out << "pid=" << id.pid << "\nstart_time=" << id.start_time << "\nexe=" << id.exe << "\n";
  return out.str();
}

Result<ProcessIdentity> parse_pidfile(std::string_view text) {
  ProcessIdentity id;
  bool have_pid = false, have_start = false, have_exe = false;
  int lineno = 0;
  while (!text.empty()) {
    auto nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    ++lineno;
    if (line.empty()) continue;
    auto eq = line.find('=');
    const std::string where = "pidfile line " + std::to_string(lineno);
    if (eq == std::string_view::npos) return make_error(Errc::Parse, where + ": expected key=value");
    auto key = line.substr(0, eq), value = line.substr(eq + 1);
    if (key == "pid") {
      if (!parse_number(value, id.pid) || id.pid <= 0) return make_error(Errc::Parse, where + ": bad pid");
      have_pid = true;
    } else if (key == "start_time") {
      if (!parse_number(value, id.start_time)) return make_error(Errc::Parse, where + ": bad start_time");
      have_start = true;
    } else if (key == "exe") {
      if (value.empty() || value.front() != '/') return make_error(Errc::Parse, where + ": exe must be absolute");
      id.exe = std::string(value);
      have_exe = true;
    } else {
      return make_error(Errc::Parse, where + ": unknown key '" + std::string(key) + "'");
    }
  }
  if (!have_pid || !have_start || !have_exe)
    return make_error(Errc::Parse, "pidfile lacks pid, start_time or exe");
  return id;
}

}  // namespace smha::opensm
