"""Packing's cost: ``packing.select`` over a ranking of one user's turns, in one process.

Usage (from the repo root, in its virtualenv)::

    python bench/packing.py                  # this checkout
    python bench/packing.py --repo ../before # another checkout's packing, for a before/after pair

Two rankings of 120 hits, each a turn of one user's long chat in random
order of score, as recall ranks them:

- ``near``: the turns follow each other in the history, so they form
  stretches. One card fills to half the budget, and every later hit would
  join it.
- ``apart``: the turns are 50 apart in the history, so each is a card of its
  own (top_k 8).

Printed: the best of ``--repeat`` × ``--number`` calls, per call, and the
cards made. Pure CPU on synthetic turns; no store, no model.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import timeit
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
FACTS = ["my flight is BA117 on March 3", "I am allergic to peanuts", "my manager is called Priya",
         "the budget is 42,000 euros", "I prefer window seats", "my daughter turns 7 in June"]


def ranking(spacing: int, count: int = 120, session_turns: int = 40) -> list[Any]:
    from proxy.memory.recall.ranking import Hit
    from proxy.memory.search.fusion import Part, Scored
    from proxy.store.records import Fragment

    rng = random.Random(1)
    hits = []
    for turn in range(count):
        role = "user" if turn % 2 == 0 else "assistant"
        text = (f"Turn {turn}: {FACTS[turn % 6]}. What should I pack for a trip to city {turn % 17}?"
                if role == "user" else f"Hello! How can I help you today with thing {turn}?")
        frag = Fragment(1000 + turn * spacing, f"s{turn // session_turns}", f"h{turn}", role, text,
                        turn % session_turns, 25, 1.7e9)
        score = rng.random()
        hits.append(Hit(Scored(("f", frag.id), Part(0.5, score), Part(0.5, score), score, 1.0), frag, None, score))
    hits.sort(key=lambda h: -h.score)
    return hits


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repo", type=Path, default=HERE.parent, help="the checkout whose packing is measured")
    parser.add_argument("--number", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(args.repo.resolve()))
    from proxy.memory.recall.packing import select
    from proxy.tokens import TokenCounter

    counter = TokenCounter(None)
    out = {}
    for name, spacing in (("near", 1), ("apart", 50)):
        hits = ranking(spacing)
        cards = select(hits, counter, 8, 800)
        best = min(timeit.repeat(lambda h=hits: select(h, counter, 8, 800), number=args.number, repeat=args.repeat))
        out[name] = {"us_per_select": round(best / args.number * 1e6), "cards": len(cards),
                     "turns_per_card": [c.id.count(",") + 1 for c in cards]}
    print(json.dumps({"repo": args.repo.resolve().name, **out}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
