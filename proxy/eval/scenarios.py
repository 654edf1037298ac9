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
A fact recalled only inside cards marked as changed counts too (``current
values only marked``): a mark is a hedge, and one on what still holds would
let a model doubt it, so a mark that catches more changes must not raise it.

The file has two halves. ``scenarios`` is the tuning half, the cases the
rules were written against. ``frozen`` was written before any rule for it,
from phrasings no rule was written for, and no rule is ever changed because
of it; each of its cases is of one ``kind``: ``standing`` (a lasting fact
said in new words, recalled in a fresh chat), ``changed`` (an old value in
one chat, a new one in the next: the new recalled, the old — ``forbid`` —
never presented as current, that is, never in a card not marked as changed)
or ``moment`` (a statement of the moment whose ``moment`` phrases must not
become standing facts: never in the user's profile). Each frozen case also
carries its ``extraction``: what a model following ``prompts/extract.md``
returns for the turns that ``said`` it. The frozen half is replayed twice:
with the rules alone (the compression model's replies are not JSON) and with
``stand_in.StandIn`` answering the extraction calls from that extraction. A
tuning case may carry an ``extraction`` too: those cases are replayed with
the stand-in as well, the model's path tuned on as the rules' is.
"""

from __future__ import annotations

import asyncio
import dataclasses
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
from ..memory.redaction import redact
from ..server.app import create_app
from ..server.runtime import Offline, Runtime
from .fake import Answer, completion, fake_summary
from .harness import anthropic_message, messages_body
from .stand_in import Fact, Item, Knowledge, StandIn

DATA = Path(__file__).with_name("scenarios.json")
# More frozen halves, each written by someone who read neither the rules nor the earlier halves' cases
# or results (its note). A half whose missed cases someone has read no longer measures the rules blind.
SECOND_FROZEN = Path(__file__).with_name("scenarios_frozen_2.json")
THIRD_FROZEN = Path(__file__).with_name("scenarios_frozen_3.json")
FOURTH_FROZEN = Path(__file__).with_name("scenarios_frozen_4.json")
FIFTH_FROZEN = Path(__file__).with_name("scenarios_frozen_5.json")
COMPRESSOR = "fake-compressor"
MODEL = "gpt-4o-mini"
REPLY = "Sure, happy to help with that."
KEY = "sk-scenarios"
ADMIN_KEY = "ak-scenarios"
_CARD = re.compile(r"^\[[^\]\n]+\]", re.M)
# A card header that marks a value as no longer current (SPEC §5: "shown marked as earlier and since changed").
_MARKED = re.compile(r"superseded|since changed|changed since|no longer current|outdated", re.I)
Api = Literal["chat", "responses", "messages"]
Part = Literal["all", "tuning", "frozen"]
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
    kind: str = "tuning"  # the frozen half's: "standing", "changed" or "moment"
    moment: tuple[str, ...] = ()  # phrases of a statement of the moment
    extraction: tuple[tuple[str, tuple[Item, ...]], ...] = ()  # (a user turn, the items it gives)


@dataclass(frozen=True)
class Suite:
    scenarios: tuple[Scenario, ...]  # the tuning half
    unrelated: dict[str, tuple[str, ...]]
    frozen: tuple[Scenario, ...] = ()

    def unrelated_for(self, index: int, scenario: Scenario) -> str:
        pool = self.unrelated[scenario.lang]
        return scenario.unrelated or pool[index % len(pool)]


def load(path: str | Path | None = None) -> Suite:
    raw = json.loads(Path(path or DATA).read_text(encoding="utf-8"))
    cases = (tuple(_scenario(s) for s in raw.get(half, ())) for half in ("scenarios", "frozen"))
    unrelated = {lang: tuple(qs) for lang, qs in raw["unrelated"].items()}
    return Suite(next(cases), unrelated, next(cases))


def _scenario(s: dict[str, Any]) -> Scenario:
    return Scenario(
        id=s["id"],
        lang=s["lang"],
        chats=tuple(tuple(chat) for chat in s["chats"]),
        question=s["question"],
        expect=tuple(tuple(alts) for alts in s["expect"]),
        forbid=tuple(s.get("forbid", ())),
        unrelated=s.get("unrelated"),
        kind=s.get("kind", "tuning"),
        moment=tuple(s.get("moment", ())),
        extraction=tuple((e["said"], tuple(e["items"])) for e in s.get("extraction", ())),
    )


def knowledge(cases: Sequence[Scenario], mask: Callable[[str], str]) -> Knowledge:
    """What a model following the extraction prompt would answer for the cases' turns.

    Turn ids are ``<case>/<chat>/<turn>``; an item is drawn from the turns of its case that said it. In a
    case with old values (``forbid``), the last statement's items replace the earlier items that hold one:
    asked to reconcile them, the stand-in says so.
    """
    turns = [(f"{s.id}/{c}/{i}", f"{s.id}/{c}", text) for s in cases for c, chat in enumerate(s.chats)
             for i, text in enumerate(chat)]
    facts = []
    replaces = []
    for s in cases:
        for said, items in s.extraction:
            ids = tuple(f"{s.id}/{c}/{i}" for c, chat in enumerate(s.chats) for i, t in enumerate(chat) if t == said)
            facts += [Fact(ids, item) for item in items]
        if s.forbid and s.extraction:
            # The case's last statement changes the earlier facts that hold an old value.
            old = [str(i["content"]) for _, items in s.extraction[:-1] for i in items
                   if any(f.lower() in str(i["content"]).lower() for f in s.forbid)]
            replaces += [(str(i["content"]), o) for i in s.extraction[-1][1] for o in old]
    return Knowledge.of(turns, facts, mask=mask, replaces=replaces)


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
    half: str = "tuning"  # or "frozen"
    stand_in: str = "rules"  # the compression model: "rules" (replies not JSON) or "model" (StandIn)
    kind: str = "tuning"
    old_as_current: bool = False  # a forbidden value in a card not marked as changed
    moment_standing: bool = False  # a moment phrase in the user's profile
    current_marked: int = 0  # facts recalled only in cards marked as changed: a hedge on what still holds


@dataclass
class ScriptedUpstream:
    """The upstream and the compression model: a fixed reply to chats, ``compressor``'s to prompts."""

    chats: list[list[dict[str, Any]]] = field(default_factory=list)
    compressor: Answer = fake_summary

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self._handle)

    def _handle(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        if body.get("model") == COMPRESSOR:
            return httpx.Response(200, json=completion(self.compressor(body["messages"]), COMPRESSOR))
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


def cards_of(block: str) -> list[str]:
    """The rendered cards of a block, each with its header line."""
    headers = [m.start() for m in _CARD.finditer(block)]
    ends = [*headers[1:], len(block)][: len(headers)]
    return [block[a:b].rstrip("\n").split("\n</paperclip-memory>")[0] for a, b in zip(headers, ends, strict=True)]


def cards_outside_profile(block: str, profile: Sequence[str]) -> int:
    """The cards of a block that are not the profile's (``profile``: its rendered cards)."""
    shown = set(profile)
    return sum(1 for card in cards_of(block) if card not in shown)


def presented_as_current(block: str, phrases: Sequence[str]) -> bool:
    """Whether a phrase appears in a card of ``block`` whose header does not mark it as changed."""
    lowered = [p.lower() for p in phrases]
    for card in cards_of(block):
        header = _CARD.match(card)
        if header and not _MARKED.search(header.group()) and any(p in without_headers(card).lower() for p in lowered):
            return True
    return False


def without_headers(text: str) -> str:
    """``text`` without its cards' headers: what the memories say, not when (a time "09:30" is no "30")."""
    return _CARD.sub("", text)


def score(s: Scenario, block: str, unrelated_block: str, profile: Sequence[str] = ()) -> Result:
    lowered = without_headers(block).lower()
    found = [any(a.lower() in lowered for a in alts) for alts in s.expect]
    standing = without_headers("\n".join(profile)).lower()
    return Result(
        id=s.id,
        lang=s.lang,
        recalled=sum(found),
        facts=len(s.expect),
        superseded_injected=any(f.lower() in lowered for f in s.forbid),
        cards=len(_CARD.findall(block)),
        unrelated_cards=cards_outside_profile(unrelated_block, profile),
        missing=tuple(alts[0] for alts, ok in zip(s.expect, found, strict=True) if not ok),
        kind=s.kind,
        old_as_current=presented_as_current(block, s.forbid),
        moment_standing=any(p.lower() in standing for p in s.moment),
        current_marked=sum(ok and not presented_as_current(block, alts) for alts, ok in zip(s.expect, found, strict=True)),
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
    suite: Suite,
    embedder: str = "bundled",
    tick: Callable[[int], None] = lambda n: None,
    api: Api = "chat",
    part: Part = "all",
) -> list[Result]:
    """Both halves with the rules, then with the model stand-in the frozen half and the tuning cases that
    say what a model extracts."""
    tuning = suite.scenarios if part != "frozen" else ()
    frozen = suite.frozen if part != "tuning" else ()
    ruled = [(s, "tuning") for s in tuning] + [(s, "frozen") for s in frozen]
    results = await _served(suite, ruled, embedder, tick, api, None) if ruled else []
    modelled = [(s, "tuning") for s in tuning if s.extraction] + [(s, "frozen") for s in frozen]
    if modelled:
        results += await _served(suite, modelled, embedder, tick, api, [s for s, _ in modelled])
    return results


def steps(suite: Suite, part: Part = "all") -> int:
    """How many cases ``run`` replays."""
    tuning = len(suite.scenarios) + sum(1 for s in suite.scenarios if s.extraction)
    return tuning * (part != "frozen") + 2 * len(suite.frozen) * (part != "tuning")


async def _served(
    suite: Suite,
    cases: Sequence[tuple[Scenario, str]],
    embedder: str,
    tick: Callable[[int], None],
    api: Api,
    known: Sequence[Scenario] | None,
) -> list[Result]:
    """``cases`` (with their half) through one app: the rules stand in, or ``StandIn`` knows ``known``."""
    with tempfile.TemporaryDirectory(prefix="paperclip-scenarios-") as folder:
        settings = settings_for(Path(folder) / "scenarios.db", embedder)
        upstream = ScriptedUpstream()
        if known is not None:
            pii = settings.defaults.memory.pii
            upstream = ScriptedUpstream(compressor=StandIn(knowledge(known, lambda text: redact(text, pii))))
        app = create_app(settings, transport=upstream.transport())
        async with app.router.lifespan_context(app):
            await _ready(app)
            client = Client(app, upstream, api)
            async with client.http:
                results = await _replay(suite, cases, client, tick, "rules" if known is None else "model")
    return results


async def _replay(
    suite: Suite, cases: Sequence[tuple[Scenario, str]], client: Client, tick: Callable[[int], None], stand_in: str
) -> list[Result]:
    results = []
    for index, (s, half) in enumerate(cases):
        user = f"scenario-{s.id}"
        for chat in s.chats:
            await client.chat(user, chat)
        asked = await client.send(user, [{"role": "user", "content": s.question}])
        aside = await client.send(user, [{"role": "user", "content": suite.unrelated_for(index, s)}])
        result = score(s, memory_block(asked), memory_block(aside), await client.profile(user))
        results.append(dataclasses.replace(result, half=half, stand_in=stand_in))
        tick(1)
    return results


def summary(results: Sequence[Result], stand_in: str = "rules") -> dict[str, Any]:
    """The tuning half's figures with ``stand_in`` (``rules``, or ``model`` for the cases it replays),
    over all its cases and per language."""
    def part(rs: Sequence[Result]) -> dict[str, Any]:
        facts = sum(r.facts for r in rs)
        return {
            "scenarios": len(rs),
            "recall": round(sum(r.recalled for r in rs) / facts, 3) if facts else None,
            "superseded_injected": sum(r.superseded_injected for r in rs),
            "old_values_as_current": sum(r.old_as_current for r in rs),
            "current_values_marked": sum(r.current_marked for r in rs),
            "unrelated_with_cards": sum(r.unrelated_cards > 0 for r in rs),
        }

    results = [r for r in results if r.half == "tuning" and r.stand_in == stand_in]
    langs = sorted({r.lang for r in results})
    return {"all": part(results), **{lang: part([r for r in results if r.lang == lang]) for lang in langs}}


def frozen_summary(results: Sequence[Result]) -> dict[str, dict[str, Any]]:
    """The frozen half's figures per stand-in (``model``, ``rules``) and language."""
    def recall(rs: Sequence[Result]) -> float | None:
        facts = sum(r.facts for r in rs)
        return round(sum(r.recalled for r in rs) / facts, 3) if facts else None

    def part(rs: Sequence[Result]) -> dict[str, Any]:
        return {
            "cases": len(rs),
            "standing_recalled": recall([r for r in rs if r.kind == "standing"]),
            "new_values_recalled": recall([r for r in rs if r.kind == "changed"]),
            "old_values_as_current": sum(r.old_as_current for r in rs if r.kind == "changed"),
            "changed": sum(r.kind == "changed" for r in rs),
            "moments_made_standing": sum(r.moment_standing for r in rs if r.kind == "moment"),
            "moments": sum(r.kind == "moment" for r in rs),
            "current_values_marked": sum(r.current_marked for r in rs),
            "unrelated_with_cards": sum(r.unrelated_cards > 0 for r in rs),
        }

    out: dict[str, dict[str, Any]] = {}
    frozen = [r for r in results if r.half == "frozen"]
    for stand_in in sorted({r.stand_in for r in frozen}):
        rs = [r for r in frozen if r.stand_in == stand_in]
        langs = sorted({r.lang for r in rs})
        out[stand_in] = {"all": part(rs), **{lang: part([r for r in rs if r.lang == lang]) for lang in langs}}
    return out


def markdown(results: Sequence[Result]) -> str:
    lines: list[str] = []
    for stand_in, title in (("rules", "Tuning half:"), ("model", "Tuning half, the model stand-in (the cases "
                                                                  "that say what a model extracts):")):
        tuning = [r for r in results if r.half == "tuning" and r.stand_in == stand_in]
        if not tuning:
            continue
        lines += [
            *([""] if lines else []),
            title,
            "",
            "| scenarios | n | recall | superseded injected | old values as current "
            "| current values only marked | unrelated questions given cards |",
            "|---|---|---|---|---|---|---|",
        ]
        for name, row in summary(tuning, stand_in).items():
            lines.append(
                f"| {name} | {row['scenarios']} | {row['recall']} | {row['superseded_injected']} "
                f"| {row['old_values_as_current']} | {row['current_values_marked']} | {row['unrelated_with_cards']} |"
            )
        missed = [f"{r.id} ({', '.join(r.missing)})" for r in tuning if r.missing]
        leaked = [r.id for r in tuning if r.superseded_injected]
        lines += ["", f"Missed: {'; '.join(missed) or 'none'}", f"Superseded injected: {', '.join(leaked) or 'none'}"]
    frozen = frozen_summary(results)
    if frozen:
        lines += [
            *([""] if lines else []),
            "Frozen half (never tuned on): model = a stand-in answering extraction as prompts/extract.md asks; "
            "rules = no usable model.",
            "",
            "| stand-in | cases | n | standing facts recalled | new values recalled | old values as current "
            "| current values only marked | moments made standing | unrelated questions given cards |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for stand_in, rows in frozen.items():
            for name, row in rows.items():
                lines.append(
                    f"| {stand_in} | {name} | {row['cases']} | {row['standing_recalled']} | "
                    f"{row['new_values_recalled']} | {row['old_values_as_current']} of {row['changed']} | "
                    f"{row['current_values_marked']} | "
                    f"{row['moments_made_standing']} of {row['moments']} | {row['unrelated_with_cards']} |"
                )
        # Which cases missed is not named: whoever reads it could no longer write rules blind to them.
        lines += ["", "The frozen cases that missed are not named here (the JSON of --out holds each result)."]
    return "\n".join(lines)
