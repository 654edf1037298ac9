"""How bench/scale.py measures replicas: timed windows, the CPU they cost, the probes, the summary.

How a mix is measured: three replicas run throughout; "1 replica" sends
the mix to the first of them only (the other two idle), "3 replicas" round
robin (or by user) to all three. After a request per replica and user and
``2 x --warmup`` seconds of the mix on all three, untimed (what each
replica learns once: the users' indexes, a line's token count), the two
alternate for ``--samples`` pairs in the order 1, 3, 3, 1, 1, 3, ..., each
timed window of ``--seconds`` preceded by ``--warmup`` seconds of the same
traffic, untimed (the replica that was idle catches up with what the
others wrote meanwhile). So both arms see the same machine,
the same database and the same growing index, within seconds of each
other, and one disturbed window cannot decide the figure. Busy cores = CPU
seconds of the replicas that receive the requests and of PostgreSQL's
processes (those that exited in the window too: autovacuum workers) over
the wall time; requests/s per busy core is the figure that says whether
replicas scale with cores. Reported: each arm's medians over its windows,
and "3 vs 1" = the median of the pairs' ratios (a pair = two neighbouring
windows), with their range. Printed with them, to tell a run's causes
apart: the database's share of the busy cores, the checkpoints and
autovacuum runs that landed in each arm's windows, the CPU time of a fixed
piece of work in the load generator (what a CPU second was worth), and the
cores the replicas and the database take idle.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import psutil


def cpu_seconds(pids: list[int]) -> float:
    """CPU seconds of these processes and their children, the children that exited included.

    PostgreSQL's autovacuum workers come and go: counting only the live ones,
    a worker that ran inside a window would be missed, and one that started
    before it and exited during it would subtract its CPU from the window's.
    """
    total = 0.0
    for pid in pids:
        try:
            proc = psutil.Process(pid)
            for p in [proc, *proc.children(recursive=True)]:
                t = p.cpu_times()
                total += t.user + t.system + t.children_user + t.children_system
        except psutil.NoSuchProcess:
            pass
    return total


Route = Callable[[str], str]
"""The replica URL a request of this user goes to."""


def round_robin(urls: list[str]) -> Route:
    targets = itertools.cycle(urls)
    return lambda user: next(targets)


def by_user(urls: list[str]) -> Route:
    return lambda user: urls[int(hashlib.sha256(user.encode()).hexdigest(), 16) % len(urls)]


def arms(samples: int) -> list[int]:
    """How many replicas each timed window sends to: pairs 1, 3 / 3, 1 / 1, 3 ... (drift cancels)."""
    return [n for i in range(samples) for n in ((1, 3) if i % 2 == 0 else (3, 1))]


def spy(pids: list[int], folder: str | None, seconds: float, name: str) -> list[subprocess.Popen[bytes]]:
    """With ``--py-spy FOLDER``: each replica's stacks through the window, 50 a second (raw, one file each)."""
    if folder is None:
        return []
    Path(folder).mkdir(parents=True, exist_ok=True)
    command = [str(Path(sys.executable).with_name("py-spy")), "record", "--nonblocking", "-r", "50",
               "-d", str(int(seconds)), "-f", "raw"]
    return [subprocess.Popen([*command, "-o", f"{folder}/{name}-{pid}.txt", "-p", str(pid)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for pid in pids]


async def run_for(request: Callable[[], Awaitable[None]], seconds: float, clients: int) -> int:
    """``clients`` concurrent loops of ``request`` for ``seconds``: how many were done."""
    done, deadline = 0, time.perf_counter() + seconds

    async def worker() -> None:
        nonlocal done
        while time.perf_counter() < deadline:
            await request()
            done += 1

    await asyncio.gather(*(worker() for _ in range(clients)))
    return done


async def window(request: Callable[[], Awaitable[None]], replica_pids: list[int], db_pids: list[int],
                 seconds: float, clients: int, probe: Probe | None = None) -> dict[str, float]:
    """``run_for`` timed: requests/s and the CPU they cost (the replicas' and the database's)."""
    stop = asyncio.Event()
    sampled = asyncio.ensure_future(probe(stop) if probe else asyncio.sleep(0, {}))
    speed = asyncio.ensure_future(core_speed(stop))
    db0, cpu0, own0, t0 = cpu_seconds(db_pids), cpu_seconds(replica_pids), time.process_time(), time.perf_counter()
    done = await run_for(request, seconds, clients)
    wall, own = time.perf_counter() - t0, time.process_time() - own0
    stop.set()
    # After-response indexing finishes (its CPU counts too) while the probes read their last figures.
    waits, unit, _ = await asyncio.gather(sampled, speed, asyncio.sleep(2))
    db = cpu_seconds(db_pids) - db0
    cpu = cpu_seconds(replica_pids) - cpu0 + db
    busy = cpu / wall
    return {"rps": done / wall, "busy_cores": busy, "rps_per_core": done / wall / busy if busy else 0.0,
            "db_cores": db / wall, "client_cores": own / wall, "cpu_ms_per_request": cpu / done * 1000 if done else 0.0,
            "load_1min": os.getloadavg()[0], "unit_us": unit, **waits}


def work_unit() -> int:
    return sum(i * i for i in range(5000))


async def core_speed(stop: asyncio.Event) -> float:
    """Every 50 ms, the CPU time of one fixed piece of work in this process: its median, in µs.

    A CPU second is not a fixed amount of work: when both of the machine's
    (virtual) cores are busy, a core shared on the host or caches shared
    with the other core make the same work take more CPU time. This says by
    how much in each window, so a 3-vs-1 figure can be told apart from the
    machine it ran on.
    """
    times = []
    while not stop.is_set():
        t0 = time.thread_time()
        work_unit()
        times.append(time.thread_time() - t0)
        await asyncio.sleep(0.05)
    return statistics.median(times) * 1e6 if times else 0.0


Probe = Callable[[asyncio.Event], Awaitable[dict[str, float]]]
"""Samples the database until the event is set: what the window's requests waited on there."""


def database_work(url: str, lock_waits: bool) -> Probe:
    """PostgreSQL's background work that landed in the window (checkpoints, autovacuum and autoanalyze
    runs of the schema's tables) and, with ``lock_waits``, every 20 ms how many of its backends wait on
    an advisory lock (a scope's writes, ``coordination.lock_scope``), on the WAL (a commit's flush), on a
    shared-memory lock (LWLock: a buffer's pages, the WAL's insertion) and
    how many run a statement: their means over the window."""
    counters = ("SELECT (SELECT checkpoints_timed + checkpoints_req FROM pg_stat_bgwriter),"
                " (SELECT coalesce(sum(autovacuum_count + autoanalyze_count), 0) FROM pg_stat_user_tables"
                "  WHERE schemaname = current_schema())")

    async def probe(stop: asyncio.Event) -> dict[str, float]:
        import psycopg

        samples, sums = 0, [0, 0, 0, 0]
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            before = await (await conn.execute(counters)).fetchone()
            while not stop.is_set():
                if lock_waits:
                    cur = await conn.execute(
                        "SELECT count(*) FILTER (WHERE wait_event = 'advisory'),"
                        " count(*) FILTER (WHERE wait_event LIKE 'WAL%%'), count(*) FILTER (WHERE state = 'active'),"
                        " count(*) FILTER (WHERE wait_event_type = 'LWLock')"
                        " FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()")
                    row = await cur.fetchone()
                    samples, sums = samples + 1, [a + b for a, b in zip(sums, row, strict=True)]
                await asyncio.sleep(0.02)
            await asyncio.sleep(1)  # a worker's counts reach the statistics when it ends
            after = await (await conn.execute(counters)).fetchone()  # autocommit: a fresh statistics snapshot
        names = ("advisory_waiting", "wal_waiting", "active", "lwlock_waiting")
        waits = {name: total / samples for name, total in zip(names, sums, strict=True)} if samples else {}
        return {"checkpoints": after[0] - before[0], "autovacuums": float(after[1] - before[1]), **waits}
    return probe


async def idle(pids: list[int], db_pids: list[int], seconds: float = 5) -> dict[str, float]:
    """Cores the replicas (each) and the database take with no request at all: background loops."""
    await asyncio.sleep(2)  # the last request's indexing
    before = [cpu_seconds([pid]) for pid in pids], cpu_seconds(db_pids)
    await asyncio.sleep(seconds)
    return {"idle_replica_cores": max(cpu_seconds([pid]) - b for pid, b in zip(pids, before[0], strict=True)) / seconds,
            "idle_db_cores": (cpu_seconds(db_pids) - before[1]) / seconds}


TRAFFIC = (("sticky", True, True), ("many", True, False), ("one", False, False))


def summary(windows: list[dict[str, float]]) -> dict[str, Any]:
    """Each arm's medians over its windows, and the pairs' ratios of requests/s per busy core (3 / 1)."""
    out: dict[str, Any] = {}
    for n in (1, 3):
        mine = [w for w in windows if w["replicas"] == n]
        out.update({f"{k}_{n}": statistics.median(w[k] for w in mine) for k in mine[0] if k != "replicas"})
    pairs = [windows[i:i + 2] for i in range(0, len(windows) - 1, 2)]
    out["pairs"] = [next(w for w in p if w["replicas"] == 3)["rps_per_core"]
                    / next(w for w in p if w["replicas"] == 1)["rps_per_core"] for p in pairs]
    # The same ratio with each window's CPU seconds scaled to what the fixed work unit cost in it: what the
    # ratio would have been had a CPU second bought the same work in both windows (a diagnostic, not the figure).
    out["pairs_at_equal_speed"] = [
        ratio * (three.get("unit_us", 1.0) / one.get("unit_us", 1.0) if one.get("unit_us") else 1.0)
        for ratio, (one, three) in zip(out["pairs"], (sorted(p, key=lambda w: w["replicas"]) for p in pairs),
                                       strict=True)]
    out["windows"] = windows
    return out


def table(rows: list[dict[str, Any]], users: int) -> str:
    head = (f"{'store':11}{'fragments':>10}{'p50 ms':>8}{'p99 ms':>8}  {'traffic':26}{'rps 1':>7}{'cores 1':>8}"
            f"{'rps/core 1':>11}  {'rps 3':>7}{'cores 3':>8}{'rps/core 3':>11}{'3 vs 1':>8}  pairs")
    lines = [head]
    for r in rows:
        for traffic, light, sticky in TRAFFIC:
            if f"pairs_{traffic}" not in r:
                continue  # not run (--traffic)
            pairs = r[f"pairs_{traffic}"]
            label = f"{users} users, " if light else "1 user, "
            label += "by user" if sticky else "round robin"
            lines.append(
                f"{r['store']:11}{r['fragments']:>10}{r['p50_ms']:>8.1f}{r['p99_ms']:>8.1f}  {label:26}"
                f"{r[f'rps_{traffic}_1']:>7.1f}{r[f'busy_cores_{traffic}_1']:>8.2f}"
                f"{r[f'rps_per_core_{traffic}_1']:>11.1f}  {r[f'rps_{traffic}_3']:>7.1f}"
                f"{r[f'busy_cores_{traffic}_3']:>8.2f}{r[f'rps_per_core_{traffic}_3']:>11.1f}"
                f"{statistics.median(pairs):>8.2f}  {' '.join(f'{p:.2f}' for p in pairs)}")
            extra = "".join(f"; with {n}, backends in a statement {r[f'active_{traffic}_{n}']:.2f}, waiting"
                            f" on a scope's lock {r[f'advisory_waiting_{traffic}_{n}']:.3f},"
                            f" on the WAL {r[f'wal_waiting_{traffic}_{n}']:.3f},"
                            f" on a shared-memory lock {r[f'lwlock_waiting_{traffic}_{n}']:.3f}"
                            for n in (1, 3) if f"advisory_waiting_{traffic}_{n}" in r)
            if f"checkpoints_{traffic}_1" in r:
                extra += "; checkpoints, autovacuums in the windows of 1 / 3: " + " / ".join(
                    f"{sum(w['checkpoints'] for w in r[f'windows_{traffic}'] if w['replicas'] == n):.0f}, "
                    f"{sum(w['autovacuums'] for w in r[f'windows_{traffic}'] if w['replicas'] == n):.0f}"
                    for n in (1, 3))
            lines.append(f"{'':21}CPU ms per request: {r[f'cpu_ms_per_request_{traffic}_1']:.1f} with 1, "
                         f"{r[f'cpu_ms_per_request_{traffic}_3']:.1f} with 3 (the database's cores"
                         f" {r[f'db_cores_{traffic}_1']:.2f}, {r[f'db_cores_{traffic}_3']:.2f}); load average "
                         f"{min(w['load_1min'] for w in r[f'windows_{traffic}']):.1f}–"
                         f"{max(w['load_1min'] for w in r[f'windows_{traffic}']):.1f}; CPU µs of a fixed work"
                         f" unit {r[f'unit_us_{traffic}_1']:.0f} with 1, {r[f'unit_us_{traffic}_3']:.0f} with 3"
                         + extra)
            even = r[f"pairs_at_equal_speed_{traffic}"]
            lines.append(f"{'':21}3 vs 1 had a CPU second bought the same work in both windows of a pair:"
                         f" {statistics.median(even):.2f} ({' '.join(f'{p:.2f}' for p in even)})")
        lines.append(f"{'':21}idle: {r['idle_replica_cores']:.3f} cores per replica (the busiest),"
                     f" {r['idle_db_cores']:.3f} the database's")
    by = {(r["store"], r["fragments"]): r for r in rows}
    for size in sorted({r["fragments"] for r in rows}):
        if ("sqlite", size) in by and ("postgres", size) in by:
            ratio = by[("postgres", size)]["p50_ms"] / by[("sqlite", size)]["p50_ms"]
            lines.append(f"{size} fragments: PostgreSQL retrieval p50 = {ratio:.2f} x SQLite's")
    return "\n".join(lines)

