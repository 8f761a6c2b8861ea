// Registers kvferry's vocabulary with an actor system config.
#pragma once

#include <caf/fwd.hpp>

namespace kvferry {

/// Adds every type of messages/type_ids.hpp and the "kvferry" error category
/// (rendered by render_error) to `cfg`. Call it in the constructor of every
/// node's config, before the actor system is built.
void register_types(caf::actor_system_config& cfg);

}  // namespace kvferry
