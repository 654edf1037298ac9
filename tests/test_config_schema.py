"""The config schema: every problem at once, defaults declared once and the same with or without a file,
the reference generated from it, ``proxy.yaml`` agreeing with it, the embedded file used anywhere."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from pydantic import BaseModel

from proxy import config
from proxy.config.reference import render, takes
from proxy.config.schema import Defaults, Section, Tenant, TopLevel
from proxy.errors import ConfigError
from proxy.store import urls
from tests.servers import free_port
from tests.test_config import REPO, run_cli, write

REFERENCE = REPO / "docs" / "reference" / "config.md"


def problems_of(path: Path) -> list[tuple[str, str, str]]:
    with pytest.raises(ConfigError) as info:
        config.load(path, env={})
    return [(p.source, p.key, p.problem) for p in info.value.problems]


def test_every_problem_of_every_file_is_reported_at_once(tmp_path: Path) -> None:
    (tmp_path / "tenants").mkdir()
    globex = write(tmp_path / "tenants" / "globex.yaml", {"api_keys": ["g"], "memory": {"pii": "shout"}})
    path = write(
        tmp_path / "proxy.yaml",
        {
            "server": {"port": "80", "colour": "blue"},
            "tenants_dir": "tenants",
            "defaults": {"memory": {"top_k": 0}},
            "tenants": {"acme": {"api_keys": ["a"], "context": {"compression_mode": "later"}}},
        },
    )
    assert problems_of(path) == [
        (str(path), "server.port", "must be an integer, not '80'"),
        (str(path), "server.colour", "unknown key (known here: admin_keys, cors_origins, header_timeout_s, host, "
                                     "keep_alive_s, log_content, log_format, max_body_bytes, max_record_bytes, "
                                     "metrics_keys, port)"),
        (str(path), "defaults.memory.top_k", "must be positive, not 0"),
        (str(path), "tenants.acme.context.compression_mode", "must be one of background, inline, not 'later'"),
        (str(globex), "tenants.globex.memory.pii", "must be one of mask, keep, drop, not 'shout'"),
    ]


def test_a_problem_tenants_inherit_is_reported_once_under_defaults(tmp_path: Path) -> None:
    raw = {
        "defaults": {"memory": {"vector_weight": 1.5}, "upstream": {"ca_file": "missing.pem"}},
        "tenants": {"acme": {"api_keys": ["a"]}, "globex": {"api_keys": ["g"], "memory": {"vector_weight": 0.5}}},
    }
    assert [key for _, key, _ in problems_of(write(tmp_path / "p.yaml", raw))] == [
        "defaults.memory.vector_weight",
        "defaults.upstream.ca_file",
    ]


def test_the_cli_prints_every_problem_a_line_each_and_exits_2(tmp_path: Path) -> None:
    path = write(tmp_path / "bad.yaml", {"passthrough_keys": "yes", "defaults": {"memory": {"scope": "galaxy"}}})
    done = run_cli("config", "check", "--config", str(path))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.splitlines() == [
        f"paperclip: config error: {path}: passthrough_keys: must be true or false, not 'yes'",
        f"paperclip: config error: {path}: defaults.memory.scope: must be one of user, session, not 'galaxy'",
    ]
    good = write(tmp_path / "good.yaml", {"tenants": {"acme": {"api_keys": ["k"]}}})
    checked = run_cli("config", "check", "--config", str(good))
    assert checked.returncode == 0
    assert checked.stdout.strip() == f"{good}: valid; tenants: acme; passthrough_keys off"
    assert "warning: tenant acme has no upstream key" in checked.stderr  # what serve warns of, said here too
    unset = write(tmp_path / "unset.yaml", {"tenants": {"acme": {"api_keys": ["${NO_SUCH_KEY_VAR}"]}}})
    warned = run_cli("config", "check", "--config", str(unset))
    assert warned.returncode == 0 and "warning: tenant acme has no client key" in warned.stderr


def test_no_file_an_empty_file_and_an_empty_mapping_give_the_same_settings(tmp_path: Path) -> None:
    env = {"HOME": "/home/ada", "OPENAI_API_KEY": "sk-env"}
    empty = write(tmp_path / "empty.yaml", "")
    same = [config.load(None, env=env), config.load(empty, env=env), config.from_dict({}, env=env)]
    assert len({s.model_copy(update={"source": ""}) for s in same}) == 1
    assert same[0].defaults.upstream.api_key == "sk-env"  # a default that names the environment, with no file
    assert same[0].embedding.cache_dir == Path("/home/ada/.cache/paperclip")


def fields_of(model: type[BaseModel], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Every key below ``model`` as (dotted key, field), sections walked into."""
    for name, field in model.model_fields.items():
        kind = field.annotation
        if isinstance(kind, type) and issubclass(kind, Section):
            yield from fields_of(kind, f"{prefix}{name}.")
        else:
            yield f"{prefix}{name}", field


SCHEMA_KEYS = dict(fields_of(TopLevel)) | dict(fields_of(Defaults, "defaults."))


def test_every_key_has_a_meaning_and_says_what_it_takes() -> None:
    own = {f"tenants.<name>.{k}": f for k, f in Tenant.model_fields.items() if k not in Defaults.model_fields}
    for key, field in (SCHEMA_KEYS | own).items():
        assert field.description and field.description.endswith((".", ")")), key
        assert takes(field), key


def test_the_reference_is_what_the_schema_generates() -> None:
    assert REFERENCE.read_text() == render(), "regenerate it: paperclip config reference > docs/reference/config.md"
    done = run_cli("config", "reference")
    assert done.returncode == 0 and done.stdout == render()
    for key, field in SCHEMA_KEYS.items():
        assert f"| `{key}` |" in done.stdout and str(field.description).replace("|", "\\|") in done.stdout


def flat(raw: dict[str, Any], prefix: str = "") -> Iterator[str]:
    for key, value in raw.items():
        if isinstance(value, dict) and key != "tenants":
            yield from flat(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}"


def comparable(settings: config.Settings) -> config.Settings:
    db = os.path.normpath(urls.sqlite_path(settings.storage.url))  # ./paperclip.db is paperclip.db
    return settings.model_copy(update={"source": "", "storage": config.Storage(url=f"sqlite:///{db}")})


def test_proxy_yaml_states_every_key_with_the_schemas_default() -> None:
    shipped = REPO / "proxy.yaml"
    assert set(flat(yaml.safe_load(shipped.read_text()))) - {"tenants"} == set(SCHEMA_KEYS)
    read = comparable(config.load(shipped, env={}))
    # Its one key away from the default, on purpose (docs/decisions/0008-embedded-defaults.md).
    assert read.passthrough_keys is True
    assert read.model_copy(update={"passthrough_keys": False}) == comparable(config.load(None, env={}))


def test_the_file_used_is_named_else_found_else_the_embedded_one(tmp_path: Path) -> None:
    assert config.EMBEDDED_FILE.read_bytes() == (REPO / "proxy.yaml").read_bytes()
    assert config.find_file(None, env={}, cwd=tmp_path) == config.EMBEDDED_FILE
    assert config.find_file(None, env={}, cwd=REPO) == REPO / "proxy.yaml"
    assert config.find_file(None, env={"PAPERCLIP_CONFIG": "/etc/p.yaml"}, cwd=REPO) == Path("/etc/p.yaml")
    assert config.find_file("mine.yaml", env={"PAPERCLIP_CONFIG": "/etc/p.yaml"}, cwd=REPO) == Path("mine.yaml")


def test_serve_outside_the_repo_runs_on_the_embedded_file(tmp_path: Path) -> None:
    """What the README's first command does anywhere: passthrough on, so a client's own key is forwarded."""
    port, dead = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("PAPERCLIP_CONFIG", "NO_PROXY", "no_proxy")}
    # The upstream is reached through a proxy that is not there: the request fails upstream (502), never 401.
    env |= {"PAPERCLIP_DATA_DIR": str(tmp_path), "HTTPS_PROXY": f"http://127.0.0.1:{dead}", "https_proxy": ""}
    log = tmp_path / "serve.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "proxy", "serve", "--port", str(port)],
            cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT, env=env,
        )
        try:
            deadline = time.monotonic() + 30
            while "Uvicorn running" not in log.read_text():
                assert proc.poll() is None, log.read_text()
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.05)
            got = httpx.get(f"http://127.0.0.1:{port}/v1/models", headers={"authorization": "Bearer sk-mine"})
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:  # still loading the embedding model: nothing to wait for
                proc.kill()
                proc.wait()
    text = log.read_text()
    assert f"config {config.EMBEDDED_FILE} (the built-in proxy.yaml" in text and "passthrough_keys on" in text
    assert got.status_code == 502, got.text
