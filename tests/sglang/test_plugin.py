"""kvferry's plugin loaded the way SGLang loads plugins, and what it changes.

(a) sglang.srt.plugins.load_plugins() finds the entry point `kvferry` of the
    installed package and applies its hooks;
(b) get_kv_class(TransferBackend("kvferry"), ...) hands back kvferry's classes,
    subclasses of SGLang's base classes with no abstract method left, whose
    signatures take what SGLang's prefill and decode pass them;
(c) the server's CLI parser takes --disaggregation-transfer-backend kvferry
    (and does not without the plugin);
and the other backends still resolve to SGLang's own classes.
"""

import argparse
import inspect
import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("sglang")


@pytest.fixture(scope="module")
def sgl():
    from sglang.srt.plugins import load_plugins

    load_plugins()
    from sglang.srt.disaggregation import utils
    from sglang.srt.disaggregation.base import conn as base

    return utils, base


CLASSES = {
    "MANAGER": ("KVManager", "BaseKVManager"),
    "SENDER": ("KVSender", "BaseKVSender"),
    "RECEIVER": ("KVReceiver", "BaseKVReceiver"),
    "BOOTSTRAP_SERVER": ("KVBootstrapServer", "BaseKVBootstrapServer"),
}


def test_entry_point_is_installed():
    from importlib.metadata import entry_points

    eps = [ep for ep in entry_points(group="sglang.srt.plugins") if ep.name == "kvferry"]
    assert len(eps) == 1, "kvferry's sglang.srt.plugins entry point is not installed"
    assert eps[0].value == "kvferry.sglang_plugin:register"


def test_load_plugins_registers_kvferry(sgl):
    utils, _ = sgl
    from sglang.srt.plugins.hook_registry import HookRegistry

    assert "sglang.srt.disaggregation.utils.get_kv_class" in HookRegistry._patched
    assert utils.TransferBackend("kvferry").value == "kvferry"
    # Built-in names still parse, to members of the same (replaced) Enum.
    for name in ("mooncake", "nixl", "fake"):
        assert utils.TransferBackend(name) is getattr(utils.TransferBackend, name.upper())


def test_modules_that_imported_the_enum_see_the_new_one(sgl):
    utils, _ = sgl
    import sglang.srt.disaggregation.decode as decode
    import sglang.srt.disaggregation.prefill as prefill
    import sglang.srt.managers.disagg_service as disagg_service

    for mod in (prefill, decode, disagg_service):
        assert mod.TransferBackend is utils.TransferBackend, mod.__name__
        assert mod.get_kv_class is utils.get_kv_class, mod.__name__
    assert disagg_service.TransferBackend("kvferry") is utils.TransferBackend.KVFERRY


@pytest.mark.parametrize("kind", sorted(CLASSES))
def test_get_kv_class_returns_kvferry_classes(sgl, kind):
    utils, base = sgl
    import kvferry.sglang as kvs

    ours, theirs = CLASSES[kind]
    cls = utils.get_kv_class(utils.TransferBackend("kvferry"), utils.KVClassType[kind])
    assert cls is getattr(kvs, ours)
    assert issubclass(cls, getattr(base, theirs))
    assert not inspect.isabstract(cls), f"{cls.__name__} leaves abstract: {sorted(cls.__abstractmethods__)}"


def test_kvargs_is_sglangs_container(sgl):
    utils, base = sgl
    import kvferry.sglang as kvs

    cls = utils.get_kv_class(utils.TransferBackend("kvferry"), utils.KVClassType.KVARGS)
    assert cls in (base.KVArgs, kvs.KVArgs)
    assert issubclass(cls, base.KVArgs)
    cls()  # SGLang creates it empty and sets attributes


def test_kvpoll_ints_match(sgl):
    _, base = sgl
    import kvferry
    import kvferry.sglang as kvs

    for name in ("Failed", "Bootstrapping", "WaitingForInput", "Transferring", "Success"):
        assert getattr(kvs.KVPoll, name) == getattr(base.KVPoll, name)
        assert getattr(kvferry.KVPoll, name) == getattr(base.KVPoll, name)


def test_other_backends_unchanged(sgl):
    utils, _ = sgl
    from sglang.srt.disaggregation.fake.conn import FakeKVReceiver, FakeKVSender

    TB, KT = utils.TransferBackend, utils.KVClassType
    assert utils.get_kv_class(TB.FAKE, KT.SENDER) is FakeKVSender
    assert utils.get_kv_class(TB.FAKE, KT.RECEIVER) is FakeKVReceiver
    assert utils.get_kv_class(TB.FAKE, KT.BOOTSTRAP_SERVER) is None


def test_kvferry_brings_its_own_bootstrap_server(sgl):
    # SGLang's rust-server mode keeps the port for a backend whose bootstrap
    # server is not its HTTP registry (CommonKVBootstrapServer).
    from sglang.srt.managers.disagg_service import rust_server_serves_kv_bootstrap

    assert rust_server_serves_kv_bootstrap("kvferry") is False
    assert rust_server_serves_kv_bootstrap("mooncake") is True


def _base_params(base_cls, name):
    fn = base_cls.__dict__.get(name)
    if fn is None:
        return []
    params = list(inspect.signature(fn).parameters.values())[1:]
    return [p for p in params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]


@pytest.mark.parametrize("kind", sorted(CLASSES))
def test_methods_take_the_base_class_parameters(sgl, kind):
    """Every method of SGLang's base class (0.5.23: base/conn.py) is callable on
    kvferry's class with the base's parameter names, by keyword."""
    utils, base = sgl
    import kvferry.sglang as kvs

    ours, theirs = CLASSES[kind]
    cls, base_cls = getattr(kvs, ours), getattr(base, theirs)
    problems = []
    for name, member in vars(base_cls).items():
        if not inspect.isfunction(member):
            continue
        impl = getattr(cls, name)
        sig = inspect.signature(impl)
        params = _base_params(base_cls, name)
        kwargs = {p.name: None for p in params}
        try:
            sig.bind(None, **kwargs)
        except TypeError as e:
            problems.append(f"{ours}.{name}{sig}: does not take {list(kwargs)} ({e})")
    assert not problems, "\n".join(problems)


def test_call_sites_of_sglang_bind():
    """The exact calls SGLang 0.5.23's prefill.py and decode.py make."""
    import kvferry.sglang as kvs

    def binds(fn, *args, **kwargs):
        inspect.signature(fn).bind(*args, **kwargs)

    x = object()
    binds(kvs.KVManager, x, x, x, False)  # (kv_args, mode, server_args, is_mla)
    binds(kvs.KVSender, mgr=x, bootstrap_addr="h:1", bootstrap_room=1,
          req_has_disagg_prefill_dp_rank=False)
    binds(kvs.KVSender.init, x, 4, 0)
    binds(kvs.KVSender.send, x, x, None, num_kv_tokens=64)
    binds(kvs.KVSender.should_send_kv_chunk, x, 0, True)
    binds(kvs.KVSender.pop_decode_prefix_len, x)
    binds(kvs.KVReceiver, mgr=x, bootstrap_addr="h:1", bootstrap_room=1)
    binds(kvs.KVReceiver.init, x, 0)
    binds(kvs.KVReceiver.send_metadata, x, x, 0, None, decode_prefix_len=0)
    binds(kvs.KVBootstrapServer, host="127.0.0.1", port=8998)


PARSER = textwrap.dedent("""
    import argparse, sys
    from sglang.srt.plugins import load_plugins
    load_plugins()
    from sglang.srt.server_args import ServerArgs
    parser = argparse.ArgumentParser(prog="sglang serve")
    ServerArgs.add_cli_args(parser)
    ns = parser.parse_args(["--model-path", "unused", "--disaggregation-mode", "prefill",
                            "--disaggregation-transfer-backend", "kvferry"])
    print("BACKEND=" + ns.disaggregation_transfer_backend)
""")


def _parse(env_extra):
    env = dict(os.environ, **env_extra)
    return subprocess.run([sys.executable, "-c", PARSER], env=env, capture_output=True,
                          text=True, timeout=300)


def test_cli_accepts_kvferry():
    r = _parse({"SGLANG_PLUGINS": "kvferry"})
    assert r.returncode == 0, r.stderr[-3000:]
    assert "BACKEND=kvferry" in r.stdout


def test_cli_refuses_kvferry_without_the_plugin():
    r = _parse({"SGLANG_PLUGINS": "no-such-plugin"})
    assert r.returncode != 0
    assert "invalid choice: 'kvferry'" in r.stderr
