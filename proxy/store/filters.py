"""WHERE clauses of the admin lists, for either store's placeholder (SQLite's ``?``, psycopg's ``%s``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def conditions(tests: Sequence[tuple[str, Any]], mark: str) -> tuple[list[str], list[Any]]:
    """``"<expr> <mark>"`` for each (expr, value) whose value is not None, and those values, in order.

    ``expr`` ends with its operator: ``("tenant =", t)``, ``("day >=", since)``.
    """
    kept = [(expr, value) for expr, value in tests if value is not None]
    return [f"{expr} {mark}" for expr, _ in kept], [value for _, value in kept]
