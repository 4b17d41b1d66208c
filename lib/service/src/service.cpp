// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/service/service.hpp"

#include <fstream>

namespace smha::service {

bool process_stopped(int pid) {
  if (pid <= 0) return false;
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return false;
  // "pid (comm) S ...": comm may hold spaces and parentheses; the state follows the last ')'.
  const auto close = line.rfind(')');
  if (close == std::string::npos || close + 2 >= line.size()) return false;
  const char state = line[close + 2];
  return state == 'T' || state == 't';
}

control::Reply guard_reload(const char* via, head::LogEventSink& sink, const std::function<control::Reply()>& body) {
  std::string what;
  try {
    return body();
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
    what = "an exception that is not a std::exception";
  }
  try {
    sink.note("RELOAD_REFUSED", "reload failed: " + what, via);
  } catch (...) {
    // Out of memory again while recording it: the reply still says why.
  }
  return control::Reply::failure(control::ResultCode::Error, "reload failed, old configuration kept: " + what);
}

}  // namespace smha::service
