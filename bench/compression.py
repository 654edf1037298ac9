"""Rolling compression over long conversations: client tokens vs forwarded tokens.

Replays the LoCoMo dev conversations (and a synthetic 100k-token one) as an
ordinary client does: one chat per conversation, the whole history on every
request, ``speaker_a`` as user and ``speaker_b`` as assistant, a request per
user turn. The real proxy serves on loopback in front of a fake upstream whose
compression model answers after a fixed latency (background mode).

``--agent`` replays two more conversations, through ``POST /v1/messages``
(Anthropic's Messages API, the real ``anthropic`` SDK's request shape): 200
turns of an agent loop built from the synthetic chat, each user turn asking,
the model calling a tool, the tool's result (the chat's next assistant turn)
and the model's answer; and one task of as many rounds (``agent-task-50``:
the first question, then round after round of a tool call and its result
with no new question, the user typing a few words beside the results of the
fourth round, as one does in Claude Code). Both are held to the same bound,
the task's with its question and its latest round in place of the latest
user turn.

Reported per conversation: forwarded / client tokens at turns 100, 200, 400
and at the end; the worst request against the bound (window + summary budget
+ memory budget + system + latest user, + 10%); prefix stability (consecutive
requests whose forwarded prefix before the verbatim window is byte-identical);
compression calls; and Paperclip's added time on the request path. Added time
is the proxy's own measure (``paperclip_added_latency_seconds``: from the
handler's start to the upstream request), read per request; after-response
work is drained between requests, so the compression model's time is never
part of it.

    python bench/compression.py LOCOMO.json [--memory off|on|both] [--out PATH] [--agent]
    python bench/compression.py --agent-only

LOCOMO.json is the LoCoMo file (docs/recall.md says where to get it). LoCoMo
is CC BY-NC 4.0: it is read from its path, never copied into the repo.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import random
import re
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from proxy import config  # noqa: E402
from proxy.context.assembly import SUMMARY_HEADER  # noqa: E402
from proxy.server.app import create_app  # noqa: E402
from proxy.tokens import TokenCounter  # noqa: E402
from tests.fake_upstream import FakeUpstream, completion, fake_summary  # noqa: E402
from tests.servers import ServerThread  # noqa: E402

OUT = ROOT / "bench" / "results" / "compression.json"
MODEL = "gpt-4o-mini"
KEY = "pk-bench"
CHECKPOINTS = (100, 200, 400)
SUMMARY_MARK = SUMMARY_HEADER.split("(")[0].strip()
_SOURCE = re.compile(r"<(transcript|summaries)>(.*?)</\1>", re.S)
Messages = list[dict[str, Any]]


# --- conversations --------------------------------------------------------------------------


def locomo(path: Path) -> list[tuple[str, Messages]]:
    """Each sample as one chat: ``speaker_a`` → user, ``speaker_b`` → assistant, photos as text."""
    out = []
    for sample in json.loads(path.read_text()):
        conv = sample["conversation"]
        messages: Messages = []
        n = 1
        while f"session_{n}" in conv:
            for turn in conv[f"session_{n}"]:
                text = turn["text"]
                if turn.get("blip_caption"):
                    text += f" [shares a photo: {turn['blip_caption']}]"
                role = "user" if turn["speaker"] == conv["speaker_a"] else "assistant"
                messages.append({"role": role, "content": text})
            n += 1
        out.append((sample["sample_id"], messages))
    return out


_VOCAB = [
    "order",
    "invoice",
    "shipment",
    "Berlin",
    "Madrid",
    "refund",
    "ticket",
    "account",
    "password",
    "deadline",
    "Monday",
    "meeting",
    "budget",
    "report",
    "draft",
    "review",
    "server",
    "database",
    "migration",
    "latency",
    "cache",
    "feature",
    "customer",
    "contract",
    "renewal",
    "discount",
    "warehouse",
    "pallet",
    "courier",
    "address",
    "allergy",
    "peanuts",
    "vegetarian",
    "flight",
    "hotel",
    "visa",
    "passport",
]


def synthetic(tokens: int, counter: TokenCounter, seed: int = 7) -> Messages:
    """A support-style chat of about ``tokens`` tokens: varied turn lengths, numbers and names."""
    rng = random.Random(seed)
    messages: Messages = [{"role": "system", "content": "You are a helpful support assistant."}]
    total = 0
    i = 0
    while total < tokens:
        role = "user" if i % 2 == 0 else "assistant"
        words = [
            rng.choice(_VOCAB) for _ in range(rng.randint(15, 60) * (1 if role == "user" else 3))
        ]
        words.insert(rng.randrange(len(words)), f"#{rng.randint(1000, 99999)}")
        messages.append({"role": role, "content": f"({i}) " + " ".join(words) + "."})
        total += counter.message(messages[-1])
        i += 1
    if messages[-1]["role"] != "user":
        messages.append({"role": "user", "content": "Please sum up where we are."})
    return messages


def requests_of(messages: Messages) -> list[int]:
    """History lengths the client sends: one request per user turn, ending with it."""
    return [i + 1 for i, m in enumerate(messages) if m["role"] == "user"]


# --- the servers ----------------------------------------------------------------------------


@dataclass
class ModelCalls:
    summaries: int = 0
    merges: int = 0
    extractions: int = 0


def terse_summary(messages: Messages, ratio: float) -> str:
    """A fake summary of ``ratio`` times its source's words (the first ones)."""
    prompt = str(messages[-1].get("content", ""))
    found = _SOURCE.search(prompt)
    words = (found.group(2) if found else prompt).split()
    return "Summary: " + " ".join(words[: max(3, int(len(words) * ratio))])


def fake_model(latency_s: float, calls: ModelCalls, ratio: float | None) -> FakeUpstream:
    """The upstream: a short chat reply; as compression model, a fake summary after ``latency_s``.

    ``ratio`` None: the tests' ``fake_summary`` (six words a line, at most a third
    of the words: about 40% of a LoCoMo transcript's tokens); else ``terse_summary``.
    """

    async def compression(request: Request, body: dict[str, Any]) -> Response:
        await asyncio.sleep(latency_s)
        prompt = str(body["messages"][-1].get("content", ""))
        if prompt.startswith("You are extracting"):
            calls.extractions += 1
            return JSONResponse(completion("[]"))
        if "<summaries>" in prompt:
            calls.merges += 1
        else:
            calls.summaries += 1
        messages = body["messages"]
        text = fake_summary(messages) if ratio is None else terse_summary(messages, ratio)
        return JSONResponse(completion(text))

    async def chat(request: Request, body: dict[str, Any]) -> Response:
        return JSONResponse(completion("Okay."))

    fake = FakeUpstream()
    fake.compression = compression
    fake.chat = chat
    return fake


@dataclass(frozen=True)
class Budgets:
    window: int
    summary: int
    memory: int  # 0 when memory is off


class Harness:
    """The proxy (in this process, on loopback) in front of the fake upstream."""

    def __init__(
        self, budgets: Budgets, latency_s: float, db: Path, ratio: float | None = None
    ) -> None:
        self.budgets = budgets
        self.calls = ModelCalls()
        self.fake = fake_model(latency_s, self.calls, ratio)
        self.upstream = ServerThread(self.fake.app()).start()
        memory = budgets.memory > 0
        raw = {
            "storage": {"url": f"sqlite:///{db}"},
            "embedding": {"model": "bundled" if memory else "hash"},
            "defaults": {
                "upstream": {"base_url": self.upstream.url + "/v1", "api_key": "sk-bench"},
                "anthropic": {"base_url": self.upstream.url, "api_key": "sk-bench"},
                "context": {
                    "recent_window_tokens": budgets.window,
                    "summary_budget_tokens": budgets.summary,
                    "compression_mode": "background",
                },
                "compression": {"model": "fake-compressor", "timeout_s": 20},
                "memory": {"enabled": memory, "budget_tokens": budgets.memory or 800},
            },
            "tenants": {"bench": {"api_keys": [KEY]}},
        }
        self.app = create_app(config.from_dict(raw, env={}))
        self.proxy = ServerThread(self.app).start()
        self.http = httpx.Client(
            base_url=self.proxy.url, headers={"authorization": f"Bearer {KEY}"}, timeout=120
        )
        self._wait_ready()

    def _wait_ready(self, timeout_s: float = 300) -> None:
        deadline = time.monotonic() + timeout_s
        while self.http.get("/readyz").status_code != 200:
            if time.monotonic() > deadline:
                raise RuntimeError("the proxy did not become ready")
            time.sleep(0.05)

    def added_s(self, route: str = "chat") -> float:
        registry = self.app.state.runtime.metrics.registry
        value = registry.get_sample_value("paperclip_added_latency_seconds_sum", {"route": route})
        return float(value or 0.0)

    def drain(self) -> None:
        self.proxy.call(self._settle(), timeout=600)

    async def _settle(self) -> None:
        handlers = self.proxy.server.server_state.tasks
        background = self.app.state.runtime.background
        while handlers or background.pending:
            if handlers:
                await asyncio.wait(set(handlers))
            await background.drain()

    def close(self) -> None:
        self.http.close()
        self.proxy.stop()
        self.upstream.stop()


# --- one conversation -----------------------------------------------------------------------


@dataclass
class Sample:
    messages: int
    tokens_in: int
    forwarded: int
    bound: float
    added_ms: float
    prefix: str  # the forwarded messages before the verbatim window, as JSON
    extends: bool  # the previous forwarded messages are a prefix of these (a full cache hit)


@dataclass
class ConvResult:
    name: str
    requests: list[Sample] = field(default_factory=list)
    summaries: int = 0
    merges: int = 0

    def ratio_at(self, turn: int) -> float | None:
        for r in self.requests:
            if r.messages >= turn:
                return r.tokens_in / r.forwarded
        return None

    @property
    def end_ratio(self) -> float:
        last = self.requests[-1]
        return last.tokens_in / last.forwarded

    @property
    def stable_pairs(self) -> tuple[int, int]:
        pairs = list(zip(self.requests, self.requests[1:], strict=False))
        return sum(a.prefix == b.prefix for a, b in pairs), len(pairs)

    @property
    def extending(self) -> float:
        return sum(r.extends for r in self.requests[1:]) / max(1, len(self.requests) - 1)

    @property
    def worst(self) -> float:
        return max(r.forwarded / r.bound for r in self.requests)


def prefix_json(messages: Messages) -> str:
    """Leading system/developer messages and the summary message: what precedes the window."""
    n = 0
    while n < len(messages) and messages[n].get("role") in ("system", "developer"):
        n += 1
        if str(messages[n - 1].get("content", "")).startswith(SUMMARY_MARK):
            break
    return json.dumps(messages[:n], ensure_ascii=False, separators=(",", ":"))


def replay(h: Harness, name: str, messages: Messages, counter: TokenCounter) -> ConvResult:
    result = ConvResult(name)
    before = ModelCalls(h.calls.summaries, h.calls.merges)
    headers = {"x-paperclip-user": name}
    system = sum(counter.messages([m for m in messages[:1] if m["role"] == "system"]))
    b = h.budgets
    previous: Messages = []
    for n in requests_of(messages):
        history = messages[:n]
        added = h.added_s()
        response = h.http.post(
            "/v1/chat/completions", json={"model": MODEL, "messages": history}, headers=headers
        )
        response.raise_for_status()
        added_ms = (h.added_s() - added) * 1000
        h.drain()  # after-response work (compression) never overlaps the next request
        sent = json.loads(h.fake.chat_requests()[-1].body)["messages"]
        limit = (b.window + b.summary + b.memory + system + counter.message(history[-1])) * 1.1
        result.requests.append(
            Sample(
                messages=n,
                tokens_in=int(response.headers["x-paperclip-tokens-in"]),
                forwarded=int(response.headers["x-paperclip-tokens-forwarded"]),
                bound=limit,
                added_ms=added_ms,
                prefix=prefix_json(sent),
                extends=sent[: len(previous)] == previous,
            )
        )
        previous = sent
        h.fake.requests.clear()
    result.summaries = h.calls.summaries - before.summaries
    result.merges = h.calls.merges - before.merges
    return result


AGENT_TOOL = {"name": "lookup", "description": "Look the booking up",
              "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}


def agent_turns(chat: Messages, turns: int) -> list[tuple[str, str]]:
    """(question, tool result) pairs from a chat: each user turn and the assistant turn after it."""
    pairs = [(a["content"], b["content"]) for a, b in itertools.pairwise(chat)
             if a["role"] == "user" and b["role"] == "assistant"]
    return pairs[: turns // 4]


def send_messages(
    h: Harness, name: str, system: str, messages: Messages, previous: Messages, bound: float
) -> tuple[dict[str, Any], Messages, Sample]:
    """One request through ``/v1/messages`` as the client sends it, drained: the reply's body, the messages
    Paperclip forwarded and the request's sample (``previous``: what the request before it forwarded, for
    ``extends``)."""
    added = h.added_s("messages")
    body = {"model": MODEL, "max_tokens": 512, "system": system, "tools": [AGENT_TOOL], "messages": messages}
    response = h.http.post("/v1/messages", json=body, headers={"x-paperclip-user": name})
    response.raise_for_status()
    added_ms = (h.added_s("messages") - added) * 1000
    h.drain()
    sent = json.loads(h.fake.messages_requests()[-1].body)
    h.fake.requests.clear()
    return response.json(), sent["messages"], Sample(
        messages=len(messages),
        tokens_in=int(response.headers["x-paperclip-tokens-in"]),
        forwarded=int(response.headers["x-paperclip-tokens-forwarded"]),
        bound=bound,
        added_ms=added_ms,
        prefix=json.dumps(sent["system"], ensure_ascii=False, separators=(",", ":")),
        extends=sent["messages"][: len(previous)] == previous,
    )


def replay_agent(h: Harness, name: str, pairs: list[tuple[str, str]], counter: TokenCounter) -> ConvResult:
    """An agent loop through ``/v1/messages``: question, tool call, tool result, answer (four turns
    a pair, two requests); each request held to the chat's bound."""
    result = ConvResult(name)
    before = ModelCalls(h.calls.summaries, h.calls.merges)
    system = "You are a helpful support assistant."
    b = h.budgets
    messages: Messages = []
    previous: Messages = []
    for question, found in pairs:
        for turn in ({"role": "user", "content": question}, None):
            if turn is None:  # the tool's result answers the call the model just made
                call = messages[-1]["content"][0]
                turn = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call["id"], "content": found}]}
            messages.append(turn)
            latest = counter.message({"role": "user", "content": json.dumps(turn["content"])})
            limit = (b.window + b.summary + b.memory + counter.text(system) + latest) * 1.1
            reply, previous, sample = send_messages(h, name, system, messages, previous, limit)
            messages.append({"role": "assistant", "content": reply["content"]})
            result.requests.append(sample)
    result.summaries = h.calls.summaries - before.summaries
    result.merges = h.calls.merges - before.merges
    return result


TASK_WORDS = "Also check the ones booked for next month while you are at it."


def replay_task(h: Harness, name: str, pairs: list[tuple[str, str]], words_at: int, counter: TokenCounter) -> ConvResult:
    """One task through ``/v1/messages``: the first question, then a round per pair (the model's tool
    call, the pair's text as its result) with no new question, and the user's words typed beside the
    results of round ``words_at``. Each request held to the bound with the question (which leads a window
    begun inside the loop) and the latest round (call and result) in place of the latest user turn."""
    result = ConvResult(name)
    before = ModelCalls(h.calls.summaries, h.calls.merges)
    system = "You are a helpful support assistant."
    b = h.budgets
    question = pairs[0][0]
    messages: Messages = [{"role": "user", "content": question}]
    previous: Messages = []
    for n, (_, found) in enumerate(pairs):
        rounds = counter.messages([{"role": m["role"], "content": json.dumps(m["content"])} for m in messages[-2:]])
        limit = (b.window + b.summary + b.memory + counter.text(system) + counter.text(question) + sum(rounds)) * 1.1
        _, previous, sample = send_messages(h, name, system, messages, previous, limit)
        result.requests.append(sample)
        call = {"type": "tool_use", "id": f"toolu_{n}", "name": "lookup", "input": {"city": f"city {n}"}}
        words = [{"type": "text", "text": TASK_WORDS}] if n == words_at else []
        messages += [{"role": "assistant", "content": [call]},
                     {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call["id"], "content": found},
                                                  *words]}]
    result.summaries = h.calls.summaries - before.summaries
    result.merges = h.calls.merges - before.merges
    return result


# --- report ---------------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[k]


def fmt(x: float | None, spec: str = ".1f", suffix: str = "×") -> str:
    return "—" if x is None else f"{x:{spec}}{suffix}"


def ratio(stable: int, pairs: int) -> float:
    return stable / pairs if pairs else 1.0


def conversation_row(r: ConvResult) -> tuple[str, dict[str, Any]]:
    last = r.requests[-1]
    stable = ratio(*r.stable_pairs)
    added = [q.added_ms for q in r.requests]
    p50, p99 = percentile(added, 50), percentile(added, 99)
    row = (
        f"{r.name:<15} {last.messages:>5} {len(r.requests):>5} {last.tokens_in:>7} "
        f"{last.forwarded:>7} {fmt(r.ratio_at(100)):>6} {fmt(r.ratio_at(200)):>6} "
        f"{fmt(r.ratio_at(400)):>6} {fmt(r.end_ratio):>6} {r.worst:>9.2f} "
        f"{stable:>8.1%} {r.extending:>8.1%} {f'{r.summaries}+{r.merges}':>9} "
        f"{f'{p50:.1f} / {p99:.1f}':>14}"
    )
    data = {
        "messages": last.messages,
        "requests": len(r.requests),
        "tokens_in_end": last.tokens_in,
        "forwarded_end": last.forwarded,
        "ratio": {str(t): r.ratio_at(t) for t in CHECKPOINTS} | {"end": r.end_ratio},
        "max_forwarded_over_bound": r.worst,
        "prefix_stability": stable,
        "extends_previous": r.extending,
        "summaries": r.summaries,
        "merges": r.merges,
        "added_ms_p50": p50,
        "added_ms_p99": p99,
        "per_request": {
            "messages": [q.messages for q in r.requests],
            "tokens_in": [q.tokens_in for q in r.requests],
            "forwarded": [q.forwarded for q in r.requests],
            "added_ms": [round(q.added_ms, 3) for q in r.requests],
        },
    }
    return row, data


def totals_of(results: list[ConvResult]) -> dict[str, Any]:
    every = [q for r in results for q in r.requests]
    at600 = [q.added_ms for q in every if 600 <= q.messages < 700]
    added = [q.added_ms for q in every]
    return {
        "requests": len(every),
        "over_bound": sum(q.forwarded > q.bound for q in every),
        "prefix_stability": ratio(
            sum(r.stable_pairs[0] for r in results), sum(r.stable_pairs[1] for r in results)
        ),
        "added_ms_p50": percentile(added, 50),
        "added_ms_p99": percentile(added, 99),
        "requests_600": len(at600),
        "added_ms_600_p50": percentile(at600, 50),
        "added_ms_600_p99": percentile(at600, 99),
    }


def table(title: str, results: list[ConvResult]) -> tuple[str, dict[str, Any]]:
    head = (
        f"{'conversation':<15} {'msgs':>5} {'reqs':>5} {'in@end':>7} {'fwd@end':>7} "
        f"{'@100':>6} {'@200':>6} {'@400':>6} {'@end':>6} {'fwd/bound':>9} "
        f"{'prefix=':>8} {'extends':>8} {'sum+merge':>9} {'added p50/p99':>14}"
    )
    lines = [title, head, "-" * len(head)]
    data: dict[str, Any] = {"conversations": {}}
    for r in results:
        row, data["conversations"][r.name] = conversation_row(r)
        lines.append(row)
    t = data["totals"] = totals_of(results)
    lines += [
        "-" * len(head),
        f"all {t['requests']} requests: {t['over_bound']} over the bound; prefix stable "
        f"{t['prefix_stability']:.1%}; added p50 {t['added_ms_p50']:.1f} ms, "
        f"p99 {t['added_ms_p99']:.1f} ms; at 600–699 messages ({t['requests_600']} requests) "
        f"p50 {t['added_ms_600_p50']:.1f} ms, p99 {t['added_ms_600_p99']:.1f} ms",
    ]
    return "\n".join(lines), data


def run(
    mode: str, args: argparse.Namespace, conversations: list[tuple[str, Messages]],
    agent: Sequence[tuple[str, list[tuple[str, str]]]] = (),
) -> tuple[str, dict[str, Any]]:
    budgets = Budgets(args.window, args.summary, 800 if mode == "on" else 0)
    counter = TokenCounter(MODEL)
    with tempfile.TemporaryDirectory() as tmp:
        h = Harness(budgets, args.latency_ms / 1000, Path(tmp) / "bench.db", args.summary_ratio)
        try:
            results = []
            for name, messages in conversations:
                started = time.monotonic()
                results.append(replay(h, name, messages, counter))
                took = time.monotonic() - started
                print(f"  memory {mode}: {name} replayed in {took:.0f} s", file=sys.stderr)
            for name, pairs in agent:
                started = time.monotonic()
                results.append(replay_agent(h, name, pairs, counter))
                print(f"  memory {mode}: {name} replayed in {time.monotonic() - started:.0f} s", file=sys.stderr)
                started = time.monotonic()
                task = f"{name.split('-')[0]}-task-{len(pairs)}"
                results.append(replay_task(h, task, pairs, 3, counter))
                print(f"  memory {mode}: {task} replayed in {time.monotonic() - started:.0f} s", file=sys.stderr)
        finally:
            h.close()
    model = (
        "the tests' fake_summary"
        if args.summary_ratio is None
        else f"summaries of {args.summary_ratio:.0%} of their source"
    )
    title = (
        f"memory {mode}: recent_window {budgets.window}, summary_budget {budgets.summary}"
        + (f", memory budget {budgets.memory}" if budgets.memory else "")
        + f"; background mode; compression model: {model}, {args.latency_ms:.0f} ms (excluded)"
    )
    text, data = table(title, results)
    data["budgets"] = asdict(budgets)
    return text, data


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", type=Path, nargs="?", help="the LoCoMo file (not needed with --agent-only)")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--memory", choices=("off", "on", "both"), default="both")
    parser.add_argument("--window", type=int, default=4000)
    parser.add_argument("--summary", type=int, default=2500)
    parser.add_argument(
        "--latency-ms", type=float, default=50.0, help="the compression model's fixed latency"
    )
    parser.add_argument(
        "--summary-ratio",
        type=float,
        default=None,
        help="fake summaries of this fraction of their source (default: the tests' fake, ~40%%)",
    )
    parser.add_argument("--synthetic-tokens", type=int, default=100_000)
    parser.add_argument(
        "--limit", type=int, default=None, help="replay only the first N conversations"
    )
    parser.add_argument("--agent", action="store_true",
                        help="also a 200-turn tool-using conversation and a 50-round task through /v1/messages")
    parser.add_argument("--agent-only", action="store_true", help="only that one (no LoCoMo, no synthetic chat)")
    args = parser.parse_args(argv)
    if args.data is None and not args.agent_only:
        parser.error("the LoCoMo file is needed (or --agent-only)")

    counter = TokenCounter(MODEL)
    synthetic_chat = synthetic(args.synthetic_tokens, counter)
    conversations = [] if args.agent_only else locomo(args.data)[: args.limit]
    if not args.agent_only:
        conversations.append((f"synthetic-{args.synthetic_tokens // 1000}k", synthetic_chat))
    agent = [("agent-messages-200", agent_turns(synthetic_chat[1:], 200))] if args.agent or args.agent_only else []
    modes = ["off", "on"] if args.memory == "both" else [args.memory]
    report: dict[str, Any] = {
        "compression_model_latency_ms": args.latency_ms,
        "encoding": counter.encoding.name,
        "modes": {},
    }
    texts = []
    for mode in modes:
        text, summary = run(mode, args, conversations, agent)
        texts.append(text)
        report["modes"][mode] = summary
    print("\n\n".join(texts))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))
    print(f"\nwritten {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
