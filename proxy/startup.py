"""Opening the memory layer: database, embedding model, prompts — off the event loop."""

from __future__ import annotations

import asyncio
import logging

from .context.watermark import WatermarkWindow
from .engine import MemoryPipeline
from .errors import MemoryNotReady
from .memory import bm25
from .memory.embedder import Embedder, load_embedder
from .memory.extractor import Extractor
from .memory.fragment_search import FragmentIndex
from .memory.item_search import ItemIndex
from .pipeline import ChatCall, Prepared
from .prompts import Prompts
from .relay import Outcome
from .services import Services
from .store import open_store
from .tokens import TokenCounter, encoding_for

log = logging.getLogger("paperclip.startup")


class StartingPipeline:
    """Stands in until the memory layer is loaded: every request degrades to plain forwarding."""

    async def prepare(self, call: ChatCall) -> Prepared:
        raise MemoryNotReady("The memory layer is still loading.")

    async def record(self, call: ChatCall, prepared: Prepared, outcome: Outcome) -> None:
        return None


async def start_memory(services: Services, embedder: Embedder | None = None) -> None:
    settings = services.settings
    try:
        prompts = Prompts.load()
        if embedder is None:
            embedder = await asyncio.to_thread(load_embedder, settings.embedding_model)
        services.embedder = embedder
        await asyncio.to_thread(_warm_up)
        store = await asyncio.to_thread(open_store, settings.sqlite_path, embedder.dim)
        services.store = store
    except Exception:
        log.exception("the memory layer could not start; serving as a plain proxy")
        services.ready["memory_error"] = False
        return
    counter = TokenCounter(None)
    index = FragmentIndex(store.fragments, embedder, counter)
    services.pipeline = MemoryPipeline(
        context=WatermarkWindow(store.sessions, services.metrics),
        index=index,
        items=ItemIndex(store.items),
        traces=store.traces,
        prompts=prompts,
        upstreams=services.upstreams,
        metrics=services.metrics,
        extractor=Extractor(store.items, store.fragments, prompts, index.embed, services.metrics),
    )
    # Ready only once requests can use it: /readyz turns 200 here.
    services.ready.update(database=True, embedding=True)
    log.info("memory layer ready (embedding %s, dim %d)", settings.embedding_model, embedder.dim)


def _warm_up() -> None:
    encoding_for(None)
    bm25.warm_up()

