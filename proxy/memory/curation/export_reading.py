"""The export format, read back: validation and defaults for ``paperclip memories import``.

An export (``UserStore.export``) carries every field; a file written by hand
may give items only their ``type`` and ``content`` and fragments only their
``session``, ``role`` and ``text`` — the rest gets the defaults below. Vectors
are never part of the format: they belong to an embedding model and are
recomputed on import.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from ...errors import InvalidExport
from ...store.sqlite.sqlite_users import EXPORT_VERSION
from ..memory_schema import CATEGORIES, CATEGORY_OF_TYPE, STANDS_BY_DEFAULT, TYPES, USER, derive_key
from ..recall.query import fragment_hash

_REQUIRED = object()
_NOW = object()  # a missing timestamp is the time of the import
_NUM = (int, float)
_OPT_STR = (str, type(None))
_OPT_INT = (int, type(None))
_OPT_NUM = (int, float, type(None))

Spec = Mapping[str, tuple[tuple[type, ...], Any]]

ITEM: Spec = {
    "id": ((int,), None), "session": (_OPT_STR, None), "type": ((str,), _REQUIRED), "category": ((str,), ""),
    "about": ((str,), USER),
    "key": ((str,), ""), "content": ((str,), _REQUIRED), "importance": (_NUM, 0.5),
    "confidence": (_NUM, 0.7), "source": ((str,), "user-stated"), "expires_at": (_OPT_STR, None),
    "status": ((str,), "active"), "superseded_by": (_OPT_INT, None), "turns": ((list,), []),
    "fragment_hashes": ((list,), []), "seen_count": ((int,), 1), "access_count": ((int,), 0),
    "last_access": (_OPT_NUM, None), "created": (_NUM, _NOW), "updated": (_NUM, None),
    "history": ((list,), []),
}
EVENT: Spec = {
    "event": ((str,), _REQUIRED), "at": (_NUM, _REQUIRED), "by": (_OPT_STR, None), "detail": ((dict,), {}),
}
FRAGMENT: Spec = {
    "session": ((str,), _REQUIRED), "hash": ((str,), ""), "role": ((str,), _REQUIRED),
    "text": ((str,), _REQUIRED), "position": ((int,), 0), "tokens": ((int,), 0),
    "created": (_NUM, _NOW), "status": ((str,), "active"),
}
SESSION: Spec = {
    "session": ((str,), _REQUIRED), "extraction_cursor": (_OPT_INT, None),
    "summaries": ((list,), []), "prefixes": ((list,), []),
}
SUMMARY: Spec = {
    "id": ((str,), _REQUIRED), "level": ((int,), _REQUIRED), "text": ((str,), _REQUIRED),
    "tokens": ((int,), _REQUIRED), "start": ((int,), _REQUIRED), "end": ((int,), _REQUIRED),
    "created": (_NUM, _NOW),
}
PREFIX: Spec = {
    "chain_hash": ((str,), _REQUIRED), "upto": ((int,), _REQUIRED),
    "summary_ids": ((list,), _REQUIRED), "created": (_NUM, _NOW),
}
TRACE: Spec = {
    "id": ((str,), _REQUIRED), "session": ((str,), _REQUIRED), "created": (_NUM, _NOW),
    "data": ((dict,), _REQUIRED),
}
STATUSES = frozenset({"active", "superseded", "archived"})



def read_export(raw: Any) -> dict[str, Any]:
    """A validated export with every default filled in; raises ``InvalidExport``."""
    if not isinstance(raw, dict):
        raise InvalidExport("the file must hold a JSON object")
    if raw.get("version") != EXPORT_VERSION:
        raise InvalidExport(f"version: expected {EXPORT_VERSION}, got {raw.get('version')!r}")
    now = time.time()
    return {
        "version": EXPORT_VERSION,
        "user": raw.get("user") if isinstance(raw.get("user"), str) else None,
        "items": [_item(r, f"items[{i}]", i, now) for i, r in enumerate(_list(raw, "items"))],
        "fragments": [_fragment(r, f"fragments[{i}]", now) for i, r in enumerate(_list(raw, "fragments"))],
        "sessions": [_session(r, f"sessions[{i}]", now) for i, r in enumerate(_list(raw, "sessions"))],
        "traces": [_row(r, TRACE, f"traces[{i}]", now) for i, r in enumerate(_list(raw, "traces"))],
    }


def _item(raw: Any, where: str, index: int, now: float) -> dict[str, Any]:
    item = _row(raw, ITEM, where, now)
    item["history"] = _rows(item["history"], EVENT, f"{where}.history", now)
    if item["type"] not in TYPES:
        raise InvalidExport(f"{where}.type: must be one of {', '.join(sorted(TYPES))}")
    item["category"] = item["category"] or CATEGORY_OF_TYPE[item["type"]]
    if item["category"] not in CATEGORIES:
        raise InvalidExport(f"{where}.category: must be one of {', '.join(CATEGORIES)}")
    standing = raw.get("standing", STANDS_BY_DEFAULT[item["category"]])
    if not isinstance(standing, bool):
        raise InvalidExport(f"{where}.standing: expected true or false, got {type(standing).__name__}")
    item["standing"] = standing
    if item["status"] not in STATUSES:
        raise InvalidExport(f"{where}.status: must be one of {', '.join(sorted(STATUSES))}")
    if not item["content"].strip():
        raise InvalidExport(f"{where}.content: must not be empty")
    # Hand-written files may leave ids out; they only link superseded items to their successors.
    item["id"] = -1 - index if item["id"] is None else item["id"]
    item["key"] = item["key"] or derive_key(item["type"], item["content"])
    item["updated"] = item["updated"] or item["created"]
    return item


def _fragment(raw: Any, where: str, now: float) -> dict[str, Any]:
    fragment = _row(raw, FRAGMENT, where, now)
    fragment["hash"] = fragment["hash"] or fragment_hash(fragment["role"], fragment["text"])
    return fragment


def _session(raw: Any, where: str, now: float) -> dict[str, Any]:
    session = _row(raw, SESSION, where, now)
    session["summaries"] = _rows(session["summaries"], SUMMARY, f"{where}.summaries", now)
    session["prefixes"] = _rows(session["prefixes"], PREFIX, f"{where}.prefixes", now)
    return session


def _rows(raw: list[Any], spec: Spec, where: str, now: float) -> list[dict[str, Any]]:
    return [_row(r, spec, f"{where}[{i}]", now) for i, r in enumerate(raw)]


def _list(raw: Mapping[str, Any], name: str) -> list[Any]:
    value = raw.get(name, [])
    if not isinstance(value, list):
        raise InvalidExport(f"{name}: must be a list")
    return value


def _row(raw: Any, spec: Spec, where: str, now: float) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise InvalidExport(f"{where}: must be an object")
    return {name: _field(raw, name, kinds, default, where, now) for name, (kinds, default) in spec.items()}


def _field(
    raw: Mapping[str, Any], name: str, kinds: tuple[type, ...], default: Any, where: str, now: float
) -> Any:
    if name not in raw:
        if default is _REQUIRED:
            raise InvalidExport(f"{where}.{name}: missing")
        return _fresh(default, now)
    value = raw[name]
    # bool is an int to Python, never to this format.
    if isinstance(value, bool) or not isinstance(value, kinds):
        raise InvalidExport(f"{where}.{name}: expected {_names(kinds)}, got {type(value).__name__}")
    return value


def _fresh(default: Any, now: float) -> Any:
    if default is _NOW:
        return now
    return list(default) if isinstance(default, list) else dict(default) if isinstance(default, dict) else default


def _names(kinds: tuple[type, ...]) -> str:
    return " or ".join("null" if k is type(None) else k.__name__ for k in kinds)
