"""The memory layer as one collaborator: there (loaded) or not, never half.

The runtime holds it once loaded (``server/runtime.py``); the admin API,
maintenance and the chat path all reach the store, the searches and the
embedder through it, on the one event loop.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..context.watermark import WatermarkWindow
from ..memory.extraction.extractor import Extractor
from ..memory.extraction.meaning import MeaningReader
from ..memory.recall.rerank import Reranker
from ..memory.search.embedder import BUNDLED_NAME, Embedder
from ..memory.search.fragment_index import FragmentIndex
from ..memory.search.item_index import ItemIndex
from ..metrics import Metrics
from ..prompts import Prompts
from ..store import Store
from ..tokens import TokenCounter
from .memory_pipeline import MemoryPipeline
from .pipeline_protocol import CompleteFor
from .quiet_extraction import QuietExtraction


@dataclass(frozen=True)
class MemoryLayer:
    """``store`` waits for the database (the admin API, maintenance); ``bounded`` is the same store whose
    calls give up after ``storage.timeout_s``: the request path's (the pipeline, its indexes, the extractor)."""

    store: Store
    embedder: Embedder
    fragments: FragmentIndex
    items: ItemIndex
    pipeline: MemoryPipeline
    bounded: Store

    def forget_scope(self, tenant: str, user: str) -> None:
        """Drop the user's in-memory search state (after their rows are deleted)."""
        self.fragments.forget_scope(tenant, user)
        self.items.forget_scope(tenant, user)
        self.pipeline.recorded.forget_user(tenant, user)

    def close(self) -> None:
        """SQLite only (the eval's harness); ``aclose`` closes either store."""
        if self.pipeline.quiet is not None:
            self.pipeline.quiet.cancel()
        self.store.close()

    async def aclose(self) -> None:
        await self.pipeline.aclose()
        await self.store.aclose()


def assemble(
    store: Store,
    embedder: Embedder,
    prompts: Prompts,
    metrics: Metrics,
    complete_for: CompleteFor,
    rerankers: Mapping[str, Reranker] | None = None,
    *,
    trace_candidates: int,
    store_timeout_s: float = 2.0,
) -> MemoryLayer:
    """Wire the memory layer over an opened store and a loaded embedder (no I/O here)."""
    calls = store.bounded(store_timeout_s)
    fragments = FragmentIndex(calls.fragments, embedder, TokenCounter(None))
    items = ItemIndex(calls.items)
    pipeline = MemoryPipeline(
        context=WatermarkWindow(calls.sessions, metrics),
        index=fragments,
        items=items,
        traces=calls.traces,
        prompts=prompts,
        complete_for=complete_for,
        extractor=Extractor(
            calls.items, calls.cursors, prompts, fragments.embed, metrics, calls.fragments,
            # Its thresholds are set in the bundled model's space: another model's sentences go to the rules alone.
            meaning=MeaningReader(fragments.embed) if embedder.name == BUNDLED_NAME else None,
        ),
        responses=calls.responses,
        rerankers=rerankers,
        trace_candidates=trace_candidates,
        quiet=QuietExtraction(on_error=lambda stage: metrics.background_errors.labels(stage).inc()),
    )
    return MemoryLayer(store, embedder, fragments, items, pipeline, calls)
