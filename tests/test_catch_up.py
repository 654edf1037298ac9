"""Before a request's recall, the user's other chats catch up (``proxy/pipeline/catch_up.py``).

First ``CatchUp`` alone, on an event loop: it waits for the records of the
user's other chats and for their quiet extraction, never for the request's own
chat nor another user's, and past ``within_s`` it goes on without cancelling
anything. Then through the proxy on real sockets, with a compression model that
never answers JSON (the rules extract): a fact said as a chat's last words, under
the extraction cadence, reaches the very next request of the user in a new chat.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from proxy.pipeline.catch_up import CatchUp
from proxy.pipeline.quiet_extraction import QuietExtraction
from tests.admin_helpers import admin, chat_turn_by_turn
from tests.conftest import Proxy
from tests.fake_upstream import FakeUpstream

HOUR = 3600.0
WAIT_S = 30.0  # a bound on waiting, never reached when the code is right


async def _recording(catching_up: CatchUp, key: tuple[str, str, str], hold: asyncio.Event, log: list[str]) -> None:
    with catching_up.recording(key):
        await hold.wait()
        log.append(f"recorded {key[2]}")


async def test_a_request_waits_for_the_record_of_the_users_other_chat_then_its_quiet_work() -> None:
    quiet, log, hold = QuietExtraction(), list[str](), asyncio.Event()
    catching_up = CatchUp(quiet)

    async def work() -> None:
        log.append("extracted chat-1")

    quiet.arm(("t", "ada", "chat-1"), HOUR, work)
    record = asyncio.create_task(_recording(catching_up, ("t", "ada", "chat-1"), hold, log))
    await asyncio.sleep(0)
    waiting = asyncio.create_task(catching_up.wait("t", "ada", "chat-2", WAIT_S))
    await asyncio.sleep(0.05)
    assert not waiting.done() and log == []  # the other chat's record still runs
    hold.set()
    assert await waiting is True
    assert log == ["recorded chat-1", "extracted chat-1"]
    await record
    await quiet.close()


async def test_a_request_never_waits_for_its_own_chat_nor_another_users() -> None:
    quiet, log, hold = QuietExtraction(), list[str](), asyncio.Event()
    catching_up = CatchUp(quiet)
    records = [asyncio.create_task(_recording(catching_up, key, hold, log))
               for key in (("t", "ada", "chat-2"), ("t", "bo", "chat-1"), ("u", "ada", "chat-1"))]
    await asyncio.sleep(0)
    assert catching_up.records_of_others("t", "ada", "chat-2") == []
    assert await asyncio.wait_for(catching_up.wait("t", "ada", "chat-2", WAIT_S), 1.0) is True
    hold.set()
    await asyncio.gather(*records)
    assert catching_up.records_of_others("t", "ada", "chat-3") == []  # each record unregisters as it ends
    await quiet.close()


async def test_past_its_time_a_request_goes_on_and_the_work_is_not_cancelled() -> None:
    quiet, log, hold = QuietExtraction(), list[str](), asyncio.Event()
    catching_up = CatchUp(quiet)

    async def work() -> None:
        await hold.wait()
        log.append("extracted chat-1")

    quiet.arm(("t", "ada", "chat-1"), HOUR, work)
    assert await catching_up.wait("t", "ada", "chat-2", 0.05) is False
    hold.set()
    await asyncio.wait_for(quiet.close(), WAIT_S)
    assert log == ["extracted chat-1"]  # started by the wait, finished after it


async def test_no_time_to_wait_waits_for_nothing_and_starts_nothing() -> None:
    quiet, log = QuietExtraction(), list[str]()

    async def work() -> None:
        log.append("extracted chat-1")

    quiet.arm(("t", "ada", "chat-1"), HOUR, work)
    assert await CatchUp(quiet).wait("t", "ada", "chat-2", 0) is False
    assert quiet.waiting == 1
    await quiet.close()
    assert log == []


# ---------------------------------------------------------------- through the proxy


LAST_WORDS = ("Can you suggest a good book for a long flight?", "Thanks, that helps.",
              "Oh, before I go: I'm allergic to shellfish.")


def test_a_chats_last_words_reach_the_users_very_next_request_in_a_new_chat(
    make_proxy: Callable[..., Proxy], upstream: FakeUpstream
) -> None:
    # A wait long enough for a busy machine (the default, 2 s, bounds what a request gives up in real use).
    proxy = make_proxy(defaults={"memory": {"extract_every_messages": 6, "extract_quiet_s": HOUR,
                                            "extract_wait_s": 60}})
    chat_turn_by_turn(proxy, "cy", "chat-1", *LAST_WORDS)  # five messages when the fact is said: under the cadence
    chat_turn_by_turn(proxy, "cy", "chat-2", "What should I cook for dinner tonight?")
    forwarded = upstream.chat_requests()[-1].body.decode()
    assert "shellfish" in forwarded


def test_with_no_time_to_wait_the_next_request_goes_without_and_the_one_after_has_it(
    make_proxy: Callable[..., Proxy], upstream: FakeUpstream
) -> None:
    proxy = make_proxy(defaults={"memory": {"extract_every_messages": 6, "extract_quiet_s": HOUR,
                                            "extract_wait_s": 0}})
    chat_turn_by_turn(proxy, "dee", "chat-1", *LAST_WORDS)
    proxy.drain()
    chat_turn_by_turn(proxy, "dee", "chat-2", "What should I cook for dinner tonight?")
    assert "shellfish" not in upstream.chat_requests()[-1].body.decode()
    proxy.drain()  # its record extracted chat-1's last words
    chat_turn_by_turn(proxy, "dee", "chat-3", "What should I cook for dinner tomorrow?")
    assert "shellfish" in upstream.chat_requests()[-1].body.decode()


async def test_work_waited_for_in_vain_is_not_waited_for_again() -> None:
    """A record held up (a slow model, a store timing out) costs one request the wait, not each one."""
    quiet, log, hold = QuietExtraction(), list[str](), asyncio.Event()
    catching_up = CatchUp(quiet)
    record = asyncio.create_task(_recording(catching_up, ("t", "ada", "chat-1"), hold, log))
    await asyncio.sleep(0)
    assert await catching_up.wait("t", "ada", "chat-2", 0.05) is False  # waited, in vain
    again = asyncio.create_task(catching_up.wait("t", "ada", "chat-2", WAIT_S))
    await asyncio.sleep(0)
    assert again.done() and again.result() is False  # not waited for again: done in its first step
    hold.set()
    await record
    assert await catching_up.wait("t", "ada", "chat-2", WAIT_S) is True and log == ["recorded chat-1"]
    await quiet.close()


@pytest.mark.parametrize("forget", ["/paperclip/v1/users/eve", "/paperclip/v1/sessions/chat-1"])
def test_a_forgotten_chats_last_words_are_never_extracted_again(
    make_proxy: Callable[..., Proxy], upstream: FakeUpstream, forget: str
) -> None:
    """The chat's last words wait to be extracted when the user or the chat is forgotten: the next request,
    which catches up, finds them gone from the store and extracts nothing of them."""
    proxy = make_proxy(defaults={"memory": {"extract_every_messages": 6, "extract_quiet_s": HOUR}})
    chat_turn_by_turn(proxy, "eve", "chat-1", *LAST_WORDS)
    proxy.drain()
    with admin(proxy) as http:
        assert http.delete(forget).status_code == 200
    chat_turn_by_turn(proxy, "eve", "chat-2", "What should I cook for dinner tonight?")
    proxy.drain()
    assert "shellfish" not in upstream.chat_requests()[-1].body.decode()
    with admin(proxy) as http:
        assert not any("shellfish" in m["content"] for m in http.get("/paperclip/v1/users/eve/memories").json()["data"])


def test_a_forgotten_conversation_sent_again_gives_back_no_memory(
    make_proxy: Callable[..., Proxy], upstream: FakeUpstream
) -> None:
    """A client that still holds a conversation forgotten through the admin API sends it again: its turns are
    not stored again, and nothing is extracted of them."""
    proxy = make_proxy(defaults={"memory": {"extract_every_messages": 2}})
    lines = ("I'm allergic to shellfish, by the way.", "Thanks, that helps.")
    chat_turn_by_turn(proxy, "fay", "chat-1", *lines)
    proxy.drain()
    with admin(proxy) as http:
        assert any("shellfish" in m["content"] for m in http.get("/paperclip/v1/users/fay/memories").json()["data"])
        assert http.delete("/paperclip/v1/sessions/chat-1").status_code == 200
        assert http.get("/paperclip/v1/users/fay/memories").json()["data"] == []
    chat_turn_by_turn(proxy, "fay", "chat-1", *lines, "And what about a good book for a flight?")
    proxy.drain()
    with admin(proxy) as http:
        assert not any("shellfish" in m["content"] for m in http.get("/paperclip/v1/users/fay/memories").json()["data"])
