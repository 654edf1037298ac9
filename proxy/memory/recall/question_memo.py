"""A session's last recall, shown again while its question stands: an agent's tool loop keeps its block.

An agent answers one user message in many requests: each round resends the
conversation with the model's tool calls and their results after the same
latest user message. Recall ran again each round, and what the rounds
recorded meanwhile (facts extracted, marks) could change the block. The
block sits in that user message, before the tool calls, so a changed block
broke the client's prompt cache from there on (Anthropic's, OpenAI's) on
every round, and recall's CPU was spent again on the same question.

So each session keeps its last recall with the question it answered: the
query and the place of the user message it was read from (``query.asked_index``:
results with only a client's reminder beside them ask nothing new). A request of the
session that asks the same (a round of the loop, or the same request sent
again) is shown the same block while all of this holds: every memory it
shows stands as shown (a turn still stored; a fact still active, with the
same words and mark, unexpired); no turn of the user's has said a change
since (``changed_since``: it may mark what the block shows); and no turn
stored since lies outside the request's verbatim window, other than the
loop's own rounds (this session's, after the question, which the summaries
hold once compression takes them out of the window; a history indexed for
the first time does not count as such). Otherwise recall runs again: a
deletion, an edit, a supersede, an expiry or a change said takes effect on
the next round. A fact learnt meanwhile waits for the user's next message.
Pure bookkeeping, no I/O: the caller hands in the user's scopes as recall
reads them.
"""

from __future__ import annotations

import datetime as dt
from collections import OrderedDict
from collections.abc import Container
from dataclasses import dataclass
from typing import Generic, TypeVar

from ...config import Memory
from ..lifecycle import is_expired
from ..search.item_index import ItemScope
from ..search.scope_index import ScopeIndex
from .cards import Card

# Sessions remembered; the least recently asked go first.
SESSIONS = 1024
R = TypeVar("R")  # the recall kept
Session = tuple[str, str, str]  # tenant, user, session


@dataclass(frozen=True)
class Asked:
    """What makes two requests of a session the same question."""

    query: str
    latest: int | None  # the place of the user message the query was read from
    settings: Memory


@dataclass(frozen=True)
class Shown:
    """A recall's cards, and the words each fact of them had when shown."""

    asked: Asked
    cards: tuple[Card, ...]
    facts: dict[int, str]
    changes: int  # how many of the user's turns said a change (``changed_since.change_said``) then
    turns: tuple[int, int]  # the user's turns then: the store's generation of them, and how many were read


class QuestionMemo(Generic[R]):
    def __init__(self, sessions: int = SESSIONS) -> None:
        self._last: OrderedDict[Session, tuple[Shown, R]] = OrderedDict()
        self._sessions = sessions

    def last(self, session: Session, asked: Asked) -> R | None:
        """The recall kept for ``session`` if it answered ``asked``; check it with ``holds`` before showing it."""
        kept = self._last.get(session)
        if kept is None or kept[0].asked != asked:
            return None
        self._last.move_to_end(session)
        return kept[1]

    def holds(
        self, session: Session, turns: ScopeIndex, facts: ItemScope | None, changes: int, window: Container[str],
        now: dt.datetime,
    ) -> bool:
        """Whether every memory the kept recall shows stands as it was shown, in the user's scopes at ``now``
        (a fact past its expiry stands no more; ``changes``: how many of the user's turns say a change now,
        one more may mark what it shows), and no turn stored since is one recall may show: outside the
        request's verbatim ``window`` (its fragment hashes) and not a round of the loop itself (this
        session's, after the question's message, which the summaries hold once compression takes them out
        of the window). A history indexed for the first time is neither."""
        kept = self._last.get(session)
        if kept is None:
            return False
        shown = kept[0]
        generation, read = shown.turns
        if changes != shown.changes or turns.generation != generation or turns.size < read:
            return False
        for new in turns.ids[read : turns.size].tolist():
            fragment = turns.fragments.get(new)
            if fragment is None or fragment.hash in window:
                continue
            loop = shown.asked.latest is not None and fragment.position > shown.asked.latest
            if fragment.session != session[2] or not loop:
                return False
        rows = {row.id: row for row in facts.rows} if facts is not None else {}
        changed = facts.changed if facts is not None else frozenset()
        for card in shown.cards:
            for hit in card.hit_ids:
                kind, number = hit[:1], hit[1:]
                if not number.isdigit():
                    return False
                if kind == "f" and int(number) not in turns.fragments:
                    return False
                if kind == "i":
                    row = rows.get(int(number))
                    if (row is None or row.content != shown.facts.get(row.id) or (row.id in changed) != card.changed
                            or is_expired(row.expires_at, now)):
                        return False
        return True

    def keep(
        self, session: Session, asked: Asked, cards: list[Card], turns: ScopeIndex, facts: ItemScope | None,
        changes: int, recall: R,
    ) -> None:
        """Keep ``recall`` (its ``cards``) as the answer to ``asked`` in ``session``."""
        rows = {row.id: row.content for row in facts.rows} if facts is not None else {}
        ids = {int(hit[1:]) for card in cards for hit in card.hit_ids if hit[:1] == "i" and hit[1:].isdigit()}
        shown = Shown(asked, tuple(cards), {i: rows[i] for i in ids if i in rows}, changes,
                      (turns.generation, turns.size))
        self._last[session] = (shown, recall)
        self._last.move_to_end(session)
        while len(self._last) > self._sessions:
            self._last.popitem(last=False)
