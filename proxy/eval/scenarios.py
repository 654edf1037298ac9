"""``paperclip eval scenarios``: standing facts asked about indirectly, replayed through the served app.

Each scenario (``scenarios.json`` beside this file, our own writing) is one
user: one or more short chats, sent turn by turn the way an SDK client sends
them (the whole history each time), then — in a fresh chat — a question that
needs a fact from them without naming it ("suggest a recipe" for a
vegetarian). The app is ``create_app`` itself, sent the requests an SDK
sends over an in-process ASGI transport, in front of a scripted upstream that
also plays the compression model (its replies are not JSON, so memory
extraction goes through the rules, as when a real model misbehaves).

Scored on what the app forwards upstream for the question, inside the memory
block only: a fact counts as recalled when one of its phrasings appears; a
forbidden phrase (a superseded value) must never appear. After each scenario
an unrelated question in a fresh chat of the same user counts the cards
injected outside the profile (``GET .../profile``), which should be none.
"""

from __future__ import annotations

import asyncio
import json
import re
import tempfile
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import httpx
from starlette.applications import Starlette

from .. import config
from ..memory.recall.cards import BLOCK_END, BLOCK_START
from ..server.app import create_app
from ..server.runtime import Offline, Runtime
from .fake import completion, fake_summary
from .harness import anthropic_message, messages_body

DATA = Path(__file__).with_name("scenarios.json")
COMPRESSOR = "fake-compressor"
MODEL = "gpt-4o-mini"
REPLY = "Sure, happy to help with that."
KEY = "sk-scenarios"
ADMIN_KEY = "ak-scenarios"
_CARD = re.compile(r"^\[[^\]\n]+\]", re.M)
Api = Literal["chat", "responses", "messages"]
PATHS: dict[str, str] = {"chat": "/chat/completions", "responses": "/responses", "messages": "/messages"}


@dataclass(frozen=True)
class Scenario:
    id: str
    lang: str
    chats: tuple[tuple[str, ...], ...]  # user turns of each chat, in order
    question: str
    expect: tuple[tuple[str, ...], ...]  # facts, each as alternative phrasings
    forbid: tuple[str, ...] = ()  # superseded values
    unrelated: str | None = None


@dataclass(frozen=True)
class Suite:
    scenarios: tuple[Scenario, ...]
    unrelated: dict[str, tuple[str, ...]]

    def unrelated_for(self, index: int, scenario: Scenario) -> str:
        pool = self.unrelated[scenario.lang]
        return scenario.unrelated or pool[index % len(pool)]


def load(path: str | Path | None = None) -> Suite:
    raw = json.loads(Path(path or DATA).read_text(encoding="utf-8"))
    scenarios = tuple(
        Scenario(
            id=s["id"],
            lang=s["lang"],
            chats=tuple(tuple(chat) for chat in s["chats"]),
            question=s["question"],
            expect=tuple(tuple(alts) for alts in s["expect"]),
            forbid=tuple(s.get("forbid", ())),
            unrelated=s.get("unrelated"),
        )
        for s in raw["scenarios"]
    )
    return Suite(scenarios, {lang: tuple(qs) for lang, qs in raw["unrelated"].items()})


@dataclass(frozen=True)
class Result:
    id: str
    lang: str
    recalled: int
    facts: int
    superseded_injected: bool
    cards: int  # cards in the question's block
    unrelated_cards: int  # cards outside the profile for the unrelated question
    missing: tuple[str, ...] = ()


@dataclass
class ScriptedUpstream:
    """The upstream and the compression model: a fixed reply to chats, a fake summary to prompts."""

    chats: list[list[dict[str, Any]]] = field(default_factory=list)

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self._handle)

    def _handle(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        if body.get("model") == COMPRESSOR:
            return httpx.Response(200, json=completion(fake_summary(body["messages"]), COMPRESSOR))
        responses = request.url.path.endswith("/responses")
        anthropic = request.url.path.endswith("/v1/messages")
        self.chats.append(_input_messages(body) if responses else _system_and_messages(body) if anthropic
                          else body["messages"])
        # The proxy relays the upstream's body as a stream: give it one to read.
        shape = _response if responses else anthropic_message if anthropic else completion
        reply = json.dumps(shape(REPLY, body.get("model", MODEL))).encode()
        return httpx.Response(200, headers={"content-type": "application/json"}, stream=_Body(reply))


def _input_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    """A Responses API body's instructions and input items, read like chat messages for scoring."""
    items = body.get("input")
    found = [{"role": "user", "content": items}] if isinstance(items, str) else list(items or [])
    instructions = body.get("instructions")
    return [{"role": "system", "content": instructions}, *found] if instructions else found


def _system_and_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    """An Anthropic Messages body's system and messages, read like chat messages for scoring."""
    system = body.get("system")
    return [*([{"role": "system", "content": system}] if system else []), *body["messages"]]


def _response(text: str, model: str) -> dict[str, Any]:
    message = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}
    return {"id": "resp_eval", "object": "response", "status": "completed", "model": model, "output": [message]}


class _Body(httpx.AsyncByteStream):
    def __init__(self, data: bytes) -> None:
        self.data = data

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield self.data


def memory_block(messages: Sequence[dict[str, Any]]) -> str:
    """The injected block's text in forwarded ``messages`` ('' when none)."""
    text = "\n".join(_text(m.get("content")) for m in messages)
    start, end = text.find(BLOCK_START), text.find(BLOCK_END)
    return text[start:end] if 0 <= start < end else ""


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content or "")


def cards_outside_profile(block: str, profile: Sequence[str]) -> int:
    """The cards of a block that are not the profile's (``profile``: its rendered cards)."""
    shown = set(profile)
    headers = [m.start() for m in _CARD.finditer(block)]
    ends = [*headers[1:], len(block)][: len(headers)]
    cards = [block[a:b].rstrip("\n") for a, b in zip(headers, ends, strict=True)]
    return sum(1 for card in cards if card.split("\n</paperclip-memory>")[0] not in shown)


def score(s: Scenario, block: str, unrelated_block: str, profile: Sequence[str] = ()) -> Result:
    lowered = block.lower()
    found = [any(a.lower() in lowered for a in alts) for alts in s.expect]
    return Result(
        id=s.id,
        lang=s.lang,
        recalled=sum(found),
        facts=len(s.expect),
        superseded_injected=any(f.lower() in lowered for f in s.forbid),
        cards=len(_CARD.findall(block)),
        unrelated_cards=cards_outside_profile(unrelated_block, profile),
        missing=tuple(alts[0] for alts, ok in zip(s.expect, found, strict=True) if not ok),
    )


def settings_for(db: Path, embedder: str) -> config.Settings:
    return config.from_dict(
        {
            "storage": {"url": f"sqlite:///{db}"},
            "embedding": {"model": embedder},
            "defaults": {
                "upstream": {"base_url": "http://scenario-upstream.invalid/v1", "api_key": "sk-up"},
                "compression": {"model": COMPRESSOR},
            },
            "tenants": {"scenarios": {"api_keys": [KEY], "admin_keys": [ADMIN_KEY]}},
        },
        env={},
    )


class Client:
    """A client of the app (the request an SDK sends) and the upstream the app forwards to."""

    def __init__(self, app: Any, upstream: ScriptedUpstream, api: Api = "chat") -> None:
        self.app = app
        self.upstream = upstream
        self.api = api
        # In process: no socket to open on a shared machine, and no SDK needed to run the eval.
        self.http = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app),
            base_url="http://paperclip/v1",
            headers={"authorization": f"Bearer {KEY}"},
        )

    async def send(self, user: str, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """One request; returns what the app forwarded upstream, after the turn is recorded."""
        # Through the Responses API the same turns are input items: a client that sends its history.
        body = (messages_body(messages) if self.api == "messages"
                else {"model": MODEL, "messages" if self.api == "chat" else "input": messages})
        response = await self.http.post(PATHS[self.api], json=body, headers={"X-Paperclip-User": user})
        response.raise_for_status()
        await self.app.state.runtime.background.drain()
        return self.upstream.chats[-1]

    async def profile(self, user: str) -> list[str]:
        """The user's profile cards, as ``GET .../profile`` renders them."""
        got = await self.http.get(
            f"http://paperclip/paperclip/v1/users/{user}/profile", headers={"authorization": f"Bearer {ADMIN_KEY}"}
        )
        got.raise_for_status()
        return [str(d["card"]) for d in got.json()["data"]]

    async def chat(self, user: str, turns: Sequence[str]) -> None:
        history: list[dict[str, Any]] = []
        for turn in turns:
            history.append({"role": "user", "content": turn})
            await self.send(user, history)
            history.append({"role": "assistant", "content": REPLY})


# Loading (and, the first time, exporting) the embedding model takes minutes on a busy machine.
READY_TIMEOUT_S = 900.0


async def _ready(app: Starlette) -> None:
    runtime: Runtime = app.state.runtime
    for _ in range(int(READY_TIMEOUT_S / 0.05)):
        if isinstance(runtime.memory.state, Offline):
            raise RuntimeError(f"the memory layer did not start: {runtime.memory.state.reason}")
        if all(runtime.memory.checks().values()):
            return
        await asyncio.sleep(0.05)
    raise RuntimeError(f"the memory layer did not start in {READY_TIMEOUT_S:.0f} s")


async def run(
    suite: Suite, embedder: str = "bundled", tick: Callable[[int], None] = lambda n: None, api: Api = "chat"
) -> list[Result]:
    upstream = ScriptedUpstream()
    with tempfile.TemporaryDirectory(prefix="paperclip-scenarios-") as folder:
        app = create_app(settings_for(Path(folder) / "scenarios.db", embedder), transport=upstream.transport())
        async with app.router.lifespan_context(app):
            await _ready(app)
            client = Client(app, upstream, api)
            async with client.http:
                results = await _replay(suite, client, tick)
    return results


async def _replay(suite: Suite, client: Client, tick: Callable[[int], None]) -> list[Result]:
    results = []
    for index, s in enumerate(suite.scenarios):
        user = f"scenario-{s.id}"
        for chat in s.chats:
            await client.chat(user, chat)
        asked = await client.send(user, [{"role": "user", "content": s.question}])
        aside = await client.send(user, [{"role": "user", "content": suite.unrelated_for(index, s)}])
        results.append(score(s, memory_block(asked), memory_block(aside), await client.profile(user)))
        tick(1)
    return results


def summary(results: Sequence[Result]) -> dict[str, Any]:
    def part(rs: Sequence[Result]) -> dict[str, Any]:
        facts = sum(r.facts for r in rs)
        return {
            "scenarios": len(rs),
            "recall": round(sum(r.recalled for r in rs) / facts, 3) if facts else None,
            "superseded_injected": sum(r.superseded_injected for r in rs),
            "unrelated_with_cards": sum(r.unrelated_cards > 0 for r in rs),
        }

    langs = sorted({r.lang for r in results})
    return {"all": part(results), **{lang: part([r for r in results if r.lang == lang]) for lang in langs}}


def markdown(results: Sequence[Result]) -> str:
    table = summary(results)
    lines = [
        "| scenarios | n | recall | superseded injected | unrelated questions given cards |",
        "|---|---|---|---|---|",
    ]
    for name, row in table.items():
        lines.append(
            f"| {name} | {row['scenarios']} | {row['recall']} | {row['superseded_injected']} "
            f"| {row['unrelated_with_cards']} |"
        )
    missed = [f"{r.id} ({', '.join(r.missing)})" for r in results if r.missing]
    leaked = [r.id for r in results if r.superseded_injected]
    lines += ["", f"Missed: {'; '.join(missed) or 'none'}", f"Superseded injected: {', '.join(leaked) or 'none'}"]
    return "\n".join(lines)
