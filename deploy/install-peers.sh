#!/usr/bin/env bash
# Installs the peer transfer libraries that apps/bench/peer_transfer.py measures
# kvferry against, from PyPI, into a virtual environment (default
# build/peers-venv; PEERS_VENV=...) made with Debian's /usr/bin/python3:
#   - mooncake-transfer-engine-non-cuda: Mooncake's Transfer Engine without
#     CUDA (its tcp transport), with its few pure-Python dependencies
#   - nixl with nixl-cu13, its UCX-based wheel, and numpy, both --no-deps: the
#     wheels declare torch (and so the CUDA libraries, a few GB), which they
#     need only for torch tensors; host memory works without, GPU or not
# Idempotent: a stamp in the venv records what was installed, and a second run
# touches neither apt nor pip. python3-venv comes from apt (as root, or with
# sudo) only when the venv cannot be made without it.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY=/usr/bin/python3
VENV="${PEERS_VENV:-build/peers-venv}"
MOONCAKE=(mooncake-transfer-engine-non-cuda==0.3.13.post1)
NIXL=(nixl==1.5.1 nixl-cu13==1.5.1 numpy)

if [ ! -x "$PY" ]; then
  echo "install-peers: $PY not found (Debian's python3; deploy/install-deps.sh)" >&2
  exit 1
fi

if [ ! -x "$VENV/bin/python" ]; then
  echo "install-peers: creating $VENV with $PY"
  if ! "$PY" -m venv "$VENV"; then
    rm -rf "$VENV"
    sudo=""
    if [ "$(id -u)" -ne 0 ]; then
      if command -v sudo >/dev/null 2>&1; then
        sudo="sudo"
      else
        echo "install-peers: $PY cannot make a venv; run as root to apt-get install python3-venv" >&2
        exit 1
      fi
    fi
    echo "install-peers: installing python3-venv"
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -q
    $sudo apt-get install -y -q --no-install-recommends python3-venv
    "$PY" -m venv "$VENV"
  fi
fi
VPY="$VENV/bin/python"
PIP=("$VPY" -m pip --disable-pip-version-check)

STAMP="$VENV/.kvferry-peers"
WANT="${MOONCAKE[*]} ${NIXL[*]}"
if [ "$(cat "$STAMP" 2>/dev/null)" != "$WANT" ]; then
  echo "install-peers: installing ${MOONCAKE[*]}"
  "${PIP[@]}" install "${MOONCAKE[@]}"
  echo "install-peers: installing ${NIXL[*]} (--no-deps: no torch)"
  "${PIP[@]}" install --no-deps "${NIXL[@]}"
  echo "$WANT" > "$STAMP"
else
  echo "install-peers: $VENV already has ${WANT}"
fi

"$VPY" - <<'PY'
import importlib
import importlib.metadata as md

for dist, module in (("mooncake-transfer-engine-non-cuda", "mooncake.engine"),
                     ("nixl", "nixl"), ("nixl-cu13", "nixl_cu13")):
    importlib.import_module(module)
    print(f"install-peers: {dist} {md.version(dist)} ({module} imports)")
PY
echo "install-peers: run $VENV/bin/python apps/bench/peer_transfer.py --engine=mooncake|nixl"
