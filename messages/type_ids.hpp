// The one type-ID block of kvferry: every message type, enum and handle that
// crosses an actor boundary. Every node calls register_types() on its config,
// so all nodes carry the same list (CAF drops a message of an unregistered
// type as `unexpected_message`, on either side).
#pragma once

#include <caf/type_id.hpp>

#include "messages/bootstrap.hpp"
#include "messages/decision.hpp"
#include "messages/failure.hpp"
#include "messages/gateway.hpp"
#include "messages/handles.hpp"
#include "messages/ids.hpp"
#include "messages/kv_poll.hpp"
#include "messages/layout.hpp"
#include "messages/node_status.hpp"
#include "messages/poll_snapshot.hpp"
#include "messages/room.hpp"
#include "messages/room_trace.hpp"
#include "messages/scheduler.hpp"
#include "messages/staging.hpp"
#include "messages/transfer.hpp"

// clang-format off
CAF_BEGIN_TYPE_ID_BLOCK(kvferry, caf::first_custom_type_id)

  // enums
  CAF_ADD_TYPE_ID(kvferry, (kvferry::kv_poll))
  CAF_ADD_TYPE_ID(kvferry, (kvferry::errc))
  CAF_ADD_TYPE_ID(kvferry, (kvferry::role))
  CAF_ADD_TYPE_ID(kvferry, (kvferry::kv_dtype))
  CAF_ADD_TYPE_ID(kvferry, (kvferry::state_kind))

  // identities, layout, failures
  CAF_ADD_TYPE_ID(kvferry, (kvferry::room_key))
  CAF_ADD_TYPE_ID(kvferry, (kvferry::rank_ref))
  CAF_ADD_TYPE_ID(kvferry, (kvferry::failure))
  CAF_ADD_TYPE_ID(kvferry, (kvferry::buffer_desc))
  CAF_ADD_TYPE_ID(kvferry, (kvferry::state_desc))
  CAF_ADD_TYPE_ID(kvferry, (kvferry::kv_layout))

  // bootstrap
  CAF_ADD_TYPE_ID(kvferry, (kvferry::bootstrap_locator))
  CAF_ADD_TYPE_ID(kvferry, (kvferry::rank_registration))
  CAF_ADD_TYPE_ID(kvferry, (kvferry::registration_ack))
  CAF_ADD_TYPE_ID(kvferry, (kvferry::topology))
  CAF_ADD_TYPE_ID(kvferry, (kvferry::rank_left))

  // room protocol
  CAF_ADD_TYPE_ID(kvferry, (kvferry::dest_registration))
  CAF_ADD_TYPE_ID(kvferry, (kvferry::dest_accepted))
  CAF_ADD_TYPE_ID(kvferry, (kvferry::room_request))
  CAF_ADD_TYPE_ID(kvferry, (kvferry::chunk_landed))
  CAF_ADD_TYPE_ID(kvferry, (kvferry::room_failure))
  CAF_ADD_TYPE_ID(kvferry, (kvferry::room_verdict))

  // decider
  CAF_ADD_TYPE_ID(kvferry, (kvferry::decider_locator))
  CAF_ADD_TYPE_ID(kvferry, (kvferry::member_registration))
  CAF_ADD_TYPE_ID(kvferry, (kvferry::member_ack))
  CAF_ADD_TYPE_ID(kvferry, (kvferry::participant))
  CAF_ADD_TYPE_ID(kvferry, (kvferry::room_join))
  CAF_ADD_TYPE_ID(kvferry, (kvferry::room_keyed))
  CAF_ADD_TYPE_ID(kvferry, (kvferry::room_finished))
  CAF_ADD_TYPE_ID(kvferry, (kvferry::room_leave))

  // scheduler
  CAF_ADD_TYPE_ID(kvferry, (kvferry::sender_init))
  CAF_ADD_TYPE_ID(kvferry, (kvferry::chunk_send))
  CAF_ADD_TYPE_ID(kvferry, (kvferry::receiver_init))
  CAF_ADD_TYPE_ID(kvferry, (kvferry::room_status))
  CAF_ADD_TYPE_ID(kvferry, (kvferry::room_slot_ptr))

  // transfer
  CAF_ADD_TYPE_ID(kvferry, (kvferry::peer_connect))
  CAF_ADD_TYPE_ID(kvferry, (kvferry::chunk_job))
  CAF_ADD_TYPE_ID(kvferry, (kvferry::chunk_result))
  CAF_ADD_TYPE_ID(kvferry, (kvferry::batch_done))

  // staging
  CAF_ADD_TYPE_ID(kvferry, (kvferry::staging_offer))
  CAF_ADD_TYPE_ID(kvferry, (kvferry::staging_ask))
  CAF_ADD_TYPE_ID(kvferry, (kvferry::staging_grant))
  CAF_ADD_TYPE_ID(kvferry, (kvferry::staging_watermark))
  CAF_ADD_TYPE_ID(kvferry, (kvferry::staging_writer))
  CAF_ADD_TYPE_ID(kvferry, (kvferry::staging_room))
  CAF_ADD_TYPE_ID(kvferry, (kvferry::staging_close))
  CAF_ADD_TYPE_ID(kvferry, (kvferry::chunk_scattered))

  // handles
  CAF_ADD_TYPE_ID(kvferry, (kvferry::bootstrap_actor))
  CAF_ADD_TYPE_ID(kvferry, (kvferry::decode_rank_actor))
  CAF_ADD_TYPE_ID(kvferry, (kvferry::prefill_rank_actor))
  CAF_ADD_TYPE_ID(kvferry, (kvferry::transfer_actor))
  CAF_ADD_TYPE_ID(kvferry, (kvferry::decider_actor))
  CAF_ADD_TYPE_ID(kvferry, (kvferry::staging_actor))

  // direct connections (added after the handles: ids above keep their values)
  CAF_ADD_TYPE_ID(kvferry, (kvferry::control_endpoint))
  CAF_ADD_TYPE_ID(kvferry, (kvferry::reach_peers))
  CAF_ADD_TYPE_ID(kvferry, (kvferry::sibling_concluded))

  // DP routing by registered rooms (added last, as above)
  CAF_ADD_TYPE_ID(kvferry, (kvferry::room_dp_query))
  CAF_ADD_TYPE_ID(kvferry, (kvferry::room_dp_groups))

CAF_END_TYPE_ID_BLOCK(kvferry)

// Node status (kvferry-launch's status actor, kvferry-ctl): a block of its
// own right after the main one, so that ids added above shift it along.
CAF_BEGIN_TYPE_ID_BLOCK(kvferry_status, caf::id_block::kvferry::end)

  CAF_ADD_TYPE_ID(kvferry_status, (kvferry::rank_report))
  CAF_ADD_TYPE_ID(kvferry_status, (kvferry::rank_health))
  CAF_ADD_TYPE_ID(kvferry_status, (kvferry::node_status))
  CAF_ADD_TYPE_ID(kvferry_status, (kvferry::status_actor))
  CAF_ADD_TYPE_ID(kvferry_status, (kvferry::rank_exit))
  CAF_ADD_TYPE_ID(kvferry_status, (kvferry::metric_family))
  CAF_ADD_TYPE_ID(kvferry_status, (kvferry::room_event))
  CAF_ADD_TYPE_ID(kvferry_status, (kvferry::room_trace))

CAF_END_TYPE_ID_BLOCK(kvferry_status)

// The gateway of a process under TLS (messages/gateway.hpp).
CAF_BEGIN_TYPE_ID_BLOCK(kvferry_gateway, caf::id_block::kvferry_status::end)

  CAF_ADD_TYPE_ID(kvferry_gateway, (kvferry::published_actor))
  CAF_ADD_TYPE_ID(kvferry_gateway, (kvferry::identity_proof))

CAF_END_TYPE_ID_BLOCK(kvferry_gateway)
// clang-format on
