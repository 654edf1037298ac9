"""Ranking recall's candidates (pure): each one's boost (importance × recency) for the fusion,
which fused candidates a request may use, the relevance gate, and the final score — fused,
+ a period bonus, × the turn's weight (a user's question, the other side's turn when the
question names one participant: ``speakers``), + support from adjacent turns and from the
best turn nearby in the same session.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, NamedTuple, overload

from ...store.records import Fragment, ItemRow
from ..search.fragment_index import epoch_range
from ..search.fusion import Floor, Fused, Scored, boost_of
from .asked_turns import question_weight
from .query import Period
from .speakers import Role, speaker_weight

Key = tuple[Literal["f", "i"], int]

# Added to the fused score of a fragment said within a period the query names.
PERIOD_BONUS = 0.3
# Share of its best adjacent turn's score that a fragment inherits; of a turn two apart (in a
# dialogue, the same speaker's turn after the other side's reply) half as much, when that gives more.
NEIGHBOUR_WEIGHT = 0.3
SECOND_NEIGHBOUR_WEIGHT = NEIGHBOUR_WEIGHT / 2
# Share of the best score among the other turns of its session within ``NEARBY_TURNS`` that a fragment inherits.
NEARBY_WEIGHT = 0.2
NEARBY_TURNS = 20
# The relevance gate looks at this many of the best fused candidates.
GATE_DEPTH = 10
# A fragment (a turn as said) has no importance of its own: it counts as an average item.
FRAGMENT_IMPORTANCE = 0.5


@dataclass(frozen=True)
class Hit:
    """One ranked candidate: a fragment or an item, with its scores.

    ``scored`` holds the fusion (raw and normalised parts); ``score`` is the
    final rank score: fused + period bonus + neighbour support.
    """

    scored: Scored[Key]
    fragment: Fragment | None = None
    item: ItemRow | None = None
    score: float = 0.0
    dated: bool = False

    @property
    def id(self) -> str:
        kind, number = self.scored.id
        return f"{kind}{number}"


class Candidate(NamedTuple):
    """A fused candidate this request may use: its place in the fusion, its fused score, what it is."""

    at: int
    score: float
    fragment: Fragment | None
    item: ItemRow | None


class Hits(Sequence[Hit]):
    """``rank``'s result as hits, each built on its first read.

    Packing stops reading once the budget is full and the trace reads the
    first few, so most ranked candidates never need a ``Hit`` (nor the
    fusion's ``Scored``) at all.
    """

    def __init__(self, fused: Fused[Key], ranking: Sequence[tuple[Candidate, float, bool]]) -> None:
        self._fused, self._ranking = fused, ranking
        self._built: list[Hit | None] = [None] * len(ranking)

    def __len__(self) -> int:
        return len(self._ranking)

    @overload
    def __getitem__(self, i: int) -> Hit: ...
    @overload
    def __getitem__(self, i: slice) -> list[Hit]: ...
    def __getitem__(self, i: int | slice) -> Hit | list[Hit]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        hit = self._built[i]
        if hit is None:
            c, score, dated = self._ranking[i]
            hit = self._built[i] = Hit(self._fused.scored(c.at), c.fragment, c.item, score, dated)
        return hit

    def __iter__(self) -> Iterator[Hit]:  # the Sequence default probes each index for IndexError
        for i in range(len(self._ranking)):
            yield self[i]


def candidates(
    fused: Fused[Key],
    meta: Mapping[int, Fragment],
    rows: Mapping[int, ItemRow],
    exclude: frozenset[str],
    session: str | None,
) -> list[Candidate]:
    """The usable fused candidates, in fused order."""
    out: list[Candidate] = []
    add, frag_of, row_of, scores = out.append, meta.get, rows.get, fused.score
    for at, (kind, number) in enumerate(fused.keys):
        if kind == "f":
            frag = frag_of(number)
            if frag is not None and frag.hash not in exclude and (session is None or frag.session == session):
                add(Candidate(at, scores[at], frag, None))
        else:
            row = row_of(number)
            if row is not None and (session is None or row.session == session):
                add(Candidate(at, scores[at], None, row))
    return out


def boosts(
    keys: Iterable[Key],
    fragments: Mapping[int, Fragment],
    rows: Mapping[int, ItemRow],
    now: float,
    half_life_days: float | None,
    importance_weight: float,
) -> dict[Key, float] | None:
    """Each candidate's importance × recency factor (``fusion.boost_of``); None when both are off.

    A fragment's age runs from when it was said; an item's from when it was
    last stated (a repeat refreshes it).
    """
    if half_life_days is None and importance_weight == 0.0:
        return None
    out: dict[Key, float] = {}
    for key in keys:
        kind, number = key
        frag = fragments.get(number) if kind == "f" else None
        row = rows.get(number) if kind == "i" else None
        if frag is not None:
            out[key] = boost_of((now - frag.created) / 86_400, FRAGMENT_IMPORTANCE, half_life_days, importance_weight)
        elif row is not None:
            out[key] = boost_of((now - row.updated) / 86_400, row.importance, half_life_days, importance_weight)
    return out


def relevant(cands: Sequence[Candidate], fused: Fused[Key], floor: Floor) -> bool:
    """Whether one of the ``GATE_DEPTH`` best fused candidates clears the floor.

    The floor gates the query, not each candidate: normalised scores cannot
    say "nothing here is relevant", raw ones can; but once something is, the
    turns ranked right after it are the best use of the budget even when
    their own raw scores are weak (dropping them cost 8 points of evidence
    recall on LoCoMo).
    """
    return any(
        floor.passes(fused.vector_raw[c.at], fused.bm25_raw[c.at]) for c in cands[:GATE_DEPTH]
    )


def rank(
    cands: Sequence[Candidate],
    periods: Sequence[Period],
    limit: int | None = None,
    speaker: Role | None = None,
) -> list[tuple[Candidate, float, bool]]:
    """(candidate, final score, dated) best first, at most ``limit``; a non-positive final score is dropped.

    Final = (fused score, + ``PERIOD_BONUS`` when said in a period the query
    names (dated)) × ``question_weight`` (a user's turn that only asks counts
    less) × ``speaker_weight`` (a turn by the side the question is not about
    counts less), + what it inherits from a candidate one or two turns away, + ``NEARBY_WEIGHT`` ×
    the best other candidate's within ``NEARBY_TURNS`` turns of its session.
    """
    spans = [epoch_range(p) for p in periods]
    dated: list[bool] = []
    base: list[float] = []
    for _, score, frag, _ in cands:  # one pass: whether it is dated, then its base score
        d = bool(spans) and frag is not None and _within(frag.created, spans)
        weight = 1.0 if frag is None else question_weight(frag.role, frag.text) * speaker_weight(frag.role, speaker)
        dated.append(d)
        base.append((score + (PERIOD_BONUS if d else 0.0)) * weight)
    sessions = _by_session(cands)
    final = [b + n + d for b, n, d in zip(
        base, neighbour_support(cands, base, sessions), nearby_support(cands, base, sessions), strict=True
    )]
    # Best first; reverse=True keeps ties in fused order as a stable sort does.
    order = sorted(range(len(cands)), key=final.__getitem__, reverse=True)
    out = []
    for j in order[:limit]:
        if final[j] <= 0:
            break
        out.append((cands[j], final[j], dated[j]))
    return out


def _by_session(cands: Sequence[Candidate]) -> list[list[tuple[int, int]]]:
    """Each session's fragment candidates as (position, index), in order of position (then index)."""
    sessions: dict[str, list[tuple[int, int]]] = {}
    for j, (_, _, frag, _) in enumerate(cands):
        if frag is not None:
            sessions.setdefault(frag.session, []).append((frag.position, j))
    out = list(sessions.values())
    for turns in out:
        turns.sort()
    return out


def neighbour_support(
    cands: Sequence[Candidate], base: Sequence[float], sessions: list[list[tuple[int, int]]] | None = None
) -> list[float]:
    """What each candidate inherits from a nearby one, added to its base score in ``rank``: the most of
    ``NEIGHBOUR_WEIGHT`` × an adjacent one's base score and ``SECOND_NEIGHBOUR_WEIGHT`` × one two
    positions away.

    Nearby: fragments of the same session. A turn next to a strong hit is
    likely part of the same exchange (the question before the answer), so it
    inherits part of that hit's score. Two apart is the same speaker going on
    after the other side's reply: of the LoCoMo evidence a block missed in a
    day it showed, twice as much sat two turns from a shown turn as next to
    one, so such a turn inherits a smaller part.
    Items and isolated turns inherit nothing.
    """
    out = [0.0] * len(base)
    for turns in _by_session(cands) if sessions is None else sessions:
        at = dict(turns)  # position → index, the last one kept
        for position, j in at.items():  # each pair once, from its earlier turn
            for offset, weight in ((1, NEIGHBOUR_WEIGHT), (2, SECOND_NEIGHBOUR_WEIGHT)):
                n = at.get(position + offset)
                if n is not None:
                    share, back = weight * base[n], weight * base[j]
                    if share > out[j]:
                        out[j] = share
                    if back > out[n]:
                        out[n] = back
    return out


def nearby_support(
    cands: Sequence[Candidate], base: Sequence[float], sessions: list[list[tuple[int, int]]] | None = None
) -> list[float]:
    """What each candidate inherits from the conversation around it, added to its base score in
    ``rank``: ``NEARBY_WEIGHT`` × the best base score among the other candidates of its session
    at most ``NEARBY_TURNS`` turns away.

    A stretch of conversation that holds a strong hit is likely where the rest
    of the answer was said too (multi-hop and single-hop evidence sits two or
    more turns from the hit as often as next to it), so its turns that are
    relevant on their own move ahead of equally relevant turns elsewhere. Like
    passage-level evidence in document retrieval, the passage lends weight to
    its sentences. Nearby is counted in turns of one session, never in time:
    ten chats of one morning are ten sessions, a long chat over months is one
    session whose far turns are far. Items inherit nothing.
    """
    out = [0.0] * len(base)
    for turns in _by_session(cands) if sessions is None else sessions:
        if len(turns) < 2:
            continue
        before = _window_best(turns, base, NEARBY_TURNS)
        after = _window_best([(-p, j) for p, j in reversed(turns)], base, NEARBY_TURNS)[::-1]
        for (_, j), b, a in zip(turns, before, after, strict=True):
            out[j] = NEARBY_WEIGHT * max(b, a)
    return out


def _window_best(turns: Sequence[tuple[int, int]], base: Sequence[float], reach: int) -> list[float]:
    """For each of ``turns`` ((position, index), ascending): the best base score among the turns
    before it at most ``reach`` positions back, 0.0 when none — a sliding maximum in one pass."""
    out: list[float] = []
    window: deque[tuple[int, float]] = deque()  # (position, score), scores decreasing
    for position, j in turns:
        while window and window[0][0] < position - reach:
            window.popleft()
        out.append(window[0][1] if window else 0.0)
        score = base[j]
        while window and window[-1][1] <= score:
            window.pop()
        window.append((position, score))
    return out


def _within(timestamp: float, spans: Sequence[tuple[float, float]]) -> bool:
    return any(a <= timestamp <= b for a, b in spans)
