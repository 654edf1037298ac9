"""A PostgreSQL that stops under load and comes back: how long requests wait, what /readyz says, when memory returns.

Usage (from the repo root, in its virtualenv; ``--repo`` measures another checkout)::

    python bench/pg_outage.py                        # 20 streams; the database stopped 45 s after 20 s
    python bench/pg_outage.py --clients 20 --down 45 --warm 20 --after 30 --timeout 2
    python bench/pg_outage.py --freeze --down 15     # a server that stops answering, sockets open

Processes of their own: a PostgreSQL (pgserver's, ``tests/pg.py``), the
fixed-answer upstream (``bench/upstream.py``) and the proxy (``python -m proxy
serve``, memory on, ``storage.timeout_s: --timeout``). ``--clients``
streaming conversations run throughout, as in ``bench/load.py``, and a
poller reads ``/readyz`` every 100 ms. After ``--warm`` seconds the database
is stopped (``pg_ctl stop -m fast``: its clients are cut off; with ``--freeze``,
its processes are stopped where they are, SIGSTOP: its sockets stay open and
nothing answers), and started again (resumed) ``--down`` seconds later; the run
goes on ``--after`` seconds more.

Reported: the requests started while the database was down — how many, the
longest and p99 time to a complete answer, how many came back degraded and
why, errors — and the longest of those in flight when it stopped; how long
``/readyz`` took to say 503 after the stop and 200 after the start; how long
after the start memory came back: the last request started after it that
was still degraded, counted from the start; and, by 5 s after the start,
how many requests started and their median time, against the same before
the stop (the conversations are longer after: they grew while it was down,
and their turns of that time are indexed with each session's first request
after).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from load import FACTS, MODEL  # noqa: E402
from overhead import PROXY_KEY, UPSTREAM_KEY, free_port, start, wait_ready, wait_until_up  # noqa: E402

sys.path.insert(0, str(HERE.parent))
from tests.pg import PgServer  # noqa: E402


@dataclass
class Sent:
    started: float  # seconds since the run began
    seconds: float  # to the end of the answer (or the failure)
    status: str  # the HTTP status, or what went wrong
    degraded: str | None


@dataclass
class Timeline:
    sent: list[Sent] = field(default_factory=list)
    ready: list[tuple[float, bool]] = field(default_factory=list)


async def client_loop(url: str, n: int, t0: float, until: float, out: Timeline) -> None:
    messages: list[dict[str, str]] = [{"role": "system", "content": "You are a helpful travel assistant."}]
    turn = 0
    async with httpx.AsyncClient(timeout=120) as client:
        while time.perf_counter() < until:
            turn += 1
            messages.append({"role": "user", "content": f"Turn {turn}: {FACTS[(n + turn) % len(FACTS)]}. Any tips?"})
            body = {"model": MODEL, "messages": messages, "stream": True, "user": f"outage-user-{n}"}
            started = time.perf_counter()
            status, degraded, reply = "?", None, ""
            try:
                async with client.stream("POST", url + "/v1/chat/completions", json=body,
                                         headers={"authorization": f"Bearer {PROXY_KEY}"}) as r:
                    status, degraded = str(r.status_code), r.headers.get("x-paperclip-degraded")
                    async for line in r.aiter_lines():
                        if line.startswith("data: {"):
                            reply += json.loads(line[6:])["choices"][0]["delta"].get("content") or ""
            except (httpx.HTTPError, ValueError, KeyError) as exc:
                status = type(exc).__name__
            out.sent.append(Sent(started - t0, time.perf_counter() - started, status, degraded))
            messages.append({"role": "assistant", "content": reply})


async def poll_ready(url: str, t0: float, until: float, out: Timeline) -> None:
    async with httpx.AsyncClient(timeout=10) as client:
        while time.perf_counter() < until:
            try:
                ok = (await client.get(url + "/readyz")).status_code == 200
            except httpx.HTTPError:
                ok = False
            out.ready.append((time.perf_counter() - t0, ok))
            await asyncio.sleep(0.1)


async def run(url: str, server: PgServer, args: argparse.Namespace) -> tuple[Timeline, float, float]:
    out = Timeline()
    t0 = time.perf_counter()
    until = t0 + args.warm + args.down + args.after
    tasks = [asyncio.ensure_future(client_loop(url, n, t0, until, out)) for n in range(args.clients)]
    tasks.append(asyncio.ensure_future(poll_ready(url, t0, until, out)))
    await asyncio.sleep(args.warm)
    await asyncio.to_thread(server.freeze if args.freeze else server.halt)
    stopped = time.perf_counter() - t0
    await asyncio.sleep(args.down)
    await asyncio.to_thread(server.thaw if args.freeze else server.resume)
    restarted = time.perf_counter() - t0
    await asyncio.gather(*tasks)
    return out, stopped, restarted


def report(out: Timeline, stopped: float, restarted: float) -> dict[str, Any]:
    during = [s for s in out.sent if stopped <= s.started < restarted]
    times = sorted(s.seconds for s in during)
    after = [s for s in out.sent if s.started >= restarted]
    still = [s.started - restarted for s in after if s.degraded]
    in_flight = [s.seconds for s in out.sent if s.started < stopped < s.started + s.seconds]
    before = [s for s in out.sent if stopped - 10 <= s.started < stopped]
    by_5s: dict[int, list[float]] = collections.defaultdict(list)
    for s in after:
        by_5s[int((s.started - restarted) // 5) * 5].append(s.seconds)
    false_at = next((t for t, ok in out.ready if t >= stopped and not ok), None)
    true_at = next((t for t, ok in out.ready if t >= restarted and ok), None)
    return {
        "down_s": round(restarted - stopped, 1),
        "requests_while_down": len(during),
        "longest_while_down_s": round(times[-1], 2) if times else None,
        "p99_while_down_s": round(times[min(len(times) - 1, int(0.99 * len(times)))], 2) if times else None,
        "median_while_down_s": round(statistics.median(times), 3) if times else None,
        "longest_in_flight_at_stop_s": round(max(in_flight), 2) if in_flight else None,
        "degraded_while_down": dict(collections.Counter(s.degraded or "none" for s in during)),
        "statuses_while_down": dict(collections.Counter(s.status for s in during)),
        "readyz_false_after_stop_s": round(false_at - stopped, 2) if false_at is not None else None,
        "readyz_true_after_start_s": round(true_at - restarted, 2) if true_at is not None else None,
        "last_degraded_after_start_s": round(max(still), 2) if still else 0.0,
        "degraded_after_start": dict(collections.Counter(s.degraded or "none" for s in after)),
        "median_after_start_s": round(statistics.median(s.seconds for s in after), 3) if after else None,
        "requests_after_start": len(after),
        "per_s_before_stop": round(len(before) / 10, 1),
        "median_before_stop_s": round(statistics.median(s.seconds for s in before), 3) if before else None,
        "after_start_by_5s": {f"{t}-{t + 5}s": {"per_s": round(len(v) / 5, 1), "median_s": round(statistics.median(v), 3)}
                              for t, v in sorted(by_5s.items())},
        "errors": sum(1 for s in out.sent if s.status != "200"),
        "requests": len(out.sent),
    }


def config(folder: Path, url: str, upstream: str, port: int, embedding: str, timeout_s: float) -> Path:
    raw = {
        "server": {"host": "127.0.0.1", "port": port, "log_format": "json"},
        "storage": {"url": url, **({"timeout_s": timeout_s} if timeout_s else {})},
        "embedding": {"model": embedding},
        "defaults": {"upstream": {"base_url": upstream, "api_key": UPSTREAM_KEY}},
        "tenants": {"bench": {"api_keys": [PROXY_KEY]}},
    }
    path = folder / "proxy.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--warm", type=float, default=20.0)
    parser.add_argument("--down", type=float, default=45.0)
    parser.add_argument("--after", type=float, default=30.0)
    parser.add_argument("--timeout", type=float, default=2.0, help="storage.timeout_s (0: not set, for a checkout without it)")
    parser.add_argument("--freeze", action="store_true",
                        help="stop the server where it is (SIGSTOP: its sockets open, nothing answers) and resume it")
    parser.add_argument("--embedding", default="bundled")
    parser.add_argument("--repo", type=Path, default=HERE.parent, help="the checkout whose proxy runs")
    args = parser.parse_args(argv)
    server = PgServer()
    try:
        with ExitStack() as stack, tempfile.TemporaryDirectory() as tmp_:
            tmp = Path(tmp_)
            up_port, port = free_port(), free_port()
            upstream = start(stack, [sys.executable, str(HERE / "upstream.py"), "--port", str(up_port)], tmp / "up.log")
            up_url = f"http://127.0.0.1:{up_port}/v1"
            wait_until_up(up_url + "/models", upstream, "upstream", 30, tmp / "up.log")
            cfg = config(tmp, server.uri, up_url, port, args.embedding, args.timeout)
            python = args.repo.resolve() / ".venv" / "bin" / "python"
            proxy = start(stack, [str(python), "-m", "proxy", "serve", "--config", str(cfg)], tmp / "proxy.log",
                          cwd=args.repo.resolve())
            url = f"http://127.0.0.1:{port}"
            wait_until_up(url + "/healthz", proxy, "paperclip", 60, tmp / "proxy.log")
            wait_ready(url + "/readyz", 300)
            out, stopped, restarted = asyncio.run(run(url, server, args))
            print(json.dumps({"clients": args.clients, "timeout_s": args.timeout, **report(out, stopped, restarted)}))
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
