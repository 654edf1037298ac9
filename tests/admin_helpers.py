"""Conversations that leave memories behind, for the admin, forget and CLI tests."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx

from tests.conftest import ADMIN_KEY, PROXY_KEY, Proxy

# A made-up word: if it is anywhere in the database file, something of the user survived.
FACT = "My cat Zorblax is allergic to peanuts, please remember that."
QUESTION = "Which food is my cat allergic to? Tell me please."
MARK = b"zorblax"


def teach(proxy: Proxy, user: str, fact: str = FACT, key: str = PROXY_KEY) -> str:
    """One chat that states ``fact`` with enough turns for extraction; returns its session id."""
    history: list[dict[str, Any]] = [
        {"role": "system", "content": "You are helpful."},
        {"role": "user", "content": fact},
        {"role": "assistant", "content": "Noted, I will remember that."},
    ]
    for topic in ("trains", "weather"):
        history.append({"role": "user", "content": f"Tell me something about {topic} in spring."})
        history.append({"role": "assistant", "content": f"Spring {topic} are pleasant enough."})
    history.append({"role": "user", "content": "Thanks, that is all for now."})
    raw = proxy.client(key).chat.completions.with_raw_response.create(
        model="gpt-4o-mini", messages=history, extra_headers={"X-Paperclip-User": user}  # type: ignore[arg-type]
    )
    proxy.drain()
    return str(raw.headers["x-paperclip-session"])


def chat_turn_by_turn(proxy: Proxy, user: str, session: str, *lines: str) -> None:
    """A chat as a client sends it: each user line with the history before it, one request each (every
    answer read as "Noted."), not drained: its records may still run when it returns."""
    history: list[dict[str, Any]] = []
    for line in lines:
        history.append({"role": "user", "content": line})
        with proxy.client() as client:
            client.chat.completions.create(
                model="gpt-4o-mini", messages=history,  # type: ignore[arg-type]
                extra_headers={"X-Paperclip-User": user, "X-Paperclip-Session": session},
            )
        history.append({"role": "assistant", "content": "Noted."})


def ask(proxy: Proxy, user: str, question: str = QUESTION, key: str = PROXY_KEY) -> Mapping[str, str]:
    """A fresh conversation asking ``question``; returns the proxy's response headers."""
    raw = proxy.client(key).chat.completions.with_raw_response.create(
        model="gpt-4o-mini",
        messages=[{"role": "user", "content": question}],
        extra_headers={"X-Paperclip-User": user},
    )
    proxy.drain()
    return raw.headers


def admin(proxy: Proxy, key: str = ADMIN_KEY) -> httpx.Client:
    return proxy.http(key)
