// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/opensm/probe.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "smha/core/clock.hpp"

extern char** environ;

namespace smha::opensm {

namespace {

// Closes an fd on scope exit.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_;
};

// A private temp directory, removed with its content on scope exit.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "smha-probe-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) != nullptr) path_ = tmpl;  // mkdtemp creates it 0700
  }
  ~TempDir() {
    if (!path_.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(path_, ec);
    }
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string errno_text(int err) { return std::strerror(err); }

bool write_private_file(const std::string& path, std::string_view content) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  Fd guard(fd);
  std::size_t done = 0;
  while (done < content.size()) {
    ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    done += static_cast<std::size_t>(n);
  }
  return true;
}

std::optional<std::string> read_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string first_lines(const std::string& text, int n) {
  std::size_t pos = 0;
  for (int i = 0; i < n && pos != std::string::npos; ++i) {
    pos = text.find('\n', pos);
    if (pos != std::string::npos) ++pos;
  }
  return pos == std::string::npos ? text : text.substr(0, pos);
}

}  // namespace

Result<ProbeOutput> ExecOpensmRunner::run(const std::string& binary,
                                          std::optional<std::string_view> config_text) {
  if (::access(binary.c_str(), X_OK) != 0) {
    return make_error(Errc::Exec, "cannot run " + binary + ": " + errno_text(errno));
  }
  TempDir dir;
  if (dir.path().empty()) {
    return make_error(Errc::Io, "cannot create a temp directory: " + errno_text(errno));
  }
  const std::string dump_path = dir.path() + "/dump.conf";
  const std::string conf_path = dir.path() + "/opensm.conf";
  std::vector<std::string> args = {binary};
  if (config_text) {
    if (!write_private_file(conf_path, *config_text)) {
      return make_error(Errc::Io, "cannot write " + conf_path + ": " + errno_text(errno));
    }
    args.insert(args.end(), {"-F", conf_path});
  }
  args.insert(args.end(), {"-c", dump_path});

  // Environment: inherited unchanged. OSM_TMP_DIR would change the default of
  // dump_files_dir that -c prints; -c writes nothing there (strace, 3.3.23).
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  std::vector<char*> argv, envp;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);

  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
    return make_error(Errc::Io, "pipe: " + errno_text(errno));
  }
  Fd read_end(pipe_fds[0]);
  Fd write_end(pipe_fds[1]);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, write_end.get(), STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, write_end.get(), STDERR_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addchdir_np(&actions, dir.path().c_str());
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
                                      POSIX_SPAWN_SETSIGDEF);
  pid_t pid = 0;
  int rc = ::posix_spawn(&pid, binary.c_str(), &actions, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  write_end.reset();
  if (rc != 0) return make_error(Errc::Exec, "cannot run " + binary + ": " + errno_text(rc));

  // A pidfd tells us when it exits even if it closed its output early.
  Fd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));

  SteadyClock clock;
  const TimePoint deadline = clock.now() + timeout_;
  std::string output;
  bool output_open = true;
  bool exited = false;
  int status = 0;
  while (!exited) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock.now());
    if (left.count() <= 0) break;
    pollfd fds[2];
    int nfds = 0;
    if (output_open) fds[nfds++] = {read_end.get(), POLLIN, 0};
    if (pidfd.get() >= 0) fds[nfds++] = {pidfd.get(), POLLIN, 0};
    // Without a pidfd (kernel < 5.3) and with the output closed, check every 10 ms.
    int wait_ms = (nfds == 0) ? 10 : static_cast<int>(left.count());
    int n = ::poll(fds, static_cast<nfds_t>(nfds), wait_ms);
    if (n < 0 && errno != EINTR) break;
    if (output_open && n > 0 && (fds[0].revents & (POLLIN | POLLHUP | POLLERR))) {
      char buf[4096];
      ssize_t got = ::read(read_end.get(), buf, sizeof buf);
      if (got > 0) {
        if (output.size() < (1u << 20)) output.append(buf, static_cast<std::size_t>(got));
      } else if (got == 0 || errno != EINTR) {
        output_open = false;
      }
    }
    if (!output_open || pidfd.get() >= 0) {
      pid_t w = ::waitpid(pid, &status, WNOHANG);
      if (w == pid) exited = true;
    }
  }
  if (!exited) {
    ::kill(-pid, SIGKILL);  // its own process group: pgid == pid
    ::waitpid(pid, &status, 0);
    return make_error(Errc::Timeout, binary + " -c did not finish within " +
                                     std::to_string(timeout_.count()) + " ms; killed pid " +
                                     std::to_string(pid));
  }
  // Drain what is left in the pipe.
  if (output_open) {
    // Non-blocking: a leftover grandchild could still hold the pipe open.
    ::fcntl(read_end.get(), F_SETFL, O_NONBLOCK);
    char buf[4096];
    ssize_t got;
    while ((got = ::read(read_end.get(), buf, sizeof buf)) > 0) {
      if (output.size() < (1u << 20)) output.append(buf, static_cast<std::size_t>(got));
    }
  }
  auto dump = read_file(dump_path);
  if (!dump) {
    std::string how = WIFEXITED(status) ? "exited with status " + std::to_string(WEXITSTATUS(status))
                                        : "was killed by signal " + std::to_string(WTERMSIG(status));
    return make_error(Errc::Failed, binary + " -c wrote no file (it " + how + "); its output:\n" +
                                   first_lines(output, 20));
  }
  return ProbeOutput{std::move(output), std::move(*dump)};
}

std::string Capabilities::describe() const {
  return "OpenSM " + version + " (" + std::string(to_string(flavor)) + ") at " + binary;
}

Result<Capabilities> parse_probe(const std::string& binary, const ProbeOutput& out) {
  Capabilities caps;
  caps.binary = binary;
  caps.version = "unknown";
  // The banner: "OpenSM 3.3.23" (NVIDIA SM prints its own version the same way).
  std::istringstream lines(out.output);
  for (std::string line; std::getline(lines, line);) {
    auto at = line.find("OpenSM ");
    if (at == std::string::npos) continue;
    std::string rest = line.substr(at + 7);
    std::size_t end = rest.find_first_of(" \t\r");
    std::string v = rest.substr(0, end);
    if (!v.empty() && std::isdigit(static_cast<unsigned char>(v[0]))) {
      caps.version = v;
      break;
    }
  }
  caps.defaults = parse_opensm_conf(out.dump);
  if (caps.defaults.empty()) {
    return make_error(Errc::Failed, binary + " -c wrote no opensm.conf keys; is it OpenSM?");
  }
  caps.sharp = caps.knows("sharp_enabled");
  caps.adaptive_routing = caps.knows("ar_mode") || caps.knows("ar_sl_mask");
  caps.flavor = (caps.sharp || caps.adaptive_routing) ? Flavor::Nvidia : Flavor::Upstream;
  return caps;
}

Result<Capabilities> probe_opensm(OpensmRunner& runner, const std::string& binary) {
  auto out = runner.run(binary, std::nullopt);
  if (!out.ok()) return out.error();
  return parse_probe(binary, *out);
}

}  // namespace smha::opensm
