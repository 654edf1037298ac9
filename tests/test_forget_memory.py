"""A deleted memory never reaches the upstream again, nor the turns it came from (SPEC §5, §6).

Through real sockets on both stores: a uvicorn proxy before the fake upstream,
which records every body it receives. The conversation is a real model's:
the reply repeats the fact, as replies do.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from proxy.memory.curation.memory_admin import restates
from tests.admin_helpers import admin
from tests.conftest import PROXY_KEY, Proxy, both_stores
from tests.fake_upstream import FakeUpstream, completion, fake_summary

backend = both_stores

FACT = "I am allergic to shellfish, so please keep that in mind."
REPLY = "Understood: you are allergic to shellfish, I will avoid it."
QUESTION = "Which foods am I allergic to? Tell me please."
WORD = "shellfish"


def send(proxy: Proxy, user: str, history: list[dict[str, Any]]) -> str:
    """``history`` as ``user``'s chat request, its recording let land; returns its session."""
    raw = proxy.client(PROXY_KEY).chat.completions.with_raw_response.create(
        model="gpt-4o-mini", messages=history, extra_headers={"X-Paperclip-User": user},  # type: ignore[arg-type]
    )
    proxy.drain()
    return str(raw.headers["x-paperclip-session"])


def chat(proxy: Proxy, user: str, extra: list[dict[str, Any]] | None = None) -> str:
    """The conversation stating ``FACT`` (long enough to be mined), plus ``extra``; returns its session."""
    history: list[dict[str, Any]] = [
        {"role": "user", "content": FACT},
        {"role": "assistant", "content": REPLY},
    ]
    for topic in ("trains", "weather"):
        history.append({"role": "user", "content": f"Tell me something about {topic} in spring."})
        history.append({"role": "assistant", "content": f"Spring {topic} are pleasant enough."})
    history.append({"role": "user", "content": "Thanks, that is all for now."})
    return send(proxy, user, [*history, *(extra or [])])


def sent_in_a_fresh_chat(proxy: Proxy, upstream: FakeUpstream, user: str) -> str:
    """What the upstream received for a new conversation asking ``QUESTION``."""
    proxy.client(PROXY_KEY).chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": QUESTION}],
        extra_headers={"X-Paperclip-User": user},
    )
    proxy.drain()
    return upstream.chat_requests()[-1].body.decode().lower()


def the_memory(proxy: Proxy, user: str) -> dict[str, Any]:
    with admin(proxy) as http:
        found = [m for m in http.get(f"/paperclip/v1/users/{user}/memories").json()["data"]
                 if WORD in m["content"].lower()]
    assert len(found) == 1, found
    return found[0]


def test_a_deleted_memory_and_its_turns_never_reach_the_upstream_again(
    proxy: Proxy, upstream: FakeUpstream
) -> None:
    chat(proxy, "erin")
    assert WORD in sent_in_a_fresh_chat(proxy, upstream, "erin")  # remembered, before
    memory = the_memory(proxy, "erin")
    with admin(proxy) as http:
        r = http.delete(f"/paperclip/v1/users/erin/memories/{memory['id']}")
        assert r.status_code == 200, r.text
        assert r.json()["turns"] == 2 and r.json()["purged"] is False
        kept = http.get("/paperclip/v1/users/erin/fragments", params={"status": "forgotten"}).json()["data"]
        assert sorted(f["role"] for f in kept) == ["assistant", "user"]  # kept, never recalled
    assert WORD not in sent_in_a_fresh_chat(proxy, upstream, "erin")
    # The app resends the whole conversation as it goes on: nothing of it is learned again.
    chat(proxy, "erin", [{"role": "assistant", "content": "Bye!"}, {"role": "user", "content": "One more thing."}])
    assert WORD not in sent_in_a_fresh_chat(proxy, upstream, "erin")


def test_a_purged_memory_leaves_no_turn_behind(proxy: Proxy, upstream: FakeUpstream) -> None:
    chat(proxy, "finn")
    assert WORD in sent_in_a_fresh_chat(proxy, upstream, "finn")  # its trace holds the text now
    memory = the_memory(proxy, "finn")
    with admin(proxy) as http:
        r = http.delete(f"/paperclip/v1/users/finn/memories/{memory['id']}", params={"purge": "true"})
        assert r.status_code == 200, r.text
        assert r.json()["turns"] == 2 and r.json()["purged"] is True
        listed = http.get("/paperclip/v1/users/finn/fragments", params={"status": "all"}).json()["data"]
        assert listed and all(WORD not in f["text"].lower() for f in listed)
        assert WORD not in http.get("/paperclip/v1/users/finn/export").text.lower()
    assert WORD not in sent_in_a_fresh_chat(proxy, upstream, "finn")
    chat(proxy, "finn", [{"role": "assistant", "content": "Bye!"}, {"role": "user", "content": "One more thing."}])
    assert WORD not in sent_in_a_fresh_chat(proxy, upstream, "finn")
    with admin(proxy) as http:
        assert WORD not in http.get("/paperclip/v1/users/finn/export").text.lower()


def test_a_deleted_model_memory_that_named_no_turn_takes_the_turn_most_like_it(
    proxy: Proxy, upstream: FakeUpstream
) -> None:
    """A model's item without ``turns``: its source is found as a supersede finds it, by similarity."""
    fact = {"type": "constraint", "content": "The user is allergic to shellfish.", "key": "user.allergy.shellfish",
            "importance": 0.9, "confidence": 0.9, "source": "user-stated", "expires_at": None, "turns": []}

    async def model(request: Request, body: dict[str, Any]) -> Response:
        prompt = str(body["messages"][-1]["content"])
        if "long-term memories" in prompt:
            return JSONResponse(completion(json.dumps([fact])))
        return JSONResponse(completion(fake_summary(body["messages"])))

    upstream.compression = model
    chat(proxy, "gus")
    assert WORD in sent_in_a_fresh_chat(proxy, upstream, "gus")
    memory = the_memory(proxy, "gus")
    with admin(proxy) as http:
        assert http.delete(f"/paperclip/v1/users/gus/memories/{memory['id']}").json()["turns"] == 2
    assert WORD not in sent_in_a_fresh_chat(proxy, upstream, "gus")


def test_a_deleted_memory_takes_the_turns_that_said_it_again_in_other_words(
    make_proxy: Callable[..., Proxy], upstream: FakeUpstream
) -> None:
    """A user says a fact in several chats, in other words each time, and deletes the memory: none of
    the times it was said reaches the upstream again, though only the first was read as the memory.
    In the bundled model's space, where what restates a memory is measured (``memory_admin.restates``)."""
    proxy = make_proxy(embedding={"model": "bundled"})
    chat(proxy, "hal")
    for again in ("Shellfish gives me hives, just so you know.", "Remember, no shellfish for me, ever."):
        history: list[dict[str, Any]] = [{"role": "user", "content": again}, {"role": "assistant", "content": "Noted."}]
        for topic in ("boats", "clouds"):
            history += [{"role": "user", "content": f"Tell me about {topic}."},
                        {"role": "assistant", "content": f"The {topic} are nice."}]
        history.append({"role": "user", "content": "Bye for now."})
        send(proxy, "hal", history)
    assert WORD in sent_in_a_fresh_chat(proxy, upstream, "hal")
    with admin(proxy) as http:
        said = [m for m in http.get("/paperclip/v1/users/hal/memories").json()["data"] if WORD in m["content"].lower()]
        assert len(said) > 1  # the rules read the first, the reader by meaning the others, as guesses
        (first,) = [m for m in said if m["key"] == "user.allergy.shellfish"]
        r = http.delete(f"/paperclip/v1/users/hal/memories/{first['id']}")
        assert r.status_code == 200, r.text
        assert sorted(r.json()["memories"]) == sorted(m["id"] for m in said)
        left = http.get("/paperclip/v1/users/hal/memories").json()["data"]
        assert not [m for m in left if WORD in m["content"].lower()]
    assert WORD not in sent_in_a_fresh_chat(proxy, upstream, "hal")


@pytest.mark.parametrize(("turn", "cosine", "said"), [
    ("Shellfish gives me hives, just so you know.", 0.74, True),
    ("Remember, no shellfish for me, ever.", 0.70, True),
    ("We had shellfish pasta in Rome last summer.", 0.45, False),  # named in passing: not the fact
    ("I'm allergic to cats.", 0.40, False),
    ("Seafood of any kind makes me ill.", 0.65, False),  # close, but names none of its words
    ("Shellfish gives me hives.", None, False),  # no cosine: nothing is taken on words alone
])
def test_a_turn_restates_a_memory_when_close_in_meaning_and_naming_a_word_of_it(
    turn: str, cosine: float | None, said: bool
) -> None:
    assert restates("The user is allergic to shellfish.", turn, cosine) is said


# Cosines are the bundled model's for each pair: near in meaning, and still another fact.
@pytest.mark.parametrize(("memory", "text", "cosine", "said"), [
    ("The user lives in Lisbon.", "The user's sister lives in Lisbon.", 0.84, False),
    ("The user lives in Lisbon.", "My sister Anna lives in Lisbon too, she works as a nurse there", 0.66, False),
    ("The user is allergic to peanuts.", "The user's cat is allergic to peanuts.", 0.85, False),
    ("The user is allergic to peanuts.", "My cat Zorblax is allergic to peanuts.", 0.65, False),
    ("The user has a dentist appointment on Monday.", "The user has a doctor appointment on Friday.", 0.75, False),
    ("The user's order A12345 is delayed.", "The user's order B99881 is delayed.", 0.87, False),
    ("The user's sister lives in Lisbon.", "I live in Lisbon.", 0.8, False),
    ("用户住在北京。", "用户的姐姐住在北京。", 0.92, False),
    ("用户对花生过敏。", "我家猫对花生过敏。", 0.87, False),
    # the same fact, of the same one
    ("The user's order A12345 is delayed.", "Order A12345 still hasn't arrived.", 0.8, True),
    ("The user is allergic to shellfish.", "I'm allergic to shellfish. My sister Anna is too.", 0.7, True),
    ("The user's cat Zorblax is allergic to peanuts.", "Since Zorblax is allergic to peanuts, buy salmon treats.",
     0.7, True),
    ("The user's cat Zorblax is allergic to peanuts.", "My cat can't eat peanuts.", 0.7, True),
    ("The user's sister lives in Lisbon.", "My sister moved to Lisbon last year.", 0.8, True),
    ("用户对花生过敏。", "我对花生过敏，千万别放。", 0.82, True),
    ("用户对虾过敏。", "吃虾会让我浑身起红疹。", 0.71, True),  # 对虾 is one word to the segmenter, 虾 another
    ("用户对虾过敏。", "我妹妹吃虾会起红疹。", 0.75, False),
])
def test_a_fact_of_someone_or_something_else_never_restates_a_memory(
    memory: str, text: str, cosine: float, said: bool
) -> None:
    assert restates(memory, text, cosine) is said


def test_a_deleted_memory_takes_a_later_reply_that_said_it_again(
    make_proxy: Callable[..., Proxy], upstream: FakeUpstream
) -> None:
    proxy = make_proxy(embedding={"model": "bundled"})
    chat(proxy, "ivo")
    send(proxy, "ivo", [
        {"role": "user", "content": "What should I cook for the party on Saturday?"},
        {"role": "assistant", "content": "Since you are allergic to shellfish, skip the paella."},
        {"role": "user", "content": "Good point, thanks."},
    ])
    memory = the_memory(proxy, "ivo")
    with admin(proxy) as http:
        assert http.delete(f"/paperclip/v1/users/ivo/memories/{memory['id']}").status_code == 200
    assert WORD not in sent_in_a_fresh_chat(proxy, upstream, "ivo")


def test_deleting_a_memory_keeps_the_memories_and_turns_of_other_facts_near_it(
    make_proxy: Callable[..., Proxy], upstream: FakeUpstream
) -> None:
    """Forget one: the user's home goes, purged; their sister's home, near in meaning, stays, turn and all."""
    proxy = make_proxy(embedding={"model": "bundled"})
    send(proxy, "ines", [
        {"role": "user", "content": "I live in Lisbon, in an old flat near the river."},
        {"role": "assistant", "content": "Lovely city."},
        {"role": "user", "content": "My sister Anna lives in Lisbon too, she works as a nurse there."},
        {"role": "assistant", "content": "How nice to have family close."},
    ])
    with admin(proxy) as http:
        mine = http.post("/paperclip/v1/users/ines/memories", json={"content": "The user lives in Lisbon."}).json()
        hers = http.post("/paperclip/v1/users/ines/memories",
                         json={"content": "The user's sister lives in Lisbon.", "about": "sister"}).json()
        assert mine["action"] == hers["action"] == "added", (mine, hers)
        mine, hers = mine["item"], hers["item"]
        r = http.delete(f"/paperclip/v1/users/ines/memories/{mine['id']}", params={"purge": "true"})
        assert r.status_code == 200, r.text
        assert hers["id"] not in r.json()["memories"]
        left = [m["id"] for m in http.get("/paperclip/v1/users/ines/memories").json()["data"]]
        turns = [f["text"] for f in http.get("/paperclip/v1/users/ines/fragments").json()["data"]]
    assert hers["id"] in left and mine["id"] not in left
    assert any("nurse" in t for t in turns)  # the sister's turn is hers: kept
    assert not any("near the river" in t for t in turns)  # the user's own: purged
