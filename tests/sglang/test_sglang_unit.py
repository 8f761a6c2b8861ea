"""SGLang's own CPU unit tests of the disaggregation layer, with kvferry loaded.

They live in SGLang's repository (test/registered/unit/disaggregation), not in
its wheel, and PyPI has no sdist of sglang 0.5.23, so nothing here downloads
them: point SGLANG_UNIT_TESTS_DIR at that folder of a checkout of the tag that
matches the installed sglang. Each file runs in its own interpreter, after
sglang.srt.plugins.load_plugins() has loaded kvferry's plugin (the
TransferBackend Enum replaced, get_kv_class wrapped), so they check that the
fake backend, the common sender and the decode queue behave as SGLang expects
with kvferry registered. The ones that run need only a CPU.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("sglang")

# CPU-only tests that drive SGLang's generic transfer code (register_cpu_ci).
UNIT_TESTS = [
    "test_fake_kv_sender.py",
    "test_fake_sender_chunked.py",
    "test_common_sender_lifecycle.py",
    "test_decode_queue_cleanup.py",
    "test_kv_transfer_metrics.py",
]

RUNNER = (
    "import sys, pytest\n"
    "from sglang.srt.plugins import load_plugins\n"
    "load_plugins()\n"
    "from sglang.srt.disaggregation.utils import TransferBackend\n"
    "assert TransferBackend('kvferry').value == 'kvferry', 'kvferry plugin not loaded'\n"
    "sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', sys.argv[1]]))\n"
)


@pytest.mark.parametrize("name", UNIT_TESTS)
def test_sglang_unit(name):
    folder = os.environ.get("SGLANG_UNIT_TESTS_DIR")
    if not folder:
        pytest.skip("SGLang's unit tests are not in its wheel and 0.5.23 has no sdist: "
                    "set SGLANG_UNIT_TESTS_DIR=<sglang checkout>/test/registered/unit/disaggregation")
    path = Path(folder) / name
    if not path.is_file():
        pytest.skip(f"{path} not found")
    env = dict(os.environ, SGLANG_PLUGINS="kvferry")
    r = subprocess.run([sys.executable, "-c", RUNNER, str(path)], env=env, cwd=folder,
                       capture_output=True, text=True, timeout=600)
    tail = (r.stdout + r.stderr)[-4000:]
    print(tail)
    assert r.returncode == 0, f"{name} failed with kvferry loaded:\n{tail}"
