"""SGLang's own Mooncake transfer backend, loadable by kvferry.rank_driver
(--backend mooncake), so that one harness drives kvferry and SGLang-Mooncake
head to head with the same process layout.

It needs SGLang 0.5.23 (installed --no-deps), torch 2.14.1 (its PyPI wheel
imports without a GPU once nvidia-cufile, nvidia-cusparselt-cu13,
nvidia-nvshmem-cu13 and nvidia-nccl-cu13 are there), the few pure-Python
modules that sglang.srt.disaggregation.mooncake.conn imports, and Mooncake's
transfer engine without CUDA (mooncake-transfer-engine-non-cuda). Transport:
Mooncake's "tcp" protocol on loopback, host (numpy) buffers, no IB device.

SGLang reads its configuration from process-wide accessors (get_parallel(),
get_disagg(), get_serving(), envs, ...) that its scheduler publishes at process
start, and its Mooncake manager takes the process-wide transfer engine that the
scheduler creates. make_manager does both for one rank process, from the
driver's ServerArgs-like object, then builds a MooncakeKVManager.
"""

import os
import time

# Before SGLang reads its environment: Mooncake's TCP transport on loopback.
os.environ.setdefault("MOONCAKE_PROTOCOL", "tcp")
os.environ.setdefault("MC_FORCE_TCP", "1")  # SGLang: no RDMA device lookup
os.environ.setdefault("SGLANG_HOST_IP", "127.0.0.1")  # get_local_ip_auto()
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # no model is ever fetched

from sglang.srt.disaggregation.base.conn import KVArgs as _SGLangKVArgs  # noqa: E402
from sglang.srt.disaggregation.base.conn import KVPoll, KVTransferMetric  # noqa: E402,F401
from sglang.srt.disaggregation.mooncake.conn import (  # noqa: E402
    MooncakeKVBootstrapServer as KVBootstrapServer,
    MooncakeKVManager as _MooncakeKVManager,
    MooncakeKVReceiver as _MooncakeKVReceiver,
    MooncakeKVSender as KVSender,
)

__all__ = ["KVArgs", "KVPoll", "KVManager", "KVSender", "KVReceiver",
           "KVBootstrapServer", "make_manager"]


class KVArgs(_SGLangKVArgs):
    """SGLang's KVArgs with the values its scheduler sets for a plain MHA pool
    without state, draft, PP split or DP (prefill.py/decode.py _init_kv_manager,
    utils.setup_state_kv_args); the caller sets the buffers on top."""

    def __init__(self):
        self.kv_layout = None
        self.kv_layer_ids = []  # positional pairing, as SGLang's MHA pool
        self.num_draft_entries = 0
        self.system_dp_rank = 0
        self.rust_http_port = None
        self.pp_rank = 0
        self.prefill_start_layer = 0
        self.prefill_end_layer = None
        self.mla_compression_ratios = None
        self.ib_device = None
        self.gpu_id = 0
        self.state_types = []
        self.state_data_ptrs = []
        self.state_data_lens = []
        self.state_item_lens = []
        self.state_dim_per_tensor = []
        self.state_slice_outer_counts = []
        self.state_layer_ids = []
        self.state_conv_shard_groups = []
        self.is_hybrid_mla_backend = False
        self.swa_kv_cache_layout = None


class KVManager(_MooncakeKVManager):
    """MooncakeKVManager, whose teardown() is left out: SGLang calls it only for
    a P<->D role switch, never at process exit, and run while its zmq threads
    sit in recv() it terminates their context under them (ContextTerminated
    tracebacks, and at times a zmq assertion that aborts the process). The
    driver exits with os._exit right after, as a killed scheduler would."""

    def teardown(self):
        pass


class KVReceiver(_MooncakeKVReceiver):
    """MooncakeKVReceiver, with the step SGLang's decode prealloc queue takes
    before init(): fetching the prefill instance's parallel info from its
    bootstrap server (kv_manager.try_ensure_parallel_info), retried once a
    second up to 15 times, then the request fails with SGLang's text (decode.py
    _ensure_prefill_info). The driver calls init() at once, so it is done here,
    blocking; it happens once per prefill instance (the info is cached)."""

    ENSURE_RETRIES, ENSURE_INTERVAL_S = 15, 1.0

    def init(self, prefill_dp_rank=None):
        mgr = self.kv_mgr
        for _ in range(self.ENSURE_RETRIES):
            if mgr.try_ensure_parallel_info(self.bootstrap_addr):
                return super().init(prefill_dp_rank)
            time.sleep(self.ENSURE_INTERVAL_S)
        # SGLang aborts the request with this text (decode.py).
        mgr.record_failure(self.bootstrap_room,
                           f"Could not fetch prefill parallel info from {self.bootstrap_addr} "
                           f"after {self.ENSURE_RETRIES} attempts")
        mgr.update_status(self.bootstrap_room, KVPoll.Failed)
        self.conclude_state = KVPoll.Failed

    def get_transfer_metric(self):
        """Not part of SGLang's receiver (its senders measure); the driver reads
        it on decode, so an empty metric: Mooncake's decode measures nothing."""
        return KVTransferMetric()


def _sglang_server_args(kv_args, mode, sa):
    from sglang.srt.server_args import ServerArgs

    return ServerArgs(
        model_path="dummy",  # SGLang resolves no model config for "dummy"
        device="cpu",
        host=sa.host,
        port=sa.port,
        tp_size=sa.tp_size,
        pp_size=sa.pp_size,
        dp_size=sa.dp_size,
        nnodes=sa.nnodes,
        dist_init_addr=sa.dist_init_addr,
        page_size=kv_args.page_size,
        disaggregation_mode=mode,
        disaggregation_transfer_backend="mooncake",
        disaggregation_bootstrap_port=sa.disaggregation_bootstrap_port,
        disaggregation_ib_device=None,
    )


def make_manager(kv_args, mode, server_args):
    """One rank's MooncakeKVManager, with what SGLang's scheduler process would
    have set up before creating it: the published config (ranks included) and
    the shared Mooncake transfer engine."""
    from sglang.srt.disaggregation.utils import DisaggregationMode
    from sglang.srt.distributed.device_communicators.mooncake_transfer_engine import (
        init_mooncake_transfer_engine,
    )
    from sglang.srt.runtime_context import SpawnRanks, get_parallel, publish

    if mode not in ("prefill", "decode"):
        raise ValueError(f"mode must be 'prefill' or 'decode', not {mode!r}")
    if kv_args.state_types:
        raise ValueError("the Mooncake harness runs without a state component "
                         f"(state_types={kv_args.state_types!r})")
    sglang_args = _sglang_server_args(kv_args, mode, server_args)
    publish(sglang_args, role="scheduler",
            ranks=SpawnRanks(world_rank=kv_args.engine_rank + kv_args.pp_rank * server_args.tp_size,
                             gpu_id=kv_args.gpu_id))
    # No torch.distributed groups are built here; with pp_size 1 the prefill
    # manager only stores the PP group (PPConsensusStore needs it for PP > 1).
    get_parallel().override_permanently(pp_group=None)
    init_mooncake_transfer_engine(hostname=os.environ["SGLANG_HOST_IP"],
                                  gpu_id=kv_args.gpu_id, ib_device=None)
    dmode = DisaggregationMode.PREFILL if mode == "prefill" else DisaggregationMode.DECODE
    return KVManager(kv_args, dmode, sglang_args, False)
