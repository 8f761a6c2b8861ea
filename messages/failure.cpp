#include "messages/failure.hpp"

#include <caf/make_message.hpp>
#include <caf/message.hpp>

namespace kvferry {

failure_scope scope_of(errc code) {
  auto v = static_cast<uint8_t>(code);
  if (v == 0)
    return failure_scope::none;
  if (v < 64)
    return failure_scope::room;
  if (v < 128)
    return failure_scope::peer;
  return failure_scope::instance;
}

std::string to_string(errc code) {
  switch (code) {
    case errc::none:
      return "none";
    case errc::layout_mismatch:
      return "layout_mismatch";
    case errc::invalid_pages:
      return "invalid_pages";
    case errc::invalid_chunk:
      return "invalid_chunk";
    case errc::unknown_room:
      return "unknown_room";
    case errc::duplicate_room:
      return "duplicate_room";
    case errc::deadline:
      return "deadline";
    case errc::aborted:
      return "aborted";
    case errc::aux_mismatch:
      return "aux_mismatch";
    case errc::transfer_failed:
      return "transfer_failed";
    case errc::out_of_bounds:
      return "out_of_bounds";
    case errc::unsupported:
      return "unsupported";
    case errc::internal:
      return "internal";
    case errc::invalid_argument:
      return "invalid_argument";
    case errc::staging_oversized:
      return "staging_oversized";
    case errc::overloaded:
      return "overloaded";
    case errc::checksum_mismatch:
      return "checksum_mismatch";
    case errc::peer_down:
      return "peer_down";
    case errc::heartbeat_lost:
      return "heartbeat_lost";
    case errc::connect_failed:
      return "connect_failed";
    case errc::bootstrap_unreachable:
      return "bootstrap_unreachable";
    case errc::link_lost:
      return "link_lost";
    case errc::instance_restarted:
      return "instance_restarted";
    case errc::shut_down:
      return "shut_down";
    case errc::instance_dead:
      return "instance_dead";
    case errc::instance_incomplete:
      return "instance_incomplete";
  }
  return "errc(" + std::to_string(static_cast<int>(code)) + ")";
}

std::string to_string(failure_scope scope) {
  switch (scope) {
    case failure_scope::none:
      return "none";
    case failure_scope::room:
      return "room";
    case failure_scope::peer:
      return "peer";
    case failure_scope::instance:
      return "instance";
  }
  return "scope?";
}

std::string to_string(const failure& x) {
  if (!x)
    return "no failure";
  if (x.origin.instance.empty())
    return to_string(x.code) + ": " + x.cause;
  return to_string(x.code) + ": " + x.cause + " (from " + to_string(x.origin) + ")";
}

std::string transfer_error::what() const {
  return "KVTransferError(" + to_string(room) + "): " + to_string(why);
}

caf::error make_error(errc code, std::string cause) {
  return caf::error{static_cast<uint8_t>(code), error_category,
                    caf::make_message(std::move(cause))};
}

caf::error to_error(const failure& x) {
  return caf::error{static_cast<uint8_t>(x.code), error_category,
                    caf::make_message(x.cause, x.origin)};
}

failure to_failure(const caf::error& err, const rank_ref& fallback_origin) {
  failure out;
  out.origin = fallback_origin;
  if (err.category() != error_category) {
    out.code = errc::internal;
    out.cause = caf::to_string(err);
    return out;
  }
  out.code = static_cast<errc>(err.code());
  const auto& ctx = err.context();
  if (ctx.match_element<std::string>(0))
    out.cause = ctx.get_as<std::string>(0);
  if (ctx.size() > 1 && ctx.match_element<rank_ref>(1))
    out.origin = ctx.get_as<rank_ref>(1);
  return out;
}

std::string render_error(uint8_t code, caf::atom_value, const caf::message& context) {
  auto s = "kvferry." + to_string(static_cast<errc>(code));
  if (context.match_element<std::string>(0))
    s += ": " + context.get_as<std::string>(0);
  if (context.size() > 1 && context.match_element<rank_ref>(1))
    s += " (from " + to_string(context.get_as<rank_ref>(1)) + ")";
  return s;
}

}  // namespace kvferry
