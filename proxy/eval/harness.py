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
from ..pipeline.anthropic_messages import as_messages, rebuild
from ..pipeline.chat_call import Api, ChatCall, Reply
from ..pipeline.memory_layer import MemoryLayer
from ..pipeline.memory_pipeline import MemoryPipeline
from ..pipeline.pipeline_protocol import Prepared
from ..pipeline.shaped_body import ShapedBody
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
    api: Api = "chat"  # chat, or messages: each request sent as an Anthropic Messages body
    clock: ClockName = "dated"
    model: ModelName = "rules"  # the compression model's stand-in
    together: bool = False  # the conversations replayed at once, interleaved (``replay.replay_together``)


class Harness:
    """The pipeline, its tenant variants and the fake model, over one temporary database."""

    def __init__(
        self, memory: MemoryLayer, runtime: Runtime, fake: FakeCompressionModel, api: Api = "chat"
    ) -> None:
        self.memory = memory
        self.api = api
        self._shapes: dict[str, ShapedBody] = {}  # a Messages call's body as read, by trace
        self.pipeline: MemoryPipeline = memory.pipeline
        self.runtime = runtime
        self.fake = fake
        base = runtime.settings.defaults
        self.tenant = Tenant(TENANT, base, "sk-eval", passthrough=False)

    def variant(self, v: Variant) -> Tenant:
        if v.vector_weight is None or v.bm25_weight is None:
            return self.tenant
        mem = self.tenant.settings.memory.model_copy(
            update={"vector_weight": v.vector_weight, "bm25_weight": v.bm25_weight}
        )
        return dataclasses.replace(self.tenant, settings=self.tenant.settings.model_copy(update={"memory": mem}))

    def call(self, tenant: Tenant, user: str, messages: list[dict[str, Any]], at: float) -> ChatCall:
        """The request a client sends with ``messages``: a chat completion, or the same turns as
        a Messages body read the way ``POST /v1/messages`` reads it."""
        body: dict[str, Any] = {"model": MODEL, "messages": messages}
        trace = f"t-eval-{time.monotonic_ns()}"
        if self.api == "messages":
            body = messages_body(messages)
            shape = as_messages(body)
            assert shape is not None
            self._shapes[trace] = shape
            messages = shape.messages
        return ChatCall(
            tenant=tenant,
            user=user,
            session=resolve_session({}, tenant.id, user, messages),
            trace_id=trace,
            body=body,
            messages=messages,
            model=MODEL,
            headers={},
            received_at=at,
            api=self.api,
        )

    def forwarded(self, call: ChatCall, prepared: Prepared) -> list[dict[str, Any]]:
        """What the upstream gets for ``call``, as a list of messages to score (a Messages body's
        ``system`` first); the call's body as read is let go."""
        shape = self._shapes.pop(call.trace_id, None)
        if shape is None:
            return prepared.messages if prepared.messages is not None else call.messages
        body = rebuild(call.body, shape, prepared.messages) if prepared.messages is not None else call.body
        system = body.get("system")
        return [*([{"role": "system", "content": system}] if system else []), *body["messages"]]

    async def send(
        self, user: str, messages: list[dict[str, Any]], at: float, reply: str | None
    ) -> tuple[int, int]:
        """One request of the replayed client: prepare, then record with ``reply`` as the response.

        Returns the tokens the client sent and the tokens forwarded.
        """
        call = self.call(self.tenant, user, messages, at)
        await self.pipeline.catch_up(call)  # as serving does (``BoundedPipeline.prepare``)
        prepared = await self.pipeline.prepare(call)
        self._shapes.pop(call.trace_id, None)
        answer = (anthropic_message if self.api == "messages" else completion)(reply, MODEL) if reply else None
        body = json.dumps(answer).encode() if answer else b""
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
    return Harness(runtime.memory.layer, runtime, fake, options.api)


def messages_body(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """Chat turns as an Anthropic Messages body: system messages in ``system``, each turn's text a block."""
    system = [str(m["content"]) for m in messages if m["role"] == "system"]
    turns = [{"role": m["role"], "content": [{"type": "text", "text": m["content"]}]}
             for m in messages if m["role"] != "system"]
    return {"model": MODEL, "max_tokens": 1024, **({"system": "\n\n".join(system)} if system else {}),
            "messages": turns}


def anthropic_message(text: str, model: str) -> dict[str, Any]:
    return {"id": "msg_eval", "type": "message", "role": "assistant", "model": model,
            "content": [{"type": "text", "text": text}], "stop_reason": "end_turn"}


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
