"""Forgetting a user leaves no trace: not in the API, not in retrieval, not in the file's bytes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from proxy.store import urls
from tests.admin_helpers import FACT, MARK, admin, ask, teach
from tests.conftest import Proxy
from tests.fake_upstream import FakeUpstream

OTHER_FACT = "My parrot Quillimo is allergic to sunflower seeds, please remember that."


def database_bytes(proxy: Proxy) -> bytes:
    path = Path(urls.sqlite_path(proxy.runtime.settings.storage.url))
    files = [path, path.with_name(path.name + "-wal")]
    return b"".join(f.read_bytes() for f in files if f.exists()).lower()


def export(proxy: Proxy, user: str) -> dict[str, Any]:
    with admin(proxy) as http:
        return dict(http.get(f"/paperclip/v1/users/{user}/export").json())


def test_forget_leaves_no_trace(proxy: Proxy, upstream: FakeUpstream) -> None:
    session = teach(proxy, "bob")
    teach(proxy, "carol", OTHER_FACT)
    with admin(proxy) as http:
        http.post("/paperclip/v1/users/bob/memories", json={"content": "Bob's cat Zorblax is grey."})
    headers = ask(proxy, "bob")
    assert int(headers["x-paperclip-memories"]) >= 1
    before = export(proxy, "bob")
    assert "Zorblax" in str(before["items"]) and "Zorblax" in str(before["fragments"])
    assert MARK in database_bytes(proxy)

    with admin(proxy) as http:
        r = http.delete("/paperclip/v1/users/bob")
        assert r.status_code == 200, r.text
        counts = r.json()["counts"]
        assert counts["items"] >= 2 and counts["fragments"] >= 4 and counts["traces"] >= 2
        assert counts["vectors"] == counts["items"] + counts["fragments"]
        assert counts["extraction_cursors"] >= 1 and counts["wal_checkpointed"] == 1
        assert http.get("/paperclip/v1/users/bob/memories", params={"all": "true"}).json()["data"] == []
        assert http.get(f"/paperclip/v1/sessions/{session}").status_code == 404
        assert http.get(f"/paperclip/v1/traces/{headers['x-paperclip-trace']}").status_code == 404
    after = export(proxy, "bob")
    assert all(after[k] == [] for k in ("items", "fragments", "sessions", "traces"))
    assert MARK not in database_bytes(proxy)

    headers = ask(proxy, "bob")
    assert headers["x-paperclip-memories"] == "0"
    assert "zorblax" not in upstream.chat_requests()[-1].body.decode().lower()
    # Another user of the tenant keeps everything.
    assert "Quillimo" in str(export(proxy, "carol")["items"])
    assert int(ask(proxy, "carol", "Which seeds is my parrot allergic to?")["x-paperclip-memories"]) >= 1


def test_forget_one_memory(proxy: Proxy) -> None:
    with admin(proxy) as http:
        item = http.post(
            "/paperclip/v1/users/dave/memories", json={"content": "Dave's boat is named Zorblax."}
        ).json()["item"]
        assert http.delete(f"/paperclip/v1/users/dave/memories/{item['id']}").status_code == 200
    assert MARK not in database_bytes(proxy)


def test_forget_unknown_user_is_harmless(proxy: Proxy) -> None:
    with admin(proxy) as http:
        r = http.delete("/paperclip/v1/users/nobody")
    assert r.status_code == 200
    assert r.json()["counts"]["items"] == 0 and FACT not in r.text
