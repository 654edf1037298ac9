"""``/readyz`` tells the truth about the database, and the log says why (issue 14, defect 13)."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from proxy.server.readiness import database_problem, identity
from tests.conftest import Proxy, base_config

HI = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}


def readyz(proxy: Proxy) -> httpx.Response:
    with proxy.http(None) as http:
        return http.get("/readyz")


def test_a_database_deleted_while_running_is_reported_and_memory_steps_aside(
    make_proxy: Callable[..., Proxy], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    proxy = make_proxy()
    assert readyz(proxy).status_code == 200
    for suffix in ("", "-wal", "-shm"):
        Path(f"{tmp_path / 'p.db'}{suffix}").unlink(missing_ok=True)
    with caplog.at_level(logging.ERROR, logger="paperclip.readiness"):
        r = readyz(proxy)
        assert r.status_code == 503
        assert "deleted" in r.json()["reason"]
        assert r.json()["checks"]["database"] is False
        with proxy.http() as http:
            chat = http.post("/v1/chat/completions", json=HI)
    assert chat.status_code == 200
    assert chat.headers["x-paperclip-degraded"] == "memory_unavailable"
    assert "memory layer off" in caplog.text and "deleted" in caplog.text


def reason_it_is_not_open(proxy: Proxy) -> str:
    """Wait until ``/readyz`` says why the database is not open (503), and check chats step aside meanwhile."""
    deadline = time.monotonic() + 30
    while "reason" not in (body := readyz(proxy).json()):
        assert time.monotonic() < deadline, body
        time.sleep(0.05)
    assert readyz(proxy).status_code == 503
    with proxy.http() as http:
        assert http.post("/v1/chat/completions", json=HI).headers["x-paperclip-degraded"] == "memory_unavailable"
    return str(body["reason"])


def test_a_database_that_cannot_be_opened_says_why(
    make_proxy: Callable[..., Proxy], upstream_url: str, tmp_path: Path
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    proxy = make_proxy(base_config(upstream_url, blocker / "p.db"), wait_ready=False)
    assert "could not start" in reason_it_is_not_open(proxy)


def test_a_database_that_answers_only_after_the_start_is_used_without_a_restart(
    make_proxy: Callable[..., Proxy], upstream_url: str, tmp_path: Path
) -> None:
    """SPEC §9: a database down when the proxy starts (its volume not mounted yet) is tried again."""
    later = tmp_path / "mounted-later"
    later.write_text("a file where the folder will be")
    proxy = make_proxy(base_config(upstream_url, later / "p.db"), wait_ready=False)
    assert "trying again" in reason_it_is_not_open(proxy)
    later.unlink()
    deadline = time.monotonic() + 30
    while readyz(proxy).status_code != 200:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    with proxy.http() as http:
        assert "x-paperclip-degraded" not in http.post("/v1/chat/completions", json=HI).headers


def test_database_problem_names_what_is_wrong(tmp_path: Path) -> None:
    db = tmp_path / "x.db"
    db.write_bytes(b"")
    opened = identity(str(db))
    assert database_problem(str(db), opened) is None
    assert database_problem(":memory:", None) is None
    other = tmp_path / "other.db"
    other.write_bytes(b"")  # made while the first exists: another inode
    other.replace(db)
    assert "replaced" in (database_problem(str(db), opened) or "")
    db.unlink()
    assert "deleted" in (database_problem(str(db), opened) or "")
    if os.geteuid() != 0:  # root may write anything
        db.write_bytes(b"")
        db.chmod(0o444)
        assert "not writable" in (database_problem(str(db), identity(str(db))) or "")


def test_a_plain_proxy_loads_its_token_tables_before_the_first_request(
    make_proxy: Callable[..., Proxy], upstream_url: str, tmp_path: Path
) -> None:
    # Loading an encoding is ~0.2 s of CPU: on the first request it would stall every other one on the loop.
    from proxy import tokens

    tokens.encoding_for.cache_clear()
    off = {"memory": {"enabled": False}, "context": {"enabled": False}}
    proxy = make_proxy(base_config(upstream_url, tmp_path / "p.db", defaults=off))
    assert readyz(proxy).status_code == 200
    assert tokens.encoding_for.cache_info().currsize == 1  # before any chat request
    with proxy.http() as http:
        assert http.post("/v1/chat/completions", json=HI).status_code == 200
