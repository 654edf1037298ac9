"""An upstream gzip bomb through Paperclip, memory on: does the process live, and everyone else get served?

Usage (from the repo root, in its virtualenv)::

    python bench/gzip_bomb.py                    # a 1 GB bomb (about 1 MB on the wire), 3 times
    python bench/gzip_bomb.py --inflated-mb 20 --bombs 5 --embedding hash

Two tenants share one ``paperclip serve`` (memory on): ``bench``, whose
upstream is the fixed-answer ``bench/upstream.py``, and ``bomb``, whose
upstream (``tests/hostile_upstream.py``, in this process) answers every chat
completion with a gzip body that inflates to ``--inflated-mb`` of JSON. The
bench first measures ``bench``'s requests alone for ``--baseline`` seconds,
then sends the bombs one after another (each read whole, raw, as a client
that does not decode would) while ``bench``'s requests go on and a second
process polls ``/healthz`` every 10 ms, and keeps measuring for
``--settle`` seconds after the last (recording runs after the response).
Reported: the proxy's RSS before, at its peak and after; ``/healthz``
p50/p99/max during the bombs; the other tenant's latency p50/p99 and errors
alone and during; whether the proxy is alive after. Issue 26's goal for a
1 GB bomb: alive, RSS within +300 MB of where it started, ``/healthz`` p99
≤ 50 ms, the other tenant unaffected.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
import zlib
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))
from large_body import start_poller  # noqa: E402
from overhead import PROXY_KEY, UPSTREAM_KEY, free_port, rss_mb, start, wait_ready, wait_until_up  # noqa: E402

from tests.hostile_upstream import HostileUpstream, RawRequest, head  # noqa: E402

BOMB_KEY = "pk-bench-bomb"
CHAT = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Tell me about trains."}]}


def bomb(inflated_mb: int) -> bytes:
    """A chat completion whose content is ``inflated_mb`` MiB of "a", gzipped a MiB at a time."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    out = [packer.compress(b'{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,'
                           b'"message":{"role":"assistant","content":"')]
    block = b"a" * (1024 * 1024)
    out += [packer.compress(block) for _ in range(inflated_mb)]
    out.append(packer.compress(b'"},"finish_reason":"stop"}]}') + packer.flush())
    return b"".join(out)


def config(tmp: Path, upstream_url: str, bomb_url: str, port: int, embedding: str) -> Path:
    raw = {
        "server": {"host": "127.0.0.1", "port": port, "log_format": "json"},
        "storage": {"url": f"sqlite:///{tmp / 'bomb.db'}"},
        "embedding": {"model": embedding},
        "defaults": {"upstream": {"base_url": upstream_url, "api_key": UPSTREAM_KEY}},
        "tenants": {"bench": {"api_keys": [PROXY_KEY]},
                    # Its compression model is the ordinary upstream: only its replies are bombs.
                    "bomb": {"api_keys": [BOMB_KEY], "upstream": {"base_url": bomb_url},
                             "compression": {"base_url": upstream_url}}},
    }
    path = tmp / "proxy.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


class OtherTenant:
    """The ``bench`` tenant's requests, one after another on a thread, each timed."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.latencies: list[float] = []
        self.errors = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with httpx.Client(base_url=self.url, timeout=60, headers={"authorization": f"Bearer {PROXY_KEY}"}) as http:
            n = 0
            while not self._stop.is_set():
                n += 1
                started = time.perf_counter()
                try:
                    ok = http.post("/v1/chat/completions", json={**CHAT, "user": f"u{n % 20}"}).status_code == 200
                except httpx.HTTPError:
                    ok = False
                self.latencies.append((time.perf_counter() - started) * 1000)
                self.errors += not ok
                time.sleep(0.02)

    def __enter__(self) -> OtherTenant:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def summary(self) -> dict[str, Any]:
        return {"requests": len(self.latencies), "errors": self.errors, **percentiles(self.latencies)}


def percentiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    ordered = sorted(values)
    return {"p50_ms": round(statistics.median(ordered), 1),
            "p99_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))], 1),
            "max_ms": round(ordered[-1], 1)}


def sample_rss(pid: int, until: threading.Event, peak: list[float]) -> None:
    while not until.is_set():
        peak[0] = max(peak[0], rss_mb(pid))
        time.sleep(0.05)


def run(url: str, pid: int, bombs: int, baseline_s: float, settle_s: float) -> dict[str, Any]:
    with OtherTenant(url) as alone:
        time.sleep(baseline_s)
    before = rss_mb(pid)
    peak, done = [before], threading.Event()
    sampler = threading.Thread(target=sample_rss, args=(pid, done, peak), daemon=True)
    sampler.start()
    poller = start_poller(url)
    statuses: list[int | str] = []
    started = time.perf_counter()
    with OtherTenant(url) as during, httpx.Client(base_url=url, timeout=600) as http:
        for _ in range(bombs):
            try:
                with http.stream("POST", "/v1/chat/completions", json=CHAT,
                                 headers={"authorization": f"Bearer {BOMB_KEY}"}) as response:
                    received = sum(len(part) for part in response.iter_raw())
                statuses.append(response.status_code)
            except httpx.HTTPError as exc:
                statuses.append(type(exc).__name__)
                received = 0
        bombs_s = time.perf_counter() - started
        time.sleep(settle_s)
    healthz = json.loads(poller.communicate("")[0])
    done.set()
    sampler.join()
    try:
        alive = httpx.get(url + "/healthz", timeout=10).status_code == 200
    except httpx.HTTPError:
        alive = False
    return {
        "bomb_statuses": statuses,
        "bomb_bytes_received": received,
        "bombs_s": round(bombs_s, 1),
        "rss_before_mb": round(before, 1),
        "rss_peak_mb": round(peak[0], 1),
        "rss_after_mb": round(rss_mb(pid), 1) if alive else None,
        "healthz_during": {"n": len(healthz), **percentiles(healthz)},
        "other_tenant_alone": alone.summary(),
        "other_tenant_during": during.summary(),
        "alive_after": alive,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--inflated-mb", type=int, default=1024, help="MiB the bomb inflates to")
    parser.add_argument("--bombs", type=int, default=3)
    parser.add_argument("--embedding", default="bundled")
    parser.add_argument("--baseline", type=float, default=10.0, help="seconds of the other tenant alone")
    parser.add_argument("--settle", type=float, default=10.0, help="seconds of measuring after the last bomb")
    args = parser.parse_args(argv)
    payload = bomb(args.inflated_mb)
    print(f"bomb: {len(payload):,} bytes that inflate to {args.inflated_mb} MiB", flush=True)

    def answer(request: RawRequest) -> list[bytes]:
        return [head(b"200 OK", b"content-type: application/json", b"content-encoding: gzip",
                     b"content-length: %d" % len(payload)), payload]

    with ExitStack() as stack, tempfile.TemporaryDirectory() as tmp_:
        tmp = Path(tmp_)
        hostile = stack.enter_context(HostileUpstream(answer))
        up_port, port = free_port(), free_port()
        upstream = start(stack, [sys.executable, "bench/upstream.py", "--port", str(up_port)], tmp / "upstream.log")
        wait_until_up(f"http://127.0.0.1:{up_port}/v1/models", upstream, "upstream", 30, tmp / "upstream.log")
        cfg = config(tmp, f"http://127.0.0.1:{up_port}/v1", hostile.base_url, port, args.embedding)
        proxy = start(stack, [sys.executable, "-m", "proxy", "serve", "--config", str(cfg)], tmp / "proxy.log")
        url = f"http://127.0.0.1:{port}"
        wait_until_up(url + "/healthz", proxy, "paperclip", 60, tmp / "proxy.log")
        wait_ready(url + "/readyz", 300)
        result = run(url, proxy.pid, args.bombs, args.baseline, args.settle)
        result["exit_code"] = proxy.poll()
        print(json.dumps({"inflated_mb": args.inflated_mb, "wire_bytes": len(payload), **result}, indent=2))
        if not result["alive_after"]:
            print((tmp / "proxy.log").read_text()[-3000:], file=sys.stderr)
        return 0 if result["alive_after"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
