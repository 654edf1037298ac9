"""A hostile or broken upstream (issue 26, SPEC §9): bombs, floods, broken framing, partial replies.

Each upstream here is a real socket writing scripted bytes
(``tests/hostile_upstream.py``); the proxy is the real one on loopback, and the
client is httpx or the OpenAI SDK, as a user's would be.
"""

from __future__ import annotations

import gzip
import json
import logging
import zlib
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from proxy.config import Upstream
from proxy.upstream.clients import Upstreams
from proxy.upstream.wire.http11 import MAX_HEAD_BYTES, MAX_HEADER_FIELDS
from tests.conftest import PROXY_KEY, Proxy, base_config
from tests.fake_upstream import chunk, completion
from tests.hostile_upstream import HostileUpstream, RawRequest, Step, chunked, head

MODEL = "gpt-4o-mini"
JSON = b"content-type: application/json"
SSE = b"content-type: text/event-stream"


@pytest.fixture
def hostile(make_proxy: Callable[..., Proxy], tmp_path: Path) -> Iterator[Callable[..., tuple[Proxy, HostileUpstream]]]:
    """A proxy in front of a scripted upstream: ``hostile(script, **config overrides)``."""
    made: list[HostileUpstream] = []

    def make(script: Callable[[RawRequest], Iterable[Step]], **overrides: Any) -> tuple[Proxy, HostileUpstream]:
        upstream = HostileUpstream(script)
        made.append(upstream)
        raw = base_config(upstream.base_url, tmp_path / "p.db", **overrides)
        return make_proxy(raw), upstream

    yield make
    for upstream in made:
        upstream.close()


def ask(user: str, text: str = "hello there", **extra: Any) -> dict[str, Any]:
    return {"model": MODEL, "messages": [{"role": "user", "content": text}], "user": user, **extra}


def said(proxy: Proxy, user: str, role: str) -> list[str]:
    """What the store kept of ``role``'s turns for ``user``, once the proxy has settled."""
    proxy.drain()
    rows = proxy.server.call(proxy.store.db.read(lambda c: c.execute(
        "SELECT text FROM fragments WHERE tenant = 'acme' AND user = ? AND role = ?", (user, role)
    ).fetchall()))
    return [r[0] for r in rows]


def assistant_texts(proxy: Proxy, user: str) -> list[str]:
    return said(proxy, user, "assistant")


def background_failures(proxy: Proxy) -> list[Any]:
    samples = proxy.runtime.metrics.background_errors.collect()[0].samples
    return [s for s in samples if s.name.endswith("_total") and s.value]


def sse_event(payload: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


# ---------------------------------------------------------------- 1. a gzip bomb


def bomb(inflated: int) -> bytes:
    """A chat completion whose content is ``inflated`` bytes of "a", gzipped (~1,000 times smaller)."""
    body = json.dumps(completion("x")).encode().replace(b'"x"', b'"' + b"a" * inflated + b'"')
    return gzip.compress(body, compresslevel=9)


def test_a_gzip_bomb_is_relayed_whole_and_not_recorded(hostile: Callable[..., tuple[Proxy, HostileUpstream]]) -> None:
    payload = bomb(20 * 1024 * 1024)  # 20 KB that inflate to 20 MB, past the default 4 MiB bound
    proxy, _ = hostile(lambda r: [head(b"200 OK", JSON, b"content-encoding: gzip",
                                       b"content-length: %d" % len(payload)), payload])
    with proxy.http() as http:
        r = http.post("/v1/chat/completions", json=ask("u-bomb"))
    assert r.status_code == 200 and r.content == gzip.decompress(payload)  # httpx decodes it, as SDKs do
    assert assistant_texts(proxy, "u-bomb") == []
    assert said(proxy, "u-bomb", "user") == ["hello there"]  # what the user said is theirs
    assert background_failures(proxy) == []


def test_a_reply_within_the_record_bound_is_recorded_and_one_past_it_is_not(
    hostile: Callable[..., tuple[Proxy, HostileUpstream]],
) -> None:
    small, large = bomb(1000), bomb(70_000)
    proxy, _ = hostile(_by_user({"u-small": small, "u-large": large}), server={"max_record_bytes": 64 * 1024})
    with proxy.http() as http:
        assert http.post("/v1/chat/completions", json=ask("u-small")).status_code == 200
        assert http.post("/v1/chat/completions", json=ask("u-large")).status_code == 200
    assert assistant_texts(proxy, "u-small") == ["a" * 1000]
    assert assistant_texts(proxy, "u-large") == []


def _by_user(bodies: dict[str, bytes]) -> Callable[[RawRequest], list[bytes]]:
    def script(request: RawRequest) -> list[bytes]:
        user = json.loads(request.body)["user"]
        body = bodies[user]
        return [head(b"200 OK", JSON, b"content-encoding: gzip", b"content-length: %d" % len(body)), body]

    return script


# ---------------------------------------------------------------- 2. counting what no tokenizer likes


def test_a_million_spaces_are_counted_not_a_500(make_proxy: Callable[..., Proxy]) -> None:
    proxy = make_proxy(passthrough_keys=True)
    with proxy.http("sk-any-made-up-key-0123456789") as http:
        r = http.post("/v1/chat/completions", json=ask("u-spaces", " " * 1_000_000 + "x"))
    assert r.status_code == 200, r.text
    assert int(r.headers["x-paperclip-tokens-in"]) > 7000


def test_a_reply_of_three_megabytes_of_spaces_is_recorded(hostile: Callable[..., tuple[Proxy, HostileUpstream]]) -> None:
    body = json.dumps(completion("start" + " " * 3_000_000 + "end")).encode()
    proxy, _ = hostile(lambda r: [head(b"200 OK", JSON, b"content-length: %d" % len(body)), body])
    with proxy.http() as http:
        assert http.post("/v1/chat/completions", json=ask("u-wide")).status_code == 200
    [text] = assistant_texts(proxy, "u-wide")
    assert text.startswith("start") and text.endswith("end")
    assert background_failures(proxy) == []


# ---------------------------------------------------------------- 4. only what the model really said


CONTENT = sse_event(chunk({"role": "assistant", "content": "The code is 4"}))
IN_BAND_ERROR = sse_event({"error": {"message": "overloaded", "type": "server_error", "param": None, "code": None}})


def test_a_stream_with_an_error_event_after_content_records_no_assistant_text(
    hostile: Callable[..., tuple[Proxy, HostileUpstream]],
) -> None:
    proxy, _ = hostile(lambda r: [head(b"200 OK", SSE, b"transfer-encoding: chunked"),
                                  *chunked(CONTENT, IN_BAND_ERROR, b"data: [DONE]\n\n")])
    with proxy.client() as client, pytest.raises(openai.APIError):
        list(client.chat.completions.create(**ask("u-inband"), stream=True))
    assert assistant_texts(proxy, "u-inband") == []


def test_a_length_less_stream_cut_mid_event_ends_with_an_error_and_records_nothing(
    hostile: Callable[..., tuple[Proxy, HostileUpstream]],
) -> None:
    # No content-length, no chunked framing: the body ends where the connection does.
    proxy, _ = hostile(lambda r: [head(b"200 OK", SSE, b"connection: close"), CONTENT, b'data: {"id": "c1", "obj'])
    with proxy.client() as client, pytest.raises(openai.APIError) as caught:
        list(client.chat.completions.create(**ask("u-eof"), stream=True))
    assert not isinstance(caught.value, openai.APIStatusError)
    assert assistant_texts(proxy, "u-eof") == []


def test_a_length_less_stream_that_ends_without_done_is_not_a_clean_end(
    hostile: Callable[..., tuple[Proxy, HostileUpstream]],
) -> None:
    proxy, _ = hostile(lambda r: [head(b"200 OK", SSE, b"connection: close"), CONTENT])
    with proxy.http() as http:
        r = http.post("/v1/chat/completions", json=ask("u-nodone", stream=True))
    events = [e for e in r.text.split("\n\n") if e.strip()]
    assert json.loads(events[-1].removeprefix("data: "))["error"]["code"] == "upstream_unreachable"
    assert assistant_texts(proxy, "u-nodone") == []


def test_a_length_less_stream_that_ends_with_done_is_whole(hostile: Callable[..., tuple[Proxy, HostileUpstream]]) -> None:
    proxy, _ = hostile(lambda r: [head(b"200 OK", SSE, b"connection: close"), CONTENT, b"data: [DONE]\n\n"])
    with proxy.client() as client:
        parts = [c.choices[0].delta.content for c in client.chat.completions.create(**ask("u-eofok"), stream=True)]
    assert parts == ["The code is 4"]
    assert assistant_texts(proxy, "u-eofok") == ["The code is 4"]


# ---------------------------------------------------------------- 5. header floods


def flood(kind: str) -> Callable[[RawRequest], Iterator[bytes]]:
    def script(request: RawRequest) -> Iterator[bytes]:
        yield b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
        if kind == "one-huge":
            yield b"x-big: " + b"a" * (1024 * 1024) + b"\r\n"
        elif kind == "many":
            yield b"".join(b"x-h%d: v\r\n" % i for i in range(100_000))
        else:  # endless: header lines until the proxy hangs up
            while True:
                yield b"x-more: " + b"b" * 1000 + b"\r\n"
        yield b"content-length: 2\r\n\r\n{}"

    return script


@pytest.mark.parametrize("kind", ["one-huge", "many", "endless"])
def test_an_upstream_header_flood_is_a_502(hostile: Callable[..., tuple[Proxy, HostileUpstream]], kind: str) -> None:
    proxy, _ = hostile(flood(kind))
    with proxy.http() as http:
        r = http.post("/v1/chat/completions", json=ask("u-flood"))
        assert r.status_code == 502 and r.json()["error"]["code"] == "upstream_unreachable"
        assert http.get("/v1/models").status_code == 502  # the pass-through path is guarded the same way
        assert http.head("/v1/models").status_code == 502  # and HEAD, which has no body to wait for


@pytest.mark.parametrize("past", ["fields", "bytes"])
def test_a_head_request_meets_the_same_bounds(hostile: Callable[..., tuple[Proxy, HostileUpstream]], past: str) -> None:
    if past == "fields":
        fields = [b"x-f%d: v" % i for i in range(MAX_HEADER_FIELDS + 50)]
    else:  # 80 fields of 900 bytes: within the count, past the bytes
        fields = [b"x-b%d: " % i + b"a" * 900 for i in range(80)]
    planted = [b"X-Paperclip-Memories: 99", b"content-length: 2"]
    proxy, _ = hostile(lambda r: [head(b"200 OK", JSON, *fields, *planted)])
    with proxy.http() as http:
        r = http.head("/v1/models")
        assert r.status_code == 502 and "x-paperclip-memories" not in r.headers
        assert http.get("/v1/models").status_code == 502


def test_a_head_request_within_the_bounds_is_relayed(hostile: Callable[..., tuple[Proxy, HostileUpstream]]) -> None:
    fields = [b"x-f%d: v" % i for i in range(MAX_HEADER_FIELDS - 3)]
    proxy, _ = hostile(lambda r: [head(b"200 OK", JSON, *fields, b"content-length: 1234")])
    with proxy.http() as http:
        r = http.head("/v1/models")
    assert (r.status_code, r.content, r.headers["content-length"], r.headers["x-f0"]) == (200, b"", "1234", "v")


def test_an_upstream_that_switches_protocols_is_a_502_and_no_crash(
    hostile: Callable[..., tuple[Proxy, HostileUpstream]], caplog: pytest.LogCaptureFixture
) -> None:
    """Paperclip never asks for an upgrade: a ``101 Switching Protocols`` answer is a broken upstream."""
    proxy, _ = hostile(lambda r: [head(b"101 Switching Protocols", b"connection: upgrade", b"upgrade: websocket")])
    with caplog.at_level(logging.ERROR), proxy.http() as http:
        r = http.post("/v1/chat/completions", json=ask("u-upgrade"))
    assert r.status_code == 502 and r.json()["error"]["type"]
    assert not [rec for rec in caplog.records if "Fatal error" in rec.getMessage()]


def test_headers_up_to_the_bounds_pass(hostile: Callable[..., tuple[Proxy, HostileUpstream]]) -> None:
    def script(request: RawRequest) -> list[bytes]:
        n = MAX_HEADER_FIELDS if b"u-fields" in request.body else 2
        fields = [b"x-f%d: v" % i for i in range(n - 2)]
        if b"u-bytes" in request.body:  # one header making the head nearly as large as it may be
            fields.append(b"x-big: " + b"a" * (MAX_HEAD_BYTES - 200))
        return [head(b"200 OK", JSON, *fields, b"content-length: 2"), b"{}"]

    proxy, _ = hostile(script)
    with proxy.http() as http:
        assert http.post("/v1/chat/completions", json=ask("u-fields")).status_code == 200
        assert http.post("/v1/chat/completions", json=ask("u-bytes")).status_code == 200


def test_one_field_past_the_bound_is_a_502(hostile: Callable[..., tuple[Proxy, HostileUpstream]]) -> None:
    fields = [b"x-f%d: v" % i for i in range(MAX_HEADER_FIELDS - 1)]
    proxy, _ = hostile(lambda r: [head(b"200 OK", JSON, *fields, b"content-length: 2"), b"{}"])
    with proxy.http() as http:
        assert http.post("/v1/chat/completions", json=ask("u-101")).status_code == 502


def interim_heads(kind: str) -> Callable[[RawRequest], Iterator[Step]]:
    """1xx heads before the real one: the bounds hold across all the heads of one response together."""
    def script(request: RawRequest) -> Iterator[Step]:
        hints = [b"link: </asset-%d.js>; rel=preload; as=script" % i for i in range(60)]
        if kind == "endless":  # each head is within the bounds; an endless run of them is not
            while True:
                yield head(b"103 Early Hints", *hints)
                yield 0.002
        elif kind == "two-of-60-fields":
            yield head(b"103 Early Hints", *hints) * 2
        else:  # two heads of 40 KB
            yield head(b"103 Early Hints", b"x-big: " + b"a" * 40_000) * 2
        yield head(b"200 OK", JSON, b"content-length: 2") + b"{}"

    return script


@pytest.mark.parametrize("kind", ["endless", "two-of-60-fields", "two-of-40-kb"])
def test_interim_heads_count_together_against_the_bounds(
    hostile: Callable[..., tuple[Proxy, HostileUpstream]], kind: str
) -> None:
    proxy, _ = hostile(interim_heads(kind))
    with httpx.Client(base_url=proxy.url, headers={"authorization": f"Bearer {PROXY_KEY}"}, timeout=10) as http:
        r = http.post("/v1/chat/completions", json=ask("u-interim"))
        assert r.status_code == 502 and r.json()["error"]["code"] == "upstream_unreachable"
        assert http.get("/v1/models").status_code == 502


def test_a_few_interim_heads_within_the_bounds_pass(hostile: Callable[..., tuple[Proxy, HostileUpstream]]) -> None:
    hints = head(b"100 Continue") + head(b"103 Early Hints", *[b"link: </a-%d.js>" % i for i in range(40)])
    proxy, _ = hostile(lambda r: [hints, head(b"200 OK", JSON, b"content-length: 2"), b"{}"])
    with proxy.http() as http:
        assert http.get("/v1/models").content == b"{}"


# ---------------------------------------------------------------- 6. broken chunked framing


BAD_SIZES = [b"zz", b"-5", b"1234567890abcdef123456"]


@pytest.mark.parametrize("size", BAD_SIZES, ids=["zz", "minus-5", "22-hex-digits"])
def test_a_plain_body_with_broken_chunks_is_aborted_not_ended(
    hostile: Callable[..., tuple[Proxy, HostileUpstream]], size: bytes
) -> None:
    proxy, _ = hostile(lambda r: [head(b"200 OK", JSON, b"transfer-encoding: chunked"),
                                  b"5\r\n{\"a\":\r\n", size + b"\r\nxxxx\r\n0\r\n\r\n"])
    with proxy.http() as http, pytest.raises(httpx.RemoteProtocolError):
        http.post("/v1/chat/completions", json=ask("u-chunks"))
    assert assistant_texts(proxy, "u-chunks") == []


@pytest.mark.parametrize("size", BAD_SIZES, ids=["zz", "minus-5", "22-hex-digits"])
def test_a_stream_with_broken_chunks_ends_with_an_error_event(
    hostile: Callable[..., tuple[Proxy, HostileUpstream]], size: bytes
) -> None:
    proxy, _ = hostile(lambda r: [head(b"200 OK", SSE, b"transfer-encoding: chunked"),
                                  b"%x\r\n%b\r\n" % (len(CONTENT), CONTENT), size + b"\r\nxxxx\r\n0\r\n\r\n"])
    with proxy.client() as client, pytest.raises(openai.APIError) as caught:
        list(client.chat.completions.create(**ask("u-schunks"), stream=True))
    assert not isinstance(caught.value, openai.APIStatusError)
    assert assistant_texts(proxy, "u-schunks") == []


def test_a_pass_through_body_with_broken_chunks_is_aborted(hostile: Callable[..., tuple[Proxy, HostileUpstream]]) -> None:
    proxy, _ = hostile(lambda r: [head(b"200 OK", JSON, b"transfer-encoding: chunked"), b"2\r\n{}\r\nzz\r\n"])
    with proxy.http() as http, pytest.raises(httpx.RemoteProtocolError):
        http.get("/v1/models")


# ---------------------------------------------------------------- 8. what the upstream may not set


def test_upstream_paperclip_headers_and_inspector_cookies_never_reach_the_client(
    hostile: Callable[..., tuple[Proxy, HostileUpstream]],
) -> None:
    body = json.dumps(completion("hi")).encode()
    planted = [b"X-Paperclip-Memories: 999", b"x-paperclip-degraded: planted", b"X-PAPERCLIP-Session: other",
               b"Set-Cookie: paperclip_ui=stolen; Path=/", b"set-cookie: __Host-paperclip_ui=x; Path=/; Secure",
               b"Set-Cookie: PAPERCLIP_UI=y", b"Set-Cookie: __cf_bm=kept; Path=/", b"x-request-id: req-1",
               # Nameless: a browser stores each and sends it back as its value, 'paperclip_ui=fixated'.
               b"Set-Cookie: =paperclip_ui=fixated; Path=/paperclip/ui", b"Set-Cookie:  = PaperClip_UI=z",
               b"Set-Cookie: ==__Host-paperclip_ui=w; Secure", b"Set-Cookie: paperclip_ui; Path=/",
               b"Set-Cookie: =theme=dark"]
    proxy, _ = hostile(lambda r: [head(b"200 OK", JSON, *planted, b"content-length: %d" % len(body)), body])
    for path in ("/v1/chat/completions", "/v1/embeddings"):
        with proxy.http() as http:
            r = http.post(path, json=ask("u-planted"))
        assert r.status_code == 200
        names = [name.lower() for name, _ in r.headers.raw]
        if path == "/v1/chat/completions":  # the proxy's own, once each
            assert r.headers.get_list("x-paperclip-memories") == ["0"]
            assert names.count(b"x-paperclip-session") == 1
        assert b"x-paperclip-degraded" not in names
        assert not any(b"x-paperclip" in n for n in names) or path == "/v1/chat/completions"
        assert r.headers.get_list("set-cookie") == ["__cf_bm=kept; Path=/", "=theme=dark"]
        assert r.headers["x-request-id"] == "req-1"


# ---------------------------------------------------------------- a deflate reply is still read


def test_a_deflate_reply_is_recorded(hostile: Callable[..., tuple[Proxy, HostileUpstream]]) -> None:
    body = zlib.compress(json.dumps(completion("deflated answer")).encode())
    proxy, _ = hostile(lambda r: [head(b"200 OK", JSON, b"content-encoding: deflate",
                                       b"content-length: %d" % len(body)), body])
    with proxy.http() as http:
        assert http.post("/v1/chat/completions", json=ask("u-deflate")).status_code == 200
    assert assistant_texts(proxy, "u-deflate") == ["deflated answer"]


# ---------------------------------------------------------------- a reply read whole (the compression model's)


async def test_a_reply_read_whole_is_decoded_within_the_bound() -> None:
    payloads = {1: bomb(8 * 1024 * 1024), 2: bomb(1000)}  # 8 MB past a 1 MiB bound, then a small one

    def script(request: RawRequest) -> list[bytes]:
        body = payloads[request.number]
        # This upstream hangs up after each reply, so it says so (RFC 9112 §9.6): unsaid, the pool may
        # take the socket back before the hang-up reaches it, and the next request meets a closed one.
        return [head(b"200 OK", JSON, b"content-encoding: gzip", b"content-length: %d" % len(body),
                     b"connection: close"), body]

    with HostileUpstream(script) as hostile:
        upstreams = Upstreams(max_read_bytes=1024 * 1024)
        client = upstreams.client(Upstream(base_url=hostile.base_url, api_key=None))
        try:
            with pytest.raises(httpx.DecodingError):
                await client.post(hostile.base_url + "/chat/completions", json={})
            small = await client.post(hostile.base_url + "/chat/completions", json={})
            assert small.json()["choices"][0]["message"]["content"] == "a" * 1000
            assert "content-encoding" not in small.headers
            assert hostile.requests[0].header("accept-encoding") == ["gzip, deflate"]
        finally:
            await upstreams.aclose()
