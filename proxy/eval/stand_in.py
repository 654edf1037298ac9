"""A stand-in for a compression model that follows the prompts: it answers from what it is told.

The eval's default stand-in (``fake.fake_summary``) answers every call with a
'summary' that is not JSON, so extraction falls back to the rules. This one
answers the way a model following ``prompts/`` would, with facts written
beforehand — LoCoMo's own model-written ``observation`` lists, or a scenario's
expected extraction — and it sees only what the proxy sends it:

- an extraction call (``extract.md``) gets, as the prompt's JSON array, the
  facts drawn from the turns its transcript holds, and only those, each with
  the transcript's ``[turn N]`` numbers of its turns (and a fact written
  with ``expires_in_days`` gets the date that many days after the prompt's
  "Today is", as a model reading it would write); ``[]`` when none of the
  transcript's turns gave a fact;
- a summary call (``summarize.md``) gets the summaries of the sessions its
  transcript's turns belong to, and a merge (``merge.md``) those of the
  sessions its summaries covered (this stand-in wrote them), each cut to
  its share of a third of the source's words, so the compressor accepts it;
- a reconcile call (``reconcile.md``) gets a verdict per pair: the same words
  merge, a fact the data says a later statement changed (``Knowledge.replaces``)
  is superseded by it, anything else is added;
- every other call (query rewrite) and any summary of turns it knows nothing
  of gets ``fake_summary``'s reply, as in the rules stand-in.

Turns are recognised by their text, whitespace-normalised (the caller masks
the known texts as the proxy masks what it sends). A text said in several
turns (a "Thanks!") is read as the one in a session that the transcript's
other turns place it in. Everything but ``StandIn``'s memo of its own
summaries is pure.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..prompts import Prompts
from .fake import fake_summary

Item = dict[str, Any]  # a memory item's fields as the extraction prompt asks for them, without "turns"
Line = tuple[int, str]  # a transcript's turn number and text
_MARK = "\x00"

_INNER = re.compile(r"<(transcript|summaries|pairs)>\n?(.*?)</\1>", re.S)
_EXTRACTION_LINE = re.compile(r"^\[turn (\d+)\] [^:\n]*: ?", re.M)
_SUMMARY_LABEL = re.compile(r"^Turn (\d+) \([^)\n]*\):[ \t]*$", re.M)
_SUMMARY_BLOCK = re.compile(r"<summary turns=\"[^\"]*\">\n?(.*?)\n?</summary>", re.S)
_RANGE = re.compile(r"^Turns \d+–\d+: ")
_TODAY = re.compile(r"^Today is (\d{4}-\d{2}-\d{2})\.", re.M)


def normalise(text: str) -> str:
    return " ".join(text.split())


@dataclass(frozen=True)
class Fact:
    """A memory item and the turns it was drawn from (their ids in the ``Knowledge``)."""

    turns: tuple[str, ...]
    item: Item


@dataclass(frozen=True)
class Knowledge:
    """What the stand-in knows beyond the prompt: each turn's text, session, facts; each session's summary."""

    texts: Mapping[str, tuple[str, ...]]  # normalised text -> the ids of the turns said so
    session: Mapping[str, str]  # turn id -> its session
    facts: Mapping[str, tuple[Fact, ...]]  # turn id -> the facts drawn from it
    summaries: Mapping[str, str]  # session -> its summary
    # A fact's normalised content -> those of the earlier facts it changes (the data says which)
    replaces: Mapping[str, frozenset[str]] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        turns: Iterable[tuple[str, str, str]],
        facts: Iterable[Fact] = (),
        summaries: Mapping[str, str] | None = None,
        mask: Callable[[str], str] = lambda text: text,
        replaces: Iterable[tuple[str, str]] = (),
    ) -> Knowledge:
        """From ``(id, session, text)`` turns; ``mask`` is applied to the texts as the proxy masks them.

        ``replaces``: (new content, old content) of facts a later statement changed.
        """
        texts: dict[str, list[str]] = {}
        session: dict[str, str] = {}
        for turn_id, sess, text in turns:
            texts.setdefault(normalise(mask(text)), []).append(turn_id)
            session[turn_id] = sess
        by_turn: dict[str, list[Fact]] = {}
        for fact in facts:
            for turn_id in dict.fromkeys(fact.turns):
                by_turn.setdefault(turn_id, []).append(fact)
        changed: dict[str, set[str]] = {}
        for newer, older in replaces:
            changed.setdefault(normalise(mask(newer)), set()).add(normalise(mask(older)))
        return cls(
            {t: tuple(ids) for t, ids in texts.items()},
            session,
            {t: tuple(fs) for t, fs in by_turn.items()},
            dict(summaries or {}),
            {t: frozenset(olds) for t, olds in changed.items()},
        )


# --- reading the prompt ------------------------------------------------------------------


def prompt_heads(prompts: Prompts) -> dict[str, str]:
    """Each template's text before its first variable: what a prompt rendered from it starts with."""
    heads = {}
    for name in prompts.names:
        rendered = prompts.render(name, **{v: _MARK for v in prompts.variables(name)})
        head = rendered.split(_MARK)[0]
        if len(head.strip()) >= 20:  # too short a head would match other prompts
            heads[name] = head
    return heads


def kind_of(prompt: str, heads: Mapping[str, str]) -> str | None:
    """The template ``prompt`` was rendered from (the longest matching head), or None."""
    found = [(len(head), name) for name, head in heads.items() if prompt.startswith(head)]
    return max(found)[1] if found else None


def inner(prompt: str, tag: str) -> str:
    """The text inside ``<tag>…</tag>`` in ``prompt`` ('' when absent)."""
    for match in _INNER.finditer(prompt):
        if match.group(1) == tag:
            return match.group(2)
    return ""


def _split(text: str, label: re.Pattern[str]) -> list[Line]:
    found = list(label.finditer(text))
    ends = [m.start() for m in found[1:]] + [len(text)]
    return [(int(m.group(1)), text[m.end() : end].strip()) for m, end in zip(found, ends, strict=True)]


def extraction_lines(transcript: str) -> list[Line]:
    """The turns of an extraction transcript: ``[turn N] role: text`` lines (a text may go on)."""
    return _split(transcript, _EXTRACTION_LINE)


def summary_lines(transcript: str) -> list[Line]:
    """The turns of a summary transcript: ``Turn N (role):`` then the turn's text."""
    return _split(transcript, _SUMMARY_LABEL)


# --- answering ------------------------------------------------------------------------


def resolve(lines: Sequence[Line], knowledge: Knowledge) -> list[tuple[int, str]]:
    """(turn number, turn id) of each line whose text is a known turn's.

    A text said in several turns is read as those of them in the sessions
    that the transcript's unambiguous turns are in, when there are any.
    """
    candidates = [(n, knowledge.texts.get(normalise(text), ())) for n, text in lines]
    placed = {knowledge.session[ids[0]] for _, ids in candidates if len(ids) == 1}
    out = []
    for n, ids in candidates:
        near = [i for i in ids if knowledge.session[i] in placed] if len(ids) > 1 else []
        out += [(n, i) for i in (near or ids)]
    return out


def facts_for(resolved: Sequence[tuple[int, str]], knowledge: Knowledge) -> list[Item]:
    """The items of the facts drawn from the resolved turns, each with its turns' numbers, in order."""
    numbers: dict[str, list[int]] = {}
    for n, turn_id in resolved:
        numbers.setdefault(turn_id, []).append(n)
    seen: dict[int, Item] = {}
    for _, turn_id in resolved:
        for fact in knowledge.facts.get(turn_id, ()):
            if id(fact) not in seen:
                turns = sorted({n for t in fact.turns for n in numbers.get(t, ())})
                seen[id(fact)] = {**fact.item, "turns": turns}
    return list(seen.values())


def dated(item: Item, today: dt.date | None) -> Item:
    """``item`` with ``expires_in_days`` turned into ``expires_at`` (None when today is unknown)."""
    if "expires_in_days" not in item:
        return item
    out = {k: v for k, v in item.items() if k != "expires_in_days"}
    days = int(item["expires_in_days"])
    out["expires_at"] = (today + dt.timedelta(days=days)).isoformat() if today else None
    return out


def today_of(prompt: str) -> dt.date | None:
    """The date a prompt's "Today is YYYY-MM-DD." line gives."""
    match = _TODAY.search(prompt)
    return dt.date.fromisoformat(match.group(1)) if match else None


def sessions_of(resolved: Sequence[tuple[int, str]], knowledge: Knowledge) -> dict[str, int]:
    """The sessions of the resolved turns, in order, with how many of the turns each holds."""
    out: dict[str, int] = {}
    for _, turn_id in resolved:
        sess = knowledge.session[turn_id]
        out[sess] = out.get(sess, 0) + 1
    return out


def summary_of(shares: Mapping[str, int], knowledge: Knowledge, source_words: int) -> str | None:
    """The sessions' summaries, each cut to its share of a third of ``source_words``; None if none is known."""
    known = {s: n for s, n in shares.items() if knowledge.summaries.get(s)}
    if not known:
        return None
    room = max(3, source_words // 3)
    total = sum(known.values())
    parts = [" ".join(knowledge.summaries[s].split()[: max(3, room * n // total)]) for s, n in known.items()]
    return " ".join(parts)


_PAIR = re.compile(r"^\[pair (\d+)\]\nknown: (.*)\nnew: (.*)$", re.M)


def verdicts(pairs: str, knowledge: Knowledge) -> list[dict[str, Any]]:
    """``prompts/reconcile.md``'s reply for its ``pairs``: what a model reading both facts judges.

    The same words merge; a fact the data says a later statement changed is superseded by it;
    anything else is another fact ("add", as the prompt asks when unsure).
    """
    out = []
    for number, known, new in _PAIR.findall(pairs):
        old_text, new_text = normalise(known), normalise(new)
        if old_text == new_text:
            decision = "merge"
        elif old_text in knowledge.replaces.get(new_text, ()):
            decision = "supersede"
        else:
            decision = "add"
        out.append({"pair": int(number), "decision": decision})
    return out


@dataclass
class StandIn:
    """Answers compression-model calls (chat ``messages``) from its ``Knowledge``."""

    knowledge: Knowledge
    prompts: Prompts = field(default_factory=Prompts.load)
    # The sessions each summary it wrote covers, by the summary's normalised text: what a merge reads.
    written: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.heads = prompt_heads(self.prompts)

    def __call__(self, messages: list[dict[str, Any]]) -> str:
        prompt = str(messages[-1].get("content", "")) if messages else ""
        kind = kind_of(prompt, self.heads)
        if kind == "extract":
            resolved = resolve(extraction_lines(inner(prompt, "transcript")), self.knowledge)
            today = today_of(prompt)
            return json.dumps([dated(i, today) for i in facts_for(resolved, self.knowledge)], ensure_ascii=False)
        if kind == "summarize":
            source = inner(prompt, "transcript")
            resolved = resolve(summary_lines(source), self.knowledge)
            return self._summary(sessions_of(resolved, self.knowledge), source, messages)
        if kind == "reconcile":
            return json.dumps(verdicts(inner(prompt, "pairs"), self.knowledge))
        if kind == "merge":
            source = inner(prompt, "summaries")
            shares: dict[str, int] = {}
            for block in _SUMMARY_BLOCK.findall(source):
                for sess in self.written.get(normalise(_RANGE.sub("", block.strip())), ()):
                    shares[sess] = shares.get(sess, 0) + 1
            return self._summary(shares, source, messages)
        return fake_summary(messages)

    def _summary(self, shares: Mapping[str, int], source: str, messages: list[dict[str, Any]]) -> str:
        text = summary_of(shares, self.knowledge, len(source.split()))
        if text is None:
            return fake_summary(messages)
        self.written[normalise(text)] = tuple(s for s in shares if self.knowledge.summaries.get(s))
        return text
