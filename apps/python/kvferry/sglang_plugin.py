"""kvferry as an SGLang transfer backend: the ``sglang.srt.plugins`` entry point.

Installed with the package (``pip install apps/python``) as the entry point
``kvferry = kvferry.sglang_plugin:register`` in the group ``sglang.srt.plugins``.
SGLang calls ``load_plugins()`` early in every process (the launcher before it
parses the command line, the scheduler, the data-parallel controller, the
detokenizer, ``Engine``), which calls ``register()`` and then applies the hooks
registered here. After it, ``--disaggregation-transfer-backend kvferry`` selects
kvferry:

* the CLI choices get ``kvferry`` (``add_disagg_transfer_backend_choices``; the
  parser holds that list, so it also takes effect on a parser already built);
* ``sglang.srt.disaggregation.utils.TransferBackend`` is replaced (HookRegistry,
  ``HookType.REPLACE``) by an Enum with the same members plus ``KVFERRY =
  "kvferry"``, so that every ``TransferBackend(server_args...)`` accepts the
  name; HookRegistry also rebinds the modules that imported the old Enum;
* ``sglang.srt.disaggregation.utils.get_kv_class`` is wrapped
  (``HookType.AROUND``): for kvferry it hands back ``kvferry.sglang``'s
  KVArgs, KVManager, KVSender, KVReceiver and KVBootstrapServer, and passes
  every other backend to SGLang's own function;
* ``CommonKVReceiver.query_prefill_dp_ranks`` is wrapped (``HookType.AROUND``):
  SGLang's decode queue calls it, by that class's name whatever the backend,
  for the prefill DP group of rooms the router gave no rank when the prefill
  instance does not follow bootstrap_room. For a bootstrap a kvferry decode
  manager resolved it asks kvferry's bootstrap; every other address goes to
  SGLang's own HTTP query.

``SGLANG_PLUGINS=kvferry`` (SGLang's filter) loads this plugin alone. Nothing
here imports SGLang at module level: ``import kvferry`` works without it.
"""

from __future__ import annotations

import logging

logger = logging.getLogger(__name__)

BACKEND = "kvferry"
_MEMBER = "KVFERRY"
_UTILS = "sglang.srt.disaggregation.utils"
_CONN = "sglang.srt.disaggregation.common.conn"

_registered = False


def _extended_transfer_backend(original):
    """SGLang's TransferBackend Enum with the same members, plus KVFERRY."""
    from enum import Enum

    if BACKEND in original._value2member_map_:
        return original
    members = {m.name: m.value for m in original}
    members[_MEMBER] = BACKEND
    extended = Enum(
        original.__name__,
        members,
        module=original.__module__,
        qualname=original.__qualname__,
    )
    extended.__doc__ = original.__doc__
    return extended


def _class_type_name(class_type) -> str:
    return str(getattr(class_type, "value", class_type)).lower()


def is_kvferry_backend(transfer_backend) -> bool:
    return getattr(transfer_backend, "value", transfer_backend) == BACKEND


def kvferry_class(class_type):
    """kvferry.sglang's class for one KVClassType (None where it has none)."""
    from kvferry import sglang as backend

    names = {
        "kvargs": "KVArgs",
        "manager": "KVManager",
        "sender": "KVSender",
        "receiver": "KVReceiver",
        "bootstrap_server": "KVBootstrapServer",
    }
    name = names.get(_class_type_name(class_type))
    if name is None:
        raise ValueError(f"kvferry: unknown KVClassType {class_type!r}")
    return getattr(backend, name, None)


def _get_kv_class(original_fn, transfer_backend, class_type, *args, **kwargs):
    """AROUND hook of SGLang's get_kv_class: kvferry's classes for kvferry."""
    if is_kvferry_backend(transfer_backend):
        cls = kvferry_class(class_type)
        if cls is None and _class_type_name(class_type) == "kvargs":
            return original_fn(transfer_backend, class_type, *args, **kwargs)
        return cls
    return original_fn(transfer_backend, class_type, *args, **kwargs)


def _query_prefill_dp_ranks(original_fn, bootstrap_addr, bootstrap_rooms, *args, **kwargs):
    """AROUND hook of CommonKVReceiver.query_prefill_dp_ranks: kvferry's bootstraps."""
    from kvferry import sglang as backend

    if backend.is_kvferry_bootstrap(bootstrap_addr):
        return backend.query_prefill_dp_ranks(bootstrap_addr, bootstrap_rooms)
    return original_fn(bootstrap_addr, bootstrap_rooms, *args, **kwargs)


def _add_cli_choice() -> None:
    try:
        from sglang.srt.arg_groups.choices import (
            DISAGG_TRANSFER_BACKEND_CHOICES,
            add_disagg_transfer_backend_choices,
        )
    except ImportError:  # older layouts re-export them from server_args
        from sglang.srt.server_args import (
            DISAGG_TRANSFER_BACKEND_CHOICES,
            add_disagg_transfer_backend_choices,
        )
    if BACKEND not in DISAGG_TRANSFER_BACKEND_CHOICES:
        add_disagg_transfer_backend_choices([BACKEND])


def register() -> None:
    """Entry point of the ``sglang.srt.plugins`` group (SGLang's load_plugins)."""
    global _registered
    if _registered:
        return
    import importlib

    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    _add_cli_choice()
    utils = importlib.import_module(_UTILS)
    extended = _extended_transfer_backend(utils.TransferBackend)
    if extended is not utils.TransferBackend:
        HookRegistry.register(f"{_UTILS}.TransferBackend", extended, HookType.REPLACE)
    HookRegistry.register(f"{_UTILS}.get_kv_class", _get_kv_class, HookType.AROUND)
    HookRegistry.register(f"{_CONN}.CommonKVReceiver.query_prefill_dp_ranks",
                          _query_prefill_dp_ranks, HookType.AROUND)
    _registered = True
    logger.info("kvferry: registered transfer backend %r with SGLang", BACKEND)
