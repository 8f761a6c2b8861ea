#!/usr/bin/env bash
# make sglang-check: kvferry against the real SGLang (issue 14, part 3).
#
# Builds a virtual environment (default build/sglang-venv; SGLANG_VENV=...)
# with Debian's /usr/bin/python3, installs into it from PyPI
#   - sglang==0.5.23 with --no-deps (its full dependency set is GPU kernels,
#     CUDA toolkits and model tooling), plus the packages that importing its
#     disaggregation layer, server_args, plugins and test helpers needs
#     (SGLANG_DEPS below). torch is real: sglang.srt.disaggregation.utils
#     imports torch at module level, and PyPI's only Linux x86_64 torch is the
#     CUDA build, whose libraries (nvidia-*, ~3 GB) it needs to import, also
#     without a GPU. No module is stubbed.
#   - mooncake-transfer-engine-non-cuda, where it installs (SGLang's mooncake
#     backend over tcp, for the head-to-head benchmark); its absence is reported
#   - kvferry, by pip install of apps/python (the repository's CMake build,
#     target kvferry_python_native, in KVFERRY_CMAKE_BUILD_DIR, default build/)
# then runs tests/sglang with the venv's interpreter: plugin loading the way
# SGLang does it, get_kv_class, base classes, signatures, the CLI parser, and
# SGLang's own CPU unit tests of the disaggregation layer where a checkout of
# them is given (SGLANG_UNIT_TESTS_DIR=<sglang>/test/registered/unit/disaggregation:
# they are neither in the wheel nor in an sdist on PyPI).
# A second run reuses the venv's packages (a stamp records what was installed).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY=/usr/bin/python3
VENV="${SGLANG_VENV:-$ROOT/build/sglang-venv}"
export KVFERRY_CMAKE_BUILD_DIR="${KVFERRY_CMAKE_BUILD_DIR:-$ROOT/build}"
SGLANG_VERSION=0.5.23
TORCH_VERSION=2.14.1  # sglang 0.5.23 pins torch==2.14.1

# What `import sglang.srt.disaggregation.{base.conn,utils,fake.conn,common.conn,
# prefill,decode,mooncake.conn}`, sglang.srt.server_args, sglang.srt.plugins,
# sglang.srt.managers.disagg_service and sglang.test.test_utils need, found by
# importing them one missing module at a time; SGLang's own pins where it has one.
SGLANG_DEPS=(
  "torch==${TORCH_VERSION}" torchvision "transformers==5.19.0" "compressed-tensors==0.18.0"
  "sentencepiece==0.2.1" "apache-tvm-ffi==0.1.11" "openai==2.8.0" gguf einops
  numpy packaging pillow psutil orjson pybase64 msgspec tqdm dill xxhash
  requests aiohttp "pyzmq>=25.1.2" pydantic starlette ipython partial_json_parser
  "prometheus-client>=0.20.0" datasets python-dateutil
)
TOOLS=(pytest wheel "setuptools>=77")

if [ ! -x "$PY" ]; then
  echo "sglang-check: $PY not found (Debian's python3; deploy/install-deps.sh)" >&2
  exit 1
fi
if [ ! -x "$VENV/bin/python" ]; then
  if ! "$PY" -c 'import ensurepip' 2>/dev/null; then
    echo "sglang-check: $PY has no venv support (apt-get install python3-venv)" >&2
    exit 1
  fi
  echo "sglang-check: creating $VENV with $PY"
  "$PY" -m venv "$VENV"
fi
VPY="$VENV/bin/python"
PIP=("$VPY" -m pip --disable-pip-version-check)

STAMP="$VENV/.kvferry-sglang-deps"
WANT="sglang==$SGLANG_VERSION ${SGLANG_DEPS[*]} ${TOOLS[*]}"
if [ "$(cat "$STAMP" 2>/dev/null)" != "$WANT" ]; then
  echo "sglang-check: installing SGLang's import dependencies (torch with its CUDA libraries: a few GB)"
  "${PIP[@]}" install "${TOOLS[@]}" "${SGLANG_DEPS[@]}"
  echo "sglang-check: installing sglang==$SGLANG_VERSION --no-deps"
  "${PIP[@]}" install --no-deps "sglang==$SGLANG_VERSION"
  echo "$WANT" > "$STAMP"
else
  echo "sglang-check: $VENV already has sglang==$SGLANG_VERSION and its import dependencies"
fi

MOONCAKE=absent
if "$VPY" -c 'import mooncake.engine' 2>/dev/null \
   || "${PIP[@]}" install mooncake-transfer-engine-non-cuda; then
  if "$VPY" -c 'import mooncake.engine' 2>/dev/null; then MOONCAKE=present; fi
fi

echo "sglang-check: installing kvferry (apps/python; CMake build in $KVFERRY_CMAKE_BUILD_DIR)"
"${PIP[@]}" install --no-build-isolation --no-deps --force-reinstall "$ROOT/apps/python"

echo "sglang-check: imports"
"$VPY" - "$MOONCAKE" <<'PY'
import sys, warnings
warnings.simplefilter("ignore")
import torch, sglang
print(f"  sglang {sglang.__version__}, torch {torch.__version__} (cuda available: {torch.cuda.is_available()})")
import kvferry, kvferry.sglang
print(f"  kvferry from {kvferry.__file__}")
if sys.argv[1] == "present":
    import mooncake.engine
    from sglang.srt.disaggregation.mooncake.conn import MooncakeKVManager, MooncakeKVSender, MooncakeKVReceiver
    print("  mooncake-transfer-engine-non-cuda: mooncake.engine and SGLang's Mooncake classes import")
else:
    print("  mooncake-transfer-engine-non-cuda: not installed (SGLang's mooncake backend unavailable)")
PY

echo "sglang-check: tests/sglang"
exec "$VPY" -m pytest -v -p no:cacheprovider -rs "$ROOT/tests/sglang" "$@"
