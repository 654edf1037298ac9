"""Replicas on SQLite and on PostgreSQL, side by side: requests/s per busy core, retrieval latency.

For each store and each size, one user holds that many fragments (text
from bench/retrieval.py's Zipf sentences, random unit vectors — the
embedder is the ``hash`` fake, so the model's time does not hide the
store's). Then, with ``paperclip serve`` processes in front of the fake
upstream (answering at once, on loopback):

- retrieval: 1 replica, one request at a time, each a new question of the
  user; the request's latency is the retrieval's plus a few ms of proxying
  (p50, p99);
- throughput: 1 replica, then 3 on the same database, ``--clients``
  concurrent clients for ``--seconds``, round robin over the replicas. Each
  request is a new short conversation of the user: retrieval before, two
  new fragments indexed after. Busy cores = CPU seconds of the replicas
  (and of PostgreSQL's processes) over the wall time; requests/s per busy
  core is the figure that says whether replicas scale with cores.

    python bench/scale.py [--sizes 10000,100000] [--queries 200] [--seconds 20] [--clients 12]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import itertools
import random
import subprocess
import sys
import tempfile
import time
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
from proxy.store import Store, open_postgres, open_store, pg_vectors  # noqa: E402
from proxy.store.fragments import NewFragment  # noqa: E402
from proxy.store.postgres import PgDatabase  # noqa: E402
from tests.fake_upstream import FakeUpstream  # noqa: E402
from tests.pg import PgServer  # noqa: E402
from tests.servers import ServerThread, free_port  # noqa: E402

KEY, TENANT, USER, DIM = "pk-bench", "bench", "heavy-user", 256  # the hash embedder's dimension


async def fill(store: Store, n: int, say: Sentences) -> None:
    rng = np.random.default_rng(n)
    for lo in range(0, n, 2000):
        size = min(2000, n - lo)
        texts = [say() for _ in range(size)]
        vectors = rng.standard_normal((size, DIM)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        frags = [NewFragment(hashlib.sha256(f"{lo + i}:{t}".encode()).hexdigest(), "user" if i % 2 == 0 else "assistant",
                             t, " ".join(bm25.tokenize(t)), lo + i, len(t) // 4)
                 for i, t in enumerate(texts)]
        await store.fragments.add(TENANT, USER, f"s-{lo // 40}", frags, vectors, time.time())


async def prepare(kind: str, target: str, n: int, say: Sentences) -> None:
    if kind == "sqlite":
        store = await asyncio.to_thread(open_store, target, DIM)
    else:
        store = await open_postgres(target, DIM)
        assert isinstance(store.db, PgDatabase)
        async with store.db.connection() as conn:  # built once after the load, as `paperclip migrate` does
            await conn.execute("DROP INDEX IF EXISTS fragments_embedding")
    await fill(store, n, say)
    if isinstance(store.db, PgDatabase):
        async with store.db.connection() as conn:
            await pg_vectors.index_vectors(conn, "fragments")
            await conn.execute("ANALYZE")
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


def start_replicas(path: Path, n: int, folder: Path) -> list[tuple[subprocess.Popen[bytes], str]]:
    out = []
    for i in range(n):
        port = free_port()
        with (folder / f"replica{i}.log").open("ab") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "proxy", "serve", "--config", str(path), "--port", str(port),
                 "--log-level", "warning"], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
        out.append((proc, f"http://127.0.0.1:{port}"))
    for proc, url in out:
        deadline = time.monotonic() + 180
        while True:
            try:
                if httpx.get(url + "/readyz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"replica did not start: see {folder}")
            time.sleep(0.2)
    return out


def stop(replicas: list[tuple[subprocess.Popen[bytes], str]]) -> None:
    for proc, _ in replicas:
        proc.terminate()
    for proc, _ in replicas:
        proc.wait(timeout=60)


async def chat(client: httpx.AsyncClient, url: str, messages: list[dict[str, str]]) -> float:
    started = time.perf_counter()
    r = await client.post(url + "/v1/chat/completions", json={"model": "gpt-4o-mini", "messages": messages},
                          headers={"authorization": f"Bearer {KEY}", "x-paperclip-user": USER})
    r.raise_for_status()
    return time.perf_counter() - started


async def retrieval(url: str, queries: int, say: Sentences) -> dict[str, float]:
    rng = random.Random(1)
    async with httpx.AsyncClient(timeout=120) as client:
        await chat(client, url, [{"role": "user", "content": ask(say, rng)}])  # loads the user's index
        times = [await chat(client, url, [{"role": "user", "content": ask(say, rng)}]) for _ in range(queries)]
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


async def throughput(urls: list[str], pids: list[int], db_pids: list[int], seconds: float, clients: int,
                     say: Sentences) -> dict[str, float]:
    rng = random.Random(2)
    targets = itertools.cycle(urls)
    async with httpx.AsyncClient(timeout=120, limits=httpx.Limits(max_connections=clients * 2)) as client:
        for url in urls:  # every replica loads the user's index before the clock starts
            await chat(client, url, [{"role": "user", "content": ask(say, rng)}])
        done = 0
        cpu0, db0, t0 = cpu_seconds(pids), cpu_seconds(db_pids), time.perf_counter()
        deadline = t0 + seconds

        async def worker() -> None:
            nonlocal done
            while time.perf_counter() < deadline:
                history = [{"role": "user", "content": say()}, {"role": "assistant", "content": say()},
                           {"role": "user", "content": ask(say, rng)}]
                await chat(client, next(targets), history)
                done += 1

        await asyncio.gather(*(worker() for _ in range(clients)))
        wall = time.perf_counter() - t0
        await asyncio.sleep(2)  # after-response indexing finishes: its CPU counts too
        cpu = cpu_seconds(pids) - cpu0 + cpu_seconds(db_pids) - db0
    busy = cpu / wall
    return {"rps": done / wall, "busy_cores": busy, "rps_per_core": done / wall / busy if busy else 0.0}


def postgres_pids(server: PgServer) -> list[int]:
    pid = server.server.get_pid()
    return [pid] if pid else []


async def main(args: argparse.Namespace) -> list[dict[str, Any]]:
    fake = FakeUpstream()
    upstream = ServerThread(fake.app()).start()
    pg = PgServer()
    rows: list[dict[str, Any]] = []
    try:
        for size in [int(s) for s in args.sizes.split(",")]:
            for kind in ("sqlite", "postgres"):
                folder = Path(tempfile.mkdtemp(prefix=f"scale-{kind}-{size}-"))
                url = f"sqlite:///{folder / 'p.db'}" if kind == "sqlite" else pg.fresh_schema()[1]
                say = Sentences(seed=size)
                started = time.perf_counter()
                await prepare(kind, str(folder / "p.db") if kind == "sqlite" else url, size, say)
                print(f"{kind} {size}: loaded in {time.perf_counter() - started:.0f} s", file=sys.stderr)
                path = config(folder, url, upstream.url + "/v1")
                db_pids = postgres_pids(pg) if kind == "postgres" else []
                row: dict[str, Any] = {"store": kind, "fragments": size}
                for n in (1, 3):
                    replicas = start_replicas(path, n, folder)
                    try:
                        urls, pids = [u for _, u in replicas], [p.pid for p, _ in replicas]
                        if n == 1:
                            row.update(await retrieval(urls[0], args.queries, say))
                        result = await throughput(urls, pids, db_pids, args.seconds, args.clients, say)
                        row.update({f"{k}_{n}": v for k, v in result.items()})
                    finally:
                        stop(replicas)
                rows.append(row)
                print(row, file=sys.stderr)
    finally:
        pg.stop()
        upstream.stop()
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    head = (f"{'store':9}{'fragments':>10}{'p50 ms':>8}{'p99 ms':>8}  {'rps 1':>7}{'cores 1':>8}{'rps/core 1':>11}"
            f"  {'rps 3':>7}{'cores 3':>8}{'rps/core 3':>11}{'3 vs 1':>8}")
    lines = [head]
    for r in rows:
        ratio = r["rps_per_core_3"] / r["rps_per_core_1"] if r["rps_per_core_1"] else float("nan")
        lines.append(
            f"{r['store']:9}{r['fragments']:>10}{r['p50_ms']:>8.1f}{r['p99_ms']:>8.1f}  {r['rps_1']:>7.1f}"
            f"{r['busy_cores_1']:>8.2f}{r['rps_per_core_1']:>11.1f}  {r['rps_3']:>7.1f}{r['busy_cores_3']:>8.2f}"
            f"{r['rps_per_core_3']:>11.1f}{ratio:>8.2f}")
    by = {(r["store"], r["fragments"]): r for r in rows}
    for size in sorted({r["fragments"] for r in rows}):
        if ("sqlite", size) in by and ("postgres", size) in by:
            ratio = by[("postgres", size)]["p50_ms"] / by[("sqlite", size)]["p50_ms"]
            lines.append(f"{size} fragments: PostgreSQL retrieval p50 = {ratio:.2f} x SQLite's")
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--clients", type=int, default=12)
    print(table(asyncio.run(main(parser.parse_args()))))
