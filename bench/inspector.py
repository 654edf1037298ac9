"""Inspector pages with 10k memories for one user: each page's time, to the 200 ms goal.

    python bench/inspector.py [--memories 10000] [--rounds 20] [--embedding hash]

Fills a fresh database through the store's own writes (``--memories`` items
of the five types for user ``u0`` with their vectors, 30 other users, 2,000
fragments in 40 sessions, 500 traces with candidates, a summary chain), then
starts ``python -m proxy serve`` on it and requests each inspector page
``--rounds`` times after a warm-up, signed in as the tenant's admin. The time
is the full request on loopback, so an upper bound of the server's time.
The first request of each page is reported apart: a search first loads the
user's items into the in-memory index the chat path shares. Prints first,
p50 and max (of the requests after three warm-ups) per page and writes bench/results/inspector.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from proxy.memory.search.bm25 import tokenize  # noqa: E402
from proxy.memory.search.embedder import load_embedder  # noqa: E402
from proxy.store import open_store  # noqa: E402
from proxy.store.records import NewFragment, NewItem, SummaryRow  # noqa: E402
from proxy.store.sqlite.sqlite_items import _insert  # noqa: E402
from tests.inspector_helpers import signed_in  # noqa: E402
from tests.servers import free_port  # noqa: E402

GOAL_MS = 200.0
ADMIN = "ak-bench"
TYPES = ("entity", "preference", "event", "task", "constraint")
WORDS = ["tea", "coffee", "cello", "garden", "Lisbon", "train", "passport", "sister", "dentist", "invoice", "bicycle", "novel", "piano", "marathon", "allergy", "peanut", "recipe", "budget", "meeting", "Friday", "project", "launch", "holiday", "violin", "beach"]


def sentence(rng: random.Random, n: int) -> str:
    return f"Fact {n}: the user " + " ".join(rng.choice(WORDS) for _ in range(9)) + "."


async def fill(db: Path, memories: int, embedding: str) -> dict[str, str]:
    embedder = load_embedder(embedding)
    store = open_store(str(db), embedder.dim)
    rng = random.Random(7)
    texts = [sentence(rng, n) for n in range(memories)]
    vectors = await asyncio.to_thread(embedder.embed, texts)
    items = [
        ("u0", f"s-{n % 40}", NewItem(
            type=TYPES[n % 5], key=f"user.fact.{n}", content=text, terms=" ".join(tokenize(text)),
            importance=round(rng.random(), 2), confidence=1.0, source="extracted", expires_at=None,
            expires=None, turns=[], fragment_hashes=[]), vec)
        for n, (text, vec) in enumerate(zip(texts, vectors, strict=True))
    ] + [
        (f"u{other}", None, NewItem(
            type="entity", key="user.name", content=f"User {other} is called U{other}.", terms="user",
            importance=0.5, confidence=1.0, source="extracted", expires_at=None, expires=None, turns=[],
            fragment_hashes=[]), vectors[0])
        for other in range(1, 31)
    ]
    # One transaction through the store's own insert: remember() would re-read every active
    # item for each of the 10k (it decides merges), which is not what this bench measures.
    await store.db.write(lambda c: [_insert(c, "bench", u, s, i, v, time.time()) for u, s, i, v in items])
    frag_texts = [sentence(rng, n) for n in range(2000)]
    frag_vectors = await asyncio.to_thread(embedder.embed, frag_texts)
    for session in range(40):
        rows = [NewFragment(f"h{session}-{k}", "user", frag_texts[session * 50 + k],
                            " ".join(tokenize(frag_texts[session * 50 + k])), k, 20) for k in range(50)]
        await store.fragments.add("bench", "u0", f"s-{session}", rows, frag_vectors[session * 50: session * 50 + 50],
                                  created=time.time())
    candidates = [{"id": f"f{k}", "kind": "fragment", "text": frag_texts[k][:200], "vector": 0.5, "vector_norm": 1.0,
                   "bm25": 2.0, "bm25_norm": 1.0, "fused": 0.8, "dated": False, "score": 0.8} for k in range(20)]
    for t in range(500):
        await store.traces.save("bench", "u0", f"s-{t % 40}", f"t-{t:04d}", {
            "trace": f"t-{t:04d}", "session": f"s-{t % 40}", "user": "u0", "created": time.time() - t,
            "tokens_in": 9000, "tokens_forwarded": 3100, "degraded": None, "watermark": 40,
            "summaries": [], "query": "what does the user play", "candidates": candidates,
            "injected": ["f1", "f2"], "memory_block": "<memory>...</memory>",
        })
    chain = [SummaryRow(f"sum-{k}", 0, f"Turns {k * 10}-{k * 10 + 10} summarised.", 120, k * 10, k * 10 + 10)
             for k in range(4)]
    chain.append(SummaryRow("sum-top", 1, "The first 40 turns, in short.", 200, 0, 40))
    await store.sessions.save_prefix("bench", "u0", "s-0", "chain", 40, chain[-1:], chain)
    store.close()
    return {"trace": "t-0001", "session": "s-0"}


def config(tmp: Path, db: Path, port: int, embedding: str) -> Path:
    raw = {
        "server": {"port": port},
        "storage": {"url": f"sqlite:///{db}"},
        "embedding": {"model": embedding},
        "defaults": {"upstream": {"base_url": "http://127.0.0.1:9/v1", "api_key": "sk-none"}},
        "tenants": {"bench": {"api_keys": ["pk-bench"], "admin_keys": [ADMIN]}},
    }
    path = tmp / "proxy.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def measure(url: str, pages: dict[str, str], rounds: int) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    with signed_in(url, ADMIN) as http:
        for name, path in pages.items():
            times = []
            for _ in range(rounds + 3):
                started = time.perf_counter()
                r = http.get(path)
                times.append((time.perf_counter() - started) * 1000)
                assert r.status_code == 200, f"{path}: {r.status_code} {r.text[:200]}"
            warm = times[3:]  # the first requests load the user's index (as a chat request would)
            out[name] = {"first_ms": times[0], "p50_ms": statistics.median(warm), "max_ms": max(warm),
                         "bytes": len(r.content)}
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--embedding", default="hash", help="hash (fast fake) or bundled (the real model)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "inspector.json")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="paperclip-inspector-") as folder:
        tmp = Path(folder)
        started = time.perf_counter()
        ids = asyncio.run(fill(tmp / "bench.db", args.memories, args.embedding))
        print(f"filled {args.memories} memories in {time.perf_counter() - started:.1f} s", flush=True)
        port = free_port()
        proc = subprocess.Popen([sys.executable, "-m", "proxy", "serve", "--config",
                                 str(config(tmp, tmp / "bench.db", port, args.embedding)), "--log-level", "warning"],
                                cwd=ROOT, stderr=subprocess.DEVNULL)
        try:
            url = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                try:
                    if httpx.get(url + "/readyz").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                time.sleep(0.2)
            pages = {
                "users": "/paperclip/ui/users",
                "user (memories, first page)": "/paperclip/ui/users/u0",
                "user (memories, page after 9,000)": "/paperclip/ui/users/u0?after=9000",
                "user (type filter)": "/paperclip/ui/users/u0?type=preference&status=all",
                "user (search)": "/paperclip/ui/users/u0?q=cello+garden",
                "recent requests": "/paperclip/ui/traces",
                "one trace": f"/paperclip/ui/traces/{ids['trace']}",
                "session pyramid": f"/paperclip/ui/sessions/{ids['session']}",
            }
            results = measure(url, pages, args.rounds)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    print(f"\nInspector pages, {args.memories} memories for the user, {args.rounds} requests each (ms)\n")
    print(f"{'page':40}{'first':>10}{'p50':>10}{'max':>10}{'KB':>8}")
    for name, row in results.items():
        print(f"{name:40}{row['first_ms']:>10.1f}{row['p50_ms']:>10.1f}{row['max_ms']:>10.1f}"
              f"{row['bytes'] / 1024:>8.0f}")
    worst = max(r["p50_ms"] for r in results.values())
    print(f"\n  [{'pass' if worst <= GOAL_MS else 'MISS'}] every page p50 <= {GOAL_MS:.0f} ms (worst {worst:.1f})")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"memories": args.memories, "rounds": args.rounds, "pages": results,
                                    "embedding": args.embedding}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
