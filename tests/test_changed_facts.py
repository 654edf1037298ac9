"""A changed fact's old value is never injected again, as a memory or as a raw turn (SPEC §5), on both stores.

Through real sockets: what the fake upstream receives for a fresh chat is
read for the old value.
"""

from __future__ import annotations

from tests.admin_helpers import admin, ask
from tests.conftest import PROXY_KEY, Proxy, both_stores
from tests.fake_upstream import FakeUpstream

backend = both_stores

QUESTION = "Which grocery delivery service would work for where I live?"


def say(proxy: Proxy, user: str, statement: str, reply: str = "Thanks for telling me.") -> None:
    """A chat stating ``statement``, answered by ``reply``, long enough for its memories to be mined."""
    history = [{"role": "user", "content": statement}, {"role": "assistant", "content": reply}]
    for topic in ("naps", "tea"):
        history += [{"role": "user", "content": f"How do you feel about {topic}?"},
                    {"role": "assistant", "content": f"{topic.title()} are fine by me."}]
    history.append({"role": "user", "content": "Great, talk later!"})
    proxy.client(PROXY_KEY).chat.completions.create(
        model="gpt-4o-mini", messages=history, extra_headers={"X-Paperclip-User": user}  # type: ignore[arg-type]
    )
    proxy.drain()


def forwarded(proxy: Proxy, upstream: FakeUpstream, user: str) -> str:
    ask(proxy, user, QUESTION)
    return upstream.chat_requests()[-1].body.decode()


def test_a_value_said_twice_then_changed_is_never_injected_again(proxy: Proxy, upstream: FakeUpstream) -> None:
    say(proxy, "ana", "I live in Boston these days.")
    say(proxy, "ana", "Just so you know, I live in Boston.")  # the same memory, said in other words
    assert forwarded(proxy, upstream, "ana").count("Boston") >= 2
    say(proxy, "ana", "Big news: I moved to Denver last week!")
    sent = forwarded(proxy, upstream, "ana")
    assert "Denver" in sent and "Boston" not in sent


def test_the_reply_that_repeated_a_changed_value_is_never_injected_again(proxy: Proxy, upstream: FakeUpstream) -> None:
    # An assistant answers a fact by repeating it as often as not: the reply says the old value too.
    say(proxy, "cy", "I live in Boston these days.", reply="Boston is a wonderful place to live, enjoy it!")
    assert "wonderful place" in forwarded(proxy, upstream, "cy")
    say(proxy, "cy", "Big news: I moved to Denver last week!")
    sent = forwarded(proxy, upstream, "cy")
    assert "Denver" in sent and "Boston" not in sent


def test_a_memory_edited_by_hand_hides_the_turns_that_said_its_old_value(
    proxy: Proxy, upstream: FakeUpstream
) -> None:
    say(proxy, "ben", "I live in Boston these days.")
    assert "Boston" in forwarded(proxy, upstream, "ben")
    with admin(proxy) as http:
        (home,) = [m for m in http.get("/paperclip/v1/users/ben/memories").json()["data"] if "Boston" in m["content"]]
        r = http.patch(f"/paperclip/v1/users/ben/memories/{home['id']}", json={"content": "Ben lives in Denver."})
        assert r.status_code == 200, r.text
    sent = forwarded(proxy, upstream, "ben")
    assert "Denver" in sent and "Boston" not in sent
