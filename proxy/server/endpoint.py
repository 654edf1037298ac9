"""What the chat and pass-through endpoints share: one upstream exchange, timed, counted, errors rendered once
(in the shape of the path's API)."""

from __future__ import annotations

import abc
import time
from collections.abc import Callable
from dataclasses import dataclass

from starlette.types import Receive, Scope, Send

from ..errors import OPENAI_ERRORS, ClientGone, ErrorShape, PaperclipError
from .accounting import Finished
from .relay import Exchange, Outcome, run, send_error
from .runtime import Runtime


@dataclass
class Forward:
    """The exchange to run, and what to do with its outcome once the client has its response."""

    exchange: Exchange
    after: Callable[[Outcome], None] | None = None


class Endpoint(abc.ABC):
    """An ASGI endpoint relaying one upstream exchange; ``route`` labels its metrics."""

    route: str
    errors: ErrorShape = OPENAI_ERRORS  # how this path's clients read Paperclip's own errors

    def __init__(self, runtime: Runtime) -> None:
        self.rt = runtime

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = time.perf_counter()
        done = Finished(self.route, "error", started)
        try:
            forward = await self.forward(scope, receive, done)
            done.added_s = time.perf_counter() - started
            self.rt.metrics.added_latency.labels(self.route).observe(done.added_s)
            outcome = await run(forward.exchange, receive, send)
            done.upstream_s = time.perf_counter() - started - done.added_s
            if not outcome.content_encoding:
                done.tail = outcome.tail  # where the upstream reports its usage
            done.status = status_label(outcome)
            if forward.after is not None:
                forward.after(outcome)
        except ClientGone:
            done.status = "client_gone"
        except PaperclipError as exc:
            done.status = str(exc.status)
            await send_error(send, exc, shape=self.error_shape(scope))
        finally:
            self.rt.metrics.requests.labels(self.route, done.status).inc()
            self.rt.accounting.finish(done)  # the log line, usage and labelled metrics; never raises

    def error_shape(self, scope: Scope) -> ErrorShape:
        """The shape of Paperclip's own errors on this request: the API its client speaks."""
        return self.errors

    @abc.abstractmethod
    async def forward(self, scope: Scope, receive: Receive, done: Finished) -> Forward:
        """Read the request (raising a ``PaperclipError`` for a bad one) and build the exchange;
        note in ``done`` what the request's log line and usage need."""


def status_label(outcome: Outcome) -> str:
    return str(outcome.status or (outcome.error.status if outcome.error else "client_gone"))
