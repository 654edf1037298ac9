"""A chat's last messages are extracted once it goes quiet, or at the same user's next request."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from proxy.pipeline.quiet_extraction import QuietExtraction
from tests.admin_helpers import admin, chat_turn_by_turn
from tests.conftest import Proxy

HOUR = 3600.0
WAIT_S = 30.0  # a bound on waiting for background work, not a measurement


class Log:
    def __init__(self) -> None:
        self.ran: list[str] = []
        self.event = asyncio.Event()

    def work(self, name: str, hold: asyncio.Event | None = None) -> Callable[[], Any]:
        async def run() -> None:
            if hold is not None:
                await hold.wait()
            self.ran.append(name)
            self.event.set()

        return run


async def test_a_quiet_chat_runs_its_work_once_and_a_newer_record_arms_it_in_place() -> None:
    quiet, log = QuietExtraction(), Log()
    quiet.arm(("t", "u", "s"), HOUR, log.work("first"))
    quiet.arm(("t", "u", "s"), 0.0, log.work("second"))
    await asyncio.wait_for(log.event.wait(), WAIT_S)
    await quiet.close()
    assert log.ran == ["second"] and quiet.waiting == 0


async def test_the_users_next_request_runs_the_other_chats_work_now_and_waits_for_it() -> None:
    quiet, log = QuietExtraction(), Log()
    quiet.arm(("t", "u", "s1"), HOUR, log.work("u/s1"))
    quiet.arm(("t", "u", "s2"), HOUR, log.work("u/s2"))
    quiet.arm(("t", "v", "s3"), HOUR, log.work("v/s3"))
    await quiet.flush("t", "u", besides="s2")
    assert log.ran == ["u/s1"]  # done when flush returns; this chat's own and another user's still wait
    assert quiet.waiting == 2
    await quiet.close()
    assert log.ran == ["u/s1"]  # timers cancelled at shutdown


async def test_flush_waits_for_the_users_work_that_had_already_started() -> None:
    quiet, log, hold = QuietExtraction(), Log(), asyncio.Event()
    quiet.arm(("t", "u", "s1"), 0.0, log.work("u/s1", hold))
    await asyncio.sleep(0)  # the timer fires: the work starts and waits on ``hold``
    await asyncio.sleep(0)
    flushing = asyncio.ensure_future(quiet.flush("t", "u", besides="s2"))
    await asyncio.sleep(0)
    assert not flushing.done()
    hold.set()
    await asyncio.wait_for(flushing, WAIT_S)
    assert log.ran == ["u/s1"]
    await quiet.close()


async def test_waiting_chats_are_bounded_the_oldest_starts_when_one_more_arrives() -> None:
    quiet, log = QuietExtraction(max_waiting=2), Log()
    for n in range(3):
        quiet.arm(("t", "u", f"s{n}"), HOUR, log.work(f"s{n}"))
    await asyncio.wait_for(log.event.wait(), WAIT_S)
    assert log.ran == ["s0"] and quiet.waiting == 2
    await quiet.close()


async def test_close_drains_started_work_and_nothing_is_armed_after_it() -> None:
    quiet, log, hold = QuietExtraction(), Log(), asyncio.Event()
    quiet.arm(("t", "u", "s"), 0.0, log.work("started", hold))
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    closing = asyncio.ensure_future(quiet.close())
    await asyncio.sleep(0)
    hold.set()
    await asyncio.wait_for(closing, WAIT_S)
    quiet.arm(("t", "u", "s"), 0.0, log.work("too late"))
    await asyncio.sleep(0)
    assert log.ran == ["started"] and quiet.waiting == 0


async def test_close_cancels_started_work_that_outlives_its_grace() -> None:
    quiet, log, never = QuietExtraction(), Log(), asyncio.Event()
    quiet.arm(("t", "u", "s"), 0.0, log.work("stuck", never))
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    await quiet.close(grace_s=0.01)
    assert log.ran == []


# ---------------------------------------------------------------- through the proxy


def _say(proxy: Proxy, user: str, session: str, *lines: str) -> None:
    chat_turn_by_turn(proxy, user, session, *lines)
    proxy.drain()


def _contents(proxy: Proxy, user: str) -> list[str]:
    with admin(proxy) as http:
        return [m["content"] for m in http.get(f"/paperclip/v1/users/{user}/memories").json()["data"]]


def _eventually(proxy: Proxy, user: str, word: str) -> list[str]:
    deadline = time.monotonic() + WAIT_S
    found = _contents(proxy, user)
    while not any(word in c for c in found) and time.monotonic() < deadline:
        time.sleep(0.05)
        found = _contents(proxy, user)
    return found


def test_a_chats_last_words_are_extracted_once_it_goes_quiet(make_proxy: Callable[..., Proxy]) -> None:
    proxy = make_proxy(defaults={"memory": {"extract_every_messages": 6, "extract_quiet_s": 0.2}})
    _say(proxy, "ada", "chat-1", "Hi, can you help me plan meals?", "Also, I'm allergic to shellfish.")
    assert any("shellfish" in c for c in _eventually(proxy, "ada", "shellfish"))


def test_a_chats_last_words_are_extracted_at_the_users_next_request(make_proxy: Callable[..., Proxy]) -> None:
    proxy = make_proxy(defaults={"memory": {"extract_every_messages": 6, "extract_quiet_s": HOUR}})
    _say(proxy, "bo", "chat-1", "I'm allergic to shellfish, by the way.")
    assert _contents(proxy, "bo") == []  # one message: under the cadence, and the chat is not quiet yet
    _say(proxy, "bo", "chat-2", "What's a good book for a long flight?")
    assert any("shellfish" in c for c in _contents(proxy, "bo"))


async def test_starting_a_users_other_chats_starts_only_theirs_and_forgets_them_once_done() -> None:
    quiet, log = QuietExtraction(), Log()
    for key in (("t", "ada", "chat-1"), ("t", "ada", "chat-2"), ("t", "bo", "chat-1"), ("u", "ada", "chat-1")):
        quiet.arm(key, HOUR, log.work("/".join(key)))
    started = quiet.start_others("t", "ada", besides="chat-2")
    assert len(started) == 1 and quiet.waiting == 3
    await asyncio.wait(started)
    assert log.ran == ["t/ada/chat-1"]
    assert quiet.start_others("t", "ada", besides="chat-2") == []  # done: nothing of chat-1 is left
    assert len(quiet.start_others("t", "ada", besides="chat-9")) == 1  # chat-2's, started now
    await quiet.close()
