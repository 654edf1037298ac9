"""The pipeline without memory: counting only."""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext

from ..context.history_memo import HistoryMemo
from ..context.planner import split_leading
from ..tokens import REPLY_PRIMING, Counters
from .chat_call import ChatCall, Reply
from .pipeline_protocol import Prepared


class CountingPipeline:
    """Forwards everything unchanged and counts tokens: the proxy without memory.

    A session's resent messages are counted once (``HistoryMemo``): at a few
    hundred messages, counting them all again was most of what a request cost.
    """

    def __init__(self) -> None:
        self.counter = Counters()
        self.histories = HistoryMemo()

    async def catch_up(self, call: ChatCall) -> None:
        return None  # it remembers nothing

    async def prepare(self, call: ChatCall) -> Prepared:
        counter = self.counter(call.model)
        n = split_leading(call.messages)
        history = await self.histories.describe((call.tenant.id, call.session), call.messages[n:], counter, call.raw)
        tokens = sum(counter.messages(call.messages[:n])) + history.tokens + REPLY_PRIMING
        return Prepared(messages=None, tokens_in=tokens, tokens_forwarded=tokens)

    def due(self, call: ChatCall) -> AbstractContextManager[None]:
        return nullcontext()  # nothing to catch up with

    async def record(self, call: ChatCall, prepared: Prepared, reply: Reply, *, covered: bool = False) -> None:
        return None

    def covers(self, newer: Prepared, older: Prepared) -> bool:
        return False  # it records nothing

