"""What the profile adds to a request: ``profile_of`` over a user's live items, side by side with none.

Each user holds N active items (a fifth of them standing facts of every kind,
the rest events and entities that never stand), with fresh contents per run
so the token counter's cache answers only what a serving process would have
cached: the same items on every request. Reported per N: the median and p95
of one request's profile (selection, ranking, token counts, cards), first
request of a user and the following ones, and the same call with the profile
turned off, for scale.

    python bench/profile.py [--items 50,300,1000] [--requests 300]
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import random
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from proxy.config import from_dict
from proxy.memory.profile import profile_of
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


def timed(n: int, requests: int, on: bool, rnd: random.Random) -> tuple[float, float, float]:
    memory = from_dict({}, env={}).defaults.memory
    memory = dataclasses.replace(memory, profile=on)
    counter = TokenCounter("gpt-4o-mini")
    facts = items(n, rnd)
    started = time.perf_counter()
    profile_of(facts, memory, counter, NOW)
    first = (time.perf_counter() - started) * 1000
    samples = []
    for _ in range(requests):
        started = time.perf_counter()
        profile_of(facts, memory, counter, NOW)
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
        for on in (True, False):
            first, p50, p95 = timed(n, args.requests, on, rnd)
            print(f"| {n} | {'on' if on else 'off'} | {first:.3f} | {p50:.3f} | {p95:.3f} |")


if __name__ == "__main__":
    main()
