"""How long one user's fragment write holds the user's lock on PostgreSQL, and how much of it is the commit.

The store writes a request's fragments as one autocommit ``INSERT`` that
takes the scope's advisory lock in a one-row subquery
(``pg_fragments._insert_locked``); the lock is released when that statement's
transaction has committed. This times that very statement from the writer's
side, one writer (no waiting), on a user holding ``--fragments`` rows, with
``synchronous_commit`` on (the store's setting) and off (measured only: the
part of the hold that is the commit's WAL flush), in turn, ``--rounds``
times. The server is pgserver's, started in a temporary folder (tests/pg.py).

    python bench/pg_lock_hold.py [--fragments 100000] [--inserts 300] [--rounds 2]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.retrieval import Sentences, pct
from bench.scale import DIM, HEAVY, TENANT, fill
from proxy.store import open_postgres
from proxy.store.postgres.pg_coordination import scope_lock_key
from proxy.store.postgres.pg_fragments import _insert_locked
from tests.pg import PgServer


async def main(args: argparse.Namespace) -> None:
    pg = PgServer()
    try:
        store = await open_postgres(pg.fresh_schema()[1], DIM)
        say, rng = Sentences(seed=1), np.random.default_rng(5)
        await fill(store, HEAVY, args.fragments, say, 1)
        made = 0
        for mode in ["on", "off"] * args.rounds:
            times = []
            async with store.db.connection() as conn:
                await conn.execute(f"SET synchronous_commit = {mode}")
                for _ in range(args.inserts):
                    rows = []
                    for _ in range(2):  # a request's two new fragments
                        made += 1
                        vector = rng.standard_normal(DIM).astype(np.float32)
                        rows.append((hashlib.sha256(f"new:{made}".encode()).hexdigest(), "user", say(), "t",
                                     args.fragments + made, 10, vector / np.linalg.norm(vector)))
                    started = time.perf_counter()
                    await conn.execute(_insert_locked(2), (scope_lock_key(TENANT, HEAVY), TENANT, HEAVY, "s",
                                                          time.time(), *(v for row in rows for v in row)))
                    times.append(time.perf_counter() - started)
                await conn.execute("RESET synchronous_commit")
            print(f"synchronous_commit = {mode:3}: p50 {pct(times, 50) * 1000:.2f} ms, p90 {pct(times, 90) * 1000:.2f}"
                  f" ms  (load average {os.getloadavg()[0]:.1f})")
        await store.aclose()
    finally:
        pg.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fragments", type=int, default=100000)
    parser.add_argument("--inserts", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=2)
    asyncio.run(main(parser.parse_args()))
