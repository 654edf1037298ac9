"""Aggregating answers into the tables the eval prints, and its JSON and Markdown files."""

from __future__ import annotations

import dataclasses
import json
import statistics
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from .locomo import ANSWERABLE, CATEGORIES
from .replay import NDCG_K, RECALL_KS, Answer, Stats

COLUMNS = [
    "cats 1-4", "answers 1-4", "cats 1-4, no date named", *CATEGORIES.values(), *(f"R@{k}" for k in RECALL_KS), f"NDCG@{NDCG_K}",
    "memory tok", "max memory tok", "forwarded tok", "no memory",
]


def _mean(values: Sequence[float]) -> float | None:
    return statistics.fmean(values) if values else None


def summarise(answers: Sequence[Answer]) -> dict[str, dict[str, Any]]:
    """Per variant: presence by category and over cats 1–4, recall@k, NDCG, tokens."""
    out: dict[str, dict[str, Any]] = {}
    for variant in dict.fromkeys(a.variant for a in answers):
        rows = [a for a in answers if a.variant == variant]
        scored = [a for a in rows if a.category in ANSWERABLE]
        ranked = [a for a in scored if a.recall is not None]
        row: dict[str, Any] = {
            "questions": len(rows),
            "cats 1-4": _mean([a.presence for a in scored]),
            "answers 1-4": _mean([a.answer_presence for a in scored]),
            # What a clock cannot move: the questions that do not name the day they ask about.
            "cats 1-4, no date named": _mean([a.presence for a in scored if not a.names_date]),
            "date named": sum(a.names_date for a in scored),
            "scored": len(scored),
            **{
                name: _mean([a.presence for a in rows if a.category == cat])
                for cat, name in CATEGORIES.items()
            },
            **{f"R@{k}": _mean([a.recall[k] for a in ranked if a.recall]) for k in RECALL_KS},
            f"NDCG@{NDCG_K}": _mean([a.ndcg for a in ranked if a.ndcg is not None]),
            "memory tok": _mean([a.tokens_memory for a in rows]),
            "max memory tok": max((a.tokens_memory for a in rows), default=0),
            "forwarded tok": _mean([a.tokens_forwarded for a in rows]),
            "no memory": _mean([float(a.cards == 0) for a in rows]),
            "cards": _mean([a.cards for a in rows]),
        }
        out[variant] = row
    return out


def table(summary: Mapping[str, Mapping[str, Any]]) -> str:
    """A Markdown table, one row per variant."""
    lines = [
        "| retriever | " + " | ".join(COLUMNS) + " |",
        "|---|" + "---|" * len(COLUMNS),
    ]
    for variant, row in summary.items():
        lines.append(f"| {variant} | " + " | ".join(cell(c, row.get(c)) for c in COLUMNS) + " |")
    return "\n".join(lines)


def cell(column: str, value: Any) -> str:
    if value is None:
        return "–"
    if "tok" in column:
        return f"{value:.0f}"
    return f"{value:.3f}"


def headline(meta: Mapping[str, Any], stats: Stats) -> str:
    return (
        f"LoCoMo · mode {meta['mode']} · clock {meta.get('clock', 'dated')} · "
        f"model {meta.get('model', 'rules')} · embedder {meta['embedder']} · "
        f"{meta['conversations']} conversations · {stats.questions} questions "
        f"({stats.skipped} without evidence skipped, "
        f"{'recorded' if meta.get('record_questions', True) else 'not recorded'}) · top_k {meta['top_k']} · "
        f"budget {meta['budget_tokens']} tokens · {stats.requests} requests replayed in "
        f"{stats.replay_s:.0f} s, questions in {stats.questions_s:.0f} s · "
        f"{stats.compression_calls} compression-model calls"
    )


def compression(stats: Stats) -> dict[str, Any]:
    """The replayed requests' tokens, as the client sent them and as Paperclip forwarded them, and the
    ratio (forwarded / sent: below 1, compression saved more than recall added)."""
    sent = sum(c for series in stats.timeline.values() for c, _ in series)
    forwarded = sum(f for series in stats.timeline.values() for _, f in series)
    return {"tokens_sent": sent, "tokens_forwarded": forwarded, "ratio": round(forwarded / sent, 3) if sent else None}


def forwarded_against_sent(client: int, forwarded: int) -> str:
    """The tokens forwarded against those the client sent, worded for fewer and for more."""
    if not client:
        return "the client sent no tokens"
    change = (forwarded - client) / client
    counts = f"{forwarded:,} forwarded for {client:,} sent"
    if change < 0:
        return f"Paperclip forwarded {-change:.1%} fewer tokens than the client sent ({counts})"
    if change > 0:
        return (
            f"Paperclip forwarded {change:.1%} more tokens than the client sent ({counts}): "
            "the memory it added outweighed what compression removed"
        )
    return f"Paperclip forwarded as many tokens as the client sent ({counts})"


def markdown(meta: Mapping[str, Any], stats: Stats, summary: Mapping[str, Mapping[str, Any]]) -> str:
    notes = (
        "Evidence presence per category and over cats 1–4; answers 1–4: the share of "
        "questions whose answer (normalised) is in what was forwarded; cats 1-4, no date named: evidence "
        "presence over the questions that name no calendar day or month with its year (under --clock burst "
        "the day a question names never came); R@k and NDCG over the ranked candidates "
        "(evidence already in the verbatim window excluded); tokens per question "
        "(all categories)."
    )
    tokens = compression(stats)
    ratio = f"compression ratio {tokens['ratio']:.3f}: " if tokens["ratio"] is not None else ""
    said = f"{ratio}{forwarded_against_sent(tokens['tokens_sent'], tokens['tokens_forwarded'])}"
    return f"{headline(meta, stats)}\n\n{said} over the replayed requests.\n\n{table(summary)}\n\n{notes}\n"


def write_json(
    path: str | Path, meta: Mapping[str, Any], stats: Stats, summary: Mapping[str, Any], answers: Sequence[Answer]
) -> None:
    # Scores only: the data set's text (questions, turns) never goes into a results file.
    payload = {
        "meta": dict(meta),
        "stats": dataclasses.asdict(stats),
        "summary": summary,
        "compression": compression(stats),
        "answers": [dataclasses.asdict(a) for a in answers],
    }
    Path(path).write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")


def read_answers(path: str | Path) -> tuple[dict[str, Any], list[Answer]]:
    """The meta and answers of a file ``write_json`` wrote."""
    payload = json.loads(Path(path).read_text(encoding="utf-8"))
    answers = [
        Answer(**{**a, "recall": {int(k): v for k, v in a["recall"].items()} if a["recall"] else None})
        for a in payload["answers"]
    ]
    return payload["meta"], answers


def by_half(
    answers: Sequence[Answer], halves: Mapping[str, Collection[str]], variant: str = "fusion"
) -> dict[str, dict[str, Any]]:
    """``variant``'s summary over each half's conversations (a half's name -> its sample_ids)."""
    out = {}
    for name, ids in halves.items():
        rows = summarise([a for a in answers if a.variant == variant and a.conversation in ids])
        if variant not in rows:
            raise ValueError(f"no answer of {variant} for half {name} ({', '.join(sorted(ids))})")
        out[name] = rows[variant]
    return out
