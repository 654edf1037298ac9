"""The records both stores read and write: fragments, items, summaries, response sessions.

Declared once, beside ``interface.py``: SQLite's and PostgreSQL's stores
build and return these, and everything above the store names them here.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


def scope_of(tenant: str, user: str) -> str:
    return f"{tenant}\x1f{user}"


@dataclass(frozen=True)
class NewFragment:
    hash: str
    role: str
    text: str
    terms: str
    position: int
    tokens: int


@dataclass(frozen=True, slots=True)
class Fragment:
    id: int
    session: str
    hash: str
    role: str
    text: str
    position: int
    tokens: int
    created: float


@dataclass(frozen=True)
class StoredFragment:
    """A fragment as the admin lists it: what was said, where, and whether it may be recalled.

    ``status``: ``active`` (recalled), ``superseded`` (the fact it stated
    changed) or ``forgotten`` (a memory drawn from it was deleted); only
    active fragments are ever injected.
    """

    id: int
    session: str
    role: str
    text: str
    position: int
    tokens: int
    created: float
    status: str

    @staticmethod
    def active(f: Fragment) -> StoredFragment:
        """A fragment the in-memory index holds (only active ones are)."""
        return StoredFragment(f.id, f.session, f.role, f.text, f.position, f.tokens, f.created, "active")

    def public(self) -> dict[str, Any]:
        return {"object": "paperclip.fragment", **self.__dict__}


FRAGMENT_STATUSES = ("active", "superseded", "forgotten")


@dataclass(frozen=True)
class Forgot:
    """What forgetting a memory or a turn took with it.

    ``items``: the memories deleted; ``turns``: the fragments hidden
    (``forgotten``) or, when ``purged``, deleted from the store; ``traces``:
    the request traces deleted because they held a purged text.
    """

    items: tuple[int, ...] = ()
    turns: int = 0
    purged: bool = False
    traces: int = 0


@dataclass(frozen=True, slots=True)
class Loaded:
    """One active fragment as the in-memory index loads it, with its BM25 terms and vector."""

    fragment: Fragment
    terms: str
    vector: np.ndarray


def generation_key(tenant: str, user: str) -> str:
    """The scope's key in ``scope_generations``: a digest, so a forgotten user's id (often an
    email) does not outlive their data there — the row must, to tell other processes."""
    return hashlib.sha256(scope_of(tenant, user).encode()).hexdigest()


def cursor_key(user: str, session: str) -> str:
    """The key of a user's session in ``extraction_cursors``: a session's name is any string a client sends
    (``X-Paperclip-Session: main``), so two users may send one; each is mined on their own."""
    return "u-" + hashlib.sha256(f"{user}\0{session}".encode()).hexdigest()[:32]


# An item row's columns, as ``item_row`` reads them (and as a user's export lists them).
ITEM_COLUMNS = (
    "id, session, type, category, standing, about, key, content, importance, confidence, source, expires_at, status,"
    " superseded_by, turns, fragment_hashes, seen_count, access_count, last_access, created, updated"
)


@dataclass(frozen=True)
class ItemRow:
    id: int
    session: str | None
    type: str
    key: str
    content: str
    importance: float
    confidence: float
    source: str
    expires_at: str | None
    status: str
    superseded_by: int | None
    turns: list[int]
    fragment_hashes: list[str]
    seen_count: int
    access_count: int
    last_access: float | None
    created: float
    updated: float
    category: str = "other"
    standing: bool = False
    about: str = "user"  # who the fact is about (``memory_schema.MemoryItem.about``)

    def public(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        out.pop("fragment_hashes")
        return out


@dataclass(frozen=True)
class NewItem:
    type: str
    key: str
    content: str
    terms: str
    importance: float
    confidence: float
    source: str
    expires_at: str | None
    expires: float | None  # ``expires_at`` in epoch seconds, as the caller reads it
    turns: Sequence[int]
    fragment_hashes: Sequence[str]
    category: str = "other"
    standing: bool = False
    about: str = "user"


@dataclass(frozen=True)
class ItemWrite:
    """What to do with a new item: merge it into ``merge_into``, or store it superseding ``supersedes``."""

    merge_into: int | None = None
    supersedes: tuple[int, ...] = ()
    suppress: tuple[str, ...] = ()  # more fragment hashes of a superseded value (with a store)
    # Superseded items whose turns are not hidden with them (a guess: a reading of a turn, not what it said).
    keep_turns_of: tuple[int, ...] = ()
    standing: bool | None = None  # the stored item's ``standing``, when not the new item's own

    def stored(self, item: NewItem) -> NewItem:
        """``item`` as it is inserted."""
        return item if self.standing is None else dataclasses.replace(item, standing=self.standing)


def merged_sources(stored: str, new: Sequence[str]) -> str:
    """An item's ``fragment_hashes`` (stored JSON) with the turns of a repeat merged into it.

    A fact said again is the same memory, and every turn that said it is
    its source: what a change or a deletion of it hides.
    """
    return json.dumps(list(dict.fromkeys([*json.loads(stored), *new])))


# Decides, from the user's active items (with their vectors), what a new item's write is.
Choose = Callable[[list[tuple["ItemRow", np.ndarray]]], ItemWrite]


def item_row(r: Any) -> ItemRow:
    """An ``items`` row (either store's, read by column name) as an ``ItemRow``."""
    return ItemRow(
        id=int(r["id"]), session=r["session"], type=r["type"], category=r["category"],
        standing=bool(r["standing"]), about=r["about"], key=r["key"], content=r["content"],
        importance=float(r["importance"]), confidence=float(r["confidence"]), source=r["source"],
        expires_at=r["expires_at"], status=r["status"], superseded_by=r["superseded_by"],
        turns=json.loads(r["turns"]), fragment_hashes=json.loads(r["fragment_hashes"]),
        seen_count=int(r["seen_count"]), access_count=int(r["access_count"]),
        last_access=r["last_access"], created=float(r["created"]), updated=float(r["updated"]),
    )


@dataclass(frozen=True)
class SummaryRow:
    id: str
    level: int
    text: str
    tokens: int
    start: int
    end: int


@dataclass(frozen=True)
class PrefixState:
    """The longest stored compressed prefix an incoming history starts with."""

    upto: int  # conversation messages [0, upto) are covered by `summaries`
    chain_hash: str
    summaries: tuple[SummaryRow, ...]


EMPTY = PrefixState(0, "", ())


def new_summary_id() -> str:
    return "sum-" + uuid.uuid4().hex


@dataclass(frozen=True)
class ResponseSession:
    session: str
    upto: int  # the session's conversation messages up to and including this response
