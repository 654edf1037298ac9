"""The memory schema: the one declaration of what a memory item is (SPEC §5).

Everything that makes, reads or shows an item reads this module: the
extraction prompt is rendered from it (``prompt_fields``, ``example_reply``),
the model is asked for it (``response_format``), its reply is read through it
(``MemoryItem.model_validate``), the rules and the admin API build it, the
profile chooses by ``category`` and ``standing``, conflict detection compares
``key``, ``category`` and ``about``, and the inspector shows it.

A model's small deviations are normalised here, never a reason to drop a fact:
a category or type in another case or by another name (``"Medical"``,
``"person"``), a category it did not know (``other``), ``"source": "user"``,
a key in another case or with spaces, a standing left out (the category's
``STANDS_BY_DEFAULT``, unless the fact has an expiry: a time that ends),
numbers as strings or out of range (clamped), turns as ``"3, 4"``. Only an
entry without ``content`` holds no fact to keep.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import re
from datetime import datetime
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, model_validator

MemoryType = Literal["entity", "preference", "event", "task", "constraint"]
Category = Literal["health", "identity", "relationship", "preference", "plan", "task", "identifier", "other"]
Source = Literal["user-stated", "inferred"]

TYPES: tuple[str, ...] = get_args(MemoryType)
CATEGORIES: tuple[str, ...] = get_args(Category)
USER = "user"  # ``about`` of a fact about the user themself

TYPE_MEANINGS: dict[str, str] = {
    "entity": "people, pets, places, accounts, identifiers",
    "preference": "likes, dislikes, habits",
    "event": "something that happened or will happen",
    "task": "something the user asked to be reminded of or to do",
    "constraint": "deadlines, requirements, allergies that restrict choices",
}
CATEGORY_MEANINGS: dict[str, str] = {
    "health": "conditions, allergies, diets, medications, pregnancy, mobility and accessibility",
    "identity": "name, pronouns, languages, home, occupation",
    "relationship": "the people and pets in the user's life and their facts",
    "preference": "lasting likes, dislikes, habits, budgets, channels",
    "plan": "events, appointments, deadlines, trips",
    "task": "reminders and to-dos the user asked for",
    "identifier": "order, ticket, card, account and tracking numbers",
    "other": "anything else worth remembering",
}
# Below this confidence a fact is a guess (the reader by meaning files its facts at 0.5): a guess takes only
# the room in the profile that surer facts leave, and replacing one never hides the turn it was read from —
# the turn still says what it said, whatever the guess made of it.
GUESS_BELOW = 0.6


def is_guess(confidence: float) -> bool:
    return confidence < GUESS_BELOW


# Whether a fact of a category shapes every answer when the model did not say.
STANDS_BY_DEFAULT: dict[str, bool] = {
    "health": True, "identity": True, "relationship": True, "preference": True,
    "plan": False, "task": True, "identifier": False, "other": False,
}
# The type a category's fact has when the model gave none that is known, and back.
TYPE_OF_CATEGORY: dict[str, MemoryType] = {
    "health": "constraint", "identity": "entity", "relationship": "entity", "preference": "preference",
    "plan": "event", "task": "task", "identifier": "entity", "other": "entity",
}
CATEGORY_OF_TYPE: dict[str, Category] = {
    "entity": "other", "preference": "preference", "event": "plan", "task": "task", "constraint": "other",
}
# Other names a model gives a category (lower case, spaces and dashes as underscores).
_CATEGORY_NAMES: dict[str, Category] = {
    **{n: "health" for n in ("medical", "allergy", "allergies", "diet", "dietary", "medication", "condition",
                             "accessibility", "mobility", "safety", "health_and_safety", "wellbeing")},
    **{n: "identity" for n in ("personal", "profile", "name", "location", "home", "language", "occupation",
                               "job", "work", "background", "demographic", "personal_info", "bio")},
    **{n: "relationship" for n in ("relationships", "family", "person", "people", "pet", "pets", "social",
                                   "contact", "friend", "friends", "relation")},
    **{n: "preference" for n in ("preferences", "like", "likes", "dislike", "taste", "tastes", "habit",
                                 "habits", "hobby", "hobbies", "interest", "interests", "budget", "style")},
    **{n: "plan" for n in ("plans", "event", "events", "appointment", "deadline", "schedule", "trip",
                           "travel", "calendar", "goal", "goals")},
    **{n: "task" for n in ("tasks", "todo", "to_do", "reminder", "reminders", "action", "action_item")},
    **{n: "identifier" for n in ("identifiers", "id", "ids", "number", "account", "order", "ticket",
                                 "card", "reference", "tracking")},
}
_STATED = frozenset({"user-stated", "user", "stated", "explicit", "user-said", "said", "direct", "user-provided"})
_ABOUT_USER = frozenset({"user", "the user", "me", "myself", "self", "i", "the_user", "用户"})
_TRUE = frozenset({"true", "yes", "1", "y"})
MAX_ABOUT_CHARS = 60


class MemoryItem(BaseModel):
    """One self-contained fact, as extracted, written by hand or read back (before storage)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    type: MemoryType = Field(description="one of " + "; ".join(f'"{t}" ({m})' for t, m in TYPE_MEANINGS.items()))
    category: Category = Field(
        default="other",
        description="one of " + "; ".join(f'"{c}" ({m})' for c, m in CATEGORY_MEANINGS.items())
    )
    standing: bool = Field(
        default=False,
        description="true when the fact should shape every answer, whatever the question (a diet, an "
        "allergy, the user's name, home or language, a lasting taste, a child's allergy, a reminder or a "
        "deadline the user asked to keep in mind until it is done); false for what happened once, events, "
        "trips and appointments, identifiers, and anything true only for now (where the user is this week, "
        "how they feel today)"
    )
    content: str = Field(description="the fact, one self-contained sentence of about 20-50 words")
    key: str = Field(
        description="the slot, in English, lowercase, dot-separated, naming the slot and not the value "
        "(user.location.home, user.daughter.allergy.milk): a later change of the same fact gets the same "
        "key, and two different facts never share one"
    )
    about: str = Field(
        default=USER,
        description='who the fact is about: "user" for the user themself, else the person or animal as the '
        "conversation names them (\"the user's daughter Mia\", \"Caroline\")",
    )
    importance: float = Field(
        default=0.5, description="0 to 1: health and safety and hard deadlines near 0.9, names near 0.8, "
        "tastes near 0.6, passing remarks below 0.4"
    )
    confidence: float = Field(default=0.7, description="0 to 1: how sure you are that the user meant it")
    source: Source = Field(
        default="inferred",
        description='"user-stated" when it was said outright, "inferred" when it follows from what was said',
    )
    expires_at: str | None = Field(
        default=None,
        description="an ISO date (YYYY-MM-DD) after which the fact is no longer true (\"I'm in Paris this "
        'week", "today"), else null',
    )
    turns: tuple[int, ...] = Field(default=(), description='the turn numbers it came from ("[turn N]")')

    @model_validator(mode="before")
    @classmethod
    def _normalised(cls, data: Any) -> Any:
        return normalise(data) if isinstance(data, dict) else data

    @property
    def about_user(self) -> bool:
        return self.about == USER

    def with_turns(self, turns: tuple[int, ...]) -> MemoryItem:
        return self.model_copy(update={"turns": tuple(sorted(set(turns)))})


def normalise(entry: dict[str, Any]) -> dict[str, Any]:
    """A model's entry in the schema's own terms (see the module docstring); content is left to validate."""
    out = dict(entry)
    kind = _word(entry.get("type"))
    category = _category(entry.get("category"))
    if kind not in TYPES:
        kind = TYPE_OF_CATEGORY[category] if category else "entity"
    if category is None:
        category = CATEGORY_OF_TYPE[kind]
    content = " ".join(str(entry.get("content") or "").split())
    expires = _iso(entry.get("expires_at"))
    out.update(
        type=kind,
        category=category,
        standing=_standing(entry.get("standing"), category, expires is not None),
        content=content,
        key=clean_key(entry.get("key")) or derive_key(category, content),
        about=_about(entry.get("about")),
        importance=_unit(entry.get("importance"), 0.5),
        confidence=_unit(entry.get("confidence"), 0.7),
        source="user-stated" if _word(entry.get("source")).replace("_", "-") in _STATED else "inferred",
        expires_at=expires,
        turns=_turn_list(entry.get("turns")),
    )
    return out


def _word(value: Any) -> str:
    return re.sub(r"[\s-]+", "_", str(value or "").strip().lower())


def _category(value: Any) -> Category | None:
    word = _word(value)
    if word in CATEGORIES:
        return word  # type: ignore[return-value]
    if word in _CATEGORY_NAMES:
        return _CATEGORY_NAMES[word]
    # "dietary restrictions", "family_members", "health/safety": the first word that names one.
    for part in re.split(r"[^a-z]+", word):
        if part in CATEGORIES:
            return part  # type: ignore[return-value]
        if part in _CATEGORY_NAMES:
            return _CATEGORY_NAMES[part]
    return "other" if word else None


def _standing(value: Any, category: Category, expires: bool) -> bool:
    """``standing`` as given, else the category's default; a fact given an expiry and no standing is of a
    time that ends ("a headache today", "in Paris this week"): it shapes no answer past it."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return bool(value)
    if isinstance(value, str) and value.strip():
        return value.strip().lower() in _TRUE
    return STANDS_BY_DEFAULT[category] and not expires


def _about(value: Any) -> str:
    text = " ".join(str(value or "").split())[:MAX_ABOUT_CHARS]
    return USER if not text or text.lower() in _ABOUT_USER else text


def clean_key(value: Any) -> str:
    """A key in the slot convention: lower case, dots between parts, underscores inside them."""
    text = re.sub(r"[\s-]+", "_", str(value or "").strip().lower())
    text = re.sub(r"[^\w.]", "", text)
    return re.sub(r"\.{2,}", ".", text).strip("._")[:200]


def derive_key(kind: str, content: str) -> str:
    """A key for an item given none: unique to its content, so it conflicts with nothing."""
    digest = hashlib.sha1(" ".join(content.lower().split()).encode()).hexdigest()[:10]
    return f"user.{kind}.auto_{digest}"


def _unit(value: Any, default: float) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return default
    return default if math.isnan(number) else min(1.0, max(0.0, number))


def _iso(value: Any) -> str | None:
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        datetime.fromisoformat(value.strip())
    except ValueError:
        return None
    return value.strip()


def _turn_list(value: Any) -> tuple[int, ...]:
    raw = list(value) if isinstance(value, list | tuple) else [value]
    found = {int(m) for v in raw if isinstance(v, int | str) for m in re.findall(r"\d+", str(v))}
    return tuple(sorted(found))


# ---------------------------------------------------------------- what the model is shown and asked for

REPLY_FIELD = "memories"  # the structured reply is {"memories": [...]}: a schema's top level is an object


def prompt_fields() -> str:
    """The ``{fields}`` of ``prompts/extract.md``: one line per field, from the declaration."""
    return "\n".join(f"- `{name}`: {f.description}." for name, f in MemoryItem.model_fields.items())


EXAMPLE = MemoryItem(
    type="entity", category="relationship", standing=True, about="the user's cat",
    content="The user's cat is allergic to peanuts, so treats and food for the cat must not contain peanuts.",
    key="user.cat.allergy.peanut", importance=0.9, confidence=0.95, source="user-stated", turns=(3,),
)


def example_reply() -> str:
    """The ``{example}`` of ``prompts/extract.md``: a reply of one item, in the field order declared."""
    return json.dumps([EXAMPLE.model_dump(mode="json")], ensure_ascii=False)


def item_json_schema() -> dict[str, Any]:
    """One item's JSON schema, as strict structured output takes it: every field required, no extras."""
    schema = MemoryItem.model_json_schema()
    props = {name: _plain(spec) for name, spec in schema["properties"].items()}
    return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}


def _plain(spec: dict[str, Any]) -> dict[str, Any]:
    # Titles and defaults are pydantic's; strict mode wants neither.
    return {k: v for k, v in spec.items() if k not in ("title", "default")}


@functools.cache
def response_format() -> dict[str, Any]:
    """The ``response_format`` an extraction call asks for where the upstream takes it.

    Built once (pydantic's schema generation costs ~1 ms, every extraction asked it); read only.
    """
    schema = {
        "type": "object",
        "properties": {REPLY_FIELD: {"type": "array", "items": item_json_schema()}},
        "required": [REPLY_FIELD],
        "additionalProperties": False,
    }
    return {"type": "json_schema", "json_schema": {"name": "memories", "strict": True, "schema": schema}}
