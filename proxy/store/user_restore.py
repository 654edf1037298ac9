"""Writing a user's export back, for both stores: which rows, in which order, what counts.

The rules live once, in ``steps``: a generator that yields each write as a
``Step`` and is sent back its result. Each store runs it in its own SQL and
driver (``run`` for SQLite's synchronous connection, ``run_async`` for
PostgreSQL's), so the two restores cannot drift apart: they differ only in
how one step is written (``sqlite_users.py``, ``pg_users.py``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import user_export as fmt
from .records import cursor_key


@dataclass(frozen=True)
class LockScope:
    """Be the scope's only fragment writer until the restore commits (``coordination.lock_scope``)."""


@dataclass(frozen=True)
class Insert:
    """Insert one row of the tenant unless it is there (same key).

    Result: the row count (0: it was there), or with ``new_id`` the new
    row's id. ``vector``: the row's embedding (fragments and items).
    """

    table: str
    columns: str
    values: tuple[Any, ...]
    vector: np.ndarray | None = None
    new_id: bool = False


@dataclass(frozen=True)
class FindItem:
    """The id of the user's item with this key and content, or None."""

    key: str
    content: str


@dataclass(frozen=True)
class Supersede:
    """Item ``item_id`` was superseded by ``successor`` (unless it already points at one)."""

    successor: int
    item_id: int


@dataclass(frozen=True)
class Cursor:
    """The user's session's extraction cursor (``key``: ``records.cursor_key``) is at least ``upto``."""

    session: str
    upto: int


@dataclass(frozen=True)
class History:
    """The restored item ``item_id``'s history is the export's ``events`` (``user_export.event_values``
    rows), in place of the one its insert began."""

    item_id: int
    events: tuple[tuple[Any, ...], ...]


Step = LockScope | Insert | FindItem | Supersede | Cursor | History
Steps = Generator[Step, Any, dict[str, int]]
"""A restore: yields the steps, is sent each one's result, returns the counts."""


def steps(user: str, data: Mapping[str, Any], item_vectors: np.ndarray, fragment_vectors: np.ndarray) -> Steps:
    """The restore of ``data`` for ``user`` as steps; returns the counts of rows added per kind."""
    counts: dict[str, int] = {
        "fragments": (yield from _fragments(user, data["fragments"], fragment_vectors)),
        "items": (yield from _items(user, data["items"], item_vectors)),
        "summaries": 0,
        "prefixes": 0,
        "traces": 0,
    }
    for session in data["sessions"]:
        name = session["session"]
        for s in session["summaries"]:
            counts["summaries"] += yield Insert("summaries", fmt.RESTORED_SUMMARY, fmt.summary_values(user, name, s))
        for p in session["prefixes"]:
            counts["prefixes"] += yield Insert("prefixes", fmt.RESTORED_PREFIX, fmt.prefix_values(user, name, p))
        if session["extraction_cursor"] is not None:
            yield Cursor(cursor_key(user, name), session["extraction_cursor"])
    for trace in data["traces"]:
        counts["traces"] += yield Insert("traces", fmt.RESTORED_TRACE, fmt.trace_values(user, trace))
    return counts


def _fragments(user: str, fragments: Sequence[Mapping[str, Any]], vectors: np.ndarray) -> Generator[Step, Any, int]:
    yield LockScope()
    added = 0
    for f, vec in zip(fragments, vectors, strict=True):
        added += yield Insert("fragments", fmt.RESTORED_FRAGMENT, fmt.fragment_values(user, f), vec)
    return added


def _items(user: str, items: Sequence[Mapping[str, Any]], vectors: np.ndarray) -> Generator[Step, Any, int]:
    new_ids: dict[int, int] = {}
    added = 0
    for item, vec in zip(items, vectors, strict=True):
        found = yield FindItem(item["key"], item["content"])
        if found is not None:
            new_ids[item["id"]] = int(found)
            continue
        new_id = yield Insert("items", fmt.RESTORED_ITEM, fmt.item_values(user, item), vec, new_id=True)
        new_ids[item["id"]] = new_id
        if item.get("history"):
            yield History(new_id, tuple(fmt.event_values(new_id, user, e) for e in item["history"]))
        added += 1
    for successor, item_id in fmt.successors(items, new_ids):
        yield Supersede(successor, item_id)
    return added


def run(plan: Steps, execute: Callable[[Step], Any]) -> dict[str, int]:
    """Run ``plan`` with a synchronous ``execute``; its counts."""
    result = None
    try:
        while True:
            result = execute(plan.send(result))
    except StopIteration as done:
        return dict(done.value)


async def run_async(plan: Steps, execute: Callable[[Step], Awaitable[Any]]) -> dict[str, int]:
    """Run ``plan`` with an asynchronous ``execute``; its counts."""
    result = None
    try:
        while True:
            result = await execute(plan.send(result))
    except StopIteration as done:
        return dict(done.value)
