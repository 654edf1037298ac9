"""``paperclip eval scenarios --report DIR``: an HTML page with plots of one scenario run (matplotlib).

The summary per language (recall, superseded values injected, unrelated
questions given cards), two figures — the share of facts recalled per
language, and the cards injected for each question beside those injected for
its unrelated one — and a row per scenario with what it missed. Written as
``index.html`` beside its PNGs. Only the tuning half is drawn (with the rules), its ids and
missed phrases shown: a frozen half's cases are never named (whoever read
which missed could no longer write rules blind to them).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only: no display, no GUI toolkit

import matplotlib.pyplot as plt
from jinja2 import Environment

from .page import STYLE, save_figure
from .scenarios import Result, summary

_PAGE = Environment(autoescape=True).from_string("""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Paperclip scenarios report</title>
{{ style|safe }}
</head><body>
<h1>Paperclip scenarios report</h1>
<p>{{ results|length }} scenarios of the tuning half: standing facts asked about indirectly in a fresh chat. The frozen half is never named here.</p>
<table><tr><th>scenarios</th><th>n</th><th>recall</th><th>superseded injected</th>
<th>unrelated questions given cards</th></tr>
{% for name, row in table.items() %}<tr><td>{{ name }}</td><td>{{ row.scenarios }}</td><td>{{ row.recall }}</td>
<td>{{ row.superseded_injected }}</td><td>{{ row.unrelated_with_cards }}</td></tr>{% endfor %}
</table>
<h2>Facts recalled, by language</h2>
<img src="recall.png" alt="share of facts recalled per language">
<h2>Cards injected: the question, and an unrelated one outside the profile</h2>
<img src="cards.png" alt="cards injected per scenario for the question and for an unrelated question">
<h2>Each scenario</h2>
<table><tr><th>scenario</th><th>lang</th><th>recalled</th><th>superseded injected</th><th>cards</th>
<th>unrelated cards</th><th>missed</th></tr>
{% for r in results %}<tr><td>{{ r.id }}</td><td>{{ r.lang }}</td><td>{{ r.recalled }}/{{ r.facts }}</td>
<td>{{ 'yes' if r.superseded_injected else 'no' }}</td><td>{{ r.cards }}</td><td>{{ r.unrelated_cards }}</td>
<td>{{ r.missing|join('; ') }}</td></tr>{% endfor %}
</table>
</body></html>
""")


def write_report(folder: str | Path, results: Sequence[Result]) -> Path:
    """Write ``index.html`` and its figures into ``folder`` (created); returns the page's path."""
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    results = [r for r in results if r.half == "tuning" and r.stand_in == "rules"]
    table = summary(results)
    _recall(table, out / "recall.png")
    _cards(results, out / "cards.png")
    path = out / "index.html"
    path.write_text(_PAGE.render(style=STYLE, results=results, table=table), encoding="utf-8")
    return path


def _recall(table: dict[str, Any], path: Path) -> None:
    fig, ax = plt.subplots(figsize=(6, 3.5))
    names = list(table)
    ax.bar(names, [table[n]["recall"] or 0.0 for n in names])
    ax.set(ylabel="facts recalled", ylim=(0, 1))
    save_figure(fig, path)


def _cards(results: Sequence[Result], path: Path) -> None:
    fig, ax = plt.subplots(figsize=(9, 3.5))
    at = range(len(results))
    ax.bar([i - 0.2 for i in at], [r.cards for r in results], 0.4, label="the question")
    ax.bar([i + 0.2 for i in at], [r.unrelated_cards for r in results], 0.4, label="an unrelated question (outside the profile)")
    ax.set(xlabel="scenario", ylabel="cards injected")
    ax.legend()
    save_figure(fig, path)
