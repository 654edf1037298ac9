"""The raw turns Paperclip recalls from, through the admin API (SPEC §6): listed, searched, deleted one by one,
a whole conversation forgotten — paginated, tenant-scoped, a passthrough key on its own scope; on both stores."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.admin_helpers import FACT, MARK, QUESTION, admin, ask, teach
from tests.conftest import Proxy, base_config, both_stores
from tests.fake_upstream import FakeUpstream
from tests.test_admin import GLOBEX_ADMIN, assert_envelope, two_tenants
from tests.test_admin_api import pages

backend = both_stores

FRAGMENTS = "/paperclip/v1/users/{user}/fragments"
OTHER = "My parrot Quillimo whistles at dawn, please remember that."


def fragments(proxy: Proxy, user: str, key: str | None = None, **params: str) -> list[dict[str, object]]:
    with admin(proxy, *([key] if key else [])) as http:
        r = http.get(FRAGMENTS.format(user=user), params=params)
    assert r.status_code == 200, r.text
    return list(r.json()["data"])


def upstream_got(upstream: FakeUpstream) -> str:
    return upstream.chat_requests()[-1].body.decode().lower()


def test_fragments_are_listed_by_page_session_and_status(proxy: Proxy) -> None:
    first = teach(proxy, "bob")
    second = teach(proxy, "bob", OTHER)
    every = pages(proxy, FRAGMENTS.format(user="bob"), limit=3)
    assert [f["id"] for f in every] == sorted(f["id"] for f in every) and len(every) > 3  # pages of 3
    assert {f["session"] for f in every} == {first, second}
    one = [f for f in every if f["session"] == first]
    assert [f["id"] for f in pages(proxy, FRAGMENTS.format(user="bob"), session=first)] == [f["id"] for f in one]
    said = next(f for f in one if f["text"] == FACT)
    assert (said["object"], said["role"], said["status"], said["position"]) == (
        "paperclip.fragment", "user", "active", 0)
    assert fragments(proxy, "bob", status="superseded") == [] and fragments(proxy, "nobody") == []
    with admin(proxy) as http:
        assert_envelope(http.get(FRAGMENTS.format(user="bob"), params={"status": "lost"}), 400)
        assert_envelope(http.get(FRAGMENTS.format(user="bob"), params={"after": "f1"}), 400)
        assert_envelope(http.get(FRAGMENTS.format(user="bob"), params={"limit": "0"}), 400)
        assert_envelope(http.patch(FRAGMENTS.format(user="bob")), 405)


def test_fragments_are_searched_by_their_words_within_a_session(proxy: Proxy) -> None:
    first = teach(proxy, "bob")
    teach(proxy, "bob", OTHER)
    found = fragments(proxy, "bob", q="Zorblax")
    assert found and found[0]["text"] == FACT and {"score", "vector", "bm25"} <= set(found[0])
    assert all(f["session"] == first for f in fragments(proxy, "bob", q="Quillimo", session=first))
    assert fragments(proxy, "bob", q="Quillimo")[0]["text"] == OTHER
    assert fragments(proxy, "bob", q="Zorblax", status="forgotten") == []


def test_a_deleted_turn_is_never_injected_again_and_takes_the_memories_drawn_only_from_it(
    proxy: Proxy, upstream: FakeUpstream
) -> None:
    teach(proxy, "bob")
    ask(proxy, "bob")
    assert MARK.decode() in upstream_got(upstream)
    said = next(f for f in fragments(proxy, "bob") if f["text"] == FACT)
    with admin(proxy) as http:
        memories = [m["id"] for m in http.get("/paperclip/v1/users/bob/memories").json()["data"]
                    if "Zorblax" in m["content"]]
        assert memories
        path = f"{FRAGMENTS.format(user='bob')}/{said['id']}"
        assert_envelope(http.delete(f"{FRAGMENTS.format(user='carol')}/{said['id']}"), 404)
        assert_envelope(http.delete(f"{FRAGMENTS.format(user='bob')}/not-a-number"), 404)
        r = http.delete(path)
        assert r.status_code == 200, r.text
        assert r.json() == {"id": said["id"], "object": "paperclip.fragment", "deleted": True, "memories": memories}
        assert_envelope(http.delete(path), 404)
        assert "zorblax" not in http.get("/paperclip/v1/users/bob/export").text.lower()
    ask(proxy, "bob")
    assert MARK.decode() not in upstream_got(upstream)


def test_a_forgotten_session_leaves_nothing_and_is_not_learned_again_when_resent(
    proxy: Proxy, upstream: FakeUpstream
) -> None:
    session = teach(proxy, "bob")
    kept = teach(proxy, "bob", OTHER)
    ask(proxy, "bob")
    assert MARK.decode() in upstream_got(upstream)
    with admin(proxy) as http:
        r = http.delete(f"/paperclip/v1/sessions/{session}")
        assert r.status_code == 200, r.text
        body = r.json()
        assert (body["id"], body["object"], body["deleted"]) == (session, "paperclip.session", True)
        assert body["counts"]["fragments"] >= 6 and body["counts"]["items"] >= 1
        assert_envelope(http.get(f"/paperclip/v1/sessions/{session}"), 404)
        assert session not in [s["id"] for s in http.get("/paperclip/v1/users/bob/sessions").json()["data"]]
        assert "zorblax" not in http.get("/paperclip/v1/users/bob/export").text.lower()
        assert_envelope(http.delete(f"/paperclip/v1/sessions/{session}"), 404)  # once: then nothing names it
    left = {f["session"] for f in fragments(proxy, "bob", status="all")}
    assert kept in left and session not in left
    ask(proxy, "bob")
    assert MARK.decode() not in upstream_got(upstream)
    teach(proxy, "bob")  # the app resends the forgotten conversation
    assert session not in {f["session"] for f in fragments(proxy, "bob", status="all")}
    ask(proxy, "bob")
    assert MARK.decode() not in upstream_got(upstream)


def test_forgetting_a_session_nothing_names_answers_404_as_a_missing_turn_does(proxy: Proxy) -> None:
    teach(proxy, "bob")
    with admin(proxy) as http:
        for missing in ("never-was", "sess%20with%20space", "%E5%BC%A0"):
            r = http.delete(f"/paperclip/v1/sessions/{missing}")
            assert_envelope(r, 404)
            assert "No session" in r.json()["error"]["message"]
    assert fragments(proxy, "bob")  # nothing else went


def test_another_tenant_sees_and_forgets_none_of_it(
    make_proxy: Callable[..., Proxy], upstream_url: str, tmp_path: Path
) -> None:
    proxy = make_proxy(two_tenants(upstream_url, tmp_path))
    session = teach(proxy, "bob")
    said = fragments(proxy, "bob")[0]
    assert fragments(proxy, "bob", GLOBEX_ADMIN) == []
    with admin(proxy, GLOBEX_ADMIN) as http:
        assert_envelope(http.delete(f"{FRAGMENTS.format(user='bob')}/{said['id']}"), 404)
        assert_envelope(http.delete(f"/paperclip/v1/sessions/{session}"), 404)
    assert fragments(proxy, "bob")[0]["id"] == said["id"]


def test_a_passthrough_key_lists_and_forgets_its_own_turns(
    make_proxy: Callable[..., Proxy], upstream_url: str, tmp_path: Path, upstream: FakeUpstream
) -> None:
    proxy = make_proxy(base_config(upstream_url, tmp_path / "pt.db", passthrough_keys=True, tenants={}))
    mine, theirs = "sk-client-one", "sk-client-two"
    session = teach(proxy, "erin", key=mine)
    teach(proxy, "erin", fact=OTHER, key=theirs)
    assert fragments(proxy, "erin", mine)[0]["text"] == FACT
    assert fragments(proxy, "erin", theirs)[0]["text"] == OTHER
    with proxy.http(mine) as http:
        assert http.delete(f"/paperclip/v1/sessions/{session}").json()["counts"]["fragments"] >= 6
    assert fragments(proxy, "erin", mine) == [] and fragments(proxy, "erin", theirs)
    ask(proxy, "erin", QUESTION, key=mine)
    assert MARK.decode() not in upstream_got(upstream)
