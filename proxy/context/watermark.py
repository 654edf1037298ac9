"""Executes the watermark planner's decisions against the session store.

``view`` (request path) reads the longest stored prefix and assembles what
to forward; ``compress`` (after the response, or inline with a deadline)
summarises and merges until the window is within budget, under a lease so
concurrent requests of a session never compress the same turns twice.
"""

from __future__ import annotations

import functools
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from ..config import TenantSettings
from ..metrics import Metrics
from ..offload import off_loop
from ..store import lease
from ..store.interface import Sessions
from ..store.records import EMPTY, PrefixState, SummaryRow, new_summary_id
from ..tokens import REPLY_PRIMING, TokenCounter
from . import assembly, planner
from .backoff import Backoff
from .compressor import Compressor
from .history_memo import HistoryMemo, text_size

log = logging.getLogger("paperclip.context")

# One compression pass never runs more steps than this (a 100k-token history
# caught up at recent_window/2 tokens a step needs ~50); the rest waits for
# the next request. Bounded, so a misbehaving model can never spin forever.
MAX_STEPS = 64


@dataclass(frozen=True)
class View:
    """One request's conversation as the planner sees it."""

    leading: list[dict[str, Any]]
    conv: list[dict[str, Any]]
    infos: list[planner.MsgInfo]
    chain: list[str]
    state: PrefixState
    budgets: planner.Budgets
    tokens: int  # what the client sent, counted as ``TokenCounter.total`` counts it

    @functools.cached_property
    def anchor(self) -> int | None:
        """The conversation index of the user message that leads a window begun inside a tool loop."""
        return planner.anchor(self.infos, self.state.upto)

    @property
    def window(self) -> list[dict[str, Any]]:
        """What is forwarded verbatim: the conversation past the compressed prefix, led by its anchor."""
        lead = self.anchor
        rest = self.conv[self.state.upto :]
        return rest if lead is None else [self.conv[lead], *rest]

    def window_infos(self) -> list[planner.MsgInfo]:
        lead = self.anchor
        rest = self.infos[self.state.upto :]
        return rest if lead is None else [self.infos[lead], *rest]

    @property
    def summaries(self) -> list[tuple[str, int, int]]:
        return [(s.text, *assembly.turn_range(s.start, s.end)) for s in self.state.summaries]

    def over_watermark(self) -> bool:
        return self._over_watermark

    @functools.cached_property
    def _over_watermark(self) -> bool:
        # Asked before the request is forwarded and again when it is recorded: the window is counted once.
        return planner.over_watermark(self.infos, self.state.upto, self.budgets)

    def refs(self) -> list[planner.SummaryRef]:
        return [planner.SummaryRef(s.id, s.level, s.tokens, s.start, s.end) for s in self.state.summaries]

    def without_summaries(self) -> View:
        return _with_state(self, EMPTY)

    def assemble(self, memory_head: str | None = None) -> list[dict[str, Any]]:
        return assembly.assemble(self.leading, self.summaries, self.window, memory_head)

    async def tokens_of(self, messages: list[dict[str, Any]], counter: TokenCounter) -> int:
        """``counter.total(messages)``; the window's own messages among them (the very objects) are not
        counted again: what was counted of them when the view was described is read back."""
        known = {id(m): info.tokens for m, info in zip(self.window, self.window_infos(), strict=True)}
        new = [m for m in messages if id(m) not in known]
        counted = await off_loop(sum(map(text_size, new)), counter.messages, new)
        return sum(known[id(m)] for m in messages if id(m) in known) + sum(counted) + REPLY_PRIMING


class WatermarkWindow:
    def __init__(self, sessions: Sessions, metrics: Metrics, backoff: Backoff | None = None) -> None:
        self.sessions = sessions
        self.metrics = metrics
        self.owner = "ctx-" + uuid.uuid4().hex
        self.histories = HistoryMemo()  # clients resend their history: describe each message once
        self.backoff = backoff or Backoff()  # by (tenant, session)

    def failing(self, tenant: str, session: str) -> str | None:
        """Why the session's compression is failing (X-Paperclip-Degraded), or None."""
        return self.backoff.reason((tenant, session))

    async def view(
        self,
        tenant: str,
        session: str,
        messages: list[dict[str, Any]],
        counter: TokenCounter,
        settings: TenantSettings,
        raw: bytes = b"",
    ) -> View:
        """The session's window over ``messages`` (``raw``: their body's bytes, as ``HistoryMemo.describe``
        takes them)."""
        n = planner.split_leading(messages)
        history = await self.histories.describe((tenant, session), messages[n:], counter, raw)
        state = await self.sessions.longest_prefix(tenant, session, history.chain)
        budgets = planner.Budgets(
            settings.context.recent_window_tokens, settings.context.summary_budget_tokens
        )
        tokens = sum(counter.messages(messages[:n])) + history.tokens + REPLY_PRIMING
        return View(messages[:n], history.conv, history.infos, history.chain, state, budgets, tokens)

    async def compress(
        self,
        tenant: str,
        user: str,
        session: str,
        view: View,
        compressor: Compressor,
        counter: TokenCounter,
        on_summary: Callable[[int, int], Awaitable[None]] | None = None,
    ) -> View:
        """Compress until the window is within budget (bounded); returns the updated view."""
        if not self.backoff.allows((tenant, session)):
            return view  # the model failed this session repeatedly: wait before asking again
        lock = f"compress:{tenant}:{session}"
        # One owner per pass, not per engine: the lease must also exclude this
        # process's other requests of the session, which share the engine.
        owner = f"{self.owner}:{uuid.uuid4().hex}"

        async def take(ttl_s: float) -> bool:
            return await self.sessions.acquire(lock, owner, ttl_s)

        # Renewed while the pass runs: a process killed mid-pass holds the session for seconds.
        async with lease.held(lock, take, lambda: self.sessions.release(lock, owner)) as mine:
            if not mine:
                return view  # another request (or process) is compressing this session right now
            # Re-read: a compression that finished a moment ago may have moved the prefix.
            state = await self.sessions.longest_prefix(tenant, session, view.chain)
            view = _with_state(view, state)
            for _ in range(MAX_STEPS):
                step = planner.next_compression(view.infos, view.state.upto, view.budgets)
                if step is None:
                    break
                updated = await self._step(tenant, user, session, view, step, compressor, counter)
                if updated is None:
                    break
                view = updated
                if on_summary is not None:
                    await on_summary(*step)
        return view

    async def _step(
        self,
        tenant: str,
        user: str,
        session: str,
        view: View,
        step: tuple[int, int],
        compressor: Compressor,
        counter: TokenCounter,
    ) -> View | None:
        start, end = step
        first, last = assembly.turn_range(start, end)
        key = (tenant, session)
        try:
            text = await compressor.summarize(view.conv[start:end], first, last)
        except Exception:  # a bug on odd input must not fail the session silently on every request
            log.exception("compression of %s turns %d-%d crashed", session, first, last)
            text = None
        if text is None:
            self.metrics.compressions.labels("summary", "failed").inc()
            self.backoff.failed(key, "compression_failed")
            return None
        self.metrics.compressions.labels("summary", "ok").inc()
        self.backoff.succeeded(key)
        new = [SummaryRow(new_summary_id(), 0, text, counter.text(text), start, end)]
        chain = [*view.state.summaries, *new]
        chain, merged = await self._merge(chain, view.budgets, compressor, counter)
        new += merged
        await self.sessions.save_prefix(
            tenant, user, session, view.chain[end - 1], end, chain, [s for s in new if s in chain]
        )
        return _with_state(view, PrefixState(end, view.chain[end - 1], tuple(chain)))

    async def _merge(
        self,
        chain: list[SummaryRow],
        budgets: planner.Budgets,
        compressor: Compressor,
        counter: TokenCounter,
    ) -> tuple[list[SummaryRow], list[SummaryRow]]:
        made: list[SummaryRow] = []
        for _ in range(MAX_STEPS):
            refs = [planner.SummaryRef(s.id, s.level, s.tokens, s.start, s.end) for s in chain]
            pick = planner.next_merge(refs, budgets)
            if pick is None:
                break
            a, b = pick
            parts = chain[a:b]
            text = await compressor.merge(
                [(s.text, *assembly.turn_range(s.start, s.end)) for s in parts]
            )
            if text is None:
                self.metrics.compressions.labels("merge", "failed").inc()
                break  # over budget for now; the turns it covers are still summarised
            self.metrics.compressions.labels("merge", "ok").inc()
            level = max(s.level for s in parts) + 1
            merged = SummaryRow(new_summary_id(), level, text, counter.text(text), parts[0].start, parts[-1].end)
            made.append(merged)
            chain = [*chain[:a], merged, *chain[b:]]
        return chain, made


def _with_state(view: View, state: PrefixState) -> View:
    return View(view.leading, view.conv, view.infos, view.chain, state, view.budgets, view.tokens)
