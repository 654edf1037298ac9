"""Signing in to the inspector over plain HTTP, for its tests and its benchmark."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator

import httpx

CSRF = re.compile(r'name="csrf" value="([^"]+)"')


@contextlib.contextmanager
def signed_in(url: str, key: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=url, follow_redirects=True, timeout=30) as http:
        r = http.post("/paperclip/ui/login", data={"key": key})
        assert r.status_code == 200, r.text
        yield http


def csrf_of(page: str) -> str:
    found = CSRF.search(page)
    assert found is not None, "no form on the page"
    return found.group(1)
