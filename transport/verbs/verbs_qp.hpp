// One RC queue pair of the verbs backend: creation on a device and a
// completion queue, and the INIT → RTR → RTS steps with the peer's address.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <memory>

#include "transport/status.hpp"
#include "transport/verbs/verbs_device.hpp"

namespace kvferry::transport::verbs {

/// What a peer needs to connect its queue pair to ours (sent as bytes).
struct qp_info {
  uint32_t qpn = 0;
  uint32_t psn = 0;
  uint16_t lid = 0;
  uint8_t use_gid = 0;  ///< 1: address by gid (RoCE, or IB across subnets)
  uint8_t mtu = 0;      ///< ibv_mtu of the port
  uint32_t reserved = 0;
  uint8_t gid[16] = {};
};
static_assert(sizeof(qp_info) == 32);

/// Destroys the queue pair on destruction.
struct qp_deleter {
  void operator()(ibv_qp* qp) const {
    if (qp != nullptr)
      ::ibv_destroy_qp(qp);
  }
};
using qp_ptr = std::unique_ptr<ibv_qp, qp_deleter>;

/// Creates an RC queue pair sending on `cq` (also its receive CQ; nothing is
/// received) with room for `depth` send work requests of `max_sge` entries,
/// and moves it to INIT with remote write access.
result<qp_ptr> make_rc_qp(const device& dev, ibv_cq* cq, uint32_t depth, uint32_t max_sge);

/// Our side of `qp` for the peer, with a fresh random start PSN.
qp_info local_info(const device& dev, const ibv_qp& qp);

/// Moves `qp` to RTR then RTS, connected to `remote`.
status connect_qp(const device& dev, ibv_qp& qp, const qp_info& local, const qp_info& remote);

/// Moves `qp` to the error state: its outstanding work requests flush and
/// nothing more is written through it.
void break_qp(ibv_qp& qp);

}  // namespace kvferry::transport::verbs
