"""Structured memories from a session's turns, after the response.

Extraction runs every ``memory.extract_every_messages`` new messages of a
session and on every compression, through the compression model with
``prompts/extract.md``; output that cannot be repaired into items falls back
to the rule-based extractor. Each new item is then deduplicated or
supersedes an older one (``lifecycle.decide``).
"""

from __future__ import annotations

import datetime as dt
import logging
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import numpy as np

from ..metrics import Metrics
from ..prompts import Prompts
from ..store.extraction_cursors import ExtractionCursorStore
from ..store.item_rows import ItemStore
from .extraction import MemoryItem, parse_items, transcript_for_extraction
from .query import fragment_hash
from .redaction import redact
from .remember import remember
from .rules import rule_extract

log = logging.getLogger("paperclip.items")

Embed = Callable[[Sequence[str]], Awaitable[np.ndarray]]
Complete = Callable[[list[dict[str, Any]]], Awaitable[str]]
Turn = tuple[int, str, str]  # (conversation position, role, text)

# A session that arrives with a long history is caught up with the model for
# its latest messages only; older ones go through the rules (cheap, no tokens).
MODEL_CATCH_UP = 40
# How long a claim on a session's turns holds if its process dies mid-extraction.
CLAIM_LEASE_S = 300.0


class Extractor:
    def __init__(
        self,
        items: ItemStore,
        cursors: ExtractionCursorStore,
        prompts: Prompts,
        embed: Embed,
        metrics: Metrics,
    ) -> None:
        self.items = items
        self.cursors = cursors
        self.prompts = prompts
        self.embed = embed
        self.metrics = metrics

    async def catch_up(
        self,
        tenant: str,
        user: str,
        session: str,
        turns: Sequence[Turn],
        length: int,
        complete: Complete | None,
        *,
        every: int,
        pii: str,
        dedup_cosine: float,
    ) -> int:
        """Extract the session's turns not mined yet, once at least ``every`` messages wait.

        ``turns`` are the conversation's indexable turns and ``length`` its
        message count (the cursor's unit). The turns are claimed first (see
        ``store/extraction_cursors.py``): a concurrent record of the session
        that lost the claim extracts nothing. Returns how many items were added.
        """
        done = await self.cursors.cursor(tenant, session)
        if length - done <= 0 or length - done < every:
            return 0
        owner = "extract-" + uuid.uuid4().hex
        if not await self.cursors.claim(tenant, session, done, owner, CLAIM_LEASE_S):
            return 0
        try:
            fresh = [t for t in turns if t[0] >= done]
            added = await self.extract(
                tenant, user, session, fresh, complete, pii=pii, dedup_cosine=dedup_cosine
            )
        except BaseException:
            await self.cursors.release(tenant, session, owner)
            raise
        await self.cursors.finish(tenant, session, owner, length)
        return added

    async def extract(
        self,
        tenant: str,
        user: str,
        session: str,
        turns: Sequence[Turn],
        complete: Complete | None,
        *,
        pii: str,
        dedup_cosine: float,
        now: dt.datetime | None = None,
    ) -> int:
        """Extract and store memories from ``turns``; returns how many items were added."""
        now = now or dt.datetime.now(dt.UTC)
        # Nothing unmasked reaches the model or the store; source hashes use the originals.
        masked = [(p, role, redact(text, pii) if pii != "keep" else text) for p, role, text in turns]
        found = rule_extract(_numbered(masked[:-MODEL_CATCH_UP]), now)
        found += await self._from_model(masked[-MODEL_CATCH_UP:], complete, now)
        added = 0
        for item in found:
            added += await self._apply(tenant, user, session, item, turns, dedup_cosine)
        return added

    async def _from_model(
        self, turns: Sequence[Turn], complete: Complete | None, now: dt.datetime
    ) -> list[MemoryItem]:
        numbered = _numbered(turns)
        if not numbered:
            return []
        parsed: list[MemoryItem] | None = None
        if complete is not None:
            prompt = self.prompts.render(
                "extract", transcript=transcript_for_extraction(numbered), now=now.date().isoformat()
            )
            try:
                parsed = parse_items(await complete([{"role": "user", "content": prompt}]))
            except Exception as exc:
                log.warning("memory extraction model failed, using the rules: %r", exc)
        if parsed is None:
            items = rule_extract(numbered, now)
            self.metrics.memories_extracted.labels("rules").inc(len(items))
            return items
        self.metrics.memories_extracted.labels("model").inc(len(parsed))
        return parsed

    async def _apply(
        self,
        tenant: str,
        user: str,
        session: str,
        item: MemoryItem,
        turns: Sequence[Turn],
        dedup_cosine: float,
    ) -> int:
        done = await remember(
            self.items, self.embed, tenant, user, session, item,
            dedup_cosine=dedup_cosine, fragment_hashes=_sources(item, turns),
        )
        return 0 if done.action == "merged" else 1


def _numbered(turns: Sequence[Turn]) -> list[Turn]:
    """Turns as the prompt numbers them: 1-based conversation positions."""
    return [(p + 1, role, text) for p, role, text in turns]


def _sources(item: MemoryItem, turns: Sequence[Turn]) -> list[str]:
    by_turn = {p + 1: (role, text) for p, role, text in turns}
    return [fragment_hash(*by_turn[t]) for t in item.turns if t in by_turn]
