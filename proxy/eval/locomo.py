"""The LoCoMo data format, read as the replay protocol says.

A sample has ``conversation`` (``speaker_a``, ``speaker_b``, ``session_N``
lists of turns and ``session_N_date_time``), ``qa`` (``question``,
``evidence``: the ``dia_id``s of the turns that hold the answer, and
``category``), and the data set's model-written notes on each session:
``observation`` (``session_N_observation``: per speaker, facts each tied to
the ``dia_id``s it came from) and ``session_summary``
(``session_N_summary``). ``speaker_a`` speaks as ``user``, ``speaker_b`` as
``assistant``. Nothing here knows about Paperclip.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
ANSWERABLE = (1, 2, 3, 4)

_SESSION = re.compile(r"session_(\d+)")
_EVIDENCE_SPLIT = re.compile(r"[;,\s]+")
# "D11:26", and the misspellings "D:11:26" and "D30:05".
_DIA_ID = re.compile(r"D:?(\d+):(\d+)")
_DATE_TIME = "%I:%M %p on %d %B, %Y"


@dataclass(frozen=True)
class Turn:
    dia_id: str
    role: str  # "user" or "assistant"
    content: str  # the text, plus " [shares a photo: <caption>]" when the turn has one


@dataclass(frozen=True)
class Observation:
    """One of the data set's model-written facts about a speaker, tied to the turns it came from."""

    speaker: str  # the name of the speaker it is about
    text: str
    turns: tuple[str, ...]  # dia_ids of this conversation


@dataclass(frozen=True)
class Session:
    number: int
    date: dt.datetime | None  # UTC; None when the data gives no date
    turns: tuple[Turn, ...]
    observations: tuple[Observation, ...] = ()
    summary: str | None = None  # the data's ``session_N_summary``


@dataclass(frozen=True)
class Question:
    text: str
    category: int
    evidence: tuple[str, ...]  # dia_ids that name a turn of the conversation
    answer: str = ""  # the data's answer (``adversarial_answer`` for category 5), as the upstream's reply


@dataclass(frozen=True)
class Conversation:
    id: str
    sessions: tuple[Session, ...]
    questions: tuple[Question, ...]
    skipped: int  # questions with no evidence turn left (not scored)
    user: str = ""  # speaker_a's name: the one who speaks as ``user``

    def turns(self) -> dict[str, Turn]:
        return {t.dia_id: t for s in self.sessions for t in s.turns}


def load(path: str | Path) -> list[Conversation]:
    """Every sample of a LoCoMo-format JSON file (a list of samples)."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(data, list):
        raise ValueError(f"{path}: expected a JSON list of LoCoMo samples")
    return [conversation(sample, i) for i, sample in enumerate(data)]


def select(conversations: Sequence[Conversation], ids: str | None) -> list[Conversation]:
    """The conversations named in ``ids`` (sample_ids, comma-separated), in the file's order; all when None.

    A name that matches no conversation is an error, not an empty eval.
    """
    if ids is None:
        return list(conversations)
    wanted = {i.strip() for i in ids.split(",") if i.strip()}
    unknown = sorted(wanted - {c.id for c in conversations})
    if unknown or not wanted:
        raise ValueError(f"no conversation {', '.join(unknown) or repr(ids)} in the file")
    return [c for c in conversations if c.id in wanted]


def conversation(sample: dict[str, Any], index: int = 0) -> Conversation:
    conv = sample["conversation"]
    user = conv["speaker_a"]
    numbers = sorted(int(m.group(1)) for k in conv if (m := _SESSION.fullmatch(k)))
    turns = {n: _turns(conv[f"session_{n}"], user) for n in numbers}
    known = {t.dia_id for ts in turns.values() for t in ts}
    observed = sample.get("observation") or {}
    summaries = sample.get("session_summary") or {}
    sessions = tuple(
        Session(
            n,
            parse_date(conv.get(f"session_{n}_date_time")),
            turns[n],
            observations(observed.get(f"session_{n}_observation") or {}, known),
            str(summaries[f"session_{n}_summary"]) if summaries.get(f"session_{n}_summary") else None,
        )
        for n in numbers
    )
    questions, skipped = [], 0
    for qa in sample.get("qa", []):
        evidence = parse_evidence(qa.get("evidence") or [], known)
        if not evidence:
            skipped += 1
            continue
        answer = str(qa.get("answer", qa.get("adversarial_answer", "")))
        questions.append(Question(str(qa["question"]), int(qa["category"]), evidence, answer))
    sample_id = str(sample.get("sample_id", f"sample-{index}"))
    return Conversation(sample_id, sessions, tuple(questions), skipped, str(user))


def observations(by_speaker: dict[str, Any], known: set[str] | frozenset[str]) -> tuple[Observation, ...]:
    """A session's ``observation`` entries: ``{speaker: [[text, dia_id or [dia_ids]], ...]}``.

    The ids are read as evidence is; a fact that names no turn of the conversation is left out.
    """
    out = []
    for speaker, facts in by_speaker.items():
        for fact in facts or ():
            if not isinstance(fact, list | tuple) or len(fact) < 2 or not str(fact[0]).strip():
                continue
            ids = fact[1] if isinstance(fact[1], list) else [fact[1]]
            turns = parse_evidence([str(i) for i in ids], known)
            if turns:
                out.append(Observation(str(speaker), str(fact[0]).strip(), turns))
    return tuple(out)


def _turns(raw: Sequence[dict[str, Any]], user: str) -> tuple[Turn, ...]:
    return tuple(
        Turn(str(t["dia_id"]), "user" if t["speaker"] == user else "assistant", turn_content(t))
        for t in raw
    )


def turn_content(turn: dict[str, Any]) -> str:
    caption = turn.get("blip_caption")
    return f"{turn['text']} [shares a photo: {caption}]" if caption else str(turn["text"])


def parse_evidence(entries: Sequence[str], known: set[str] | frozenset[str]) -> tuple[str, ...]:
    """Evidence ids as the protocol reads them: split on ``;``, ``,`` and spaces,
    ``D:11:26`` → ``D11:26``, ``D30:05`` → ``D30:5``; ids naming no turn dropped."""
    out: list[str] = []
    for entry in entries:
        for part in _EVIDENCE_SPLIT.split(str(entry)):
            match = _DIA_ID.fullmatch(part)
            if match is None:
                continue
            dia_id = f"D{int(match.group(1))}:{int(match.group(2))}"
            if dia_id in known and dia_id not in out:
                out.append(dia_id)
    return tuple(out)


def parse_date(text: str | None) -> dt.datetime | None:
    """``"1:56 pm on 8 May, 2023"`` as a UTC datetime; None when absent or unreadable."""
    if not text:
        return None
    try:
        return dt.datetime.strptime(text.strip(), _DATE_TIME).replace(tzinfo=dt.UTC)
    except ValueError:
        return None


def normalise(text: str) -> str:
    """Whitespace-normalised text: what "appears verbatim" compares."""
    return " ".join(text.split())
