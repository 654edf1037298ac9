"""Structured memories on LoCoMo: no duplicates or echo on a replay, and recall with and without items.

    python bench/items.py LOCOMO.json [--limit N] [--embedder bundled]

LOCOMO.json is the LoCoMo file (docs/recall.md says where to get it).

1. Replays each conversation (``--mode sessions``: every session its own chat
   of the same user) through the serving pipeline twice and counts the user's
   active items after each pass: a second pass must add none (dedup by
   embedding, supersede by key, injected blocks never re-extracted).
2. Runs the retrieval eval (fusion only) twice: with extraction on cadence
   (the default) and with extraction off, and prints evidence presence for
   cats 1-4 side by side: adding items to the index must not lower it.

Uses ``proxy.eval`` (the same harness as ``paperclip eval``); the extraction
model is the eval's fake, so items come from the rule-based extractor — the
path a deployment takes when its model returns junk. Writes
bench/results/items.json. The LoCoMo data is read, never copied.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from proxy.eval import locomo  # noqa: E402
from proxy.eval.harness import VARIANTS, Options, open_harness  # noqa: E402
from proxy.eval.replay import Stats, replay, run  # noqa: E402
from proxy.eval.report import summarise  # noqa: E402

NO_EXTRACTION = {"extract_every_messages": 10**9}


async def active_items(h: Any, user: str) -> int:
    rows = await h.memory.store.items.all(h.tenant.id, user)
    return len(rows)


async def replay_twice(convs: list[locomo.Conversation], embedder: str) -> list[dict[str, Any]]:
    out = []
    with tempfile.TemporaryDirectory(prefix="paperclip-items-") as folder:
        h = await open_harness(Options(mode="sessions", embedder=embedder), Path(folder))
        try:
            for conv in convs:
                counts = []
                for _ in range(2):
                    await replay(h, conv, "sessions", Stats(), lambda n: None)
                    await h.runtime.background.drain()
                    counts.append(await active_items(h, conv.id))
                out.append({"conversation": conv.id, "after_pass_1": counts[0], "after_pass_2": counts[1]})
                print(f"  {conv.id}: {counts[0]} active items after pass 1, {counts[1]} after pass 2", flush=True)
        finally:
            h.close()
    return out


async def presence(convs: list[locomo.Conversation], embedder: str, memory: dict[str, Any]) -> dict[str, Any]:
    options = Options(mode="sessions", embedder=embedder, memory=memory, variants=VARIANTS[:1])
    answers, _ = await run(convs, options)
    return summarise(answers)["fusion"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data", help="the LoCoMo file")
    parser.add_argument("--limit", type=int, default=None, help="the first N conversations")
    parser.add_argument("--embedder", default="bundled")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "items.json"))
    args = parser.parse_args()
    convs = locomo.load(args.data)[: args.limit]
    started = time.perf_counter()
    print("replaying each conversation twice (sessions mode):", flush=True)
    passes = asyncio.run(replay_twice(convs, args.embedder))
    print("evidence presence, fusion, with and without items:", flush=True)
    with_items = asyncio.run(presence(convs, args.embedder, {}))
    without = asyncio.run(presence(convs, args.embedder, NO_EXTRACTION))
    print()
    print(f"{'':24}{'cats 1-4':>10}{'tokens':>10}")
    for label, s in (("with items", with_items), ("without items", without)):
        print(f"{label:24}{s['cats 1-4']:>10.3f}{s['memory tok']:>10.0f}")
    unchanged = all(p["after_pass_1"] == p["after_pass_2"] for p in passes)
    print(f"\nactive items unchanged by the second pass: {'yes' if unchanged else 'NO'}")
    print(f"({time.perf_counter() - started:.0f} s)")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(
        json.dumps({"passes": passes, "with_items": with_items, "without_items": without}, indent=2)
    )
    return 0 if unchanged else 1


if __name__ == "__main__":
    raise SystemExit(main())
