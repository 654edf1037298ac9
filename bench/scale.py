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
- throughput: 1 replica, then 3 on the same database, ``--clients``
  concurrent clients for ``--seconds``, round robin over the replicas. Each
  request is a new short conversation: retrieval before, two new fragments
  indexed after. Three mixes: the light users' requests (one picked at
  random: real traffic) sent to the replica their user hashes to, as
  deploy/nginx.conf routes; the same sent round robin (each replica then
  also reads every other's new fragments into its own index of the user);
  only the heavy user's, round robin (the worst case: one user's fragment
  writes are serialised, see ``coordination.lock_scope``). Every replica
  has loaded its users' indexes before the clock starts; each mix then runs
  for ``--seconds`` twice, and the second window is the one reported (the
  first, "cold", still pays for what each replica learns once per fragment:
  a line's token count, a fragment written by another replica). Busy cores =
  CPU seconds of the replicas (and of PostgreSQL's processes) over the wall
  time; requests/s per busy core is the figure that says whether replicas
  scale with cores. The last column is the "3 vs 1" of the first windows.

    python bench/scale.py [--sizes 10000,100000] [--users 200] [--light 100] [--queries 200]
                          [--seconds 20] [--clients 12] [--stores sqlite,postgres]
                          [--traffic sticky,many,one] [--lock-waits]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import itertools
import os
import random
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
    total = 0.0
    for pid in pids:
        try:
            proc = psutil.Process(pid)
            for p in [proc, *proc.children(recursive=True)]:
                t = p.cpu_times()
                total += t.user + t.system
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


async def throughput(urls: list[str], users: list[str], sticky: bool, pids: list[int], seconds: float,
                     clients: int, say: Sentences, probe: Probe | None = None) -> dict[str, float]:
    """The mix for ``seconds`` twice after ``warm``: the first window (cold) and the second (steady)."""
    rng = random.Random(2)
    route = by_user(urls) if sticky else round_robin(urls)
    async with httpx.AsyncClient(timeout=120, limits=httpx.Limits(max_connections=clients * 2)) as client:
        await warm(client, urls, users, sticky, clients, say)

        async def request() -> None:
            history = [{"role": "user", "content": say()}, {"role": "assistant", "content": say()},
                       {"role": "user", "content": ask(say, rng)}]
            user = rng.choice(users)
            await chat(client, route(user), user, history)

        cold = await window(request, pids, seconds, clients)
        steady = await window(request, pids, seconds, clients, probe)
    return {**steady, "rps_per_core_cold": cold["rps_per_core"]}


async def window(request: Callable[[], Awaitable[None]], pids: list[int], seconds: float,
                 clients: int, probe: Probe | None = None) -> dict[str, float]:
    """``clients`` concurrent loops of ``request`` for ``seconds``: requests/s and the CPU they cost."""
    done, stop = 0, asyncio.Event()
    sampled = asyncio.ensure_future(probe(stop) if probe else asyncio.sleep(0, {}))
    cpu0, own0, t0 = cpu_seconds(pids), time.process_time(), time.perf_counter()
    deadline = t0 + seconds

    async def worker() -> None:
        nonlocal done
        while time.perf_counter() < deadline:
            await request()
            done += 1

    await asyncio.gather(*(worker() for _ in range(clients)))
    wall, own = time.perf_counter() - t0, time.process_time() - own0
    stop.set()
    waits = await sampled
    await asyncio.sleep(2)  # after-response indexing finishes: its CPU counts too
    cpu = cpu_seconds(pids) - cpu0
    busy = cpu / wall
    return {"rps": done / wall, "busy_cores": busy, "rps_per_core": done / wall / busy if busy else 0.0,
            "client_cores": own / wall, "cpu_ms_per_request": cpu / done * 1000 if done else 0.0,
            "load_1min": os.getloadavg()[0], **waits}


Probe = Callable[[asyncio.Event], Awaitable[dict[str, float]]]
"""Samples the database until the event is set: what the window's requests waited on there."""


def lock_waits(url: str) -> Probe:
    """Every 20 ms, how many of PostgreSQL's backends wait on an advisory lock (a scope's writes,
    ``coordination.lock_scope``), on the WAL (a commit's flush) and how many run a statement: their
    means over the window."""
    async def probe(stop: asyncio.Event) -> dict[str, float]:
        import psycopg

        samples, sums = 0, [0, 0, 0]
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            while not stop.is_set():
                cur = await conn.execute(
                    "SELECT count(*) FILTER (WHERE wait_event = 'advisory'),"
                    " count(*) FILTER (WHERE wait_event LIKE 'WAL%%'), count(*) FILTER (WHERE state = 'active')"
                    " FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()")
                row = await cur.fetchone()
                samples, sums = samples + 1, [a + b for a, b in zip(sums, row, strict=True)]
                await asyncio.sleep(0.02)
        names = ("advisory_waiting", "wal_waiting", "active")
        return {name: total / samples for name, total in zip(names, sums, strict=True)} if samples else {}
    return probe


def postgres_pids(server: PgServer) -> list[int]:
    pid = server.server.get_pid()
    return [pid] if pid else []


# (name, light users or only the heavy one, routed by user), in the order they run
TRAFFIC = (("sticky", True, True), ("many", True, False), ("one", False, False))


async def measure(kind: str, size: int, url: str, folder: Path, upstream: str, db_pids: list[int],
                  args: argparse.Namespace) -> dict[str, Any]:
    users, say = light_users(args.users), Sentences(seed=size)
    started = time.perf_counter()
    await prepare(kind, str(folder / "p.db") if kind == "sqlite" else url, size, users, args.light, say)
    print(f"{kind} {size}: loaded in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    path = config(folder, url, upstream)
    row: dict[str, Any] = {"store": kind, "fragments": size}
    for n in (1, 3):
        replicas = start_replicas(path, n, folder)
        try:
            urls = [r.url for r in replicas]
            pids = [r.proc.pid for r in replicas if r.proc is not None] + db_pids
            if n == 1:
                row.update(await retrieval(urls[0], args.queries, say))
            for traffic, light, sticky in TRAFFIC:
                if traffic not in args.traffic.split(","):
                    continue
                probe = lock_waits(url) if args.lock_waits and kind == "postgres" else None
                result = await throughput(urls, users if light else [HEAVY], sticky, pids, args.seconds,
                                          args.clients, say, probe)
                row.update({f"{k}_{traffic}_{n}": v for k, v in result.items()})
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
                print(rows[-1], file=sys.stderr)
    finally:
        pg.stop()
        upstream.terminate()
        upstream.wait(timeout=30)
    return rows


def table(rows: list[dict[str, Any]], users: int) -> str:
    head = (f"{'store':11}{'fragments':>10}{'p50 ms':>8}{'p99 ms':>8}  {'traffic':26}{'rps 1':>7}{'cores 1':>8}"
            f"{'rps/core 1':>11}  {'rps 3':>7}{'cores 3':>8}{'rps/core 3':>11}{'3 vs 1':>8}{'cold':>6}")
    lines = [head]
    for r in rows:
        for traffic, light, sticky in TRAFFIC:
            if f"rps_per_core_{traffic}_1" not in r:
                continue  # not run (--traffic)
            one, three = r[f"rps_per_core_{traffic}_1"], r[f"rps_per_core_{traffic}_3"]
            cold_one = r[f"rps_per_core_cold_{traffic}_1"]
            cold = r[f"rps_per_core_cold_{traffic}_3"] / cold_one if cold_one else float("nan")
            label = f"{users} users, " if light else "1 user, "
            label += "by user" if sticky else "round robin"
            lines.append(
                f"{r['store']:11}{r['fragments']:>10}{r['p50_ms']:>8.1f}{r['p99_ms']:>8.1f}  {label:26}"
                f"{r[f'rps_{traffic}_1']:>7.1f}{r[f'busy_cores_{traffic}_1']:>8.2f}{one:>11.1f}  "
                f"{r[f'rps_{traffic}_3']:>7.1f}{r[f'busy_cores_{traffic}_3']:>8.2f}{three:>11.1f}"
                f"{three / one if one else float('nan'):>8.2f}{cold:>6.2f}")
            lines.append(f"{'':21}CPU ms per request: {r[f'cpu_ms_per_request_{traffic}_1']:.1f} with 1, "
                         f"{r[f'cpu_ms_per_request_{traffic}_3']:.1f} with 3"
                         + "".join(f"; with {n}, backends in a statement {r[f'active_{traffic}_{n}']:.2f}, waiting"
                                   f" on a scope's lock {r[f'advisory_waiting_{traffic}_{n}']:.3f},"
                                   f" on the WAL {r[f'wal_waiting_{traffic}_{n}']:.3f}"
                                   for n in (1, 3) if f"advisory_waiting_{traffic}_{n}" in r))
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
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--clients", type=int, default=12)
    parser.add_argument("--traffic", default="sticky,many,one", help="which mixes to run: by user, round robin, one user")
    parser.add_argument("--lock-waits", action="store_true",
                        help="PostgreSQL: sample its backends' advisory-lock waits in each steady window")
    arguments = parser.parse_args()
    print(f"load average before: {os.getloadavg()}", file=sys.stderr)
    print(table(asyncio.run(main(arguments)), arguments.users))
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
