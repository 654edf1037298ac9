"""A changed fact's old value is never injected again, as a memory or as a raw turn (SPEC §5), on both stores.

Through real sockets: what the fake upstream receives for a fresh chat is
read for the old value.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from tests.admin_helpers import admin, ask
from tests.conftest import PROXY_KEY, Proxy, both_stores
from tests.fake_upstream import FakeUpstream

backend = both_stores

QUESTION = "Which grocery delivery service would work for where I live?"
COMMUTE = "下雨天上班路上有什么建议？"


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


def forwarded(proxy: Proxy, upstream: FakeUpstream, user: str, question: str = QUESTION) -> str:
    ask(proxy, user, question)
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


def test_a_later_change_read_loosely_marks_the_earlier_fact_and_hides_its_turn(
    proxy: Proxy, upstream: FakeUpstream
) -> None:
    # With no model, Chinese statements are filed under one key for all: neither supersedes the other.
    say(proxy, "dai", "我每天开车上班。")
    assert "User: 我每天开车上班。" in forwarded(proxy, upstream, "dai", COMMUTE)
    say(proxy, "dai", "车上个月卖了，我现在骑自行车上班。")
    lines = json.loads(forwarded(proxy, upstream, "dai", COMMUTE))["messages"][-1]["content"].split("\n")
    (old,) = [line for line in lines if "开车" in line]  # once: its card, not its turn as well
    assert old.startswith("[") and "may have changed since] 我每天开车上班。" in old
    (new,) = [line for line in lines if "自行车" in line and line.startswith("[")]
    assert "may have changed since" not in new


def test_a_turn_a_later_one_changed_arrives_marked_on_a_card_of_its_own(proxy: Proxy, upstream: FakeUpstream) -> None:
    # No reader takes either sentence as a fact: only the turns are recalled, and the later one says the change.
    say(proxy, "eve", "I always book a window seat.", reply="Noted: a window seat.")
    say(proxy, "eve", "These days I take the aisle seat.")
    lines = json.loads(forwarded(proxy, upstream, "eve", "Book me a seat for the Paris flight."))["messages"][-1][
        "content"].split("\n")
    old = lines.index("User: I always book a window seat.")
    assert lines[old - 1].endswith("· may have changed since]") and lines[old + 1] == "Assistant: Noted: a window seat."
    new = lines.index("User: These days I take the aisle seat.")
    assert not any("may have changed since" in line for line in lines[old + 2 : new + 1])


def test_a_value_said_for_a_while_leaves_the_standing_one_in_place(proxy: Proxy, upstream: FakeUpstream) -> None:
    say(proxy, "fay", "I'm vegan.")
    say(proxy, "fay", "I'm vegetarian this week for a challenge.")
    sent = forwarded(proxy, upstream, "fay", "Can you suggest a dinner recipe?")
    assert "The user is vegan." in sent  # not replaced: it holds again once the week is over
    with admin(proxy) as http:
        diet = {m["content"]: m for m in http.get("/paperclip/v1/users/fay/memories").json()["data"]}
    assert diet["The user is vegan."]["standing"] and diet["The user is vegan."]["status"] == "active"
    assert not diet["The user is vegetarian."]["standing"] and diet["The user is vegetarian."]["expires_at"]


def test_a_chinese_move_no_word_of_which_the_old_home_shares_marks_it(proxy: Proxy, upstream: FakeUpstream) -> None:
    say(proxy, "gu", "我住在成都。")
    say(proxy, "gu", "我们上个月搬去了杭州。")
    lines = json.loads(forwarded(proxy, upstream, "gu", "周末附近有什么好玩的地方？"))["messages"][-1]["content"].split("\n")
    (old,) = [line for line in lines if "成都" in line]
    assert old.startswith("[") and "may have changed since]" in old
    assert any("杭州" in line and "changed" not in line for line in lines)


def test_a_fact_whose_change_no_reader_took_is_marked_in_the_block_and_the_profile(
    proxy: Proxy, upstream: FakeUpstream
) -> None:
    # The rules read the dog's name; no reader takes the rename: only its turn says the change.
    say(proxy, "hal", "My dog Biscuit loves the beach.")
    question = "Ideas for a fun afternoon with my dog?"
    assert "] The user's dog is called Biscuit." in forwarded(proxy, upstream, "hal", question)
    say(proxy, "hal", "We renamed the dog, she's Pepper now.")
    lines = json.loads(forwarded(proxy, upstream, "hal", question))["messages"][-1]["content"].split("\n")
    (old,) = [line for line in lines if line.endswith("The user's dog is called Biscuit.")]
    assert "may have changed since]" in old
    assert "User: We renamed the dog, she's Pepper now." in lines
    with admin(proxy) as http:
        cards = [d["card"] for d in http.get("/paperclip/v1/users/hal/profile").json()["data"]]
    assert [c for c in cards if "Biscuit" in c] == [old]  # the profile endpoint marks it as recall does


def test_the_turn_a_replaced_reading_came_from_arrives_marked(
    make_proxy: Callable[..., Proxy], upstream: FakeUpstream
) -> None:
    # With no model, the first job is read by meaning (a guess, in the bundled model's space) and the
    # second replaces it: the reading may be wrong, so its turn stays stored, but never again as current.
    proxy = make_proxy(embedding={"model": "bundled"})
    say(proxy, "ivy", "My job is teaching maths to teenagers.", reply="Teaching maths, got it.")
    say(proxy, "ivy", "I became a software developer this year.")
    with admin(proxy) as http:
        status = {m["content"]: m["status"] for m in http.get("/paperclip/v1/users/ivy/memories?status=all").json()[
            "data"]}
    assert status["My job is teaching maths to teenagers."] == "superseded"
    lines = json.loads(forwarded(proxy, upstream, "ivy", "What do you know about my job and my maths teaching?"))[
        "messages"][-1]["content"].split("\n")
    old = lines.index("User: My job is teaching maths to teenagers.")
    assert lines[old - 1].endswith("· may have changed since]")
    assert lines[old + 1] == "Assistant: Teaching maths, got it."  # the reply to it, on its card
    assert any("software developer" in line and "changed" not in line for line in lines)
