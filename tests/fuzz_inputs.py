"""Hostile inputs for the fuzz suite (tests/test_fuzz.py) and the fuzz bench (bench/fuzz.py).

Each strategy draws one HTTP request as ``Probe`` (method, path, headers, body
bytes); ``judge`` says what is wrong with the proxy's answer to it, if
anything: a 500 (the upstream behind the fuzz never answers one), or an error
outside OpenAI's envelope.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
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
