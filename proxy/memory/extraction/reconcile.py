"""Conflicts the keys miss: new items reconciled with close existing ones (SPEC §5).

Pure, no I/O. After extraction, ``fold_batch`` merges the batch's own
duplicates by the rules; ``close_pairs`` puts each remaining new item beside
the user's active items, and the batch's earlier items, that are close to it
(embedding, key's slot family, category and holder); the compression model
judges every pair in one call (``prompts/reconcile.md``, the text from
``render_pairs``, the reply read by ``parse_verdicts``); pairs it did not judge
fall to the rules (``verdicts_for``: ``rule_verdict``, the same rules as
``lifecycle.decide``); ``settle`` applies the verdicts between the batch's own
items (a later statement that changes an earlier one of the same chat drops
it); ``decisions`` turns the rest into the ``Decision`` per item that the
store executes. ``pick_sources`` finds the turns a superseded item came from
when the extraction gave no turn numbers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..lifecycle import (
    Decision,
    ExistingItem,
    Vector,
    cosine,
    decide,
    slot_members,
    stands_in_place,
)
from ..memory_schema import USER, MemoryItem, is_guess
from .item_parser import load_json

Verdict = Literal["merge", "supersede", "add"]
VERDICTS: frozenset[str] = frozenset({"merge", "supersede", "add"})

# Below this cosine two MiniLM sentences about the user are rarely one fact;
# above it the model, not the rules, says whether they are.
CLOSE_COSINE = 0.6
MAX_PAIRS_PER_ITEM = 3
# A superseded item's own statement: the turns of its session this close to it.
SOURCE_COSINE = 0.5
MAX_SOURCES = 2


@dataclass(frozen=True)
class Pair:
    """A new item (its index in the batch) beside one known item close to it.

    The known item is an active stored one, or (``earlier``: its index) an
    item of the same batch that the conversation said before the new one.
    """

    new: int
    old: ExistingItem
    cosine: float
    earlier: int | None = None


@dataclass(frozen=True)
class Batch:
    """An extraction batch with its own duplicates folded in.

    ``replaced``: each replacement of an item by a later one of the same
    batch that hides turns, as (the turns it hides, the old value's content,
    the new value's), for the replies that repeat it; ``dropped_turns``: all
    those turns — their fragments say a value that is no longer true.
    """

    items: tuple[MemoryItem, ...]
    vectors: tuple[Vector, ...]
    replaced: tuple[tuple[tuple[int, ...], str, str], ...] = ()

    @property
    def dropped_turns(self) -> tuple[int, ...]:
        return tuple(sorted({turn for hidden, _, _ in self.replaced for turn in hidden}))


def fold_batch(items: Sequence[MemoryItem], vectors: Sequence[Vector], dedup_cosine: float) -> Batch:
    """One item per fact: a repeat merges into the first (turns joined), a newer value replaces it.

    The batch is in conversation order, so within it the later statement of a
    slot is the user's latest word; the same rules as between batches decide.
    """
    kept: list[tuple[MemoryItem, Vector]] = []
    replaced: list[tuple[tuple[int, ...], str, str]] = []
    for item, vector in zip(items, vectors, strict=True):
        known = [ExistingItem(str(i), k.key, k.content, v, about=k.about, standing=k.standing)
                 for i, (k, v) in enumerate(kept)]
        decision = decide(item, vector, known, dedup_cosine)
        targets = [int(t) for t in decision.target_ids]
        if decision.action == "merge":
            first, first_vector = kept[targets[0]]
            kept[targets[0]] = (_joined(first, item), first_vector)
            continue
        for t in targets:
            _hide(kept[t][0], item, replaced)
        kept = [k for i, k in enumerate(kept) if i not in targets]
        kept.append((item, vector))
    return Batch(tuple(k for k, _ in kept), tuple(v for _, v in kept), tuple(replaced))


def _joined(first: MemoryItem, again: MemoryItem) -> MemoryItem:
    return first.model_copy(update={
        "importance": max(first.importance, again.importance),
        "confidence": max(first.confidence, again.confidence),
        "turns": tuple(sorted({*first.turns, *again.turns})),
    })


def slot_family(key: str) -> str | None:
    """The slot a key refines: ``user.location.home`` for ``user.location.home.city``.

    Keys of three segments or more only: ``user.preference`` is no family
    (every taste shares it) and two-segment keys already meet by equality.
    """
    parts = key.split(".")
    return ".".join(parts[:3]) if len(parts) >= 3 else None


def _hide(old: MemoryItem, by: MemoryItem, replaced: list[tuple[tuple[int, ...], str, str]]) -> None:
    """Note in ``replaced`` the turns ``by`` replacing ``old`` hides (``_hidden_turns``), with both values."""
    hidden = _hidden_turns(old, by)
    if hidden:
        replaced.append((tuple(sorted(hidden)), old.content, by.content))


def _hidden_turns(replaced: MemoryItem, by: MemoryItem) -> set[int]:
    """The turns that said ``replaced`` and not ``by``, never to be injected again; none of a guess's
    (``memory_schema.is_guess``: a reading of a turn, not what it said)."""
    return set() if is_guess(replaced.confidence) else set(replaced.turns) - set(by.turns)


def close_pairs(
    batch: Batch,
    existing: Sequence[ExistingItem],
    *,
    close_cosine: float = CLOSE_COSINE,
    per_item: int = MAX_PAIRS_PER_ITEM,
) -> list[Pair]:
    """The pairs the model judges: each new item beside its closest known items.

    Known are the user's active items and the batch's items before it: a
    user corrects themself within one chat, and the model's extraction may
    keep both statements. Close means cosine ≥ ``close_cosine``, the same
    slot family, or the same category and holder; failing those, the same
    holder (a model files one fact under a category on one call and under
    another, or ``other``, on the next: a job as ``identity``, a new one as a
    ``plan``). A model spells one slot differently across calls
    (``user.job``, ``user.occupation``), and cosines between Chinese facts
    say little. At most ``per_item`` per new item: the first kinds of
    closeness before the holder's, closest first within each. An item whose
    slot an active item already holds (``lifecycle.slot_members``) is left
    out: the same key is the rules' to decide (a different value supersedes,
    SPEC §5).
    """
    stored = [e for e in existing if e.status == "active"]
    active: list[tuple[int | None, ExistingItem]] = [(None, e) for e in stored]
    said = [(m, ExistingItem(f"batch-{m}", k.key, k.content, v, about=k.about, category=k.category,
                             standing=k.standing))
            for m, (k, v) in enumerate(zip(batch.items, batch.vectors, strict=True))]
    pairs: list[Pair] = []
    for n, (item, vector) in enumerate(zip(batch.items, batch.vectors, strict=True)):
        if slot_members(item, stored):
            continue
        family = slot_family(item.key)
        ranked = []
        for m, e in active + said[:n]:
            c = cosine(vector, e.vector)
            tier = _closeness(item, family, e, c, close_cosine)
            if tier is not None:
                ranked.append((tier, -(c or 0.0), e.id, Pair(n, e, c or 0.0, m)))
        ranked.sort(key=lambda r: r[:3])
        pairs += [r[3] for r in ranked[:per_item]]
    return pairs


def _closeness(
    item: MemoryItem, family: str | None, known: ExistingItem, c: float | None, close_cosine: float
) -> int | None:
    """0 when ``known`` (at cosine ``c``) is close to ``item`` by embedding, slot family or category;
    1 by holder; else None."""
    same_holder = (known.about == USER) == item.about_user
    if (family is not None and slot_family(known.key) == family) or (c is not None and c >= close_cosine):
        return 0
    if same_holder and item.category == known.category != "other":
        return 0
    return 1 if same_holder else None


def settle(batch: Batch, pairs: Sequence[Pair], verdicts: Sequence[Verdict]) -> tuple[Batch, list[Pair], list[Verdict]]:
    """The verdicts between the batch's own items applied: the batch left, its pairs with stored items.

    A later item that supersedes an earlier one drops it (its turns join
    ``dropped_turns``, as in ``fold_batch``); one that repeats it merges into
    it. The item left inherits what the one it replaced superseded among the
    stored items (Bergen superseded Oslo, Trondheim supersedes Bergen: Oslo
    stays superseded), and its standing (``lifecycle.stands_in_place``). The pairs and verdicts returned are those beside stored
    items, their ``new`` renumbered over the items left.
    """
    items = list(batch.items)
    heir: dict[int, int] = {}  # an item gone -> the item that took its place
    replaced = list(batch.replaced)
    for p, verdict in zip(pairs, verdicts, strict=True):
        m = p.earlier
        if m is None or p.new in heir or m in heir:
            continue
        if verdict == "supersede":
            heir[m] = p.new
            _hide(items[m], items[p.new], replaced)
            if stands_in_place(items[p.new], items[m].standing):
                items[p.new] = items[p.new].model_copy(update={"standing": True})
        elif verdict == "merge":
            items[m] = _joined(items[m], items[p.new])
            heir[p.new] = m

    def owner(n: int) -> int:
        while n in heir:
            n = heir[n]
        return n

    left = [n for n in range(len(items)) if n not in heir]
    index = {n: i for i, n in enumerate(left)}
    kept: dict[tuple[int, str], tuple[Pair, Verdict]] = {}
    for p, verdict in zip(pairs, verdicts, strict=True):
        if p.earlier is not None:
            continue
        n = owner(p.new)
        if n != p.new and verdict != "supersede":
            continue  # only a replaced item's supersedes pass to the item left
        slot = (index[n], p.old.id)
        if slot not in kept or verdict == "supersede":
            kept[slot] = (dataclasses.replace(p, new=index[n]), verdict)
    settled = Batch(tuple(items[n] for n in left), tuple(batch.vectors[n] for n in left), tuple(replaced))
    return settled, [p for p, _ in kept.values()], [v for _, v in kept.values()]


def render_pairs(batch: Batch, pairs: Sequence[Pair]) -> str:
    """The ``{pairs}`` of ``prompts/reconcile.md``: numbered from 1, known fact first."""
    blocks = (
        f"[pair {i}]\nknown: {_line(p.old.content)}\nnew: {_line(batch.items[p.new].content)}"
        for i, p in enumerate(pairs, 1)
    )
    return "\n\n".join(blocks)


def _line(text: str) -> str:
    return " ".join(text.split())


def parse_verdicts(raw: str, count: int) -> dict[int, Verdict] | None:
    """The model's verdict for each pair number it judged (1-based), or None when nothing is usable.

    Accepts ``[{"pair": 1, "decision": "merge"}, …]`` (also ``action`` or
    ``verdict`` for the field, a wrapper object, a ``{"1": "merge"}`` map and
    the JSON repairs of extraction). Unknown pair numbers and verdicts are
    dropped; a pair judged twice keeps its first verdict. Never raises.
    """
    try:
        data = load_json(raw)
    except Exception:  # json_repair's failure modes are not documented; junk is never fatal.
        return None
    out: dict[int, Verdict] = {}
    for number, verdict in _entries(data):
        if 1 <= number <= count and verdict in VERDICTS and number not in out:
            out[number] = verdict  # type: ignore[assignment]
    return out or None


def _entries(data: Any) -> list[tuple[int, str]]:
    if isinstance(data, dict):
        listed = next((v for v in data.values() if isinstance(v, list)), None)
        if listed is not None:
            return _entries(listed)
        return [(n, _verdict(v)) for k, v in data.items() if (n := _number(k)) is not None]
    if not isinstance(data, list):
        return []
    out = []
    for entry in data:
        if isinstance(entry, dict) and (n := _number(entry.get("pair"))) is not None:
            said = entry.get("decision", entry.get("action", entry.get("verdict")))
            out.append((n, _verdict(said)))
    return out


def _number(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    text = str(value).strip()
    return int(text) if text.isdigit() else None


def _verdict(value: Any) -> str:
    return str(value or "").strip().lower()


def rule_verdict(item: MemoryItem, vector: Vector, pair: Pair, dedup_cosine: float) -> Verdict:
    """What the rules say of one pair when the model did not: ``lifecycle.decide`` on it alone."""
    return decide(item, vector, [pair.old], dedup_cosine).action


def verdicts_for(
    batch: Batch, pairs: Sequence[Pair], judged: Mapping[int, Verdict] | None, dedup_cosine: float
) -> list[Verdict]:
    """A verdict per pair: the model's where it gave one, else the rules'."""
    judged = judged or {}
    return [
        judged.get(i) or rule_verdict(batch.items[p.new], batch.vectors[p.new], p, dedup_cosine)
        for i, p in enumerate(pairs, 1)
    ]


def decisions(
    batch: Batch,
    existing: Sequence[ExistingItem],
    pairs: Sequence[Pair],
    verdicts: Sequence[Verdict],
    dedup_cosine: float,
) -> list[Decision]:
    """One ``Decision`` per batch item: the key rule where a key matches, else its pairs' verdicts.

    ``verdicts``: one per pair (``verdicts_for``), all beside stored items (``settle``).

    An item with a supersede verdict is stored and supersedes those items and
    the ones it merely repeats too (a paraphrase superseded by the latest
    wording loses nothing, and one active item per fact remains). Else a merge
    keeps the closest repeated item. An item without pairs goes through
    ``lifecycle.decide`` alone.
    """
    out = []
    for n, (item, vector) in enumerate(zip(batch.items, batch.vectors, strict=True)):
        mine = [(p, v) for p, v in zip(pairs, verdicts, strict=True) if p.new == n]
        if not mine:
            out.append(decide(item, vector, existing, dedup_cosine))
            continue
        superseded = [p.old.id for p, v in mine if v == "supersede"]
        repeated = [p.old.id for p, v in sorted(mine, key=lambda m: -m[0].cosine) if v == "merge"]
        if superseded:
            targets = tuple(dict.fromkeys(superseded + repeated))
            out.append(Decision("supersede", targets, "reconciled: newer value"))
        elif repeated:
            out.append(Decision("merge", (repeated[0],), "reconciled: same fact"))
        else:
            out.append(Decision("add", (), "reconciled: a different fact"))
    return out


def pick_sources(said: Sequence[tuple[str, float]], *, floor: float = SOURCE_COSINE, limit: int = MAX_SOURCES) -> list[str]:
    """The hashes of the ``limit`` turns closest to a superseded item, at least ``floor`` close.

    ``said`` are (hash, cosine to the item) of the user's turns in the item's
    session: the turn that stated the old value is the one most like it.
    """
    close = sorted((hc for hc in said if hc[1] >= floor), key=lambda hc: (-hc[1], hc[0]))
    return [h for h, _ in close[:limit]]
