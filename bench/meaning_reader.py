"""The reader by meaning (``proxy/memory/extraction/meaning.py``): what it keeps, and what it costs.

Usage (from the repo root, in its virtualenv)::

    python bench/meaning_reader.py                    # the calibration sentences
    python bench/meaning_reader.py --locomo FILE      # and LoCoMo's turns, per half (docs/recall.md says where to get it)

Prints, for ``bench/data/meaning-calibration.json`` (sentences of our own, which its thresholds were set on:
lasting facts a user states about themself, and sentences that state none, short and long) and
``bench/data/meaning-heldout.json`` (more, written after the reader and never tuned on) and
``bench/data/possessive-heldout.json`` (statements whose only first person is "my", "our" or "us", and
sentences of other people's, offices' and moments' facts; written before the reader took such statements,
never tuned on) and ``bench/data/meaning-heldout-everyday.json`` (chat lines written blind before the
examples were widened, never tuned on) and ``bench/data/meaning-heldout-dropped.json`` (chat lines that leave
their subject out, written blind before the reader took such lines, never tuned on), how many facts
the rules read, how many of the rest the reader reads, and how many non-facts either takes for a fact; the
same for ``bench/data/chinese-statements-heldout.json`` and ``-2.json`` (Chinese facts and non-facts, each
written by a helper blind to the reader of Chinese statements, ``chinese_statements.py``, after it, never
tuned on; the second after the reader took sentences with no subject) with that reader; for LoCoMo (``--locomo``, read, never copied), per half of the dev set, how many
of the turns' sentences that no rule reads are candidates and how many it reads as facts; and the
bundled model's CPU time per sentence (``time.process_time``), which is the reader's cost per candidate.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import time
from pathlib import Path
from typing import Any

from proxy.memory.extraction import chinese_statements, meaning
from proxy.memory.extraction.rules import read_turns
from proxy.memory.search.embedder import load_embedder

HERE = Path(__file__).resolve().parent
HALVES = {"A": ("conv-26", "conv-30"), "B": ("conv-41", "conv-42")}
NOW = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
CHINESE_HELD_OUT = (HERE / "data" / "chinese-statements-heldout.json", HERE / "data" / "chinese-statements-heldout-2.json")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--locomo", type=Path, help="a LoCoMo-format JSON file")
    args = parser.parse_args()
    embedder = load_embedder("bundled")

    async def embed(texts: Any) -> Any:
        return embedder.embed(list(texts))

    reader = meaning.MeaningReader(embed)
    rows = json.loads((HERE / "data" / "meaning-calibration.json").read_text())["sentences"]
    held_out = json.loads((HERE / "data" / "meaning-heldout.json").read_text())["sentences"]
    possessive = json.loads((HERE / "data" / "possessive-heldout.json").read_text())["sentences"]
    everyday = json.loads((HERE / "data" / "meaning-heldout-everyday.json").read_text())["sentences"]
    dropped = json.loads((HERE / "data" / "meaning-heldout-dropped.json").read_text())["sentences"]
    sets = [(f"calibration, {kind}", [r for r in rows if r["set"] == kind]) for kind in ("short", "long", "dropped")]
    print("| set | facts: by the rules | by meaning, of the rest | by either | non-facts: by either |")
    print("|---|---|---|---|---|")
    for name, mine in [*sets, ("held out", held_out), ("held out, possessive", possessive),
                       ("held out, everyday", everyday), ("held out, subject left out", dropped)]:
        ruled = [any(i.standing for i in read_turns([(1, "user", r["said"])], NOW)[0]) for r in mine]
        meant = [bool(asyncio.run(reader.read(read_turns([(1, "user", r["said"])], NOW)[1]))) for r in mine]
        facts = [(a, b) for a, b, r in zip(ruled, meant, mine, strict=True) if r["fact"]]
        other = [a or b for a, b, r in zip(ruled, meant, mine, strict=True) if not r["fact"]]
        print(f"| {name} | {sum(a for a, _ in facts)} of {len(facts)} | {sum(b and not a for a, b in facts)} of "
              f"{sum(not a for a, _ in facts)} | {sum(a or b for a, b in facts)} of {len(facts)} | "
              f"{sum(other)} of {len(other)} |")
    print("\n| Chinese, held out | facts: by the rules | as statements, of the rest | by either | non-facts: by either |")
    print("|---|---|---|---|---|")
    for path in CHINESE_HELD_OUT:
        chinese = json.loads(path.read_text())
        found = {}
        for kind in ("facts", "non_facts"):
            read = [read_turns([(1, "user", said)], NOW) for said in chinese[kind]]
            ruled = [any(i.standing for i in items) for items, _ in read]
            kept = [bool(chinese_statements.read(unread)) for _, unread in read]
            found[kind] = list(zip(ruled, kept, strict=True))
        facts, other = found["facts"], found["non_facts"]
        print(f"| {path.name}: {len(facts)} and {len(other)} | {sum(a for a, _ in facts)} of {len(facts)} | "
              f"{sum(b and not a for a, b in facts)} of {sum(not a for a, _ in facts)} | "
              f"{sum(a or b for a, b in facts)} of {len(facts)} | {sum(a or b for a, b in other)} of {len(other)} |")
    candidates: list[str] = []
    if args.locomo:
        data = json.loads(args.locomo.read_text())
        print("\n| LoCoMo half | turns | sentences no rule reads | candidates | read as facts |\n|---|---|---|---|---|")
        for half, ids in HALVES.items():
            turns = 0
            unread: list[tuple[int, str]] = []
            for conv in (c for c in data if c["sample_id"] in ids):
                chat = conv["conversation"]
                for key in sorted(k for k in chat if k.startswith("session_") and isinstance(chat[k], list)):
                    said = [(i, "user", t["text"]) for i, t in enumerate(chat[key])]
                    turns += len(said)
                    unread += read_turns(said, NOW)[1]
            mine = [s for _, s in unread if meaning.statement(s)]
            candidates += mine
            read = asyncio.run(reader.read(unread))
            print(f"| {half} | {turns} | {len(unread)} | {len(mine)} | {len(read)} |")
    # A fresh embedder (it keeps recent vectors) and sentences it has not seen: each is computed.
    texts = list(dict.fromkeys(candidates[:400] or [r["said"] for r in [*rows, *held_out]]))
    fresh = load_embedder("bundled")
    fresh.embed(["A sentence to warm the model up."])
    started = time.process_time()
    for i in range(0, len(texts), 20):
        fresh.embed(texts[i : i + 20])
    print(f"\nbundled model, CPU per sentence: {(time.process_time() - started) / len(texts) * 1000:.2f} ms "
          f"({len(texts)} sentences, batches of 20)")


if __name__ == "__main__":
    main()
