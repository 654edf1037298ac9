"""Replaying a LoCoMo-format data set through the pipeline that serves requests.

The same ``MemoryPipeline`` the proxy runs — assembled by ``start_memory``
over a real store on a temporary SQLite file, the configured embedder, and a
deterministic in-process compression model — is driven the way a client
drives the proxy: ``prepare`` for each request, ``record`` after it, with the
conversation's own next assistant turn as the upstream's reply.

- ``sessions`` mode: each session is its own chat of the same user, sent
  once, at its last user turn (the index is all that later questions see, and
  recording a session in one request indexes the same fragments, in one
  batch, that recording it turn by turn would).
- ``one-chat`` mode: the whole conversation is one chat, sent at every user
  turn, so compressions happen exactly where they would in serving.

The requests and questions are sent at the times of a clock (``clocks``):
``dated``, each session at its date; ``burst``, all of it a second apart
from the moment the replay starts.

Each question is then asked once per retriever variant (fusion with the
configured weights, BM25 alone, vector alone): in a fresh chat of the user
(sessions) or appended to the whole history (one-chat). By default each
question is then recorded with the data's answer as the upstream's reply, as
real use records it, so later questions are asked over a history that holds
the earlier ones (in one-chat the history grows by each question and reply);
``record_questions=False`` only prepares them, the figure of a memory that
never sees a question.

By default each conversation is replayed and questioned before the next.
``together``: all of them are replayed at once, one request of each in turn
(the users of a busy proxy, whose turns are stored between each other's),
then each one's questions are asked. A user's memory is her own: the figures
must not move.
"""

from __future__ import annotations

import datetime as dt
import tempfile
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..memory.recall.query import periods_in
from ..memory.recall.recall import Recall
from ..memory.redaction import redact
from ..message_text import text_of
from ..pipeline.pipeline_protocol import Prepared
from .clocks import ClockName, at_clock
from .harness import Harness, Mode, Options, open_harness
from .locomo import Conversation, Question, Turn, normalise
from .scoring import answer_presence, ndcg_at, presence, recall_at

RECALL_KS = (5, 10, 20)
NDCG_K = 10
# Sessions without a date are placed a day apart from this one.
_UNDATED = dt.datetime(2023, 1, 1, tzinfo=dt.UTC)


@dataclass(frozen=True)
class Answer:
    """One question asked under one variant."""

    conversation: str
    index: int  # the question's position among the conversation's scored questions
    category: int
    variant: str
    presence: float
    answer_presence: float  # the answer (normalised) in what was forwarded, summaries included
    evidence: int
    in_window: int  # evidence turns already in the verbatim window
    recall: dict[int, float] | None  # over evidence outside the window; None if there is none
    ndcg: float | None
    tokens_forwarded: int
    tokens_memory: int
    cards: int
    # The question names a calendar day or month with its year ("on 16 June, 2023"; ``periods_in``): under ``--clock burst`` every
    # session happened today, so the day it names never came, and only the words can find the turns.
    names_date: bool = False


@dataclass
class Stats:
    requests: int = 0
    questions: int = 0
    skipped: int = 0
    unindexed_turns: int = 0  # assistant turns after a chat's last user turn, beyond its reply
    compression_calls: int = 0
    replay_s: float = 0.0
    questions_s: float = 0.0
    # For the HTML report: each replayed request's (tokens the client sent, tokens
    # forwarded), per conversation; the final scores of the default variant's
    # candidates, injected or not.
    timeline: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    injected_scores: list[float] = field(default_factory=list)
    other_scores: list[float] = field(default_factory=list)


Tick = Callable[[int], None]


# --- replaying the conversation ------------------------------------------------------


def session_times(conv: Conversation) -> list[float]:
    return [
        (s.date or _UNDATED + dt.timedelta(days=s.number)).timestamp() for s in conv.sessions
    ]


def as_message(turn: Turn) -> dict[str, Any]:
    return {"role": turn.role, "content": turn.content}


def requests_of(turns: Sequence[Turn], every_user_turn: bool) -> list[tuple[int, str | None]]:
    """(end, reply) of each request a client sends over ``turns``: the history ``turns[:end]``
    ends with a user turn, and ``reply`` is the assistant turn that follows it, if any."""
    ends = [i + 1 for i, t in enumerate(turns) if t.role == "user"]
    if not every_user_turn:
        ends = ends[-1:]
    out = []
    for end in ends:
        follows = turns[end] if end < len(turns) else None
        out.append((end, follows.content if follows and follows.role == "assistant" else None))
    return out


def unindexed(turns: Sequence[Turn]) -> int:
    """Assistant turns after the last user turn beyond the first: no client request carries them."""
    last = max((i for i, t in enumerate(turns) if t.role == "user"), default=-1)
    return max(0, len(turns) - last - 2)


@dataclass(frozen=True)
class Request:
    """One request of the replayed client: the history it sends, the upstream's reply, its dated time."""

    messages: list[dict[str, Any]]
    reply: str | None
    dated: float


def requests(conv: Conversation, mode: Mode) -> list[Request]:
    """The requests a client sends over the conversation, in order.

    ``sessions``: each session its own chat, sent once at its last user turn,
    at the session's date. ``one-chat``: one chat, sent at every user turn, a
    second apart per position within its session's date.
    """
    times = session_times(conv)
    if mode == "sessions":
        out = []
        for session, at in zip(conv.sessions, times, strict=True):
            messages = [as_message(t) for t in session.turns]
            out += [Request(messages[:end], reply, at) for end, reply in requests_of(session.turns, False)]
        return out
    flat = [(t, at) for s, at in zip(conv.sessions, times, strict=True) for t in s.turns]
    messages = [as_message(t) for t, _ in flat]
    return [
        Request(messages[:end], reply, flat[end - 1][1] + end)
        for end, reply in requests_of([t for t, _ in flat], every_user_turn=True)
    ]


def question_times(conv: Conversation) -> list[float]:
    """The questions' dated times: a day after the last session, a second apart."""
    at = max(session_times(conv), default=_UNDATED.timestamp()) + 86_400
    return [at + i for i in range(len(conv.questions))]


def schedule(conv: Conversation, mode: Mode, clock: ClockName, start: float) -> tuple[list[float], list[float]]:
    """The send times of the replay's requests and of the questions on ``clock`` (burst: from ``start``)."""
    replayed = [r.dated for r in requests(conv, mode)]
    times = at_clock(clock, [*replayed, *question_times(conv)], start)
    return times[: len(replayed)], times[len(replayed) :]


async def replay(
    h: Harness, conv: Conversation, mode: Mode, stats: Stats, tick: Tick, times: Sequence[float]
) -> None:
    """Send the conversation's requests at ``times`` (one per request, see ``schedule``)."""
    await replay_together(h, [conv], mode, stats, tick, [times])


async def replay_together(
    h: Harness,
    conversations: Sequence[Conversation],
    mode: Mode,
    stats: Stats,
    tick: Tick,
    times: Sequence[Sequence[float]],
) -> None:
    """Send the conversations' requests interleaved, one of each in turn, each at its time in ``times``
    (one list per conversation): the users of a busy proxy, whose turns are stored between each other's."""
    queues = [
        list(zip(requests(conv, mode), at, strict=True))[::-1] for conv, at in zip(conversations, times, strict=True)
    ]
    while any(queues):
        for conv, queue in zip(conversations, queues, strict=True):
            if queue:
                request, at = queue.pop()
                stats.timeline.setdefault(conv.id, []).append(await h.send(conv.id, request.messages, at, request.reply))
                stats.requests += 1
                tick(1)
    for conv in conversations:
        chats = [s.turns for s in conv.sessions] if mode == "sessions" else [[t for s in conv.sessions for t in s.turns]]
        stats.unindexed_turns += sum(unindexed(turns) for turns in chats)


def replay_steps(conv: Conversation, mode: Mode) -> int:
    return len(requests(conv, mode))


# --- asking the questions --------------------------------------------------------------


async def ask(
    h: Harness,
    conv: Conversation,
    options: Options,
    tick: Tick,
    stats: Stats | None = None,
    times: Sequence[float] | None = None,
) -> list[Answer]:
    """Ask each question at its time in ``times`` (default: the dated clock's, see ``schedule``)."""
    turns = conv.turns()
    mode = options.mode
    history = [] if mode == "sessions" else [as_message(t) for s in conv.sessions for t in s.turns]
    times = question_times(conv) if times is None else times
    pii = h.tenant.settings.memory.pii
    lookup = _fragment_lookup(turns.values(), pii)
    own: set[str] = set()  # the eval's own words: the questions and the replies it recorded
    out = []
    for index, (q, at) in enumerate(zip(conv.questions, times, strict=True)):
        messages = [*history, {"role": "user", "content": q.text}]
        own.add(normalise(q.text))
        for v in options.variants:
            call = h.call(h.variant(v), conv.id, messages, at)
            await h.pipeline.catch_up(call)  # as serving does (``BoundedPipeline.prepare``)
            prepared = await h.pipeline.prepare(call)
            sent = h.forwarded(call, prepared)
            out.append(measure(conv.id, index, q, v.name, prepared, sent, turns, lookup, own))
            if stats is not None and v is options.variants[0]:
                _scores(prepared.plan.recall if prepared.plan else None, stats)
            tick(1)
        if options.record_questions:
            reply = q.answer or None
            await h.send(conv.id, messages, at, reply)
            own.add(normalise(q.answer))
            # A user's next question comes after this one was recorded, as in serving.
            await h.runtime.background.drain()
            if mode == "one-chat":
                history = [*messages, *([{"role": "assistant", "content": reply}] if reply else [])]
    return out


def _scores(recall: Recall | None, stats: Stats) -> None:
    if recall is None:
        return
    injected = {i for c in recall.cards for i in c.id.split(",")}  # a card of adjacent turns: "f1,f2"
    for hit in recall.hits:
        (stats.injected_scores if hit.id in injected else stats.other_scores).append(hit.score)


def _fragment_lookup(turns: Any, pii: str) -> dict[str, set[str]]:
    """Normalised stored text → the dia_ids of the turns it is (stored text is masked as in serving)."""
    out: dict[str, set[str]] = {}
    for t in turns:
        text = redact(t.content, pii) if pii != "keep" else t.content
        out.setdefault(normalise(text), set()).add(t.dia_id)
    return out


def measure(
    conv: str,
    index: int,
    q: Question,
    variant: str,
    prepared: Prepared,
    sent: list[dict[str, Any]],
    turns: dict[str, Turn],
    lookup: dict[str, set[str]],
    own: Collection[str] = (),
) -> Answer:
    """Score what ``prepare`` forwarded (``sent``) for question ``q``; ``own``: see ``answer_presence``."""
    if prepared.plan is None:
        raise ValueError("the memory pipeline always returns a plan")
    recall, view, counter = prepared.plan.recall, prepared.plan.view, prepared.plan.counter
    forwarded = text = "\n".join(text_of(m) for m in sent)
    for summary, _, _ in view.summaries:
        text = text.replace(summary, " ")  # a paraphrase in a summary does not count as evidence
    evidence = [turns[d].content for d in q.evidence]
    window = normalise("\n".join(text_of(m) for m in view.window[:-1]))
    outside = {d for d in q.evidence if normalise(turns[d].content) not in window}
    ranked = [
        lookup.get(normalise(hit.fragment.text), set())
        for hit in (recall.hits if recall else [])
        if hit.fragment is not None
    ]
    return Answer(
        conversation=conv,
        index=index,
        category=q.category,
        variant=variant,
        presence=presence(evidence, text),
        answer_presence=answer_presence(q.answer, forwarded, own),
        evidence=len(evidence),
        in_window=len(evidence) - len(outside),
        recall={k: recall_at(ranked, outside, k) for k in RECALL_KS} if outside else None,
        ndcg=ndcg_at(ranked, outside, NDCG_K) if outside else None,
        tokens_forwarded=prepared.tokens_forwarded,
        tokens_memory=counter.text(recall.block) if recall and recall.block else 0,
        cards=prepared.memories,
        names_date=bool(periods_in(q.text)),
    )


async def run(
    conversations: Sequence[Conversation], options: Options, tick: Tick = lambda n: None
) -> tuple[list[Answer], Stats]:
    """Replay every conversation (one user each) into one store, then ask its questions.

    On the ``burst`` clock a conversation starts at the present time (the wall clock when its replay
    starts). ``options.together``: all conversations are replayed at once, their requests interleaved
    (``replay_together``), then each one's questions are asked.
    """
    stats = Stats(skipped=sum(c.skipped for c in conversations))
    answers: list[Answer] = []
    with tempfile.TemporaryDirectory(prefix="paperclip-eval-") as folder:
        h = await open_harness(options, Path(folder), conversations)
        try:
            # One conversation after another, or (``together``) all at once.
            for group in [list(conversations)] if options.together else [[c] for c in conversations]:
                now = time.time()
                schedules = [schedule(conv, options.mode, options.clock, now) for conv in group]
                started = time.perf_counter()
                await replay_together(h, group, options.mode, stats, tick, [replayed for replayed, _ in schedules])
                await h.runtime.background.drain()
                stats.replay_s += time.perf_counter() - started
                started = time.perf_counter()
                for conv, (_, asked) in zip(group, schedules, strict=True):
                    answers += await ask(h, conv, options, tick, stats, asked)
                    stats.questions += len(conv.questions)
                stats.questions_s += time.perf_counter() - started
        finally:
            h.close()
        stats.compression_calls = h.fake.calls
    return answers, stats


def total_steps(conversations: Sequence[Conversation], options: Options) -> int:
    per_question = len(options.variants)
    return sum(
        replay_steps(c, options.mode) + per_question * len(c.questions) for c in conversations
    )
