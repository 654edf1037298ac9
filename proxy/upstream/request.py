"""An upstream request whose body is in memory, built for what it costs on every request.

``httpx.Request(method, url, headers=..., content=body)`` normalises the
headers twice (once as given, again with its ``Host`` put first), and looks
up the content headers it might add by scanning them. The request built here
is the one it builds for a body whose ``Content-Length`` the caller sent:
``Host`` (the URL's netloc) first, the given headers after it in their order,
the body read.
"""

from __future__ import annotations

import httpx


def body_request(method: str, url: httpx.URL, headers: list[tuple[str, str]], body: bytes) -> httpx.Request:
    """``httpx.Request(method, url, headers=headers, content=body)`` for ``headers`` holding its
    ``content-length`` and no ``host``: the same request (headers, their order, stream), read."""
    head = [("Host", url.netloc.decode("ascii")), *headers] if url.host else headers
    request = httpx.Request(method, url, headers=head, stream=httpx.ByteStream(body))
    request.read()
    return request
