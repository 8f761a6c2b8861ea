#include "transport/base/region_table.hpp"

#include <string>

namespace kvferry::transport {

result<region_id> region_table::add(void* base, uint64_t length, memory_kind kind) {
  if (base == nullptr || length == 0)
    return status::invalid_argument("region of " + std::to_string(length) + " B at " +
                                    (base ? "a valid address" : "null") +
                                    ", expected a non-null base and a length above 0");
  auto addr = reinterpret_cast<uintptr_t>(base);
  if (addr + length < addr)
    return status::invalid_argument("region of " + std::to_string(length) +
                                    " B wraps around the address space");
  std::unique_lock guard{mu_};
  auto id = next_++;
  regions_.emplace(id, entry{static_cast<std::byte*>(base), length, kind});
  if (kind == memory_kind::device)
    device_seen_ = true;
  return id;
}

status region_table::remove(region_id id) {
  std::unique_lock guard{mu_};
  if (regions_.erase(id) == 0)
    return status::unknown_region("region " + std::to_string(id) + " is not registered");
  return {};
}

result<std::byte*> region_table::resolve(const read_guard&, region_id id, uint64_t offset,
                                         uint64_t length, const char* what) const {
  auto i = regions_.find(id);
  if (i == regions_.end())
    return status::unknown_region(std::string{what} + " region " + std::to_string(id) +
                                  " is not registered");
  auto& e = i->second;
  // Written so that no sum can overflow: offset <= len and length <= len - offset.
  if (offset > e.length || length > e.length - offset)
    return status::out_of_bounds("write of " + std::to_string(length) + " B at offset " +
                                 std::to_string(offset) + " past " + what + " region " +
                                 std::to_string(id) + " (" + std::to_string(e.length) + " B)");
  return e.base + offset;
}

uint64_t region_table::length_of(region_id id) const {
  std::shared_lock guard{mu_};
  auto i = regions_.find(id);
  return i == regions_.end() ? 0 : i->second.length;
}

uint64_t region_table::length_of(const read_guard&, region_id id) const {
  auto i = regions_.find(id);
  return i == regions_.end() ? 0 : i->second.length;
}

memory_kind region_table::kind_of(const read_guard&, region_id id) const {
  auto i = regions_.find(id);
  return i == regions_.end() ? memory_kind::host : i->second.kind;
}

}  // namespace kvferry::transport
