"""Hostile and unlucky requests at the HTTP edge (issue 14): each answered in OpenAI's envelope, never a 500."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

import openai
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.requests import Request
from starlette.responses import Response

from proxy.errors import BadRequest
from proxy.server.jsonbody import MAX_DEPTH, check, too_deep
from proxy.server.relay import EVENT_HELD_MAX, event_break, whole_events, whole_lines
from tests.conftest import ADMIN_KEY, PROXY_KEY, Proxy
from tests.fake_upstream import FakeUpstream, Scripted, chunk, error_json, sse

MODEL = "gpt-4o-mini"
ENVELOPE_KEYS = {"message", "type", "param", "code"}


def assert_envelope(status: int, r: Any) -> dict[str, Any]:
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/json")
    error = r.json()["error"]
    assert set(error) == ENVELOPE_KEYS
    return dict(error)


def chat_bytes(content_json: str) -> bytes:
    return ('{"model": "gpt-4o-mini", "messages": [{"role": "user", "content": ' + content_json + "}]}").encode()


LONE_SURROGATES = ['"\\ud800"', '"ok \\udfff end"', '"\\ud83d then no pair"', '["x", {"type": "text", "text": "\\udc00"}]']


@pytest.mark.parametrize("memory", ["on", "off"])
@pytest.mark.parametrize("content", LONE_SURROGATES)
def test_lone_surrogates_are_a_400_and_the_connection_stays_usable(
    proxy: Proxy, upstream: FakeUpstream, memory: str, content: str
) -> None:
    with proxy.http() as http:
        r = http.post("/v1/chat/completions", content=chat_bytes(content), headers={"x-paperclip-memory": memory})
        assert "surrogate" in assert_envelope(400, r)["message"]
        assert r.headers.get("connection") != "close"
        # Same connection, next request: still served.
        ok = http.post("/v1/chat/completions", json={"model": MODEL, "messages": [{"role": "user", "content": "hi"}]})
        assert ok.status_code == 200
    assert len(upstream.chat_requests()) == 1


def test_paired_surrogate_escapes_are_ordinary_text(proxy: Proxy, upstream: FakeUpstream) -> None:
    with proxy.http() as http:
        r = http.post("/v1/chat/completions", content=chat_bytes('"party \\ud83c\\udf89"'))
    assert r.status_code == 200
    assert upstream.chat_requests()[-1].json()["messages"][-1]["content"].endswith("party 🎉")


def test_lone_surrogate_in_a_hand_written_memory_is_a_400(proxy: Proxy) -> None:
    with proxy.http(ADMIN_KEY) as http:
        r = http.post("/paperclip/v1/users/u1/memories", content=b'{"content": "likes \\udfff tea"}')
    assert_envelope(400, r)


@pytest.mark.parametrize(
    "body",
    [
        b'{"model": "m", "messages": ' + b"[" * 1000 + b"]" * 1000 + b"}",
        b'{"model": "m", "messages": [], "x": ' + b'{"a":' * (MAX_DEPTH + 1) + b"1" + b"}" * (MAX_DEPTH + 1) + b"}",
        b'{"model": "m", "messages": [], "n": ' + b"9" * 5000 + b"}",
        b'{"model": "m", "messages": [' + b"[" * 100_000 + b"]}",
    ],
    ids=["nested-1000", "nested-past-limit", "int-5000-digits", "unclosed-100k"],
)
def test_bad_json_shapes_are_a_400(proxy: Proxy, body: bytes) -> None:
    with proxy.http() as http:
        assert_envelope(400, http.post("/v1/chat/completions", content=body))


def test_nesting_within_the_limit_is_forwarded(proxy: Proxy, upstream: FakeUpstream) -> None:
    depth = MAX_DEPTH - 4
    schema = '{"a":' * depth + "1" + "}" * depth
    body = ('{"model": "m", "messages": [{"role": "user", "content": "hi"}], "x": ' + schema + "}").encode()
    with proxy.http() as http:
        assert http.post("/v1/chat/completions", content=body).status_code == 200
    assert upstream.chat_requests()[-1].body == body


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("GET", "/v1/models%0A", 404),
        ("POST", "/v1/chat/completions%0A", 404),
        ("GET", "/%0A", 404),
        ("GET", "/paperclip/v1/users/a%0Ab/export", 404),
        ("PROPFIND", "/v1/models", 405),
        ("PROPFIND", "/healthz", 405),
        ("PUT", "/healthz", 405),
        ("GET", "/messages", 405),
        ("GET", "/chat/completions", 405),
        ("PATCH", "/mcp", 405),
        ("PUT", "/paperclip/ui/users", 405),  # the inspector's pages are known paths too
        ("DELETE", "/paperclip/ui/login", 405),
        ("GET", "/paperclip/ui/logout", 405),
        ("GET", "/no/such/path", 404),
    ],
)
def test_every_error_the_router_makes_is_in_the_envelope(proxy: Proxy, method: str, path: str, status: int) -> None:
    with proxy.http() as http:
        response = http.request(method, path)
    assert_envelope(status, response)
    if status == 405 and method in ("PUT", "GET", "PATCH"):  # a method of ours the path does not take
        assert "POST" in response.headers["allow"] or "GET" in response.headers["allow"]
        assert method not in response.headers["allow"].split(", ")


# ---------------------------------------------------------------- an upstream dying inside an event


def test_whole_lines_holds_only_an_unfinished_line() -> None:
    assert whole_lines(b"", b"data: 1\n\ndata: {") == (b"data: 1\n\n", b"data: {")
    assert whole_lines(b"data: {", b'"a": 1}\n\n') == (b'data: {"a": 1}\n\n', b"")
    assert whole_lines(b"", b"partial") == (b"", b"partial")
    assert whole_lines(b"", b"a\r\n") == (b"a\r\n", b"")


def test_an_event_that_never_ends_goes_out_by_whole_lines_past_a_bound() -> None:
    # A server that ends its lines but never an event: what is held (and scanned per chunk) stays bounded.
    held = out = b""
    lines = [b"data: %d\n" % n for n in range(20_000)]
    for line in lines:
        sent, held = whole_events(held, line)
        out += sent
        assert len(held) <= EVENT_HELD_MAX + 16
    assert len(out) > len(lines) * 8 - EVENT_HELD_MAX - 16 and out + held == b"".join(lines)  # in order, once


def test_whole_events_holds_an_unfinished_event_and_lets_comments_through() -> None:
    assert whole_events(b"", b"data: 1\n\ndata: {") == (b"data: 1\n\n", b"data: {")
    assert whole_events(b"", b"event: a\n") == (b"", b"event: a\n")
    assert whole_events(b"event: a\n", b"data: 2\n\n") == (b"event: a\ndata: 2\n\n", b"")
    assert whole_events(b"", b"event: a\r\ndata: 2\r\n") == (b"", b"event: a\r\ndata: 2\r\n")  # no blank line
    assert whole_events(b"", b"data: 1\r\n\r\nevent: b\r\n") == (b"data: 1\r\n\r\n", b"event: b\r\n")
    assert whole_events(b"", b"data: 1\r\rdata: 2\r") == (b"data: 1\r\r", b"data: 2\r")
    assert whole_events(b"", b"data: 1\n\n: keep-alive\n") == (b"data: 1\n\n: keep-alive\n", b"")
    assert whole_events(b"", b": ping\ndata: 2\n") == (b"", b": ping\ndata: 2\n")


def test_event_break_starts_a_fresh_event() -> None:
    assert event_break(b"") == b""
    assert event_break(b'x"}\n\n') == b""
    assert event_break(b'x"}\r\n\r\n') == b""
    assert event_break(b'data: {"a":1}\n') == b"\n\n"
    assert event_break(b'data: {"a":1}\r') == b"\n\n"


CUTS = {
    "mid-line": b'data: {"id": "c1", "object": "chat.compl',
    "after-a-line": b'data: {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": []}\n',
}


@pytest.mark.parametrize("cut", list(CUTS))
def test_upstream_dying_inside_an_event_gives_the_sdk_an_api_error(
    plain_proxy: Proxy, upstream: FakeUpstream, cut: str
) -> None:
    parts = [*sse([chunk({"role": "assistant", "content": "Hel"})], done=False), CUTS[cut]]

    async def handler(request: Request, body: dict[str, Any]) -> Response:
        return Scripted(upstream, [*parts, b"never sent"], abort_after=len(parts))

    upstream.chat = handler
    with plain_proxy.client() as client, pytest.raises(openai.APIError) as caught:
        list(client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}], stream=True))
    assert not isinstance(caught.value, openai.APIStatusError)
    assert "upstream" in caught.value.message.lower()


# ---------------------------------------------------------------- failed exchanges record nothing


def stored(proxy: Proxy, user: str) -> tuple[int, list[str]]:
    """How many fragments the user has, and the assistant texts among them."""
    store = proxy.store

    async def read() -> tuple[int, list[str]]:
        count = await store.fragments.count("acme", user)
        rows = await store.db.read(
            lambda c: c.execute(
                "SELECT text FROM fragments WHERE tenant = 'acme' AND user = ? AND role = 'assistant'", (user,)
            ).fetchall()
        )
        return count, [r[0] for r in rows]

    result: tuple[int, list[str]] = proxy.server.call(read())
    return result


def test_an_upstream_error_records_nothing(make_proxy: Callable[..., Proxy], upstream: FakeUpstream) -> None:
    proxy = make_proxy()

    async def failing(request: Request, body: dict[str, Any]) -> Response:
        return error_json(500, "boom", "server_error")

    upstream.chat = failing
    with proxy.client() as client:
        for i in range(3):
            with pytest.raises(openai.InternalServerError):
                client.chat.completions.create(
                    model=MODEL, messages=[{"role": "user", "content": f"my name is Carol {i}"}], user="u-fail"
                )
    proxy.drain()
    assert stored(proxy, "u-fail") == (0, [])
    assert proxy.server.call(proxy.store.db.read(lambda c: c.execute("SELECT count(*) FROM traces").fetchone()[0])) == 0


def test_a_stream_cut_short_records_no_partial_reply(make_proxy: Callable[..., Proxy], upstream: FakeUpstream) -> None:
    proxy = make_proxy()
    parts = sse([chunk({"role": "assistant", "content": "Your code is 12"})], done=False)

    async def cut(request: Request, body: dict[str, Any]) -> Response:
        return Scripted(upstream, [*parts, b"never"], abort_after=len(parts))

    upstream.chat = cut
    with proxy.client() as client, pytest.raises(openai.APIError):
        list(client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "what is my code?"}], user="u-cut", stream=True
        ))
    proxy.drain()
    assert stored(proxy, "u-cut") == (0, [])


# ---------------------------------------------------------------- keys Paperclip knows are never forwarded

OWN_KEY = "sk-user-own-openai-key-0123456789abcdef"


@pytest.mark.parametrize(
    "key",
    [ADMIN_KEY, PROXY_KEY[:-1], PROXY_KEY + "x", PROXY_KEY.replace("acme", "acne"), "Pk-test-acme", ADMIN_KEY[:-2]],
    ids=["admin", "truncated", "one-too-many", "typo", "case", "admin-truncated"],
)
def test_keys_paperclip_nearly_knows_are_refused_not_forwarded(
    make_proxy: Callable[..., Proxy], upstream: FakeUpstream, key: str
) -> None:
    proxy = make_proxy(passthrough_keys=True)
    with proxy.http(key) as http:
        assert assert_envelope(401, http.post("/v1/chat/completions", json={"model": MODEL, "messages": []}))
        assert_envelope(401, http.get("/v1/models"))
    assert upstream.requests == []


def test_a_clients_own_key_is_still_forwarded_in_passthrough_mode(
    make_proxy: Callable[..., Proxy], upstream: FakeUpstream
) -> None:
    proxy = make_proxy(passthrough_keys=True)
    with proxy.http(OWN_KEY) as http:
        assert http.get("/v1/models").status_code == 200
    assert upstream.requests[-1].headers["authorization"] == f"Bearer {OWN_KEY}"


def test_near_miss_rule() -> None:
    from proxy.tenancy import edit_distance, is_near

    assert edit_distance("kitten", "sitting", 5) == 3
    assert edit_distance("a" * 10, "b" * 10, 2) == 3
    assert is_near("pk-live-acme-1234567890", "pk-live-acme-1234567899")
    assert not is_near(OWN_KEY, PROXY_KEY)
    assert not is_near("sk-proj-" + "a" * 40, "sk-proj-" + "b" * 40)
    key = "pk-live-acme-7f3a9c2e4b1d8f6a0c5e"
    assert is_near(f" Bearer bearer\t{key.upper()} ", key)  # Bearer prefixes, whitespace and case aside
    assert is_near(key[:16], key) and is_near(f"{key}-rotated-2025", key)  # containment, from 16 characters
    assert not is_near(key[:15], key) and not is_near("acme", key)  # shorter: would match too much
    assert not is_near(f"sk-{'x' * 40}-pk-test-acme", "pk-test-acme")  # a 12-character key is not looked for inside


# ---------------------------------------------------------------- admin ids: encoded, spaced, huge


def admin_path(user: str, rest: str = "") -> str:
    from urllib.parse import quote

    return f"/paperclip/v1/users/{quote(user, safe='')}{rest}"


@pytest.mark.parametrize("user", ["team/alice", "<script>alert(1)</script>", "a b/../c", "%2F-literal"])
def test_any_user_id_can_be_exported_and_forgotten(proxy: Proxy, user: str) -> None:
    with proxy.http(ADMIN_KEY) as admin:
        added = admin.post(admin_path(user, "/memories"), json={"content": "Prefers tea over coffee every morning"})
        assert added.status_code == 201, added.text
        exported = admin.get(admin_path(user, "/export"))
        assert exported.status_code == 200
        assert "tea" in json.dumps(exported.json())
        assert admin.get(admin_path(user, "/memories")).json()["data"]
        assert admin.delete(admin_path(user)).status_code == 200
        assert admin.get(admin_path(user, "/memories")).json()["data"] == []


def test_user_ids_with_surrounding_spaces_are_one_id(proxy: Proxy) -> None:
    with proxy.http() as http:
        r = http.post(
            "/v1/chat/completions",
            json={"model": MODEL, "messages": [{"role": "user", "content": "my dog is called Rex"}], "user": "  bob  "},
        )
        assert r.status_code == 200
    proxy.drain()
    with proxy.http(ADMIN_KEY) as admin:
        for spelled in ["bob", " bob ", "bob  "]:
            assert "Rex" in json.dumps(admin.get(admin_path(spelled, "/export")).json())


@pytest.mark.parametrize("item", ["1" * 40, "9223372036854775808", "²", "-1", "0x10"])
def test_memory_ids_the_store_cannot_hold_are_a_404(proxy: Proxy, item: str) -> None:
    with proxy.http(ADMIN_KEY) as admin:
        assert_envelope(404, admin.delete(admin_path("u1", f"/memories/{item}")))


def test_a_memory_expiring_at_the_end_of_time_is_kept(proxy: Proxy) -> None:
    with proxy.http(ADMIN_KEY) as admin:
        r = admin.post(admin_path("u1", "/memories"), json={"content": "Has a lifetime pass", "expires_at": "9999-12-31"})
        assert r.status_code == 201, r.text
        assert [m["content"] for m in admin.get(admin_path("u1", "/memories")).json()["data"]] == ["Has a lifetime pass"]


# ---------------------------------------------------------------- very large bodies


def test_a_body_past_the_memory_bound_is_forwarded_as_it_came_and_not_recorded(
    make_proxy: Callable[..., Proxy], upstream: FakeUpstream
) -> None:
    from proxy.server.chat import MEMORY_MAX_BODY_BYTES

    proxy = make_proxy()
    text = "All work and no play makes Jack a dull boy. " * (MEMORY_MAX_BODY_BYTES // 40)
    body = json.dumps({"model": MODEL, "messages": [{"role": "user", "content": text}], "user": "u-big"}).encode()
    with proxy.http() as http:
        r = http.post("/v1/chat/completions", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 200
    assert r.headers["x-paperclip-degraded"] == "too_large"
    assert int(r.headers["x-paperclip-tokens-in"]) == len(body) // 4
    assert upstream.chat_requests()[-1].body == body
    proxy.drain()
    assert stored(proxy, "u-big") == (0, [])


def test_inline_images_past_the_bound_leave_the_chat_to_the_memory_layer(
    make_proxy: Callable[..., Proxy], upstream: FakeUpstream
) -> None:
    """The bound is on the text the memory layer reads, not on bytes of inline media: a vision chat
    with a few screenshots is compressed, recalled and recorded like any other."""
    from proxy.server.chat import MEMORY_MAX_BODY_BYTES

    proxy = make_proxy(defaults={"context": {"recent_window_tokens": 300, "summary_budget_tokens": 200}})
    image = "data:image/png;base64," + base64.b64encode(bytes(range(256)) * (MEMORY_MAX_BODY_BYTES // 200)).decode()
    history: list[dict[str, Any]] = [{"role": "user", "content": [
        {"type": "text", "text": "Here is my screenshot. My cat Miso is allergic to chicken."},
        {"type": "image_url", "image_url": {"url": image}}]}]
    with proxy.http() as http:
        for turn in range(8):
            r = http.post("/v1/chat/completions", json={"model": MODEL, "messages": history, "user": "u-pics"})
            assert r.status_code == 200 and "x-paperclip-degraded" not in r.headers, r.headers
            proxy.drain()
            history += [{"role": "assistant", "content": f"Answer {turn}: " + "words " * 40},
                        {"role": "user", "content": f"Question {turn}: tell me more about topic {turn}."}]
    assert len(json.dumps(history)) > MEMORY_MAX_BODY_BYTES
    assert upstream.compression_calls > 0  # the history past the window was compressed
    sent = upstream.chat_requests()[-1].json()["messages"]
    assert len(sent) < len(history) and image not in json.dumps(sent[1:])  # the screenshot's turn was summarised
    with proxy.http() as http:
        turns = http.get("/paperclip/v1/users/u-pics/fragments",
                         headers={"authorization": f"Bearer {ADMIN_KEY}"}).json()["data"]
    assert any("Miso is allergic to chicken" in t["text"] for t in turns)  # recorded, its text only
    assert not any("base64" in t["text"] for t in turns)


def test_inline_media_is_counted_in_every_apis_shape_and_words_never_are() -> None:
    from proxy.server.chat import inline_media_bytes

    blob = "QUJD" * 1000
    body = {"messages": [
        {"role": "user", "content": [{"type": "image", "source": {"type": "base64", "data": blob}}]},  # Anthropic
        {"role": "user", "content": [{"type": "input_audio", "input_audio": {"data": blob, "format": "wav"}}]},
        {"role": "user", "content": [{"type": "file", "file": {"file_data": blob}}]},
        {"role": "user", "content": [{"type": "input_image", "image_url": f"data:image/png;base64,{blob}"}]},
        {"role": "user", "content": [{"type": "text", "text": blob}]},  # words, however they look
        {"role": "user", "content": blob},
        {"role": "assistant", "content": "ok", "data": "short"},
    ]}
    assert inline_media_bytes(body) == 4 * len(blob) + len("data:image/png;base64,")


@pytest.mark.parametrize("stream", [False, True])
def test_a_reply_holding_a_lone_surrogate_is_recorded_with_a_replacement_character(
    make_proxy: Callable[..., Proxy], upstream: FakeUpstream, stream: bool
) -> None:
    proxy = make_proxy()
    if stream:
        event = b'data: {"id":"x","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"bad \\ud800 reply"},"finish_reason":null}]}\n\n'
        parts, media = [event, b"data: [DONE]\n\n"], "text/event-stream"
    else:
        parts = [b'{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,'
                 b'"message":{"role":"assistant","content":"bad \\ud800 reply"},"finish_reason":"stop"}]}']
        media = "application/json"

    async def answer(request: Request, body: dict[str, Any]) -> Response:
        return Scripted(upstream, parts, media_type=media)

    upstream.chat = answer
    with proxy.http() as http:
        r = http.post("/v1/chat/completions", json={"model": MODEL, "messages": [{"role": "user", "content": "hi"}],
                                                     "user": "u-sur", "stream": stream})
        assert r.status_code == 200
    proxy.drain()
    assert stored(proxy, "u-sur")[1] == ["bad \ufffd reply"]



def _chain(depth: int, leaf: Any = "x") -> Any:
    """Containers nested ``depth`` deep, lists and objects in turn, strings beside them."""
    value = leaf
    for level in range(depth):
        value = [value, "]"] if level % 2 else {"k[": value, "v": "{"}
    return value


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=12,
)


@settings(max_examples=200, deadline=None)
@given(st.one_of(_JSON, st.integers(120, 136).map(_chain)))
def test_the_quick_depth_walk_refuses_exactly_what_the_full_check_refuses(value: Any) -> None:
    try:
        check(value, strings=False)
        refused = False
    except BadRequest:
        refused = True
    assert too_deep(value) == refused
    assert too_deep(_chain(MAX_DEPTH)) is False and too_deep(_chain(MAX_DEPTH + 1)) is True
