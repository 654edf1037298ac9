"""N concurrent streaming clients for T seconds: direct, Paperclip with memory off, and with memory on.

Usage (from the repo root, in its virtualenv)::

    python bench/load.py                           # 50 streams x 60 s per target, bundled model
    python bench/load.py -c 50 -t 60 --embedding hash --profile --pin   # where the CPU goes
    python bench/load.py --compare ../before --rounds 2   # and another checkout's proxies, in turn

Processes on loopback: the fixed-answer upstream (``bench/upstream.py``), two
proxies (``python -m proxy serve``: memory and context off, and on), this
load generator, and a ``/healthz`` poller of its own. Each target gets ``-t``
seconds in turn, in the same run: ``-c`` clients, each a conversation of its
own user that grows by one user message and the streamed answer per request
(so the memory layer indexes, extracts and compresses as it would), reading
every stream to its end. Measured per target: requests, errors (non-200, cut
streams, exceptions), requests/s, full-stream latency p50/p99 and what the
proxy adds to the direct figures, ``/healthz`` p50/p99/max polled every 50 ms
while it runs, and the proxy's RSS every second (growth after the first
minute: RSS at the end over RSS at 60 s), and its CPU time and its threads'
context switches per request (steadier than the timings when the machine is
busy: what the process did, not how long it waited for a core). The CPU is
counted until the proxy has gone quiet after its clients stop (its CPU under
``QUIET_CPU_S`` a second, at most ``DRAIN_MAX_S``), so the work a turn causes
after its response (indexing, extraction, compression) is in it; ``drain_s``
says how long that took. ``--profile`` records each proxy with py-spy and prints where its time goes, by
Python function. ``--perf`` records each proxy with Linux ``perf`` (when installed) and prints its CPU by
library and the kernel's share: what the process really ran on a core. py-spy counts a thread that is
runnable but waiting for a core as busy in the frame it was in: on a shared core, the write that wakes
the upstream (which then takes the core) got 20–30% of memory off's samples, and ``Runner.run`` (the
loop itself) another quarter, where perf puts the whole kernel at 10%. ``--pin`` gives the proxies a
core of their own (the last; the upstream, the clients and the poller share the others), and the write
falls to ~1%: profile with it. Its requests/s are not comparable with a run without it.

``--compare DIR`` also starts the proxies of the checkout in ``DIR`` (with
its own ``.venv``), named ``memory on @<DIR's name>`` and so on: before/after
pairs in one run. ``--variant LABEL=ARGS`` (repeatable) also starts a memory-on
proxy of this checkout with the concurrency model's knobs set by ARGS
(``bench/variant_proxy.py``: ``--prepares 2 --records 2 --switch-ms 5``, ``--unbounded``),
named ``memory on [LABEL]``. ``--rounds N`` runs the whole sequence N times, the builds'
order reversed every other round (ABBA), each round with users of its own.
The RSS curves are plotted to ``--plot`` when matplotlib is installed (``pip install -e .[bench]``).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from large_body import start_poller
from overhead import (
    PROXY_KEY,
    cpu_s,
    free_port,
    proxy_config,
    rss_mb,
    start,
    wait_ready,
    wait_until_up,
)

MODEL = "gpt-4o-mini"
# After the clients stop, the proxy is quiet once a second passes with less CPU than this.
QUIET_CPU_S = 0.02
DRAIN_MAX_S = 60.0
FACTS = ["my flight is BA117 on March 3", "I am allergic to peanuts", "my manager is called Priya",
         "the budget is 42,000 euros", "I prefer window seats", "my daughter turns 7 in June"]


@dataclass
class Run:
    name: str
    url: str
    pid: int | None
    latencies: list[float] = field(default_factory=list)
    errors: collections.Counter[str] = field(default_factory=collections.Counter)
    rss: list[tuple[float, float]] = field(default_factory=list)
    healthz: list[float] = field(default_factory=list)
    seconds: float = 0.0
    log: Path | None = None
    # The process's CPU seconds and its threads' context switches (voluntary, preempted) during the run.
    work: tuple[float, int, int] = (0.0, 0, 0)
    drain_s: float = 0.0  # how long the proxy kept working after its clients stopped
    users: str = "load-user"  # the clients' user ids start with this (one set per round)


async def client_loop(run: Run, client: httpx.AsyncClient, n: int, deadline: float) -> None:
    messages: list[dict[str, str]] = [{"role": "system", "content": "You are a helpful travel assistant."}]
    turn = 0
    while time.perf_counter() < deadline:
        turn += 1
        text = f"Turn {turn}: {FACTS[(n + turn) % len(FACTS)]}. What should I pack for a trip to city {turn % 17}?"
        messages.append({"role": "user", "content": text})
        body = {"model": MODEL, "messages": messages, "stream": True, "user": f"{run.users}-{n}"}
        started = time.perf_counter()
        reply = ""
        try:
            async with client.stream("POST", run.url + "/v1/chat/completions", json=body,
                                     headers={"authorization": f"Bearer {PROXY_KEY}"}) as r:
                if r.status_code != 200:
                    run.errors[f"status {r.status_code}"] += 1
                    await r.aread()
                    continue
                done = False
                async for line in r.aiter_lines():
                    if line == "data: [DONE]":
                        done = True
                    elif line.startswith("data: "):
                        delta = json.loads(line[6:])["choices"][0]["delta"]
                        reply += delta.get("content") or ""
                if not done:
                    run.errors["cut stream"] += 1
                    continue
        except (httpx.HTTPError, ValueError, KeyError) as exc:
            run.errors[type(exc).__name__] += 1
            continue
        run.latencies.append((time.perf_counter() - started) * 1000)
        messages.append({"role": "assistant", "content": reply})


async def sample_rss(run: Run, started: float, deadline: float) -> None:
    while run.pid is not None and time.perf_counter() < deadline:
        run.rss.append((time.perf_counter() - started, rss_mb(run.pid)))
        await asyncio.sleep(1.0)


def cpu_and_switches(pid: int) -> tuple[float, int, int]:
    """``pid``'s CPU seconds so far (user + system) and its live threads' context switches:
    voluntary (waiting: the GIL, a queue, a socket) and not (preempted by the OS)."""
    cpu = cpu_s(pid)
    counts = collections.Counter[str]()
    for status in Path(f"/proc/{pid}/task").glob("*/status"):
        try:
            lines = status.read_text().splitlines()
        except OSError:  # the thread ended
            continue
        for line in lines:
            name, _, value = line.partition(":")
            if name.endswith("ctxt_switches"):
                counts[name] += int(value)
    return cpu, counts["voluntary_ctxt_switches"], counts["nonvoluntary_ctxt_switches"]


async def load(run: Run, clients: int, seconds: float) -> None:
    poller = start_poller(run.url, every_s=0.05)
    before = cpu_and_switches(run.pid) if run.pid is not None else (0.0, 0, 0)
    started = time.perf_counter()
    deadline = started + seconds
    # Idle connections are dropped after 2 s, below uvicorn's 5 s keep-alive: at httpx's default
    # (5 s, the same) a connection the server is closing can be picked for the next request.
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients, keepalive_expiry=2.0)
    async with httpx.AsyncClient(timeout=120, limits=limits) as client:
        await asyncio.gather(sample_rss(run, started, deadline),
                             *(client_loop(run, client, n, deadline) for n in range(clients)))
    run.seconds = time.perf_counter() - started
    if run.pid is not None:
        run.drain_s = await quiet(run.pid)
        cpu, waited, preempted = cpu_and_switches(run.pid)
        run.work = (cpu - before[0], waited - before[1], preempted - before[2])
    run.healthz = sorted(json.loads(poller.communicate("")[0]))


async def quiet(pid: int) -> float:
    """Seconds until ``pid`` spends less than ``QUIET_CPU_S`` of CPU in a second (its background work done)."""
    started = time.perf_counter()
    last = cpu_and_switches(pid)[0]
    while time.perf_counter() - started < DRAIN_MAX_S:
        await asyncio.sleep(1.0)
        now = cpu_and_switches(pid)[0]
        if now - last < QUIET_CPU_S:
            return round(time.perf_counter() - started - 1.0, 1)
        last = now
    return round(time.perf_counter() - started, 1)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))] if ordered else float("nan")


def summary(run: Run, direct: Run | None) -> dict[str, Any]:
    p50, p99 = statistics.median(run.latencies) if run.latencies else float("nan"), pct(run.latencies, 0.99)
    row: dict[str, Any] = {
        "target": run.name,
        "requests": len(run.latencies) + sum(run.errors.values()),
        "errors": sum(run.errors.values()),
        "error_kinds": dict(run.errors),
        "requests_per_s": round(len(run.latencies) / run.seconds, 1),
        "p50_ms": round(p50, 1),
        "p99_ms": round(p99, 1),
        "healthz_p50_ms": round(statistics.median(run.healthz), 1) if run.healthz else None,
        "healthz_p99_ms": round(pct(run.healthz, 0.99), 1),
        "healthz_max_ms": round(run.healthz[-1], 1) if run.healthz else None,
    }
    if run.latencies:  # the process's own work per request: steadier than timings on a busy machine
        cpu, waited, preempted = run.work
        row["cpu_ms_per_request"] = round(1000 * cpu / len(run.latencies), 2)
        row["switches_per_request"] = round(waited / len(run.latencies), 1)
        row["preemptions_per_request"] = round(preempted / len(run.latencies), 2)
        row["drain_s"] = run.drain_s
    if direct is not None and direct is not run:
        row["added_p50_ms"] = round(p50 - statistics.median(direct.latencies), 1)
        row["added_p99_ms"] = round(p99 - pct(direct.latencies, 0.99), 1)
    if run.rss:
        at_minute = next((mb for t, mb in run.rss if t >= 60), None)
        row["rss_start_mb"] = round(run.rss[0][1], 1)
        row["rss_end_mb"] = round(run.rss[-1][1], 1)
        if at_minute is not None:
            row["rss_60s_mb"] = round(at_minute, 1)
            row["rss_growth_after_60s_pct"] = round(100 * (run.rss[-1][1] / at_minute - 1), 1)
    return row


def plot(runs: list[Run], path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot (pip install -e .[bench])")
        return
    fig, ax = plt.subplots(figsize=(8, 4))
    for run in runs:
        if run.rss:
            ax.plot([t for t, _ in run.rss], [mb for _, mb in run.rss], label=run.name)
    ax.set_xlabel("seconds")
    ax.set_ylabel("proxy RSS (MB)")
    ax.set_title("RSS under load")
    ax.legend()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100, bbox_inches="tight")
    print(f"RSS plot written to {path}")


def hot_frames(raw: Path, top: int = 12) -> tuple[list[tuple[str, float]], list[tuple[str, float]], list[tuple[str, float]]]:
    """From py-spy's collapsed stacks (with thread ids): self time by function, time by Paperclip
    function on the stack, and time by thread (the server's loop, the pipeline's loop, workers), in %."""
    total = 0
    leaf: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    threads: collections.Counter[str] = collections.Counter()
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        n = int(count)
        total += n
        frames = stack.split(";")[1:]  # the first is the thread's id
        if not frames:
            continue
        leaf[frames[-1]] += n
        threads[thread_kind(frames)] += n
        for frame in {f for f in frames if "proxy/" in f and "cli.py" not in f and "__main__" not in f}:
            inclusive[frame] += n
    if not total:
        return [], [], []

    def shares(counter: collections.Counter[str], k: int) -> list[tuple[str, float]]:
        return [(f, round(100 * n / total, 1)) for f, n in counter.most_common(k)]

    return shares(leaf, top), shares(inclusive, top), shares(threads, 6)


def thread_kind(frames: list[str]) -> str:
    stack = ";".join(frames)
    if "PipelineThread._serve" in stack:
        return "pipeline loop (its own thread)"
    if "concurrent/futures/thread.py" in stack or "threading.py" in stack:
        return "worker threads (store, embedder, to_thread)"
    if "asyncio/runners.py" in stack or "uvicorn" in stack:
        return "server loop (sockets, relay)"
    return "other"


@dataclass(frozen=True)
class Build:
    """A checkout whose proxies are measured: its folder and the Python of its virtualenv."""

    name: str  # "" for this checkout
    folder: Path
    python: str


def builds(compare: Path | None) -> list[Build]:
    here = Build("", Path(__file__).resolve().parent.parent, sys.executable)
    if compare is None:
        return [here]
    other = compare.resolve()
    python = other / ".venv" / "bin" / "python"
    if not python.exists():
        raise SystemExit(f"{other} has no .venv: make one there first (pip install -e '.[bench]')")
    return [here, Build(other.name, other, str(python))]


def start_proxy(
    stack: ExitStack, build: Build, tmp: Path, up_url: str, memory: bool, embedding: str, variant: str = ""
) -> Run:
    label = ("memory on" if memory else "memory off") + (f" @{build.name}" if build.name else "")
    label, knobs = (f"{label} [{variant.partition('=')[0]}]", variant.partition("=")[2].split()) if variant else (label, [])
    port = free_port()
    folder = tmp / "".join(c if c.isalnum() else "-" for c in label)
    folder.mkdir()
    cfg = proxy_config(folder, up_url, port, memory, embedding)
    cmd = ([build.python, "bench/variant_proxy.py", "--config", str(cfg), "--port", str(port), *knobs] if variant
           else [build.python, "-m", "proxy", "serve", "--config", str(cfg)])
    proc = start(stack, cmd, folder / "proxy.log", cwd=build.folder)
    url = f"http://127.0.0.1:{port}"
    wait_until_up(url + "/healthz", proc, "paperclip", 60, folder / "proxy.log")
    wait_ready(url + "/readyz", 300)
    return Run(label, url, proc.pid, log=folder / "proxy.log")


def order(runs: list[Run], rounds: int) -> list[tuple[int, Run]]:
    """(round, run) in the order measured: direct first in each round, then off before on, the builds
    alternating within each and their order reversed every other round (ABBA), so that drift over
    the run falls on both builds alike."""
    out = []
    for r in range(rounds):
        out.append((r, runs[0]))
        for kind in ("memory off", "memory on"):
            same = [run for run in runs[1:] if run.name.startswith(kind)]
            out += [(r, run) for run in (same if r % 2 == 0 else same[::-1])]
    return out


def cores(wanted: bool) -> set[int]:
    """``--pin``: the core kept for the proxies (the last), this process and what it starts after moved
    to the others; an empty set without ``--pin``."""
    if not wanted:
        return set()
    mine = sorted(os.sched_getaffinity(0))
    if len(mine) < 2:
        raise SystemExit("--pin needs two cores at least")
    os.sched_setaffinity(0, set(mine[:-1]))  # inherited by the upstream, the poller and py-spy
    return {mine[-1]}


def pin(pid: int | None, cpus: set[int]) -> None:
    """Every thread of ``pid`` on ``cpus`` (a thread it starts later inherits its starter's cores)."""
    for task in Path(f"/proc/{pid}/task").iterdir() if pid is not None else []:
        with contextlib.suppress(OSError):  # a thread that ended meanwhile
            os.sched_setaffinity(int(task.name), cpus)


def profile(spy: subprocess.Popen[bytes], raw: Path) -> None:
    spy.wait(timeout=60)
    own, within, by_thread = hot_frames(raw)
    print(f"where the proxy's CPU goes (% of py-spy samples of the thread holding the GIL; raw: {raw})")
    print(" by thread:")
    for kind, share in by_thread:
        print(f"  {share:5.1f}%  {kind}")
    print(" self:")
    for frame, share in own:
        print(f"  {share:5.1f}%  {frame}")
    print(" inside (Paperclip functions on the stack):")
    for frame, share in within:
        print(f"  {share:5.1f}%  {frame}")


def perf_split(data: Path, top: int = 8) -> None:
    """``perf report`` of ``data``: the proxy's CPU by library (the interpreter, the kernel, SQLite, numpy…)
    and the kernel's own functions, in % of its samples."""
    for sort, title, extra in (("dso", "by library", []), ("sym", "the kernel's part", ["--dso", "[kernel.kallsyms]"])):
        out = subprocess.run(["perf", "report", "-i", str(data), "--stdio", "--no-children", "--sort", sort,
                              "-g", "none", *extra], capture_output=True, text=True, check=False).stdout
        rows = [ln.strip() for ln in out.splitlines() if ln.strip() and not ln.startswith("#")]
        print(f" {title}:")
        for row in rows[:top]:
            print(f"   {row}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-c", "--clients", type=int, default=50)
    parser.add_argument("-t", "--seconds", type=float, default=60.0)
    parser.add_argument("--embedding", default="bundled")
    parser.add_argument("--profile", action="store_true", help="py-spy every proxy")
    parser.add_argument("--perf", action="store_true", help="Linux perf every proxy: CPU by library")
    parser.add_argument("--pin", action="store_true", help="the proxies on a core of their own (for --profile)")
    parser.add_argument("--targets", default="direct,off,on", help="a subset of direct,off,on")
    parser.add_argument("--compare", type=Path, default=None, help="another checkout to measure beside this one")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--variant", action="append", default=[], help="LABEL=ARGS for bench/variant_proxy.py")
    parser.add_argument("--plot", type=Path, default=Path("bench/results/load_rss.png"))
    parser.add_argument("--out", type=Path, default=Path("bench/results/load.json"))
    args = parser.parse_args(argv)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    proxy_core = cores(args.pin)
    with ExitStack() as stack, tempfile.TemporaryDirectory() as tmp_:
        tmp = Path(tmp_)
        up_port = free_port()
        upstream = start(stack, [sys.executable, "bench/upstream.py", "--port", str(up_port)], tmp / "upstream.log")
        up_url = f"http://127.0.0.1:{up_port}/v1"
        wait_until_up(up_url + "/models", upstream, "upstream", 30, tmp / "upstream.log")
        wanted = set(args.targets.split(","))
        runs = [Run("direct", f"http://127.0.0.1:{up_port}", upstream.pid)]  # always: the baseline
        for memory in (False, True):
            if ("on" if memory else "off") in wanted:
                runs += [start_proxy(stack, b, tmp, up_url, memory, args.embedding) for b in builds(args.compare)]
        here = builds(None)[0]
        runs += [start_proxy(stack, here, tmp, up_url, True, args.embedding, v) for v in args.variant]
        for run in runs[1:] if proxy_core else []:
            pin(run.pid, proxy_core)
        rows: list[dict[str, Any]] = []
        direct: Run | None = None
        plotted = []  # the first round's runs
        for r, template in order(runs, args.rounds):
            run = Run(template.name, template.url, template.pid, log=template.log, users=f"load-user-r{r}")
            spy = None
            raw = args.out.with_suffix(f".{''.join(c if c.isalnum() else '-' for c in run.name)}.r{r}.profile.txt")
            if args.profile and run.name != "direct":
                spy = subprocess.Popen([str(Path(sys.executable).parent / "py-spy"), "record", "--pid", str(run.pid),
                                        "--format", "raw", "--rate", "50", "--gil", "--threads", "--output", str(raw),
                                        "--duration", str(int(args.seconds))],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            perf = None
            if args.perf and run.name != "direct" and shutil.which("perf"):
                perf = subprocess.Popen(["perf", "record", "-F", "499", "-p", str(run.pid), "-o", str(raw.with_suffix(".perf")),
                                         "--", "sleep", str(int(args.seconds))],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            asyncio.run(load(run, args.clients, args.seconds))
            direct = run if run.name == "direct" else direct
            rows.append(summary(run, direct) | {"round": r, "load_average": round(os.getloadavg()[0], 2)})
            if direct is not None and run is not direct and direct.latencies:
                rows[-1]["rps_vs_direct"] = round(len(run.latencies) / run.seconds / (len(direct.latencies) / direct.seconds), 2)
            print(json.dumps(rows[-1]), flush=True)
            if run.errors and run.log is not None:  # what the proxy said about them
                lines = [ln for ln in run.log.read_text(errors="replace").splitlines() if "ERROR" in ln or "WARNING" in ln or "Error" in ln]
                print("\n".join(lines[:20]))
            if spy is not None:
                profile(spy, raw)
            if perf is not None:
                perf.wait(timeout=60)
                print(f"where the proxy's CPU goes (perf, % of its samples on a core; raw: {raw.with_suffix('.perf')})")
                perf_split(raw.with_suffix(".perf"))
            if r == 0:
                plotted.append(run)
        plot(plotted, args.plot)
        args.out.write_text(json.dumps({"clients": args.clients, "seconds": args.seconds, "rounds": args.rounds,
                                        "embedding": args.embedding, "targets": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
