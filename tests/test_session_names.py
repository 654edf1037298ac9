"""Session and user names are read from their headers as UTF-8, and rows stored in the old latin-1 reading are
renamed; a user header that is not UTF-8 is refused."""

from __future__ import annotations

import json
import socket
import sqlite3
from collections.abc import Callable
from urllib.parse import quote

import psycopg

from proxy.store.records import cursor_key
from proxy.store.session_names import meant
from proxy.store.sqlite import sqlite_migrations
from tests.conftest import ADMIN_KEY, PROXY_KEY, Proxy, both_stores

backend = both_stores  # every test that starts a proxy runs on SQLite and on PostgreSQL

CAFE = "café ☕ 会话"
HISTORY = [{"role": "user", "content": "I fly to Lisbon on Friday."}]


def post_raw(proxy: Proxy, path: str, body: bytes, headers: bytes) -> tuple[bytes, bytes]:
    """A POST whose extra ``headers`` go out as raw bytes (no client re-encodes them); the reply's head and body."""
    with socket.create_connection(("127.0.0.1", proxy.server.port)) as sock:
        sock.sendall(
            f"POST {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n".encode()
            + f"authorization: Bearer {PROXY_KEY}\r\ncontent-type: application/json\r\n".encode()
            + headers + f"content-length: {len(body)}\r\n\r\n".encode() + body
        )
        reply = b""
        while part := sock.recv(65536):
            reply += part
    proxy.drain()
    head, _, rest = reply.partition(b"\r\n\r\n")
    return head, rest


def header_of(head: bytes, name: bytes) -> bytes:
    return next(line.split(b": ", 1)[1] for line in head.split(b"\r\n") if line.lower().startswith(name + b":"))


def chat_with_session(proxy: Proxy, raw_session: bytes, raw_user: bytes = b"ada", body: bytes = b"") -> bytes:
    """A chat request whose X-Paperclip-Session (when not empty) carries ``raw_session``, and X-Paperclip-User
    (when not empty) ``raw_user``; the session header it answers."""
    body = body or b'{"model": "m", "messages": [{"role": "user", "content": "I fly to Lisbon on Friday."}]}'
    headers = b"".join(name + b": " + value + b"\r\n" for name, value in
                       ((b"x-paperclip-user", raw_user), (b"x-paperclip-session", raw_session)) if value)
    head, _ = post_raw(proxy, "/v1/chat/completions", body, headers)
    assert head.startswith(b"HTTP/1.1 200"), head
    return header_of(head, b"x-paperclip-session")


def test_a_session_header_in_latin1_is_echoed_byte_exact(plain_proxy: Proxy) -> None:
    raw = b"caf\xe9-\xff-session"  # not UTF-8: read as latin-1, as before
    assert chat_with_session(plain_proxy, raw) == raw


def session_page(proxy: Proxy, name: str) -> int:
    with proxy.http(ADMIN_KEY) as admin:
        return admin.get(f"/paperclip/v1/sessions/{quote(name, safe='')}").status_code


def test_a_utf8_session_name_is_stored_as_sent_and_echoed_byte_for_byte(make_proxy: Callable[..., Proxy]) -> None:
    proxy = make_proxy()
    assert chat_with_session(proxy, CAFE.encode()) == CAFE.encode()
    assert session_page(proxy, CAFE) == 200
    assert session_page(proxy, CAFE.encode().decode("latin-1")) == 404  # the old reading is gone


def test_rows_stored_under_the_latin1_reading_are_renamed_by_the_migration(
    make_proxy: Callable[..., Proxy], storage_url: str, backend: str
) -> None:
    # What an older version stored for the header "café ☕ 会话": its UTF-8 bytes read as latin-1.
    old_name = CAFE.encode().decode("latin-1")
    proxy = make_proxy()
    chat_with_session(proxy, old_name.encode())  # today's reading of these bytes is that old name
    assert session_page(proxy, old_name) == 200
    proxy.server.stop()
    forget_migration(storage_url, backend)
    restarted = make_proxy()  # the same database: the migration runs at start
    assert session_page(restarted, CAFE) == 200
    assert session_page(restarted, old_name) == 404
    # The conversation goes on under its name: the client's UTF-8 header finds its rows.
    assert chat_with_session(restarted, CAFE.encode()) == CAFE.encode()
    with restarted.http(ADMIN_KEY) as admin:
        sessions = admin.get("/paperclip/v1/users/ada/sessions").json()["data"]
    assert [s["id"] for s in sessions] == [CAFE]


def forget_migration(storage_url: str, backend: str, rename: str = "utf8_session_names") -> None:
    """Mark the rename as never applied, as in a database an older version wrote."""
    statement = f"DELETE FROM _migrations WHERE name LIKE '%{rename}'"
    if backend == "sqlite":
        with sqlite3.connect(storage_url.removeprefix("sqlite:///")) as conn:
            conn.execute(statement)
    else:
        with psycopg.connect(storage_url, autocommit=True) as conn:
            conn.execute(statement)


def test_the_rule_leaves_ascii_true_latin1_and_other_text_alone() -> None:
    assert meant("cafÃ©") == "café"
    assert meant("ä¼\x9aè¯\x9d") == "会话"
    for kept in ["s-0123abcd", "café", "会话", "Ã", "naïve \udcff"]:
        assert meant(kept) is None, kept


def migrated_before(migration: str) -> tuple[sqlite3.Connection, int]:
    """A SQLite database in memory as the version before ``migration`` left it; the migration's index."""
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.execute("CREATE TABLE _migrations (name TEXT PRIMARY KEY, applied REAL NOT NULL)")
    before = [name for name, _ in sqlite_migrations.MIGRATIONS].index(migration)
    for name, fn in sqlite_migrations.MIGRATIONS[:before]:
        fn(conn)  # type: ignore[arg-type]
        conn.execute("INSERT INTO _migrations VALUES (?, 0)", (name,))
    return conn, before


def test_a_renamed_key_that_is_already_taken_keeps_its_old_name() -> None:
    conn, before = migrated_before("013_utf8_session_names")
    for session in ("café", "cafÃ©", "caf\u00c3\u00a9-alone"):
        conn.execute("INSERT INTO extraction_cursors (tenant, session, upto) VALUES ('t', ?, 1)", (session,))
    sqlite_migrations.MIGRATIONS[before][1](conn)  # type: ignore[arg-type]  # (018 keys cursors by user)
    names = sorted(r[0] for r in conn.execute("SELECT session FROM extraction_cursors"))
    assert names == sorted(["café", "café-alone", "cafÃ©"])  # "cafÃ©" could not become a second "café"


def test_a_sessions_cursor_becomes_each_of_its_users() -> None:
    """018: two users who sent one session name shared one cursor; each now has it, and an ownerless one goes."""
    conn, _ = migrated_before("018_cursors_by_user")
    insert = ("INSERT INTO fragments (tenant, user, session, hash, role, text, terms, position, tokens, created)"
              " VALUES ('t', ?, 'main', ?, 'user', 'hi', 'hi', 0, 1, 0)")
    for user, digest in (("ann", "h1"), ("bob", "h2")):
        conn.execute(insert, (user, digest))
    for session in ("main", "forgotten"):
        conn.execute("INSERT INTO extraction_cursors (tenant, session, upto) VALUES ('t', ?, 5)", (session,))
    sqlite_migrations.apply(conn)  # type: ignore[arg-type]
    rows = set(conn.execute("SELECT session, upto FROM extraction_cursors").fetchall())
    assert rows == {(cursor_key("ann", "main"), 5), (cursor_key("bob", "main"), 5)}


USERS = ("José", "张伟")


def users(proxy: Proxy) -> set[str]:
    with proxy.http(ADMIN_KEY) as admin:
        return {u["id"] for u in admin.get("/paperclip/v1/users").json()["data"]}


def test_a_utf8_user_header_names_the_user_the_body_names(make_proxy: Callable[..., Proxy]) -> None:
    proxy = make_proxy()
    for name in USERS:
        by_header = chat_with_session(proxy, b"", raw_user=name.encode())
        body = json.dumps({"model": "m", "user": name,
                           "messages": [{"role": "user", "content": "I fly to Lisbon on Friday."}]}).encode()
        assert chat_with_session(proxy, b"", raw_user=b"", body=body) == by_header  # derived from the same user
    assert users(proxy) == set(USERS)


def test_a_user_header_that_is_not_utf8_is_refused_on_every_api(make_proxy: Callable[..., Proxy]) -> None:
    proxy = make_proxy()
    bodies = {
        "/v1/chat/completions": {"model": "m", "messages": [{"role": "user", "content": "hi"}]},
        "/v1/responses": {"model": "m", "input": "hi"},
        "/v1/messages": {"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]},
    }
    for path, body in bodies.items():
        head, answer = post_raw(proxy, path, json.dumps(body).encode(), b"x-paperclip-user: Jos\xe9\r\n")
        assert head.startswith(b"HTTP/1.1 400"), (path, head)
        error = json.loads(answer)["error"]
        assert "X-Paperclip-User" in error["message"] and "UTF-8" in error["message"], error
    assert users(proxy) == set()  # nothing recorded under any reading of those bytes



def test_users_stored_under_the_latin1_reading_are_renamed_by_the_migration(
    make_proxy: Callable[..., Proxy], storage_url: str, backend: str
) -> None:
    # What an older version stored for the header "José": its UTF-8 bytes read as latin-1.
    old_name = "José".encode().decode("latin-1")
    proxy = make_proxy()
    body = json.dumps({"model": "m", "user": old_name,
                       "messages": [{"role": "user", "content": "I fly to Lisbon on Friday."}]}).encode()
    chat_with_session(proxy, b"", raw_user=b"", body=body)
    with proxy.http(ADMIN_KEY) as admin:
        added = admin.post(f"/paperclip/v1/users/{quote(old_name)}/memories", json={"content": "José likes figs."})
        assert added.status_code == 201, added.text
    assert users(proxy) == {old_name}
    proxy.server.stop()
    forget_migration(storage_url, backend, "utf8_user_names")
    restarted = make_proxy()  # the same database: the migration runs at start
    assert users(restarted) == {"José"}
    chat_with_session(restarted, b"", raw_user="José".encode())  # the header now finds the user's rows
    assert users(restarted) == {"José"}
    with restarted.http(ADMIN_KEY) as admin:
        memories = admin.get(f"/paperclip/v1/users/{quote('José')}/memories").json()["data"]
        fragments = admin.get(f"/paperclip/v1/users/{quote('José')}/fragments").json()["data"]
    assert [m["content"] for m in memories] == ["José likes figs."]
    assert "I fly to Lisbon on Friday." in [f["text"] for f in fragments]


def test_a_renamed_user_whose_turn_is_already_stored_under_the_new_name_keeps_that_row_under_the_old() -> None:
    conn, before = migrated_before("016_utf8_user_names")
    insert = ("INSERT INTO fragments (tenant, user, session, hash, role, text, terms, position, tokens, created)"
              " VALUES ('t', ?, 's', ?, 'user', 'hi', 'hi', 0, 1, 0)")
    for user, digest in (("José", "h1"), ("JosÃ©", "h1"), ("JosÃ©", "h2")):
        conn.execute(insert, (user, digest))
    assert sqlite_migrations.apply(conn) == [name for name, _ in sqlite_migrations.MIGRATIONS[before:]]  # type: ignore[arg-type]
    rows = sorted(conn.execute("SELECT user, hash FROM fragments").fetchall())
    assert rows == sorted([("José", "h1"), ("José", "h2"), ("JosÃ©", "h1")])  # h1 could not be José's twice
