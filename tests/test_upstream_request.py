"""The upstream request of an in-memory body is the one ``httpx.Request(..., content=body)`` builds."""

from __future__ import annotations

import httpx
import pytest

from proxy.upstream.request import body_request


@pytest.mark.parametrize("url", ["http://127.0.0.1:9100/v1/chat/completions", "https://api.example.com/v1/messages?x=1",
                                 "https://res.example.com:8443/openai/deployments/d/chat/completions?api-version=2024"])
@pytest.mark.parametrize("body", [b"", b'{"model":"m","messages":[]}', "é".encode() * 40_000])
def test_the_request_is_httpx_own(url: str, body: bytes) -> None:
    headers = [("Accept", "*/*"), ("content-type", "application/json"), ("x-repeated", "1"), ("x-repeated", "2"),
               ("authorization", "Bearer up-key"), ("content-length", str(len(body)))]
    want = httpx.Request("POST", httpx.URL(url), headers=headers, content=body)
    got = body_request("POST", httpx.URL(url), headers, body)
    assert got.headers.raw == want.headers.raw
    assert (got.method, got.url, got.extensions, got.content) == (want.method, want.url, want.extensions, want.content)
    assert type(got.stream) is type(want.stream) is httpx.ByteStream
    assert b"".join(got.stream) == body
