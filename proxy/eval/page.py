"""``paperclip eval ... --report DIR``: an HTML page with plots of one eval run (matplotlib).

Three figures: the tokens each replayed request carried from the client and
forwarded upstream, over the conversation; evidence presence per question
category for each retriever (the fusion and its ablations); the final scores
of the candidates that were injected and of those that were not. Written as
``index.html`` beside its PNGs; nothing of the data set's text goes in.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only: no display, no GUI toolkit

import matplotlib.pyplot as plt
from jinja2 import Environment

from .locomo import CATEGORIES
from .replay import Stats
from .report import COLUMNS, cell, compression, forwarded_against_sent, headline

# The reports' look, shared by this page and the scenarios' (``scenarios_page``).
STYLE = """<style>body{font:14px/1.45 system-ui,sans-serif;max-width:1100px;margin:1rem auto;padding:0 1rem}
table{border-collapse:collapse}th,td{border:1px solid #ddd;padding:.25rem .45rem;text-align:right}
th:first-child,td:first-child{text-align:left}img{max-width:100%;border:1px solid #eee;margin:.5rem 0}</style>"""

_PAGE = Environment(autoescape=True).from_string("""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Paperclip eval report</title>
{{ style|safe }}
</head><body>
<h1>Paperclip eval report</h1>
<p>{{ headline }}</p>
<table><tr><th>retriever</th>{% for c in columns %}<th>{{ c }}</th>{% endfor %}</tr>
{% for name, cells in rows %}<tr><td>{{ name }}</td>{% for v in cells %}<td>{{ v }}</td>{% endfor %}</tr>{% endfor %}
</table>
<h2>Tokens: what the client sent and what was forwarded</h2>
<p>Each replayed request of the first conversation; over the whole run, {{ tokens }}.</p>
<img src="tokens.png" alt="forwarded vs client tokens per request">
<h2>Evidence presence by category, fusion and its ablations</h2>
<img src="presence.png" alt="evidence presence by category and retriever">
<h2>Scores of the candidates, injected or not</h2>
<p>{{ injected }} injected and {{ other }} not injected candidates (the default retriever).</p>
<img src="scores.png" alt="score distributions of injected and not injected candidates">
</body></html>
""")


def write_report(
    folder: str | Path, meta: Mapping[str, Any], stats: Stats, summary: Mapping[str, Mapping[str, Any]]
) -> Path:
    """Write ``index.html`` and its figures into ``folder`` (created); returns the page's path."""
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    _tokens(stats, out / "tokens.png")
    _presence(summary, out / "presence.png")
    _scores(stats, out / "scores.png")
    tokens = compression(stats)
    page = _PAGE.render(
        style=STYLE,
        headline=headline(meta, stats), columns=COLUMNS,
        rows=[(name, [cell(c, row.get(c)) for c in COLUMNS]) for name, row in summary.items()],
        tokens=forwarded_against_sent(tokens["tokens_sent"], tokens["tokens_forwarded"]),
        injected=len(stats.injected_scores), other=len(stats.other_scores),
    )
    path = out / "index.html"
    path.write_text(page, encoding="utf-8")
    return path


def _tokens(stats: Stats, path: Path) -> None:
    fig, ax = plt.subplots(figsize=(9, 4))
    conv, series = next(iter(stats.timeline.items()), ("", []))
    steps = range(1, len(series) + 1)
    ax.plot(steps, [c for c, _ in series], label="sent by the client")
    ax.plot(steps, [f for _, f in series], label="forwarded upstream")
    ax.set(xlabel=f"request of conversation {conv}", ylabel="prompt tokens")
    ax.legend()
    save_figure(fig, path)


def _presence(summary: Mapping[str, Mapping[str, Any]], path: Path) -> None:
    categories = [*CATEGORIES.values(), "cats 1-4"]
    fig, ax = plt.subplots(figsize=(9, 4))
    width = 0.8 / max(len(summary), 1)
    for n, (variant, row) in enumerate(summary.items()):
        values = [row.get(c) or 0.0 for c in categories]
        ax.bar([i + n * width for i in range(len(categories))], values, width, label=variant)
    ax.set_xticks([i + width * (len(summary) - 1) / 2 for i in range(len(categories))], categories)
    ax.set(ylabel="evidence presence", ylim=(0, 1))
    ax.legend()
    save_figure(fig, path)


def _scores(stats: Stats, path: Path) -> None:
    fig, ax = plt.subplots(figsize=(9, 4))
    ax.hist([stats.injected_scores, stats.other_scores], bins=40, label=["injected", "not injected"],
            histtype="stepfilled", alpha=0.6)
    ax.set(xlabel="final score", ylabel="candidates")
    ax.legend()
    save_figure(fig, path)


def save_figure(fig: Any, path: Path) -> None:
    """Write a figure as a PNG and free it."""
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
