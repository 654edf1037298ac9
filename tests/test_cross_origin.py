"""A browser app on another origin calls the API through the proxy as it calls OpenAI's (``server.cors_origins``).

The browser test is Debian's chromium through Selenium (``test_inspector_browser``'s driver): a page
served from one port fetches the proxy on another, with its key, as ``openai``'s SDK does with
``dangerouslyAllowBrowser``. The admin API and ``/metrics`` stay closed to other origins.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import httpx
import pytest
from starlette.applications import Starlette
from starlette.responses import HTMLResponse
from starlette.routing import Route

from proxy import config
from proxy.errors import ConfigError
from tests.conftest import ADMIN_KEY, PROXY_KEY, Proxy
from tests.servers import ServerThread

PAGE = """<!doctype html><title>app</title><script>
async function call(url, init) {
  try {
    const r = await fetch(url, init);
    return [r.status, await r.text(), r.headers.get("x-paperclip-trace") || ""];
  } catch (e) {
    return ["blocked", String(e), ""];
  }
}
</script>"""
CHAT = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Hello from a browser"}]}
PREFLIGHT = {"origin": "https://app.example.com", "access-control-request-method": "POST",
             "access-control-request-headers": "authorization, content-type"}


@pytest.fixture
def page() -> Iterator[str]:
    async def index(request: object) -> HTMLResponse:
        return HTMLResponse(PAGE)

    server = ServerThread(Starlette(routes=[Route("/", index)])).start()
    yield f"http://127.0.0.1:{server.port}/"
    server.stop()


def test_a_page_on_another_origin_calls_the_api_but_not_the_admin_api(
    make_proxy: Callable[..., Proxy], page: str
) -> None:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    from tests.test_inspector_browser import (  # skips, saying why, without chromium
        CHROMIUM,
        DRIVER,
        FLAGS,
    )

    assert CHROMIUM and DRIVER
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=DRIVER), options=options)
    try:
        proxy = make_proxy()
        driver.set_script_timeout(30)
        driver.get(page)
        run = "const done = arguments[arguments.length - 1]; call(arguments[0], arguments[1]).then(done);"
        status, body, trace = driver.execute_async_script(run, f"{proxy.url}/v1/chat/completions", {
            "method": "POST", "body": httpx.Request("POST", "/", json=CHAT).content.decode(),
            "headers": {"authorization": f"Bearer {PROXY_KEY}", "content-type": "application/json"}})
        assert status == 200 and '"choices"' in body
        assert trace  # a header of ours, readable by the page
        status, body, _ = driver.execute_async_script(run, f"{proxy.url}/paperclip/v1/users", {
            "headers": {"authorization": f"Bearer {ADMIN_KEY}"}})
        assert status == "blocked"  # the preflight is refused: the admin API is not the page's
    finally:
        driver.quit()


def test_the_preflight_names_the_origin_on_api_paths_only(proxy: Proxy) -> None:
    with httpx.Client(base_url=proxy.url) as http:
        for path in ("/v1/chat/completions", "/chat/completions", "/v1/messages", "/v1/models", "/mcp"):
            got = http.options(path, headers=PREFLIGHT)
            assert got.status_code == 200, path
            assert got.headers["access-control-allow-origin"] == "*"
            assert "authorization" in got.headers["access-control-allow-headers"].lower()
            assert "access-control-allow-credentials" not in got.headers  # no cookie goes with it
        for path in ("/paperclip/v1/users", "/paperclip/ui", "/metrics", "/healthz"):
            got = http.options(path, headers=PREFLIGHT)
            assert "access-control-allow-origin" not in got.headers, path
        answered = http.post("/v1/chat/completions", json=CHAT, headers={
            "authorization": f"Bearer {PROXY_KEY}", "origin": "https://app.example.com"})
        assert answered.status_code == 200 and answered.headers["access-control-allow-origin"] == "*"
        assert answered.headers["access-control-expose-headers"] == "*"


@pytest.mark.parametrize(("origins", "allowed"), [
    (["https://app.example.com"], True), (["https://other.example.com"], False), ([], False)])
def test_cors_origins_names_the_origins_a_page_may_call_from(
    make_proxy: Callable[..., Proxy], origins: list[str], allowed: bool
) -> None:
    proxy = make_proxy(server={"cors_origins": origins})
    with httpx.Client(base_url=proxy.url) as http:
        got = http.options("/v1/chat/completions", headers=PREFLIGHT)
        assert (got.headers.get("access-control-allow-origin") == "https://app.example.com") is allowed


@pytest.mark.parametrize("origin", ["https://app.example.com/", "app.example.com", "https://app.example.com/x"])
def test_an_origin_with_a_path_or_no_scheme_is_a_config_error(origin: str) -> None:
    with pytest.raises(ConfigError, match="no origin"):
        config.from_dict({"server": {"cors_origins": [origin]}}, env={})
