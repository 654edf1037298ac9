"""Structured memory items: parsing the model's JSON (the rules live in ``rules``).

Pure functions, no I/O. ``parse_items`` turns whatever the extraction model
returned into validated ``MemoryItem``s, or ``None`` when there is nothing to
salvage — the caller then runs ``rule_extract`` over the same turns. Both see
turns with injected ``<paperclip-memory>`` blocks removed, so a memory that
Paperclip itself injected is never extracted again as a new one.

Key convention (conflict detection depends on it; SPEC §5): a key names a slot,
not a value — ``user.name``, ``user.nickname``, ``user.allergy.peanut``,
``user.cat.allergy.peanut``, ``user.preference.spicy_food`` (a like and a later
dislike of the same thing share it), ``user.card.8865``, ``user.order.a12345``,
``user.deadline.delivery``, ``user.task.<slug>``, ``user.location.current``.
A key the model left out is derived from type and a hash of the content, so it
never collides with another fact by accident.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, cast

import json_repair

MemoryType = Literal["entity", "preference", "event", "task", "constraint"]
Source = Literal["user-stated", "inferred"]
Turn = tuple[int, str, str]

TYPES: frozenset[str] = frozenset({"entity", "preference", "event", "task", "constraint"})


@dataclass(frozen=True)
class MemoryItem:
    """One self-contained fact about the user, as extracted (before storage)."""

    type: MemoryType
    content: str
    key: str
    importance: float = 0.5
    confidence: float = 0.7
    source: Source = "inferred"
    expires_at: str | None = None
    turns: tuple[int, ...] = ()


# ---------------------------------------------------------------- parsing the model's output

# The language tag is bounded: an unbounded one backtracks quadratically on an unclosed fence.
_FENCE = re.compile(r"```[\w-]{0,20}[ \t]*\n?(.*?)```", re.S)
_WRAPPERS = ("memories", "items", "memory", "facts", "results", "data")
_DECODER = json.JSONDecoder()
_MAX_STARTS = 8


def parse_items(raw: str) -> list[MemoryItem] | None:
    """Validated items from the model's raw reply, or None when nothing usable is there.

    Repairs code fences, prose around the JSON, trailing commas, single quotes, a
    single object instead of an array and ``{"memories": [...]}`` wrappers. Items
    with an unknown type or no content are dropped; numbers are clamped to [0, 1].
    An honest empty array gives ``[]`` (nothing to remember); a non-empty reply in
    which no item survives gives None, so the rules get their chance. Never raises.
    """
    try:
        entries = _entries(load_json(raw))
    except Exception:  # json_repair's failure modes are not documented; junk is never fatal.
        return None
    if entries is None:
        return None
    items = [item for entry in entries if (item := _to_item(entry)) is not None]
    return items if items or not entries else None


def load_json(raw: str) -> Any:
    """The JSON value in a model's reply (fences, prose, trailing commas repaired), or None; may raise."""
    fenced = _FENCE.search(raw)
    text = (fenced.group(1) if fenced else raw).strip()
    starts = [m.start() for m in re.finditer(r"[\[{]", text)][:_MAX_STARTS]
    # Strict JSON first, from each bracket in turn, so prose such as "[2 found]"
    # before the array does not hide it.
    for start in starts:
        try:
            value, _ = _DECODER.raw_decode(text, start)
        except ValueError:
            continue
        if _usable(value):
            return value
    # Then repair, with the prose cut off by us: json_repair, given several
    # fragments, keeps the last one, and given none invents one from stray words.
    end = max(text.rfind("]"), text.rfind("}"))
    if not starts or end < starts[0]:
        return None
    return json_repair.loads(text[starts[0] : end + 1])


def _usable(value: Any) -> bool:
    entries = _entries(value)
    return entries is not None and (not entries or any(isinstance(e, dict) for e in entries))


def _entries(data: Any) -> list[Any] | None:
    if isinstance(data, dict):
        for name in _WRAPPERS:
            if isinstance(data.get(name), list):
                found: list[Any] = data[name]
                return found
        return [data] if "content" in data else None
    return data if isinstance(data, list) else None


def _to_item(entry: Any) -> MemoryItem | None:
    if not isinstance(entry, dict):
        return None
    kind = str(entry.get("type", "")).strip().lower()
    content = " ".join(str(entry.get("content") or "").split())
    if kind not in TYPES or not content:
        return None
    return MemoryItem(
        type=cast(MemoryType, kind),
        content=content,
        key=_clean_key(entry.get("key")) or derive_key(kind, content),
        importance=_unit(entry.get("importance"), 0.5),
        confidence=_unit(entry.get("confidence"), 0.7),
        source=_source(entry.get("source")),
        expires_at=_iso(entry.get("expires_at")),
        turns=_turn_list(entry.get("turns")),
    )


def derive_key(kind: str, content: str) -> str:
    """A key for an item the model gave none: unique to its content, so it conflicts with nothing."""
    digest = hashlib.sha1(" ".join(content.lower().split()).encode()).hexdigest()[:10]
    return f"user.{kind}.auto_{digest}"


def _clean_key(value: Any) -> str:
    text = re.sub(r"[\s-]+", "_", str(value or "").strip().lower())
    text = re.sub(r"[^\w.]", "", text)
    return re.sub(r"\.{2,}", ".", text).strip("._")


def _unit(value: Any, default: float) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return default
    return default if math.isnan(number) else min(1.0, max(0.0, number))


def _source(value: Any) -> Source:
    text = re.sub(r"[\s_]+", "-", str(value or "").strip().lower())
    return "user-stated" if text in {"user-stated", "stated", "user", "explicit"} else "inferred"


def _iso(value: Any) -> str | None:
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        datetime.fromisoformat(value.strip())
    except ValueError:
        return None
    return value.strip()


def _turn_list(value: Any) -> tuple[int, ...]:
    raw = value if isinstance(value, list) else [value]
    found = {int(m) for v in raw if isinstance(v, int | str) for m in re.findall(r"\d+", str(v))}
    return tuple(sorted(found))


# ---------------------------------------------------------------- transcripts

_BLOCK = re.compile(r"<paperclip-memory\b[^>]*>.*?(?:</paperclip-memory>|\Z)\s*", re.S | re.I)


def strip_blocks(text: str) -> str:
    # An unclosed block is cut to the end: re-extracting our own notes is worse
    # than missing a client-mangled tail.
    return _BLOCK.sub("", text).strip()


def transcript_for_extraction(turns: Sequence[Turn]) -> str:
    """``[turn N] role: text`` lines, injected memory blocks removed, empty turns left out."""
    lines = (f"[turn {i}] {role}: {strip_blocks(text)}" for i, role, text in turns)
    return "\n".join(line for line in lines if not line.endswith(": "))

