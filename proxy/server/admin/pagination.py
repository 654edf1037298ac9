"""Lists paginated the way OpenAI's are: ``?limit=&after=``, answering ``object: list``.

A page is asked of the store with ``limit + 1`` rows after the cursor: the
extra row, never returned, is how ``has_more`` is known without a count.
Cursors are the ``id`` of the last row of the previous page, so a row added
or deleted between two calls neither repeats nor skips any other row. A
cursor whose own row is gone (deleted, forgotten or pruned since the page
that named it) cannot be placed in a list ordered by anything but ids: it is
a 404 naming ``after`` (``cursor_gone``), never an empty page that a walk
would take for the end of the list.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ...errors import BadRequest, NotFound

DEFAULT_LIMIT = 20
MAX_LIMIT = 100
LIMIT_RANGE = f"an integer from 1 to {MAX_LIMIT}"  # how errors name the bounds, the API's and the CLI's


@dataclass(frozen=True)
class PageAsk:
    limit: int
    after: str | None

    @property
    def fetch(self) -> int:
        """How many rows to read: one more than the page, to learn ``has_more``."""
        return self.limit + 1


def page_ask(query: Mapping[str, str], default: int = DEFAULT_LIMIT) -> PageAsk:
    """Read ``limit`` and ``after``; a bad ``limit`` is a 400 naming it."""
    limit = page_limit(query.get("limit", str(default)))
    if limit is None:
        raise BadRequest(f"'limit' must be {LIMIT_RANGE}.", param="limit")
    after = query.get("after", "").strip() or None
    return PageAsk(limit, after)


def page_limit(raw: str) -> int | None:
    """A page size as asked (the admin API's ``?limit=``, the CLI's ``--limit``): ASCII digits
    within 1..``MAX_LIMIT``, surrounding spaces aside; None otherwise."""
    digits = raw.strip()
    if not (digits.isascii() and digits.isdigit()) or len(digits.lstrip("0")) > len(str(MAX_LIMIT)):
        return None  # also what int() would refuse: "²", or past its 4300 digits
    return int(digits) if 1 <= int(digits) <= MAX_LIMIT else None


def page(rows: Sequence[dict[str, Any]], ask: PageAsk, **extra: Any) -> dict[str, Any]:
    """The list object for rows read with ``ask.fetch`` (at most one more than the page)."""
    data = list(rows[: ask.limit])
    return {
        "object": "list",
        **extra,
        "data": data,
        "has_more": len(rows) > ask.limit,
        "first_id": _id(data[0]) if data else None,
        "last_id": _id(data[-1]) if data else None,
    }


def after_cursor(
    rows: Sequence[dict[str, Any]], ask: PageAsk, id_of: Callable[[dict[str, Any]], str] | None = None
) -> list[dict[str, Any]]:
    """For a list built in memory (already sorted): the rows after the cursor, ``ask.fetch`` of them.

    A cursor that is not among the rows is ``cursor_gone``.
    """
    ident = id_of or _id
    start = 0
    if ask.after is not None:
        ids = [ident(r) for r in rows]
        if ask.after not in ids:
            raise cursor_gone(ask.after)
        start = ids.index(ask.after) + 1
    return list(rows[start : start + ask.fetch])


def cursor_gone(after: str) -> NotFound:
    """The error for an ``after`` that names no row of the list (any more)."""
    return NotFound(
        f"No row {after!r} in this list: 'after' takes the last_id of a page, and that row is gone"
        " (deleted since, or never in it). Start the walk again without 'after'.",
        param="after",
    )


def _id(row: Mapping[str, Any]) -> str:
    return str(row["id"])
