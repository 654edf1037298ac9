"""Fixtures: a fake upstream and the proxy, both real HTTP servers on loopback."""

from __future__ import annotations

import asyncio
import copy
import importlib.util
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest
from anthropic._base_client import SyncHttpxClientWrapper as AnthropicHttpClient
from openai._base_client import AsyncHttpxClientWrapper, SyncHttpxClientWrapper

from proxy import config
from proxy.server.app import create_app
from proxy.server.runtime import Runtime
from proxy.store import Store
from tests.fake_upstream import FakeUpstream
from tests.servers import ServerThread

# pg_server, pg_url: a real PostgreSQL with pgvector, a schema per test; stores: both stores in turn.
pytest_plugins = ("tests.pg", "tests.store_backends")

PROXY_KEY = "pk-test-acme"
# The marker of tests that need the sentence-transformers extra (torch): .ci/run runs them in a
# second virtualenv that has it, after the suite in one that does not.
NEEDS_EXTRA = "sentence_transformers"
# Set by .ci/run for that second run: there the extra's tests must run, never skip.
REQUIRE_EXTRA = "PAPERCLIP_REQUIRE_EXTRA"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Without the extra, its tests are skipped, saying how to get it; where the extra is required
    (``PAPERCLIP_REQUIRE_EXTRA`` set, .ci/run's second run) they run, and fail without it."""
    if importlib.util.find_spec("sentence_transformers") is not None or os.environ.get(REQUIRE_EXTRA):
        return
    skip = pytest.mark.skip(reason="needs the extra: pip install -e '.[test,sentence-transformers]'")
    for item in items:
        if NEEDS_EXTRA in item.keywords:
            item.add_marker(skip)

ADMIN_KEY = "ak-test-acme"
UPSTREAM_KEY = "sk-upstream-acme"
ANTHROPIC_KEY = "sk-ant-upstream-acme"


@pytest.fixture(scope="session")
def upstream_server() -> Iterator[tuple[FakeUpstream, ServerThread]]:
    fake = FakeUpstream()
    server = ServerThread(fake.app()).start()
    yield fake, server
    server.stop()


@pytest.fixture
def upstream(upstream_server: tuple[FakeUpstream, ServerThread]) -> FakeUpstream:
    fake, _ = upstream_server
    fake.reset()
    return fake


@pytest.fixture
def upstream_url(upstream_server: tuple[FakeUpstream, ServerThread], upstream: FakeUpstream) -> str:
    # Through ``upstream``: every test that talks to the shared fake starts it from its
    # defaults, whatever an earlier test set (its chat handler, its routes).
    return upstream_server[1].url + "/v1"


def base_config(upstream_url: str, db_path: Path, **overrides: Any) -> dict[str, Any]:
    """A config with one tenant ``acme`` in front of the fake upstream, and fast test defaults."""
    raw: dict[str, Any] = {
        "storage": {"url": f"sqlite:///{db_path}"},
        "embedding": {"model": "hash"},
        "defaults": {
            "upstream": {"base_url": upstream_url, "api_key": UPSTREAM_KEY, "read_timeout_s": 30},
            # The same fake server answers Anthropic's /v1/messages (tests/fake_anthropic.py).
            "anthropic": {"base_url": upstream_url.removesuffix("/v1"), "api_key": ANTHROPIC_KEY},
            "compression": {"model": "fake-compressor", "timeout_s": 5},
        },
        "tenants": {"acme": {"api_keys": [PROXY_KEY], "admin_keys": [ADMIN_KEY]}},
    }
    return _deep_merge(raw, overrides)


def _deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _deep_merge(out[k], v)
        else:
            out[k] = v
    return out


def loopback_sdk(kw: dict[str, Any], asynchronous: bool = False) -> dict[str, Any]:
    """SDK options for plain HTTP on loopback: no TLS context is built (it costs ~40 ms a client).

    The SDK's own wrapper classes are used so that, as with the SDK's default
    client, an SDK client a test forgets to close is closed when collected.
    """
    if "http_client" not in kw:
        factory = AsyncHttpxClientWrapper if asynchronous else SyncHttpxClientWrapper
        kw = {**kw, "http_client": factory(verify=False)}
    return kw


class Proxy:
    def __init__(self, server: ServerThread, app: Any) -> None:
        self.server = server
        self.app = app
        # The synchronous clients made here, closed with the proxy: a client a test leaves open would be
        # closed only when collected, and a collection that meets its socket first warns of it unclosed.
        self.clients: list[openai.OpenAI | anthropic.Anthropic | httpx.Client] = []

    def stop(self) -> None:
        """Close the clients made here, then stop the server."""
        for made in self.clients:
            made.close()
        self.clients.clear()
        self.server.stop()

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def runtime(self) -> Runtime:
        return self.app.state.runtime  # type: ignore[no-any-return]

    @property
    def store(self) -> Store:
        """The opened store of the loaded memory layer."""
        memory = self.runtime.memory.layer
        assert memory is not None, "the memory layer is not loaded"
        return memory.store

    def client(self, key: str = PROXY_KEY, **kw: Any) -> openai.OpenAI:
        made = openai.OpenAI(base_url=self.url + "/v1", api_key=key, max_retries=0, **loopback_sdk(kw))
        self.clients.append(made)
        return made

    def aclient(self, key: str = PROXY_KEY, **kw: Any) -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(base_url=self.url + "/v1", api_key=key, max_retries=0, **loopback_sdk(kw, True))

    def anthropic(self, key: str = PROXY_KEY, **kw: Any) -> anthropic.Anthropic:
        """The real ``anthropic`` SDK pointed at the proxy (it sends the key in ``x-api-key``)."""
        if "http_client" not in kw:
            kw = {**kw, "http_client": AnthropicHttpClient(verify=False)}
        made = anthropic.Anthropic(base_url=self.url, api_key=key, max_retries=0, **kw)
        self.clients.append(made)
        return made

    def http(self, key: str | None = PROXY_KEY) -> httpx.Client:
        headers = {"authorization": f"Bearer {key}"} if key else {}
        made = httpx.Client(base_url=self.url, headers=headers, timeout=30, verify=False)
        self.clients.append(made)
        return made

    def wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        with httpx.Client(base_url=self.url, timeout=5) as http:
            while http.get("/readyz").status_code != 200:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"proxy not ready: {http.get('/readyz').text}")
                time.sleep(0.02)

    def drain(self) -> None:
        """Wait until the proxy's requests in flight and their after-response work are done.

        A client has its whole response before the handler returns and spawns the
        recording task, so draining the background alone could return too early.
        """
        self.server.call(self._settle())

    async def _settle(self) -> None:
        handlers = self.server.server.server_state.tasks  # uvicorn's tasks of requests in flight
        while handlers or self.runtime.background.pending:
            if handlers:
                await asyncio.wait(set(handlers))
            await self.runtime.background.drain()


@pytest.fixture
def backend() -> str:
    """The store a test's proxies use: SQLite, unless its module says ``backend = both_stores``."""
    return "sqlite"


@pytest.fixture(params=["sqlite", "postgres"])
def both_stores(request: pytest.FixtureRequest) -> str:
    """Bound to ``backend`` in a module: each test that starts a proxy runs on both stores."""
    return str(request.param)


@pytest.fixture
def storage_url(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if backend == "postgres":
        return str(request.getfixturevalue("pg_url"))
    return f"sqlite:///{tmp_path / 'p.db'}"


@pytest.fixture
def make_proxy(upstream_url: str, tmp_path: Path, storage_url: str) -> Iterator[Callable[..., Proxy]]:
    made: list[Proxy] = []

    def make(
        raw: dict[str, Any] | None = None,
        *,
        pipeline: Any = None,
        wait_ready: bool = True,
        **overrides: Any,
    ) -> Proxy:
        if raw is None:
            raw = base_config(upstream_url, tmp_path / "p.db", **overrides)
            raw["storage"]["url"] = storage_url
        settings = config.from_dict(raw, env={})
        app = create_app(settings) if pipeline is None else create_app(settings, pipeline=pipeline)
        proxy = Proxy(ServerThread(app, server_header=False, date_header=False).start(), app)
        made.append(proxy)
        if wait_ready:
            proxy.wait_ready()
        return proxy

    yield make
    for proxy in made:
        proxy.stop()


@pytest.fixture
def proxy(make_proxy: Callable[..., Proxy]) -> Proxy:
    return make_proxy()


class Direct:
    """The real SDK pointed straight at the fake upstream: what the proxy must be indistinguishable from."""

    def __init__(self, url: str) -> None:
        self.url = url

    def client(self, **kw: Any) -> openai.OpenAI:
        return openai.OpenAI(base_url=self.url, api_key=UPSTREAM_KEY, max_retries=0, **loopback_sdk(kw))

    def aclient(self, **kw: Any) -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(base_url=self.url, api_key=UPSTREAM_KEY, max_retries=0, **loopback_sdk(kw, True))


@pytest.fixture
def direct(upstream_url: str) -> Direct:
    return Direct(upstream_url)


@pytest.fixture
def closed_port_url() -> str:
    """A loopback URL nothing listens on (an upstream that is down)."""
    from tests.servers import free_port

    return f"http://127.0.0.1:{free_port()}/v1"


@pytest.fixture(scope="module")
def plain_proxy(
    upstream_server: tuple[FakeUpstream, ServerThread], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Proxy]:
    """One proxy for a whole module, memory and context off: for tests of the relay itself.

    Starting and stopping a proxy costs about a quarter of a second; tests that
    only look at what goes over the wire share this one. Tests that need the
    memory layer, a fresh database or other settings use ``make_proxy``.
    """
    url = upstream_server[1].url + "/v1"
    raw = base_config(
        url,
        tmp_path_factory.mktemp("plain") / "p.db",
        defaults={"memory": {"enabled": False}, "context": {"enabled": False}},
    )
    app = create_app(config.from_dict(raw, env={}))
    server = ServerThread(app, server_header=False, date_header=False).start()
    proxy = Proxy(server, app)
    proxy.wait_ready()
    yield proxy
    proxy.stop()
