from __future__ import annotations

from tests.conftest import PROXY_KEY, UPSTREAM_KEY, Proxy
from tests.fake_upstream import FakeUpstream


def test_chat_roundtrip_sync(proxy: Proxy, upstream: FakeUpstream) -> None:
    client = proxy.client()
    raw = client.chat.completions.with_raw_response.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}]
    )
    reply = raw.parse()
    assert reply.choices[0].message.content == "Hello from upstream"
    assert raw.headers["x-paperclip-tokens-in"] == raw.headers["x-paperclip-tokens-forwarded"]
    assert raw.headers["x-request-id"] == "req_fake_123"
    seen = upstream.chat_requests()[-1]
    assert seen.headers["authorization"] == f"Bearer {UPSTREAM_KEY}"
    assert PROXY_KEY not in str(seen.headers)


def test_stream_roundtrip(proxy: Proxy, upstream: FakeUpstream) -> None:
    client = proxy.client()
    stream = client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}], stream=True
    )
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert text == "Hello from upstream"


def test_models_passthrough(proxy: Proxy, upstream: FakeUpstream) -> None:
    models = proxy.client().models.list()
    assert [m.id for m in models] == ["gpt-4o-mini"]


def test_upstream_date_and_server_headers_are_not_duplicated(proxy: Proxy, upstream: FakeUpstream) -> None:
    with proxy.client() as client:
        raw = client.chat.completions.with_raw_response.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}]
        )
    assert len(raw.headers.get_list("date")) == 1
    assert raw.headers.get_list("server") == ["uvicorn"]  # the fake upstream's, passed through
