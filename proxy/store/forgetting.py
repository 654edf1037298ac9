"""What forgetting part of a user's data takes with it: the rules both stores execute.

- A deleted memory takes the turns it was said in (its ``fragment_hashes``)
  and the assistant's reply right after each of them, which repeats a fact
  as often as not. They are hidden (status ``forgotten``: kept, never
  recalled) or, purged, deleted from the store.
- A forgotten turn (a fragment deleted by hand, or every turn of a forgotten
  session) takes the memories drawn only from forgotten turns; a memory also
  said elsewhere stays, and no longer names the turns that are gone.
- A text is stored once per user, in the session that said it first; each
  other session that said it is noted with its place (``SIGHTINGS``: hash,
  session, position, no text). A forgotten session's turn that another
  session said too is not forgotten: it moves to that session, at its place
  there (``rehomed``), with the memories drawn from it. A deleted turn, or a
  purged one, takes its sightings with it: the user asked to forget the text.
- What a purge deletes leaves its digest behind (``forgotten_turns``: the
  session and the hash, no text), so an app that resends the conversation,
  as every chat app does, does not make Paperclip store those turns again.
- The request traces that hold a purged text (the memory block that showed
  it, the query that said it) are deleted with it, and so are the summary
  chains of the sessions it was said in (``CHAIN_TABLES``: a summary may
  retell it); such a session's next request compresses again from what the
  client sends.

Pure: the stores read the rows, ask here, and write the answer in one
transaction.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence

FORGOTTEN = "forgotten"
# The other sessions that said a stored text, and where.
SIGHTINGS = "fragment_sightings"
# Tables a forgotten session's rows are deleted from, beside its fragments and items.
SESSION_TABLES = ("summaries", "prefixes", "traces", "response_sessions")
# A session's summary chain: what a purge of one of its turns deletes whole.
CHAIN_TABLES = ("summaries", "prefixes")
# A trace is matched on the start of a purged text's first line: cards and candidates show
# texts cut short, never shorter than this. Shorter texts ("Thanks!") hold nothing to find.
TRACE_NEEDLE_CHARS = 60
MIN_TRACE_NEEDLE_CHARS = 12


def rehomed(
    turns: Iterable[tuple[int, str]], sightings: Iterable[tuple[str, str, int]], session: str
) -> dict[int, tuple[str, int]]:
    """Of a forgotten ``session``'s ``turns`` (id, hash), those another session said too, by ``sightings``
    (hash, session, position): each id with the session and place it moves to (the first such session by
    name, then place: any will do, and the same one every time)."""
    elsewhere: dict[str, tuple[str, int]] = {}
    for digest, other, position in sorted(sightings, key=lambda s: (s[1], s[2])):
        if other != session:
            elsewhere.setdefault(digest, (other, position))
    return {turn_id: elsewhere[digest] for turn_id, digest in turns if digest in elsewhere}


def drawn_only_from(
    items: Iterable[tuple[int, str | None, Sequence[str]]], gone: set[str], session: str | None = None
) -> tuple[list[int], dict[int, list[str]]]:
    """Of ``items`` (id, session, source hashes): those to delete, and the others' sources left.

    An item goes when every turn it names is ``gone`` (and it names one), or
    when ``session`` is being forgotten and the item came from it naming no
    turn. An item that loses some of its turns keeps the rest (in the map).
    """
    delete: list[int] = []
    kept: dict[int, list[str]] = {}
    for item_id, item_session, hashes in items:
        left = [h for h in hashes if h not in gone]
        if (hashes and not left) or (not hashes and session is not None and item_session == session):
            delete.append(item_id)
        elif len(left) != len(hashes):
            kept[item_id] = left
    return delete, kept


def replies_to(sources: Iterable[tuple[str, int, str]], turns: Mapping[tuple[str, int], tuple[int, str]]) -> list[int]:
    """The ids of the assistant's replies right after the user's ``sources`` (session, position, role).

    ``turns`` maps (session, position) to (fragment id, role) for the
    positions right after each source.
    """
    out = []
    for session, position, role in sources:
        after = turns.get((session, position + 1))
        if role == "user" and after is not None and after[1] == "assistant":
            out.append(after[0])
    return out


def trace_needles(texts: Iterable[str]) -> list[str]:
    """What a trace holding one of ``texts`` contains, as the trace's JSON spells it."""
    needles = []
    for text in texts:
        lines = text.strip().splitlines()
        head = lines[0].strip()[:TRACE_NEEDLE_CHARS] if lines else ""
        if len(head) >= MIN_TRACE_NEEDLE_CHARS:
            needles.append(json.dumps(head, ensure_ascii=False)[1:-1])
    return sorted(set(needles))
