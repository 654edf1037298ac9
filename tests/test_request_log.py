"""One structured line per request: its fields, both formats, and no message text unless allowed."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from starlette.responses import JSONResponse

from proxy.server.requestlog import JsonFormatter, TextFormatter, hashed_user
from tests.conftest import PROXY_KEY, Proxy, base_config
from tests.fake_upstream import FakeUpstream
from tests.servers import ServeProcess, free_port

SECRET = "my passport number is 99-ZX-4412"


def lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "paperclip.request"]


def chat(proxy: Proxy, text: str = SECRET, **kw: Any) -> Any:
    return proxy.client().chat.completions.with_raw_response.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": text}],
        extra_headers={"X-Paperclip-User": "alice"}, **kw,
    )


def test_one_line_per_request_without_content(
    proxy: Proxy, upstream: FakeUpstream, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "paperclip")
    raw = chat(proxy)
    proxy.drain()
    with proxy.http() as http:
        http.get("/v1/models")
    proxy.drain()  # the line is written once the response has gone out
    records = lines(caplog)
    assert len(records) == 2
    line = json.loads(JsonFormatter().format(records[0]))
    assert line["logger"] == "paperclip.request" and line["route"] == "chat" and line["status"] == "200"
    assert line["tenant"] == "acme" and line["user"] == hashed_user("alice") != "alice"
    assert line["session"] == raw.headers["x-paperclip-session"]
    assert line["trace"] == raw.headers["x-paperclip-trace"]
    assert line["tokens_in"] == int(raw.headers["x-paperclip-tokens-in"])
    assert line["tokens_forwarded"] == int(raw.headers["x-paperclip-tokens-forwarded"])
    assert line["memories"] == 0 and line["billed_prompt_tokens"] == 10
    assert line["added_ms"] >= 0 and line["upstream_ms"] > 0
    assert "degraded" in line
    passthrough = json.loads(JsonFormatter().format(records[1]))
    assert passthrough["route"] == "passthrough" and passthrough["path"] == "/v1/models"
    text = TextFormatter().format(records[0])
    assert "route=chat" in text and "status=200" in text and "tenant=acme" in text
    assert all("passport" not in r.getMessage() + json.dumps(getattr(r, "paperclip", {}))
               for r in caplog.records)


def test_content_only_when_allowed(make_proxy: Callable[..., Proxy], caplog: pytest.LogCaptureFixture) -> None:
    proxy = make_proxy(server={"log_content": True})
    caplog.set_level(logging.INFO, "paperclip")
    chat(proxy)
    proxy.drain()
    assert json.loads(JsonFormatter().format(lines(caplog)[0]))["content"] == SECRET


def test_failed_auth_is_logged_too(proxy: Proxy, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "paperclip")
    with proxy.http("wrong") as http:
        http.post("/v1/chat/completions", json={})
    proxy.drain()
    line = json.loads(JsonFormatter().format(lines(caplog)[0]))
    assert line["status"] == "401" and line["tenant"] is None


@pytest.mark.parametrize("fmt", ["json", "text"])
def test_serve_writes_the_configured_format(tmp_path: Path, upstream_url: str, fmt: str) -> None:
    raw = base_config(upstream_url, tmp_path / "serve.db", server={"log_format": fmt},
                      defaults={"memory": {"enabled": False}, "context": {"enabled": False}})
    path = tmp_path / "proxy.yaml"
    path.write_text(yaml.safe_dump(raw))
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "proxy", "serve", "--config", str(path), "--port", str(port)],
        stderr=subprocess.PIPE, text=True, env=env,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(url + "/healthz").status_code == 200:
                    break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        httpx.get(url + "/v1/models", headers={"authorization": f"Bearer {PROXY_KEY}"})
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    request_lines = [ln for ln in err.splitlines() if "paperclip.request" in ln]
    assert len(request_lines) == 1, err
    if fmt == "json":
        assert json.loads(request_lines[0])["route"] == "passthrough"
    else:
        assert "route=passthrough" in request_lines[0] and "status=200" in request_lines[0]


def test_every_logger_of_proxy_is_under_paperclip() -> None:
    """A module's logger is ``paperclip.<concept>``: its lines are leveled and formatted with the rest."""
    root = Path(__file__).resolve().parent.parent / "proxy"
    named = re.compile(r"logging\.getLogger\(([^)]*)\)")
    strays = [
        f"{path.relative_to(root.parent)}: getLogger({name})"
        for path in sorted(root.rglob("*.py"))
        for name in named.findall(path.read_text())
        if name and not re.fullmatch(r"""["']paperclip(\.[\w.]+)?["']""", name)
    ]
    assert strays == []


def test_json_log_format_writes_every_line_of_the_process_as_json(tmp_path: Path, upstream_url: str, upstream: FakeUpstream) -> None:
    async def wordy(request: Any, body: Any) -> JSONResponse:  # a summary longer than its source is rejected, with a warning
        return JSONResponse({"choices": [{"message": {"content": "wordy " * 400}}]})

    upstream.compression = wordy
    raw = base_config(upstream_url, tmp_path / "serve.db", server={"log_format": "json"}, defaults={
        "memory": {"enabled": False}, "context": {"recent_window_tokens": 100, "compression_mode": "inline"},
    })
    path = tmp_path / "proxy.yaml"
    path.write_text(yaml.safe_dump(raw))
    log = tmp_path / "serve.log"
    served = ServeProcess(path, log, "--log-level", "debug").start()
    try:
        served.wait_ready()
        messages: list[dict[str, str]] = []
        for turn in range(4):
            messages += [{"role": "user", "content": f"turn {turn} " + "lorem ipsum " * 30}]
            r = httpx.post(served.url + "/v1/chat/completions", json={"model": "m", "messages": messages},
                           headers={"authorization": f"Bearer {PROXY_KEY}"}, timeout=30)
            assert r.status_code == 200
            messages += [{"role": "assistant", "content": "ok"}]
    finally:
        served.stop()
    text = log.read_text()
    records = []
    for line in text.splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            pytest.fail(f"not one JSON object: {line!r}")
    loggers = {r["logger"] for r in records}
    assert {"paperclip.request", "uvicorn.error", "paperclip.context"} <= loggers, loggers
    assert any("Uvicorn running" in r["message"] for r in records)
    assert any("Finished server process" in r["message"] for r in records)
    assert any("rejected" in r["message"] for r in records if r["logger"] == "paperclip.context")
