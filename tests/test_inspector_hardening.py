"""The inspector on a hostile day (SPEC §9): sign-in floods and guessing, framing, sniffing, ids holding "/"."""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import quote

import httpx
import pytest

from proxy.server.inspector import signin
from proxy.server.inspector.page_guard import PAGE_HEADERS
from tests.admin_helpers import teach
from tests.conftest import ADMIN_KEY, Proxy
from tests.inspector_helpers import csrf_of, signed_in
from tests.test_admin import add


def test_no_flood_of_sign_ins_evicts_a_live_session() -> None:
    now = [0.0]
    sessions = signin.Sessions(clock=lambda: now[0])
    operator = sessions.open("op-key")
    assert operator is not None
    opened = [sessions.open(f"sk-stranger-{n}") for n in range(signin.MAX_SESSIONS + 1)]
    assert sessions.get(operator) is not None  # before: the 1,001st sign-in evicted it
    assert opened[-2] is None and opened[-1] is None  # the table is full: newcomers wait, nobody is pushed out
    now[0] = signin.TTL_S + 1  # everyone's sessions expire: room again
    assert sessions.open("op-key") is not None


def test_a_key_signing_in_again_and_again_only_replaces_its_own_sessions() -> None:
    sessions = signin.Sessions(clock=lambda: 0.0)
    other = sessions.open("other-key")
    mine = [sessions.open("my-key") for _ in range(signin.PER_KEY * 3)]
    assert sessions.get(other) is not None
    live = [sid for sid in mine if sid is not None and sessions.get(sid) is not None]
    assert live == mine[-signin.PER_KEY :]


def test_sign_in_failures_are_limited_per_address() -> None:
    now = [0.0]
    limits = signin.SignInLimits(clock=lambda: now[0])
    for _ in range(signin.MAX_FAILURES):
        assert limits.allowed("10.0.0.1")
        limits.failed("10.0.0.1")
    assert not limits.allowed("10.0.0.1")  # the right key too, for now
    assert limits.allowed("10.0.0.2")  # another address is not held back
    now[0] = signin.WINDOW_S + 1
    assert limits.allowed("10.0.0.1")


def test_sign_ins_at_all_are_limited_per_address() -> None:
    limits = signin.SignInLimits(clock=lambda: 0.0)
    assert all(limits.allowed("10.0.0.1") for _ in range(signin.MAX_ATTEMPTS))
    assert not limits.allowed("10.0.0.1")


def test_guessing_keys_over_http_meets_the_limit_and_the_operator_stays_signed_in(proxy: Proxy) -> None:
    with signed_in(proxy.url, ADMIN_KEY) as operator, httpx.Client(base_url=proxy.url) as attacker:
        statuses = [attacker.post("/paperclip/ui/login", data={"key": f"ak-guess-{n}"}).status_code
                    for n in range(signin.MAX_FAILURES)]
        assert statuses == [401] * signin.MAX_FAILURES
        refused = attacker.post("/paperclip/ui/login", data={"key": ADMIN_KEY})
        assert refused.status_code == 429 and refused.headers["retry-after"] == str(int(signin.WINDOW_S))
        assert operator.get("/paperclip/ui/users").status_code == 200


def test_a_flood_of_valid_sign_ins_is_held_back(make_proxy: Callable[..., Proxy]) -> None:
    proxy = make_proxy(passthrough_keys=True)  # any key signs in, to its own scope
    with signed_in(proxy.url, ADMIN_KEY) as operator, httpx.Client(base_url=proxy.url) as flood:
        statuses = [flood.post("/paperclip/ui/login", data={"key": f"sk-stranger-{n:04d}-0123456789"}).status_code
                    for n in range(signin.MAX_ATTEMPTS + 5)]
        assert statuses.count(303) == signin.MAX_ATTEMPTS - 1  # the operator's own sign-in was one
        assert set(statuses[signin.MAX_ATTEMPTS - 1 :]) == {429}
        assert operator.get("/paperclip/ui/users").status_code == 200


def test_every_inspector_answer_carries_the_page_headers(proxy: Proxy) -> None:
    add(proxy, "bob", content="Bob keeps bees.")
    with httpx.Client(base_url=proxy.url) as anonymous:
        answers = [anonymous.get("/paperclip/ui/login"), anonymous.get("/paperclip/ui/users"),
                   anonymous.post("/paperclip/ui/login", data={"key": "wrong"})]
    with signed_in(proxy.url, ADMIN_KEY) as http:
        answers += [http.get("/paperclip/ui/users"), http.get("/paperclip/ui/users/bob"),
                    http.get("/paperclip/ui/users/bob/export"), http.get("/paperclip/ui/traces/t-none")]
    for r in answers:
        for name, value in PAGE_HEADERS.items():
            assert r.headers.get(name) == value, (r.url, name)
    assert "frame-ancestors 'none'" in PAGE_HEADERS["content-security-policy"]
    assert "script-src" not in PAGE_HEADERS["content-security-policy"]  # default-src 'none': no script at all


@pytest.mark.parametrize("user", ["team/alice", "a/b/c", "/lead", "tail/"])
def test_a_user_whose_id_holds_a_slash_is_opened_and_forgotten_from_the_pages(proxy: Proxy, user: str) -> None:
    add(proxy, quote(user, safe=""), content="Keeps bees on the roof.")
    with signed_in(proxy.url, ADMIN_KEY) as http:
        listing = http.get("/paperclip/ui/users").text
        link = f"/paperclip/ui/users/{quote(user, safe='')}"
        assert link in listing
        page = http.get(link)
        assert page.status_code == 200 and "Keeps bees on the roof." in page.text
        http.post(link + "/forget", data={"csrf": csrf_of(page.text), "confirm": user})
        assert "Keeps bees on the roof." not in http.get(link).text


def test_a_session_whose_id_holds_a_slash_is_opened_from_the_pages(proxy: Proxy) -> None:
    session = teach(proxy, "carol") and "chat/2026/one"
    with proxy.client() as client:
        client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hello"}],
                                       extra_headers={"X-Paperclip-Session": session, "X-Paperclip-User": "carol"})
    proxy.drain()
    with signed_in(proxy.url, ADMIN_KEY) as http:
        link = f"/paperclip/ui/sessions/{quote(session, safe='')}"
        assert link in http.get("/paperclip/ui/users/carol").text
        page = http.get(link)
        assert page.status_code == 200 and session in page.text
