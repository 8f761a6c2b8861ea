#!/usr/bin/env bash
# deploy/sglang-gpu-check.sh: kvferry as the transfer backend of real SGLang
# servers on a GPU machine (issue 31, step 5), checked against a server that
# is not disaggregated, with the same dummy weights.
#
#   1. a venv with SGLang 0.5.23 and its GPU dependencies (SGLANG_VENV; a first
#      run downloads them from PyPI), and kvferry built into it from
#      apps/python with the CUDA parts (KVFERRY_CMAKE_BUILD_DIR, default
#      build-sglang-gpu/);
#   2. a tiny Llama-shaped model (MODEL_DIR: config.json only; SGLang's
#      --load-format dummy fills the weights from a fixed seed, the same in
#      every server; --skip-tokenizer-init, requests are token ids), so no
#      model hub is reached;
#   3. the baseline: one server, not disaggregated, answers REQUESTS greedy
#      requests (seeded input ids of 8 to 600 tokens, MAX_NEW tokens each);
#   4. a prefill server and a decode server with
#      --disaggregation-transfer-backend kvferry (on GPUs 0 and 1; on one GPU
#      both share it) answer the same requests, sent as SGLang's router sends
#      them (deploy/sglang_pd_client.py);
#   5. the decode server's output ids must equal the baseline's, request by
#      request.
#
# CHECK_ONLY=1 runs every step that needs no GPU (the venv, the build, the
# model, the servers' command lines through SGLang's own argument parser,
# the plugin's selection of kvferry) and stops before the first server.
#
# Outputs go to $OUT (default build-sglang-gpu/out): summary.txt (one line per
# step), the servers' logs, baseline.jsonl and pd.jsonl. Exit status 0 only
# when every step passed. Every wait is bounded; the servers are stopped on
# any exit.
#
#   TP=1 DP=1 REQUESTS=32 MAX_NEW=16 OUT=/tmp/out deploy/sglang-gpu-check.sh
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${KVFERRY_CMAKE_BUILD_DIR:-$ROOT/build-sglang-gpu}
OUT=${OUT:-$BUILD/out}
VENV=${SGLANG_VENV:-$BUILD/sglang-venv}
MODEL_DIR=${MODEL_DIR:-$BUILD/tiny-llama}
TP=${TP:-1}
DP=${DP:-1}
REQUESTS=${REQUESTS:-32}
MAX_NEW=${MAX_NEW:-16}
START_TIMEOUT=${START_TIMEOUT:-900}
CHECK_ONLY=${CHECK_ONLY:-0}
SGLANG_VERSION=0.5.23
BASE_PORT=30010 PREFILL_PORT=30020 DECODE_PORT=30030
PREFILL_BOOTSTRAP=8998 DECODE_BOOTSTRAP=9000  # decode: kvferry's deciders, one per DP group on 9000 + g
mkdir -p "$OUT" "$BUILD"
: >"$OUT/summary.txt"
START=$(date +%s)
servers=()

note() { echo "sglang-gpu-check [$(($(date +%s) - START))s]: $*" | tee -a "$OUT/summary.txt"; }
fail() {
  note "FAILED: $*"
  exit 1
}
stop_servers() {
  for pid in "${servers[@]}"; do kill -- "-$pid" 2>/dev/null || kill "$pid" 2>/dev/null; done
  for pid in "${servers[@]}"; do
    for _ in $(seq 30); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
    kill -9 -- "-$pid" 2>/dev/null || kill -9 "$pid" 2>/dev/null
  done
  servers=()
}
trap stop_servers EXIT

# -- 1. the venv and kvferry in it --------------------------------------------
GPUS=0
if command -v nvidia-smi >/dev/null && nvidia-smi -L >"$OUT/gpus.txt" 2>&1; then
  GPUS=$(grep -c '^GPU ' "$OUT/gpus.txt")
fi
note "GPUs: $GPUS (TP $TP, DP $DP, $REQUESTS requests of $MAX_NEW new tokens)"
if [ "$GPUS" -eq 0 ] && [ "$CHECK_ONLY" != 1 ]; then
  fail "no GPU (nvidia-smi -L); CHECK_ONLY=1 runs the steps before the servers"
fi
if [ ! -x "$VENV/bin/python" ]; then
  /usr/bin/python3 -m venv "$VENV" || fail "python3 -m venv $VENV (apt-get install python3-venv)"
fi
PY=$VENV/bin/python
if ! "$PY" -c "import sglang, sys; sys.exit(sglang.__version__ != '$SGLANG_VERSION')" 2>/dev/null; then
  note "installing sglang[all]==$SGLANG_VERSION into $VENV (PyPI; several GB)"
  "$PY" -m pip install --disable-pip-version-check "sglang[all]==$SGLANG_VERSION" \
    "setuptools>=77" wheel >"$OUT/pip-sglang.log" 2>&1 ||
    fail "pip install sglang[all]==$SGLANG_VERSION (see $OUT/pip-sglang.log; offline: SGLANG_VENV=a venv that has it)"
fi
note "building kvferry into $VENV (CMake build in $BUILD)"
KVFERRY_CMAKE_BUILD_DIR=$BUILD "$PY" -m pip install --disable-pip-version-check \
  --no-build-isolation --no-deps --force-reinstall "$ROOT/apps/python" >"$OUT/pip-kvferry.log" 2>&1 ||
  fail "pip install apps/python (see $OUT/pip-kvferry.log)"

# -- 2. the model -------------------------------------------------------------
mkdir -p "$MODEL_DIR"
cat >"$MODEL_DIR/config.json" <<'JSON'
{
  "architectures": ["LlamaForCausalLM"],
  "model_type": "llama",
  "hidden_size": 512,
  "intermediate_size": 1024,
  "num_hidden_layers": 4,
  "num_attention_heads": 8,
  "num_key_value_heads": 4,
  "head_dim": 64,
  "vocab_size": 32000,
  "max_position_embeddings": 4096,
  "rms_norm_eps": 1e-05,
  "rope_theta": 10000.0,
  "hidden_act": "silu",
  "tie_word_embeddings": false,
  "bos_token_id": 1,
  "eos_token_id": 2,
  "torch_dtype": "bfloat16"
}
JSON
note "model: $MODEL_DIR/config.json (4 layers, 8 heads, 4 KV heads, dummy weights)"

# -- the servers' command lines ----------------------------------------------
common=(--model-path "$MODEL_DIR" --load-format dummy --skip-tokenizer-init --host 127.0.0.1
  --tp-size "$TP" --random-seed 31 --cuda-graph-backend-decode=disabled
  --cuda-graph-backend-prefill=disabled --mem-fraction-static 0.3)
if [ "$DP" -gt 1 ]; then common+=(--dp-size "$DP" --enable-dp-attention); fi
decode_gpu=0
if [ "$GPUS" -ge $((2 * TP)) ]; then decode_gpu=$TP; fi
base_cmd=("${common[@]}" --port "$BASE_PORT" --base-gpu-id 0)
prefill_cmd=("${common[@]}" --port "$PREFILL_PORT" --base-gpu-id 0 --disaggregation-mode prefill
  --disaggregation-transfer-backend kvferry --disaggregation-bootstrap-port "$PREFILL_BOOTSTRAP")
decode_cmd=("${common[@]}" --port "$DECODE_PORT" --base-gpu-id "$decode_gpu" --disaggregation-mode decode
  --disaggregation-transfer-backend kvferry --disaggregation-bootstrap-port "$DECODE_BOOTSTRAP")

# SGLang's own parser, after its plugins loaded (as launch_server does): every
# command line parses, and kvferry is the backend SGLang resolves.
"$PY" - "${prefill_cmd[@]}" -- "${decode_cmd[@]}" >"$OUT/args.log" 2>&1 <<'PY' ||
import argparse, sys
from sglang.srt.plugins import load_plugins
load_plugins()
from sglang.srt.server_args import ServerArgs
from sglang.srt.disaggregation.utils import TransferBackend, get_kv_class, KVClassType
cut = sys.argv.index("--")
for argv in (sys.argv[1:cut], sys.argv[cut + 1:]):
    parser = argparse.ArgumentParser()
    ServerArgs.add_cli_args(parser)
    ns = parser.parse_args(argv)
    backend = TransferBackend(ns.disaggregation_transfer_backend)
    manager = get_kv_class(backend, KVClassType.MANAGER)
    print(f"{ns.disaggregation_mode}: backend {backend}, manager {manager.__module__}.{manager.__name__}")
    assert manager.__module__ == "kvferry.sglang", manager
PY
  fail "SGLang's parser or plugin loading (see $OUT/args.log)"
note "command lines parse; SGLang resolves kvferry's classes: $(grep -E '^(prefill|decode): ' "$OUT/args.log" | tr '\n' ';')"
if [ "$CHECK_ONLY" = 1 ]; then
  note "CHECK_ONLY: stopping before the first server"
  exit 0
fi

# -- 3. the baseline ------------------------------------------------------------
client=("$PY" "$ROOT/deploy/sglang_pd_client.py")
start_server() { # NAME ARGS...: starts a server in a process group of its own
  local name=$1
  shift
  setsid "$PY" -m sglang.launch_server "$@" >"$OUT/$name.log" 2>&1 &
  servers+=($!)
}
start_server baseline "${base_cmd[@]}"
"${client[@]}" wait --url http://127.0.0.1:$BASE_PORT --timeout "$START_TIMEOUT" ||
  fail "the baseline server did not start (see $OUT/baseline.log)"
"${client[@]}" generate --url http://127.0.0.1:$BASE_PORT --out "$OUT/baseline.jsonl" \
  --requests "$REQUESTS" --max-new-tokens "$MAX_NEW" | tee -a "$OUT/summary.txt" ||
  fail "baseline requests"
stop_servers

# -- 4. prefill and decode through kvferry ------------------------------------
start_server prefill "${prefill_cmd[@]}"
start_server decode "${decode_cmd[@]}"
for s in prefill:$PREFILL_PORT decode:$DECODE_PORT; do
  "${client[@]}" wait --url "http://127.0.0.1:${s#*:}" --timeout "$START_TIMEOUT" ||
    fail "the ${s%%:*} server did not start (see $OUT/${s%%:*}.log)"
done
note "prefill (GPU 0) and decode (GPU $decode_gpu) servers up"
"${client[@]}" generate --url http://127.0.0.1:$DECODE_PORT --prefill http://127.0.0.1:$PREFILL_PORT \
  --bootstrap 127.0.0.1:$PREFILL_BOOTSTRAP --out "$OUT/pd.jsonl" \
  --requests "$REQUESTS" --max-new-tokens "$MAX_NEW" | tee -a "$OUT/summary.txt" ||
  fail "PD requests (see $OUT/prefill.log, $OUT/decode.log)"

# -- 5. the same outputs ------------------------------------------------------
"${client[@]}" compare "$OUT/baseline.jsonl" "$OUT/pd.jsonl" | tee -a "$OUT/summary.txt"
[ "${PIPESTATUS[0]}" -eq 0 ] || fail "PD outputs differ from the baseline's"
note "passed: every request's output ids through kvferry equal the baseline's"
