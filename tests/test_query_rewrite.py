"""``memory.query_rewrite``: one compression-model call turns the latest message into a search line.

The pure parts (prompt, reply, the extended query) and, through the real
proxy in front of the fake upstream, the mechanism: the rewrite finds what
the plain question cannot, and a failing or slow model leaves the plain
query without degrading the request.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from proxy.memory.recall.query_rewrite import (
    extended_query,
    parse_rewrite,
    rewrite_prompt,
    rewritten_query,
)
from proxy.prompts import Prompts
from tests.conftest import Proxy
from tests.fake_upstream import FakeUpstream, completion

PROMPTS = Prompts.load()
FACT = "I put the blue notebook in the garage, on the top shelf behind the paint cans."
QUESTION = "Where did I leave my thing?"


def test_the_prompt_holds_the_latest_message_and_the_turns_before_it() -> None:
    messages = [
        {"role": "system", "content": "You are helpful."},
        {"role": "user", "content": "We flew to Lisbon in May."},
        {"role": "assistant", "content": "Lovely city!"},
        {"role": "user", "content": [{"type": "text", "text": "What was the hotel there called?"}]},
    ]
    prompt = rewrite_prompt(PROMPTS, messages)
    assert prompt is not None
    conversation = prompt.split("<conversation>")[1].split("</conversation>")[0]
    assert "user: We flew to Lisbon in May." in conversation and "assistant: Lovely city!" in conversation
    assert "You are helpful" not in prompt  # the system prompt is not the user's history
    assert "<latest>\nWhat was the hotel there called?\n</latest>" in prompt
    assert rewrite_prompt(PROMPTS, [{"role": "assistant", "content": "Hi"}]) is None
    assert rewrite_prompt(PROMPTS, [{"role": "user", "content": "   "}]) is None


def test_the_reply_is_one_line_or_nothing() -> None:
    assert parse_rewrite('  "notebook garage shelf"\n') == "notebook garage shelf"
    assert parse_rewrite("diet vegetarian recipe\nSecond line ignored") == "diet vegetarian recipe"
    assert parse_rewrite("") is None and parse_rewrite("\n  \n") is None and parse_rewrite('""') is None
    assert parse_rewrite("word " * 200) is None  # a runaway reply is not a query


@given(st.text(max_size=80), st.one_of(st.none(), st.text(max_size=80)))
def test_the_extended_query_always_keeps_what_the_user_wrote(plain: str, rewrite: str | None) -> None:
    query = extended_query(plain, rewrite)
    assert query.startswith(plain)
    assert query == plain or query == f"{plain}\n{rewrite}"
    assert extended_query(plain, plain) == plain  # a rewrite that only repeats adds nothing


async def test_a_failing_or_slow_model_gives_no_rewrite_and_never_raises() -> None:
    messages = [{"role": "user", "content": QUESTION}]

    async def broken(_: list[dict[str, Any]]) -> str:
        raise ConnectionError("upstream down")

    async def slow(_: list[dict[str, Any]]) -> str:
        await asyncio.sleep(5)
        return "too late"

    async def fine(sent: list[dict[str, Any]]) -> str:
        assert QUESTION in sent[0]["content"]
        return "blue notebook location"

    started = time.monotonic()
    assert await rewritten_query(broken, PROMPTS, messages, 1.0) is None
    assert await rewritten_query(slow, PROMPTS, messages, 0.2) is None
    assert time.monotonic() - started < 2
    assert await rewritten_query(fine, PROMPTS, messages, 1.0) == "blue notebook location"


def ask(proxy: Proxy, messages: list[dict[str, Any]]) -> dict[str, str]:
    with proxy.client() as client:
        raw = client.chat.completions.with_raw_response.create(
            model="gpt-4o-mini", messages=messages, extra_headers={"X-Paperclip-User": "ada"}  # type: ignore[arg-type]
        )
    proxy.drain()
    return dict(raw.headers)


def remember_the_fact(proxy: Proxy) -> None:
    history: list[dict[str, Any]] = [{"role": "user", "content": FACT}]
    ask(proxy, history)
    history += [{"role": "assistant", "content": "Got it."}, {"role": "user", "content": "Thanks, bye!"}]
    ask(proxy, history)


def rewrites_seen(upstream: FakeUpstream) -> list[str]:
    bodies = [str(r.json()["messages"][-1]["content"]) for r in upstream.requests if r.path.endswith("/chat/completions")]
    return [b for b in bodies if "<latest>" in b]


def make(make_proxy: Callable[..., Proxy], **memory: Any) -> Proxy:
    return make_proxy(defaults={"memory": {"profile": False, **memory}})


def test_the_rewrite_finds_what_the_plain_question_misses(make_proxy: Callable[..., Proxy], upstream: FakeUpstream) -> None:
    async def model(request: Request, body: dict[str, Any]) -> Response:
        prompt = str(body["messages"][-1]["content"])
        if "<latest>" in prompt:
            return JSONResponse(completion("blue notebook garage shelf"))
        return JSONResponse(completion("Summary: nothing"))

    upstream.compression = model
    plain = make(make_proxy)
    remember_the_fact(plain)
    assert int(ask(plain, [{"role": "user", "content": QUESTION}])["x-paperclip-memories"]) == 0
    assert rewrites_seen(upstream) == []  # off by default: no extra call

    rewriting = make(make_proxy, query_rewrite=True)
    remember_the_fact(rewriting)
    headers = ask(rewriting, [{"role": "user", "content": QUESTION}])
    assert int(headers["x-paperclip-memories"]) >= 1 and "x-paperclip-degraded" not in headers
    sent = upstream.chat_requests()[-1].json()["messages"][-1]["content"]
    assert "garage" in sent and QUESTION in sent
    assert QUESTION in rewrites_seen(upstream)[-1]  # one call per request, on the latest message


def test_a_failing_rewrite_serves_the_plain_query_undegraded(
    make_proxy: Callable[..., Proxy], upstream: FakeUpstream
) -> None:
    async def model(request: Request, body: dict[str, Any]) -> Response:
        if "<latest>" in str(body["messages"][-1]["content"]):
            if "slow" in str(body["messages"][-1]["content"]):
                await asyncio.sleep(3)
            return JSONResponse({"error": {"message": "overloaded", "type": "server_error"}}, status_code=503)
        return JSONResponse(completion("Summary: nothing"))

    upstream.compression = model
    proxy = make(make_proxy, query_rewrite=True, query_rewrite_timeout_s=0.3)
    remember_the_fact(proxy)
    for question in ("Where is the blue notebook?", "Where is the blue notebook, slow?"):
        started = time.monotonic()
        headers = ask(proxy, [{"role": "user", "content": question}])
        assert time.monotonic() - started < 2.5  # the timeout, not the model's 3 s
        assert int(headers["x-paperclip-memories"]) >= 1 and "x-paperclip-degraded" not in headers
        assert "garage" in upstream.chat_requests()[-1].json()["messages"][-1]["content"]
