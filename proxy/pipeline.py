"""The seam between the HTTP handler and the memory layers.

The chat handler only knows this interface: ``prepare`` turns the client's
messages into the messages to forward (or ``None``: forward the original
bytes), ``record`` runs after the response. Anything ``prepare`` raises is
turned into a degraded pass-through by the handler, never a failed request.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from .relay import Outcome
from .tenancy import Tenant
from .tokens import Counters


@dataclass
class ChatCall:
    tenant: Tenant
    user: str
    session: str
    trace_id: str
    body: dict[str, Any]
    messages: list[dict[str, Any]]
    model: str | None
    headers: Mapping[str, str]
    received_at: float = field(default_factory=time.time)


@dataclass
class Prepared:
    messages: list[dict[str, Any]] | None  # None: the client's messages go out unchanged
    tokens_in: int
    tokens_forwarded: int
    memories: int = 0
    degraded: str | None = None
    state: dict[str, Any] = field(default_factory=dict)  # for record()


class Pipeline(Protocol):
    async def prepare(self, call: ChatCall) -> Prepared: ...

    async def record(self, call: ChatCall, prepared: Prepared, outcome: Outcome) -> None: ...


class CountingPipeline:
    """Forwards everything unchanged and counts tokens: the proxy without memory."""

    def __init__(self) -> None:
        self.counter = Counters()

    async def prepare(self, call: ChatCall) -> Prepared:
        n = self.counter(call.model).total(call.messages)
        return Prepared(messages=None, tokens_in=n, tokens_forwarded=n)

    async def record(self, call: ChatCall, prepared: Prepared, outcome: Outcome) -> None:
        return None
