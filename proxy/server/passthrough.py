"""Every other ``/v1/*`` path: method, path, query, headers and body passed through as they are.

Request bodies (multipart uploads, audio) are streamed upstream without being
parsed or buffered; responses are relayed chunk by chunk.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import httpx
from starlette.types import Receive, Scope

from ..errors import ClientGone
from ..tenancy import client_key
from ..upstream.headers import header_map, join_url, request_headers
from .accounting import Finished
from .endpoint import Endpoint, Forward
from .relay import Exchange


class PassthroughEndpoint(Endpoint):
    route = "passthrough"

    async def forward(self, scope: Scope, receive: Receive, done: Finished) -> Forward:
        headers = header_map(scope["headers"])
        done.extra["path"] = scope["path"]
        tenant = done.tenant = self.rt.keys.tenant_for(client_key(headers))
        body_done = anyio.Event()
        pairs = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"]]
        out_headers = request_headers(pairs, tenant, ours=self.rt.keys.is_ours)
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
        return Forward(Exchange(client=self.rt.upstreams.client(up), request=request, body_done=body_done))


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
