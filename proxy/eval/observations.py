"""``--model observations``: LoCoMo's own model-written facts as the extraction model's answers.

Each of a session's ``observation`` entries becomes the memory item a model
following ``prompts/extract.md`` would return for its turns
(``observation_item``), and each ``session_summary`` the summary of its
session; ``knowledge`` gathers them, with every turn's text masked as the
proxy masks what it sends, for ``stand_in.StandIn``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence

from .locomo import Conversation, Observation
from .stand_in import Fact, Item, Knowledge


def observation_item(fact: Observation, user: str) -> Item:
    """The extraction prompt's fields for one observation (``turns`` are added per call).

    The data gives a fact's subject and text only. Its key is unique to the
    fact, so that two facts never supersede each other by a shared key; a
    fact about the other speaker (the replay's assistant side) is keyed under
    their name, is about them (``about``: the card says so, not "user said"),
    of the people in the user's life (``relationship``), and counts as
    inferred, since the user did not say it. The observations are what
    happened in each session — a trip, a talk, a painting — so none stands
    (``standing`` false): they are recalled when a question asks for them.
    """
    digest = hashlib.sha1(" ".join(fact.text.lower().split()).encode()).hexdigest()[:10]
    about_user = fact.speaker == user
    subject = "user" if about_user else "user." + (re.sub(r"\W+", "_", fact.speaker.lower()).strip("_") or "other")
    return {
        "type": "event",
        "category": "other" if about_user else "relationship",
        "standing": False,
        "about": "user" if about_user else fact.speaker,
        "content": fact.text,
        "key": f"{subject}.fact_{digest}",
        "importance": 0.5,
        "confidence": 0.9,
        "source": "user-stated" if about_user else "inferred",
        "expires_at": None,
    }


def knowledge(conversations: Sequence[Conversation], mask: Callable[[str], str]) -> Knowledge:
    """Every conversation's turns, observations and session summaries, as one ``Knowledge``.

    Turn ids are ``<conversation>/<dia_id>``, sessions ``<conversation>/<N>``.
    """
    turns, facts, summaries = [], [], {}
    for conv in conversations:
        for s in conv.sessions:
            session = f"{conv.id}/{s.number}"
            turns += [(f"{conv.id}/{t.dia_id}", session, t.content) for t in s.turns]
            for o in s.observations:
                item = observation_item(o, conv.user)
                facts.append(Fact(tuple(f"{conv.id}/{d}" for d in o.turns), _masked(item, mask)))
            if s.summary:
                summaries[session] = mask(s.summary)
    return Knowledge.of(turns, facts, summaries, mask)


def _masked(item: Item, mask: Callable[[str], str]) -> Item:
    # The model only ever sees masked text, so it can only write masked values.
    return {**item, "content": mask(str(item["content"]))}
