#!/usr/bin/env python3
"""The client side of deploy/sglang-gpu-check.sh: greedy requests by token ids.

  generate  --url URL [--prefill URL --bootstrap HOST:PORT] --out FILE
            sends the same seeded requests (input ids, greedy, max_new_tokens)
            to one server, or, with --prefill, to a prefill and a decode server
            at once the way SGLang's router does it for PD (bootstrap_host,
            bootstrap_port and a fresh bootstrap_room in both bodies), and
            writes each request's output ids as JSON lines.
  compare   BASELINE PD
            compares two such files request by request; exits 1 when any
            output differs, naming the first request and token that do.
  wait      --url URL [--timeout S]
            waits until the server answers GET /health with 200.

Only the standard library: it runs with any Python 3 beside the servers.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import threading
import time
import urllib.error
import urllib.request


def post(url: str, body: dict, timeout: float) -> dict:
    data = json.dumps(body).encode()
    req = urllib.request.Request(url + "/generate", data=data,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.loads(resp.read())


def requests_of(seed: int, count: int, vocab: int, max_new: int):
    rng = random.Random(seed)
    for i in range(count):
        length = rng.randint(8, 600)  # one page to several, chunked prefill at the top
        ids = [rng.randrange(1, vocab) for _ in range(length)]
        yield i, {"input_ids": ids,
                  "sampling_params": {"temperature": 0, "max_new_tokens": max_new,
                                      "ignore_eos": True}}


def output_ids(answer: dict) -> list:
    if "output_ids" in answer:
        return answer["output_ids"]
    raise ValueError(f"the server's answer has no output_ids: {json.dumps(answer)[:300]}")


def generate(args) -> int:
    rng = random.SystemRandom()
    failures = 0
    with open(args.out, "w") as out:
        for i, body in requests_of(args.seed, args.requests, args.vocab, args.max_new_tokens):
            started = time.monotonic()
            try:
                if args.prefill:
                    host, port = args.bootstrap.rsplit(":", 1)
                    body = dict(body, bootstrap_host=host, bootstrap_port=int(port),
                                bootstrap_room=rng.randrange(0, 2**63))
                    prefill_error = []

                    def to_prefill():
                        try:
                            post(args.prefill, body, args.timeout)
                        except Exception as e:  # reported with the decode side's answer
                            prefill_error.append(e)

                    t = threading.Thread(target=to_prefill)
                    t.start()
                    answer = post(args.url, body, args.timeout)
                    t.join(args.timeout)
                    if prefill_error:
                        raise RuntimeError(f"prefill server: {prefill_error[0]}")
                else:
                    answer = post(args.url, body, args.timeout)
                ids = output_ids(answer)
                error = None
            except (OSError, ValueError, RuntimeError, urllib.error.URLError) as e:
                ids, error = [], str(e)
                failures += 1
            out.write(json.dumps({"request": i, "input_len": len(body["input_ids"]),
                                  "output_ids": ids, "error": error,
                                  "ms": round((time.monotonic() - started) * 1e3, 1)}) + "\n")
            out.flush()
    print(f"generate: {args.requests} requests to {args.url}, {failures} failed")
    return 1 if failures else 0


def load(path: str) -> dict:
    with open(path) as f:
        return {r["request"]: r for r in map(json.loads, f)}


def compare(args) -> int:
    base, pd = load(args.baseline), load(args.pd)
    same = 0
    first_bad = None
    for i in sorted(base):
        a, b = base[i], pd.get(i)
        if b is not None and not a["error"] and not b["error"] and a["output_ids"] == b["output_ids"]:
            same += 1
        elif first_bad is None:
            if b is None:
                first_bad = f"request {i}: missing from {args.pd}"
            elif a["error"] or b["error"]:
                first_bad = f"request {i}: baseline error {a['error']!r}, PD error {b['error']!r}"
            else:
                k = next((k for k, (x, y) in enumerate(zip(a["output_ids"], b["output_ids"]))
                          if x != y), min(len(a["output_ids"]), len(b["output_ids"])))
                first_bad = (f"request {i} (input {a['input_len']} tokens): token {k} is "
                             f"{b['output_ids'][k:k + 1]} through PD, {a['output_ids'][k:k + 1]} "
                             f"without")
    print(f"compare: {same}/{len(base)} requests give the same output ids through PD")
    if first_bad:
        print(f"compare: first difference: {first_bad}")
        return 1
    return 0


def wait(args) -> int:
    deadline = time.monotonic() + args.timeout
    last = "no answer"
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(args.url + "/health", timeout=5) as resp:
                if resp.status == 200:
                    return 0
                last = f"HTTP {resp.status}"
        except (OSError, urllib.error.URLError) as e:
            last = str(e)
        time.sleep(2)
    print(f"wait: {args.url} not healthy after {args.timeout:.0f} s ({last})", file=sys.stderr)
    return 1


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("generate")
    g.add_argument("--url", required=True, help="the server (the decode server, with --prefill)")
    g.add_argument("--prefill", help="the prefill server: PD mode")
    g.add_argument("--bootstrap", help="HOST:PORT of the prefill server's bootstrap (PD mode)")
    g.add_argument("--out", required=True)
    g.add_argument("--requests", type=int, default=32)
    g.add_argument("--max-new-tokens", type=int, default=16)
    g.add_argument("--vocab", type=int, default=32000)
    g.add_argument("--seed", type=int, default=31)
    g.add_argument("--timeout", type=float, default=120)
    c = sub.add_parser("compare")
    c.add_argument("baseline")
    c.add_argument("pd")
    w = sub.add_parser("wait")
    w.add_argument("--url", required=True)
    w.add_argument("--timeout", type=float, default=600)
    args = p.parse_args()
    if args.cmd == "generate":
        if args.prefill and not args.bootstrap:
            p.error("generate --prefill needs --bootstrap HOST:PORT")
        return generate(args)
    return compare(args) if args.cmd == "compare" else wait(args)


if __name__ == "__main__":
    sys.exit(main())
