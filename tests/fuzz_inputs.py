"""Hostile inputs for the fuzz suite (tests/test_fuzz.py) and the fuzz bench (bench/fuzz.py).

Each client-side strategy draws one HTTP request as ``Probe`` (method, path,
headers, body bytes); ``judge`` says what is wrong with the proxy's answer to
it, if anything: a 500 (the upstream behind the fuzz never answers one), or an
error outside OpenAI's envelope. The upstream-side strategy
(``upstream_replies``) draws what a hostile upstream writes back — status
line, headers, framing, encoding — and ``judge_reply`` the same for those.
"""

from __future__ import annotations

import gzip
import json
import zlib
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import httpx
from hypothesis import strategies as st

from tests.conftest import ADMIN_KEY, PROXY_KEY

CLIENT = {"authorization": f"Bearer {PROXY_KEY}".encode()}
ADMIN = {"authorization": f"Bearer {ADMIN_KEY}".encode()}
ENVELOPE_KEYS = {"message", "type", "param", "code"}
# Header values HTTP allows (visible ASCII and latin-1 obs-text): anything else is refused
# by uvicorn's parser before the app sees it, with its own plain-text 400.
HEADER_TEXT = st.text(
    st.characters(min_codepoint=0x21, max_codepoint=0xFF).filter(lambda c: not 0x7F <= ord(c) < 0xA0),
    min_size=1, max_size=40,
)
TEXT = st.text(max_size=60)


@dataclass
class Probe:
    method: str
    path: str
    body: bytes = b""
    headers: dict[str, bytes] = field(default_factory=dict)


def judge(probe: Probe, response: httpx.Response) -> str | None:
    """What is wrong with ``response`` (None: nothing)."""
    if response.status_code == 500:
        return f"500 for {probe.method} {probe.path!r}: {response.text[:200]}"
    if response.status_code >= 400 and probe.method != "HEAD":  # a HEAD answer has no body
        try:
            error = response.json()["error"]
        except (ValueError, KeyError, TypeError):
            return f"{response.status_code} outside the envelope for {probe.path!r}: {response.text[:200]}"
        if not isinstance(error, dict) or set(error) != ENVELOPE_KEYS:
            return f"{response.status_code} with a malformed envelope: {response.text[:200]}"
    return None


def send(client: httpx.Client, probe: Probe) -> httpx.Response:
    url = client.base_url.copy_with(raw_path=probe.path.encode("ascii"))  # as drawn: "//", "%ZZ" and all
    return client.request(probe.method, url, content=probe.body, headers=probe.headers)


# ---------------------------------------------------------------- JSON with teeth

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=False), TEXT
)
json_values = st.recursive(
    scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4), max_leaves=12
)

part = st.one_of(
    st.fixed_dictionaries({"type": st.just("text"), "text": TEXT}),
    st.fixed_dictionaries({"type": st.just("image_url"), "image_url": st.one_of(
        st.fixed_dictionaries({"url": TEXT, "detail": st.sampled_from(["low", "high", "auto"])}), json_values)}),
    st.dictionaries(TEXT, json_values, max_size=3),
    json_values,
)
tool_calls = st.one_of(
    st.lists(st.fixed_dictionaries({
        "id": TEXT, "type": st.just("function"),
        "function": st.fixed_dictionaries({"name": TEXT, "arguments": TEXT | json_values}),
    }), max_size=3),
    json_values,
)
message = st.one_of(
    st.fixed_dictionaries(
        {"role": st.sampled_from(["system", "developer", "user", "assistant", "tool"]),
         "content": st.one_of(TEXT, st.none(), st.lists(part, max_size=3), json_values)},
        optional={"tool_calls": tool_calls, "tool_call_id": TEXT | json_values, "name": TEXT | json_values,
                  "unknown": json_values},
    ),
    json_values,
)
chat_body = st.fixed_dictionaries(
    {"model": st.one_of(st.just("gpt-4o-mini"), TEXT, json_values), "messages": st.lists(message, max_size=6) | json_values},
    optional={"stream": st.booleans() | json_values, "user": TEXT | json_values, "metadata": json_values,
              "safety_identifier": TEXT | json_values, "temperature": json_values},
)


def _lone_surrogate(raw: bytes, at: int) -> bytes:
    # Inside the first string after ``at``: a high or low half with no partner.
    quote_at = raw.find(b'"', at % max(len(raw), 1))
    if quote_at < 0:
        return raw
    return raw[: quote_at + 1] + b"\\ud800" + raw[quote_at + 1 :]


MUTATIONS = {
    "none": lambda raw, n: raw,
    "lone-surrogate": _lone_surrogate,
    "low-surrogate": lambda raw, n: raw.replace(b'"user"', b'"u\\udfffser"', 1) if b'"user"' in raw else raw + b"\\udfff",
    "truncate": lambda raw, n: raw[: n % max(len(raw), 1)],
    "deep": lambda raw, n: raw[:-1] + b', "deep": ' + b"[" * (200 + n % 2000) + b"]" * (200 + n % 2000) + b"}",
    "huge-int": lambda raw, n: raw[:-1] + b', "n": ' + b"7" * (4000 + n % 2000) + b"}",
    "bad-utf8": lambda raw, n: raw.replace(b'"model"', b'"mod\xed\xa0\x80el"', 1),
    "not-object": lambda raw, n: b"[" + raw + b"]",
}


@st.composite
def chat_probes(draw: st.DrawFn) -> Probe:
    raw = json.dumps(draw(chat_body)).encode()
    mutation = draw(st.sampled_from(sorted(MUTATIONS)))
    raw = MUTATIONS[mutation](raw, draw(st.integers(0, 10_000)))
    headers: dict[str, bytes] = {"content-type": b"application/json"}
    for name in draw(st.lists(st.sampled_from(["x-paperclip-user", "x-paperclip-session", "x-paperclip-memory"]),
                              unique=True, max_size=3)):
        headers[name] = draw(HEADER_TEXT).encode("latin-1")
    path = draw(st.sampled_from(["/v1/chat/completions", "/chat/completions"]))
    return Probe("POST", path, raw, {**headers, **CLIENT})


# ---------------------------------------------------------------- paths and methods

segment = st.one_of(
    st.sampled_from(["%0A", "%0D", "%00", "%2F", "%25", "%ZZ", "..", ".", "%2e%2e", "models", "chat", "completions",
                     "paperclip", "v1", "users", "%20", "%7F", "~", "%E2%80%8F", "%ff"]),
    TEXT.map(lambda t: quote(t, safe="")),
)


@st.composite
def path_probes(draw: st.DrawFn) -> Probe:
    prefix = draw(st.sampled_from(["", "/v1", "/paperclip/v1", "/paperclip/v1/users", "/chat"]))
    path = prefix + "/" + "/".join(draw(st.lists(segment, min_size=1, max_size=4)))
    method = draw(st.sampled_from(["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS", "PROPFIND", "TRACE"]))
    body = draw(st.binary(max_size=64)) if method in ("POST", "PUT", "PATCH") else b""
    # Not JSON for the upstream: only the proxy's own parsing is under test here.
    key = draw(st.sampled_from([CLIENT, ADMIN, {}]))
    return Probe(method, path, body, {"content-type": b"application/octet-stream", **key})


# ---------------------------------------------------------------- the admin API


@st.composite
def admin_probes(draw: st.DrawFn) -> Probe:
    user = quote(draw(st.text(min_size=1, max_size=30)), safe="")
    kind = draw(st.sampled_from(["add", "delete-item", "list", "export", "forget", "session", "trace"]))
    base = f"/paperclip/v1/users/{user}"
    if kind == "add":
        fields = st.fixed_dictionaries({}, optional={
            "content": TEXT | json_values, "type": TEXT | json_values, "key": TEXT | json_values,
            "importance": json_values, "expires_at": st.sampled_from(["9999-12-31", "0001-01-01", "2026-02-30",
                                                                      "+999999-01-01", "2026-01-01T25:00"]) | json_values,
            "extra": json_values})
        raw = json.dumps(draw(fields | json_values)).encode()
        raw = MUTATIONS[draw(st.sampled_from(sorted(MUTATIONS)))](raw, draw(st.integers(0, 10_000)))
        return Probe("POST", base + "/memories", raw, {"content-type": b"application/json", **ADMIN})
    if kind == "delete-item":
        item = draw(st.one_of(st.integers(-(2**80), 2**80).map(str), TEXT.map(lambda t: quote(t, safe=""))))
        return Probe("DELETE", f"{base}/memories/{item or '0'}", headers=ADMIN)
    if kind == "list":
        query = "?" + "&".join(f"{k}={quote(draw(TEXT), safe='')}" for k in draw(
            st.lists(st.sampled_from(["q", "all", "limit"]), unique=True, max_size=3)))
        return Probe("GET", base + "/memories" + query, headers=ADMIN)
    if kind in ("session", "trace"):
        return Probe("GET", f"/paperclip/v1/{kind}s/{user}", headers=ADMIN)
    return Probe("GET" if kind == "export" else "DELETE", base + ("/export" if kind == "export" else ""), headers=ADMIN)


def any_probe() -> st.SearchStrategy[Probe]:
    return st.one_of(chat_probes(), path_probes(), admin_probes())


# ---------------------------------------------------------------- the upstream's side
#
# An upstream is not trusted more than a client (SPEC §9): each ``Reply`` is what a
# hostile upstream (tests/hostile_upstream.py) writes back to one request — its status
# line, headers, framing and encoding drawn — and the request a client sends to get it.
# The upstream never draws a 500, so a 500 is the proxy's.

HOSTILE_KEY = "pk-test-hostile"
HOSTILE = {"authorization": f"Bearer {HOSTILE_KEY}".encode()}


def hostile_tenant(upstream_url: str, hostile_url: str) -> dict[str, object]:
    """A tenant whose upstream is the hostile one; its compression model stays the fake (not under test)."""
    return {"api_keys": [HOSTILE_KEY],
            "upstream": {"base_url": hostile_url, "read_timeout_s": 2},
            "compression": {"base_url": upstream_url}}


@dataclass
class Reply:
    request: Probe
    status: int | None  # the status line's code, None when the line is not one
    steps: list[bytes]  # what the upstream writes; it closes the connection after them

    def __repr__(self) -> str:  # a short one: hypothesis prints it for a failing example
        shown = [f"{len(step)} B {step[:160]!r}" for step in self.steps]
        return f"Reply({self.request.method} {self.request.path}, status={self.status}, steps={shown})"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:  # hypothesis' printer, which reads fields otherwise
        printer.text(repr(self))


def _completion(text: str) -> bytes:
    return json.dumps({"id": "c", "object": "chat.completion", "created": 1, "model": "m", "choices": [
        {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}}).encode()


def _events(texts: list[str], end: str) -> bytes:
    events = [b"data: " + json.dumps({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
                                      "choices": [{"index": 0, "delta": {"content": t}}]}).encode() + b"\n\n"
              for t in texts]
    tail = {"done": b"data: [DONE]\n\n", "error": b'data: {"error": {"message": "overloaded"}}\n\n',
            "cut": b'data: {"id": "c", "obj', "none": b""}[end]
    return b"".join(events) + tail


reply_bodies = st.one_of(
    TEXT.map(_completion),
    st.tuples(st.lists(TEXT, max_size=5), st.sampled_from(["done", "error", "cut", "none"])).map(lambda t: _events(*t)),
    st.binary(max_size=300),
    st.just(b""),
    st.integers(1, 300_000).map(lambda n: _completion(" " * n + "x")),
)
# Mostly well-formed, so that what follows the status line (headers, framing, encodings) is reached.
STATUS_LINES = [b"HTTP/1.1 %d OK"] * 5 + [b"HTTP/1.1 %d", b"HTTP/1.0 %d OK", b"HTTP/1.1 %d " + b"R" * 5000,
                                          b"http/1.1 %d ok"]
BROKEN_STATUS_LINES = [b"HTTP/1.1 abc OK", b"HTTP/1.1 2000 OK", b"HTTP/1.1 -1 OK", b"ICY 200 OK", b"", b"\x00\xff\xfe",
                       b"HTTP/2 200", b"HTTP/1.1  200  OK"]
BAD_CHUNK_SIZES = [b"zz", b"-5", b"1234567890abcdef123456", b"", b" 5", b"5 ;x", b"ffffffffffffffff"]
header_names = st.sampled_from(["x-request-id", "x-paperclip-memories", "X-Paperclip-Session", "set-cookie",
                                "content-type", "x-ratelimit-remaining", "server", "connection", "keep-alive",
                                "trailer", "content-length", "transfer-encoding", "content-encoding", "vary"])
header_values = st.one_of(HEADER_TEXT, st.sampled_from(["paperclip_ui=planted; Path=/", "close", "chunked", "gzip",
                                                        "-1", "99999999999999999999", "text/event-stream"]))


def _gzip(body: bytes, how: str) -> bytes:
    packed = gzip.compress(body, compresslevel=1)
    return {"gzip": packed, "gzip-cut": packed[: len(packed) // 2], "deflate": zlib.compress(body)}.get(how, body)


@st.composite
def upstream_replies(draw: st.DrawFn) -> Reply:
    kind = draw(st.sampled_from(["chat", "chat-stream", "responses", "models"]))
    status = draw(st.one_of(st.sampled_from([200, 200, 200, 200, 201, 204, 103, 400, 401, 404, 429, 502, 503]),
                            st.integers(200, 599).filter(lambda s: s != 500)))
    if draw(st.integers(0, 9)) == 0:
        line, code = draw(st.sampled_from(BROKEN_STATUS_LINES)), None
    else:
        line, code = draw(st.sampled_from(STATUS_LINES)) % status, status
    body = draw(reply_bodies)
    if draw(st.integers(0, 30)) == 0:  # a bomb: ~10 KB that inflate to 10 MB
        body, encoding = gzip.compress(b"a" * 10_000_000, compresslevel=9), "gzip"
    else:
        encoding = draw(st.sampled_from(["none", "none", "gzip", "gzip-cut", "deflate", "br", "x-bogus"]))
        body = _gzip(body, encoding)
    headers = [b"content-type: " + draw(st.sampled_from([b"application/json", b"text/event-stream", b"text/plain"]))]
    if encoding != "none":
        headers.append(b"content-encoding: " + encoding.removesuffix("-cut").encode())
    for name, value in draw(st.lists(st.tuples(header_names, header_values), max_size=3)):
        headers.append(name.encode() + b": " + value.encode("latin-1"))
    if draw(st.integers(0, 15)) == 0:
        headers += [b"x-many-%d: v" % i for i in range(draw(st.integers(80, 140)))]
    if draw(st.integers(0, 15)) == 0:
        headers.append(draw(st.sampled_from([b"no colon here", b" folded: line", b"x-big: " + b"b" * 70_000,
                                             b"x-nul: a\x00b", b"content-length: 5", b"Content-Length: abc"])))
    framing = draw(st.sampled_from(["length", "length", "short", "long", "chunked", "chunked", "broken-chunk",
                                    "no-last-chunk", "eof", "both"]))
    head, tail = _framed(body, framing, draw(st.sampled_from(BAD_CHUNK_SIZES)), draw(st.integers(1, 64)))
    steps = [line + b"\r\n" + b"".join(h + b"\r\n" for h in [*headers, *head]) + b"\r\n", *tail]
    return Reply(_request_for(kind), code, steps)


def _framed(body: bytes, framing: str, bad_size: bytes, piece: int) -> tuple[list[bytes], list[bytes]]:
    """(framing headers, the body's bytes as written) for one way to frame ``body``."""
    chunks = [body[i : i + piece * 16] for i in range(0, len(body), piece * 16)]
    chunked = [b"%x\r\n%b\r\n" % (len(c), c) for c in chunks]
    if framing == "length":
        return [b"content-length: %d" % len(body)], [body]
    if framing == "short":  # fewer bytes than announced, then the connection ends
        return [b"content-length: %d" % (len(body) + 10)], [body]
    if framing == "long":  # more bytes than announced
        return [b"content-length: %d" % max(0, len(body) - 3)], [body + b"trailing junk"]
    if framing == "chunked":
        return [b"transfer-encoding: chunked"], [*chunked, b"0\r\n\r\n"]
    if framing == "broken-chunk":
        return [b"transfer-encoding: chunked"], [*chunked[:1], bad_size + b"\r\nxxxx\r\n0\r\n\r\n"]
    if framing == "no-last-chunk":
        return [b"transfer-encoding: chunked"], chunked
    if framing == "both":
        return [b"content-length: %d" % len(body), b"transfer-encoding: chunked"], [*chunked, b"0\r\n\r\n"]
    return [], [body]  # eof: the body ends where the connection does


def _request_for(kind: str) -> Probe:
    messages = [{"role": "user", "content": "hello there"}]
    if kind == "models":
        return Probe("GET", "/v1/models", headers=HOSTILE)
    if kind == "responses":
        body = json.dumps({"model": "m", "input": "hello there", "stream": False}).encode()
        return Probe("POST", "/v1/responses", body, {"content-type": b"application/json", **HOSTILE})
    body = json.dumps({"model": "m", "messages": messages, "stream": kind == "chat-stream"}).encode()
    return Probe("POST", "/v1/chat/completions", body, {"content-type": b"application/json", **HOSTILE})


def judge_reply(reply: Reply, response: httpx.Response | None, error: Exception | None) -> str | None:
    """What is wrong with the proxy's answer to a client whose upstream sent ``reply`` (None: nothing).

    A connection the proxy closed mid-body (broken framing) is an answer; a
    timeout is not (the proxy hung). A status the upstream did not send is the
    proxy's own, so it must be in OpenAI's envelope, and never a 500.
    """
    if error is not None:
        if isinstance(error, httpx.TimeoutException):
            return f"no answer in time for {reply.steps[0][:80]!r}"
        return None if isinstance(error, httpx.RemoteProtocolError | httpx.ReadError) else repr(error)
    assert response is not None
    if response.status_code == 500:
        return f"500 for an upstream reply starting {reply.steps[0][:80]!r}: {response.text[:200]}"
    if response.status_code != reply.status and response.status_code >= 400:
        return judge(reply.request, response)
    return None


def send_for_reply(client: httpx.Client, reply: Reply) -> tuple[httpx.Response | None, Exception | None]:
    """The client's request for ``reply``, read to its end: (response, None) or (None, what it raised).

    An encoded body is read raw: it is relayed as it came, and whether the client
    can decode junk is not the proxy's to answer for. The cookies the upstream set
    are not sent back (the fuzz's cookies are not valid ones for a client).
    """
    client.cookies.clear()
    try:
        with client.stream(reply.request.method, reply.request.path, content=reply.request.body,
                           headers=reply.request.headers) as response:
            if "content-encoding" in response.headers:
                for _ in response.iter_raw():
                    pass
            else:
                response.read()
        return response, None
    except httpx.HTTPError as exc:
        return None, exc
