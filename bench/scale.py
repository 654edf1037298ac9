"""Replicas on SQLite and on PostgreSQL, side by side: requests/s per busy core, retrieval latency.

For each store and each size, one heavy user holds that many fragments,
and ``--users`` light users ``--light`` fragments each (text from
bench/retrieval.py's Zipf sentences, random unit vectors — the embedder is
the ``hash`` fake, so the model's time does not hide the store's). Then,
with ``paperclip serve`` processes in front of the fake upstream
(answering at once, on loopback):

- retrieval: 1 replica, one request at a time, each a new question of the
  heavy user; the request's latency is the retrieval's plus a few ms of
  proxying (p50, p99);
- throughput: 1 replica against 3 on the same database, ``--clients``
  concurrent clients, round robin over the replicas. Each request is a new
  short conversation: retrieval before, two new fragments indexed after.
  Three mixes: the light users' requests (one picked at random: real
  traffic) sent to the replica their user hashes to, as deploy/nginx.conf
  routes; the same sent round robin (each replica then also reads every
  other's new fragments into its own index of the user); only the heavy
  user's, round robin (the worst case: one user's fragment writes are
  serialised, see ``coordination.lock_scope``, and every replica loads the
  other two's fragments of that one user).

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

    python bench/scale.py [--sizes 10000,100000] [--users 200] [--light 100] [--queries 150]
                          [--seconds 10] [--warmup 3] [--samples 3] [--clients 12]
                          [--stores sqlite,postgres] [--traffic sticky,many,one] [--lock-waits]
                          [--py-spy FOLDER]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import itertools
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import psutil
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.retrieval import Sentences, ask, pct  # noqa: E402
from proxy.memory import bm25  # noqa: E402
from proxy.store import Store, open_postgres, open_store  # noqa: E402
from proxy.store.fragments import NewFragment  # noqa: E402
from proxy.store.postgres import PgDatabase  # noqa: E402
from tests.pg import PgServer  # noqa: E402
from tests.servers import ServeProcess, free_port  # noqa: E402

KEY, TENANT, HEAVY, DIM = "pk-bench", "bench", "heavy-user", 256  # the hash embedder's dimension
BATCH = 2000


def light_users(n: int) -> list[str]:
    return [f"user-{i:04d}" for i in range(n)]


async def fill(store: Store, user: str, n: int, say: Sentences, seed: int) -> None:
    rng = np.random.default_rng(seed)
    for lo in range(0, n, BATCH):
        size = min(BATCH, n - lo)
        texts = [say() for _ in range(size)]
        vectors = rng.standard_normal((size, DIM)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        frags = [NewFragment(hashlib.sha256(f"{user}:{lo + i}:{t}".encode()).hexdigest(),
                             "user" if i % 2 == 0 else "assistant", t, " ".join(bm25.tokenize(t)), lo + i,
                             len(t) // 4)
                 for i, t in enumerate(texts)]
        await store.fragments.add(TENANT, user, f"s-{lo // 40}", frags, vectors, time.time())


async def prepare(kind: str, target: str, n: int, users: list[str], light: int, say: Sentences) -> None:
    store = await asyncio.to_thread(open_store, target, DIM) if kind == "sqlite" else await open_postgres(target, DIM)
    await fill(store, HEAVY, n, say, n)
    for i, user in enumerate(users):
        await fill(store, user, light, say, i)
    # A deployment's steady state, not the bulk load's aftermath: without this PostgreSQL's
    # autovacuum and checkpointer (and SQLite's WAL) would still be busy while retrieval is timed.
    if isinstance(store.db, PgDatabase):
        async with store.db.connection() as conn:
            await conn.execute("VACUUM ANALYZE")
            await conn.execute("CHECKPOINT")
    else:
        await store.users.checkpoint()
    await store.aclose()


def config(folder: Path, url: str, upstream: str) -> Path:
    raw = {
        "storage": {"url": url},
        "embedding": {"model": "hash"},
        "defaults": {"upstream": {"base_url": upstream, "api_key": "sk-up"},
                     "compression": {"model": "fake-compressor"},
                     "memory": {"extract_every_messages": 100000}},
        "tenants": {TENANT: {"api_keys": [KEY]}},
    }
    path = folder / "proxy.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def start_replicas(path: Path, n: int, folder: Path) -> list[ServeProcess]:
    replicas = [ServeProcess(path, folder / f"replica{i}.log", "--log-level", "warning").start() for i in range(n)]
    for replica in replicas:
        replica.wait_ready(timeout=300)  # a replica of a 100k-fragment store on a loaded machine starts slowly
    return replicas


def start_upstream(folder: Path) -> tuple[subprocess.Popen[bytes], str]:
    """The fake upstream in a process of its own: in this one it would share the load generator's GIL."""
    port = free_port()
    code = ("import uvicorn; from tests.fake_upstream import FakeUpstream; "
            f"uvicorn.run(FakeUpstream().app(), host='127.0.0.1', port={port}, log_level='warning')")
    with (folder / "upstream.log").open("ab") as log:
        proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            httpx.get(url + "/v1/models", timeout=2)
            return proc, url
        except httpx.TransportError:
            time.sleep(0.1)
    raise RuntimeError(f"the fake upstream did not start: see {folder}")


async def chat(client: httpx.AsyncClient, url: str, user: str, messages: list[dict[str, str]]) -> float:
    started = time.perf_counter()
    r = await client.post(url + "/v1/chat/completions", json={"model": "gpt-4o-mini", "messages": messages},
                          headers={"authorization": f"Bearer {KEY}", "x-paperclip-user": user})
    r.raise_for_status()
    return time.perf_counter() - started


async def retrieval(url: str, queries: int, say: Sentences) -> dict[str, float]:
    rng = random.Random(1)
    async with httpx.AsyncClient(timeout=120) as client:
        await chat(client, url, HEAVY, [{"role": "user", "content": ask(say, rng)}])  # loads the user's index
        times = [await chat(client, url, HEAVY, [{"role": "user", "content": ask(say, rng)}]) for _ in range(queries)]
    return {"p50_ms": pct(times, 50) * 1000, "p99_ms": pct(times, 99) * 1000}


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


async def warm(client: httpx.AsyncClient, urls: list[str], users: list[str], sticky: bool, clients: int,
               say: Sentences) -> None:
    """Each replica loads the indexes of the users it serves before the clock starts."""
    rng, gate, route = random.Random(3), asyncio.Semaphore(clients), by_user(urls)

    async def one(url: str, user: str) -> None:
        async with gate:
            await chat(client, url, user, [{"role": "user", "content": ask(say, rng)}])

    await asyncio.gather(*(one(url, user) for url in urls for user in users if not sticky or route(user) == url))


def arms(samples: int) -> list[int]:
    """How many replicas each timed window sends to: pairs 1, 3 / 3, 1 / 1, 3 ... (drift cancels)."""
    return [n for i in range(samples) for n in ((1, 3) if i % 2 == 0 else (3, 1))]


def client(clients: int) -> httpx.AsyncClient:
    return httpx.AsyncClient(timeout=120, limits=httpx.Limits(max_connections=clients * 2))


async def throughput(urls: list[str], users: list[str], sticky: bool, pids: list[int], db_pids: list[int],
                     args: argparse.Namespace, say: Sentences, probe: Probe | None = None) -> list[dict[str, float]]:
    """One mix: an untimed window on all replicas, then the 1- and 3-replica windows interleaved (``arms``)."""
    rng = random.Random(2)

    def sender(http: httpx.AsyncClient, n: int) -> Callable[[], Awaitable[None]]:
        route = by_user(urls[:n]) if sticky else round_robin(urls[:n])

        async def request() -> None:
            history = [{"role": "user", "content": say()}, {"role": "assistant", "content": say()},
                       {"role": "user", "content": ask(say, rng)}]
            user = rng.choice(users)
            await chat(http, route(user), user, history)
        return request

    async with client(args.clients) as http:
        await warm(http, urls, users, sticky, args.clients, say)
        await run_for(sender(http, len(urls)), 2 * args.warmup, args.clients)
    windows = []
    for n in arms(args.samples):
        # A client per window: a replica that sat idle has closed its keep-alive connections.
        async with client(args.clients) as http:
            send = sender(http, n)
            await run_for(send, args.warmup, args.clients)
            spies = spy(pids[:n], args.py_spy, args.seconds, f"{n}-{len(windows)}")
            result = await window(send, pids[:n], db_pids, args.seconds, args.clients, probe)
            for proc in spies:
                proc.wait(timeout=60)
        windows.append({"replicas": n, **result})
        print(f"  {n} replica(s): " + ", ".join(f"{k} {v:.3g}" for k, v in result.items()), file=sys.stderr)
    return windows


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


def postgres_pids(server: PgServer) -> list[int]:
    pid = server.server.get_pid()
    return [pid] if pid else []


# (name, light users or only the heavy one, routed by user), in the order they run
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


async def measure(kind: str, size: int, url: str, folder: Path, upstream: str, db_pids: list[int],
                  args: argparse.Namespace) -> dict[str, Any]:
    users, say = light_users(args.users), Sentences(seed=size)
    started = time.perf_counter()
    await prepare(kind, str(folder / "p.db") if kind == "sqlite" else url, size, users, args.light, say)
    print(f"{kind} {size}: loaded in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    row: dict[str, Any] = {"store": kind, "fragments": size}
    replicas = start_replicas(config(folder, url, upstream), 3, folder)
    try:
        urls = [r.url for r in replicas]
        pids = [r.proc.pid for r in replicas if r.proc is not None]
        row.update(await retrieval(urls[0], args.queries, say))
        row.update(await idle(pids, db_pids))
        for traffic, light, sticky in TRAFFIC:
            if traffic not in args.traffic.split(","):
                continue
            print(f"{kind} {size} {traffic}:", file=sys.stderr)
            probe = database_work(url, args.lock_waits) if kind == "postgres" else None
            windows = await throughput(urls, users if light else [HEAVY], sticky, pids, db_pids, args, say, probe)
            row.update({f"{k}_{traffic}" if k.startswith(("pairs", "windows")) else f"{k[:-2]}_{traffic}{k[-2:]}": v
                        for k, v in summary(windows).items()})
    finally:
        for replica in replicas:
            replica.stop()
    return row


async def main(args: argparse.Namespace) -> list[dict[str, Any]]:
    upstream, upstream_url = start_upstream(Path(tempfile.mkdtemp(prefix="scale-upstream-")))
    pg = PgServer()
    rows: list[dict[str, Any]] = []
    try:
        for size in [int(s) for s in args.sizes.split(",")]:
            for kind in args.stores.split(","):
                folder = Path(tempfile.mkdtemp(prefix=f"scale-{kind}-{size}-"))
                url = f"sqlite:///{folder / 'p.db'}" if kind == "sqlite" else pg.fresh_schema()[1]
                db_pids = postgres_pids(pg) if kind == "postgres" else []
                rows.append(await measure(kind, size, url, folder, upstream_url + "/v1", db_pids, args))
    finally:
        pg.stop()
        upstream.terminate()
        upstream.wait(timeout=30)
    return rows


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


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--stores", default="sqlite,postgres", help="which stores to measure, in this order")
    parser.add_argument("--users", type=int, default=200)
    parser.add_argument("--light", type=int, default=100, help="fragments of each light user")
    parser.add_argument("--queries", type=int, default=150)
    parser.add_argument("--seconds", type=float, default=10, help="each timed window")
    parser.add_argument("--warmup", type=float, default=3, help="untimed traffic before each timed window")
    parser.add_argument("--samples", type=int, default=3, help="pairs of windows (1 and 3 replicas) per mix")
    parser.add_argument("--clients", type=int, default=12)
    parser.add_argument("--traffic", default="sticky,many,one", help="which mixes to run: by user, round robin, one user")
    parser.add_argument("--py-spy", metavar="FOLDER", help="record each timed window's replicas with py-spy")
    parser.add_argument("--lock-waits", action="store_true",
                        help="PostgreSQL: sample its backends' advisory-lock and WAL waits in each window")
    arguments = parser.parse_args()
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(table(asyncio.run(main(arguments)), arguments.users))
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
