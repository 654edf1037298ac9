"""The upstream's own ``usage``: read from the ends of a response, added up per tenant, model and day.

``billed`` is pure: it finds the last ``"usage"`` object in the response's
last bytes (a non-stream body ends with it; a stream with
``stream_options.include_usage`` sends it in the last chunk before
``[DONE]``; the Responses API's ``response.completed`` event carries it near
its end, named ``input_tokens`` / ``output_tokens``, as Anthropic's Messages
API names them, ``cache_read_input_tokens`` its cached ones). A Messages API
stream splits it: ``message_start``, the first event, carries the input (and
a placeholder output), and the last ``message_delta`` the output, often
alone. So the response's first bytes are kept too, and a last usage with an
output but no input takes its input from the first usage of the head. The
ledger adds counts in memory on the request path (a dict update) and writes
them to the store after the response, in batches.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
from collections import defaultdict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeGuard

from ..store.interface import Usage
from ..store.sqlite.sqlite_usage import COUNTS

# Bytes of the response kept for finding its usage: the usage chunk is ~300 bytes; Anthropic's message_start,
# the first event of a stream, is ~500 (more with a long model name or id).
TAIL_BYTES = 4096
HEAD_BYTES = 2048
_KEY = b'"usage"'
_DECODER = json.JSONDecoder()


@dataclass(frozen=True)
class Billed:
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int = 0


def billed(tail: bytes, head: bytes = b"") -> Billed | None:
    """The last well-formed ``"usage": {...}`` with integer token counts in ``tail``, else None; one with an
    output count alone (Anthropic's ``message_delta``) takes its input from the first usage in ``head``."""
    for value in _usages(tail, last_first=True):
        prompt, completion, cached = _counts(value)
        if completion is None:
            continue
        if prompt is not None:
            return Billed(prompt, completion, cached or 0)
        if "output_tokens" not in value:
            continue
        start = next((c for v in _usages(head, last_first=False) if (c := _counts(v))[0] is not None), None)
        if start is not None:
            assert start[0] is not None
            return Billed(start[0], completion, cached if cached is not None else start[2] or 0)
    return None


def _usages(buf: bytes, *, last_first: bool) -> Iterator[dict[str, Any]]:
    """The JSON objects named ``"usage"`` in ``buf``, from its end or from its start."""
    bound = len(buf) if last_first else 0
    while (at := (buf.rfind(_KEY, 0, bound) if last_first else buf.find(_KEY, bound))) >= 0:
        bound = at if last_first else at + len(_KEY)
        value = _parse(buf[at + len(_KEY) :])
        if value is not None:
            yield value


def _parse(rest: bytes) -> dict[str, Any] | None:
    text = rest.decode("utf-8", "replace").lstrip()
    if not text.startswith(":"):
        return None
    try:
        value, _ = _DECODER.raw_decode(text[1:].lstrip())
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _counts(value: Mapping[str, Any]) -> tuple[int | None, int | None, int | None]:
    """(prompt, completion, cached) of a usage object, each None when missing or not a count (a missing
    completion is 0)."""
    # Chat Completions names the counts prompt/completion; the Responses API input/output.
    chat = "prompt_tokens" in value
    prompt = value.get("prompt_tokens" if chat else "input_tokens")
    completion = value.get("completion_tokens" if chat else "output_tokens", 0)
    details = value.get("prompt_tokens_details" if chat else "input_tokens_details")
    # Anthropic's Messages API names its cache hits at the top of its usage.
    cached = details.get("cached_tokens", 0) if isinstance(details, dict) else value.get("cache_read_input_tokens")
    return (prompt if _count(prompt) else None, completion if _count(completion) else None,
            cached if _count(cached) else None)


def _count(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


Key = tuple[str, str, str]  # tenant, model, day


class UsageLedger:
    """Counts not yet written, keyed (tenant, model, UTC day)."""

    def __init__(self) -> None:
        self.pending: defaultdict[Key, dict[str, int]] = defaultdict(lambda: dict.fromkeys(COUNTS, 0))

    def note(
        self, tenant: str, model: str, tokens_client: int, tokens_forwarded: int,
        bill: Billed | None, now: float,
    ) -> None:
        row = self.pending[(tenant, model, _day(now))]
        row["requests"] += 1
        row["tokens_client"] += tokens_client
        row["tokens_forwarded"] += tokens_forwarded
        if bill is not None:
            row["billed_requests"] += 1
            row["prompt_tokens"] += bill.prompt_tokens
            row["completion_tokens"] += bill.completion_tokens
            row["cached_tokens"] += bill.cached_tokens

    async def flush(self, store: Usage) -> None:
        """Write what is pending; counts noted meanwhile wait for the next flush."""
        taken, self.pending = self.pending, type(self.pending)(lambda: dict.fromkeys(COUNTS, 0))
        try:
            await store.add(taken)
        except BaseException:
            _merge(self.pending, taken)  # not lost: written with the next flush
            raise

    def unwritten(self) -> list[dict[str, Any]]:
        return [{"tenant": t, "model": m, "day": d, **c} for (t, m, d), c in self.pending.items()]


@functools.lru_cache(maxsize=4)
def _days(epoch_day: int) -> str:
    return (dt.date(1970, 1, 1) + dt.timedelta(days=epoch_day)).isoformat()


def _day(now: float) -> str:
    """The UTC day of ``now``, as YYYY-MM-DD (cached: it changes once a day)."""
    return _days(int(now // 86400))


def _merge(into: defaultdict[Key, dict[str, int]], rows: Mapping[Key, Mapping[str, int]]) -> None:
    for key, counts in rows.items():
        for name, n in counts.items():
            into[key][name] += n


def combine(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows of one (tenant, model, day) added together, with ``tokens_saved`` measured, sorted."""
    out: dict[Key, dict[str, Any]] = {}
    for r in rows:
        key = (r["tenant"], r["model"], r["day"])
        acc = out.setdefault(key, {"tenant": key[0], "model": key[1], "day": key[2], **dict.fromkeys(COUNTS, 0)})
        for name in COUNTS:
            acc[name] += int(r.get(name, 0))
    for acc in out.values():
        acc["tokens_saved"] = acc["tokens_client"] - acc["tokens_forwarded"]
    return [out[k] for k in sorted(out, key=lambda k: (k[2], k[0], k[1]))]
