"""``proxy.yaml``: errors that name file, key and problem; ``${ENV}``; ``tenants_dir``; the ops endpoints (SPEC §6, §7)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from proxy import config
from proxy.errors import ConfigError
from tests.conftest import PROXY_KEY, Proxy, base_config
from tests.fake_upstream import FakeUpstream
from tests.pki import make_ca, needs_openssl
from tests.servers import free_port

REPO = Path(__file__).resolve().parents[1]


def write(path: Path, data: Any) -> Path:
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
    return path


BAD_CONFIGS: list[tuple[Any, str, str]] = [
    ({"defaults": {"memory": {"top_k": -1}}}, "defaults.memory.top_k", "positive"),
    ({"defaults": {"memory": {"scope": "galaxy"}}}, "defaults.memory.scope", "must be one of user, session"),
    ({"defaults": {"memory": {"vector_weight": 1.5}}}, "defaults.memory.vector_weight", "between 0 and 1"),
    ({"defaults": {"upstream": {"read_timeout_s": "soon"}}}, "defaults.upstream.read_timeout_s", "must be a number"),
    ({"defaults": {"contxt": {}}}, "defaults.contxt", "unknown key"),
    ({"server": {"port": "80"}}, "server.port", "must be an integer"),
    ({"server": {"max_body_bytes": 0}}, "server.max_body_bytes", "positive"),
    ({"passthrough_keys": "yes"}, "passthrough_keys", "must be true or false"),
    ({"storage": {"url": "mysql://x"}}, "storage.url", "must be sqlite:///PATH or postgresql://"),
    ({"storage": {"url": "postgresql://db:fivefour/x"}}, "storage.url", "not a valid PostgreSQL URL"),
    ({"tenants": {"acme": {"api_keys": ["sha256:abc"]}}}, "tenants.acme.api_keys", "64 hex digits"),
    ({"tenants": {"acme": {"context": {"compression_mode": "later"}}}}, "tenants.acme.context.compression_mode", "background, inline"),
    ({"tenants": {"a": {"api_keys": ["k1"]}, "b": {"api_keys": ["k1"]}}}, "tenants.b", "also used by tenant a"),
    ({"tenants": {"a": {"api_keys": ["k1"]}, "b": {"admin_keys": [f"sha256:{hashlib.sha256(b'k1').hexdigest()}"]}}},
     "tenants.b", "also used by tenant a"),
    ({"server": {"admin_keys": ["k1"]}, "tenants": {"a": {"api_keys": ["k1"]}}}, "tenants.a", "also an operator key"),
    ({"server": {"admin_keys": [f"sha256:{hashlib.sha256(b'k1').hexdigest()}"]}, "tenants": {"a": {"admin_keys": ["k1"]}}},
     "tenants.a", "also an operator key"),
    ({"server": {"metrics_keys": ["k1"]}, "tenants": {"a": {"api_keys": ["k1"]}}}, "tenants.a", "also a metrics key"),
    ({"tenants": {"a": {"api_keys": ["k1"], "admin_keys": ["k1"]}}}, "tenants.a", "both a client key and an admin key"),
    ({"tenants": ["acme"]}, "tenants", "mapping"),
    ("defaults: [unclosed", "-", "not valid YAML"),
    ("- just\n- a list\n", "-", "top level must be a mapping"),
    ({"defaults": {"upstream": {"base_url": "not a url"}}}, "defaults.upstream.base_url", "http:// or https://"),
    ({"defaults": {"upstream": {"base_url": "ftp://files/v1"}}}, "defaults.upstream.base_url", "http:// or https://"),
    ({"defaults": {"upstream": {"base_url": "https://host:port/v1"}}}, "defaults.upstream.base_url", "not a valid URL"),
    ({"tenants": {"acme": {"compression": {"base_url": "localhost:8000"}}}}, "tenants.acme.compression.base_url", "http://"),
    ({"defaults": {"upstream": {"auth": "basic"}}}, "defaults.upstream.auth", "must be one of bearer, api-key"),
    ({"defaults": {"upstream": {"proxy": "socks5://127.0.0.1:1080"}}}, "defaults.upstream.proxy", "only http://"),
    ({"defaults": {"upstream": {"ca_file": "/nowhere/ca.pem"}}}, "defaults.upstream.ca_file", "no such file"),
    ({"defaults": {"upstream": {"verify": "no"}}}, "defaults.upstream.verify", "must be true or false"),
    ({"server": {"log_format": "xml"}}, "server.log_format", "must be one of text, json"),
    ({"server": {"log_content": 1}}, "server.log_content", "must be true or false"),
    ({"server": {"admin_keys": [1]}}, "server.admin_keys", "list of strings"),
    ({"tenants": {"acme": {"api_key": ["k"]}}}, "tenants.acme.api_key", "admin_keys, anthropic, api_keys, compression"),
]


@pytest.mark.parametrize(("raw", "key", "problem"), BAD_CONFIGS)
def test_config_error_names_file_key_and_problem(tmp_path: Path, raw: Any, key: str, problem: str) -> None:
    path = write(tmp_path / "bad.yaml", raw)
    with pytest.raises(ConfigError) as info:
        config.load(path, env={})
    assert info.value.source == str(path)
    assert info.value.key == key
    assert problem in info.value.problem
    assert str(path) in str(info.value) and key in str(info.value)


@pytest.mark.parametrize(
    "url", ["sqlite:///data/p.db", "postgresql://paperclip:pw@db:5432/paperclip", "postgres://db/p"]
)
def test_storage_url_takes_sqlite_or_postgresql(tmp_path: Path, url: str) -> None:
    settings = config.load(write(tmp_path / "proxy.yaml", {"storage": {"url": url}}), env={})
    assert settings.storage.url == url


def test_the_upstream_and_server_keys_of_spec_section_7(tmp_path: Path) -> None:
    path = write(
        tmp_path / "proxy.yaml",
        {
            "server": {"admin_keys": ["op-key", None], "log_format": "json", "log_content": True},
            "defaults": {"upstream": {"auth": "api-key", "verify": False, "base_url": "https://r.example.com"}},
            "tenants": {"acme": {"api_keys": ["k"], "upstream": {"proxy": "http://u:p@proxy.corp:3128"}}},
        },
    )
    settings = config.load(path, env={})
    assert (settings.server.admin_keys, settings.server.log_format, settings.server.log_content) == (("op-key",), "json", True)
    up = settings.defaults.upstream
    assert (up.auth, up.verify, up.proxy, up.ca_file) == ("api-key", False, None, None)
    acme = settings.tenants[0].upstream
    assert acme.proxy == "http://u:p@proxy.corp:3128" and acme.auth == "api-key"  # inherited
    chosen = acme.routes.for_origin("https", "r.example.com", 443)
    assert chosen is not None and (chosen.host, chosen.port, chosen.authorization) == ("proxy.corp", 3128, "Basic dTpw")


def test_outbound_proxies_come_from_the_environment_unless_upstream_proxy_is_set() -> None:
    env = {"HTTPS_PROXY": "proxy.corp:3128", "http_proxy": "http://web.corp:8080", "NO_PROXY": "internal.corp, 10.0.0.0/8"}
    settings = config.from_dict({"tenants": {"acme": {"api_keys": ["k"], "upstream": {"proxy": "http://own:1"}}}}, env=env)
    routes = settings.defaults.upstream.routes
    assert routes.for_origin("https", "api.openai.com", 443) == routes.https
    assert routes.https is not None and (routes.https.host, routes.https.port) == ("proxy.corp", 3128)
    assert routes.http is not None and routes.http.host == "web.corp"
    assert routes.for_origin("https", "llm.internal.corp", 443) is None
    assert routes.for_origin("http", "10.1.2.3", 8000) is None
    own = settings.tenants[0].upstream.routes
    assert own.for_origin("https", "llm.internal.corp", 443) is not None  # the key wins over NO_PROXY
    assert config.from_dict({}, env={}).defaults.upstream.routes.for_origin("https", "a", 443) is None
    assert config.from_dict({}, env={"ALL_PROXY": "http://all:1"}).defaults.upstream.routes.https is not None
    with pytest.raises(ConfigError) as info:
        config.from_dict({}, env={"ALL_PROXY": "socks5://127.0.0.1:1080"})
    assert info.value.key == "ALL_PROXY" and "only http://" in info.value.problem


@needs_openssl
def test_tls_files_are_found_beside_the_file_that_names_them(tmp_path: Path) -> None:
    ca, _, _ = make_ca(tmp_path / "pki")
    (tmp_path / "tenants").mkdir()
    write(tmp_path / "tenants" / "globex.yaml", {"api_keys": ["g"]})
    path = write(tmp_path / "proxy.yaml", {"tenants_dir": "tenants", "defaults": {"upstream": {"ca_file": "pki/ca.pem"}}})
    settings = config.load(path, env={})
    assert settings.tenants[0].upstream.ca_file == settings.defaults.upstream.ca_file == str(ca)
    broken = write(tmp_path / "broken.yaml", {"defaults": {"upstream": {"ca_file": "proxy.yaml"}}})
    with pytest.raises(ConfigError) as info:
        config.load(broken, env={})
    assert info.value.key == "defaults.upstream.ca_file" and "cannot use it for TLS" in info.value.problem
    half = write(tmp_path / "half.yaml", {"defaults": {"upstream": {"client_key": "pki/ca.key"}}})
    with pytest.raises(ConfigError, match=r"without upstream\.client_cert"):
        config.load(half, env={})


def test_error_in_a_tenants_dir_file_names_that_file(tmp_path: Path) -> None:
    (tmp_path / "tenants").mkdir()
    bad = write(tmp_path / "tenants" / "globex.yaml", {"api_keys": ["k"], "memory": {"top_k": 0}})
    path = write(tmp_path / "proxy.yaml", {"tenants_dir": "tenants"})
    with pytest.raises(ConfigError) as info:
        config.load(path, env={})
    assert info.value.source == str(bad)
    assert info.value.key == "tenants.globex.memory.top_k"


def test_a_key_taken_twice_names_the_tenants_dir_file_it_is_in(tmp_path: Path) -> None:
    (tmp_path / "tenants").mkdir()
    again = write(tmp_path / "tenants" / "globex.yaml", {"api_keys": ["k-shared"]})
    path = write(tmp_path / "proxy.yaml", {"tenants_dir": "tenants", "tenants": {"acme": {"api_keys": ["k-shared"]}}})
    with pytest.raises(ConfigError) as info:
        config.load(path, env={})
    assert (info.value.source, info.value.key) == (str(again), "tenants.globex")
    assert "also used by tenant acme" in str(info.value)


def test_missing_tenants_dir_and_missing_file(tmp_path: Path) -> None:
    path = write(tmp_path / "proxy.yaml", {"tenants_dir": "nowhere"})
    with pytest.raises(ConfigError, match="tenants_dir") as info:
        config.load(path, env={})
    assert info.value.source == str(path)
    with pytest.raises(ConfigError) as info2:
        config.load(tmp_path / "absent.yaml", env={})
    assert "cannot read" in info2.value.problem


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "proxy", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
        env={**os.environ, **(env or {})},
    )


def test_serve_with_bad_config_exits_2_without_starting(tmp_path: Path) -> None:
    port = free_port()
    path = write(tmp_path / "bad.yaml", {"server": {"port": port}, "defaults": {"memory": {"pii": "shout"}}})
    done = run_cli("serve", "--config", str(path))
    assert done.returncode == 2
    assert str(path) in done.stderr
    assert "defaults.memory.pii" in done.stderr
    assert "must be one of mask, keep, drop" in done.stderr
    assert "Uvicorn running" not in done.stderr + done.stdout
    assert "Traceback" not in done.stderr
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1)


def test_serve_reads_paperclip_config_env(tmp_path: Path) -> None:
    path = write(tmp_path / "bad.yaml", {"unknown_top": 1})
    done = run_cli("serve", env={"PAPERCLIP_CONFIG": str(path)})
    assert done.returncode == 2
    assert str(path) in done.stderr and "unknown_top" in done.stderr


def test_serve_starts_and_answers(tmp_path: Path, upstream_url: str, upstream: FakeUpstream) -> None:
    port = free_port()
    raw = base_config(upstream_url, tmp_path / "p.db")
    raw["server"] = {"port": port}
    raw["defaults"]["memory"] = {"enabled": False}
    raw["defaults"]["context"] = {"enabled": False}
    path = write(tmp_path / "proxy.yaml", raw)
    log = (tmp_path / "serve.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "proxy", "serve", "--config", str(path), "--log-level", "warning"],
        cwd=REPO,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert proc.poll() is None, (tmp_path / "serve.log").read_text()
            assert time.monotonic() < deadline, "paperclip serve did not come up"
            time.sleep(0.05)
        r = httpx.post(
            url + "/v1/chat/completions",
            json={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
            headers={"authorization": f"Bearer {PROXY_KEY}"},
            timeout=10,
        )
        assert r.status_code == 200
        assert r.json()["choices"][0]["message"]["content"] == "Hello from upstream"
    finally:
        proc.terminate()
        proc.wait(timeout=15)
        log.close()


def test_env_interpolation(tmp_path: Path) -> None:
    path = write(
        tmp_path / "proxy.yaml",
        {
            "defaults": {"upstream": {"api_key": "${UP_KEY}", "base_url": "http://${UP_HOST:-localhost:9}/v1"}},
            "tenants": {
                "acme": {"api_keys": ["${ACME_KEY}", "${UNSET_KEY}"], "admin_keys": ["${ACME_ADMIN:-admin-default}"]},
            },
        },
    )
    settings = config.load(path, env={"UP_KEY": "sk-from-env", "ACME_KEY": "pk-from-env"})
    acme = settings.tenants[0]
    assert acme.upstream.api_key == "sk-from-env"
    assert acme.upstream.base_url == "http://localhost:9/v1"
    assert acme.api_keys == ("pk-from-env",)  # an unset variable is no key, not an empty key
    assert acme.admin_keys == ("admin-default",)
    unset = config.load(path, env={"UP_HOST": "up.internal:8080"})
    assert unset.defaults.upstream.api_key is None
    assert unset.defaults.upstream.base_url == "http://up.internal:8080/v1"
    assert unset.tenants[0].api_keys == ()


def test_a_value_wholly_one_env_expression_is_read_as_the_yaml_it_spells(tmp_path: Path) -> None:
    folder = tmp_path / "tenants"
    folder.mkdir()
    write(folder / "globex.yaml", "api_keys: [pk-globex]\nmemory:\n  top_k: ${GLOBEX_TOP_K:-5}\n")
    path = write(
        tmp_path / "proxy.yaml",
        """
server: {port: "${PAPERCLIP_PORT:-8787}", log_content: "${LOG_CONTENT:-false}"}
passthrough_keys: ${PASSTHROUGH:-false}
tenants_dir: tenants
defaults:
  context: {recent_window_tokens: "${WINDOW:-4000}"}
  memory: {recency_half_life_days: "${HALF_LIFE:-null}", vector_weight: "${VECTOR_WEIGHT:-0.5}"}
  upstream: {api_key: "${UP_KEY}", organization: "${ORG}", base_url: "http://up:${UP_PORT:-9}/v1"}
tenants:
  acme: {api_keys: ["${ACME_KEY}"]}
""",
    )
    unset = config.load(path, env={})
    assert (unset.server.port, unset.server.log_content, unset.passthrough_keys) == (8787, False, False)
    assert unset.defaults.context.recent_window_tokens == 4000
    assert unset.defaults.memory.recency_half_life_days is None
    assert unset.defaults.memory.vector_weight == 0.5
    assert {t.name: t.memory.top_k for t in unset.tenants} == {"acme": 8, "globex": 5}

    env = {
        "PAPERCLIP_PORT": "9000", "LOG_CONTENT": "true", "PASSTHROUGH": "true", "WINDOW": "6000", "HALF_LIFE": "90",
        "GLOBEX_TOP_K": "3", "UP_KEY": "123456", "ORG": "4242", "UP_PORT": "8000", "ACME_KEY": "987654321",
    }
    given = config.load(path, env=env)
    assert (given.server.port, given.server.log_content, given.passthrough_keys) == (9000, True, True)
    assert given.defaults.context.recent_window_tokens == 6000
    assert given.defaults.memory.recency_half_life_days == 90.0
    assert {t.name: t.memory.top_k for t in given.tenants} == {"acme": 8, "globex": 3}
    # Keys and other strings stay the text they were given, digits or not.
    acme = given.tenants[0]
    assert (acme.upstream.api_key, acme.upstream.organization, acme.api_keys) == ("123456", "4242", ("987654321",))
    assert acme.upstream.base_url == "http://up:8000/v1"


def test_an_env_expression_with_text_around_it_stays_a_string(tmp_path: Path) -> None:
    path = write(tmp_path / "proxy.yaml", 'server: {port: "${PORT_HEAD}0"}\n')
    with pytest.raises(ConfigError) as info:
        config.load(path, env={"PORT_HEAD": "808"})
    assert info.value.key == "server.port" and info.value.problem == "must be an integer, not '8080'"


def test_an_env_value_that_spells_no_value_of_the_keys_type_names_the_key(tmp_path: Path) -> None:
    path = write(tmp_path / "proxy.yaml", 'server: {port: "${PAPERCLIP_PORT}"}\npassthrough_keys: ${PASSTHROUGH}\n')
    with pytest.raises(ConfigError) as info:
        config.load(path, env={"PAPERCLIP_PORT": "eighty", "PASSTHROUGH": "[1]"})
    assert [(p.key, p.problem) for p in info.value.problems] == [
        ("server.port", "must be an integer, not 'eighty'"),
        ("passthrough_keys", "must be true or false, not '[1]'"),
    ]


def test_a_shared_key_is_reported_with_the_other_problems_of_its_tenant(tmp_path: Path) -> None:
    """Every problem at once: a tenant with a bad value still has its keys checked, and the top level's."""
    path = write(tmp_path / "proxy.yaml", {
        "server": {"admin_keys": ["op-key"], "port": 0},
        "tenants": {"a": {"api_keys": ["k1"]}, "b": {"api_keys": ["k1", "op-key"], "memory": {"top_k": 0}}},
    })
    with pytest.raises(ConfigError) as info:
        config.load(path, env={})
    assert sorted((p.key, p.problem) for p in info.value.problems) == [
        ("server.port", "must be between 1 and 65535, not 0"),
        ("tenants.b", "a key is also an operator key"),
        ("tenants.b", "a key is also used by tenant a"),
        ("tenants.b.memory.top_k", "must be positive, not 0"),
    ]


@pytest.mark.parametrize(
    ("text", "env", "expanded"),
    [
        ("${V:-dflt}", {}, "dflt"),
        ("${V:-dflt}", {"V": ""}, "dflt"),  # set but empty: the default, as in a shell or docker compose
        ("${V:-dflt}", {"V": "given"}, "given"),
        ("${V-dflt}", {}, "dflt"),
        ("${V-dflt}", {"V": ""}, None),  # without the colon only an unset variable takes the default
        ("${V-dflt}", {"V": "given"}, "given"),
        ("${V}", {"V": ""}, None),
        ("a/${V:-dflt}/b", {"V": ""}, "a/dflt/b"),
        ("a/${V-dflt}/b", {"V": ""}, "a//b"),
        ("a/${V-dflt}/b", {}, "a/dflt/b"),
        ("a/${V}/b", {}, "a//b"),
    ],
)
def test_env_default_with_colon_covers_empty_and_without_only_unset(
    text: str, env: dict[str, str], expanded: str | None
) -> None:
    assert config.from_dict({"defaults": {"upstream": {"organization": text}}}, env=env).defaults.upstream.organization == expanded


def test_the_embedded_file_takes_its_defaults_for_empty_variables() -> None:
    settings = config.load(config.EMBEDDED_FILE, env={"PAPERCLIP_LOG_FORMAT": "", "PAPERCLIP_DATA_DIR": ""})
    assert settings.server.log_format == "text"
    assert settings.storage.url == "sqlite:///./paperclip.db"


def test_only_config_reads_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path / "proxy.yaml", {"defaults": {"upstream": {"api_key": "${PAPERCLIP_TEST_UP}"}}})
    monkeypatch.setenv("PAPERCLIP_TEST_UP", "sk-process-env")
    assert config.load(path).defaults.upstream.api_key == "sk-process-env"


def test_tenants_dir_files_are_tenants(
    tmp_path: Path, upstream_url: str, upstream: FakeUpstream, make_proxy: Callable[..., Proxy]
) -> None:
    folder = tmp_path / "tenants"
    folder.mkdir()
    write(folder / "globex.yaml", {"api_keys": ["${GLOBEX_KEY}"], "upstream": {"api_key": "sk-globex-up"}, "memory": {"top_k": 9}})
    write(folder / "initech.yml", {"api_keys": ["pk-initech"], "context": {"recent_window_tokens": 6000}})
    raw = base_config(upstream_url, tmp_path / "p.db")
    raw["tenants_dir"] = str(folder)
    path = write(tmp_path / "proxy.yaml", raw)
    settings = config.load(path, env={"GLOBEX_KEY": "pk-globex"})
    by_name = {t.name: t for t in settings.tenants}
    assert set(by_name) == {"acme", "globex", "initech"}
    assert by_name["globex"].memory.top_k == 9
    assert by_name["globex"].upstream.base_url == upstream_url  # inherited from defaults
    assert by_name["initech"].context.recent_window_tokens == 6000
    assert by_name["initech"].memory.top_k == config.Memory().top_k == 8

    raw["tenants_dir"] = str(folder)
    proxy = make_proxy(raw)  # from_dict without env: ${GLOBEX_KEY} is unset, so globex has no key
    with proxy.http(key="pk-initech") as http:
        assert http.post("/v1/chat/completions", json={"model": "m", "messages": [{"role": "user", "content": "hi"}]}).status_code == 200
    assert upstream.chat_requests()[-1].headers["authorization"] == "Bearer sk-upstream-acme"
    with proxy.http(key="pk-globex") as http:
        assert http.get("/v1/models").status_code == 401


def test_a_tenant_both_in_tenants_and_in_tenants_dir_is_an_error_naming_both_places(tmp_path: Path) -> None:
    folder = tmp_path / "tenants"
    folder.mkdir()
    in_dir = write(folder / "delta.yaml", {"api_keys": ["pk-delta-file"]})
    path = write(
        tmp_path / "proxy.yaml",
        {
            "passthrough_keys": True,
            "tenants_dir": "tenants",
            "tenants": {"delta": {"api_keys": ["pk-delta-inline"], "admin_keys": ["ak-delta-inline"]}},
        },
    )
    with pytest.raises(ConfigError) as info:
        config.load(path, env={})
    assert (info.value.source, info.value.key) == (str(in_dir), "tenants.delta")
    assert str(path) in info.value.problem and "tenants" in info.value.problem
    for command in (["config", "check"], ["serve", "--port", str(free_port())]):
        done = run_cli(*command, "--config", str(path))
        assert done.returncode == 2, done.stderr
        assert str(in_dir) in done.stderr and str(path) in done.stderr and "tenants.delta" in done.stderr


def test_a_tenant_in_two_files_of_tenants_dir_is_an_error_naming_both(tmp_path: Path) -> None:
    folder = tmp_path / "tenants"
    folder.mkdir()
    first = write(folder / "delta.yaml", {"api_keys": ["pk-delta-1"]})
    second = write(folder / "delta.yml", {"api_keys": ["pk-delta-2"]})
    with pytest.raises(ConfigError) as info:
        config.load(write(tmp_path / "proxy.yaml", {"tenants_dir": "tenants"}), env={})
    assert (info.value.source, info.value.key) == (str(second), "tenants.delta")
    assert str(first) in info.value.problem


def test_tenant_overrides_any_default(tmp_path: Path) -> None:
    settings = config.from_dict(
        {
            "defaults": {"memory": {"top_k": 3}, "upstream": {"read_timeout_s": 60}},
            "tenants": {"acme": {"api_keys": ["k"], "memory": {"budget_tokens": 100}, "upstream": {"base_url": "http://x/v1"}}},
        },
        env={},
    )
    acme = settings.tenants[0]
    assert (acme.memory.top_k, acme.memory.budget_tokens) == (3, 100)
    assert (acme.upstream.base_url, acme.upstream.read_timeout_s) == ("http://x/v1", 60.0)
    assert settings.defaults.upstream.base_url == "https://api.openai.com/v1"


def test_shipped_proxy_yaml_is_valid_and_passes_keys_through() -> None:
    shipped = REPO / "proxy.yaml"
    if not shipped.exists():
        pytest.skip("no proxy.yaml in the repo yet")
    settings = config.load(shipped, env={})
    assert settings.passthrough_keys is True


# --- ops endpoints -------------------------------------------------------------------------------


def test_healthz_readyz_metrics(proxy: Proxy, upstream: FakeUpstream) -> None:
    with proxy.http(key=None) as http:
        assert http.get("/healthz").status_code == 200
        ready = http.get("/readyz")
        assert ready.status_code == 200 and ready.json()["ready"] is True
    with proxy.http() as http:
        http.post("/v1/chat/completions", json={"model": "m", "messages": [{"role": "user", "content": "hi"}]})
        http.get("/v1/models")
        http.post("/v1/chat/completions", content=b"{bad")
    with proxy.http(key=None) as http:
        metrics = http.get("/metrics")
    assert metrics.status_code == 200
    assert metrics.headers["content-type"].startswith("text/plain")
    text = metrics.text
    for name in (
        "paperclip_requests_total",
        "paperclip_added_latency_seconds_bucket",
        "paperclip_tokens_in_total",
        "paperclip_tokens_forwarded_total",
        "paperclip_tokens_saved_total",
        "paperclip_memories_injected_total",
        "paperclip_degraded_total",
    ):
        assert name in text, name
    assert 'paperclip_requests_total{route="chat",status="200"} 1.0' in text
    assert 'paperclip_requests_total{route="passthrough",status="200"} 1.0' in text
    assert 'paperclip_requests_total{route="chat",status="400"} 1.0' in text


def test_ops_endpoints_need_no_key_and_are_not_forwarded(proxy: Proxy, upstream: FakeUpstream) -> None:
    with proxy.http(key=None) as http:
        for path in ("/healthz", "/health", "/readyz", "/metrics"):
            assert http.get(path).status_code == 200
    assert upstream.requests == []


def test_health_answers_like_healthz(proxy: Proxy) -> None:
    with proxy.http(key=None) as http:
        health, healthz = http.get("/health"), http.get("/healthz")
        assert (health.status_code, health.json()) == (healthz.status_code, healthz.json()) == (200, {"status": "ok"})
        assert http.post("/health").status_code == http.post("/healthz").status_code


def test_an_unset_variable_makes_a_tenants_key_null_not_inherited_as_the_shipped_file_says() -> None:
    """A tenant's ``api_key: ${ACME_OPENAI_KEY}`` (the shipped file's example) with the variable unset sends no
    key rather than the defaults' one; a key that takes no null is then a problem. The file's comment says so."""
    raw = {"defaults": {"upstream": {"api_key": "sk-default"}},
           "tenants": {"acme": {"api_keys": ["k"], "upstream": {"api_key": "${ACME_OPENAI_KEY}"}}}}
    assert config.from_dict(raw, env={}).tenants[0].upstream.api_key is None
    with pytest.raises(ConfigError) as info:
        config.from_dict({"server": {"port": "${PORT}"}}, env={})
    assert (info.value.key, info.value.problem) == ("server.port", "must be set")
    lines = config.EMBEDDED_FILE.read_text().splitlines()
    comment = " ".join(line.lstrip("# ") for line in lines[: lines.index("")])  # the file's leading comment
    assert "with VAR unset or empty is null" in comment and "not inherited from defaults" in comment
