"""The relevance gate's data: raw scores of relevant and irrelevant candidates on a LoCoMo-format file.

Replays each conversation (sessions mode, questions not recorded) through the
eval harness, then asks every question twice: of its own user, where its
evidence turns are the relevant candidates, and of another conversation's
user, where nothing can be relevant (different people, different lives). For
each ask it reads the ranked candidates the gate sees (the best ``GATE_DEPTH``
by fused score) with their raw cosine and BM25, and reports

- the raw cosine of evidence candidates against that of the other candidates;
- the gate statistic — the best raw cosine among the gated candidates — for
  own-user and other-user asks;
- for a grid of (``min_cosine``, ``keyword_min_cosine``): the share of
  own-user asks that still pass (and of those whose evidence is among the
  candidates) and of other-user asks that pass (which should be none).

    python bench/gate.py LOCOMO.json [--out gate.json]

LOCOMO.json is the LoCoMo file (docs/recall.md says where to get it).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from proxy.eval import locomo
from proxy.eval.harness import Harness, Options, open_harness
from proxy.eval.replay import Stats, _fragment_lookup, replay
from proxy.memory.recall.ranking import GATE_DEPTH
from proxy.memory.recall.recall import Recall
from proxy.memory.search.fusion import Floor

GRID = (0.3, 0.35, 0.4, 0.45, 0.5, 0.55)
KEYWORD_GRID = (0.2, 0.3, 0.35, 0.4, 0.45, 0.5)  # keyword_min_cosine, never above min_cosine


async def asks(h: Harness, conv: locomo.Conversation, user: str, lookup: dict[str, set[str]]) -> list[dict[str, Any]]:
    at = 4e9  # after every session of every conversation
    out = []
    for q in conv.questions:
        call = h.call(h.tenant, user, [{"role": "user", "content": q.text}], at)
        prepared = await h.pipeline.prepare(call)
        recall: Recall | None = prepared.state.get("recall")
        hits = recall.hits if recall else []
        top = sorted(hits, key=lambda x: -x.scored.score)[:GATE_DEPTH]
        rows = []
        for hit in top:
            ids = lookup.get(locomo.normalise(hit.fragment.text), set()) if hit.fragment else set()
            rows.append({
                "cosine": hit.scored.vector.raw, "bm25": hit.scored.bm25.raw,
                "evidence": bool(ids & set(q.evidence)),
            })
        out.append({"category": q.category, "hits": rows})
    return out


def pct(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    a = np.asarray(values)
    return {f"p{p}": round(float(np.percentile(a, p)), 3) for p in (5, 10, 25, 50, 75, 90, 95)} | {"n": len(values)}


def passes(ask: dict[str, Any], floor: Floor) -> bool:
    return any(floor.passes(h["cosine"], h["bm25"]) for h in ask["hits"])


def best(ask: dict[str, Any]) -> float:
    return max((h["cosine"] for h in ask["hits"] if h["cosine"] is not None), default=0.0)


def _share(asks: list[dict[str, Any]], floor: Floor) -> float:
    return round(sum(passes(a, floor) for a in asks) / max(1, len(asks)), 3)


def report(own: list[dict[str, Any]], other: list[dict[str, Any]]) -> dict[str, Any]:
    evid = [h["cosine"] for a in own for h in a["hits"] if h["evidence"] and h["cosine"] is not None]
    rest = [h["cosine"] for a in own for h in a["hits"] if not h["evidence"] and h["cosine"] is not None]
    found = [a for a in own if any(h["evidence"] for h in a["hits"])]
    grid = {}
    for c in GRID:
        for k in KEYWORD_GRID:
            floor = dataclasses.replace(Floor(), min_cosine=c, keyword_min_cosine=min(c, k))
            grid[f"{c}/{min(c, k)}"] = {
                "own_pass": _share(own, floor),
                "own_with_evidence_pass": _share(found, floor),
                "other_pass": _share(other, floor),
            }
    return {
        "candidate_cosine": {"evidence": pct(evid), "other": pct(rest)},
        "gate_best_cosine": {"own_user": pct([best(a) for a in own]), "other_user": pct([best(a) for a in other])},
        "grid": grid,
    }


async def main(path: str, limit: int | None) -> dict[str, Any]:
    conversations = locomo.load(path)[:limit]
    options = Options(mode="sessions", record_questions=False)
    own: list[dict[str, Any]] = []
    other: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="paperclip-gate-") as folder:
        h = await open_harness(options, Path(folder))
        try:
            for conv in conversations:
                await replay(h, conv, "sessions", Stats(), lambda n: None)
            await h.services.background.drain()
            for i, conv in enumerate(conversations):
                lookup = _fragment_lookup(conv.turns().values(), h.tenant.settings.memory.pii)
                own += await asks(h, conv, conv.id, lookup)
                stranger = conversations[(i + 1) % len(conversations)]
                other += await asks(h, conv, stranger.id, {})
        finally:
            h.close()
    return report(own, other)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path")
    parser.add_argument("--limit-convs", type=int, default=None)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    result = asyncio.run(main(args.path, args.limit_convs))
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n", encoding="utf-8")
