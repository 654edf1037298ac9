"""The memory inspector over HTTP: sign-in cookie, CSRF, escaping, tenant isolation, every page."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx
from hypothesis import given
from hypothesis import strategies as st

from proxy.server.inspector.pyramid import pyramid
from tests.admin_helpers import FACT, ask, teach
from tests.conftest import ADMIN_KEY, Proxy
from tests.fake_upstream import FakeUpstream
from tests.inspector_helpers import csrf_of, signed_in
from tests.test_admin import GLOBEX_ADMIN, add
from tests.test_admin_api import OPERATOR, operated

SCRIPT = "<script>alert('pwned')</script> likes tea"


def test_sign_in_sets_a_strict_http_only_cookie(proxy: Proxy) -> None:
    with httpx.Client(base_url=proxy.url) as http:
        assert http.get("/paperclip/ui/users").headers["location"] == "/paperclip/ui/login"
        r = http.post("/paperclip/ui/login", data={"key": ADMIN_KEY})
        assert r.status_code == 303
        cookie = r.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/paperclip/ui" in cookie
        assert ADMIN_KEY not in cookie
        bad = http.post("/paperclip/ui/login", data={"key": "nope"})
        assert bad.status_code == 401 and "not an admin key" in bad.text


def test_pages_render_and_escape(proxy: Proxy) -> None:
    session = teach(proxy, "bob")
    trace = ask(proxy, "bob")["x-paperclip-trace"]
    add(proxy, "bob", content=SCRIPT, importance=0.9)
    with signed_in(proxy.url, ADMIN_KEY) as http:
        users = http.get("/paperclip/ui/users")
        assert users.status_code == 200 and "/paperclip/ui/users/bob" in users.text
        page = http.get("/paperclip/ui/users/bob")
        assert "<script>alert" not in page.text and "&lt;script&gt;alert" in page.text
        assert http.get("/paperclip/ui/users/bob", params={"q": "tea"}).status_code == 200
        assert "Zorblax" in http.get(f"/paperclip/ui/traces/{trace}").text
        assert http.get(f"/paperclip/ui/sessions/{session}").status_code == 200
        assert trace in http.get("/paperclip/ui/traces").text
        export = http.get("/paperclip/ui/users/bob/export")
        assert export.json()["user"] == "bob" and "attachment" in export.headers["content-disposition"]
        assert http.get("/paperclip/ui/traces/t-none").status_code == 404


def test_forms_need_their_csrf_token(proxy: Proxy) -> None:
    item = add(proxy, "alice", content="Alice keeps bees.")["item"]["id"]
    with signed_in(proxy.url, ADMIN_KEY) as http:
        token = csrf_of(http.get("/paperclip/ui/users/alice").text)
        path = f"/paperclip/ui/users/alice/memories/{item}/delete"
        for form in ({}, {"csrf": "forged"}):
            refused = http.post(path, data=form)
            assert refused.status_code == 403
        assert "Alice keeps bees." in http.get("/paperclip/ui/users/alice").text
        assert http.post(path, data={"csrf": token}).status_code == 200
        assert "Alice keeps bees." not in http.get("/paperclip/ui/users/alice").text


def test_forget_needs_the_name_typed(proxy: Proxy) -> None:
    add(proxy, "alice", content="Alice keeps bees.")
    with signed_in(proxy.url, ADMIN_KEY) as http:
        token = csrf_of(http.get("/paperclip/ui/users/alice").text)
        http.post("/paperclip/ui/users/alice/forget", data={"csrf": token, "confirm": "bob"})
        assert "Alice keeps bees." in http.get("/paperclip/ui/users/alice").text
        http.post("/paperclip/ui/users/alice/forget", data={"csrf": token, "confirm": "alice"})
        assert "Alice keeps bees." not in http.get("/paperclip/ui/users/alice").text


def test_a_tenant_sees_only_its_own_and_the_operator_all(
    make_proxy: Callable[..., Proxy], upstream_url: str, tmp_path: Path
) -> None:
    proxy = make_proxy(operated(upstream_url, tmp_path))
    item = add(proxy, "alice", content="Alice of acme keeps bees.")["item"]["id"]
    with signed_in(proxy.url, GLOBEX_ADMIN) as http:
        assert "alice" not in http.get("/paperclip/ui/users").text
        assert "keeps bees" not in http.get("/paperclip/ui/users/alice").text
        assert http.get("/paperclip/ui/users", params={"tenant": "acme"}).status_code == 403
        token = csrf_of(http.get("/paperclip/ui/users/alice").text)
        http.post(f"/paperclip/ui/users/alice/memories/{item}/delete", data={"csrf": token})
    with signed_in(proxy.url, OPERATOR) as http:
        tenants = http.get("/paperclip/ui/")
        assert "/paperclip/ui/users?tenant=acme" in tenants.text
        assert "keeps bees" in http.get("/paperclip/ui/users/alice", params={"tenant": "acme"}).text


@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 50), st.integers(1, 30)), max_size=12))
def test_pyramid_blocks_stay_inside_the_conversation(parts: list[tuple[int, int, int]]) -> None:
    summaries = [{"id": str(n), "level": lv, "start": s, "end": s + ln, "tokens": 5, "text": "t"}
                 for n, (lv, s, ln) in enumerate(parts)]
    rows = pyramid(summaries, watermark=10)
    assert sum(len(r) for r in rows) == len(summaries)
    levels = [r[0].level for r in rows]
    assert levels == sorted(levels, reverse=True)
    for row in rows:
        assert len({b.level for b in row}) == 1
        for b in row:
            assert b.left >= 0 and b.left + b.width <= 100.0 + 1e-6


def test_sessions_expire_and_are_bounded() -> None:
    from proxy.server.inspector import signin

    now = [0.0]
    sessions = signin.Sessions(clock=lambda: now[0])
    sid = sessions.open("ak")
    found = sessions.get(sid)
    assert found is not None and found.key == "ak"
    assert signin.csrf_ok(found, found.csrf) and not signin.csrf_ok(found, "x") and not signin.csrf_ok(found, None)
    now[0] = signin.TTL_S + 1
    assert sessions.get(sid) is None
    first = sessions.open("ak")
    for _ in range(signin.MAX_SESSIONS):
        sessions.open("ak")
    assert sessions.get(first) is None


def test_a_passthrough_client_inspects_its_own_scope(
    make_proxy: Callable[..., Proxy], upstream_url: str, tmp_path: Path
) -> None:
    from tests.conftest import base_config

    proxy = make_proxy(base_config(upstream_url, tmp_path / "pt.db", passthrough_keys=True, tenants={}))
    teach(proxy, "erin", key="sk-client-one")
    with signed_in(proxy.url, "sk-client-one") as http:
        page = http.get("/paperclip/ui/users/erin")
        assert page.status_code == 200 and "Zorblax" in page.text
        assert "<summary>edit</summary>" not in page.text  # a client key may read and delete, not edit
    with signed_in(proxy.url, "sk-client-two") as http:
        assert "Zorblax" not in http.get("/paperclip/ui/users/erin").text


def test_conversations_and_their_turns_are_shown_searched_deleted_and_forgotten(
    proxy: Proxy, upstream: FakeUpstream
) -> None:
    session = teach(proxy, "bob")
    with signed_in(proxy.url, ADMIN_KEY) as http:
        assert "/paperclip/ui/users/bob/conversations" in http.get("/paperclip/ui/users/bob").text
        listing = http.get("/paperclip/ui/users/bob/conversations")
        assert listing.status_code == 200 and session in listing.text
        found = http.get("/paperclip/ui/users/bob/conversations", params={"q": "Zorblax"})
        assert FACT in found.text and 'id="none"' not in found.text
        page = http.get(f"/paperclip/ui/users/bob/conversations/{session}")
        assert FACT in page.text and "Tell me something about trains in spring." in page.text
        token = csrf_of(page.text)
        said = next(f for f in http.get("/paperclip/v1/users/bob/fragments", headers=_admin()).json()["data"]
                    if f["text"] == FACT)
        delete = f"/paperclip/ui/users/bob/fragments/{said['id']}/delete"
        assert http.post(delete, data={"session": session}).status_code == 403  # no CSRF token
        assert FACT in http.get(f"/paperclip/ui/users/bob/conversations/{session}").text
        back = http.post(delete, data={"csrf": token, "session": session})
        assert back.status_code == 200 and str(back.url).endswith(f"/conversations/{session}")
        assert FACT not in back.text and "Tell me something about trains in spring." in back.text

        forget = f"/paperclip/ui/users/bob/conversations/{session}/forget"
        http.post(forget, data={"csrf": token})  # the box not ticked: nothing forgotten
        assert "Tell me something about trains" in http.get(f"/paperclip/ui/users/bob/conversations/{session}").text
        gone = http.post(forget, data={"csrf": token, "confirm": "yes"})
        assert gone.status_code == 200 and str(gone.url).endswith("/users/bob/conversations")
        assert session not in gone.text
        assert http.post(forget, data={"csrf": token, "confirm": "yes"}).status_code == 404  # nothing names it now
    ask(proxy, "bob")
    assert "zorblax" not in upstream.chat_requests()[-1].body.decode().lower()


def test_a_memory_deleted_with_its_turns_from_the_page(proxy: Proxy) -> None:
    teach(proxy, "bob")
    with signed_in(proxy.url, ADMIN_KEY) as http:
        page = http.get("/paperclip/ui/users/bob")
        token = csrf_of(page.text)
        memories = http.get("/paperclip/v1/users/bob/memories", headers=_admin()).json()["data"]
        for m in memories:
            http.post(f"/paperclip/ui/users/bob/memories/{m['id']}/delete", data={"csrf": token, "purge": "yes"})
        texts = [f["text"] for f in http.get("/paperclip/v1/users/bob/fragments", params={"status": "all"},
                                             headers=_admin()).json()["data"]]
    assert memories and texts and FACT not in texts


def _admin() -> dict[str, str]:
    return {"authorization": f"Bearer {ADMIN_KEY}"}


def test_a_users_page_shows_the_standing_facts_as_profile_as_the_operations_guide_says(proxy: Proxy) -> None:
    """The profile is what leads every memory block: standing facts, whatever their importance."""
    add(proxy, "alice", content="Alice uses a wheelchair.", category="health", standing=True, importance=0.3)
    add(proxy, "alice", content="Alice's order number is B99881.", category="identifier", standing=False,
        importance=0.95)
    with signed_in(proxy.url, ADMIN_KEY) as http:
        page = http.get("/paperclip/ui/users/alice").text
    profile = page.split('<ul id="profile">', 1)[1].split("</ul>", 1)[0]
    assert "Alice uses a wheelchair." in profile and "B99881" not in profile
    guide = (Path(__file__).resolve().parents[1] / "docs" / "guide" / "operations.md").read_text()
    told = " ".join(guide.split("## The memory inspector", 1)[1].split("##", 1)[0].split())
    assert "profile (its standing facts" in told and "importance ≥" not in told
