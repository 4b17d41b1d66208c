// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/opensm/cli.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <fstream>
#include <ostream>
#include <sstream>
#include <vector>

#include "smha/sm/policy.hpp"

namespace smha::opensm {

namespace {

// This head's rendered values (doc/ha-engine.md "Rendered priorities"): the
// table every smhad computes from its own and its peers' configured sm_priority.
struct HeadPriorities {
  std::uint8_t yield, standby, master, claim;
};

HeadPriorities head_priorities(const config::Config& c) {
  std::vector<std::uint8_t> configured{static_cast<std::uint8_t>(c.sm_priority)};
  for (const auto& peer : c.peers)
    configured.push_back(static_cast<std::uint8_t>(peer.sm_priority.value_or(c.sm_priority)));
  auto r = sm::standby_priorities(configured);
  const std::vector<std::uint8_t> standby = r ? r.value() : configured;
  const auto [lo, hi] = std::minmax_element(standby.begin(), standby.end());
  return {static_cast<std::uint8_t>(*lo - 1), standby[0], static_cast<std::uint8_t>(*hi + 1),
          static_cast<std::uint8_t>(*hi + 2)};
}

// The sm_priority OpenSM runs with: the value in the file smhad last wrote when
// it is one of this head's rendered values; otherwise the standby value, which
// smhad writes at start. `why` says which, for stderr.
std::uint8_t running_priority(const HeadPriorities& p, const std::string& current, std::string& why) {
  const std::string table = "standby " + std::to_string(p.standby) + ", master " +
                            std::to_string(p.master) + ", yield " + std::to_string(p.yield) +
                            ", claim " + std::to_string(p.claim);
  const ConfMap conf = parse_opensm_conf(current);
  if (auto it = conf.find("sm_priority"); it != conf.end()) {
    for (std::uint8_t v : {p.standby, p.master, p.yield, p.claim}) {
      if (it->second == std::to_string(v)) {
        why = "sm_priority " + it->second + ": the value in the current file (" + table + ")";
        return v;
      }
    }
  }
  why = "sm_priority " + std::to_string(p.standby) + ": the standby value smhad starts with (" + table + ")";
  return p.standby;
}

}  // namespace

Status ReadOnlyFileSystem::write_atomic(const std::string& path, std::string_view, unsigned) {
  return make_error(Errc::Permission, "refusing to write " + path + ": read-only file system seam");
}

Result<std::string> ReadOnlyFileSystem::read(const std::string& path) const {
  // Only a small regular file, opened without blocking (a FIFO at the path must
  // not hang render-config).
  constexpr off_t kMaxBytes = 4 << 20;
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) return make_error(Errc::NotFound, path + ": no such file");
    return make_error(Errc::Io, path + ": " + std::strerror(err));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > kMaxBytes) {
    const bool regular = S_ISREG(st.st_mode);
    ::close(fd);
    return make_error(Errc::Io, path + (regular ? ": larger than 4 MiB" : ": not a regular file"));
  }
  std::string out;
  char buf[65536];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) != 0;) {
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      return make_error(Errc::Io, path + ": " + std::strerror(err));
    }
    out.append(buf, static_cast<std::size_t>(n));
    if (out.size() > static_cast<std::size_t>(kMaxBytes)) {
      ::close(fd);
      return make_error(Errc::Io, path + ": larger than 4 MiB");
    }
  }
  ::close(fd);
  return out;
}

void print_report(const CheckReport& report, std::ostream& err) {
  for (const auto& w : report.warnings) err << "warning: " << w.to_string() << '\n';
  for (const auto& e : report.errors) err << "error: " << e.to_string() << '\n';
}

int run_check_config(const std::string& path, OpensmRunner& runner, std::ostream& out,
                     std::ostream& err) {
  CheckReport report = check_config(path, runner);
  print_report(report, err);
  if (!report.ok()) {
    err << path << ": " << report.errors.size() << " error(s)\n";
    return 1;
  }
  out << path << ": OK for " << report.capabilities->describe() << '\n';
  return 0;
}

int run_render_config(const std::string& path, OpensmRunner& runner, const os::FileSystem& fs,
                      bool diff, std::ostream& out, std::ostream& err, const config::LoadOptions& load) {
  auto loaded = config::load_config(path, load);
  if (!loaded.ok()) {
    for (const auto& e : loaded.errors()) err << "error: " << e.to_string() << '\n';
    return kRenderError;
  }
  config::Config c = std::move(loaded).value();
  const std::string& conf_path = c.opensm.conf_path;
  std::string current;
  bool have_current = false;
  if (auto r = fs.read(conf_path); r.ok()) {
    current = *r;
    have_current = true;
  } else if (diff && r.error().code != Errc::NotFound) {
    err << "error: cannot read " << conf_path << ": " << r.error().message << '\n';
    return kRenderError;
  }
  // Render at the priority OpenSM runs with, not the configured base.
  std::string why;
  c.sm_priority = running_priority(head_priorities(c), current, why);
  CheckReport report = check_loaded_config(c, runner);
  print_report(report, err);
  if (!report.ok()) return kRenderError;
  err << "note: " << why << (have_current ? "" : "; " + conf_path + " not read") << '\n';
  if (!diff) {
    out << report.rendered;
    return kRenderOk;
  }
  std::string d = diff_lines(current, report.rendered, conf_path, "rendered from " + path);
  if (d.empty()) {
    out << conf_path << " is up to date\n";
    return kRenderOk;
  }
  out << d;
  return kRenderDiffers;
}

}  // namespace smha::opensm
