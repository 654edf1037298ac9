"""Session names stored as the latin-1 reading of their UTF-8 bytes, read again as UTF-8 (a migration's rule).

Before ``control_text``, a session header's bytes were read as latin-1, so a
session a client named "café" (UTF-8 ``63 61 66 c3 a9``) was stored as
"cafÃ©", and ``/sessions/café`` found nothing. Both stores' migration
renames such rows to the name the client meant. A name whose latin-1 bytes
are not UTF-8 (a client that really sent latin-1) is left as it is, and a row
whose new key is already taken keeps its old name rather than collide.
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


def meant(stored: str) -> str | None:
    """The name a client meant by ``stored``, when that differs from it; else None."""
    if stored.isascii():
        return None
    try:
        name = stored.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return None
    return name if name != stored else None


def rename(table: str, old: str, new: str, placeholder: str) -> tuple[str, tuple[str, ...]]:
    """The ``UPDATE`` (and its parameters) moving ``table``'s rows from ``old`` to ``new``, unless that key is taken."""
    keys = SESSION_TABLES[table]
    sql = f"UPDATE {table} SET session = {placeholder} WHERE session = {placeholder}"
    if not keys:
        return sql, (new, old)
    taken = " AND ".join([f"other.session = {placeholder}", *(f"other.{k} = {table}.{k}" for k in keys)])
    return f"{sql} AND NOT EXISTS (SELECT 1 FROM {table} AS other WHERE {taken})", (new, old, new)
