"""A soak of `specdecode serve --target toy` over loopback: a few hundred mixed good and bad requests, concurrent and
streamed, some abandoned mid-stream. Then every request must have been answered (or cleanly refused with a 503
`server_busy`), every seeded answer must equal the same request run alone, the server's resident memory must not have
grown by 10% after a warm-up, and the server must still be healthy, with no traceback in its log. Bounded: 160
requests after ~60 reference runs, 10-30 s on 2 busy cores."""

from __future__ import annotations

import json
import os
import random
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

REPO = Path(__file__).resolve().parents[1]
WORKERS = 8  # concurrent clients
MAX_BODY = 100_000
GOOD_WORDS = ["the cat", "the dog sat", "the fish ran on the mat", "the cat sat on the mat the dog"]


@pytest.fixture(scope="module")
def server():
    with socket.socket() as s:  # a free port on loopback
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    process = subprocess.Popen(
        [sys.executable, "-m", "specdecode", "serve", "--target", "toy", "--port", str(port), "--max-queue", "12",
         "--request-timeout", "30", "--max-body-bytes", str(MAX_BODY), "--max-tokens", "200", "--log-level",
         "warning"], cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert process.poll() is None, process.stderr.read()
            assert time.monotonic() < deadline, "the server did not come up within 60 s"
            time.sleep(0.2)
        yield base, process
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
    assert "Traceback" not in process.stderr.read(), "the server logged a traceback"


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def requests(rng: random.Random, count: int) -> list[dict]:
    """`count` request specs: method, path, body (json or raw), headers, whether streamed, what status is right."""
    specs = []
    for i in range(count):
        kind = rng.choice(["seeded", "seeded", "seeded", "chat", "greedy", "page", "bad", "bad", "abandon"])
        prompt = rng.choice(GOOD_WORDS)
        stream = rng.random() < 0.5
        if kind == "seeded":
            body = {"prompt": prompt, "max_tokens": rng.randint(5, 30), "seed": rng.randrange(1000),
                    "temperature": rng.choice([1.0, 0.7]), "stream": stream}
            specs.append({"path": "/v1/completions", "json": body, "status": 200, "seeded": True})
        elif kind == "chat":
            body = {"messages": [{"role": "user", "content": prompt}], "max_tokens": 20, "seed": i, "stream": stream}
            specs.append({"path": "/v1/chat/completions", "json": body, "status": 200, "seeded": True})
        elif kind == "greedy":
            body = {"prompt": prompt, "max_tokens": 20, "temperature": 0, "stream": stream}
            specs.append({"path": "/v1/completions", "json": body, "status": 200, "seeded": True})
        elif kind == "page":
            specs.append(rng.choice([
                {"method": "GET", "path": "/api/draws?n=2000&seed=3", "status": 200},
                {"method": "GET", "path": "/api/gamma?alpha=0.8&c=0.1", "status": 200},
                {"path": "/api/toy/round", "json": {"tokens": [0, 1], "gamma": 4, "seed": 5}, "status": 200},
                {"path": "/api/live", "json": {"prompt": prompt, "max_tokens": 20}, "status": 200},
                {"method": "GET", "path": "/health", "status": 200},
            ]))
        elif kind == "bad":
            specs.append(rng.choice([
                {"path": "/v1/completions", "raw": b'{"prompt": "the', "status": 400},
                {"path": "/v1/completions", "raw": b'{"prompt": "the \\ud800 cat", "stream": true}', "status": 400},
                {"path": "/v1/chat/completions", "raw": b'{"messages": [{"role": "user", "content": "\\udfff"}]}',
                 "status": 400},
                {"path": "/v1/completions", "json": {"prompt": "the", "temperature": 1e-39, "stream": stream},
                 "status": 400},
                {"path": "/v1/completions", "json": {"prompt": "the", "max_tokens": 10_000}, "status": 400},
                {"path": "/v1/completions", "json": {"prompt": "the zebra", "stream": stream}, "status": 400},
                {"path": "/v1/completions", "json": {"prompt": "the", "model": "gpt-4o"}, "status": 404},
                {"path": "/v1/completions", "raw": b'{"prompt": "the", "junk": "' + b"x" * (MAX_BODY + 10) + b'"}',
                 "status": 413},
                {"path": "/v1/completions", "json": {"prompt": "the"}, "headers": {"Host": "evil.example"},
                 "status": 400},
                {"method": "GET", "path": "/api/draws?n=1000000", "status": 400},
            ]))
        else:  # a client that reads one chunk of a long stream and leaves
            body = {"prompt": prompt, "max_tokens": 200, "seed": i, "stream": True}
            specs.append({"path": "/v1/completions", "json": body, "status": 200, "abandon": True})
    return specs


def send(client: httpx.Client, spec: dict) -> tuple[int, str]:
    """-> (status, text of the answer: the completion's text for a 200 completion, else the raw body)."""
    method = spec.get("method", "POST")
    kwargs = {"headers": spec.get("headers", {})}
    if "json" in spec:
        kwargs["json"] = spec["json"]
    elif "raw" in spec:
        kwargs["content"] = spec["raw"]
        kwargs["headers"] = {**kwargs["headers"], "Content-Type": "application/json"}
    with client.stream(method, spec["path"], **kwargs) as response:
        if spec.get("abandon"):
            next(response.iter_raw(), None)
            return response.status_code, ""
        raw = response.read().decode()
    if response.status_code != 200 or "json" not in spec or spec["path"] in ("/api/toy/round", "/api/live"):
        return response.status_code, raw
    return 200, completion_text(raw, spec["json"].get("stream", False))


def completion_text(raw: str, stream: bool) -> str:
    if not stream:
        choice = json.loads(raw)["choices"][0]
        return choice.get("text", choice.get("message", {}).get("content"))
    assert raw.endswith("data: [DONE]\n\n"), raw[-200:]
    pieces = []
    for block in raw.strip().split("\n\n")[:-1]:
        assert block.startswith("data: "), block
        choice = json.loads(block[len("data: "):])["choices"][0]
        pieces.append(choice.get("text") or choice.get("delta", {}).get("content") or "")
    return "".join(pieces)


def test_soak_mixed_concurrent_requests(server):
    base, process = server
    rng = random.Random(0)
    warmup, soak = requests(rng, 40), requests(rng, 120)
    with httpx.Client(base_url=base, timeout=60) as alone:  # every seeded answer, run alone first
        reference = {json.dumps({**s["json"], "stream": False}, sort_keys=True): send(alone, {
            **s, "json": {**s["json"], "stream": False}})[1] for s in warmup + soak if s.get("seeded")}

    def run(specs: list[dict]) -> list[tuple[dict, int, str]]:
        def one(spec):
            with httpx.Client(base_url=base, timeout=60) as client:
                return (spec, *send(client, spec))
        with ThreadPoolExecutor(WORKERS) as pool:
            return list(pool.map(one, specs))

    start = time.monotonic()
    results = run(warmup)
    rss_warm = rss_kib(process.pid)
    results += run(soak)
    rss_end = rss_kib(process.pid)
    seconds = time.monotonic() - start

    busy = 0
    for spec, status, text in results:
        if status == 503 and spec["status"] == 200 and "server_busy" in text:
            busy += 1  # cleanly refused: the queue was full
            continue
        assert status == spec["status"], (spec.get("path"), spec.get("json"), status, text[:300])
        if status != 200:
            assert json.loads(text)["error"]["message"]  # every refusal is a JSON error
        elif spec.get("seeded"):
            assert text == reference[json.dumps({**spec["json"], "stream": False}, sort_keys=True)], spec
    assert busy <= len(results) // 10
    assert rss_end < 1.10 * rss_warm, f"resident memory grew from {rss_warm} to {rss_end} KiB"
    health = httpx.get(f"{base}/health", timeout=5)
    assert health.status_code == 200 and health.json()["status"] == "ok"
    print(f"soak: {len(results)} requests in {seconds:.1f} s, {busy} refused busy, RSS {rss_warm} -> {rss_end} KiB")
