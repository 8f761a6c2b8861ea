"""deploy/sglang_pd_client.py (the client of deploy/sglang-gpu-check.sh) against
fake servers that answer /generate and /health as SGLang's do: the PD requests
carry one bootstrap room to both servers, and compare finds a changed token."""

import http.server
import json
import pathlib
import subprocess
import sys
import threading

CLIENT = pathlib.Path(__file__).resolve().parents[2] / "deploy" / "sglang_pd_client.py"


def greedy(ids, n):
    """What the fake model answers: a function of the input ids only."""
    return [(sum(ids) * 31 + k * 7) % 32000 for k in range(n)]


class FakeServer:
    def __init__(self, role, flip_request=None):
        self.role, self.flip_request, self.bodies = role, flip_request, []
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                self.send_response(200 if self.path == "/health" else 404)
                self.end_headers()

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.bodies.append(body)
                n = body["sampling_params"]["max_new_tokens"]
                out = {} if server.role == "prefill" else {"output_ids": greedy(body["input_ids"], n)}
                if server.flip_request is not None and len(server.bodies) - 1 == server.flip_request:
                    out["output_ids"][3] += 1
                data = json.dumps(out).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def client(*args):
    return subprocess.run([sys.executable, str(CLIENT), *args], capture_output=True, text=True,
                          timeout=120)


def test_pd_requests_carry_one_room_to_both_servers_and_match_the_baseline(tmp_path):
    base, prefill, decode = FakeServer("baseline"), FakeServer("prefill"), FakeServer("decode")
    try:
        assert client("wait", "--url", base.url, "--timeout", "10").returncode == 0
        r = client("generate", "--url", base.url, "--out", str(tmp_path / "b.jsonl"),
                   "--requests", "6", "--max-new-tokens", "5")
        assert r.returncode == 0, r.stdout + r.stderr
        r = client("generate", "--url", decode.url, "--prefill", prefill.url,
                   "--bootstrap", "127.0.0.1:8998", "--out", str(tmp_path / "pd.jsonl"),
                   "--requests", "6", "--max-new-tokens", "5")
        assert r.returncode == 0, r.stdout + r.stderr
        assert len(prefill.bodies) == len(decode.bodies) == 6
        rooms_p = sorted(b["bootstrap_room"] for b in prefill.bodies)
        rooms_d = sorted(b["bootstrap_room"] for b in decode.bodies)
        assert rooms_p == rooms_d and len(set(rooms_d)) == 6
        assert all(b["bootstrap_host"] == "127.0.0.1" and b["bootstrap_port"] == 8998
                   for b in prefill.bodies + decode.bodies)
        assert all(b["sampling_params"]["temperature"] == 0 for b in decode.bodies)
        r = client("compare", str(tmp_path / "b.jsonl"), str(tmp_path / "pd.jsonl"))
        assert r.returncode == 0 and "6/6 requests" in r.stdout, r.stdout
    finally:
        for s in (base, prefill, decode):
            s.close()


def test_compare_names_the_first_request_and_token_that_differ(tmp_path):
    base, other = FakeServer("baseline"), FakeServer("baseline", flip_request=2)
    try:
        for s, name in ((base, "b"), (other, "o")):
            r = client("generate", "--url", s.url, "--out", str(tmp_path / f"{name}.jsonl"),
                       "--requests", "4", "--max-new-tokens", "6")
            assert r.returncode == 0, r.stdout + r.stderr
        r = client("compare", str(tmp_path / "b.jsonl"), str(tmp_path / "o.jsonl"))
        assert r.returncode == 1
        assert "3/4 requests" in r.stdout and "request 2" in r.stdout and "token 3" in r.stdout
    finally:
        base.close()
        other.close()


def test_a_server_that_never_answers_is_a_bounded_wait(tmp_path):
    r = client("wait", "--url", "http://127.0.0.1:9", "--timeout", "3")
    assert r.returncode == 1 and "not healthy after 3 s" in r.stderr
