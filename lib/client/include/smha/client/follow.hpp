// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// smctl commands that need more than one call (lib/control's run_cli_call does
// single calls).
#pragma once

#include <csignal>
#include <cstddef>
#include <iosfwd>

#include "smha/client/cli.hpp"

namespace smha::client {

// Seconds each long poll of `smctl events --follow` waits for news.
inline constexpr double kFollowWaitSeconds = 30;

// `smctl events --follow`: prints the newest `n` events, then each new event as
// smhad records it (long polls of `events` with after/wait_s on one connection),
// flushing `out` after each batch. Human lines as render_events_text(), or with
// options.json one JSON object per line (JSON Lines).
// Returns 0 once `*stop` is set (a SIGINT/SIGTERM handler installed without
// SA_RESTART), 6 (kExitNoDaemon) when smhad cannot be reached or goes away
// ("smctl: events: smhad went away: ..." on `err`), 3 when a poll gets no reply
// in time, or the exit code of a refused call (7 unauthorized, 8 unsupported).
int follow_events(const CliOptions& options, std::size_t n, std::ostream& out, std::ostream& err,
                  const volatile std::sig_atomic_t* stop);

}  // namespace smha::client
