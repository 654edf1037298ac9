"""``storage.url``: which database it names. Parsing only; config.py reports what is wrong."""

from __future__ import annotations


def is_sqlite(url: str) -> bool:
    return url.startswith("sqlite://")


def is_postgres(url: str) -> bool:
    return url.startswith(("postgresql://", "postgres://"))


def sqlite_path(url: str) -> str:
    """``sqlite:///data/p.db`` → ``data/p.db``; ``sqlite://`` alone is an in-memory database."""
    return url.removeprefix("sqlite://").removeprefix("/") or ":memory:"
