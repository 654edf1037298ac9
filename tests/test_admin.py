"""The admin API (SPEC §6): keys, tenant isolation, memories, sessions and traces."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from proxy.pipeline.plain import CountingPipeline
from tests.admin_helpers import QUESTION, admin, ask, teach
from tests.conftest import ADMIN_KEY, PROXY_KEY, Proxy, base_config, both_stores
from tests.fake_upstream import FakeUpstream

backend = both_stores  # every test that starts a proxy runs on SQLite and on PostgreSQL

MEMORIES = "/paperclip/v1/users/{user}/memories"
GLOBEX_KEY, GLOBEX_ADMIN = "pk-test-globex", "ak-test-globex"


def two_tenants(upstream_url: str, tmp_path: Path) -> dict[str, Any]:
    raw = base_config(upstream_url, tmp_path / "two.db")
    raw["tenants"]["globex"] = {"api_keys": [GLOBEX_KEY], "admin_keys": [GLOBEX_ADMIN]}
    return raw


def add(proxy: Proxy, user: str, admin_key: str = ADMIN_KEY, **body: Any) -> dict[str, Any]:
    with admin(proxy, admin_key) as http:
        r = http.post(MEMORIES.format(user=user), json=body)
    assert r.status_code in (200, 201), r.text
    return dict(r.json())


def listed(proxy: Proxy, user: str, key: str = ADMIN_KEY, **params: str) -> list[dict[str, Any]]:
    with admin(proxy, key) as http:
        r = http.get(MEMORIES.format(user=user), params=params)
    assert r.status_code == 200, r.text
    return list(r.json()["data"])


def assert_envelope(r: Any, status: int) -> None:
    assert r.status_code == status, r.text
    error = r.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["message"]


# ---------------------------------------------------------------- keys and tenants


@pytest.mark.parametrize("key", [None, PROXY_KEY, "ak-wrong"])
def test_admin_key_required(proxy: Proxy, key: str | None) -> None:
    with proxy.http(key) as http:
        for method, path in [
            ("GET", MEMORIES.format(user="alice")),
            ("GET", "/paperclip/v1/users/alice/export"),
            ("DELETE", "/paperclip/v1/users/alice"),
            ("GET", "/paperclip/v1/sessions/s-1"),
            ("GET", "/paperclip/v1/traces/t-1"),
        ]:
            r = http.request(method, path)
            assert_envelope(r, 401)
            assert r.json()["error"]["code"] == "invalid_api_key"


def test_admin_key_also_accepted_as_api_key_header(proxy: Proxy) -> None:
    with proxy.http(None) as http:
        r = http.get(MEMORIES.format(user="alice"), headers={"api-key": ADMIN_KEY})
    assert r.status_code == 200
    assert r.json() == {
        "object": "list", "user": "alice", "data": [], "has_more": False, "first_id": None, "last_id": None
    }


def test_not_ready_is_503(make_proxy: Callable[..., Proxy]) -> None:
    proxy = make_proxy(pipeline=CountingPipeline())
    with admin(proxy) as http:
        r = http.get(MEMORIES.format(user="alice"))
        assert_envelope(r, 503)
        assert_envelope(http.get(MEMORIES.format(user="alice"), headers={"authorization": "Bearer x"}), 401)


def test_tenants_are_isolated(make_proxy: Callable[..., Proxy], upstream_url: str, tmp_path: Path) -> None:
    proxy = make_proxy(two_tenants(upstream_url, tmp_path))
    acme = add(proxy, "alice", content="Alice of acme prefers green tea in the morning.")
    globex = add(proxy, "alice", GLOBEX_ADMIN, content="Alice of globex prefers black coffee at night.")
    assert [m["content"] for m in listed(proxy, "alice")] == [acme["item"]["content"]]
    assert [m["content"] for m in listed(proxy, "alice", GLOBEX_ADMIN)] == [globex["item"]["content"]]
    assert listed(proxy, "alice", q="coffee") == []
    with admin(proxy) as http:
        gid = globex["item"]["id"]
        assert_envelope(http.delete(f"{MEMORIES.format(user='alice')}/{gid}"), 404)
        assert "globex" not in http.get("/paperclip/v1/users/alice/export").text
        assert http.delete("/paperclip/v1/users/alice").status_code == 200
    assert listed(proxy, "alice", GLOBEX_ADMIN)[0]["id"] == gid


def test_chat_data_of_one_tenant_is_invisible_to_the_other(
    make_proxy: Callable[..., Proxy], upstream_url: str, tmp_path: Path
) -> None:
    proxy = make_proxy(two_tenants(upstream_url, tmp_path))
    session = teach(proxy, "bob")
    trace = ask(proxy, "bob")["x-paperclip-trace"]
    with admin(proxy, GLOBEX_ADMIN) as http:
        assert http.get("/paperclip/v1/users/bob/export").json()["fragments"] == []
        assert_envelope(http.get(f"/paperclip/v1/sessions/{session}"), 404)
        assert_envelope(http.get(f"/paperclip/v1/traces/{trace}"), 404)
    with admin(proxy) as http:
        assert http.get(f"/paperclip/v1/traces/{trace}").status_code == 200


# ---------------------------------------------------------------- memories


def test_add_list_delete(proxy: Proxy) -> None:
    added = add(proxy, "alice", content="Alice's passport expires in March 2027.", type="event",
                key="user.passport.expiry", importance=0.9, expires_at="2027-03-31")
    assert added["action"] == "added"
    item = added["item"]
    assert item["type"] == "event" and item["key"] == "user.passport.expiry"
    assert item["importance"] == 0.9 and item["expires_at"] == "2027-03-31"
    assert item["source"] == "user-stated" and item["status"] == "active"
    assert [m["id"] for m in listed(proxy, "alice")] == [item["id"]]
    assert listed(proxy, "bob") == []
    with admin(proxy) as http:
        path = f"{MEMORIES.format(user='alice')}/{item['id']}"
        assert_envelope(http.delete(f"{MEMORIES.format(user='bob')}/{item['id']}"), 404)
        assert http.delete(path).json() == {"id": item["id"], "object": "paperclip.memory", "deleted": True,
                                            "memories": [item["id"]], "turns": 0, "purged": False}
        assert_envelope(http.delete(path), 404)
        assert_envelope(http.delete(f"{MEMORIES.format(user='alice')}/not-a-number"), 404)
    assert listed(proxy, "alice") == []


def test_add_dedups_and_supersedes(proxy: Proxy) -> None:
    first = add(proxy, "alice", content="Alice lives in Lyon.", key="user.location.current")
    again = add(proxy, "alice", content="alice lives in lyon", key="user.location.current")
    assert again["action"] == "merged" and again["item"]["id"] == first["item"]["id"]
    assert again["item"]["seen_count"] == 2
    moved = add(proxy, "alice", content="Alice lives in Porto now.", key="user.location.current")
    assert moved["action"] == "superseded" and moved["superseded"] == [first["item"]["id"]]
    assert [m["content"] for m in listed(proxy, "alice")] == ["Alice lives in Porto now."]
    history = listed(proxy, "alice", all="true")
    assert [(m["status"], m["superseded_by"]) for m in history] == [
        ("superseded", moved["item"]["id"]), ("active", None)
    ]


def test_add_masks_pii(proxy: Proxy) -> None:
    item = add(proxy, "alice", content="Alice's email is alice.smith@example.com, write there.")["item"]
    assert "alice.smith@example.com" not in item["content"]
    with admin(proxy) as http:
        assert "alice.smith@example.com" not in http.get("/paperclip/v1/users/alice/export").text


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"content": ""},
        {"content": 3},
        {"content": "ok", "type": "opinion"},
        {"content": "ok", "importance": 2},
        {"content": "ok", "importance": True},
        {"content": "ok", "expires_at": "next tuesday"},
        {"content": "ok", "colour": "blue"},
        ["content"],
    ],
)
def test_add_rejects_bad_bodies(proxy: Proxy, body: Any) -> None:
    with admin(proxy) as http:
        assert_envelope(http.post(MEMORIES.format(user="alice"), json=body), 400)


def test_add_rejects_bad_json(proxy: Proxy) -> None:
    with admin(proxy) as http:
        r = http.post(MEMORIES.format(user="alice"), content=b"{nope", headers={"content-type": "application/json"})
    assert_envelope(r, 400)


def test_search(proxy: Proxy) -> None:
    tea = add(proxy, "alice", content="Alice drinks green tea every morning before work.")["item"]
    add(proxy, "alice", content="Alice's brother Tom plays the cello in an orchestra.", type="entity")
    add(proxy, "alice", content="Alice must submit the quarterly report by Friday.", type="task")
    found = listed(proxy, "alice", q="what tea does she drink")
    assert found[0]["id"] == tea["id"]
    assert {"score", "vector", "bm25"} <= set(found[0])
    assert all(m["id"] != tea["id"] for m in listed(proxy, "alice", q="cello orchestra"))
    assert [m["content"] for m in listed(proxy, "alice", q="quarterly rep")] == [
        "Alice must submit the quarterly report by Friday."
    ]
    assert listed(proxy, "alice", q="submarine volcano") == []
    with admin(proxy) as http:
        assert_envelope(http.get(MEMORIES.format(user="alice"), params={"q": "tea", "limit": "0"}), 400)
        assert_envelope(http.get(MEMORIES.format(user="alice"), params={"all": "maybe"}), 400)


# ---------------------------------------------------------------- sessions and traces


def test_a_request_the_memory_layer_stays_out_of_keeps_no_trace_as_the_headers_reference_says(proxy: Proxy) -> None:
    """X-Paperclip-Memory: off records nothing, its trace included: the header still names the request (its log
    line), and the reference says that such a trace answers 404 rather than promise what it forwarded."""
    raw = proxy.client().chat.completions.with_raw_response.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "hello"}],
        extra_headers={"X-Paperclip-User": "bob", "X-Paperclip-Memory": "off"},
    )
    proxy.drain()
    assert raw.headers["x-paperclip-trace"].startswith("t-")
    with admin(proxy) as http:
        assert_envelope(http.get(f"/paperclip/v1/traces/{raw.headers['x-paperclip-trace']}"), 404)
    reference = (Path(__file__).resolve().parents[1] / "docs" / "reference" / "headers.md").read_text()
    row = next(line for line in reference.splitlines() if line.startswith("| `X-Paperclip-Trace`"))
    assert "`X-Paperclip-Memory: off`" in row and "404" in row


def test_trace_shows_what_was_forwarded(proxy: Proxy, upstream: FakeUpstream) -> None:
    session = teach(proxy, "bob")
    headers = ask(proxy, "bob")
    assert int(headers["x-paperclip-memories"]) >= 1
    with admin(proxy) as http:
        trace = http.get(f"/paperclip/v1/traces/{headers['x-paperclip-trace']}").json()
        assert_envelope(http.get("/paperclip/v1/traces/t-unknown"), 404)
    assert trace["object"] == "paperclip.trace"
    assert trace["trace"] == headers["x-paperclip-trace"] and trace["user"] == "bob"
    assert trace["tokens_in"] == int(headers["x-paperclip-tokens-in"])
    assert trace["tokens_forwarded"] == int(headers["x-paperclip-tokens-forwarded"])
    assert trace["query"] == QUESTION
    assert trace["candidates"] and trace["injected"]
    for candidate in trace["candidates"]:
        assert {"vector", "bm25", "score", "text"} <= set(candidate)
    assert "Zorblax" in trace["memory_block"]
    assert trace["memory_block"] in str(upstream.chat_requests()[-1].json()["messages"][-1]["content"])
    assert session != headers["x-paperclip-session"]


def test_session_shows_summary_chain_and_watermark(
    make_proxy: Callable[..., Proxy], upstream_url: str, tmp_path: Path
) -> None:
    raw = base_config(upstream_url, tmp_path / "s.db", defaults={"context": {"recent_window_tokens": 300}})
    proxy = make_proxy(raw)
    history: list[dict[str, Any]] = [{"role": "user", "content": "Let us plan the Lisbon trip in detail."}]
    for i in range(20):
        history.append({"role": "assistant", "content": f"Step {i}: book the tram tickets and a fado evening."})
        history.append({"role": "user", "content": f"Fine, step {i} is done, what is next on the list?"})
    client = proxy.client()
    raw_response = client.chat.completions.with_raw_response.create(
        model="gpt-4o-mini", messages=history, extra_headers={"X-Paperclip-User": "carol"}  # type: ignore[arg-type]
    )
    proxy.drain()
    session = raw_response.headers["x-paperclip-session"]
    with admin(proxy) as http:
        state = http.get(f"/paperclip/v1/sessions/{session}").json()
        assert_envelope(http.get("/paperclip/v1/sessions/s-unknown"), 404)
    assert state["object"] == "paperclip.session" and state["session"] == session
    assert state["users"] == ["carol"] and state["fragments"] > 0
    assert state["watermark"] > 0 and state["summaries"]
    assert state["prefixes"][-1]["upto"] == state["watermark"]
    chain = {s["id"] for s in state["summaries"]}
    assert set(state["prefixes"][-1]["summary_ids"]) <= chain
