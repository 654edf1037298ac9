"""Provider shapes (SPEC §6, §7): Azure OpenAI's paths and ``api-key``, query strings in ``base_url``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import openai
from hypothesis import given
from hypothesis import strategies as st
from openai._base_client import SyncHttpxClientWrapper

from proxy.server.chat import deployment_or_model
from proxy.upstream.headers import join_url, merge_query
from tests.conftest import PROXY_KEY, UPSTREAM_KEY, Proxy
from tests.fake_upstream import FakeUpstream
from tests.servers import ServerThread

HI: list[dict[str, Any]] = [{"role": "user", "content": "My name is Ada and I like chess."}]
API_VERSION = "2024-10-21"


def azure_proxy(make_proxy: Callable[..., Proxy], root: str) -> Proxy:
    return make_proxy(defaults={"upstream": {"base_url": root, "auth": "api-key"}})


def azure_client(proxy: Proxy) -> openai.AzureOpenAI:
    return openai.AzureOpenAI(
        azure_endpoint=proxy.url,
        api_key=PROXY_KEY,
        api_version=API_VERSION,
        max_retries=0,
        http_client=SyncHttpxClientWrapper(verify=False),
    )


def test_the_azure_openai_client_is_intercepted_and_forwarded_under_base_url(
    make_proxy: Callable[..., Proxy], upstream_server: tuple[FakeUpstream, ServerThread], upstream: FakeUpstream
) -> None:
    proxy = azure_proxy(make_proxy, upstream_server[1].url)  # the resource endpoint, as Azure names it
    with azure_client(proxy) as client:
        raw = client.chat.completions.with_raw_response.create(model="gpt-4o-prod", messages=HI)
        streamed = "".join(
            c.choices[0].delta.content or ""
            for c in client.chat.completions.create(model="gpt-4o-prod", messages=HI, stream=True)
            if c.choices
        )
        models = client.models.list()  # Azure's other paths are passed through
    assert raw.parse().choices[0].message.content == "Hello from upstream"
    assert streamed == "Hello from upstream"
    assert int(raw.headers["x-paperclip-tokens-in"]) > 0 and raw.headers["x-paperclip-session"]
    chat = upstream.chat_requests()
    assert [r.path for r in chat] == ["/openai/deployments/gpt-4o-prod/chat/completions"] * 2
    assert chat[0].query == f"api-version={API_VERSION}"
    assert chat[0].headers["api-key"] == UPSTREAM_KEY  # the tenant's key, where Azure wants it
    assert "authorization" not in chat[0].headers
    assert (upstream.requests[-1].path, upstream.requests[-1].query) == ("/openai/models", f"api-version={API_VERSION}")
    assert models.data[0].id == "gpt-4o-mini"


def test_the_deployment_is_the_model_tokens_are_counted_for(
    make_proxy: Callable[..., Proxy], upstream_server: tuple[FakeUpstream, ServerThread], upstream: FakeUpstream
) -> None:
    proxy = azure_proxy(make_proxy, upstream_server[1].url)
    with proxy.http() as http:
        r = http.post(
            f"/openai/deployments/gpt-4o-prod/chat/completions?api-version={API_VERSION}",
            json={"messages": HI},  # Azure clients may leave `model` out: the path names it
            headers={"api-key": PROXY_KEY},
        )
    assert r.status_code == 200, r.text
    assert int(r.headers["x-paperclip-tokens-in"]) > 0
    path_params = {"path_params": {"deployment": "gpt-4o-prod"}}
    assert deployment_or_model(path_params, {"model": "other"}) == "gpt-4o-prod"
    assert deployment_or_model({}, {"model": "gpt-4o"}) == "gpt-4o"
    assert deployment_or_model({}, {"model": 3}) is None


def test_bearer_is_the_default_and_the_client_key_never_goes_up(proxy: Proxy, upstream: FakeUpstream) -> None:
    with proxy.client() as client:
        client.chat.completions.create(model="gpt-4o-mini", messages=HI)
    sent = upstream.chat_requests()[-1].headers
    assert sent["authorization"] == f"Bearer {UPSTREAM_KEY}" and "api-key" not in sent


def test_a_query_in_base_url_is_kept_and_merged_with_the_clients(
    make_proxy: Callable[..., Proxy], upstream_url: str, upstream: FakeUpstream
) -> None:
    proxy = make_proxy(defaults={"upstream": {"base_url": upstream_url + "?api-version=2024-10-21&tag=ops"}})
    with proxy.http() as http:
        chat = http.post("/v1/chat/completions?tag=app&x=1", json={"model": "m", "messages": HI})
        models = http.get("/v1/models")
    assert chat.status_code == models.status_code == 200
    assert [r.query for r in upstream.requests] == ["api-version=2024-10-21&tag=app&x=1", "api-version=2024-10-21&tag=ops"]
    assert [r.path for r in upstream.requests] == ["/v1/chat/completions", "/v1/models"]


param = st.tuples(st.sampled_from(["a", "b", "api-version", "x"]), st.text("0123456789%", max_size=3))
query = st.lists(param, max_size=4).map(lambda ps: "&".join(f"{k}={v}" for k, v in ps))


@given(query, query)
def test_merge_query_keeps_the_clients_parameters_and_the_configured_ones_it_does_not_name(configured: str, client: str) -> None:
    merged = [p for p in merge_query(configured, client).split("&") if p]
    client_parts = [p for p in client.split("&") if p]
    named = {p.split("=")[0] for p in client_parts}
    assert merged[len(merged) - len(client_parts):] == client_parts
    assert merged[: len(merged) - len(client_parts)] == [p for p in configured.split("&") if p and p.split("=")[0] not in named]


def test_join_url() -> None:
    assert str(join_url("https://r.example.com/v1?k=1", "/v1/chat/completions", b"")) == "https://r.example.com/v1/chat/completions?k=1"
    assert str(join_url("https://r.example.com", "/openai/deployments/d/chat/completions", b"api-version=1")) == (
        "https://r.example.com/openai/deployments/d/chat/completions?api-version=1"
    )
    assert str(join_url("http://h:8000/v1/", "/v1/models", b"")) == "http://h:8000/v1/models"
