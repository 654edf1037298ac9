"""PostgreSQL sizing: bytes per fragment and insert rates, with the HNSW index live and built after.

Fragments as the proxy stores them: 384-float vectors (the bundled
model's), ~230 characters of text and the same again of BM25 terms. Two
inserts side by side in one run: into the table with its HNSW index (as
the request path indexes), and into the table without it, the index built
afterwards (as a bulk load such as ``paperclip migrate`` can). The server
is pgserver's, started in a temporary folder (tests/pg.py).

    python bench/pg_storage.py [--fragments 10000]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from proxy.store.postgres import PgDatabase
from tests.pg import PgServer

DIM = 384
INSERT = (
    'INSERT INTO fragments (tenant, "user", session, hash, role, text, terms, position, tokens,'
    " created, embedding) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
)
HNSW = "CREATE INDEX fragments_embedding ON fragments USING hnsw (embedding vector_cosine_ops)"


def rows(n: int) -> list[tuple[object, ...]]:
    rng, words = random.Random(1), [f"w{i}" for i in range(8000)]
    vecs = np.random.default_rng(1).standard_normal((n, DIM)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    out = []
    for i in range(n):
        text = " ".join(rng.choices(words, k=40))
        out.append(("acme", f"u{i % 10}", "s", f"h{i}", "user", text, text, i, 60, time.time(), vecs[i]))
    return out


async def load(url: str, data: list[tuple[object, ...]], index_after: bool) -> dict[str, float]:
    db = await PgDatabase.open(url, DIM)
    try:
        if index_after:
            async with db.connection() as conn:
                await conn.execute("DROP INDEX fragments_embedding")
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
    finally:
        await db.close()
    n = len(data)
    return {"inserts_per_s": n / inserted, "index_build_s": built, "total_b": total / n,
            "table_b": table / n, "hnsw_b": hnsw / n}


async def main(n: int) -> None:
    server = PgServer()
    try:
        data = rows(n)
        live = await load(server.fresh_schema()[1], data, index_after=False)
        bulk = await load(server.fresh_schema()[1], data, index_after=True)
    finally:
        server.stop()
    print(f"{n} fragments, dim {DIM}, ~{len(data[0][5])} characters of text each")  # type: ignore[arg-type]
    print(f"{'':24}{'inserts/s':>12}{'HNSW build s':>14}{'B/fragment':>12}{'table B':>10}{'HNSW B':>9}")
    for name, r in (("HNSW live", live), ("HNSW built after", bulk)):
        print(f"{name:24}{r['inserts_per_s']:>12.0f}{r['index_build_s']:>14.1f}{r['total_b']:>12.0f}"
              f"{r['table_b']:>10.0f}{r['hnsw_b']:>9.0f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fragments", type=int, default=10000)
    asyncio.run(main(parser.parse_args().fragments))
