"""The seam between the HTTP edge and the memory layers.

The chat handler only knows this interface: ``prepare`` turns the client's
messages into the messages to forward (or ``None``: forward the original
bytes), ``record`` runs after the response. Anything ``prepare`` raises is
turned into a degraded pass-through by the handler, never a failed request.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

from ..config import TenantSettings
from ..context.watermark import View
from ..memory.extraction.extractor import Complete
from ..memory.recall.recall import Recall
from ..tokens import TokenCounter
from .chat_call import ChatCall, Reply

# The compression model's call for a tenant (given the client's upstream key):
# built by the edge from its HTTP clients, handed to the memory pipeline.
CompleteFor = Callable[[TenantSettings, str | None], Complete]


@dataclass(frozen=True)
class Plan:
    """What ``prepare`` saw and chose, kept for ``record``."""

    view: View
    recall: Recall | None
    counter: TokenCounter


@dataclass
class Prepared:
    messages: list[dict[str, Any]] | None  # None: the client's messages go out unchanged
    tokens_in: int
    tokens_forwarded: int
    memories: int = 0
    degraded: str | None = None
    plan: Plan | None = None  # None: nothing to record


class Pipeline(Protocol):
    async def catch_up(self, call: ChatCall) -> None:
        """Before ``prepare``, outside any bound on requests preparing at once: what the user said last in
        their other chats, recorded and extracted, within ``memory.extract_wait_s`` (``catch_up``)."""

    async def prepare(self, call: ChatCall) -> Prepared: ...

    def due(self, call: ChatCall) -> AbstractContextManager[None]:
        """While a record of ``call``'s turn is due, waiting for its turn or running: a request of the same
        user in another chat waits for it to catch up (``catch_up``)."""
        ...

    async def record(self, call: ChatCall, prepared: Prepared, reply: Reply, *, covered: bool = False) -> None:
        """After the response. ``covered``: a newer request of the session, which resends all of
        this one (``covers``), records its conversation; keep only what is this request's own."""

    def covers(self, newer: Prepared, older: Prepared) -> bool:
        """Whether recording ``newer`` records all that recording ``older`` would (a record that waits
        may then give way to it: ``BoundedPipeline``)."""
