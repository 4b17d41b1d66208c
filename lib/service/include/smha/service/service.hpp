// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// lib/service: smhad, the host of one head (lib/head) on asio, libibumad,
// POSIX and systemd (doc/architecture.md, "A head and its hosts"). Everything
// runs on one io_context thread; nothing here locks.
//   process_stopped()        the kernel's view of OpenSM's process (a hung OpenSM)
//   guard_reload()           every reload path's exception guard
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <nlohmann/json.hpp>

#include "smha/agent/agent.hpp"
#include "smha/agent/seams.hpp"
#include "smha/agent/supervised_opensm_control.hpp"
#include "smha/config/config.hpp"
#include "smha/control/protocol.hpp"
#include "smha/mad/transport.hpp"
#include "smha/opensm/conf.hpp"
#include "smha/opensm/supervisor.hpp"
#include "smha/os/asio_scheduler.hpp"
#include "smha/head/event_log.hpp"
#include "smha/head/head.hpp"
#include "smha/head/recording_transport.hpp"
#include "smha/sm/ha_machine.hpp"

namespace smha::service {

// The kernel shows process `pid` stopped (/proc/<pid>/stat state T or t:
// SIGSTOP or a tracer). False when it cannot be read.
bool process_stopped(int pid);

// Every reload path (SIGHUP, `smctl reload`) runs its work through this: any
// exception (std::bad_alloc from a huge file, or anything else thrown) becomes
// a refused reload ("reload failed, old configuration kept: ..."), recorded as a
// RELOAD_REFUSED note with `via` as evidence; smhad keeps running on the old
// configuration.
control::Reply guard_reload(const char* via, head::LogEventSink& sink, const std::function<control::Reply()>& body);

}  // namespace smha::service
