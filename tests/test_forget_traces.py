"""A forgotten user leaves no trace of their id in the database file (issue 14, defect 11)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.conftest import ADMIN_KEY, Proxy

USER = "carol.forgotten@example.org"


def test_a_forgotten_users_id_is_nowhere_in_the_database(make_proxy: Callable[..., Proxy], tmp_path: Path) -> None:
    proxy = make_proxy(defaults={"memory": {"pii": "keep"}})
    with proxy.http() as http:
        for i in range(3):
            body = {"model": "m", "user": USER, "messages": [{"role": "user", "content": f"I like tea, number {i}"}]}
            assert http.post("/v1/chat/completions", json=body).status_code == 200
    proxy.drain()
    with proxy.http(ADMIN_KEY) as admin:
        assert admin.post(f"/paperclip/v1/users/{USER}/memories", json={"content": "Drinks green tea daily"}).status_code == 201
        assert admin.delete(f"/paperclip/v1/users/{USER}").status_code == 200
    assert proxy.server.call(proxy.store.users.checkpoint())
    raw = b"".join(p.read_bytes() for p in tmp_path.glob("p.db*"))
    assert USER.encode() not in raw
    assert USER.encode("utf-16-le") not in raw


def test_existing_generation_rows_are_rekeyed_by_digest() -> None:
    import sqlean

    from proxy.store.records import generation_key, scope_of
    from proxy.store.sqlite import sqlite_migrations as migrations

    conn = sqlean.connect(":memory:")
    conn.execute("CREATE TABLE scope_generations (scope TEXT PRIMARY KEY, generation INTEGER NOT NULL)")
    conn.execute("INSERT INTO scope_generations VALUES (?, 3)", (scope_of("acme", USER),))
    migrations.m008_hashed_generation_keys(conn)
    assert conn.execute("SELECT scope, generation FROM scope_generations").fetchall() == [(generation_key("acme", USER), 3)]
