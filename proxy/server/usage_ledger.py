"""The upstream's own ``usage``: read from the end of a response, added up per tenant, model and day.

``billed`` is pure: it finds the last ``"usage"`` object in the response's
last bytes (a non-stream body ends with it; a stream with
``stream_options.include_usage`` sends it in the last chunk before
``[DONE]``; the Responses API's ``response.completed`` event carries it near
its end, named ``input_tokens`` / ``output_tokens``, as Anthropic's Messages
API names them, ``cache_read_input_tokens`` its cached ones). The ledger adds counts in memory on the request path (a dict
update) and writes them to the store after the response, in batches.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeGuard

from ..store.interface import Usage
from ..store.sqlite.sqlite_usage import COUNTS

# Bytes of the response kept for finding its usage: the usage chunk is ~300 bytes.
TAIL_BYTES = 4096
_KEY = b'"usage"'
_DECODER = json.JSONDecoder()


@dataclass(frozen=True)
class Billed:
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int = 0


def billed(tail: bytes) -> Billed | None:
    """The last well-formed ``"usage": {...}`` with integer token counts in ``tail``, else None."""
    end = len(tail)
    while (at := tail.rfind(_KEY, 0, end)) >= 0:
        end = at
        found = _parse(tail[at + len(_KEY) :])
        if found is not None:
            return found
    return None


def _parse(rest: bytes) -> Billed | None:
    text = rest.decode("utf-8", "replace").lstrip()
    if not text.startswith(":"):
        return None
    try:
        value, _ = _DECODER.raw_decode(text[1:].lstrip())
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    # Chat Completions names the counts prompt/completion; the Responses API input/output.
    chat = "prompt_tokens" in value
    prompt = value.get("prompt_tokens" if chat else "input_tokens")
    completion = value.get("completion_tokens" if chat else "output_tokens", 0)
    if not _count(prompt) or not _count(completion):
        return None
    details = value.get("prompt_tokens_details" if chat else "input_tokens_details")
    # Anthropic's Messages API names its cache hits at the top of its usage.
    cached = details.get("cached_tokens", 0) if isinstance(details, dict) else value.get("cache_read_input_tokens", 0)
    return Billed(prompt, completion, cached if _count(cached) else 0)


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
