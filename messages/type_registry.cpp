#include "messages/type_registry.hpp"

#include <caf/actor_system_config.hpp>

#include "messages/type_ids.hpp"

namespace kvferry {

void register_types(caf::actor_system_config& cfg) {
  cfg.add_message_types<caf::id_block::kvferry>();
  cfg.add_message_types<caf::id_block::kvferry_status>();
  cfg.add_message_types<caf::id_block::kvferry_gateway>();
  cfg.add_error_category(error_category, render_error);
}

}  // namespace kvferry
