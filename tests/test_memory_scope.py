"""``memory.scope: session``: each session remembers for itself (SPEC §4), through real sockets on both stores.

Its facts, its profile and its conflicts are its own: what another session of
the same user says neither shows in it nor changes what it said.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.admin_helpers import admin
from tests.conftest import PROXY_KEY, Proxy, both_stores
from tests.fake_upstream import FakeUpstream

backend = both_stores


def chat(proxy: Proxy, upstream: FakeUpstream, session: str, history: list[dict[str, Any]]) -> str:
    """Send ``history`` in ``session`` of user ada; what the upstream received, as text."""
    proxy.client(PROXY_KEY).chat.completions.create(
        model="gpt-4o-mini", messages=history,  # type: ignore[arg-type]
        extra_headers={"X-Paperclip-User": "ada", "X-Paperclip-Session": session},
    )
    proxy.drain()
    return upstream.chat_requests()[-1].body.decode()


def said(proxy: Proxy, upstream: FakeUpstream, session: str, statement: str) -> list[dict[str, Any]]:
    history = [{"role": "user", "content": statement}]
    for topic in ("naps", "tea", "rain"):
        history += [{"role": "assistant", "content": "Noted."}, {"role": "user", "content": f"Thoughts on {topic}?"}]
        chat(proxy, upstream, session, history)
    return history


def asked(proxy: Proxy, upstream: FakeUpstream, session: str, history: list[dict[str, Any]], question: str) -> str:
    """``question`` at the end of ``history`` in ``session``: what the upstream received."""
    turn = [{"role": "assistant", "content": "Sure."}, {"role": "user", "content": question}]
    return chat(proxy, upstream, session, [*history, *turn])


def test_each_session_keeps_its_own_facts_profile_and_conflicts(
    make_proxy: Callable[..., Proxy], upstream: FakeUpstream
) -> None:
    proxy = make_proxy(defaults={"memory": {"scope": "session"}})
    paris = said(proxy, upstream, "A", "I live in Paris, and I'm allergic to peanuts.")
    said(proxy, upstream, "B", "We moved last month: I live in Berlin now.")
    with admin(proxy) as http:
        mine = {m["content"]: m for m in http.get("/paperclip/v1/users/ada/memories?status=all").json()["data"]}
    assert mine["The user lives in Paris."]["status"] == "active"  # Berlin, said elsewhere, replaced nothing
    sent = asked(proxy, upstream, "A", paris, "Which grocery delivery service works where I live?")
    assert "Paris" in sent and "Berlin" not in sent
    assert "may have changed since" not in sent  # another session's change marks nothing here
    fresh = chat(proxy, upstream, "C", [{"role": "user", "content": "Can you suggest a snack for my trip?"}])
    assert "peanuts" not in fresh and "Paris" not in fresh  # a new session starts with no profile


def test_a_change_said_in_another_session_marks_nothing_in_this_one(
    make_proxy: Callable[..., Proxy], upstream: FakeUpstream
) -> None:
    # With no model both are read loosely (one key for all Chinese statements): in one scope the later
    # marks the earlier "may have changed since" (tests/test_changed_facts.py); here they are two scopes.
    proxy = make_proxy(defaults={"memory": {"scope": "session"}})
    drive = said(proxy, upstream, "A", "我每天开车上班。")
    said(proxy, upstream, "B", "车上个月卖了，我现在骑自行车上班。")
    sent = asked(proxy, upstream, "A", drive, "下雨天上班路上有什么建议？")
    assert "开车" in sent and "自行车" not in sent and "may have changed since" not in sent
