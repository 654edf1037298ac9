"""Reading the extraction model's reply: JSON repaired, entries read through the memory schema.

Pure functions, no I/O. ``parse_items`` turns whatever the extraction model
returned into ``MemoryItem``s (``memory_schema``: the one declaration, and its
tolerant normalisation), or ``None`` when there is nothing to salvage — the
caller then runs ``rule_extract`` over the same turns. Both see turns with
injected ``<paperclip-memory>`` blocks removed, so a memory that Paperclip
itself injected is never extracted again as a new one.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from typing import Any

import json_repair
from pydantic import ValidationError

from ..memory_schema import REPLY_FIELD, MemoryItem

log = logging.getLogger("paperclip.items")
Turn = tuple[int, str, str]


# ---------------------------------------------------------------- parsing the model's output

# The language tag is bounded: an unbounded one backtracks quadratically on an unclosed fence.
_FENCE = re.compile(r"```[\w-]{0,20}[ \t]*\n?(.*?)```", re.S)
_WRAPPERS = (REPLY_FIELD, "items", "memory", "facts", "results", "data")
_DECODER = json.JSONDecoder()
_MAX_STARTS = 8


def parse_items(raw: str) -> list[MemoryItem] | None:
    """The items of the model's raw reply, or None when nothing usable is there.

    Repairs code fences, prose around the JSON, trailing commas, single quotes, a
    single object instead of an array and ``{"memories": [...]}`` wrappers (the
    structured reply's own shape). Each entry is read through the schema, which
    normalises a model's small deviations; only an entry with no content is
    left out, and that is logged. An honest empty array gives ``[]`` (nothing to
    remember); a non-empty reply in which no item survives gives None, so the
    rules get their chance. Never raises.
    """
    try:
        entries = _entries(load_json(raw))
    except Exception:  # json_repair's failure modes are not documented; junk is never fatal.
        return None
    if entries is None:
        return None
    items = [item for entry in entries if (item := _to_item(entry)) is not None]
    if len(items) < len(entries):
        log.info("extraction reply: %d of %d entries held no fact", len(entries) - len(items), len(entries))
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
    try:
        item = MemoryItem.model_validate(entry)
    except ValidationError:
        return None
    return item if item.content else None


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

