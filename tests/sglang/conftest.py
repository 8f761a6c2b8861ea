"""tests/sglang: kvferry against the real SGLang (make sglang-check's venv).

Run with that venv's interpreter (deploy/sglang-check.sh, or ctest -L sglang
once the venv exists). Where SGLang is not importable every test here is
skipped, saying why.
"""

import importlib.util

import pytest


def pytest_collection_modifyitems(config, items):
    if importlib.util.find_spec("sglang") is not None:
        return
    skip = pytest.mark.skip(reason="SGLang is not installed in this interpreter "
                                   "(run make sglang-check)")
    for item in items:
        item.add_marker(skip)
