"""SIGKILL during the background work, then a restart: the state is consistent and the work resumes (issue 14).

A real ``paperclip serve`` subprocess in front of the fake upstream; the fake
holds the compression model's answer so the kill lands while the work is
under way.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from proxy.eval.fake import fake_summary
from proxy.server.startup import YOUNG_OBJECTS
from tests.conftest import ADMIN_KEY, PROXY_KEY, base_config
from tests.fake_upstream import FakeUpstream, completion
from tests.servers import ServeProcess

SESSION = "crash-session"
USER = "carol"


class Serve(ServeProcess):
    """A ``paperclip serve`` the crash tests kill, restart and talk to; ``start`` waits until ready."""

    def start(self) -> Serve:
        super().start()
        self.wait_ready()
        return self

    def chat(self, messages: list[dict[str, Any]]) -> httpx.Response:
        body = {"model": "gpt-4o-mini", "messages": messages, "user": USER}
        headers = {"authorization": f"Bearer {PROXY_KEY}", "x-paperclip-session": SESSION}
        return httpx.post(self.url + "/v1/chat/completions", json=body, headers=headers, timeout=30)

    def admin(self, method: str, path: str) -> httpx.Response:
        headers = {"authorization": f"Bearer {ADMIN_KEY}"}
        return httpx.request(method, self.url + "/paperclip/v1" + path, headers=headers, timeout=60)


@pytest.fixture
def serve(upstream_url: str, tmp_path: Path) -> Iterator[Any]:
    started: list[Serve] = []

    def make(**overrides: Any) -> Serve:
        raw = base_config(upstream_url, tmp_path / "p.db", **overrides)
        path = tmp_path / "proxy.yaml"
        path.write_text(yaml.safe_dump(raw))
        server = Serve(path, tmp_path / "serve.log")
        started.append(server)
        return server.start()

    yield make
    for server in started:
        server.stop()


def hold(upstream: FakeUpstream, marker: str) -> threading.Event:
    """Make the compression model hang on prompts holding ``marker``; the event is set when one arrives."""
    arrived = threading.Event()

    async def handler(request: Request, body: dict[str, Any]) -> Response:
        if marker in str(body.get("messages")):
            arrived.set()
            await asyncio.sleep(120)
        return JSONResponse(completion(fake_summary(body["messages"])))

    upstream.compression = handler
    return arrived


def integrity(db: Path) -> str:
    import sqlean

    conn = sqlean.connect(str(db))
    try:
        return str(conn.execute("PRAGMA integrity_check").fetchone()[0])
    finally:
        conn.close()


def turns(n: int) -> list[dict[str, Any]]:
    facts = ["My name is Carol and I am allergic to peanuts.", "I live in Lisbon with my two cats.",
             "My passport number ends in 4471.", "I work as a nurse on night shifts."]
    out: list[dict[str, Any]] = []
    for i in range(n):
        out.append({"role": "user", "content": f"{facts[i % len(facts)]} (turn {i})"})
        out.append({"role": "assistant", "content": f"Noted, thank you for telling me (turn {i})."})
    return out


def wait_for(condition: Any, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


def chat_until(proxy: Serve, messages: list[dict[str, Any]], condition: Any, timeout: float) -> float:
    """Keep sending ``messages`` (each request's after-work tries again) until ``condition``; seconds taken."""
    started = time.monotonic()
    while True:
        assert proxy.chat(messages).status_code == 200
        if condition():
            return time.monotonic() - started
        assert time.monotonic() - started < timeout, "condition not met in time"
        time.sleep(0.5)


def test_sigkill_during_extraction_then_restart_resumes_it(
    serve: Any, upstream: FakeUpstream, tmp_path: Path
) -> None:
    settings = {"defaults": {"context": {"enabled": False}, "memory": {"extract_every_messages": 2}}}
    proxy = serve(**settings)
    arrived = hold(upstream, "extracting long-term memories")
    history = turns(2)
    assert proxy.chat([*history, {"role": "user", "content": "What do you know about me?"}]).status_code == 200
    assert arrived.wait(30), "extraction never reached the compression model"
    proxy.kill()

    assert integrity(tmp_path / "p.db") == "ok"
    upstream.compression = None
    proxy = serve(**settings)
    assert proxy.admin("GET", f"/users/{USER}/memories").json()["data"] == []  # nothing half-written
    history += [{"role": "user", "content": "What do you know about me?"}, {"role": "assistant", "content": "Some."}]

    def extracted() -> bool:
        items = proxy.admin("GET", f"/users/{USER}/memories").json()["data"]
        return any("peanut" in m["content"].lower() for m in items)

    # The earlier turns are mined after all (the cursor had not moved), as soon as the dead
    # process's claim has run out: within its short lease, not minutes.
    assert chat_until(proxy, [*history, {"role": "user", "content": "And now?"}], extracted, 20) < 15


def test_sigkill_during_forget_then_restart_forget_completes(
    serve: Any, upstream: FakeUpstream, tmp_path: Path
) -> None:
    settings = {"defaults": {"context": {"enabled": False}, "memory": {"extract_every_messages": 2}}}
    proxy = serve(**settings)
    assert proxy.chat(turns(1)[:1]).status_code == 200
    wait_for(lambda: bool(proxy.admin("GET", f"/users/{USER}/export").json().get("fragments")))
    # A forget waits for the user's recording in flight; hold one, so the kill lands inside the forget.
    arrived = hold(upstream, "extracting long-term memories")
    assert proxy.chat(turns(2)).status_code == 200
    assert arrived.wait(30)
    def forget_and_be_cut() -> None:
        with contextlib.suppress(httpx.HTTPError):  # the process dies under it
            proxy.admin("DELETE", f"/users/{USER}")

    forgetting = threading.Thread(target=forget_and_be_cut, daemon=True)
    forgetting.start()
    time.sleep(0.5)
    proxy.kill()

    assert integrity(tmp_path / "p.db") == "ok"
    upstream.compression = None
    proxy = serve(**settings)
    assert proxy.admin("DELETE", f"/users/{USER}").status_code == 200
    exported = proxy.admin("GET", f"/users/{USER}/export").json()
    assert not exported.get("fragments") and not exported.get("items"), exported


def test_sigkill_during_compression_then_restart_compresses_at_once(
    serve: Any, upstream: FakeUpstream, tmp_path: Path
) -> None:
    settings = {"defaults": {"memory": {"enabled": False}, "context": {"recent_window_tokens": 120}}}
    proxy = serve(**settings)
    arrived = hold(upstream, "compressing the older part")
    history = turns(6)
    assert proxy.chat([*history, {"role": "user", "content": "Summarise me."}]).status_code == 200
    assert arrived.wait(30), "compression never reached the compression model"
    proxy.kill()

    assert integrity(tmp_path / "p.db") == "ok"
    upstream.compression = None
    proxy = serve(**settings)
    history += [{"role": "user", "content": "Summarise me."}, {"role": "assistant", "content": "Sure."}]

    def compressed() -> bool:
        state = proxy.admin("GET", f"/sessions/{SESSION}")
        return state.status_code == 200 and bool(state.json().get("summaries"))

    # Taken over as soon as the dead process's lease has run out: within its short lease, not minutes.
    assert chat_until(proxy, [*history, {"role": "user", "content": "Again?"}], compressed, 20) < 15


def test_serve_freezes_its_heap_once_the_memory_layer_is_loaded(serve: Any, tmp_path: Path) -> None:
    # What lives as long as the process (the model, the indexes) leaves the collector's walks.
    server = serve()
    log = tmp_path / "serve.log"
    deadline = time.monotonic() + 20
    while "heap frozen after start" not in log.read_text() and time.monotonic() < deadline:
        time.sleep(0.1)
    frozen = [line for line in log.read_text().splitlines() if "heap frozen after start" in line]
    assert len(frozen) == 1 and int(frozen[0].split(": ")[-1].split()[0]) > 10_000, frozen
    # ...and a request's short-lived objects are left to reference counting, not collected 700 at a time.
    assert f"collected after {YOUNG_OBJECTS} new ones" in frozen[0]
    assert server.chat([{"role": "user", "content": "hello"}]).status_code == 200
