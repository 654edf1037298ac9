"""Retrieval latency at 1k, 10k and 100k fragments, indexing throughput, RSS with the model loaded.

One store holds the measured user and other users' data (30k fragments over
three users), as a shared deployment does. Fragments are synthetic: random
sentences whose content words follow Zipf's law over 8,000 words (common
English words first, made-up ones in the tail), so BM25 postings look like a
real history's: a few terms in a tenth of the fragments, most in very few. Vectors: the real bundled model embeds
``--real`` sentences (that is also the indexing-throughput run, through
``FragmentIndex.index`` as after-response work does it); every other
fragment gets one of those vectors plus Gaussian noise, renormalised —
embedding 130k texts would take the model most of an hour on two cores and
measure nothing new. The output says so.

Retrieval latency ("total") is the request path's ``recall_for`` as a
request meets it: focus, the query's embedding (overlapping the keyword
search), k-NN over the user's vectors, BM25, fusion, ranking, reading the
chosen texts, packing into cards. Every question is a new sentence, so the
embedder's cache never answers; questions are as long as LoCoMo's (median 9
words, 11 tokens). "Search" is the same call repeated, the
query's vector then cached: everything but the model. "Query embedding" is
the model alone on one new sentence, for scale. Each comes with its CPU
time (``time.process_time``: every thread of this process, the embedder's
too), which the machine's other work moves far less than wall time.

The store's reads run on its reader threads, as the proxy serves them. The
collector is set as ``paperclip serve`` sets it once the model is loaded
(``startup.settle_heap``): what is alive then frozen, the young generation
collected every 20,000 new objects rather than 700.

    python bench/retrieval.py [--sizes 1000,10000,100000] [--queries 200] [--real 2000] [--out PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from proxy import config  # noqa: E402
from proxy.memory.recall.query import fragment_hash  # noqa: E402
from proxy.memory.recall.recall import RecallRequest, recall_for  # noqa: E402
from proxy.memory.search import bm25  # noqa: E402
from proxy.memory.search.embedder import Embedder, load_embedder  # noqa: E402
from proxy.memory.search.fragment_index import FragmentIndex  # noqa: E402
from proxy.memory.search.fusion import Floor  # noqa: E402
from proxy.memory.search.item_index import ItemIndex  # noqa: E402
from proxy.server.startup import settle_heap  # noqa: E402
from proxy.store import Store, open_store  # noqa: E402
from proxy.store.records import NewFragment  # noqa: E402
from proxy.tokens import TokenCounter  # noqa: E402

OUT = ROOT / "bench" / "results" / "retrieval.json"
TENANT, USER = "bench", "measured-user"
OTHERS = ("other-1", "other-2", "other-3")
OTHER_SIZE = 10_000
NOISE = 0.6  # relative norm of the noise added to a real vector

WORDS = ["time", "year", "people", "way", "day", "man", "thing", "woman", "life", "child", "world", "school", "state", "family", "student", "group", "country", "problem", "hand", "part", "place", "case", "week", "company", "system", "program", "question", "work", "government", "number", "night", "point", "home", "water", "room", "mother", "area", "money", "story", "fact", "month", "lot", "right", "study", "book", "eye", "job", "word", "business", "issue", "side", "kind", "head", "house", "service", "friend", "father", "power", "hour", "game", "line", "end", "member", "law", "car", "city", "community", "name", "president", "team", "minute", "idea", "kid", "body", "information", "back", "parent", "face", "others", "level", "office", "door", "health", "person", "art", "war", "history", "party", "result", "change", "morning", "reason", "research", "girl", "guy", "moment", "air", "teacher", "force", "education", "foot", "boy", "age", "policy", "music", "market", "sense", "nation", "plan", "college", "interest", "death", "experience", "effect", "class", "control", "care", "field", "development", "role", "effort", "rate", "heart", "drug", "show", "leader", "light", "voice", "wife", "police", "mind", "price", "report", "decision", "son", "view", "relationship", "town", "road", "arm", "difference", "value", "building", "action", "model", "season", "society", "tax", "director", "position", "player", "record", "paper", "space", "ground", "form", "event", "official", "matter", "center", "couple", "site", "project", "activity", "star", "table", "need", "court", "oil", "situation", "cost", "industry", "figure", "street", "image", "phone", "data", "picture", "practice", "piece", "land", "product", "doctor", "wall", "patient", "worker", "news", "test", "movie", "north", "love", "support", "technology", "step", "baby", "computer", "type", "attention", "film", "tree", "source", "organization", "hair", "window", "evidence", "population", "site", "training", "garden", "dog", "cat", "peanut", "allergy", "marathon", "violin", "painting", "camping", "beach", "sunrise", "pottery", "museum", "concert", "recipe", "bread", "chess", "train", "bicycle", "river", "lake", "mountain", "island", "festival", "wedding", "birthday", "holiday", "airport", "hotel", "passport", "invoice", "deadline", "meeting", "doctor", "dentist", "gym", "yoga", "guitar", "piano", "novel", "poem", "camera", "laptop", "garden", "flower", "coffee", "tea", "pizza", "pasta", "salad", "soup", "cake", "dinner", "lunch", "breakfast", "weekend", "summer", "winter", "spring", "autumn"]
VERBS = ["go", "make", "know", "take", "see", "come", "think", "look", "want", "give", "use", "find", "tell", "ask", "work", "seem", "feel", "try", "leave", "call", "need", "become", "put", "mean", "keep", "let", "begin", "show", "hear", "play", "run", "move", "like", "live", "believe", "hold", "bring", "happen", "write", "provide", "sit", "stand", "lose", "pay", "meet", "include", "continue", "set", "learn", "change", "lead", "understand", "watch", "follow", "stop", "create", "speak", "read", "spend", "grow", "open", "walk", "win", "offer", "remember", "love", "consider", "appear", "buy", "wait", "serve", "die", "send", "expect", "build", "stay", "fall", "cut", "reach", "kill", "remain", "paint"]
FILL = ["the", "a", "my", "our", "your", "their", "this", "that", "with", "for", "from", "about", "after", "before", "and", "but"]


VOCABULARY = 8_000  # the real words above first, then made-up ones: a long tail, as in real text


def zipf_weights(n: int) -> list[float]:
    # Zipf–Mandelbrot: the offset flattens the head, where stop words would sit in real text.
    return [1.0 / (rank + 10) ** 1.05 for rank in range(n)]


def made_up_words(rng: random.Random, n: int) -> list[str]:
    syllables = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]
    out: set[str] = set()
    while len(out) < n:
        out.add("".join(rng.choice(syllables) for _ in range(rng.randint(2, 4))))
    return sorted(out)


class Sentences:
    """Random sentences whose content words follow Zipf's law over ``VOCABULARY`` words."""

    def __init__(self, seed: int = 7) -> None:
        self.rng = random.Random(seed)
        real = list(dict.fromkeys(WORDS))
        self.rng.shuffle(real)
        self.words = real + made_up_words(self.rng, VOCABULARY - len(real))
        # Cumulative once: ``choices(words, weights)`` sums all 8,000 weights on every draw
        # (6 ms a sentence); the draws are the same either way.
        self.cum_weights = list(itertools.accumulate(zipf_weights(len(self.words))))

    def __call__(self) -> str:
        n = self.rng.randint(6, 28)
        out = []
        for i in range(n):
            if i % 3 == 1:
                out.append(self.rng.choice(VERBS))
            elif i % 4 == 0:
                out.append(self.rng.choice(FILL))
            else:
                out.append(self.rng.choices(self.words, cum_weights=self.cum_weights)[0])
        return " ".join(out).capitalize() + "."


def ask(say: Sentences, rng: random.Random) -> str:
    """A question about 2-6 words of a new sentence: LoCoMo's length (median 9 words, 11 tokens)."""
    words = say().rstrip(".").lower().split()
    return f"What did I say about {' '.join(words[: rng.randint(2, 6)])}?"


def rss_mb() -> dict[str, float]:
    """Resident set size now and at its peak (Linux /proc), in MB."""
    fields = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0]) / 1024
    return {"now": round(fields.get("VmRSS", 0.0), 1), "peak": round(fields.get("VmHWM", 0.0), 1)}


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q)) if values else float("nan")


async def indexing_run(index: FragmentIndex, say: Sentences, n: int, batch: int, user: str) -> dict[str, float]:
    """``FragmentIndex.index`` as after-response work calls it, ``batch`` new messages at a time."""
    texts = [say() for _ in range(n)]
    started = time.perf_counter()
    for i in range(0, n, batch):
        part = [(i + j, "user" if j % 2 == 0 else "assistant", t) for j, t in enumerate(texts[i : i + batch])]
        await index.index(TENANT, user, f"s-{user}", part, "mask")
    seconds = time.perf_counter() - started
    return {"fragments": n, "batch": batch, "seconds": round(seconds, 2), "per_s": round(n / seconds, 1)}


async def fill(store: Store, counter: TokenCounter, say: Sentences, basis: np.ndarray, user: str, n: int, start: int) -> None:
    """Add ``n`` synthetic fragments to ``user`` with perturbed real vectors, bypassing the model."""
    rng = np.random.default_rng(start + hash(user) % 1000)
    for lo in range(0, n, 2000):
        size = min(2000, n - lo)
        texts = [say() for _ in range(size)]
        base = basis[rng.integers(0, len(basis), size)]
        noise = rng.normal(size=base.shape).astype(np.float32)
        noise *= NOISE / np.linalg.norm(noise, axis=1, keepdims=True)
        vectors = base + noise
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        frags = [
            NewFragment(fragment_hash("user", f"{user}:{start + lo + i}:{t}"), "user" if i % 2 == 0 else "assistant",
                        t, " ".join(bm25.tokenize(t)), start + lo + i, counter.text(t))
            for i, t in enumerate(texts)
        ]
        await store.fragments.add(TENANT, user, f"s-{user}-{(start + lo) // 40}", frags, vectors, time.time())


async def latency_run(index: FragmentIndex, items: ItemIndex, embedder: Embedder, say: Sentences, queries: int) -> dict[str, Any]:
    settings = config.from_dict({}, env={}).defaults
    counter = TokenCounter(None)
    floor = Floor()
    started = time.perf_counter()
    await index.scope(TENANT, USER)  # loads this user's in-memory index (once per process)
    load_s = time.perf_counter() - started
    embed_ms, search_ms, total_ms, cards = [], [], [], []
    embed_cpu, search_cpu, total_cpu = [], [], []
    rng = random.Random(11)
    for _ in range(queries):
        question = ask(say, rng)
        request = RecallRequest(TENANT, USER, "s-question", [{"role": "user", "content": question}], [],
                                settings.memory, time.time())
        c0, t0 = time.process_time(), time.perf_counter()
        recall = await recall_for(index, request, counter, floor, items)  # as a request meets it
        c1, t1 = time.process_time(), time.perf_counter()
        await recall_for(index, request, counter, floor, items)  # again: the query's vector is cached now
        c2, t2 = time.process_time(), time.perf_counter()
        embedder.embed([recall.focused + " (uncached)"])  # the model alone, for scale
        c3, t3 = time.process_time(), time.perf_counter()
        total_ms.append((t1 - t0) * 1000)
        search_ms.append((t2 - t1) * 1000)
        embed_ms.append((t3 - t2) * 1000)
        # CPU of every thread of this process (the embedder's too): what neighbours on the machine move least.
        total_cpu.append((c1 - c0) * 1000)
        search_cpu.append((c2 - c1) * 1000)
        embed_cpu.append((c3 - c2) * 1000)
        cards.append(len(recall.cards))
    return {
        "queries": queries,
        "bm25_load_s": round(load_s, 2),
        "search_p50_ms": round(pct(search_ms, 50), 1),
        "search_p99_ms": round(pct(search_ms, 99), 1),
        "embed_p50_ms": round(pct(embed_ms, 50), 1),
        "total_p50_ms": round(pct(total_ms, 50), 1),
        "total_p99_ms": round(pct(total_ms, 99), 1),
        "cpu_p50_ms": {"total": round(pct(total_cpu, 50), 2), "search": round(pct(search_cpu, 50), 2),
                       "embed": round(pct(embed_cpu, 50), 2)},
        "cards_mean": round(statistics.fmean(cards), 1),
    }


async def main(args: argparse.Namespace) -> dict[str, Any]:
    result: dict[str, Any] = {"rss_mb": {"start": rss_mb()}, "cpus": os.cpu_count(), "load_avg": os.getloadavg()}
    t = time.perf_counter()
    embedder = load_embedder("bundled")
    bm25.warm_up()
    settle_heap()  # as ``paperclip serve`` does once the model is loaded: the collector as the proxy runs it
    result["model_load_s"] = round(time.perf_counter() - t, 1)
    result["rss_mb"]["model_loaded"] = rss_mb()
    say = Sentences()
    counter = TokenCounter(None)
    with tempfile.TemporaryDirectory(prefix="paperclip-bench-") as folder:
        store = open_store(str(Path(folder) / "bench.db"), embedder.dim)
        index, items = FragmentIndex(store.fragments, embedder, counter), ItemIndex(store.items)
        try:
            result["indexing"] = [
                await indexing_run(index, say, args.real, 64, OTHERS[0]),
                await indexing_run(index, say, 200, 2, OTHERS[0]),
            ]
            basis = np.asarray(embedder.embed([say() for _ in range(256)]), dtype=np.float32)
            for n, user in enumerate(OTHERS):
                have = await store.fragments.count(TENANT, user)
                await fill(store, counter, say, basis, user, OTHER_SIZE - have, have + n * 10**6)
            result["scales"] = []
            have = 0
            for size in args.sizes:
                await fill(store, counter, say, basis, USER, size - have, have)
                have = size
                run = await latency_run(index, items, embedder, say, args.queries)
                result["scales"].append({"fragments": size, **run})
                print(f"  {size:>7} fragments: search p50 {run['search_p50_ms']} ms", file=sys.stderr)
        finally:
            store.close()
    result["rss_mb"]["end"] = rss_mb()
    result["load_avg_end"] = os.getloadavg()
    result["vectors"] = (
        f"{args.real + 200} fragments embedded by the real model (the indexing runs); "
        f"the others reuse one of 256 real vectors plus {NOISE:.1f}-norm Gaussian noise, renormalised"
    )
    return result


def table(result: dict[str, Any]) -> str:
    lines = [
        "| fragments (user) | search p50 | search p99 | query embedding p50 | total p50 | total p99 | BM25 load"
        " | CPU p50: total / search / embedding |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for s in result["scales"]:
        lines.append(
            f"| {s['fragments']:,} | {s['search_p50_ms']} ms | {s['search_p99_ms']} ms | {s['embed_p50_ms']} ms"
            f" | {s['total_p50_ms']} ms | {s['total_p99_ms']} ms | {s['bm25_load_s']} s"
            f" | {s['cpu_p50_ms']['total']} / {s['cpu_p50_ms']['search']} / {s['cpu_p50_ms']['embed']} ms |"
        )
    for run in result["indexing"]:
        lines.append(f"\nindexing, {run['batch']} messages a call: {run['per_s']} fragments/s ({run['fragments']} fragments)")
    rss = result["rss_mb"]
    lines.append(
        f"RSS: {rss['start']['now']} MB at start, {rss['model_loaded']['now']} MB with the model loaded, "
        f"{rss['end']['now']} MB after the runs (peak {rss['end']['peak']} MB)"
    )
    lines.append(f"vectors: {result['vectors']}; other users: {len(OTHERS)} × {OTHER_SIZE:,} fragments")
    lines.append(
        f"cpus: {result['cpus']}, load average at start: {result['load_avg'][0]:.2f}, at the end:"
        f" {result['load_avg_end'][0]:.2f}"
    )
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000", type=lambda s: [int(x) for x in s.split(",")])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--real", type=int, default=2000, help="fragments embedded by the real model")
    parser.add_argument("--out", default=str(OUT))
    args = parser.parse_args()
    result = asyncio.run(main(args))
    print(table(result))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
