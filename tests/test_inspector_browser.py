"""The inspector in a real browser: Debian's chromium, driven by Selenium through chromedriver.

Skipped, saying why, only when chromium is absent outside CI; in CI (``CI``
set) its absence is a failure: ``.ci/run`` installs it. With
``PAPERCLIP_SCREENSHOTS=DIR`` the main pages are saved there as PNGs (how
docs/img was made).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.admin_helpers import ask, teach
from tests.conftest import ADMIN_KEY, Proxy
from tests.test_admin import GLOBEX_ADMIN, add
from tests.test_admin_api import operated

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--window-size=1280,1000"]

if not (CHROMIUM and DRIVER) and not os.environ.get("CI"):
    pytest.skip("chromium and chromium-driver are not installed (apt-get install chromium chromium-driver)",
                allow_module_level=True)

from selenium import webdriver  # noqa: E402
from selenium.common.exceptions import WebDriverException  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.remote.webdriver import WebDriver  # noqa: E402
from selenium.webdriver.remote.webelement import WebElement  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

SCRIPT = "<script>document.title='pwned'</script> Bob hums while cooking"


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    assert CHROMIUM and DRIVER, "CI must install chromium and chromium-driver (see .ci/run)"
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=DRIVER), options=options)
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()


def sign_in(driver: WebDriver, url: str, key: str) -> None:
    driver.delete_all_cookies()
    driver.get(url + "/paperclip/ui")
    driver.find_element(By.ID, "key").send_keys(key)
    click(driver, driver.find_element(By.ID, "signin"))


def click(driver: WebDriver, element: WebElement) -> None:
    """Click something that loads a page, and wait until the new page has replaced the old one.

    The old page's window is marked; the wait ends when the document carries no
    mark and has finished loading. Polling the old ``<html>`` for staleness races
    chromedriver mid-navigation: it may answer "Node with given id does not belong
    to the document", a plain WebDriverException rather than a stale reference.
    """
    driver.execute_script("window.paperclipOldPage = true")
    element.click()
    WebDriverWait(driver, 20, ignored_exceptions=(WebDriverException,)).until(
        lambda d: d.execute_script(
            "return !window.paperclipOldPage && document.readyState === 'complete'"))


def shot(driver: WebDriver, name: str) -> None:
    folder = os.environ.get("PAPERCLIP_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(Path(folder) / f"{name}.png"))


def contents(driver: WebDriver) -> list[str]:
    return [e.text for e in driver.find_elements(By.CSS_SELECTOR, "#memories .content")]


def test_inspect_search_edit_delete_trace(
    browser: WebDriver, make_proxy: Callable[..., Proxy], upstream_url: str, tmp_path: Path
) -> None:
    proxy = make_proxy(operated(upstream_url, tmp_path))
    session = teach(proxy, "bob")
    trace = ask(proxy, "bob")["x-paperclip-trace"]
    add(proxy, "bob", content="Bob's cat Zorblax is allergic to peanuts.", importance=0.9, type="constraint")
    add(proxy, "bob", content=SCRIPT)
    add(proxy, "bob", content="Bob plays the cello on Sundays.", type="preference")

    sign_in(browser, proxy.url, ADMIN_KEY)
    assert browser.current_url.endswith("/paperclip/ui/users")
    shot(browser, "users")
    click(browser, browser.find_element(By.LINK_TEXT, "bob"))
    # A memory holding <script> is shown as text and never runs.
    assert any(c.startswith("<script>") for c in contents(browser))
    assert browser.title != "pwned"
    shot(browser, "user")

    browser.find_element(By.ID, "q").send_keys("peanuts allergy")
    click(browser, browser.find_element(By.ID, "go"))
    assert contents(browser)[0] == "Bob's cat Zorblax is allergic to peanuts."
    shot(browser, "search")

    row = browser.find_element(By.CSS_SELECTOR, "#memories tr.memory")
    row.find_element(By.TAG_NAME, "summary").click()
    box = row.find_element(By.NAME, "content")
    box.clear()
    box.send_keys("Bob's cat Zorblax is allergic to peanuts and to shellfish.")
    click(browser, row.find_element(By.CSS_SELECTOR, "button.save"))
    assert "Bob's cat Zorblax is allergic to peanuts and to shellfish." in contents(browser)

    row = next(r for r in browser.find_elements(By.CSS_SELECTOR, "#memories tr.memory")
               if "cello" in r.text)
    click(browser, row.find_element(By.CSS_SELECTOR, "button.delete"))
    assert not any("cello" in c for c in contents(browser))
    with proxy.http(ADMIN_KEY) as http:
        assert "cello" not in http.get("/paperclip/v1/users/bob/memories").text

    browser.get(f"{proxy.url}/paperclip/ui/traces")
    shot(browser, "traces")
    click(browser, browser.find_element(By.LINK_TEXT, trace))
    scores = browser.find_elements(By.CSS_SELECTOR, "#candidates tr.candidate td.score")
    assert scores and all(float(s.text.split()[0]) >= 0 for s in scores)
    assert browser.find_elements(By.CSS_SELECTOR, "#candidates td.vector")[0].text != ""
    assert "Zorblax" in browser.find_element(By.ID, "block").text
    shot(browser, "trace")
    browser.get(f"{proxy.url}/paperclip/ui/sessions/{session}")
    assert browser.find_element(By.ID, "pyramid")

    # A form whose CSRF token was taken out is refused, and nothing is deleted.
    browser.get(f"{proxy.url}/paperclip/ui/users/bob")
    before = contents(browser)
    browser.execute_script(
        "document.querySelectorAll('form input[name=csrf]').forEach(e => e.remove())")
    click(browser, browser.find_element(By.CSS_SELECTOR, "button.delete"))
    assert "did not come from the inspector" in browser.find_element(By.ID, "error").text
    browser.get(f"{proxy.url}/paperclip/ui/users/bob")
    assert contents(browser) == before

    # Another tenant's admin key sees none of it.
    sign_in(browser, proxy.url, GLOBEX_ADMIN)
    assert "bob" not in browser.find_element(By.ID, "users").text
    browser.get(f"{proxy.url}/paperclip/ui/users/bob")
    assert contents(browser) == []


def test_session_summary_pyramid(
    browser: WebDriver, make_proxy: Callable[..., Proxy], upstream_url: str, tmp_path: Path
) -> None:
    from typing import Any

    from tests.conftest import base_config

    proxy = make_proxy(base_config(upstream_url, tmp_path / "s.db", defaults={"context": {"recent_window_tokens": 300}}))
    history: list[dict[str, Any]] = [{"role": "user", "content": "Let us plan the Lisbon trip in detail."}]
    for i in range(30):
        history.append({"role": "assistant", "content": f"Step {i}: book the tram tickets and a fado evening."})
        history.append({"role": "user", "content": f"Fine, step {i} is done, what is next on the list?"})
    raw = proxy.client().chat.completions.with_raw_response.create(
        model="gpt-4o-mini", messages=history, extra_headers={"X-Paperclip-User": "carol"}  # type: ignore[arg-type]
    )
    proxy.drain()
    sign_in(browser, proxy.url, ADMIN_KEY)
    browser.get(f"{proxy.url}/paperclip/ui/sessions/{raw.headers['x-paperclip-session']}")
    blocks = browser.find_elements(By.CSS_SELECTOR, "#pyramid .block")
    assert blocks and all("turns" in b.text for b in blocks)
    shot(browser, "session")


def test_conversations_turns_search_delete_and_forget(
    browser: WebDriver, make_proxy: Callable[..., Proxy], upstream_url: str, tmp_path: Path
) -> None:
    proxy = make_proxy(operated(upstream_url, tmp_path))
    session = teach(proxy, "bob")
    sign_in(browser, proxy.url, ADMIN_KEY)
    browser.get(f"{proxy.url}/paperclip/ui/users/bob")
    click(browser, browser.find_element(By.ID, "conversations"))
    assert session in browser.find_element(By.ID, "conversations").text
    browser.find_element(By.ID, "q").send_keys("Zorblax")
    click(browser, browser.find_element(By.ID, "go"))
    (row,) = [r for r in browser.find_elements(By.CSS_SELECTOR, "#found tr.turn") if "Zorblax" in r.text]
    click(browser, row.find_element(By.CSS_SELECTOR, "button.delete"))
    assert browser.current_url.endswith(f"/conversations/{session}")
    turns = browser.find_element(By.ID, "turns").text
    assert "Zorblax" not in turns and "trains in spring" in turns
    shot(browser, "conversation")

    click(browser, browser.find_element(By.ID, "forget-button"))  # the box not ticked
    assert "trains in spring" in browser.find_element(By.ID, "turns").text
    browser.find_element(By.ID, "confirm").click()
    click(browser, browser.find_element(By.ID, "forget-button"))
    assert session not in browser.find_element(By.ID, "conversations").text
    with proxy.http(ADMIN_KEY) as http:
        assert http.get("/paperclip/v1/users/bob/fragments", params={"session": session}).json()["data"] == []
    assert ask(proxy, "bob")["x-paperclip-memories"] == "0"
