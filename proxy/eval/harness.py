"""The eval's harness: the serving pipeline over a temporary database, driven as a client drives the proxy.

``open_harness`` assembles the ``MemoryPipeline`` the proxy runs with
``start_memory``, over a real store on a temporary SQLite file, the
configured embedder, and a deterministic in-process compression model —
``rules``: replies that are never JSON, so the rule-based extractor stands
in; ``observations``: ``stand_in.StandIn`` answering from the replayed
conversations' own model-written facts and session summaries.
``Harness.send`` is one request of the replayed client (``prepare``, then
``record`` with the given reply). ``Options`` and the retriever ``Variant``s
say what to build and ask.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from .. import config
from ..background import Background
from ..memory.redaction import redact
from ..metrics import Metrics
from ..pipeline.chat_call import ChatCall, Reply
from ..pipeline.memory_layer import MemoryLayer
from ..pipeline.memory_pipeline import MemoryPipeline
from ..server.runtime import Ready, Runtime, build_runtime
from ..server.startup import start_memory
from ..tenancy import Tenant, resolve_session
from ..upstream.clients import Upstreams
from . import observations
from .clocks import ClockName
from .fake import FakeCompressionModel, completion
from .locomo import Conversation
from .stand_in import StandIn

Mode = Literal["sessions", "one-chat"]
ModelName = Literal["rules", "observations"]
MODELS: tuple[ModelName, ...] = ("rules", "observations")
MODEL = "gpt-4o-mini"
TENANT = "eval"


@dataclass(frozen=True)
class Variant:
    name: str
    vector_weight: float | None  # None: the configured weights
    bm25_weight: float | None


VARIANTS = (Variant("fusion", None, None), Variant("bm25", 0.0, 1.0), Variant("vector", 1.0, 0.0))


@dataclass(frozen=True)
class Options:
    mode: Mode = "sessions"
    embedder: str = "bundled"
    memory: dict[str, Any] = field(default_factory=dict)  # overrides of defaults.memory
    recent_window_tokens: int = 4000
    variants: tuple[Variant, ...] = VARIANTS
    record_questions: bool = True
    clock: ClockName = "dated"
    model: ModelName = "rules"  # the compression model's stand-in


class Harness:
    """The pipeline, its tenant variants and the fake model, over one temporary database."""

    def __init__(self, memory: MemoryLayer, runtime: Runtime, fake: FakeCompressionModel) -> None:
        self.memory = memory
        self.pipeline: MemoryPipeline = memory.pipeline
        self.runtime = runtime
        self.fake = fake
        base = runtime.settings.defaults
        self.tenant = Tenant(TENANT, base, "sk-eval", passthrough=False)

    def variant(self, v: Variant) -> Tenant:
        if v.vector_weight is None or v.bm25_weight is None:
            return self.tenant
        mem = dataclasses.replace(
            self.tenant.settings.memory, vector_weight=v.vector_weight, bm25_weight=v.bm25_weight
        )
        return dataclasses.replace(
            self.tenant, settings=dataclasses.replace(self.tenant.settings, memory=mem)
        )

    def call(self, tenant: Tenant, user: str, messages: list[dict[str, Any]], at: float) -> ChatCall:
        return ChatCall(
            tenant=tenant,
            user=user,
            session=resolve_session({}, tenant.id, user, messages),
            trace_id=f"t-eval-{time.monotonic_ns()}",
            body={"model": MODEL, "messages": messages},
            messages=messages,
            model=MODEL,
            headers={},
            received_at=at,
        )

    async def send(
        self, user: str, messages: list[dict[str, Any]], at: float, reply: str | None
    ) -> tuple[int, int]:
        """One request of the replayed client: prepare, then record with ``reply`` as the response.

        Returns the tokens the client sent and the tokens forwarded.
        """
        call = self.call(self.tenant, user, messages, at)
        prepared = await self.pipeline.prepare(call)
        body = json.dumps(completion(reply, MODEL)).encode() if reply else b""
        await self.pipeline.record(call, prepared, Reply(status=200, body=body))
        return prepared.tokens_in, prepared.tokens_forwarded

    def close(self) -> None:
        self.memory.close()


async def open_harness(options: Options, folder: Path, conversations: Sequence[Conversation] = ()) -> Harness:
    """The harness; ``conversations`` are those to be replayed (what ``observations`` answers from)."""
    settings = config.from_dict(_raw_settings(options, folder / "eval.db"), env={})
    fake = FakeCompressionModel()
    if options.model == "observations":
        pii = settings.defaults.memory.pii
        known = observations.knowledge(conversations, lambda text: redact(text, pii))
        fake = FakeCompressionModel(StandIn(known))
    runtime = build_runtime(settings, Upstreams(fake.transport()), Metrics(), Background())
    await start_memory(runtime)
    if not isinstance(runtime.memory.state, Ready) or runtime.memory.layer is None:
        raise RuntimeError("the memory layer did not start (see the log above)")
    return Harness(runtime.memory.layer, runtime, fake)


def _raw_settings(options: Options, db: Path) -> dict[str, Any]:
    return {
        "storage": {"url": f"sqlite:///{db}"},
        "embedding": {"model": options.embedder},
        "defaults": {
            # Never contacted: the fake model's transport answers every call.
            "upstream": {"base_url": "http://paperclip-eval.invalid/v1", "api_key": "sk-eval"},
            "context": {"recent_window_tokens": options.recent_window_tokens},
            "compression": {"model": "fake-compressor"},
            "memory": options.memory,
        },
    }
