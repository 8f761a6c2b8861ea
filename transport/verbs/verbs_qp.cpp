#include "transport/verbs/verbs_qp.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>

namespace kvferry::transport::verbs {

namespace {

status qp_error(const char* step, int rc) {
  return status::io_error(std::string{"verbs: "} + step + ": " + std::strerror(rc) + " (errno " +
                          std::to_string(rc) + ")");
}

}  // namespace

result<qp_ptr> make_rc_qp(const device& dev, ibv_cq* cq, uint32_t depth, uint32_t max_sge) {
  ibv_qp_init_attr init{};
  init.send_cq = cq;
  init.recv_cq = cq;
  init.qp_type = IBV_QPT_RC;
  init.sq_sig_all = 0;  // selective signalling: only the WRs we mark complete
  init.cap.max_send_wr = depth;
  init.cap.max_recv_wr = 1;
  init.cap.max_send_sge = max_sge;
  init.cap.max_recv_sge = 1;
  qp_ptr qp{::ibv_create_qp(dev.pd, &init)};
  if (!qp)
    return qp_error("ibv_create_qp", errno);
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_INIT;
  attr.pkey_index = 0;
  attr.port_num = dev.port;
  attr.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE;
  if (int rc = ::ibv_modify_qp(
          qp.get(), &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
      rc != 0)
    return qp_error("ibv_modify_qp to INIT", rc);
  return qp;
}

qp_info local_info(const device& dev, const ibv_qp& qp) {
  static thread_local std::mt19937 rng{std::random_device{}()};
  qp_info me;
  me.qpn = qp.qp_num;
  me.psn = rng() & 0xFFFFFF;
  me.lid = dev.port_attr.lid;
  me.mtu = static_cast<uint8_t>(dev.port_attr.active_mtu);
  me.use_gid = dev.gid_index >= 0 ? 1 : 0;
  std::memcpy(me.gid, dev.gid.raw, sizeof(me.gid));
  return me;
}

status connect_qp(const device& dev, ibv_qp& qp, const qp_info& local, const qp_info& remote) {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RTR;
  attr.path_mtu = static_cast<ibv_mtu>(std::min(local.mtu, remote.mtu));
  attr.dest_qp_num = remote.qpn;
  attr.rq_psn = remote.psn;
  attr.max_dest_rd_atomic = 1;
  attr.min_rnr_timer = 12;
  attr.ah_attr.dlid = remote.lid;
  attr.ah_attr.port_num = dev.port;
  if (remote.use_gid != 0 && dev.gid_index >= 0) {
    attr.ah_attr.is_global = 1;
    std::memcpy(attr.ah_attr.grh.dgid.raw, remote.gid, sizeof(remote.gid));
    attr.ah_attr.grh.sgid_index = static_cast<uint8_t>(dev.gid_index);
    attr.ah_attr.grh.hop_limit = 64;
  }
  if (int rc =
          ::ibv_modify_qp(&qp, &attr,
                          IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                              IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
      rc != 0)
    return qp_error("ibv_modify_qp to RTR", rc);
  attr = {};
  attr.qp_state = IBV_QPS_RTS;
  attr.timeout = 14;  // 4.096 us * 2^14: about 67 ms per try
  attr.retry_cnt = 7;
  attr.rnr_retry = 7;
  attr.sq_psn = local.psn;
  attr.max_rd_atomic = 1;
  if (int rc = ::ibv_modify_qp(&qp, &attr,
                               IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                   IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
      rc != 0)
    return qp_error("ibv_modify_qp to RTS", rc);
  return {};
}

void break_qp(ibv_qp& qp) {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_ERR;
  ::ibv_modify_qp(&qp, &attr, IBV_QP_STATE);
}

}  // namespace kvferry::transport::verbs
