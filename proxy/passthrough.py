"""Every other ``/v1/*`` path: method, path, query, headers and body passed through as they are.

Request bodies (multipart uploads, audio) are streamed upstream without being
parsed or buffered; responses are relayed chunk by chunk.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import anyio
import httpx
from starlette.types import Receive, Scope, Send

from .accounting import Finished
from .errors import PaperclipError
from .relay import ClientGone, Exchange, run, send_error
from .services import Services
from .tenancy import client_key
from .upstream import header_map, join_url, request_headers


class PassthroughEndpoint:
    def __init__(self, services: Services) -> None:
        self.s = services

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = time.perf_counter()
        done = Finished("passthrough", "error", started, extra={"path": scope["path"]})
        try:
            done.status = await self._serve(scope, receive, send, done)
        except ClientGone:
            done.status = "client_gone"
        except PaperclipError as exc:
            done.status = str(exc.status)
            await send_error(send, exc)
        finally:
            self.s.metrics.requests.labels("passthrough", done.status).inc()
            self.s.accounting.finish(done)

    async def _serve(self, scope: Scope, receive: Receive, send: Send, done: Finished) -> str:
        started = done.started
        headers = header_map(scope["headers"])
        tenant = done.tenant = self.s.keys.tenant_for(client_key(headers))
        body_done = anyio.Event()
        pairs = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"]]
        out_headers = request_headers(pairs, tenant)
        has_body = "content-length" in headers or "transfer-encoding" in headers
        if "content-length" in headers:
            out_headers.append(("content-length", headers["content-length"]))
        content: AsyncIterator[bytes] | bytes
        if has_body and headers.get("content-length") != "0":
            content = _stream_body(receive, body_done)
        else:
            await _drain(receive)
            body_done.set()
            content = b""
        up = tenant.settings.upstream
        request = httpx.Request(
            scope["method"],
            join_url(up.base_url, scope["path"], scope.get("query_string", b"")),
            headers=out_headers,
            content=content,
        )
        ex = Exchange(client=self.s.upstreams.client(up), request=request, body_done=body_done)
        done.added_s = time.perf_counter() - started
        self.s.metrics.added_latency.labels("passthrough").observe(done.added_s)
        outcome = await run(ex, receive, send)
        done.upstream_s = time.perf_counter() - started - done.added_s
        return str(outcome.status or (outcome.error.status if outcome.error else "client_gone"))


async def _stream_body(receive: Receive, done: anyio.Event) -> AsyncIterator[bytes]:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone()
        chunk = message.get("body", b"")
        if chunk:
            yield chunk
        if not message.get("more_body", False):
            done.set()
            return


async def _drain(receive: Receive) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone()
        if not message.get("more_body", False):
            return
