"""Inspector sign-in: a server-side session behind an HttpOnly, SameSite=Strict cookie, and CSRF tokens.

The cookie holds only a random session id; the admin key stays in this
process's memory, never in the browser after sign-in. Each session has its
own CSRF token, which every form carries and every POST must echo
(compared in constant time). Sessions expire after ``TTL_S`` and at most
``MAX_SESSIONS`` are kept (the oldest go first), so sign-ins cannot grow
memory without bound. A restart signs everyone out.
"""

from __future__ import annotations

import hmac
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from ...tenancy import COOKIE_PREFIX

COOKIE = COOKIE_PREFIX + "_ui"  # in Paperclip's cookie name space: an upstream can never set it
TTL_S = 8 * 3600.0
MAX_SESSIONS = 1000


@dataclass(frozen=True)
class UiSession:
    key: str
    csrf: str
    expires: float


class Sessions:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._by_id: OrderedDict[str, UiSession] = OrderedDict()
        self._clock = clock

    def open(self, key: str) -> str:
        """Start a session for ``key`` (already checked); returns the cookie value."""
        sid = secrets.token_urlsafe(32)
        self._by_id[sid] = UiSession(key, secrets.token_urlsafe(32), self._clock() + TTL_S)
        while len(self._by_id) > MAX_SESSIONS:
            self._by_id.popitem(last=False)
        return sid

    def get(self, sid: str | None) -> UiSession | None:
        found = self._by_id.get(sid) if sid else None
        if found is None or found.expires < self._clock():
            if sid:
                self._by_id.pop(sid, None)
            return None
        return found

    def close(self, sid: str | None) -> None:
        if sid:
            self._by_id.pop(sid, None)


def csrf_ok(session: UiSession, presented: str | None) -> bool:
    return presented is not None and hmac.compare_digest(session.csrf.encode(), presented.encode())


def cookie_header(sid: str, secure: bool, max_age: int = int(TTL_S)) -> str:
    flags = f"{COOKIE}={sid}; Path=/paperclip/ui; HttpOnly; SameSite=Strict; Max-Age={max_age}"
    return flags + ("; Secure" if secure else "")
