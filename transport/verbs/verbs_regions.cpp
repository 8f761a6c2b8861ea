#include "transport/verbs/verbs_regions.hpp"

#include <cerrno>
#include <cstring>
#include <string>

namespace kvferry::transport::verbs {

verbs_regions::~verbs_regions() {
  for (auto& [id, mr] : mrs_)
    ::ibv_dereg_mr(mr);
}

result<region_id> verbs_regions::add(void* base, uint64_t length, memory_kind kind) {
  auto id = table_.add(base, length, kind);
  if (!id.ok())
    return id;
  int access =
      IBV_ACCESS_LOCAL_WRITE | (windows_ ? int{IBV_ACCESS_MW_BIND} : int{IBV_ACCESS_REMOTE_WRITE});
  ibv_mr* mr = ::ibv_reg_mr(dev_->pd, base, length, access);
  if (mr == nullptr) {
    int err = errno;
    table_.remove(*id).ignore();
    return status::io_error(
        "verbs: ibv_reg_mr of " + std::to_string(length) + " B of " + std::string{to_string(kind)} +
        " memory on " + dev_->name + ": " + std::strerror(err) + " (errno " + std::to_string(err) +
        ")" +
        (kind == memory_kind::device && !dev_->device_memory
             ? "; GPU memory needs a peer-memory client (nvidia_peermem), which is not loaded"
             : ""));
  }
  std::lock_guard guard{mu_};
  mrs_.emplace(*id, mr);
  return id;
}

status verbs_regions::remove(region_id id) {
  ibv_mr* mr = nullptr;
  {
    std::unique_lock guard{mu_};
    unpinned_.wait(guard, [&] { return pins_.count(id) == 0; });
    auto i = mrs_.find(id);
    if (i == mrs_.end())
      return status::unknown_region("region " + std::to_string(id) + " is not registered");
    mr = i->second;
    mrs_.erase(i);
  }
  // Later batches fail to find it; then the NIC loses access too.
  auto st = table_.remove(id);
  ::ibv_dereg_mr(mr);
  return st;
}

result<mr_span> verbs_regions::find(region_id id, uint64_t offset, uint64_t length,
                                    const char* what) const {
  auto held = table_.guard();
  auto addr = table_.resolve(held, id, offset, length, what);
  if (!addr.ok())
    return addr.error();
  std::lock_guard guard{mu_};
  auto i = mrs_.find(id);
  if (i == mrs_.end())
    return status::unknown_region(std::string{what} + " region " + std::to_string(id) +
                                  " is not registered");
  return mr_span{*addr, i->second->lkey, i->second->rkey, i->second};
}

void verbs_regions::pin(const std::vector<region_id>& ids) {
  std::lock_guard guard{mu_};
  for (auto id : ids)
    ++pins_[id];
}

void verbs_regions::unpin(const std::vector<region_id>& ids) {
  {
    std::lock_guard guard{mu_};
    for (auto id : ids) {
      auto i = pins_.find(id);
      if (i != pins_.end() && --i->second == 0)
        pins_.erase(i);
    }
  }
  unpinned_.notify_all();
}

}  // namespace kvferry::transport::verbs
