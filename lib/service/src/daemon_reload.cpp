// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// Reloading the configuration (SIGHUP and `smctl reload`): load and check the
// file, refuse keys that need a restart (config::key_table), make the plan
// (opensm.conf rendered once) and let the head apply it (head::Head::reload);
// the old configuration stays on any error.

#include <algorithm>

#include "daemon_impl.hpp"
#include "smha/config/keys.hpp"
#include "smha/service/reload.hpp"

namespace smha::service {

std::vector<std::string> restart_keys(const config::Config& cur, const config::Config& next) {
  std::vector<std::string> keys;
  for (const auto& c : config::changed_keys(cur, next))
    if (c.effect == config::ReloadEffect::SmhadRestart) keys.push_back(c.key);
  return keys;
}

namespace method = control::method;
namespace param = control::param;
using control::ResultCode;

Reply Daemon::reload_guarded(const char* via) {
  return guard_reload(via, head_->log(), [this] { return do_reload(); });
}

Reply Daemon::do_reload() {
  auto loaded = config::load_config(head_->config().source_path, config::LoadOptions{options_.fabric});
  if (!loaded) {
    // The count and the first errors: a file with 100 000 errors must not make
    // a reply larger than a client accepts (smhad --check-config lists all).
    constexpr std::size_t kShown = 20;
    const auto& all = loaded.errors();
    json errs = json::array();
    std::string shown;
    for (std::size_t i = 0; i < all.size() && i < kShown; ++i) {
      errs.push_back(all[i].to_string());
      shown += all[i].to_string() + "\n";
    }
    if (all.size() > kShown)
      shown += "... and " + std::to_string(all.size() - kShown) + " more (smhad --check-config lists them all)\n";
    head_->log().note("RELOAD_REFUSED", std::to_string(all.size()) + " error(s)", shown);
    return Reply::failure(ResultCode::Error, "invalid configuration, old one kept:\n" + shown,
                          json{{"errors", errs}, {"error_count", all.size()}});
  }
  config::Config next = std::move(loaded).value();
  const config::Config& cur = head_->config();
  if (auto st = HookDispatcher::check(next); !st.ok()) {
    head_->log().note("RELOAD_REFUSED", "1 error(s)", st.error().message);
    return Reply::failure(ResultCode::Error, "invalid configuration, old one kept:\n" + st.error().message);
  }
  // What changed, from the key table (config::key_table): a key that needs a
  // smhad restart refuses the whole reload, naming it.
  const std::vector<config::KeyChange> changes = config::changed_keys(cur, next);
  std::vector<std::string> needs_restart;
  for (const auto& c : changes)
    if (c.effect == config::ReloadEffect::SmhadRestart) needs_restart.push_back(c.key);
  if (!needs_restart.empty()) {
    std::string keys;
    for (const auto& k : needs_restart) keys += (keys.empty() ? "" : ", ") + k;
    return Reply::failure(ResultCode::Conflict,
                          "these keys take effect only when smhad restarts: " + keys +
                              "; nothing changed: restart smhad to apply them",
                          json{{"restart_keys", needs_restart}});
  }
  auto mapped = head::map_config(next, head_->own_guid());
  if (!mapped) return Reply::failure(ResultCode::Error, mapped.error().message);
  // The plan renders opensm.conf, once; the head applies that rendering.
  auto planned = head::make_plan(
      next, std::move(mapped).value(),
      head::PlanInputs{head_->own_guid(), options_.observe, head_->caps(), adapters_.prepare_opensm_conf}, fs_);
  if (!planned)
    return Reply::failure(ResultCode::Error, "reload refused, old configuration kept: " + planned.error().message);
  auto applied = head_->reload(std::move(next), std::move(planned).value(), changes);
  if (!applied) return Reply::failure(ResultCode::Error, applied.error().message);
  hooks_->configure(head_->config());
  const auto snap = head_->snapshot();
  hooks_->reload(snap.state, snap.priority, applied.value().text);
  return Reply::ok(applied.value().data, applied.value().text);
}

}  // namespace smha::service
