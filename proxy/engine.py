"""The memory pipeline: context planning + retrieval on the request path, recording after it.

``prepare`` reads (prefix state, index) and decides what to forward; it never
writes. ``record`` runs after the response: index the new messages, compress
when the window is over its watermark, extract memories on cadence, keep the
trace. Anything that fails in ``prepare`` is turned by the handler into a
plain forward with ``X-Paperclip-Degraded``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import zlib
from typing import Any

import httpx

from .config import TenantSettings
from .context.compressor import Complete, Compressor
from .context.engine import ContextEngine, View
from .jsonbody import scrub
from .memory.cards import inject
from .memory.fusion import Floor
from .memory.index import FragmentIndex
from .memory.items import Extractor, ItemIndex
from .memory.query import indexable, text_of
from .memory.recall import Recall, candidate, recall_for
from .memory.redaction import redact_message
from .metrics import Metrics
from .pipeline import ChatCall, Prepared
from .prompts import Prompts
from .relay import Outcome
from .sse import assistant_text
from .store.traces import TraceStore
from .tokens import Counters, TokenCounter
from .upstream import Upstreams, join_url

log = logging.getLogger("paperclip.engine")


class MemoryPipeline:
    def __init__(
        self,
        *,
        context: ContextEngine,
        index: FragmentIndex,
        items: ItemIndex | None = None,
        traces: TraceStore,
        prompts: Prompts,
        upstreams: Upstreams,
        metrics: Metrics,
        floor: Floor | None = None,
        extractor: Extractor | None = None,
    ) -> None:
        self.context = context
        self.index = index
        self.items = items
        self.traces = traces
        self.prompts = prompts
        self.upstreams = upstreams
        self.metrics = metrics
        self.floor = floor or Floor()
        self.extractor = extractor
        self.counter = Counters()
        # Inline compressions that outlived their deadline, by trace: record() awaits
        # them, so they are tracked after-response work, never left running unowned.
        self._overrun: dict[str, asyncio.Future[View]] = {}

    # --- request path -----------------------------------------------------------

    async def prepare(self, call: ChatCall) -> Prepared:
        st = call.tenant.settings
        counter = self.counter(call.model)
        tokens_in = counter.total(call.messages)
        view = await self.context.view(call.tenant.id, call.session, call.messages, counter, st)
        if not st.context.enabled:
            view = view.without_summaries()
        degraded = None
        if st.context.enabled and view.over_watermark():
            if st.context.compression_mode == "inline":
                view, degraded = await self._inline(call, view, counter)
            else:
                degraded = self.context.failing.get((call.tenant.id, call.session))
        recall = (
            await recall_for(self.index, call, view.window, counter, self.floor, self.items)
            if st.memory.enabled
            else None
        )
        head = recall.block if recall and st.memory.position == "system_head" else None
        out = view.assemble(head)
        if recall and recall.block and st.memory.position != "system_head":
            out = inject(out, recall.block, st.memory.position)
        unchanged = out == call.messages
        forwarded = tokens_in if unchanged else counter.total(out)
        return Prepared(
            messages=None if unchanged else out,
            tokens_in=tokens_in,
            tokens_forwarded=forwarded,
            memories=len(recall.cards) if recall else 0,
            degraded=degraded,
            state={"view": view, "recall": recall, "counter": counter},
        )

    async def _inline(
        self, call: ChatCall, view: View, counter: TokenCounter
    ) -> tuple[View, str | None]:
        st = call.tenant.settings
        work = asyncio.ensure_future(self._compress(call, view, counter))
        try:
            async with asyncio.timeout(st.compression.timeout_s):
                view = await asyncio.shield(work)
        except TimeoutError:
            self._overrun[call.trace_id] = work
            return view, "compression_timeout"  # the work goes on; the next request benefits
        return view, self.context.failing.get((call.tenant.id, call.session))

    # --- after the response -----------------------------------------------------

    async def record(self, call: ChatCall, prepared: Prepared, outcome: Outcome) -> None:
        view: View | None = prepared.state.get("view")
        counter: TokenCounter = prepared.state.get("counter") or self.counter(call.model)
        st = call.tenant.settings
        if view is None:
            return
        await self._save_trace(call, prepared)
        if st.memory.enabled:
            await self._index(call, view, outcome)
            await self._extract(call, view, force=False)
        if st.context.enabled and st.context.compression_mode == "background" and view.over_watermark():
            await self._compress(call, view, counter)
        overrun = self._overrun.pop(call.trace_id, None)
        if overrun is not None:
            await overrun

    async def _index(self, call: ChatCall, view: View, outcome: Outcome) -> None:
        positions = indexable(view.conv)
        reply = _reply_text(outcome)
        if reply:
            positions.append((len(view.conv), "assistant", reply))
        pii = call.tenant.settings.memory.pii
        await self.index.index(
            call.tenant.id, call.user, call.session, positions, pii, created=call.received_at
        )

    async def _extract(self, call: ChatCall, view: View, *, force: bool) -> None:
        """Mine the session's messages not mined yet: on cadence, or at once (on compression)."""
        if self.extractor is None or not call.tenant.settings.memory.enabled:
            return
        mem = call.tenant.settings.memory
        tenant, session = call.tenant.id, call.session
        done = await self.extractor.items.cursor(tenant, session)
        fresh = len(view.conv) - done
        if fresh <= 0 or (fresh < mem.extract_every_messages and not force):
            return
        turns = [t for t in indexable(view.conv) if t[0] >= done]
        complete = self.complete(call.tenant.settings, call.tenant.upstream_key)
        await self.extractor.extract(
            tenant, call.user, session, turns, complete, pii=mem.pii, dedup_cosine=mem.dedup_cosine
        )
        await self.extractor.items.set_cursor(tenant, session, len(view.conv))

    async def _compress(self, call: ChatCall, view: View, counter: TokenCounter) -> View:
        st = call.tenant.settings
        compressor = Compressor(self.prompts, self.complete(st, call.tenant.upstream_key), self.counter(None))

        async def on_summary(start: int, end: int) -> None:
            await self._extract(call, view, force=True)

        return await self.context.compress(
            call.tenant.id, call.user, call.session, view, compressor, counter, on_summary
        )

    def complete(self, st: TenantSettings, upstream_key: str | None) -> Complete:
        """A call to the compression model: the tenant's upstream unless compression.base_url is set."""
        comp = st.compression
        client = self.upstreams.client(st.upstream)
        url = join_url(comp.base_url or st.upstream.base_url, "/chat/completions")
        key = comp.api_key or upstream_key
        headers = {"authorization": f"Bearer {key}"} if key else {}

        async def complete(messages: list[dict[str, Any]]) -> str:
            if st.memory.pii != "keep":
                messages = [redact_message(m, st.memory.pii) for m in messages]
            payload = {"model": comp.model, "temperature": comp.temperature, "messages": messages}
            response = await client.post(
                url, json=payload, headers=headers, timeout=httpx.Timeout(comp.timeout_s)
            )
            response.raise_for_status()
            return str(response.json()["choices"][0]["message"]["content"] or "")

        return complete

    async def _save_trace(self, call: ChatCall, prepared: Prepared) -> None:
        view: View = prepared.state["view"]
        recall: Recall | None = prepared.state.get("recall")
        data = {
            "trace": call.trace_id,
            "session": call.session,
            "user": call.user,
            "created": call.received_at,
            "tokens_in": prepared.tokens_in,
            "tokens_forwarded": prepared.tokens_forwarded,
            "degraded": prepared.degraded,
            "watermark": view.state.upto,
            "summaries": [
                {"id": s.id, "level": s.level, "tokens": s.tokens, "turns": [s.start + 1, s.end]}
                for s in view.state.summaries
            ],
            "query": recall.query if recall else None,
            "candidates": [candidate(h) for h in recall.hits] if recall else [],
            "injected": [c.id for c in recall.cards] if recall else [],
            "memory_block": recall.block if recall else None,
        }
        await self.traces.save(call.tenant.id, call.user, call.session, call.trace_id, data)


def _reply_text(outcome: Outcome) -> str | None:
    if outcome.status != 200 or not outcome.body:
        return None
    body = bytes(outcome.body)
    if outcome.content_encoding in ("gzip", "deflate"):
        try:
            body = zlib.decompressobj(47).decompress(body)
        except zlib.error:
            return None
    elif outcome.content_encoding:
        return None
    if outcome.streamed:
        text = assistant_text(body)
        return scrub(text) if text else text
    try:
        message = json.loads(body)["choices"][0]["message"]
    except (ValueError, KeyError, IndexError, TypeError):
        return None
    return scrub(text_of(message)) or None  # an upstream may send lone surrogates too
