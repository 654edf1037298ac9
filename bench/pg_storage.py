"""PostgreSQL sizing: bytes per fragment, insert rates and k-NN latency, with and without an HNSW index.

Fragments as the proxy stores them: 384-float vectors (the bundled
model's), ~230 characters of text and the same again of BM25 terms; half
the rows are one user's, the rest spread over nine others. Side by side in
one run: inserts into the table with an HNSW index live, and into the table
without one (the index built afterwards); then the store's ``knn`` for the
big user (k = 12, as the extractor asks it) answered by the HNSW index and
answered exactly (the index dropped: the (tenant, user) index finds the
user's rows, PostgreSQL ranks them). The server is pgserver's, started in a
temporary folder (tests/pg.py). ``--no-live`` skips the live-index insert
(at 100k rows it takes most of an hour).

    python bench/pg_storage.py [--fragments 10000] [--no-live]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from proxy.store.postgres.pg_database import PgDatabase, nearest
from tests.pg import PgServer

DIM = 384
INSERT = (
    'INSERT INTO fragments (tenant, "user", session, hash, role, text, terms, position, tokens,'
    " created, embedding) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
)
HNSW = "CREATE INDEX IF NOT EXISTS fragments_embedding ON fragments USING hnsw (embedding vector_cosine_ops)"
K, QUERIES = 12, 50


def rows(n: int) -> list[tuple[object, ...]]:
    rng, words = random.Random(1), [f"w{i}" for i in range(8000)]
    vecs = np.random.default_rng(1).standard_normal((n, DIM)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    out = []
    for i in range(n):
        text = " ".join(rng.choices(words, k=40))
        user = "u0" if i % 2 == 0 else f"u{1 + i % 9}"
        out.append(("acme", user, "s", f"h{i}", "user", text, text, i, 60, time.time(), vecs[i]))
    return out


async def knn_ms(db: PgDatabase) -> float:
    queries = np.random.default_rng(2).standard_normal((QUERIES, DIM)).astype(np.float32)
    times = []
    for q in queries:
        start = time.perf_counter()
        await nearest(db, "fragments", "acme", "u0", q, K)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


async def load(url: str, data: list[tuple[object, ...]], index_after: bool) -> dict[str, float]:
    db = await PgDatabase.open(url, DIM)
    try:
        async with db.connection() as conn:  # whether or not the schema builds it
            await conn.execute("DROP INDEX IF EXISTS fragments_embedding")
            if not index_after:
                await conn.execute(HNSW)
        start = time.perf_counter()
        async with db.transaction() as conn, conn.cursor() as cur:
            await cur.executemany(INSERT, data)
        inserted = time.perf_counter() - start
        built = 0.0
        if index_after:
            start = time.perf_counter()
            async with db.connection() as conn:
                await conn.execute(HNSW)
            built = time.perf_counter() - start
        async with db.connection() as conn:
            cur = await conn.execute(
                "SELECT pg_total_relation_size('fragments'), pg_table_size('fragments'),"
                " pg_relation_size('fragments_embedding')"
            )
            total, table, hnsw = await cur.fetchone() or (0, 0, 0)
            await conn.execute("ANALYZE fragments")
        knn_hnsw = await knn_ms(db)
        async with db.connection() as conn:
            await conn.execute("DROP INDEX fragments_embedding")
        knn_exact = await knn_ms(db)
    finally:
        await db.close()
    n = len(data)
    return {"inserts_per_s": n / inserted, "index_build_s": built, "total_b": total / n,
            "table_b": table / n, "hnsw_b": hnsw / n,
            "knn_hnsw_ms": knn_hnsw, "knn_exact_ms": knn_exact}


async def main(n: int, live: bool) -> None:
    server = PgServer()
    results = []
    try:
        data = rows(n)
        if live:
            results.append(("HNSW live", await load(server.fresh_schema()[1], data, index_after=False)))
        results.append(("no HNSW (built after)", await load(server.fresh_schema()[1], data, index_after=True)))
    finally:
        server.stop()
    print(f"{n} fragments ({n // 2} of the k-NN's user), dim {DIM}, ~{len(data[0][5])} characters"  # type: ignore[arg-type]
          f" of text each; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"{'':24}{'inserts/s':>12}{'HNSW build s':>14}{'B/fragment':>12}{'table B':>10}{'HNSW B':>9}"
          f"{'knn HNSW ms':>13}{'knn exact ms':>14}")
    for name, r in results:
        print(f"{name:24}{r['inserts_per_s']:>12.0f}{r['index_build_s']:>14.1f}{r['total_b']:>12.0f}"
              f"{r['table_b']:>10.0f}{r['hnsw_b']:>9.0f}{r['knn_hnsw_ms']:>13.1f}{r['knn_exact_ms']:>14.1f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fragments", type=int, default=10000)
    parser.add_argument("--no-live", action="store_true", help="skip the insert with the HNSW index live")
    arguments = parser.parse_args()
    asyncio.run(main(arguments.fragments, not arguments.no_live))
