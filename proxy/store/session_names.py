"""Session and user names stored as the latin-1 reading of their UTF-8 bytes, read again as UTF-8 (migrations' rule).

Before ``header_text``, the ``X-Paperclip-Session`` and ``X-Paperclip-User``
headers' bytes were read as latin-1, so a session a client named "café"
(UTF-8 ``63 61 66 c3 a9``) was stored as "cafÃ©", and ``/sessions/café``
found nothing; a user named "José" in the header was another user than the
body's ``"user": "José"``. Both stores' migrations rename such rows to the
name the client meant. A name whose latin-1 bytes are not UTF-8 (a client
that really sent latin-1) is left as it is, and a row whose new key is
already taken keeps its old name rather than collide.
"""

from __future__ import annotations

# The tables holding a session name, and the other columns of a unique key the name is part of.
SESSION_TABLES: dict[str, tuple[str, ...]] = {
    "summaries": (),
    "prefixes": ("tenant", "chain_hash"),
    "fragments": (),
    "items": (),
    "extraction_cursors": ("tenant",),
    "traces": (),
    "response_sessions": (),
}


# The tables holding a user id, and the other columns of a unique key the id is part of.
USER_TABLES: dict[str, tuple[str, ...]] = {
    "summaries": (),
    "prefixes": (),
    "fragments": ("tenant", "hash"),
    "items": (),
    "item_events": (),
    "traces": (),
    "response_sessions": (),
    "forgotten_turns": ("tenant", "session", "hash"),
}


def meant(stored: str) -> str | None:
    """The name a client meant by ``stored``, when that differs from it; else None."""
    if stored.isascii():
        return None
    try:
        name = stored.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return None
    return name if name != stored else None


def tables(column: str) -> dict[str, tuple[str, ...]]:
    """The tables holding ``column`` (``session`` or ``user``), each with the rest of its unique key."""
    return USER_TABLES if column == "user" else SESSION_TABLES


def names(table: str, column: str) -> str:
    """The ``SELECT`` of the distinct names ``table`` holds in ``column``."""
    return f'SELECT DISTINCT "{column}" FROM {table} WHERE "{column}" IS NOT NULL'


def rename(table: str, old: str, new: str, placeholder: str, column: str = "session") -> tuple[str, tuple[str, ...]]:
    """The ``UPDATE`` (and its parameters) moving ``table``'s rows from ``old`` to ``new`` in ``column``
    (``session`` or ``user``), unless that key is taken."""
    keys = tables(column)[table]
    name = f'"{column}"'  # "user" is a reserved word in PostgreSQL
    sql = f"UPDATE {table} SET {name} = {placeholder} WHERE {name} = {placeholder}"
    if not keys:
        return sql, (new, old)
    taken = " AND ".join([f"other.{name} = {placeholder}", *(f"other.{k} = {table}.{k}" for k in keys)])
    return f"{sql} AND NOT EXISTS (SELECT 1 FROM {table} AS other WHERE {taken})", (new, old, new)
