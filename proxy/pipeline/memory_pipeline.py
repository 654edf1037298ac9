"""The memory pipeline: context planning + retrieval on the request path, recording after it.

``prepare`` reads (prefix state, index) and decides what to forward; it never
writes. ``record`` runs after the response: index the new messages, compress
when the window is over its watermark, extract memories on cadence, keep the
trace. Anything that fails in ``prepare`` is turned by the handler into a
plain forward with ``X-Paperclip-Degraded``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

from ..context.compressor import Complete, Compressor
from ..context.watermark import View, WatermarkWindow
from ..memory.extraction.extractor import Extractor
from ..memory.recall.cards import inject
from ..memory.recall.query import indexable
from ..memory.recall.query_rewrite import rewritten_query
from ..memory.recall.ranking import Hit
from ..memory.recall.recall import Recall, RecallRequest, candidate, recall_for
from ..memory.recall.rerank import Reranker
from ..memory.redaction import redact, redact_message
from ..memory.search.fragment_index import FragmentIndex
from ..memory.search.fusion import Floor
from ..memory.search.item_index import ItemIndex
from ..prompts import Prompts
from ..store.interface import ResponseSessions, Traces
from ..tokens import Counters, TokenCounter
from .chat_call import ChatCall, Reply, reply_answer
from .pipeline_protocol import CompleteFor, Plan, Prepared

log = logging.getLogger("paperclip.pipeline")


class MemoryPipeline:
    def __init__(
        self,
        *,
        context: WatermarkWindow,
        index: FragmentIndex,
        items: ItemIndex | None = None,
        traces: Traces,
        prompts: Prompts,
        complete_for: CompleteFor,
        floor: Floor | None = None,
        extractor: Extractor | None = None,
        responses: ResponseSessions | None = None,
        rerankers: Mapping[str, Reranker] | None = None,
        trace_candidates: int,
    ) -> None:
        self.context = context
        self.index = index
        self.items = items
        self.traces = traces
        self.prompts = prompts
        self.complete_for = complete_for
        self.floor = floor or Floor()
        self.extractor = extractor
        self.responses = responses
        self.rerankers = rerankers or {}  # by memory.rerank, loaded at start
        self.trace_candidates = trace_candidates  # traces.candidates
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
        compressing = st.context.enabled and call.provider_state is None
        if not compressing:
            view = view.without_summaries()
        degraded = None
        if compressing and view.over_watermark():
            if st.context.compression_mode == "inline":
                view, degraded = await self._inline(call, view, counter)
            else:
                degraded = self.context.failing(call.tenant.id, call.session)
        recall = (
            await recall_for(
                self.index, await self._recall_request(call, view), counter, self.floor, self.items,
                self.rerankers.get(st.memory.rerank or ""),
            )
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
            plan=Plan(view, recall, counter),
        )

    async def _recall_request(self, call: ChatCall, view: View) -> RecallRequest:
        mem = call.tenant.settings.memory
        rewrite = (
            await rewritten_query(self.complete(call), self.prompts, call.messages, mem.query_rewrite_timeout_s)
            if mem.query_rewrite
            else None
        )
        return RecallRequest(
            call.tenant.id, call.user, call.session, call.messages, view.window, mem, call.received_at,
            held=call.offset,  # a provider-held chain's turns
            rewrite=rewrite,
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
        return view, self.context.failing(call.tenant.id, call.session)

    # --- after the response -----------------------------------------------------

    async def record(self, call: ChatCall, prepared: Prepared, reply: Reply) -> None:
        plan = prepared.plan
        if plan is None:
            return
        st = call.tenant.settings
        await self._save_trace(call, prepared, plan)
        answer = reply_answer(call, reply)
        if answer is None:
            return  # a failed Responses API call: nothing of it is recorded
        if answer.id is not None and self.responses is not None:
            upto = call.offset + len(plan.view.conv) + 1
            await self.responses.save(call.tenant.id, call.user, answer.id, call.session, upto)
        if st.memory.enabled:
            await self._index(call, _turns(call, plan.view, answer.text))
            await self._extract(call, plan.view, force=False, answer=answer.text)
            if plan.recall is not None and plan.recall.touched and self.items is not None:
                # Recall never writes: the injected items' access is recorded here, after the response.
                await self.items.touch(call.tenant.id, call.user, plan.recall.touched)
        compressing = st.context.enabled and call.provider_state is None
        if compressing and st.context.compression_mode == "background" and plan.view.over_watermark():
            await self._compress(call, plan.view, plan.counter)
        overrun = self._overrun.pop(call.trace_id, None)
        if overrun is not None:
            await overrun

    async def _index(self, call: ChatCall, turns: list[tuple[int, str, str]]) -> None:
        pii = call.tenant.settings.memory.pii
        await self.index.index(
            call.tenant.id, call.user, call.session, turns, pii, created=call.received_at
        )

    async def _extract(self, call: ChatCall, view: View, *, force: bool, answer: str | None = None) -> None:
        """Mine the session's messages not mined yet: on cadence, or at once (on compression).

        A client that lets the provider hold the conversation never resends a
        turn, so its turns (and the answer) are mined after each request.
        """
        if self.extractor is None or not call.tenant.settings.memory.enabled:
            return
        mem = call.tenant.settings.memory
        held = call.provider_state is not None
        turns = _turns(call, view, answer if held else None)
        await self.extractor.catch_up(
            call.tenant.id, call.user, call.session, turns, call.offset + len(view.conv) + held, self.complete(call),
            every=1 if force or held else mem.extract_every_messages, pii=mem.pii, dedup_cosine=mem.dedup_cosine,
        )

    async def _compress(self, call: ChatCall, view: View, counter: TokenCounter) -> View:
        compressor = Compressor(self.prompts, self.complete(call), self.counter(None))

        async def on_summary(start: int, end: int) -> None:
            await self._extract(call, view, force=True)

        return await self.context.compress(
            call.tenant.id, call.user, call.session, view, compressor, counter, on_summary
        )

    def complete(self, call: ChatCall) -> Complete:
        """The compression model's call for this tenant, what it is sent redacted by ``memory.pii``."""
        st = call.tenant.settings
        send = self.complete_for(st, call.tenant.compression_key)
        if st.memory.pii == "keep":
            return send

        async def complete(messages: list[dict[str, Any]]) -> str:
            return await send([redact_message(m, st.memory.pii) for m in messages])

        return complete

    async def _save_trace(self, call: ChatCall, prepared: Prepared, plan: Plan) -> None:
        view, recall = plan.view, plan.recall
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
            # The query is the user's own text: masked like everything else that is stored.
            "query": redact(recall.query, call.tenant.settings.memory.pii) if recall else None,
            "candidates": [candidate(h) for h in self._traced(recall)] if recall else [],
            "injected": [c.id for c in recall.cards] if recall else [],
            "memory_block": recall.block if recall else None,
        }
        if call.provider_state is not None:
            data["compression"] = f"off: the provider holds the conversation ({call.provider_state})"
        await self.traces.save(call.tenant.id, call.user, call.session, call.trace_id, data)

    def _traced(self, recall: Recall) -> list[Hit]:
        """The hits a trace keeps: the first ``traces.candidates`` ranked, and every one injected."""
        injected = {i for card in recall.cards for i in card.hit_ids}
        return [h for rank, h in enumerate(recall.hits) if rank < self.trace_candidates or h.id in injected]


def _turns(call: ChatCall, view: View, answer: str | None) -> list[tuple[int, str, str]]:
    """The call's indexable turns at their session positions, the answer last when there is one."""
    turns = [(call.offset + p, role, text) for p, role, text in indexable(view.conv)]
    if answer:
        turns.append((call.offset + len(view.conv), "assistant", answer))
    return turns

