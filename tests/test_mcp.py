"""``POST /mcp`` through the official ``mcp`` SDK's client: the memory tools, scoped and authenticated like chat."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import httpx
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult

from tests.admin_helpers import admin
from tests.conftest import PROXY_KEY, Proxy
from tests.fake_upstream import FakeUpstream

TOOLS = {"search_memories", "add_memory", "list_memories", "forget_memory", "get_profile"}


async def _session(proxy: Proxy, calls: list[tuple[str, dict[str, Any]]], headers: dict[str, str]) -> list[Any]:
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http, Client(
        streamable_http_client(proxy.url + "/mcp", http_client=http)
    ) as client:
        out: list[Any] = [await client.list_tools()]
        for name, arguments in calls:
            out.append(await client.call_tool(name, arguments))
        return out


def mcp(proxy: Proxy, *calls: tuple[str, dict[str, Any]], key: str = PROXY_KEY, user: str | None = "mia") -> list[Any]:
    """The tool list, then each call's result, over one MCP connection."""
    headers = {"authorization": f"Bearer {key}", **({"x-paperclip-user": user} if user else {})}
    return asyncio.run(_session(proxy, list(calls), headers))


def payload(result: CallToolResult) -> dict[str, Any]:
    """The structured content, checked to be the same JSON as the text."""
    assert not result.is_error, result.content
    assert result.structured_content == json.loads(result.content[0].text)  # type: ignore[union-attr]
    return result.structured_content  # type: ignore[return-value]


def test_the_tools_do_what_the_admin_api_does(make_proxy: Callable[..., Proxy], upstream: FakeUpstream) -> None:
    proxy = make_proxy()
    listed, added, found, page, profile = mcp(
        proxy,
        ("add_memory", {"content": "Mia is allergic to peanuts and carries an epinephrine pen."}),
        ("search_memories", {"query": "peanuts allergy", "limit": 5}),
        ("list_memories", {"limit": 10}),
        ("get_profile", {}),
    )
    assert {t.name for t in listed.tools} >= TOOLS
    item = payload(added)["item"]
    assert payload(added)["action"] == "added" and "peanuts" in item["content"]
    assert [m["id"] for m in payload(found)["data"]] == [item["id"]]
    with admin(proxy) as http:  # the same JSON the admin API answers
        assert payload(page) == http.get("/paperclip/v1/users/mia/memories", params={"limit": 10}).json()
        assert payload(profile) == http.get("/paperclip/v1/users/mia/profile").json()
        history = http.get(f"/paperclip/v1/users/mia/memories/{item['id']}/history").json()
    assert history["data"][0]["by"] == "mcp"


def test_a_memory_added_over_mcp_is_recalled_in_chat_and_forgotten_over_mcp(
    make_proxy: Callable[..., Proxy], upstream: FakeUpstream
) -> None:
    proxy = make_proxy()
    _, added = mcp(proxy, ("add_memory", {"content": "Mia's cat Biscuit is allergic to peanuts."}))
    item = payload(added)["item"]["id"]
    with proxy.client() as client:
        raw = client.chat.completions.with_raw_response.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "What is Biscuit allergic to?"}], user="mia"
        )
        assert int(raw.headers["x-paperclip-memories"]) >= 1
        assert "peanuts" in str(upstream.chat_requests()[-1].json()["messages"][-1]["content"])
        _, forgotten, gone, *beyond = mcp(proxy, ("forget_memory", {"id": item}), ("forget_memory", {"id": item}),
                                          ("forget_memory", {"id": 2**70}), ("forget_memory", {"id": -1}))
        assert payload(forgotten) == {"id": item, "object": "paperclip.memory", "deleted": True,
                                      "memories": [item], "turns": 0, "purged": False}
        for missing in (gone, *beyond):  # the admin API's answer, also for ids no store holds
            assert missing.is_error and "No memory" in missing.content[0].text  # type: ignore[union-attr]
        client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "What is Biscuit allergic to?"}], user="mia"
        )
    assert "peanuts" not in str(upstream.chat_requests()[-1].json()["messages"][-1]["content"])


def test_the_user_is_the_header_else_the_argument_else_anonymous(
    make_proxy: Callable[..., Proxy], upstream: FakeUpstream
) -> None:
    proxy = make_proxy()
    mcp(proxy, ("add_memory", {"content": "Header user likes tea.", "user": "ignored"}), user="ada")
    mcp(proxy, ("add_memory", {"content": "Argument user likes coffee.", "user": "bob"}), user=None)
    mcp(proxy, ("add_memory", {"content": "Nobody in particular likes water."}), user=None)
    with admin(proxy) as http:
        users = {u: json.dumps(http.get(f"/paperclip/v1/users/{u}/memories").json())
                 for u in ("ada", "bob", "ignored", "anonymous")}
    assert "tea" in users["ada"] and "coffee" in users["bob"] and "water" in users["anonymous"]
    assert "tea" not in users["ignored"]


def test_the_user_header_is_read_as_utf8_and_refused_when_it_is_not(
    make_proxy: Callable[..., Proxy], upstream: FakeUpstream
) -> None:
    proxy = make_proxy()
    add = ("add_memory", {"content": "Zhang Wei likes oolong tea."})
    headers: Any = {"authorization": f"Bearer {PROXY_KEY}", "x-paperclip-user": "张伟".encode()}
    assert payload(asyncio.run(_session(proxy, [add, ("get_profile", {})], headers))[2])["user"] == "张伟"
    refused = asyncio.run(_session(proxy, [add], {**headers, "x-paperclip-user": b"Jos\xe9"}))[1]
    assert refused.is_error and "X-Paperclip-User" in refused.content[0].text
    with admin(proxy) as http:
        assert [u["id"] for u in http.get("/paperclip/v1/users").json()["data"]] == ["张伟"]


def test_keys_scope_the_tools_like_chat(make_proxy: Callable[..., Proxy], upstream: FakeUpstream) -> None:
    proxy = make_proxy(passthrough_keys=True)
    mcp(proxy, ("add_memory", {"content": "Mia in acme likes sailing."}))
    _, theirs = mcp(proxy, ("list_memories", {}), key="sk-someone-elses-own")
    assert payload(theirs)["data"] == []  # another key's scope sees nothing of acme's
    _, ours = mcp(proxy, ("list_memories", {}))
    assert "sailing" in json.dumps(payload(ours))


def test_an_unknown_key_is_refused_before_mcp(proxy: Proxy) -> None:
    with httpx.Client(base_url=proxy.url, timeout=30) as http:
        nobody = http.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        wrong = http.post("/mcp", headers={"authorization": "Bearer pk-wrong"},
                          json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert nobody.status_code == 401 and wrong.status_code == 401
    assert wrong.json()["error"]["code"] == "invalid_api_key"


def test_making_the_app_leaves_the_root_logger_as_it_was() -> None:
    """The SDK's server configures logging when it is made; a process's own logging must win."""
    import logging

    from proxy import config
    from proxy.server.app import create_app

    root = logging.getLogger()
    kept = (list(root.handlers), root.level)
    root.handlers[:] = []  # a process that has not configured logging yet (pytest's handlers aside)
    try:
        create_app(config.from_dict({}, env={}))
        assert (root.handlers, root.level) == ([], kept[1])
    finally:
        root.handlers[:] = kept[0]
        root.setLevel(kept[1])


def test_list_memories_pages_with_after(make_proxy: Callable[..., Proxy], upstream: FakeUpstream) -> None:
    proxy = make_proxy()
    facts = ["Mia likes sailing on Sundays.", "Mia's brother Leo lives in Lyon.", "Mia is learning the cello."]
    mcp(proxy, *(("add_memory", {"content": f}) for f in facts))
    _, first = mcp(proxy, ("list_memories", {"limit": 2}))
    page = payload(first)
    assert len(page["data"]) == 2 and page["has_more"] is True
    _, rest, bad = mcp(proxy, ("list_memories", {"limit": 2, "after": page["last_id"]}),
                       ("list_memories", {"limit": 1000}))
    assert [m["content"] for m in payload(rest)["data"]] == [facts[2]] and payload(rest)["has_more"] is False
    assert bad.is_error and "'limit' must be an integer from 1 to 100" in bad.content[0].text  # type: ignore[union-attr]


_LAZY = """
import sys
from starlette.testclient import TestClient
from proxy import config
from proxy.server.app import create_app

raw = {"tenants": {"acme": {"api_keys": ["pk"]}},
       "defaults": {"upstream": {"base_url": "http://127.0.0.1:9/v1"},
                    "memory": {"enabled": False}, "context": {"enabled": False}}}
with TestClient(create_app(config.from_dict(raw, env={}))) as client:
    assert client.get("/healthz").status_code == 200
    before = "mcp" in sys.modules
    listed = client.post("/mcp", headers={"authorization": "Bearer pk", "accept": "application/json, text/event-stream"},
                         json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}})
    print(before, "mcp" in sys.modules, listed.status_code, sorted(t["name"] for t in listed.json()["result"]["tools"]))
"""


def test_the_sdk_is_loaded_by_the_first_mcp_request_not_at_start() -> None:
    # A proxy no agent reaches over MCP never pays for the SDK (~0.5 s and ~26 MB at start).
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", _LAZY], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    before, after, status, names = done.stdout.strip().split(" ", 3)
    assert (before, after, status) == ("False", "True", "200")
    assert set(json.loads(names.replace("'", '"'))) == TOOLS


def test_get_and_delete_are_405_with_allow_post_no_idle_stream_held(proxy: Proxy) -> None:
    """Stateless, the server has nothing to send outside a POST's answer and no session to end: the MCP spec's
    other answer to GET, 405, holds no connection open (an event stream that sends nothing would, one per GET)."""
    auth = {"authorization": f"Bearer {PROXY_KEY}", "accept": "text/event-stream, application/json"}
    with httpx.Client(base_url=proxy.url, timeout=5) as http:
        for method in ("GET", "DELETE"):
            answer = http.request(method, "/mcp", headers=auth)
            assert answer.status_code == 405, (method, answer.status_code)
            assert answer.headers["allow"] == "POST"
            assert answer.json()["error"]["type"] == "invalid_request_error"
        listed = http.post("/mcp", headers=auth, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert listed.status_code == 200
