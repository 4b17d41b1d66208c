// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// lib/service: the pieces smhad wires together (doc/architecture.md, "Daemon
// wiring"). Everything runs on one io_context thread; nothing here locks.
//   RecordingTransport       recording_transport.hpp: MadTransport decorator that
//                            remembers the last answer per SM (for status) and
//                            refuses Sets during a hold
//   LogEventSink             event_log.hpp: agent::EventSink: SM_TRANSITION/
//                            SM_EVENT/SM_ALARM log lines, recent events and
//                            active alarms for status/events
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
#include "smha/service/event_log.hpp"
#include "smha/service/recording_transport.hpp"
#include "smha/sm/ha_machine.hpp"

namespace smha::service {

// The kernel shows process `pid` stopped (/proc/<pid>/stat state T or t:
// SIGSTOP or a tracer). False when it cannot be read.
bool process_stopped(int pid);

// OpensmControl for --observe: never touches OpenSM. Every call succeeds and
// does nothing; state() is always Running (the engine then only observes).
class ObserveOnlyOpensmControl final : public agent::OpensmControl {
 public:
  Status start(std::uint8_t) override { return Status::Ok(); }
  Status stop(bool) override { return Status::Ok(); }
  Status restart(std::uint8_t, bool) override { return Status::Ok(); }
  Status set_priority(std::uint8_t) override { return Status::Ok(); }
  sm::ProcessState state() const override { return sm::ProcessState::Running; }
  void set_exit_handler(ExitHandler) override {}
};

// Every reload path (SIGHUP, `smctl reload`) runs its work through this: any
// exception (std::bad_alloc from a huge file, or anything else thrown) becomes
// a refused reload ("reload failed, old configuration kept: ..."), recorded as a
// RELOAD_REFUSED note with `via` as evidence; smhad keeps running on the old
// configuration.
control::Reply guard_reload(const char* via, LogEventSink& sink, const std::function<control::Reply()>& body);

}  // namespace smha::service
