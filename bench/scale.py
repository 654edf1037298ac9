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

How a mix is measured (1 and 3 replicas interleaved in pairs of windows,
requests/s per busy core, the probes printed beside it) is
``bench/replica_windows.py``.

    python bench/scale.py [--sizes 10000,100000] [--users 200] [--light 100] [--queries 150]
                          [--seconds 10] [--warmup 3] [--samples 3] [--clients 12]
                          [--stores sqlite,postgres] [--traffic sticky,many,one] [--lock-waits]
                          [--py-spy FOLDER]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
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
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.replica_windows import (  # noqa: E402
    TRAFFIC,
    Probe,
    arms,
    by_user,
    database_work,
    idle,
    round_robin,
    run_for,
    spy,
    summary,
    table,
    window,
)
from bench.retrieval import Sentences, ask, pct  # noqa: E402
from proxy.memory.search import bm25  # noqa: E402
from proxy.store import Store, open_postgres, open_store  # noqa: E402
from proxy.store.postgres.pg_database import PgDatabase  # noqa: E402
from proxy.store.records import NewFragment  # noqa: E402
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










async def warm(client: httpx.AsyncClient, urls: list[str], users: list[str], sticky: bool, clients: int,
               say: Sentences) -> None:
    """Each replica loads the indexes of the users it serves before the clock starts."""
    rng, gate, route = random.Random(3), asyncio.Semaphore(clients), by_user(urls)

    async def one(url: str, user: str) -> None:
        async with gate:
            await chat(client, url, user, [{"role": "user", "content": ask(say, rng)}])

    await asyncio.gather(*(one(url, user) for url in urls for user in users if not sticky or route(user) == url))




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


















def postgres_pids(server: PgServer) -> list[int]:
    pid = server.server.get_pid()
    return [pid] if pid else []


# (name, light users or only the heavy one, routed by user), in the order they run




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
