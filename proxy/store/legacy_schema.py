"""The schema fields of an item stored before items had them, read from its key and type.

Used once per row by the migration that added ``category``, ``standing`` and
``about`` (``sqlite_migrations.m012_item_schema``, ``pg_migrations.m013_item_schema``):
items stored since carry the fields they were extracted with, and nothing
else reads keys this way. The conventions are those of the code that stored
them: ``user.allergy.peanut``, ``user.cat.allergy.peanut``, ``user.name``,
``user.location.home``, ``user.dog.name``, ``user.card.8865``,
``user.deadline.delivery``, ``user.task.<slug>``; a fact stood in the profile
when the user stated it, of importance 0.5 or more, about health, identity,
the people in their life, a lasting taste, an open task or a deadline.
"""

from __future__ import annotations

import re
from typing import NamedTuple

_HEALTH = re.compile(
    r"(?:^|\.)(?:allerg\w*|diet\w*|vegetarian|vegan|halal|kosher|health|medical|medications?"
    r"|pregnan\w*|intoleran\w*|conditions?|disabilit\w*)(?:\.|_|$)"
)
_IDENTITY = re.compile(r"^user\.(?:name|nickname|language|pronouns|occupation|job|location\.home|home)(?:\.|$)")
_IDENTIFIER = re.compile(r"^user\.(?:card|order|account|ticket|tracking|booking|invoice)s?\.")
_PLAN = re.compile(r"^user\.(?:deadline|location\.current|event|trip|appointment)s?(?:\.|$)")
_TASK = re.compile(r"^user\.(?:task|reminder)s?(?:\.|$)")
# The second part of a key that names someone in the user's life rather than a slot of theirs.
_SOMEONE = re.compile(
    r"^(?:dog|cat|puppy|kitten|pet|bird|rabbit|hamster|horse|son|daughter|kid|kids|child|children|baby|toddler"
    r"|wife|husband|partner|boyfriend|girlfriend|brother|sister|mother|father|mom|dad|friend)(?:_\w+)?$"
)
_STANDING = frozenset({"health", "identity", "relationship", "preference", "task"})
_DEADLINE = re.compile(r"^user\.deadlines?(?:\.|$)")
_OF_TYPE = {"preference": "preference", "event": "plan", "task": "task"}


class LegacySchema(NamedTuple):
    category: str
    standing: bool
    about: str


def legacy_schema(key: str, type: str, source: str, importance: float) -> LegacySchema:
    """An old item's category, standing and ``about``, as its key and type said them."""
    key = key.lower()
    parts = key.split(".")
    someone = len(parts) >= 3 and parts[0] == "user" and bool(_SOMEONE.match(parts[1]))
    about = f"the user's {parts[1].replace('_', ' ')}" if someone else "user"
    if someone:
        category = "relationship"
    elif _HEALTH.search(key):
        category = "health"
    elif _IDENTITY.search(key):
        category = "identity"
    elif _IDENTIFIER.search(key):
        category = "identifier"
    elif _TASK.search(key):
        category = "task"
    elif _PLAN.search(key):
        category = "plan"
    else:
        category = _OF_TYPE.get(type, "other")
    stood = category in _STANDING or bool(_DEADLINE.search(key))
    standing = stood and source == "user-stated" and importance >= 0.5
    return LegacySchema(category, standing, about)
