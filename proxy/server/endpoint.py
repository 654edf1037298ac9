"""What the chat and pass-through endpoints share: one upstream exchange, timed, counted, errors rendered once
(in the shape of the path's API)."""

from __future__ import annotations

import abc
import time

from starlette.types import Receive, Scope, Send

from ..errors import OPENAI_ERRORS, ClientGone, ErrorShape, PaperclipError
from .accounting import Finished
from .relay import Exchange, Outcome, run, send_error
from .runtime import Runtime


class Endpoint(abc.ABC):
    """An ASGI endpoint relaying one upstream exchange; ``route`` labels its metrics.

    ``serve`` is the request's walk; ``relay`` runs its exchange. Our own
    errors (a ``PaperclipError`` raised anywhere in the walk before the
    response started) are answered here, once, in OpenAI's envelope.
    """

    route: str
    errors: ErrorShape = OPENAI_ERRORS  # how this path's clients read Paperclip's own errors

    def __init__(self, runtime: Runtime) -> None:
        self.rt = runtime

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        done = Finished(self.route, "error", time.perf_counter())
        try:
            await self.serve(scope, receive, send, done)
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
    async def serve(self, scope: Scope, receive: Receive, send: Send, done: Finished) -> None:
        """Read the request (raising a ``PaperclipError`` for a bad one), relay it, and do what follows;
        note in ``done`` what the request's log line and usage need."""

    async def relay(self, exchange: Exchange, receive: Receive, send: Send, done: Finished) -> Outcome:
        """Run ``exchange``: what the proxy added before it, and what the upstream took, are timed."""
        done.added_s = time.perf_counter() - done.started
        self.rt.metrics.added_latency.labels(self.route).observe(done.added_s)
        outcome = await run(exchange, receive, send)
        done.upstream_s = time.perf_counter() - done.started - done.added_s
        if not outcome.content_encoding:
            done.tail, done.head = outcome.tail, outcome.head  # where the upstream reports its usage
        done.status = status_label(outcome)
        return outcome


def status_label(outcome: Outcome) -> str:
    return str(outcome.status or (outcome.error.status if outcome.error else "client_gone"))
