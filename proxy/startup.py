"""Opening the memory layer: database, embedding model, prompts — off the event loop."""

from __future__ import annotations

import asyncio
import logging

from .compression_client import compression_calls
from .memory import bm25
from .memory.embedder import Embedder, load_embedder
from .pipeline.layer import assemble
from .prompts import Prompts
from .readiness import take_memory_offline, watch_database
from .runtime import Runtime
from .store import open_store
from .tokens import encoding_for

log = logging.getLogger("paperclip.startup")


async def start_memory(runtime: Runtime, embedder: Embedder | None = None) -> None:
    """Load the memory layer and let it join; on failure the proxy goes on as a plain proxy."""
    settings = runtime.settings
    try:
        prompts = Prompts.load()
        if embedder is None:
            embedder = await asyncio.to_thread(
                load_embedder,
                settings.embedding_model,
                backend=settings.embedding_backend,
                cache_dir=settings.embedding_cache_dir,
            )
        await asyncio.to_thread(_warm_up)
        store = await asyncio.to_thread(open_store, settings.sqlite_path, embedder.dim)
    except Exception as exc:
        log.exception("the memory layer could not start; serving as a plain proxy")
        take_memory_offline(runtime, f"the memory layer could not start: {exc}")
        return
    runtime.join(assemble(store, embedder, prompts, runtime.metrics, compression_calls(runtime.upstreams)))
    log.info("memory layer ready (embedding %s, dim %d)", settings.embedding_model, embedder.dim)


async def serve_memory(runtime: Runtime, embedder: Embedder | None = None) -> None:
    """Open the memory layer, then watch its database until shutdown (the app's lifespan task)."""
    await start_memory(runtime, embedder)
    if runtime.memory is not None and runtime.problem is None:
        await watch_database(runtime, runtime.settings.sqlite_path)


def _warm_up() -> None:
    encoding_for(None)
    bm25.warm_up()
