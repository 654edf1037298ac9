"""Session names are read from their header as UTF-8, and rows stored in the old latin-1 reading are renamed."""

from __future__ import annotations

import socket
import sqlite3
from collections.abc import Callable
from urllib.parse import quote

import psycopg

from proxy.store.session_names import meant
from proxy.store.sqlite import sqlite_migrations
from tests.conftest import ADMIN_KEY, PROXY_KEY, Proxy, both_stores

backend = both_stores  # every test that starts a proxy runs on SQLite and on PostgreSQL

CAFE = "café ☕ 会话"
HISTORY = [{"role": "user", "content": "I fly to Lisbon on Friday."}]


def chat_with_session(proxy: Proxy, raw_session: bytes) -> bytes:
    """A chat request whose X-Paperclip-Session carries ``raw_session``; the session header echoed back."""
    body = b'{"model": "m", "messages": [{"role": "user", "content": "I fly to Lisbon on Friday."}]}'
    with socket.create_connection(("127.0.0.1", proxy.server.port)) as sock:
        sock.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nconnection: close\r\n"
            + f"authorization: Bearer {PROXY_KEY}\r\ncontent-type: application/json\r\n".encode()
            + b"x-paperclip-user: ada\r\nx-paperclip-session: " + raw_session + b"\r\n"
            + f"content-length: {len(body)}\r\n\r\n".encode() + body
        )
        reply = b""
        while part := sock.recv(65536):
            reply += part
    proxy.drain()
    head = reply.split(b"\r\n\r\n", 1)[0]
    assert head.startswith(b"HTTP/1.1 200"), head
    return next(line.split(b": ", 1)[1] for line in head.split(b"\r\n") if line.startswith(b"x-paperclip-session:"))


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


def forget_migration(storage_url: str, backend: str) -> None:
    """Mark the rename as never applied, as in a database an older version wrote."""
    statement = "DELETE FROM _migrations WHERE name LIKE '%utf8_session_names'"
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


def test_a_renamed_key_that_is_already_taken_keeps_its_old_name() -> None:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.execute("CREATE TABLE _migrations (name TEXT PRIMARY KEY, applied REAL NOT NULL)")
    before = [name for name, _ in sqlite_migrations.MIGRATIONS].index("013_utf8_session_names")
    for name, fn in sqlite_migrations.MIGRATIONS[:before]:
        fn(conn)  # type: ignore[arg-type]
        conn.execute("INSERT INTO _migrations VALUES (?, 0)", (name,))
    for session in ("café", "cafÃ©", "caf\u00c3\u00a9-alone"):
        conn.execute("INSERT INTO extraction_cursors (tenant, session, upto) VALUES ('t', ?, 1)", (session,))
    assert sqlite_migrations.apply(conn) == [name for name, _ in sqlite_migrations.MIGRATIONS[before:]]  # type: ignore[arg-type]
    names = sorted(r[0] for r in conn.execute("SELECT session FROM extraction_cursors"))
    assert names == sorted(["café", "café-alone", "cafÃ©"])  # "cafÃ©" could not become a second "café"


def test_a_user_header_keeps_the_reading_its_stored_rows_have() -> None:
    from proxy.tenancy import header_text

    raw = "zoë".encode()
    assert header_text("x-paperclip-user", raw) == raw.decode("latin-1")  # as users' rows were written
    assert header_text("x-paperclip-session", raw) == "zoë"
