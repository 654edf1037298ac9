"""Structured memories from a session's turns, after the response.

Extraction runs every ``memory.extract_every_messages`` new messages of a
session and on every compression, through the compression model with
``prompts/extract.md``; output that cannot be repaired into items falls back
to the rule-based extractor, and what no rule read to ``meaning`` (where the
memory layer gives a reader: the bundled model's space) and, in Chinese, to
``chinese_statements``. The batch's own repeats are folded
(``reconcile``); each new item close to an existing one is judged with it by
the compression model in one call (``prompts/reconcile.md``: merge, supersede
or add), the rules (``lifecycle.decide``) standing in for what it does not
answer; then ``remember`` writes each decision. A superseded item's turns are
suppressed, found by similarity in its session when it kept none.
"""

from __future__ import annotations

import datetime as dt
import logging
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

import numpy as np

from ...metrics import Metrics
from ...offload import off_loop
from ...prompts import Prompts
from ...store import lease
from ...store.interface import ExtractionCursors, Fragments, Items
from ...store.records import ItemRow, cursor_key
from ..lifecycle import Decision, ExistingItem
from ..memory_schema import MemoryItem, example_reply, is_guess, prompt_fields, response_format
from ..recall.query import fragment_hash
from ..redaction import redact
from . import chinese_statements
from .item_parser import parse_items, transcript_for_extraction
from .meaning import MeaningReader
from .reconcile import (
    Batch,
    Pair,
    Verdict,
    close_pairs,
    decisions,
    fold_batch,
    parse_verdicts,
    render_pairs,
    settle,
    verdicts_for,
)
from .remember import Planned, remember, replies_repeating, said_in
from .rules import Said, read_turns

log = logging.getLogger("paperclip.items")

Embed = Callable[[Sequence[str]], Awaitable[np.ndarray]]


class Complete(Protocol):
    """The compression model's call. ``response_format`` is asked for where the upstream takes it
    (``compression.structured_output``); the caller reads the reply the same way either way."""

    async def __call__(
        self, messages: list[dict[str, Any]], /, *, response_format: dict[str, Any] | None = None
    ) -> str: ...

Turn = tuple[int, str, str]  # (conversation position, role, text)

# A session that arrives with a long history is caught up with the model for
# its latest messages only; older ones go through the rules (cheap, no tokens).
MODEL_CATCH_UP = 40


class Extractor:
    def __init__(
        self,
        items: Items,
        cursors: ExtractionCursors,
        prompts: Prompts,
        embed: Embed,
        metrics: Metrics,
        fragments: Fragments | None = None,
        meaning: MeaningReader | None = None,
    ) -> None:
        self.items = items
        self.cursors = cursors
        self.prompts = prompts
        self.embed = embed
        self.metrics = metrics
        self.fragments = fragments  # where superseded values' turns are found and suppressed
        self.meaning = meaning  # lasting facts said in words no rule reads, where the rules stand in

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
        per_session: bool = False,
    ) -> int:
        """Extract the session's turns not mined yet, once at least ``every`` messages wait.

        ``turns`` are the conversation's indexable turns and ``length`` its
        message count (the cursor's unit). The turns are claimed first (see
        ``store/extraction_cursors.py``): a concurrent record of the session
        that lost the claim extracts nothing. Only turns still stored are mined
        (``stored``): what was forgotten since it was said — the user, the
        conversation, the turn, on any replica — is never extracted again, nor
        is a purged turn a client sends again. Returns how many items were added.
        """
        key = cursor_key(user, session)  # the user's session: two users may send one name
        done = await self.cursors.cursor(tenant, key)
        if length - done <= 0 or length - done < every:
            return 0
        owner = "extract-" + uuid.uuid4().hex
        extracted = False

        async def claim(ttl_s: float) -> bool:
            return await self.cursors.claim(tenant, key, done, owner, ttl_s)

        async def end() -> None:
            # The cursor moves only past mined turns; otherwise they go to the next claimant.
            if extracted:
                await self.cursors.finish(tenant, key, owner, length)
            else:
                await self.cursors.release(tenant, key, owner)

        # Renewed while the extraction runs; a process killed mid-way holds the turns for seconds.
        async with lease.held(f"extract:{tenant}:{session}", claim, end) as mine:
            if not mine:
                return 0
            fresh = await self.stored(tenant, user, [t for t in turns if t[0] >= done])
            added = await self.extract(
                tenant, user, session, fresh, complete, pii=pii, dedup_cosine=dedup_cosine, per_session=per_session
            )
            extracted = True
        return added

    async def stored(self, tenant: str, user: str, turns: Sequence[Turn]) -> list[Turn]:
        """The ``turns`` whose fragments the user's store still holds (all, with no fragment store)."""
        if self.fragments is None or not turns:
            return list(turns)
        hashes = [fragment_hash(role, text) for _, role, text in turns]
        kept = await self.fragments.known(tenant, user, hashes)
        return [t for t, h in zip(turns, hashes, strict=True) if h in kept]

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
        per_session: bool = False,
    ) -> int:
        """Extract and store memories from ``turns``; returns how many items were added. ``per_session``
        (``memory.scope: session``): the new items meet only the session's own, to merge or supersede."""
        now = now or dt.datetime.now(dt.UTC)
        # Nothing unmasked reaches the model or the store; source hashes use the originals.
        # Masking and the rules read every turn: off the event loop when that is a lot of text.
        size = sum(len(text) for _, _, text in turns)
        masked, found, unread = await off_loop(size, _masked_and_ruled, turns, pii, now)
        from_model, unread_latest = await self._from_model(masked[-MODEL_CATCH_UP:], complete, now)
        found += from_model
        if self.meaning is not None and (unread or unread_latest):
            by_meaning = await self.meaning.read([*unread, *unread_latest])
            self.metrics.memories_extracted.labels("meaning").inc(len(by_meaning))
            found += by_meaning
        if unread or unread_latest:
            said_in_chinese = chinese_statements.read([*unread, *unread_latest])
            self.metrics.memories_extracted.labels("chinese").inc(len(said_in_chinese))
            found += said_in_chinese
        if not found:
            return 0
        batch = fold_batch(found, list(await self.embed([i.content for i in found])), dedup_cosine)
        existing = [(r, v) for r, v in await self.items.active_with_vectors(tenant, user)
                    if not per_session or r.session == session]
        known = [ExistingItem.of(r, v) for r, v in existing]
        pairs = close_pairs(batch, known)
        judged = await self._judge(batch, pairs, complete) if pairs and complete is not None else None
        batch, pairs, verdicts = settle(batch, pairs, verdicts_for(batch, pairs, judged, dedup_cosine))
        plans = decisions(batch, known, pairs, verdicts, dedup_cosine)
        rows = {str(r.id): (r, v) for r, v in existing}
        added = 0
        for item, vector, decision in zip(batch.items, batch.vectors, plans, strict=True):
            planned = Planned(decision, await self._sources_of(tenant, user, decision, item, rows))
            done = await remember(
                self.items, self.embed, tenant, user, session, item, dedup_cosine=dedup_cosine,
                fragment_hashes=_sources(item, turns), vector=vector, planned=planned, per_session=per_session,
            )
            added += done.action != "merged"
        # A value the same batch replaced was said in these turns, and repeated in the replies to them
        # that name it: never inject them again.
        dropped = _hashes(batch.dropped_turns, turns)
        if dropped and self.fragments is not None:
            for hidden, old, new in batch.replaced:
                dropped += await replies_repeating(self.fragments, tenant, user, _hashes(hidden, turns), old, new)
            await self.fragments.suppress(tenant, user, dropped)
        return added

    async def _judge(self, batch: Batch, pairs: Sequence[Pair], complete: Complete) -> dict[int, Verdict] | None:
        """The compression model's verdicts on every pair, in one call; None when it fails."""
        prompt = self.prompts.render("reconcile", pairs=render_pairs(batch, pairs))
        try:
            judged = parse_verdicts(await complete([{"role": "user", "content": prompt}]), len(pairs))
        except Exception as exc:
            log.warning("memory reconcile model failed, using the rules: %r", exc)
            return None
        return judged

    async def _sources_of(
        self, tenant: str, user: str, decision: Decision, item: MemoryItem,
        rows: dict[str, tuple[ItemRow, np.ndarray]],
    ) -> tuple[str, ...]:
        """More turns a supersede hides than those the replaced items name: the turns they were said in,
        found by similarity when they name none, and the replies to them that repeat the old value. A
        replaced guess keeps its turns, and so its replies."""
        if decision.action != "supersede" or self.fragments is None:
            return ()
        found: list[str] = []
        for target in decision.target_ids:
            row, vector = rows[target]
            if is_guess(row.confidence):
                continue
            said = await said_in(self.fragments, tenant, user, row, vector)
            found += said
            found += await replies_repeating(
                self.fragments, tenant, user, [*row.fragment_hashes, *said], row.content, item.content)
        return tuple(found)

    async def _from_model(
        self, turns: Sequence[Turn], complete: Complete | None, now: dt.datetime
    ) -> tuple[list[MemoryItem], list[Said]]:
        """The model's items for ``turns``; where the rules stand in, theirs and the sentences they did not read."""
        numbered = _numbered(turns)
        if not numbered:
            return [], []
        parsed: list[MemoryItem] | None = None
        if complete is not None:
            prompt = extraction_prompt(self.prompts, numbered, now.date())
            try:
                reply = await complete([{"role": "user", "content": prompt}], response_format=response_format())
                parsed = parse_items(reply)
            except Exception as exc:
                log.warning("memory extraction model failed, using the rules: %r", exc)
        if parsed is None:
            items, unread = await off_loop(sum(len(text) for _, _, text in numbered), read_turns, numbered, now)
            self.metrics.memories_extracted.labels("rules").inc(len(items))
            return items, unread
        self.metrics.memories_extracted.labels("model").inc(len(parsed))
        return parsed, []


def _masked_and_ruled(
    turns: Sequence[Turn], pii: str, now: dt.datetime
) -> tuple[list[Turn], list[MemoryItem], list[Said]]:
    """The turns masked by ``pii``, and what the rules find (and leave unread) in all but the latest
    ``MODEL_CATCH_UP``."""
    masked = [(p, role, redact(text, pii) if pii != "keep" else text) for p, role, text in turns]
    return (masked, *read_turns(_numbered(masked[:-MODEL_CATCH_UP]), now))


def extraction_prompt(prompts: Prompts, numbered: Sequence[Turn], today: dt.date) -> str:
    """``prompts/extract.md`` for these turns (numbered as the prompt numbers them), with the schema's fields."""
    return prompts.render(
        "extract", transcript=transcript_for_extraction(numbered), now=today.isoformat(),
        fields=prompt_fields(), example=example_reply(),
    )


def _numbered(turns: Sequence[Turn]) -> list[Turn]:
    """Turns as the prompt numbers them: 1-based conversation positions."""
    return [(p + 1, role, text) for p, role, text in turns]


def _sources(item: MemoryItem, turns: Sequence[Turn]) -> list[str]:
    return _hashes(item.turns, turns)


def _hashes(numbers: Sequence[int], turns: Sequence[Turn]) -> list[str]:
    """The fragment hashes of the turns numbered ``numbers`` (1-based, as the prompt numbers them)."""
    by_turn = {p + 1: (role, text) for p, role, text in turns}
    return [fragment_hash(*by_turn[t]) for t in numbers if t in by_turn]
