from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.conftest import Proxy, both_stores
from tests.fake_upstream import FakeUpstream

backend = both_stores  # every test that starts a proxy runs on SQLite and on PostgreSQL


def test_fact_from_300_turns_ago_comes_back(make_proxy: Callable[..., Proxy], upstream: FakeUpstream) -> None:
    proxy = make_proxy()
    client = proxy.client()
    history: list[dict[str, Any]] = [{"role": "system", "content": "You are helpful."}]
    history.append({"role": "user", "content": "My cat Biscuit is allergic to peanuts, remember that."})
    history.append({"role": "assistant", "content": "Noted: Biscuit must never eat peanuts."})
    for i in range(150):
        history.append({"role": "user", "content": f"Let us talk about topic number {i} of the weather and trains."})
        history.append({"role": "assistant", "content": f"Sure, topic {i}: trains run on rails and weather changes."})
    history.append({"role": "user", "content": "Which food is my cat Biscuit allergic to?"})
    raw = client.chat.completions.with_raw_response.create(model="gpt-4o-mini", messages=history)
    proxy.drain()
    # The first request indexes everything after the response; ask again.
    raw = client.chat.completions.with_raw_response.create(model="gpt-4o-mini", messages=history)
    proxy.drain()
    assert int(raw.headers["x-paperclip-memories"]) >= 1
    sent = upstream.chat_requests()[-1].json()["messages"]
    assert "peanuts" in str(sent[-1]["content"])
    assert "<paperclip-memory>" in str(sent[-1]["content"])
    assert int(raw.headers["x-paperclip-tokens-forwarded"]) < int(raw.headers["x-paperclip-tokens-in"])
