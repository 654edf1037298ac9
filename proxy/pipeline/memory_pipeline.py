"""The memory pipeline: context planning + retrieval on the request path, recording after it.

``prepare`` reads (prefix state, index) and decides what to forward; it never
writes. ``record`` runs after the response: index the new messages, compress
when the window is over its watermark, extract memories on cadence (and the
chat's last messages once it goes quiet, ``quiet_extraction``), keep the
trace. Anything that fails in ``prepare`` is turned by the handler into a
plain forward with ``X-Paperclip-Degraded``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import Any

from ..context.compressor import Compressor
from ..context.history_memo import text_size
from ..context.watermark import View, WatermarkWindow
from ..errors import StoreUnavailable
from ..memory.extraction.extractor import MODEL_CATCH_UP, Complete, Extractor
from ..memory.recall.cards import inject
from ..memory.recall.query_rewrite import rewritten_query
from ..memory.recall.question_memo import QuestionMemo
from ..memory.recall.ranking import Hit
from ..memory.recall.recall import Recall, RecallRequest, candidate, recall_for
from ..memory.recall.rerank import Reranker
from ..memory.redaction import redact, redact_message
from ..memory.search.fragment_index import FragmentIndex
from ..memory.search.fusion import Floor
from ..memory.search.item_index import ItemIndex
from ..offload import off_loop
from ..prompts import Prompts
from ..store.interface import DatabaseUnavailable, ResponseSessions, Traces
from ..tokens import Counters, TokenCounter
from .catch_up import CatchUp
from .chat_call import ChatCall, Reply, reply_answer
from .pipeline_protocol import CompleteFor, Plan, Prepared
from .quiet_extraction import QuietExtraction
from .recorded_turns import RecordedTurns, Turn, turns_from

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
        quiet: QuietExtraction | None = None,
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
        self.quiet = quiet  # a chat's last messages, extracted once it goes quiet
        self.catching_up = CatchUp(quiet)  # the user's other chats, before a request's recall
        self.counter = Counters()
        self.recorded = RecordedTurns()  # by session: its turns as last recorded, how far indexed
        self.asked: QuestionMemo[Recall] = QuestionMemo()  # by session: its last recall, while the question stands
        # Inline compressions that outlived their deadline, by trace: record() awaits
        # them, so they are tracked after-response work, never left running unowned.
        self._overrun: dict[str, asyncio.Future[View]] = {}

    # --- request path -----------------------------------------------------------

    async def catch_up(self, call: ChatCall) -> None:
        """What the user said last in their other chats, recorded and extracted before this request's
        recall, within ``memory.extract_wait_s`` (``catch_up``): not when its recall is the session's own."""
        mem = call.tenant.settings.memory
        if mem.enabled and mem.scope == "user" and self.extractor is not None:
            await self.catching_up.wait(call.tenant.id, call.user, call.session, mem.extract_wait_s)

    async def prepare(self, call: ChatCall) -> Prepared:
        try:
            return await self._prepare(call)
        except DatabaseUnavailable as exc:  # the store's own words, said in the tree's
            raise StoreUnavailable(str(exc)) from exc

    async def _prepare(self, call: ChatCall) -> Prepared:
        st = call.tenant.settings
        counter = self.counter(call.model)
        view = await self._view(call, counter)
        tokens_in = view.tokens
        compressing = st.context.enabled and call.provider_state is None
        degraded = None
        if compressing and view.over_watermark():
            if st.context.compression_mode == "inline":
                view, degraded = await self._inline(call, view, counter)
            else:
                degraded = self.context.failing(call.tenant.id, call.session)
        recall = (
            await recall_for(
                self.index, await self._recall_request(call, view), counter, self.floor, self.items,
                self.rerankers.get(st.memory.rerank or ""), self.asked,
            )
            if st.memory.enabled
            else None
        )
        head = recall.block if recall and st.memory.position == "system_head" else None
        out = view.assemble(head)
        if recall and recall.block and st.memory.position != "system_head":
            out = inject(out, recall.block, st.memory.position)
        unchanged = out == call.messages
        forwarded = tokens_in if unchanged else await view.tokens_of(out, counter)
        return Prepared(
            messages=None if unchanged else out,
            tokens_in=tokens_in,
            tokens_forwarded=forwarded,
            memories=len(recall.cards) if recall else 0,
            degraded=degraded,
            plan=Plan(view, recall, counter),
        )

    async def forwarded(self, call: ChatCall, reason: str) -> Prepared:
        """What ``record`` needs of a turn forwarded without the pipeline (``reason``: while the layer
        started): the conversation as ``prepare`` would have seen it, nothing recalled, nothing changed."""
        counter = self.counter(call.model)
        view = await self._view(call, counter)
        return Prepared(None, view.tokens, view.tokens, degraded=reason, plan=Plan(view, None, counter))

    async def _view(self, call: ChatCall, counter: TokenCounter) -> View:
        """The session's window: the stored summaries apply only to a history the client sends whole."""
        st = call.tenant.settings
        view = await self.context.view(call.tenant.id, call.session, call.messages, counter, st, call.raw)
        return view if st.context.enabled and call.provider_state is None else view.without_summaries()

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
            window_hashes=await self.recorded.window_hashes((call.tenant.id, call.user, call.session), view),
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

    def due(self, call: ChatCall) -> AbstractContextManager[None]:
        return self.catching_up.recording((call.tenant.id, call.user, call.session))

    async def record(self, call: ChatCall, prepared: Prepared, reply: Reply, *, covered: bool = False) -> None:
        """Keep the turn: its trace, its response id, the memories it used; then index, extract, compress.

        ``covered``: a newer request of the session resent all of this one's conversation
        (``covers``; its answer too, if the client kept it) and records it for both
        (``BoundedPipeline``): only what is this request's own is kept. A request of the same user
        in another chat waits for it to catch up (``catch_up``) from the moment ``BoundedPipeline``,
        which queues every record the proxy makes, holds it ``due``.
        """
        plan = prepared.plan
        if plan is None:
            return
        st = call.tenant.settings
        await self._save_trace(call, prepared, plan)
        answer = await off_loop(len(reply.body), reply_answer, call, reply)
        if answer is None:
            return  # a failed Responses API call: nothing of it is recorded
        if self.responses is not None:
            upto = call.offset + len(plan.view.conv) + 1
            for chain in (k for k in (answer.id, call.chain_key) if k is not None):
                await self.responses.save(call.tenant.id, call.user, chain, call.session, upto)
        if st.memory.enabled and plan.recall is not None and plan.recall.touched and self.items is not None:
            # Recall never writes: the injected items' access is recorded here, after the response.
            await self.items.touch(call.tenant.id, call.user, plan.recall.touched)
        if st.memory.enabled and not covered:
            key, generation = (call.tenant.id, call.user, call.session), self._generation(call)
            turns, fresh = await self.recorded.turns(key, plan.view, generation)
            new = _at(call, [t for t in turns if t[0] >= fresh], len(plan.view.conv), answer.text)
            await self._index(call, new, unseen=fresh > 0)
            self.recorded.recorded(key, plan.view, turns, generation, answer.text)
            await self._extract(call, plan.view, force=False, answer=answer.text, turns=turns)
        compressing = st.context.enabled and call.provider_state is None and not covered
        if compressing and st.context.compression_mode == "background" and plan.view.over_watermark():
            await self._compress(call, plan.view, plan.counter)
        overrun = self._overrun.pop(call.trace_id, None)
        if overrun is not None:
            await overrun

    def covers(self, newer: Prepared, older: Prepared) -> bool:
        """Whether ``newer``'s conversation continues ``older``'s: the same messages up to the older's
        last (a retry of the same conversation too). Its record then indexes, extracts and compresses
        all the older's would; the older's answer is there if the client kept it."""
        if newer.plan is None or older.plan is None:
            return False
        new, old = newer.plan.view.chain, older.plan.view.chain
        return bool(old) and len(new) >= len(old) and new[len(old) - 1] == old[-1]

    async def _index(self, call: ChatCall, turns: list[tuple[int, str, str]], *, unseen: bool = False) -> None:
        pii = call.tenant.settings.memory.pii
        await self.index.index(
            call.tenant.id, call.user, call.session, turns, pii, created=call.received_at, unseen=unseen
        )

    def _generation(self, call: ChatCall) -> int | None:
        """The store's generation of the user's fragments as the search last read it (None: not read)."""
        scope = self.index.cached(call.tenant.id, call.user)
        return scope.generation if scope is not None and scope.generation >= 0 else None

    async def _extract(
        self, call: ChatCall, view: View, *, force: bool, answer: str | None = None, turns: list[Turn] | None = None
    ) -> None:
        """Mine the session's messages not mined yet: on cadence, or at once (on compression).

        A client that lets the provider hold the conversation never resends a
        turn, so its turns (and the answer) are mined after each request.
        """
        if self.extractor is None or not call.tenant.settings.memory.enabled:
            return
        mem = call.tenant.settings.memory
        held = call.provider_state is not None
        found = await turns_from(view, 0) if turns is None else turns
        tenant, user, session, complete = call.tenant.id, call.user, call.session, self.complete(call, masked=True)
        quiet = None if force or held else self.quiet
        if quiet is not None:  # the user's other chats first: their last words were said before these
            await quiet.flush(tenant, user, besides=session)
        length = call.offset + len(view.conv)
        await self.extractor.catch_up(
            tenant, user, session, _at(call, found, len(view.conv), answer if held else None),
            length + held, complete,
            every=1 if force or held else mem.extract_every_messages, pii=mem.pii, dedup_cosine=mem.dedup_cosine,
            per_session=mem.scope == "session",
        )
        if quiet is None:
            return
        extractor, last = self.extractor, _at(call, found, len(view.conv), answer)[-MODEL_CATCH_UP:]

        async def when_quiet() -> None:  # what waits, the answer included: the chat's last message
            await extractor.catch_up(tenant, user, session, last, length + bool(answer), complete,
                                     every=1, pii=mem.pii, dedup_cosine=mem.dedup_cosine,
                                     per_session=mem.scope == "session")

        quiet.arm((tenant, user, session), mem.extract_quiet_s, when_quiet)

    async def _compress(self, call: ChatCall, view: View, counter: TokenCounter) -> View:
        compressor = Compressor(self.prompts, self.complete(call), self.counter(None))

        async def on_summary(start: int, end: int) -> None:
            await self._extract(call, view, force=True)

        return await self.context.compress(
            call.tenant.id, call.user, call.session, view, compressor, counter, on_summary
        )

    async def aclose(self) -> None:
        """Cancel what waits to be extracted and drain what runs (at shutdown)."""
        if self.quiet is not None:
            await self.quiet.close()

    def complete(self, call: ChatCall, *, masked: bool = False) -> Complete:
        """The compression model's call for this tenant, what it is sent redacted by ``memory.pii``.

        ``masked``: the prompts it will be sent are made of text already redacted (the extractor
        masks the turns it mines; stored items are masked): redacting them again changes nothing.
        """
        st = call.tenant.settings
        send = self.complete_for(st, call.tenant.compression_key)
        if st.memory.pii == "keep" or masked:
            return send

        async def complete(
            messages: list[dict[str, Any]], /, *, response_format: dict[str, Any] | None = None
        ) -> str:
            size = sum(map(text_size, messages))
            masked = await off_loop(size, _redacted, messages, st.memory.pii)
            return await send(masked, response_format=response_format)

        return complete

    async def _save_trace(self, call: ChatCall, prepared: Prepared, plan: Plan) -> None:
        size = len(plan.recall.query) if plan.recall is not None else 0
        data = await off_loop(size, _trace_of, call, prepared, plan, self.trace_candidates)
        await self.traces.save(call.tenant.id, call.user, call.session, call.trace_id, data)


def _trace_of(call: ChatCall, prepared: Prepared, plan: Plan, keep: int) -> dict[str, Any]:
    """What one request forwarded and why, as ``GET /paperclip/v1/traces/{trace}`` shows it."""
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
        "candidates": [candidate(h) for h in _traced(recall, keep)] if recall else [],
        "injected": [c.id for c in recall.cards] if recall else [],
        "memory_block": recall.block if recall else None,
    }
    if call.provider_state is not None:
        data["compression"] = f"off: the provider holds the conversation ({call.provider_state})"
    return data


def _traced(recall: Recall, keep: int) -> list[Hit]:
    """The hits a trace keeps: the first ``keep`` (``traces.candidates``) ranked, and every one injected."""
    injected = {i for card in recall.cards for i in card.hit_ids}
    return [h for rank, h in enumerate(recall.hits) if rank < keep or h.id in injected]


def _redacted(messages: list[dict[str, Any]], pii: str) -> list[dict[str, Any]]:
    return [redact_message(m, pii) for m in messages]


def _at(call: ChatCall, turns: list[Turn], length: int, answer: str | None) -> list[Turn]:
    """``turns`` (of a conversation of ``length`` messages) at their session positions, the answer last if any."""
    out = [(call.offset + p, role, text) for p, role, text in turns] if call.offset else list(turns)
    if answer:
        out.append((call.offset + length, "assistant", answer))
    return out

