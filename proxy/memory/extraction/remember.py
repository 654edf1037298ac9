"""One way to remember a fact, for extraction and for a memory added by hand.

The new item is decided against the user's active items (``lifecycle.decide``:
add, merge into a duplicate, or supersede the same key's older value) inside
the store's write transaction, so two facts remembered at once never both
miss each other, and the decision and its writes — the merge, or the insert
with its superseded items and their suppressed source turns — land together.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from ...store.interface import Fragments, Items
from ...store.records import ItemRow, ItemWrite, NewItem
from ..lifecycle import Decision, ExistingItem, decide, expiry_epoch, slot_members, stands_in_place
from ..memory_schema import MemoryItem, is_guess
from ..search.bm25 import tokenize
from .reconcile import pick_sources

Embed = Callable[[Sequence[str]], Awaitable[np.ndarray]]

# Fragments nearest an item that are looked at for the turns it was said in.
SOURCE_NEIGHBOURS = 12


@dataclass(frozen=True)
class Remembered:
    """What remembering did; ``item_id`` holds the fact (the new item, or the one merged into)."""

    action: Literal["added", "merged", "superseded"]
    item_id: int
    superseded: tuple[int, ...] = ()


async def remember(
    items: Items,
    embed: Embed,
    tenant: str,
    user: str,
    session: str | None,
    item: MemoryItem,
    *,
    dedup_cosine: float,
    fragment_hashes: Sequence[str] = (),
    vector: np.ndarray | None = None,
    planned: Planned | None = None,
    per_session: bool = False,
) -> Remembered:
    """Store ``item`` for the user by SPEC §5's rules; ``fragment_hashes`` name the turns it came from.

    ``planned`` is a decision made before the transaction (reconciled by the
    compression model, ``reconcile``): it is kept when the user's active items
    still allow it — its targets still active, no other item of the key —
    and ``decide`` runs instead when they changed meanwhile. ``per_session``: ``item`` meets only the
    items of ``session`` (``memory.scope: session``).
    """
    if vector is None:
        vector = (await embed([item.content]))[0]

    def choose(existing: list[tuple[ItemRow, np.ndarray]]) -> ItemWrite:
        if per_session:  # ``memory.scope: session``: another session's facts are not this one's to change
            existing = [(r, v) for r, v in existing if r.session == session]
        known = [ExistingItem.of(r, v) for r, v in existing]
        if planned is not None and _still_holds(planned.decision, item, known):
            decision, extra = planned.decision, planned.suppress
        else:
            decision, extra = decide(item, vector, known, dedup_cosine), ()
        targets = tuple(int(i) for i in decision.target_ids)
        if decision.action == "merge":
            return ItemWrite(merge_into=targets[0])
        if decision.action == "supersede":
            replaced = [r for r, _ in existing if r.id in targets]
            stood = any(r.standing for r in replaced)
            guesses = tuple(r.id for r in replaced if is_guess(r.confidence))  # their turns stay
            return ItemWrite(supersedes=targets, suppress=tuple(extra), standing=stands_in_place(item, stood) or None,
                             keep_turns_of=guesses)
        return ItemWrite()

    new = new_item(item, fragment_hashes)
    choice, item_id = await items.remember(tenant, user, session, new, vector, choose)
    if choice.merge_into is not None:
        return Remembered("merged", item_id)
    return Remembered("superseded" if choice.supersedes else "added", item_id, choice.supersedes)


@dataclass(frozen=True)
class Planned:
    """A decision made ahead of the write, and the source turns of what it supersedes."""

    decision: Decision
    suppress: tuple[str, ...] = ()


def _still_holds(decision: Decision, item: MemoryItem, known: Sequence[ExistingItem]) -> bool:
    active = [k for k in known if k.status == "active"]
    same_key = {k.id for k in slot_members(item, active)}
    return set(decision.target_ids) <= {k.id for k in active} and same_key <= set(decision.target_ids)


async def said_in(fragments: Fragments, tenant: str, user: str, row: ItemRow, vector: np.ndarray) -> list[str]:
    """The turns an item that names none was said in: the user's turns of its session most like it.

    What a supersede or a deletion of it hides; an item that names its
    turns (``fragment_hashes``), or none of a session (added by hand), has no
    others.
    """
    if row.fragment_hashes or row.session is None:
        return []
    near = await fragments.knn(tenant, user, vector, SOURCE_NEIGHBOURS)
    meta = await fragments.sources(tenant, user, [i for i, _ in near])
    return pick_sources([(meta[i][0], c) for i, c in near if i in meta and meta[i][1:] == (row.session, "user")])


async def replies_repeating(
    fragments: Fragments, tenant: str, user: str, said: Sequence[str], old: str, new: str
) -> list[str]:
    """The assistant's replies right after the turns ``said`` (the old value's) that repeat the old value
    (``repeats``): a supersede hides them with the turns, as a deletion hides every reply."""
    return [h for h, text in await fragments.replies(tenant, user, said) if repeats(old, new, text)]


def repeats(old: str, new: str, reply: str) -> bool:
    """Whether ``reply`` names what ``old`` says and ``new`` does not ("Boston is lovely!" after "The user
    lives in Boston", replaced by "The user lives in Denver"): one search term of the old value's own.
    A reply that names none carries what the assistant answered besides — in a conversation between two
    people, the other one's own news — and stays."""
    own = set(tokenize(old)) - set(tokenize(new))
    return bool(own) and not own.isdisjoint(tokenize(reply))


def new_item(item: MemoryItem, fragment_hashes: Sequence[str] = ()) -> NewItem:
    """The row of a new item: its BM25 terms and comparable expiry computed here, above the store."""
    return NewItem(
        type=item.type,
        category=item.category,
        standing=item.standing,
        about=item.about,
        key=item.key,
        content=item.content,
        terms=" ".join(tokenize(item.content)),
        importance=item.importance,
        confidence=item.confidence,
        source=item.source,
        expires_at=item.expires_at,
        expires=expiry_epoch(item.expires_at),
        turns=list(item.turns),
        fragment_hashes=list(fragment_hashes),
    )
