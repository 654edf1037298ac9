"""One very large request through Paperclip with memory on: does everyone else keep being served?

Usage (from the repo root, in its virtualenv)::

    python bench/large_body.py                       # a 15 MB body, two shapes, bundled model
    python bench/large_body.py --mb 15 --embedding hash

The fixed-answer upstream (``bench/upstream.py``) and the proxy (``python -m
proxy serve``, memory and context on) run as processes of their own. For each
body shape — ``one-message`` (one user message of the whole size) and
``history`` (a conversation of 2 KB messages adding up to it) — the bench
sends the body once, while a second client polls ``/healthz`` every 10 ms
until the proxy has answered and finished recording the turn. Reported:
the request's time, ``/healthz`` p50/p99/max during it, the proxy's RSS
before, at its peak and 5 s after. Issue 14's goal: ``/healthz`` p99 ≤ 50 ms
while the body is processed, RSS back within 100 MB of where it started.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from overhead import PROXY_KEY, free_port, proxy_config, rss_mb, start, wait_ready, wait_until_up

MODEL = "gpt-4o-mini"


def body_of(shape: str, size: int) -> bytes:
    if shape == "one-message":
        text = ("All work and no play makes Jack a dull boy. " * (size // 44 + 1))[:size]
        messages = [{"role": "user", "content": text}]
    else:
        messages = []
        for i in range(size // 2048):
            words = f"message {i}: " + " ".join(f"w{(i * 7 + j) % 5000}" for j in range(360))
            messages.append({"role": "user" if i % 2 == 0 else "assistant", "content": words[:2000]})
    return json.dumps({"model": MODEL, "messages": messages}).encode()


def poll(url: str, every_s: float = 0.01) -> None:
    """In a process of its own (so the load generator's own pauses are not counted): poll until stdin closes."""
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    out = []
    with httpx.Client(timeout=30) as client:
        while not stop.is_set():
            started = time.perf_counter()
            client.get(url + "/healthz")
            out.append((time.perf_counter() - started) * 1000)
            time.sleep(every_s)
    print(json.dumps(out))


def start_poller(url: str, every_s: float = 0.01) -> subprocess.Popen[str]:
    cmd = [sys.executable, __file__, "--poll", url, "--every", str(every_s)]
    return subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


async def one(url: str, pid: int, body: bytes, settle_s: float) -> dict[str, Any]:
    before = rss_mb(pid)
    peak = before
    poller = start_poller(url)
    await asyncio.sleep(0.5)
    started = time.perf_counter()
    async with httpx.AsyncClient(timeout=600) as client:
        request = asyncio.create_task(
            client.post(url + "/v1/chat/completions", content=body,
                        headers={"authorization": f"Bearer {PROXY_KEY}", "content-type": "application/json"})
        )
        while not request.done():
            peak = max(peak, rss_mb(pid))
            await asyncio.sleep(0.05)
        response = await request
    elapsed = time.perf_counter() - started
    # The turn is recorded after the response: keep polling while that runs.
    end = time.perf_counter() + settle_s
    while time.perf_counter() < end:
        peak = max(peak, rss_mb(pid))
        await asyncio.sleep(0.05)
    latencies = sorted(json.loads(poller.communicate("")[0]))
    return {
        "status": response.status_code,
        "degraded": response.headers.get("x-paperclip-degraded"),
        **({} if response.status_code == 200 else {"error": response.text[:300]}),
        "request_s": round(elapsed, 2),
        "healthz_n": len(latencies),
        "healthz_p50_ms": round(statistics.median(latencies), 1),
        "healthz_p99_ms": round(latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))], 1),
        "healthz_max_ms": round(latencies[-1], 1),
        "rss_before_mb": round(before, 1),
        "rss_peak_mb": round(peak, 1),
        "rss_after_mb": round(rss_mb(pid), 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=float, default=15.0)
    parser.add_argument("--embedding", default="bundled")
    parser.add_argument("--settle", type=float, default=5.0, help="seconds of polling after the response")
    parser.add_argument("--shape", action="append", choices=["one-message", "history"])
    parser.add_argument("--poll", help=argparse.SUPPRESS)
    parser.add_argument("--every", type=float, default=0.01, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.poll:
        poll(args.poll, args.every)
        return 0
    size = int(args.mb * 1_000_000)
    with ExitStack() as stack, tempfile.TemporaryDirectory() as tmp_:
        tmp = Path(tmp_)
        up_port, port = free_port(), free_port()
        upstream = start(stack, [sys.executable, "bench/upstream.py", "--port", str(up_port)], tmp / "upstream.log")
        wait_until_up(f"http://127.0.0.1:{up_port}/v1/models", upstream, "upstream", 30, tmp / "upstream.log")
        config = proxy_config(tmp, f"http://127.0.0.1:{up_port}/v1", port, True, args.embedding)
        proxy = start(stack, [sys.executable, "-m", "proxy", "serve", "--config", str(config)], tmp / "proxy.log")
        url = f"http://127.0.0.1:{port}"
        wait_until_up(url + "/healthz", proxy, "paperclip", 60, tmp / "proxy.log")
        wait_ready(url + "/readyz", 300)
        for shape in args.shape or ["one-message", "history"]:
            body = body_of(shape, size)
            row = asyncio.run(one(url, proxy.pid, body, args.settle))
            print(json.dumps({"shape": shape, "bytes": len(body), **row}))
            if row["status"] != 200:
                print((tmp / "proxy.log").read_text()[-3000:])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
