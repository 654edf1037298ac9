"""Every other ``/v1/*`` path: method, path, query, headers and body passed through as they are.

Request bodies (multipart uploads, audio) are streamed upstream without being
parsed or buffered; responses are relayed chunk by chunk.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import httpx
from starlette.types import Receive, Scope, Send

from ..errors import ANTHROPIC_ERRORS, ClientGone, ErrorShape
from ..tenancy import client_key
from ..upstream.headers import (
    anthropic_url,
    header_map,
    join_url,
    request_headers,
    speaks_anthropic,
)
from .accounting import Finished
from .endpoint import Endpoint
from .relay import Exchange


class PassthroughEndpoint(Endpoint):
    """A request for Anthropic's API (``/v1/messages/count_tokens``, or any path sent with
    ``anthropic-version``) goes to the tenant's ``anthropic.base_url`` with its Anthropic key."""

    route = "passthrough"

    def error_shape(self, scope: Scope) -> ErrorShape:
        return ANTHROPIC_ERRORS if speaks_anthropic(scope["path"], header_map(scope["headers"])) else self.errors

    async def serve(self, scope: Scope, receive: Receive, send: Send, done: Finished) -> None:
        await self.relay(await self.read(scope, receive, done), receive, send, done)

    async def read(self, scope: Scope, receive: Receive, done: Finished) -> Exchange:
        """The exchange to relay; the body, if any, is streamed upstream as it arrives."""
        headers = header_map(scope["headers"])
        done.extra["path"] = scope["path"]
        tenant = done.tenant = self.rt.keys.tenant_for(client_key(headers))
        body_done = anyio.Event()
        pairs = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"]]
        anthropic = speaks_anthropic(scope["path"], headers)
        out_headers = request_headers(pairs, tenant, anthropic=anthropic, ours=self.rt.keys.is_ours)
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
        query = scope.get("query_string", b"")
        url = (
            anthropic_url(tenant.settings.anthropic.base_url, scope["path"], query)
            if anthropic
            else join_url(up.base_url, scope["path"], query)
        )
        request = httpx.Request(scope["method"], url, headers=out_headers, content=content)
        return Exchange(
            client=self.rt.upstreams.client(up), request=request, body_done=body_done,
            errors=ANTHROPIC_ERRORS if anthropic else self.errors, ends_at_done=True,
        )


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
