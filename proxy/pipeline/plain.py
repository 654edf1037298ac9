"""The pipeline without memory: counting only."""

from __future__ import annotations

from ..tokens import Counters
from .chat_call import ChatCall, Reply
from .pipeline_protocol import Prepared


class CountingPipeline:
    """Forwards everything unchanged and counts tokens: the proxy without memory."""

    def __init__(self) -> None:
        self.counter = Counters()

    async def prepare(self, call: ChatCall) -> Prepared:
        n = self.counter(call.model).total(call.messages)
        return Prepared(messages=None, tokens_in=n, tokens_forwarded=n)

    async def record(self, call: ChatCall, prepared: Prepared, reply: Reply) -> None:
        return None

