"""The memory layer as one collaborator: there (loaded) or not, never half.

The app holds ``MemoryLayer | None``; the admin API, maintenance and the
chat path all reach the store, the searches and the embedder through it.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..context.watermark import WatermarkWindow
from ..memory.extraction.extractor import Extractor
from ..memory.recall.rerank import Reranker
from ..memory.search.embedder import Embedder
from ..memory.search.fragment_index import FragmentIndex
from ..memory.search.item_index import ItemIndex
from ..metrics import Metrics
from ..prompts import Prompts
from ..store import Store
from ..store.sqlite.sqlite_database import Database
from ..tokens import TokenCounter
from .memory_pipeline import MemoryPipeline
from .pipeline_protocol import CompleteFor, Pipeline
from .pipeline_thread import PipelineThread, ThreadedPipeline, home_calls

T = TypeVar("T")


@dataclass(frozen=True)
class MemoryLayer:
    store: Store
    embedder: Embedder
    fragments: FragmentIndex
    items: ItemIndex
    pipeline: MemoryPipeline
    # The admin API's own item index, searched on the server's loop while the chat path's
    # ``items`` lives on the pipeline's thread (items are few: a second copy is cheap).
    admin_items: ItemIndex | None = None
    # The pipeline's own thread, once ``serve`` started it: the in-memory search state is its.
    threads: list[PipelineThread] = field(default_factory=list)

    def serve(self) -> Pipeline:
        """The pipeline the server runs: on a thread of its own over SQLite (``pipeline_thread.py``).

        A PostgreSQL pool belongs to the server's loop: over it the pipeline
        runs there. Call from the server's loop (its HTTP clients live there).
        """
        if not isinstance(self.store.db, Database):
            return self.pipeline
        # Two busy threads now: the GIL goes to a waiting thread after 1 ms (not 5), so
        # the server's loop waits at most that for the pipeline's (process-wide).
        sys.setswitchinterval(0.001)
        thread = PipelineThread()
        self.threads.append(thread)
        if thread.ident is not None:  # the store's calls from there need no thread of their own
            self.store.db.serve_inline(thread.ident)
        self.pipeline.complete_for = home_calls(self.pipeline.complete_for, asyncio.get_running_loop())
        return ThreadedPipeline(self.pipeline, thread)

    @property
    def searched_items(self) -> ItemIndex:
        """The item index the server's loop may search (the admin API)."""
        return self.admin_items if self.threads and self.admin_items is not None else self.items

    async def run(self, work: Coroutine[Any, Any, T]) -> T:
        """Run ``work`` where the in-memory search state lives: the pipeline's thread, if it has one."""
        return await self.threads[0].run(work) if self.threads else await work

    def forget_scope(self, tenant: str, user: str) -> None:
        """Drop the user's in-memory search state (after their rows are deleted)."""
        if self.admin_items is not None:
            self.admin_items.forget_scope(tenant, user)
        if self.threads:  # on the thread that searches it, never beside a search
            self.threads[0].call_soon(self._forget_scope, tenant, user)
        else:
            self._forget_scope(tenant, user)

    def _forget_scope(self, tenant: str, user: str) -> None:
        self.fragments.forget_scope(tenant, user)
        self.items.forget_scope(tenant, user)

    def close(self) -> None:
        """SQLite only (the eval's harness); ``aclose`` closes either store."""
        self._stop_threads()
        self.store.close()

    async def aclose(self) -> None:
        await asyncio.to_thread(self._stop_threads)
        await self.store.aclose()

    def _stop_threads(self) -> None:
        while self.threads:
            self.threads.pop().close()


def assemble(
    store: Store,
    embedder: Embedder,
    prompts: Prompts,
    metrics: Metrics,
    complete_for: CompleteFor,
    rerankers: Mapping[str, Reranker] | None = None,
    *,
    trace_candidates: int,
) -> MemoryLayer:
    """Wire the memory layer over an opened store and a loaded embedder (no I/O here)."""
    fragments = FragmentIndex(store.fragments, embedder, TokenCounter(None))
    items = ItemIndex(store.items)
    pipeline = MemoryPipeline(
        context=WatermarkWindow(store.sessions, metrics),
        index=fragments,
        items=items,
        traces=store.traces,
        prompts=prompts,
        complete_for=complete_for,
        extractor=Extractor(store.items, store.cursors, prompts, fragments.embed, metrics, store.fragments),
        responses=store.responses,
        rerankers=rerankers,
        trace_candidates=trace_candidates,
    )
    return MemoryLayer(store, embedder, fragments, items, pipeline, admin_items=ItemIndex(store.items))
