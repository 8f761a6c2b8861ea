"""kvferry from Python: the KV-cache transfer runtime of disaggregated serving.

The native module (kvferry._native) binds the C++ runtime: a Node per process,
a Rank per TP rank over the caller's buffers, a Sender or Receiver per room.
KVPoll carries SGLang's ints, whose order matters (ranks combine polls with MIN).
"""

from kvferry._native import Node, Rank, Receiver, Sender  # noqa: F401


class KVPoll:
    """Room states, as SGLang numbers them."""

    Failed = 0
    Bootstrapping = 1
    WaitingForInput = 2
    Transferring = 3
    Success = 4


class KVTransferError(Exception):
    """A room failed: its id and the one cause every rank reports."""

    def __init__(self, bootstrap_room, failure_reason, is_from_another_rank=False):
        super().__init__(failure_reason)
        self.bootstrap_room = bootstrap_room
        self.failure_reason = failure_reason
        self.is_from_another_rank = is_from_another_rank

    def __str__(self):
        return f"KVTransferError(bootstrap_room={self.bootstrap_room}): {self.failure_reason}"


__all__ = ["KVPoll", "KVTransferError", "Node", "Rank", "Sender", "Receiver"]
