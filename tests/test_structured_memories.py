"""Structured memories end to end: extracted after the response, recalled in later chats, under control."""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from tests.admin_helpers import admin
from tests.conftest import Proxy, both_stores
from tests.fake_upstream import FakeUpstream, completion

backend = both_stores  # every test that starts a proxy runs on SQLite and on PostgreSQL

FILLER_TOPICS = ("trains", "weather", "gardening", "chess", "the ocean", "bread", "music", "bikes")


def chat(proxy: Proxy, user: str, history: list[dict[str, Any]]) -> dict[str, str]:
    with proxy.client() as client:
        raw = client.chat.completions.with_raw_response.create(
            model="gpt-4o-mini", messages=history, extra_headers={"X-Paperclip-User": user}  # type: ignore[arg-type]
        )
    proxy.drain()
    return dict(raw.headers)


def replay(proxy: Proxy, user: str, statements: list[str], filler_turns: int) -> list[dict[str, Any]]:
    """A chat as a real client runs it: the whole history resent on every request."""
    history: list[dict[str, Any]] = [{"role": "system", "content": "You are a helpful shop assistant."}]
    lines = list(statements)
    lines += [f"Tell me one fact about {FILLER_TOPICS[i % len(FILLER_TOPICS)]}, number {i}." for i in range(filler_turns)]
    for line in lines:
        history.append({"role": "user", "content": line})
        chat(proxy, user, history)
        history.append({"role": "assistant", "content": "Sure. " + line.split(",")[0].lower()})
    return history


def forwarded_last_user(upstream: FakeUpstream) -> str:
    return json.dumps(upstream.chat_requests()[-1].json()["messages"][-1]["content"], ensure_ascii=False)


def items(proxy: Proxy, user: str, all_: bool = False) -> list[dict[str, Any]]:
    with admin(proxy) as http:
        got = http.get(f"/paperclip/v1/users/{user}/memories", params={"all": "true"} if all_ else {})
    assert got.status_code == 200, got.text
    return list(got.json()["data"])


def fast(make_proxy: Callable[..., Proxy], **memory: Any) -> Proxy:
    # A window big enough that the filler never compresses: recall must come from the index.
    return make_proxy(
        defaults={"context": {"recent_window_tokens": 100_000}, "memory": {"extract_every_messages": 4, **memory}}
    )


def test_cat_allergy_recalled_80_turns_and_one_new_chat_later(
    make_proxy: Callable[..., Proxy], upstream: FakeUpstream
) -> None:
    # Without the profile, which would show the allergy on every request, not as this question's hit.
    proxy = fast(make_proxy, profile=False)
    replay(proxy, "mia", ["My cat Mochi is allergic to peanuts, keep that in mind."], filler_turns=40)
    stored = items(proxy, "mia")
    assert any("peanut" in i["key"] and "allerg" in i["key"] for i in stored), stored
    headers = chat(proxy, "mia", [{"role": "user", "content": "Can I give my cat a peanut butter treat?"}])
    assert int(headers["x-paperclip-memories"]) >= 1
    sent = forwarded_last_user(upstream)
    assert "allergic to peanuts" in sent
    assert "about the user's cat" in sent  # the card says whom the fact is about
    # Recall never writes: the injected item's access is recorded after the response.
    allergy = [i for i in items(proxy, "mia") if "peanut" in i["key"]]
    assert allergy and allergy[0]["access_count"] == 1 and allergy[0]["last_access"] is not None


def test_card_ending_and_delivery_deadline_recalled(
    make_proxy: Callable[..., Proxy], upstream: FakeUpstream
) -> None:
    proxy = fast(make_proxy)
    replay(
        proxy,
        "ray",
        [
            "Please charge my platinum card ending 8865 for the order.",
            "The parcel must arrive before Wednesday or I want a refund.",
        ],
        filler_turns=10,
    )
    chat(proxy, "ray", [{"role": "user", "content": "Which card will you charge for my order?"}])
    assert "8865" in forwarded_last_user(upstream)
    chat(proxy, "ray", [{"role": "user", "content": "When must my parcel arrive at the latest?"}])
    assert "Wednesday" in forwarded_last_user(upstream)


def test_a_like_replaced_by_a_dislike_only_the_newer_is_injected(
    make_proxy: Callable[..., Proxy], upstream: FakeUpstream
) -> None:
    proxy = fast(make_proxy)
    replay(proxy, "lee", ["I love spicy food, the hotter the better."], filler_turns=6)
    replay(proxy, "lee", ["Update: I no longer eat spicy food, doctor's orders."], filler_turns=6)
    history = items(proxy, "lee", all_=True)
    spicy = [i for i in history if "spicy" in i["key"]]
    assert {i["status"] for i in spicy} == {"active", "superseded"}, spicy
    chat(proxy, "lee", [{"role": "user", "content": "Do I like spicy food? Suggest a dinner for me."}])
    sent = forwarded_last_user(upstream)
    assert "no longer" in sent
    assert "hotter the better" not in sent  # neither the old item nor the turn it came from


def test_chinese_allergy_recalled_in_a_new_chat(make_proxy: Callable[..., Proxy], upstream: FakeUpstream) -> None:
    proxy = fast(make_proxy)
    replay(proxy, "wang", ["我的猫对花生过敏，请记住。"], filler_turns=6)
    assert any("peanut" in i["key"] for i in items(proxy, "wang"))
    chat(proxy, "wang", [{"role": "user", "content": "我的猫对什么过敏？"}])
    assert "花生" in forwarded_last_user(upstream)


def test_a_temporary_fact_is_gone_after_expiry(make_proxy: Callable[..., Proxy], upstream: FakeUpstream) -> None:
    proxy = fast(make_proxy)
    soon = (dt.datetime.now(dt.UTC) + dt.timedelta(seconds=2)).isoformat()
    with admin(proxy) as http:
        added = http.post(
            "/paperclip/v1/users/kai/memories",
            json={"content": "The user is staying at the Hotel Lutetia in Paris this week.", "type": "event",
                  "expires_at": soon},
        )
    assert added.status_code == 201, added.text
    chat(proxy, "kai", [{"role": "user", "content": "Which hotel am I staying at in Paris?"}])
    assert "Lutetia" in forwarded_last_user(upstream)
    time.sleep(2.5)
    chat(proxy, "kai", [{"role": "user", "content": "Which hotel am I staying at in Paris?"}])
    assert "Lutetia" not in forwarded_last_user(upstream)
    from proxy.server.maintenance import run_maintenance

    counts = proxy.server.call(run_maintenance(proxy.runtime.settings, proxy.store))
    assert counts["expired"] == 1
    assert items(proxy, "kai", all_=True) == []


def test_extraction_falls_back_to_rules_when_the_model_is_down(
    make_proxy: Callable[..., Proxy], upstream: FakeUpstream
) -> None:
    async def down(request: Request, body: dict[str, Any]) -> Response:
        return JSONResponse({"error": {"message": "overloaded", "type": "server_error"}}, status_code=500)

    upstream.compression = down
    proxy = fast(make_proxy)
    replay(proxy, "zoe", ["My name is Zoe Park and I am allergic to shellfish."], filler_turns=4)
    keys = {i["key"] for i in items(proxy, "zoe")}
    assert "user.name" in keys and any("shellfish" in k for k in keys), keys


def test_extraction_uses_the_models_json_even_when_wrapped_in_prose(
    make_proxy: Callable[..., Proxy], upstream: FakeUpstream
) -> None:
    async def wrapped(request: Request, body: dict[str, Any]) -> Response:
        prompt = str(body["messages"][-1]["content"])
        if "long-term memories" not in prompt:
            return JSONResponse(completion("Turns 1–2: short."))
        item = {"type": "preference", "content": "The user prefers aisle seats on long flights.",
                "key": "user.preference.seat", "importance": 0.6, "confidence": 0.9,
                "source": "user-stated", "expires_at": None, "turns": [1]}
        return JSONResponse(completion("Here you go:\n```json\n[" + json.dumps(item) + ",]\n```"))

    upstream.compression = wrapped
    proxy = fast(make_proxy)
    replay(proxy, "ann", ["On long flights I always pick an aisle seat."], filler_turns=4)
    assert [i["key"] for i in items(proxy, "ann")] == ["user.preference.seat"]


def test_replaying_a_chat_twice_adds_no_items(make_proxy: Callable[..., Proxy], upstream: FakeUpstream) -> None:
    proxy = fast(make_proxy)
    statements = ["My name is Omar.", "I'm allergic to kiwi.", "Remind me to call the dentist."]
    replay(proxy, "omar", statements, filler_turns=6)
    first = len(items(proxy, "omar"))
    assert first >= 3
    replay(proxy, "omar", statements, filler_turns=6)
    # A second chat that states the same facts (and now gets them injected back) adds nothing.
    replay(proxy, "omar", ["Hi again!", *statements], filler_turns=6)
    assert len(items(proxy, "omar")) == first
