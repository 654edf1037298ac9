"""Ranked hits are built on first read: the same hits as building them all, only the ones read."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from proxy.memory.recall.ranking import Candidate, Hit, Hits, Key, rank
from proxy.memory.search.fusion import fuse
from proxy.store.records import Fragment


def frag(fid: int, position: int) -> Fragment:
    return Fragment(id=fid, session=f"s{fid % 3}", hash=f"h{fid}", role="user", text=f"words {fid}",
                    position=position, tokens=2, created=1_700_000_000.0 + fid * 40_000)


@given(
    st.lists(st.tuples(st.floats(0.0, 1.0), st.floats(0.0, 9.0), st.integers(0, 12)), min_size=1, max_size=30),
    st.integers(0, 40),
)
def test_hits_are_what_building_every_hit_gives_and_only_those_read_are_built(
    rows: list[tuple[float, float, int]], read: int
) -> None:
    vector: dict[Key, float] = {("f", i): v for i, (v, _, _) in enumerate(rows)}
    bm25: dict[Key, float] = {("f", i): b for i, (_, b, _) in enumerate(rows)}
    fused = fuse(vector, bm25, 0.6, 0.4)
    meta = {i: frag(i, p) for i, (_, _, p) in enumerate(rows)}
    cands = [Candidate(at, fused.score[at], meta[k[1]], None) for at, k in enumerate(fused.keys)]
    ranking = rank(cands, [], 20)
    every = [Hit(fused.scored(c.at), c.fragment, c.item, score, dated) for c, score, dated in ranking]
    hits = Hits(fused, ranking)
    assert list(itertools.islice(hits, read)) == every[:read]
    assert sum(h is not None for h in hits._built) == min(read, len(every))
    assert len(hits) == len(every) and hits[:] == every and list(hits) == every
    if every:
        assert hits[-1] == every[-1]
