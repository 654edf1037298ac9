"""The admin API's lists, edits, history, 405s and its three kinds of keys (SPEC §6)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from proxy.tenancy import passthrough_scope
from tests.admin_helpers import FACT, admin, ask, chat_turn_by_turn, teach
from tests.conftest import ADMIN_KEY, PROXY_KEY, UPSTREAM_KEY, Proxy, base_config, both_stores
from tests.fake_upstream import FakeUpstream
from tests.test_admin import GLOBEX_ADMIN, MEMORIES, add, assert_envelope, two_tenants

backend = both_stores  # every test that starts a proxy runs on SQLite and on PostgreSQL

OPERATOR = "op-test-operator"


def operated(upstream_url: str, tmp_path: Path, **extra: Any) -> dict[str, Any]:
    raw = two_tenants(upstream_url, tmp_path)
    raw["server"] = {"admin_keys": [OPERATOR]}
    raw.update(extra)
    return raw


def pages(proxy: Proxy, path: str, key: str = ADMIN_KEY, limit: int = 2, **params: str) -> list[Any]:
    """Walk a list with ``after`` until ``has_more`` is false; checks each page's envelope."""
    seen: list[Any] = []
    after: str | None = None
    with admin(proxy, key) as http:
        while True:
            query = {**params, "limit": str(limit), **({"after": after} if after else {})}
            body = http.get(path, params=query).json()
            assert body["object"] == "list" and len(body["data"]) <= limit
            ids = [str(row["id"]) for row in body["data"]]
            assert (body["first_id"], body["last_id"]) == ((ids[0], ids[-1]) if ids else (None, None))
            seen += body["data"]
            if not body["has_more"]:
                return seen
            after = body["last_id"]


# ---------------------------------------------------------------- lists


def test_memories_are_paginated_and_filtered(proxy: Proxy) -> None:
    ids = [add(proxy, "alice", content=f"Alice fact number {n}: she owns {n} bicycles.", key=f"user.fact.{n}",
               type="preference" if n % 2 else "entity")["item"]["id"] for n in range(5)]
    assert [m["id"] for m in pages(proxy, MEMORIES.format(user="alice"))] == ids
    assert [m["id"] for m in pages(proxy, MEMORIES.format(user="alice"), type="preference")] == ids[1::2]
    with admin(proxy) as http:
        one = http.get(MEMORIES.format(user="alice"), params={"limit": "1"}).json()
        assert len(one["data"]) == 1 and one["has_more"] is True
        assert_envelope(http.get(MEMORIES.format(user="alice"), params={"limit": "101"}), 400)
        assert_envelope(http.get(MEMORIES.format(user="alice"), params={"status": "lost"}), 400)
        assert_envelope(http.get(MEMORIES.format(user="alice"), params={"type": "opinion"}), 400)


def test_users_sessions_and_traces(proxy: Proxy) -> None:
    sessions = [teach(proxy, user) for user in ("bob", "carol", "dave")]
    trace = ask(proxy, "bob")["x-paperclip-trace"]
    users = pages(proxy, "/paperclip/v1/users")
    assert [u["id"] for u in users] == ["bob", "carol", "dave"]
    bob = users[0]
    assert bob["requests"] == 2 and bob["fragments"] > 0 and bob["sessions"] == 2 and bob["last_seen"]
    mine = pages(proxy, "/paperclip/v1/users/bob/sessions", limit=1)
    assert {s["id"] for s in mine} >= {sessions[0]} and len(mine) == 2
    recent = pages(proxy, "/paperclip/v1/traces")
    assert recent[0]["id"] == trace and len(recent) == 4
    assert [t["user"] for t in pages(proxy, "/paperclip/v1/traces", user="carol")] == ["carol"]
    assert [t["id"] for t in pages(proxy, "/paperclip/v1/traces", session=sessions[2])] != []
    assert pages(proxy, "/paperclip/v1/traces", degraded="true") == []
    with admin(proxy) as http:
        assert_envelope(http.get("/paperclip/v1/traces", params={"degraded": "maybe"}), 400)


def test_a_cursor_whose_row_is_gone_is_a_404_not_the_end_of_the_list(proxy: Proxy) -> None:
    """A walk whose last row is deleted before its next page is told so, on a list read in memory (sessions)
    and on one the store places by its row (traces): an empty page would pass for the end."""
    sessions = [teach(proxy, "bob", fact=f"My locker number is {n}1{n}.") for n in range(3)]
    for user in ("carol", "dave"):
        teach(proxy, user)
    with admin(proxy) as http:
        first = http.get("/paperclip/v1/users/bob/sessions", params={"limit": "1"}).json()
        assert first["has_more"] and first["last_id"] == sessions[-1]
        traces = http.get("/paperclip/v1/traces", params={"limit": "1"}).json()
        assert traces["has_more"] and traces["data"][0]["user"] == "dave"
        assert http.delete(f"/paperclip/v1/sessions/{first['last_id']}").status_code == 200
        assert http.delete("/paperclip/v1/users/dave").status_code == 200
        for path, after in (("/paperclip/v1/users/bob/sessions", first["last_id"]),
                            ("/paperclip/v1/traces", traces["last_id"])):
            gone = http.get(path, params={"limit": "1", "after": after})
            assert_envelope(gone, 404)
            assert gone.json()["error"]["param"] == "after"
        # The walk started again sees what is left; a cursor still there pages on.
        assert [s["id"] for s in pages(proxy, "/paperclip/v1/users/bob/sessions", limit=1)] == sessions[1::-1]
        assert {t["user"] for t in pages(proxy, "/paperclip/v1/traces", limit=1)} == {"bob", "carol"}


def test_forgetting_a_conversation_keeps_what_another_one_said_too(proxy: Proxy, upstream: FakeUpstream) -> None:
    """The same words said in two chats are stored once, in the first: forgetting it moves them to the second."""
    chat_turn_by_turn(proxy, "ivy", "chat-a", FACT, "Thanks, that is all.")
    chat_turn_by_turn(proxy, "ivy", "chat-b", "Good morning!", FACT, "Thanks, that is all.")
    proxy.drain()
    with admin(proxy) as http:
        assert http.delete("/paperclip/v1/sessions/chat-a").status_code == 200
        said = http.get("/paperclip/v1/users/ivy/fragments", params={"session": "chat-b"}).json()["data"]
    assert FACT in [f["text"] for f in said]
    ask(proxy, "ivy")
    assert "Zorblax" in str(upstream.chat_requests()[-1].json()["messages"][-1]["content"])
    with admin(proxy) as http:
        assert http.delete("/paperclip/v1/sessions/chat-b").status_code == 200
    ask(proxy, "ivy")
    assert "Zorblax" not in str(upstream.chat_requests()[-1].json()["messages"])


def test_two_users_of_one_session_name_both_have_their_facts_extracted(proxy: Proxy) -> None:
    """X-Paperclip-Session takes any string: two users who send the same one ("main") each get their memories
    (the extraction cursor is the user's session's, not the name's)."""
    for user, fact in (("uma", "I am allergic to penicillin, remember that."),
                       ("vic", "I am allergic to sesame seeds, remember that.")):
        chat_turn_by_turn(proxy, user, "main", fact, "Tell me about trains in spring.",
                          "Tell me about the weather in spring.", "Thanks, that is all for now.")
        proxy.drain()
    with admin(proxy) as http:
        for user, word in (("uma", "penicillin"), ("vic", "sesame")):
            memories = http.get(MEMORIES.format(user=user)).json()["data"]
            assert any(word in m["content"].lower() for m in memories), (user, memories)


def test_a_search_is_paginated_too(proxy: Proxy) -> None:
    ids = {add(proxy, "alice", content=f"Alice owns bicycle number {n}, a {colour} one.", key=f"user.bike.{n}")
           ["item"]["id"] for n, colour in enumerate(["red", "blue", "green", "black", "white"])}
    found = pages(proxy, MEMORIES.format(user="alice"), q="bicycle")
    assert sorted(m["id"] for m in found) == sorted(ids)  # every match once, best first, page after page
    assert [m["score"] for m in found] == sorted((m["score"] for m in found), reverse=True)
    for said in ("I keep my bicycle in the hall, a green one.", "My other bicycle is a red racing bicycle."):
        teach(proxy, "alice", said)
    turns = pages(proxy, "/paperclip/v1/users/alice/fragments", q="bicycle", limit=1)
    assert len(turns) >= 2 and len({t["id"] for t in turns}) == len(turns)  # one a page, none twice


# ---------------------------------------------------------------- edit and history


def test_patch_reembeds_and_history_says_who(proxy: Proxy) -> None:
    item = add(proxy, "alice", content="Alice drinks green tea every morning.")["item"]
    path = f"{MEMORIES.format(user='alice')}/{item['id']}"
    with admin(proxy) as http:
        r = http.patch(path, json={"content": "Alice drinks black coffee every morning.", "importance": 0.9,
                                   "type": "preference", "expires_at": "2030-01-01"})
        assert r.status_code == 200, r.text
        edited = r.json()
        assert (edited["content"], edited["importance"], edited["type"]) == (
            "Alice drinks black coffee every morning.", 0.9, "preference")
        found = http.get(MEMORIES.format(user="alice"), params={"q": "coffee"}).json()["data"]
        assert found and found[0]["id"] == item["id"] and found[0]["vector"] is not None
        assert http.get(MEMORIES.format(user="alice"), params={"q": "green tea"}).json()["data"] == []
        history = http.get(f"{path}/history").json()["data"]
        for bad in ({}, {"key": "x"}, {"importance": 3}, {"content": ""}, {"type": "mood"}):
            assert_envelope(http.patch(path, json=bad), 400)
        assert_envelope(http.patch(f"{MEMORIES.format(user='bob')}/{item['id']}", json={"importance": 1}), 404)
        assert_envelope(http.get(f"{MEMORIES.format(user='bob')}/{item['id']}/history"), 404)
        assert_envelope(http.get(f"{path}/history", params={"after": "x"}), 400)  # not the whole history again
        later = http.get(f"{path}/history", params={"after": str(history[0]["id"])}).json()["data"]
        assert [e["id"] for e in later] == [history[1]["id"]]
    assert [(e["event"], e["by"]) for e in history] == [("created", "admin:acme"), ("edited", "admin:acme")]
    assert history[1]["detail"]["content"] == {
        "from": "Alice drinks green tea every morning.", "to": "Alice drinks black coffee every morning."}


def test_history_shows_merge_and_supersede(proxy: Proxy) -> None:
    first = add(proxy, "alice", content="Alice lives in Lyon.", key="user.location.current")["item"]
    add(proxy, "alice", content="alice lives in lyon", key="user.location.current")
    moved = add(proxy, "alice", content="Alice lives in Porto now.", key="user.location.current")["item"]
    with admin(proxy) as http:
        events = http.get(f"{MEMORIES.format(user='alice')}/{first['id']}/history").json()["data"]
    assert [e["event"] for e in events] == ["created", "merged", "superseded"]
    assert events[2]["detail"] == {"superseded_by": moved["id"]}


def test_wrong_method_on_a_known_path_is_405(proxy: Proxy) -> None:
    with admin(proxy) as http:
        for method, path in [("PUT", MEMORIES.format(user="a")), ("POST", "/paperclip/v1/traces"),
                             ("PATCH", "/paperclip/v1/users/a"), ("POST", "/paperclip/v1/openapi.json")]:
            r = http.request(method, path)
            assert_envelope(r, 405)
            assert r.headers["allow"]
        assert_envelope(http.get("/paperclip/v1/nothing-here"), 404)
        head = http.head(MEMORIES.format(user="a"))  # what GET would answer, headers only
        assert head.status_code == 200 and head.content == b""
        assert "HEAD" in http.put(MEMORIES.format(user="a")).headers["allow"]
        assert http.head("/paperclip/v1/users/a").status_code == 405  # DELETE only: nothing to read


# ---------------------------------------------------------------- keys


def test_operator_key_names_any_tenant(make_proxy: Callable[..., Proxy], upstream_url: str, tmp_path: Path) -> None:
    proxy = make_proxy(operated(upstream_url, tmp_path))
    add(proxy, "alice", content="Alice of acme likes green tea.")
    add(proxy, "alice", GLOBEX_ADMIN, content="Alice of globex likes black coffee.")
    with admin(proxy, OPERATOR) as http:
        assert_envelope(http.get(MEMORIES.format(user="alice")), 400)  # two tenants: which?
        assert_envelope(http.get(MEMORIES.format(user="alice"), params={"tenant": "initech"}), 404)
        globex = http.get(MEMORIES.format(user="alice"), params={"tenant": "globex"}).json()["data"]
        tenants = [t["id"] for t in http.get("/paperclip/v1/tenants").json()["data"]]
    assert [m["content"] for m in globex] == ["Alice of globex likes black coffee."]
    assert tenants == ["acme", "globex"]
    with admin(proxy, GLOBEX_ADMIN) as http:
        r = http.get(MEMORIES.format(user="alice"), params={"tenant": "acme"})
        assert_envelope(r, 403)
        assert [t["id"] for t in http.get("/paperclip/v1/tenants").json()["data"]] == ["globex"]


def test_passthrough_client_reads_and_deletes_its_own_scope(
    make_proxy: Callable[..., Proxy], upstream_url: str, tmp_path: Path, upstream: FakeUpstream
) -> None:
    raw = base_config(upstream_url, tmp_path / "pt.db", passthrough_keys=True, tenants={},
                      server={"admin_keys": [OPERATOR]})
    proxy = make_proxy(raw)
    mine, theirs = "sk-client-one", "sk-client-two"
    teach(proxy, "erin", key=mine)
    teach(proxy, "erin", fact="Erin's other account keeps bees in Leeds, remember it.", key=theirs)
    with proxy.http(mine) as http:
        export = http.get("/paperclip/v1/users/erin/export").json()
        assert export["tenant"] == passthrough_scope(mine)
        assert "Zorblax" in str(export["fragments"]) and "bees" not in str(export["fragments"])
        assert_envelope(http.post(MEMORIES.format(user="erin"), json={"content": "x"}), 403)
        assert_envelope(http.get("/paperclip/v1/users", params={"tenant": passthrough_scope(theirs)}), 403)
        assert http.delete("/paperclip/v1/users/erin").status_code == 200
        assert http.get("/paperclip/v1/users/erin/export").json()["fragments"] == []
    with admin(proxy, OPERATOR) as http:
        scope = passthrough_scope(theirs)
        assert scope in [t["id"] for t in http.get("/paperclip/v1/tenants").json()["data"]]
        users = http.get("/paperclip/v1/users", params={"tenant": scope}).json()["data"]
    assert [u["id"] for u in users] == ["erin"]


@pytest.mark.parametrize("key", [OPERATOR, ADMIN_KEY])
def test_admin_keys_are_never_forwarded_upstream(
    make_proxy: Callable[..., Proxy], upstream_url: str, tmp_path: Path, upstream: FakeUpstream, key: str
) -> None:
    raw = base_config(upstream_url, tmp_path / "k.db", passthrough_keys=True, server={"admin_keys": [OPERATOR]})
    proxy = make_proxy(raw)
    with proxy.http(key) as http:
        assert_envelope(http.post("/v1/chat/completions", json={"model": "m", "messages": []}), 401)
        assert_envelope(http.get("/v1/models"), 401)
    assert upstream.requests == []
    with proxy.http(PROXY_KEY) as http:
        assert http.get("/v1/models").status_code == 200
    assert upstream.requests[-1].headers["authorization"] == f"Bearer {UPSTREAM_KEY}"
