"""What Paperclip adds: latency, time to first byte, throughput and memory, direct vs through it.

Usage (from the repo root, in its virtualenv)::

    python bench/overhead.py                      # direct vs Paperclip
    python bench/overhead.py --peer litellm       # ... and LiteLLM's proxy in the same run
    python bench/overhead.py --memory             # Paperclip with its memory and context layers on
    python bench/overhead.py --memory --embedding hash   # ... with the fast fake embedder
    python bench/overhead.py --requests 500 --seconds 4   # a quick run
    python bench/overhead.py --outbound-proxy     # https upstream; + Paperclip through a CONNECT proxy
    python bench/overhead.py --accounting         # ... and Paperclip without its log line and usage
    python bench/overhead.py --compare ../before  # ... and another checkout's Paperclip, side by side

Three processes on loopback, so that none shares a GIL with another: the
fixed-answer upstream (``bench/upstream.py``), the proxy (``python -m proxy
serve`` on a temporary ``proxy.yaml`` whose one tenant points at that
upstream; memory and context off unless ``--memory``), and this process, the
load generator (``httpx.AsyncClient`` on uvloop; one client per worker at
c=32, see ``measure``). With ``--peer litellm``, LiteLLM's
proxy (``litellm[proxy]``, installed on first use into its own virtualenv,
``--litellm-venv``, default ``~/.cache/paperclip-bench/venv-litellm``) runs in
front of the same upstream, with one ``model_list`` entry whose ``api_base``
is the upstream.

With ``--compare DIR``, the Paperclip of the checkout in ``DIR`` (started
with ``DIR/.venv``'s Python in ``DIR``, so it runs that checkout's code; same
config) is one more target, named ``@<DIR's name>``: before/after pairs in one
run, every round in the rotating order below, so neither build is favoured.

With ``--accounting``, a second Paperclip (``bench/quiet_proxy.py``: the same
app with the per-request log line, usage ledger and tenant/model metrics
switched off) runs beside the first, which then writes its JSON log line at
``info``: "accounting" in the table is the first's p50 minus the second's.

Measured, for every target in the same run:

- non-stream latency at concurrency 1: ``--requests`` requests per target
  and endpoint (``/chat/completions``, ``/responses``, the Responses API, and
  ``/messages``, Anthropic's Messages API),
  in rounds of one request per target and endpoint, the targets' and the
  endpoints' orders rotating (see ``rounds``), after a warm-up; p50 and p99 of the
  full request time (body read); ``/responses``' and ``/messages``' added
  time over chat's, from each request's time minus the direct one's in the
  same round (see ``added_ratios``);
- streaming time to first byte at concurrency 1: the same, up to the first
  body chunk of a ``stream: true`` chat request (the rest is read too);
- requests/s at concurrency ``--concurrency`` (32): ``--seconds`` per target,
  in alternating blocks of ``--block`` seconds, non-stream requests; and each
  process's CPU (user + system) per request over that phase, counted until
  every process has gone quiet, so the work a request leaves behind is in it;
- the proxy's idle RSS: ``VmRSS`` of its process once it answers
  ``/healthz``, before any request and before the memory layer has loaded;
  also once ``/readyz`` answers 200 (embedding model loaded) and after the run.
  Measuring starts only once ``/readyz`` answers 200.

With ``--outbound-proxy`` the upstream serves https (a certificate from a CA
made for the run with ``openssl``, given to Paperclip as ``upstream.ca_file``)
and a second Paperclip, ``via-proxy``, reaches it through a CONNECT tunnel of
a loopback proxy in its own process (``tests/connect_proxy.py``); the tunnel's
cost is its percentile minus plain Paperclip's.

"Added" is the target's percentile minus the direct percentile (each
percentile over its own samples). The table is printed and the numbers are
written as JSON to ``--out`` (default ``bench/results/overhead.json``).
The load generator is Python too: at c=32 it is part of what is measured, the
same for every target. On a machine with few cores, the three processes share
them, so the throughput ratio also says how much CPU the proxy takes from the
others; run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import secrets
import signal
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx
import uvloop
import yaml

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))
from tests.pki import issue, make_ca  # noqa: E402

MODEL = "gpt-4o-mini"
UPSTREAM_KEY = "sk-bench-upstream"
PROXY_KEY = "pk-bench"
T = TypeVar("T")
LITELLM_KEY = "sk-litellm-bench-" + secrets.token_hex(24)
BODY = {"model": MODEL, "messages": [{"role": "user", "content": "Say hello in one short sentence."}]}
STREAM_BODY = {**BODY, "stream": True}
RESPONSES_BODY = {"model": MODEL, "input": [{"role": "user", "content": "Say hello in one short sentence."}]}
MESSAGES_BODY = {"model": "claude-bench", "max_tokens": 64,
                 "messages": [{"role": "user", "content": "Say hello in one short sentence."}]}
ENDPOINTS = {"chat": ("/chat/completions", BODY), "responses": ("/responses", RESPONSES_BODY),
             "messages": ("/messages", MESSAGES_BODY)}
# The endpoints whose added time is compared with chat's (added_ratios).
COMPARED = ("responses", "messages")
GOALS = {
    "added_p50_ms": 1.5,
    "added_p99_ms": 5.0,
    "added_ttfb_p50_ms": 2.0,
    "throughput_ratio": 0.60,
    "idle_rss_mb": 150.0,
    "responses_vs_chat_added": 1.10,  # the Responses API's added time within 10% of chat's (added_ratios)
    "messages_vs_chat_added": 1.10,  # Anthropic's Messages API's, the same
}


@dataclass
class Target:
    name: str
    base_url: str
    headers: dict[str, str]
    pid: int | None = None
    latency: list[float] = field(default_factory=list)
    responses_latency: list[float] = field(default_factory=list)
    messages_latency: list[float] = field(default_factory=list)
    ttfb: list[float] = field(default_factory=list)
    done: int = 0
    failed: int = 0
    busy_s: float = 0.0
    cpu_s: float | None = None  # the process's CPU over the c=32 phase, the work it left behind included
    rss_mb: float | None = None
    ready_rss_mb: float | None = None
    final_rss_mb: float | None = None
    kinds: tuple[str, ...] = tuple(ENDPOINTS)  # the non-stream endpoints it serves (an older build: no /messages)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def wait_until_up(
    url: str, proc: subprocess.Popen[bytes], what: str, timeout: float, log: Path, verify: ssl.SSLContext | bool = True
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"{what} exited with {proc.returncode}; its log:\n{log.read_text()[-4000:]}")
        try:
            if httpx.get(url, timeout=1, verify=verify).status_code < 500:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise SystemExit(f"{what} did not come up in {timeout:.0f} s; its log:\n{log.read_text()[-4000:]}")


def start(
    stack: ExitStack, cmd: list[str], log: Path, env: dict[str, str] | None = None, cwd: Path = REPO
) -> subprocess.Popen[bytes]:
    out = stack.enter_context(log.open("wb"))
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})})

    def stop() -> None:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    stack.callback(stop)
    return proc


def proxy_config(
    tmp: Path, upstream_url: str, port: int, memory: bool, embedding: str, name: str = "proxy", anthropic: bool = True,
    **upstream: Any,
) -> Path:
    raw = {
        "server": {"host": "127.0.0.1", "port": port, "log_format": "json"},
        "storage": {"url": f"sqlite:///{tmp / (name + '.db')}"},
        "embedding": {"model": embedding},
        "defaults": {
            "upstream": {"base_url": upstream_url, "api_key": UPSTREAM_KEY, **upstream},
            **({"anthropic": {"base_url": upstream_url.removesuffix("/v1"), "api_key": UPSTREAM_KEY}} if anthropic else {}),
            "context": {"enabled": memory},
            "memory": {"enabled": memory},
        },
        "tenants": {"bench": {"api_keys": [PROXY_KEY]}},
    }
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def compared_proxy(
    stack: ExitStack, tmp: Path, upstream_url: str, args: argparse.Namespace, level: str, tls: dict[str, str]
) -> Target:
    """``--compare DIR``: the Paperclip of the checkout in ``DIR`` (its own ``.venv``, its own code), same config."""
    other = args.compare.resolve()
    python = other / ".venv" / "bin" / "python"
    if not python.exists():
        raise SystemExit(f"{other} has no .venv: make one there first (pip install -e .)")
    port = free_port()
    kinds = tuple(ENDPOINTS)
    for anthropic in (True, False):
        cfg = proxy_config(tmp, upstream_url, port, args.memory, args.embedding, "compared", anthropic, **tls)
        log = tmp / f"compared-{anthropic}.log"
        proc = start(stack, [str(python), "-m", "proxy", "serve", "--config", str(cfg), "--log-level", level], log, cwd=other)
        try:
            wait_until_up(f"http://127.0.0.1:{port}/healthz", proc, f"paperclip @{other.name}", 60, log)
            break
        except SystemExit:
            if not anthropic or "defaults.anthropic: unknown key" not in log.read_text():
                raise
        kinds = tuple(k for k in ENDPOINTS if k != "messages")  # a build from before /v1/messages
    t = Target(f"@{other.name}", f"http://127.0.0.1:{port}/v1", {"authorization": f"Bearer {PROXY_KEY}"}, proc.pid,
               kinds=kinds)
    t.rss_mb = rss_mb(proc.pid)
    wait_ready(f"http://127.0.0.1:{port}/readyz", 180)
    t.ready_rss_mb = rss_mb(proc.pid)
    return t


def litellm_venv(venv: Path) -> Path:
    exe = venv / "bin" / "litellm"
    if exe.exists():
        return exe
    print(f"installing litellm[proxy] into {venv} (first use only)...", flush=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "litellm[proxy]"], check=True)
    return exe


def litellm_config(tmp: Path, upstream_url: str) -> Path:
    raw = {
        "model_list": [
            {
                "model_name": MODEL,
                "litellm_params": {"model": f"openai/{MODEL}", "api_base": upstream_url, "api_key": UPSTREAM_KEY},
            }
        ],
        "litellm_settings": {"telemetry": False, "drop_params": False},
        # LiteLLM refuses to start without one; no database, so it is checked as a plain key.
        "general_settings": {"master_key": LITELLM_KEY},
    }
    path = tmp / "litellm.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


async def one_request(client: httpx.AsyncClient, t: Target, endpoint: str = "chat") -> float:
    path, body = ENDPOINTS[endpoint]
    started = time.perf_counter()
    r = await client.post(t.base_url + path, json=body, headers=t.headers)
    elapsed = time.perf_counter() - started
    if r.status_code != 200:
        raise RuntimeError(f"{t.name}: HTTP {r.status_code}: {r.text[:300]}")
    return elapsed


async def one_stream(client: httpx.AsyncClient, t: Target) -> float:
    started = time.perf_counter()
    first: float | None = None
    async with client.stream("POST", t.base_url + "/chat/completions", json=STREAM_BODY, headers=t.headers) as r:
        if r.status_code != 200:
            raise RuntimeError(f"{t.name}: HTTP {r.status_code}: {(await r.aread())[:300]!r}")
        async for piece in r.aiter_raw():
            if first is None and piece:
                first = time.perf_counter() - started
    assert first is not None, f"{t.name}: empty stream"
    return first


async def sequential(client: httpx.AsyncClient, targets: list[Target], n: int, stream: bool, warmup: int) -> None:
    kinds = ["chat"] if stream else list(ENDPOINTS)
    for i, order in enumerate(rounds(targets, kinds, warmup + n)):
        for t, kind in order:
            if kind not in t.kinds:
                continue
            if stream:
                elapsed = await one_stream(client, t)
                if i >= warmup:
                    t.ttfb.append(elapsed)
                continue
            elapsed = await one_request(client, t, kind)
            if i >= warmup:
                samples(t, kind).append(elapsed)


def samples(t: Target, kind: str) -> list[float]:
    """The c=1 non-stream latencies of one endpoint of a target."""
    return {"chat": t.latency, "responses": t.responses_latency, "messages": t.messages_latency}[kind]


def rounds(targets: list[T], kinds: list[str], n: int) -> list[list[tuple[T, str]]]:
    """``n`` rounds of one request per target and endpoint, in an order that favours none.

    Each round, the targets take their turns in rotating order, each sending
    every endpoint; the endpoints' order rotates once every full rotation of
    the targets, so each endpoint of each target comes first after the other
    process's turn equally often. Such a request is slower (caches, a thread
    woken): when both orders rotated together, Paperclip's ``/responses``
    always took that place and its chat never, and the reverse direct: that
    made ``/responses``' added p50 1.21x chat's where this order measured
    0.98x in the same run (memory off; 1.06x and 0.99x with memory on).
    """
    out = []
    for i in range(n):
        k, j = i % len(targets), (i // len(targets)) % len(kinds)
        ordered = kinds[j:] + kinds[:j]
        out.append([(t, kind) for t in targets[k:] + targets[:k] for kind in ordered])
    return out


async def block(clients: list[httpx.AsyncClient], t: Target, seconds: float) -> None:
    deadline = time.perf_counter() + seconds

    async def worker(client: httpx.AsyncClient) -> None:
        while time.perf_counter() < deadline:
            try:
                await one_request(client, t)
                t.done += 1
            except (RuntimeError, httpx.HTTPError):
                t.failed += 1

    started = time.perf_counter()
    await asyncio.gather(*(worker(c) for c in clients))
    t.busy_s += time.perf_counter() - started


def new_client(connections: int, verify: ssl.SSLContext | bool = True) -> httpx.AsyncClient:
    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
    return httpx.AsyncClient(timeout=60, limits=limits, trust_env=False, verify=verify)


async def measure(targets: list[Target], args: argparse.Namespace) -> None:
    async with new_client(len(targets), args.verify) as client:
        print(f"c=1 non-stream: {args.requests} requests per target...", flush=True)
        await sequential(client, targets, args.requests, stream=False, warmup=args.warmup)
        print(f"c=1 stream: {args.requests} requests per target...", flush=True)
        await sequential(client, targets, args.requests, stream=True, warmup=args.warmup)
    print(f"c={args.concurrency}: {args.seconds:g} s per target in {args.block:g} s blocks...", flush=True)
    # One client (one connection per target) per worker: a single httpx pool shared by 32
    # tasks caps near 400 req/s here, which would measure httpcore's pool, not the proxy.
    clients = [new_client(len(targets), args.verify) for _ in range(args.concurrency)]
    try:
        for t in targets:  # open every connection before measuring
            await block(clients, t, 0.5)
            t.done = t.failed = 0
            t.busy_s = 0.0
        cpu_before = {id(t): cpu_s(t.pid) for t in targets if t.pid is not None}
        rounds = max(1, round(args.seconds / args.block))
        for i in range(rounds):
            k = i % len(targets)
            for t in targets[k:] + targets[:k]:
                await block(clients, t, args.seconds / rounds)
        await quiet([t.pid for t in targets if t.pid is not None])
        for t in targets:
            if t.pid is not None:
                t.cpu_s = cpu_s(t.pid) - cpu_before[id(t)]
    finally:
        for c in clients:
            await c.aclose()


def cpu_s(pid: int) -> float:
    """``pid``'s CPU seconds so far, user and system."""
    stat = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK")


async def quiet(pids: list[int], idle_share: float = 0.02, longest_s: float = 30.0) -> None:
    """Until every process uses under ``idle_share`` of a core (what the requests left behind is done)."""
    deadline = time.perf_counter() + longest_s
    while time.perf_counter() < deadline:
        before = [cpu_s(p) for p in pids]
        await asyncio.sleep(0.5)
        if all(cpu_s(p) - b < idle_share * 0.5 for p, b in zip(pids, before, strict=True)):
            return


def summarise(targets: list[Target], args: argparse.Namespace) -> dict[str, Any]:
    direct = targets[0]
    out: dict[str, Any] = {
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        "settings": {
            "requests": args.requests,
            "warmup": args.warmup,
            "seconds": args.seconds,
            "block_s": args.block,
            "concurrency": args.concurrency,
            "memory": args.memory,
            "embedding": args.embedding if args.memory else None,
            "accounting": args.accounting,
            "outbound_proxy": args.outbound_proxy,
        },
        "targets": {},
    }
    for t in targets:
        row: dict[str, Any] = {
            "latency_p50_ms": pct(t.latency, 0.50) * 1e3,
            "latency_p99_ms": pct(t.latency, 0.99) * 1e3,
            "latency_mean_ms": statistics.fmean(t.latency) * 1e3,
            "responses_p50_ms": pct(t.responses_latency, 0.50) * 1e3,
            "responses_p99_ms": pct(t.responses_latency, 0.99) * 1e3,
            "messages_p50_ms": pct(t.messages_latency, 0.50) * 1e3,
            "messages_p99_ms": pct(t.messages_latency, 0.99) * 1e3,
            "ttfb_p50_ms": pct(t.ttfb, 0.50) * 1e3,
            "ttfb_p99_ms": pct(t.ttfb, 0.99) * 1e3,
            "rps": t.done / t.busy_s if t.busy_s else 0.0,
            "cpu_ms_per_request": t.cpu_s / t.done * 1e3 if t.cpu_s is not None and t.done else None,
            "failed": t.failed,
            "idle_rss_mb": t.rss_mb,
            "ready_rss_mb": t.ready_rss_mb,
            "final_rss_mb": t.final_rss_mb,
        }
        if t is not direct:
            d = out["targets"][direct.name]
            row["added_p50_ms"] = row["latency_p50_ms"] - d["latency_p50_ms"]
            row["added_p99_ms"] = row["latency_p99_ms"] - d["latency_p99_ms"]
            row["added_ttfb_p50_ms"] = row["ttfb_p50_ms"] - d["ttfb_p50_ms"]
            row["added_ttfb_p99_ms"] = row["ttfb_p99_ms"] - d["ttfb_p99_ms"]
            row["throughput_ratio"] = row["rps"] / d["rps"] if d["rps"] else 0.0
            for kind in (k for k in COMPARED if k in t.kinds):
                row[f"added_{kind}_p50_ms"] = row[f"{kind}_p50_ms"] - d[f"{kind}_p50_ms"]
                row[f"added_{kind}_p99_ms"] = row[f"{kind}_p99_ms"] - d[f"{kind}_p99_ms"]
                row[f"{kind}_vs_chat_parts"] = parts = added_ratios(t, direct, args.parts, kind)
                row[f"{kind}_vs_chat_added"] = statistics.median(parts)
        if t.name == "via-proxy":  # what the tunnel adds to Paperclip itself
            p = out["targets"]["paperclip"]
            row["tunnel_added_p50_ms"] = row["latency_p50_ms"] - p["latency_p50_ms"]
            row["tunnel_added_ttfb_p50_ms"] = row["ttfb_p50_ms"] - p["ttfb_p50_ms"]
        out["targets"][t.name] = row
    out["goals"] = goals(out["targets"])
    return out


def added_ratios(t: Target, direct: Target, parts: int, kind: str = "responses") -> list[float]:
    """``kind``'s (``/responses``', ``/messages``') added time over chat's, in each of ``parts``
    consecutive slices of the run.

    Like for like: what a request adds is its time minus the direct request
    to the same endpoint in the same round (``rounds`` gives each target one
    of each per round), so a burst of load weighs on both sides of one
    difference; per slice, the median of those differences for each endpoint.
    The median of the slices' ratios is not swayed by one noisy slice, and
    their spread says how far to trust it.
    """
    n = len(t.latency) // parts
    ratios = []
    for j in range(parts):
        cut = slice(j * n, (j + 1) * n)
        chat = statistics.median(p - d for p, d in zip(t.latency[cut], direct.latency[cut], strict=True))
        other = statistics.median(
            p - d for p, d in zip(samples(t, kind)[cut], samples(direct, kind)[cut], strict=True)
        )
        ratios.append(other / chat if chat > 0 else float("inf"))
    return ratios


def goals(rows: dict[str, Any]) -> dict[str, Any]:
    p = rows["paperclip"]
    checks: dict[str, Any] = {
        f"added p50 <= {GOALS['added_p50_ms']} ms": p["added_p50_ms"] <= GOALS["added_p50_ms"],
        f"added p99 <= {GOALS['added_p99_ms']} ms": p["added_p99_ms"] <= GOALS["added_p99_ms"],
        f"added TTFB p50 <= {GOALS['added_ttfb_p50_ms']} ms": p["added_ttfb_p50_ms"] <= GOALS["added_ttfb_p50_ms"],
        f"throughput c=32 >= {GOALS['throughput_ratio']:.0%} of direct": p["throughput_ratio"] >= GOALS["throughput_ratio"],
        f"idle RSS <= {GOALS['idle_rss_mb']:.0f} MB": p["idle_rss_mb"] is not None and p["idle_rss_mb"] <= GOALS["idle_rss_mb"],
        **{f"added on /{kind} <= {GOALS[kind + '_vs_chat_added']:.2f} x chat's (paired, median of slices)":
           p[f"{kind}_vs_chat_added"] <= GOALS[f"{kind}_vs_chat_added"] for kind in COMPARED},
    }
    if "quiet" in rows:
        cost = p["latency_p50_ms"] - rows["quiet"]["latency_p50_ms"]
        checks[f"log line + usage add <= 0.1 ms p50 (measured {cost:+.3f} ms)"] = cost <= 0.1
    if "litellm" in rows:
        checks["added p50 <= half LiteLLM's"] = p["added_p50_ms"] <= rows["litellm"]["added_p50_ms"] / 2
    return checks


def table(result: dict[str, Any]) -> str:
    rows = result["targets"]
    names = list(rows)
    s = result["settings"]
    lines = [
        f"Paperclip overhead — {s['requests']} requests per target at c=1, {s['seconds']:g} s per target at "
        f"c={s['concurrency']}; {result['machine']['cpus']} CPUs; memory layer {'on' if s['memory'] else 'off'}",
        "",
        f"{'':32}" + "".join(f"{n:>12}" for n in names) + "".join(f"{'+' + n:>14}" for n in names[1:]),
    ]

    def line(label: str, key: str, added: str | None, fmt: str = "{:.2f}") -> None:
        def cell(n: str, k: str, width: int) -> str:
            v = rows[n].get(k)
            return f"{fmt.format(v) if v is not None else '-':>{width}}"
        extra = "".join(cell(n, added, 14) for n in names[1:]) if added else ""
        lines.append(f"{label:32}" + "".join(cell(n, key, 12) for n in names) + extra)

    line("non-stream latency p50 (ms)", "latency_p50_ms", "added_p50_ms")
    line("non-stream latency p99 (ms)", "latency_p99_ms", "added_p99_ms")
    for kind in COMPARED:
        line(f"/{kind} latency p50 (ms)", f"{kind}_p50_ms", f"added_{kind}_p50_ms")
        line(f"/{kind} latency p99 (ms)", f"{kind}_p99_ms", f"added_{kind}_p99_ms")
        for n in (n for n in names[1:] if f"{kind}_vs_chat_parts" in rows[n]):
            parts = ", ".join(f"{r:.2f}" for r in rows[n][f"{kind}_vs_chat_parts"])
            lines.append(f"{'/' + kind + ' added vs chat (' + n + ')':32}{rows[n][f'{kind}_vs_chat_added']:>12.2f}x"
                         f"  median of {len(rows[n][f'{kind}_vs_chat_parts'])} slices: {parts}")
    line("stream TTFB p50 (ms)", "ttfb_p50_ms", "added_ttfb_p50_ms")
    line("stream TTFB p99 (ms)", "ttfb_p99_ms", "added_ttfb_p99_ms")
    line(f"requests/s at c={s['concurrency']}", "rps", None, "{:.0f}")
    line(f"CPU ms per request at c={s['concurrency']}", "cpu_ms_per_request", None)
    lines.append(
        f"{'throughput vs direct':32}{'':12}"
        + "".join(f"{rows[n]['throughput_ratio']:>12.0%}" for n in names[1:])
    )
    line("idle RSS (MB)", "idle_rss_mb", None, "{:.1f}")
    line("RSS when ready (MB)", "ready_rss_mb", None, "{:.1f}")
    line("RSS after the run (MB)", "final_rss_mb", None, "{:.1f}")
    if "via-proxy" in rows:
        v = rows["via-proxy"]
        lines.append(
            f"through the CONNECT proxy vs Paperclip direct: +{v['tunnel_added_p50_ms']:.2f} ms p50, "
            f"+{v['tunnel_added_ttfb_p50_ms']:.2f} ms TTFB p50"
        )
    failed = {n: rows[n]["failed"] for n in names if rows[n]["failed"]}
    if failed:
        lines.append(f"failed requests at c={s['concurrency']}: {failed}")
    lines.append("")
    for goal, ok in result["goals"].items():
        lines.append(f"  [{'pass' if ok else 'MISS'}] {goal}")
    return "\n".join(lines)


def accounting_cost(calls: int = 20000) -> dict[str, float]:
    """Per-request time of ``Accounting.finish`` in this process: median µs with the JSON log line
    written (to /dev/null) and with it off, usage and metrics recorded in both (alternating calls)."""
    import logging

    sys.path.insert(0, str(REPO))
    from proxy import config
    from proxy.metrics import Metrics
    from proxy.server import requestlog
    from proxy.server.accounting import Accounting, Finished
    from proxy.tenancy import KeyRing

    settings = config.from_dict({"tenants": {"bench": {"api_keys": [PROXY_KEY]}}, "server": {"log_format": "json"}}, env={})
    accounting = Accounting(settings, Metrics())
    tenant = KeyRing(settings).tenant_for(PROXY_KEY)
    tail = json.dumps({"choices": [{"message": {"content": "hi " * 200}}],
                       "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}).encode()
    handler = requestlog.configure(settings.server)
    devnull = open(os.devnull, "w")  # noqa: SIM115 (closed below)
    handler.setStream(devnull)
    root = logging.getLogger("paperclip")
    times: dict[bool, list[float]] = {True: [], False: []}
    for i in range(calls):
        on = i % 2 == 0
        root.setLevel(logging.INFO if on else logging.WARNING)
        done = Finished("chat", "200", time.perf_counter(), tenant=tenant, user="u", session="s", trace="t",
                        model=MODEL, tokens_in=100, tokens_forwarded=90, memories=2, added_s=0.001,
                        upstream_s=0.01, tail=tail)
        started = time.perf_counter()
        accounting.finish(done)
        times[on].append(time.perf_counter() - started)
    root.handlers.clear()
    devnull.close()
    return {"with_log_us": statistics.median(times[True]) * 1e6,
            "usage_and_metrics_us": statistics.median(times[False]) * 1e6}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=2000, help="requests per target at c=1, for each of non-stream and stream")
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=10.0, help="seconds per target at c=--concurrency")
    parser.add_argument("--block", type=float, default=2.5, help="length of one alternating block at c=--concurrency")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--parts", type=int, default=5, help="slices of the c=1 run, each giving a /responses vs chat ratio")
    parser.add_argument("--memory", action="store_true", help="turn Paperclip's memory and context layers on")
    parser.add_argument("--embedding", default="bundled", help="embedding.model with --memory (bundled, hash, ...)")
    parser.add_argument("--peer", choices=["litellm"], action="append", default=[])
    parser.add_argument("--accounting", action="store_true", help="also run Paperclip without its log line and usage")
    parser.add_argument(
        "--outbound-proxy", action="store_true", help="https upstream, and a Paperclip reaching it through a CONNECT proxy"
    )
    parser.add_argument("--litellm-venv", type=Path, default=Path.home() / ".cache" / "paperclip-bench" / "venv-litellm")
    parser.add_argument("--compare", type=Path, default=None, help="another checkout's Paperclip beside this one's")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "overhead.json")
    args = parser.parse_args(argv)

    with ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="paperclip-bench-")))
        up_port, proxy_port = free_port(), free_port()
        tls: dict[str, str] = {}
        args.verify = True
        up_cmd = [sys.executable, str(HERE / "upstream.py"), "--port", str(up_port)]
        if args.outbound_proxy:
            ca = make_ca(tmp / "pki")
            cert, key = issue(ca, "upstream", server=True)
            up_cmd += ["--ssl-certfile", str(cert), "--ssl-keyfile", str(key)]
            tls = {"ca_file": str(ca[0])}
            args.verify = ssl.create_default_context(cafile=str(ca[0]))
        upstream_url = f"{'https' if tls else 'http'}://127.0.0.1:{up_port}/v1"
        up = start(stack, up_cmd, tmp / "upstream.log")
        wait_until_up(upstream_url + "/models", up, "the upstream", 30, tmp / "upstream.log", args.verify)

        cfg = proxy_config(tmp, upstream_url, proxy_port, args.memory, args.embedding, **tls)
        level = "info" if args.accounting else "warning"
        proxy = start(stack, [sys.executable, "-m", "proxy", "serve", "--config", str(cfg), "--log-level", level], tmp / "proxy.log")
        wait_until_up(f"http://127.0.0.1:{proxy_port}/healthz", proxy, "paperclip", 60, tmp / "proxy.log")
        targets = [
            Target("direct", upstream_url, {"authorization": f"Bearer {UPSTREAM_KEY}"}, up.pid),
            Target("paperclip", f"http://127.0.0.1:{proxy_port}/v1", {"authorization": f"Bearer {PROXY_KEY}"}, proxy.pid),
        ]
        targets[1].rss_mb = rss_mb(proxy.pid)  # idle: up, before any request or model load
        # Measure only once the memory layer has loaded (it loads even when off: see the notes).
        wait_ready(f"http://127.0.0.1:{proxy_port}/readyz", 180)
        targets[1].ready_rss_mb = rss_mb(proxy.pid)
        if args.outbound_proxy:
            targets.append(via_proxy(stack, tmp, upstream_url, args, tls))

        if args.compare is not None:
            targets.append(compared_proxy(stack, tmp, upstream_url, args, level, tls))

        if args.accounting:
            port = free_port()
            qcfg = proxy_config(tmp, upstream_url, port, args.memory, args.embedding, name="quiet", **tls)
            quiet = start(stack, [sys.executable, str(HERE / "quiet_proxy.py"), "--config", str(qcfg), "--port", str(port)], tmp / "quiet.log")
            wait_until_up(f"http://127.0.0.1:{port}/healthz", quiet, "quiet paperclip", 60, tmp / "quiet.log")
            wait_ready(f"http://127.0.0.1:{port}/readyz", 180)
            t = Target("quiet", f"http://127.0.0.1:{port}/v1", {"authorization": f"Bearer {PROXY_KEY}"}, quiet.pid)
            t.rss_mb = t.ready_rss_mb = rss_mb(quiet.pid)
            targets.append(t)

        if "litellm" in args.peer:
            exe = litellm_venv(args.litellm_venv)
            port = free_port()
            lcfg = litellm_config(tmp, upstream_url)
            env = {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_TELEMETRY": "False", "LITELLM_LOG": "ERROR"}
            peer = start(stack, [str(exe), "--config", str(lcfg), "--host", "127.0.0.1", "--port", str(port), "--num_workers", "1"], tmp / "litellm.log", env)
            wait_until_up(f"http://127.0.0.1:{port}/health/liveliness", peer, "litellm", 180, tmp / "litellm.log")
            t = Target("litellm", f"http://127.0.0.1:{port}/v1", {"authorization": f"Bearer {LITELLM_KEY}"}, peer.pid)
            t.rss_mb = t.ready_rss_mb = rss_mb(peer.pid)
            targets.append(t)

        uvloop.run(measure(targets, args))
        for t in targets[1:]:
            assert t.pid is not None
            t.final_rss_mb = rss_mb(t.pid)
        result = summarise(targets, args)
        if args.accounting:
            result["accounting_in_process"] = cost = accounting_cost()
            result["goals"][f"log line + usage <= 0.1 ms per request in process (measured {cost['with_log_us']:.1f} µs)"] = (
                cost["with_log_us"] <= 100.0)

    print()
    print(table(result))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"\nwritten to {args.out}")
    return 0


def via_proxy(stack: ExitStack, tmp: Path, upstream_url: str, args: argparse.Namespace, tls: dict[str, str]) -> Target:
    """A second Paperclip whose upstream.proxy is a loopback CONNECT proxy in its own process."""
    relay_port, port = free_port(), free_port()
    relay = start(stack, [sys.executable, "-m", "tests.connect_proxy", "--port", str(relay_port)], tmp / "relay.log")
    cfg = proxy_config(
        tmp, upstream_url, port, args.memory, args.embedding, "via-proxy", proxy=f"http://127.0.0.1:{relay_port}", **tls
    )
    proc = start(stack, [sys.executable, "-m", "proxy", "serve", "--config", str(cfg), "--log-level", "warning"], tmp / "via.log")
    wait_until_up(f"http://127.0.0.1:{port}/healthz", proc, "paperclip via the proxy", 60, tmp / "via.log")
    if relay.poll() is not None:
        raise SystemExit(f"the CONNECT proxy exited: {(tmp / 'relay.log').read_text()[-2000:]}")
    wait_ready(f"http://127.0.0.1:{port}/readyz", 180)
    t = Target("via-proxy", f"http://127.0.0.1:{port}/v1", {"authorization": f"Bearer {PROXY_KEY}"}, proc.pid)
    t.rss_mb = t.ready_rss_mb = rss_mb(proc.pid)
    return t


def wait_ready(url: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while httpx.get(url, timeout=5).status_code != 200:
        if time.monotonic() > deadline:
            raise SystemExit(f"paperclip was not ready in {timeout:.0f} s: {httpx.get(url).text}")
        time.sleep(0.2)


if __name__ == "__main__":
    raise SystemExit(main())
