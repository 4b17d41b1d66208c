// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// The peer channel's part of a head's plan: config::Config -> the
// peer::ContinuityConfig smhad starts the channel with (doc/continuity.md).
// It sits beside head::make_plan rather than in it because lib/head does not
// depend on lib/peer (the channel is smhad's, on its own thread; the
// simulation has none), and peer::ContinuityConfig is made of the channel's,
// the copy store's and the sender's own configurations: a plain copy of it
// lower down would be a second definition to keep in step. Pure: built once,
// tested once (tests/unit/service).
#pragma once

#include "smha/config/config.hpp"
#include "smha/core/types.hpp"
#include "smha/peer/continuity.hpp"

namespace smha::service {

// What the channel takes from `config` (its `continuity` section, the peers'
// names, GUIDs and addresses, OpenSM's dump, cache and SA files) for this head
// at `own_guid`. Meaningful only with config.continuity.enabled.
peer::ContinuityConfig continuity_config(const config::Config& config, Guid own_guid);

}  // namespace smha::service
