"""Inspector sign-in: a server-side session behind an HttpOnly, SameSite=Strict cookie, and CSRF tokens.

The cookie holds only a random session id; the admin key stays in this
process's memory, never in the browser after sign-in. Each session has its
own CSRF token, which every form carries and every POST must echo
(compared in constant time). A restart signs everyone out.

Sessions expire after ``TTL_S``. Sign-ins cannot grow memory without bound,
nor push anyone else out: a key holds at most ``PER_KEY`` sessions (its own
oldest goes when it signs in again), and once ``MAX_SESSIONS`` live sessions
are held a new sign-in is refused until one expires or signs out — no flood
of sign-ins (in passthrough mode any key may sign in) evicts a live session.
``SignInLimits`` bounds how often one client address may try: failures
first, so keys cannot be guessed at speed.
"""

from __future__ import annotations

import hmac
import secrets
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass

from ...tenancy import COOKIE_PREFIX

COOKIE = COOKIE_PREFIX + "_ui"  # in Paperclip's cookie name space: an upstream can never set it
TTL_S = 8 * 3600.0
MAX_SESSIONS = 1000
PER_KEY = 16
# Per client address, in any WINDOW_S: so many failed sign-ins, so many sign-ins at all.
WINDOW_S = 60.0
MAX_FAILURES = 5
MAX_ATTEMPTS = 30
MAX_ADDRESSES = 10_000  # addresses remembered; the longest quiet are forgotten first


@dataclass(frozen=True)
class UiSession:
    key: str
    csrf: str
    expires: float


class Sessions:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._by_id: OrderedDict[str, UiSession] = OrderedDict()  # oldest first: they expire in order
        self._clock = clock

    def open(self, key: str) -> str | None:
        """Start a session for ``key`` (already checked): the cookie value, or None when the table is full."""
        now = self._clock()
        while self._by_id and next(iter(self._by_id.values())).expires < now:
            self._by_id.popitem(last=False)
        own = [sid for sid, found in self._by_id.items() if found.key == key]
        for sid in own[: max(0, len(own) - PER_KEY + 1)]:
            del self._by_id[sid]  # the key's own oldest: it signed in again elsewhere
        if len(self._by_id) >= MAX_SESSIONS:
            return None
        sid = secrets.token_urlsafe(32)
        self._by_id[sid] = UiSession(key, secrets.token_urlsafe(32), now + TTL_S)
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


class SignInLimits:
    """How often each client address may try to sign in (see the module docstring)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._tries: OrderedDict[str, tuple[deque[float], deque[float]]] = OrderedDict()  # attempts, failures
        self._clock = clock

    def allowed(self, address: str) -> bool:
        """Whether ``address`` may try now; counts the attempt when it may."""
        attempts, failures = self._of(address)
        if len(failures) >= MAX_FAILURES or len(attempts) >= MAX_ATTEMPTS:
            return False
        attempts.append(self._clock())
        return True

    def failed(self, address: str) -> None:
        self._of(address)[1].append(self._clock())

    def _of(self, address: str) -> tuple[deque[float], deque[float]]:
        found = self._tries.pop(address, None) or (deque(), deque())
        self._tries[address] = found  # the most recent last
        while len(self._tries) > MAX_ADDRESSES:
            self._tries.popitem(last=False)
        since = self._clock() - WINDOW_S
        for times in found:
            while times and times[0] < since:
                times.popleft()
        return found


def csrf_ok(session: UiSession, presented: str | None) -> bool:
    return presented is not None and hmac.compare_digest(session.csrf.encode(), presented.encode())


def cookie_header(sid: str, secure: bool, max_age: int = int(TTL_S)) -> str:
    flags = f"{COOKIE}={sid}; Path=/paperclip/ui; HttpOnly; SameSite=Strict; Max-Age={max_age}"
    return flags + ("; Secure" if secure else "")
