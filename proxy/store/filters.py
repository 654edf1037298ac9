"""WHERE clauses both stores build alike, for either store's placeholder (SQLite's ``?``, psycopg's ``%s``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def conditions(tests: Sequence[tuple[str, Any]], mark: str) -> tuple[list[str], list[Any]]:
    """``"<expr> <mark>"`` for each (expr, value) whose value is not None, and those values, in order.

    ``expr`` ends with its operator: ``("tenant =", t)``, ``("day >=", since)``.
    """
    kept = [(expr, value) for expr, value in tests if value is not None]
    return [f"{expr} {mark}" for expr, _ in kept], [value for _, value in kept]


def item_page(
    tenant: str, user: str, after: int | None, status: str | None, kind: str | None, mark: str
) -> tuple[str, list[Any]]:
    """The WHERE of a page of a user's items in id order (``status``/``kind`` None: any)."""
    where, args = conditions(
        (("tenant =", tenant), ('"user" =', user), ("id >", after or 0), ("status =", status), ("type =", kind)),
        mark,
    )
    return " AND ".join(where), args


def fragment_page(
    tenant: str, user: str, after: int | None, session: str | None, status: str | None, mark: str
) -> tuple[str, list[Any]]:
    """The WHERE of a page of a user's fragments in id order (``session``/``status`` None: any)."""
    where, args = conditions(
        (("tenant =", tenant), ('"user" =', user), ("id >", after or 0), ("session =", session), ("status =", status)),
        mark,
    )
    return " AND ".join(where), args


def stale_items(
    cutoff: float, importance_floor: float, only: Sequence[str] | None, skip: Sequence[str], mark: str
) -> tuple[str, list[Any]]:
    """The WHERE of active items below ``importance_floor`` untouched since ``cutoff``, of the
    tenants ``only`` (every tenant when None) except those in ``skip``."""
    sql = f"status = 'active' AND importance < {mark} AND coalesce(last_access, created) < {mark}"
    args: list[Any] = [importance_floor, cutoff]
    if only is not None:
        sql += f" AND tenant IN ({', '.join([mark] * len(only))})" if only else " AND FALSE"
        args += only
    if skip:
        sql += f" AND tenant NOT IN ({', '.join([mark] * len(skip))})"
        args += skip
    return sql, args
