"""The ``paperclip`` command as an operator meets it: version, usage errors, the start-up summary."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from proxy import __version__, config
from proxy.commands import banner
from tests.servers import free_port
from tests.test_config import run_cli


def test_version_and_help() -> None:
    done = run_cli("--version")
    assert (done.returncode, done.stdout.strip()) == (0, f"paperclip {__version__}")
    help_text = run_cli("serve", "--help").stdout
    for option, words in (("--host", "address to listen on"), ("--port", "port to listen on"), ("--log-level", "least severe level")):
        assert option in help_text and words in help_text


def test_a_bad_log_level_is_a_usage_error() -> None:
    done = run_cli("serve", "--log-level", "loud")
    assert done.returncode == 2
    assert "invalid choice: 'loud'" in done.stderr and "Traceback" not in done.stderr


def test_the_summary_names_config_upstreams_and_passthrough() -> None:
    settings = config.from_dict(
        {
            "passthrough_keys": False,
            "defaults": {"upstream": {"api_key": "sk-x", "base_url": "https://api.openai.com/v1?key=secret"}},
            "tenants": {
                "acme": {"api_keys": ["k1"], "upstream": {"api_key": None, "proxy": "http://u:pw@proxy.corp:3128"}},
                "globex": {"api_keys": ["k2"], "upstream": {"base_url": "https://llm.internal/v1", "verify": False}},
            },
        },
        env={"HTTPS_PROXY": "http://env-proxy:8080", "NO_PROXY": ".internal"},
    )
    said = banner.lines(settings)
    level, summary = said[0]
    assert level == logging.INFO
    assert "config <dict>" in summary and "2 tenant(s)" in summary and "passthrough_keys off" in summary
    assert "https://api.openai.com/v1 via proxy http://env-proxy:8080" in summary
    assert "https://api.openai.com/v1 via proxy http://proxy.corp:3128" in summary
    assert "https://llm.internal/v1;" in summary  # NO_PROXY: direct
    assert "secret" not in summary and "pw" not in summary  # no credential in a log line
    warnings = [text for lvl, text in said if lvl == logging.WARNING]
    assert any("tenant acme has no upstream key" in w for w in warnings)
    assert not any("globex has no upstream key" in w for w in warnings)
    assert any("https://llm.internal/v1 are not checked" in w for w in warnings)


def test_the_warnings_say_what_happens_to_requests() -> None:
    shipped = config.from_dict({"passthrough_keys": True}, env={})
    assert [lvl for lvl, _ in banner.lines(shipped)] == [logging.INFO]  # clients bring their own keys
    closed = config.from_dict({"passthrough_keys": False}, env={})
    assert banner.lines(closed)[1] == (logging.WARNING, banner.REFUSES_EVERYONE)
    assert "refused with 401" in banner.REFUSES_EVERYONE
    keyless = config.from_dict({"passthrough_keys": True, "tenants": {"acme": {"api_keys": ["k"]}}}, env={})
    assert [text for lvl, text in banner.lines(keyless) if lvl == logging.WARNING] == [
        "tenant acme has no upstream key (upstream.api_key is unset): its requests reach the upstream without one"
    ]
    # Keys from unset variables are no keys: the tenant is unreachable, or its clients' keys go upstream.
    unset = {"passthrough_keys": True,
             "tenants": {"acme": {"api_keys": ["${ACME_KEY}"], "upstream": {"api_key": "sk-up"}}}}
    assert [text for lvl, text in banner.lines(config.from_dict(unset, env={})) if lvl == logging.WARNING] == [
        "tenant acme has no client key (its api_keys are empty, or each an unset ${VAR}): "
        "a key meant for it is taken for a client's own and forwarded upstream"
    ]
    assert len(banner.lines(config.from_dict(unset, env={"ACME_KEY": "k"}))) == 1
    assert "config none (the built-in defaults)" in banner.lines(config.load(None, env={}))[0][1]
    embedded = banner.lines(config.load(config.EMBEDDED_FILE, env={}))[0][1]
    assert f"config {config.EMBEDDED_FILE} (the built-in proxy.yaml" in embedded and "passthrough_keys on" in embedded


def test_serve_logs_the_summary_at_start(tmp_path: Path, upstream_url: str) -> None:
    port = free_port()
    raw = {
        "server": {"port": port},
        "storage": {"url": f"sqlite:///{tmp_path / 'p.db'}"},
        "defaults": {"upstream": {"base_url": upstream_url}, "memory": {"enabled": False}, "context": {"enabled": False}},
    }
    path = tmp_path / "proxy.yaml"
    path.write_text(yaml.safe_dump(raw))
    log = tmp_path / "serve.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "proxy", "serve", "--config", str(path)],
            cwd=Path(__file__).resolve().parents[1],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"},
        )
        try:
            deadline = time.monotonic() + 30
            while "Uvicorn running" not in log.read_text():
                assert proc.poll() is None, log.read_text()
                if time.monotonic() > deadline:
                    pytest.fail(log.read_text())
                time.sleep(0.05)
        finally:
            proc.terminate()
            proc.wait(timeout=15)
    text = log.read_text()
    assert f"config {path}; upstream {upstream_url};" in text
    assert f"WARNING paperclip: {banner.REFUSES_EVERYONE}" in text


def test_every_command_that_reads_the_config_says_it_finds_it_as_serve_does(tmp_path: Path) -> None:
    """``memories`` loads the config as ``serve`` does, the built-in file last: its help says so too."""
    from proxy.commands.main import build_parser
    from tests.test_references import commands

    parser = build_parser()
    helps: dict[str, str] = {}
    for name in commands(parser):
        sub = parser
        for word in name.split()[1:]:
            sub = next(a for a in sub._actions if isinstance(a.choices, dict)).choices[word]
        found = [a.help for a in sub._actions if "--config" in a.option_strings]
        if found and found[0]:
            helps[name] = found[0]
    assert "paperclip memories list" in helps and "paperclip serve" in helps
    assert {name: text for name, text in helps.items() if text != helps["paperclip serve"]} == {}
    # and it does: with no file named or found, the built-in one's database is the one looked for
    run = subprocess.run(
        [sys.executable, "-m", "proxy", "memories", "list", "--tenant", "key-0", "--user", "ada"],
        cwd=tmp_path, capture_output=True, text=True, env={**os.environ, "PAPERCLIP_CONFIG": ""},
    )
    assert run.returncode == 2 and "no database at ./paperclip.db" in run.stderr
