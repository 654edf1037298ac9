"""What the profile adds to a request: ``profile_of`` over a user's live items, cold and from the memo.

Each user holds N active items (a fifth of them standing facts of every kind,
the rest events and entities that never stand), with fresh contents per run
so the token counter's cache answers only what a serving process would have
cached: the same items on every request. Reported per N, as the median and
p95 of one request's profile:

- cold: ``profile_of`` computed (selection, ranking, token counts, cards), as
  on a user's first request or right after their items changed; the first
  request of a run is shown apart (the token counter's cache still empty);
- warm: what recall does on the following requests while the items are
  unchanged (``ProfileMemo``: a comparison of the items' version, the
  settings and the next expiry);
- off: the same call with ``memory.profile`` off, for scale.

    python bench/profile.py [--items 50,300,1000] [--requests 300]
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import random
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from proxy.config import from_dict
from proxy.memory.recall.profile import ProfileMemo, profile_of
from proxy.tokens import TokenCounter

NOW = dt.datetime(2026, 11, 30, tzinfo=dt.UTC)
KINDS = [("constraint", "user.diet.{}"), ("entity", "user.allergy.{}"), ("preference", "user.preference.{}"),
         ("task", "user.task.{}"), ("entity", "user.name.{}")]


@dataclass(frozen=True)
class Item:
    id: int
    type: str
    key: str
    content: str
    importance: float
    source: str
    expires_at: str | None
    status: str
    created: float
    updated: float


def items(n: int, rnd: random.Random) -> list[Item]:
    out = []
    for i in range(n):
        kind, key = KINDS[i % len(KINDS)] if i % 5 == 0 else ("event", "user.trip.{}")
        words = " ".join(rnd.choice(["tea", "Lyon", "peanuts", "Friday", "dentist", "jazz", "Miso"]) for _ in range(9))
        age = rnd.uniform(0, 400) * 86_400
        out.append(Item(i + 1, kind, key.format(i), f"The user {words} ({rnd.random():.6f}).", rnd.uniform(0.3, 1.0),
                        "user-stated", None, "active", NOW.timestamp() - age, NOW.timestamp() - age / 2))
    return out


def timed(n: int, requests: int, mode: str, rnd: random.Random) -> tuple[float, float, float]:
    """(first request, p50, p95) in ms of one request's profile: ``mode`` cold, warm or off."""
    memory = from_dict({}, env={}).defaults.memory
    memory = memory.model_copy(update={"profile": mode != "off"})
    counter = TokenCounter("gpt-4o-mini")
    facts = items(n, rnd)
    memo = ProfileMemo()
    version = (n, max(f.updated for f in facts))  # what the store's version of the items would be

    def one() -> None:
        if mode == "warm":
            memo.of(version, facts, memory, counter, NOW)
        else:
            profile_of(facts, memory, counter, NOW)

    started = time.perf_counter()
    one()
    first = (time.perf_counter() - started) * 1000
    samples = []
    for _ in range(requests):
        started = time.perf_counter()
        one()
        samples.append((time.perf_counter() - started) * 1000)
    samples.sort()
    return first, statistics.median(samples), samples[int(0.95 * (len(samples) - 1))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", default="50,300,1000")
    parser.add_argument("--requests", type=int, default=300)
    args = parser.parse_args()
    rnd = random.Random(7)
    print("| items | profile | first request ms | p50 ms | p95 ms |")
    print("|---|---|---|---|---|")
    for n in (int(x) for x in args.items.split(",")):
        for mode in ("cold", "warm", "off"):
            first, p50, p95 = timed(n, args.requests, mode, rnd)
            print(f"| {n} | {mode} | {first:.4f} | {p50:.4f} | {p95:.4f} |")
    print(f"\nload average: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
