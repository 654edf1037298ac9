"""Managing one user's memories: list, search, add by hand, delete, export, forget, import;
and the raw turns they come from: search, delete one, forget a whole session.

Shared by the admin endpoints, the inspector and the ``paperclip memories``
command; each hands in the store, an ``embed`` function, the in-memory
indexes to drop when a user is forgotten and how to search turns. What a
deletion takes with it is the store's rule (``store/forgetting.py``); the
in-memory indexes see it at their next search (the scope's generation).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from ...errors import BadRequest
from ...store import Store
from ...store.records import Forgot, ItemRow
from ..extraction.chinese_statements import SOMEONE_ELSE as SOMEONE_ELSE_ZH
from ..extraction.meaning import someone_else
from ..extraction.remember import remember, said_in
from ..extraction.rule_patterns import CARE, HAN, ZH_CARE
from ..lifecycle import expiry_epoch, expiry_moment
from ..memory_schema import (
    CATEGORIES,
    CATEGORY_OF_TYPE,
    STANDS_BY_DEFAULT,
    TYPES,
    USER,
    MemoryItem,
    clean_key,
    derive_key,
)
from ..recall.recall import TurnMarks
from ..redaction import redact
from ..search.bm25 import BM25Index, tokenize
from ..search.embedder import BUNDLED_NAME
from ..search.fusion import matches
from ..search.item_index import ItemIndex
from .export_reading import read_export
from .turn_search import FoundTurn, SearchTurns

T = TypeVar("T")
Embed = Callable[[Sequence[str]], Awaitable[np.ndarray]]
ForgetScope = Callable[[str, str], None]
Settle = Callable[[], Awaitable[None]]

# sqlite-vec answers at most this many neighbours per query.
MAX_KNN = 4096
SEARCH_LIMIT = 20
SEARCH_POOL = 500
MAX_CONTENT_CHARS = 4000
NEW_MEMORY_FIELDS = frozenset({"content", "type", "category", "standing", "about", "key", "importance", "expires_at"})
EDIT_FIELDS = frozenset({"content", "type", "category", "standing", "importance", "expires_at"})


# A turn restates a memory when it is this close to it in the bundled model's space (the memory's own
# turns are 0.65-0.8 from it, a turn naming the same thing in passing 0.45) and shares one of its search
# terms; at most this many of the turns found are looked at. Set in that model's space only: with another
# embedding model a deletion takes what it names, no more.
RESTATES_COSINE = 0.6
RESTATEMENTS = 50

_SENTENCE = re.compile(r"[^.!?。！？;；\n]+")
_WORD = re.compile(r"[^\W_][\w'’-]*")
# The user speaking of themself: "I", "me", "my", "we"... (我, 咱).
_FIRST_PERSON = re.compile(r"\b(?:I|I'm|I've|I'd|I'll|I’m|I’ve|I’d|I’ll|me|my|mine|myself|we|we're|our|us)\b|我|咱", re.I)
_IN_CARE = re.compile(rf"(?:{CARE})$", re.I)
_OTHERS_ZH = re.compile(rf"{SOMEONE_ELSE_ZH}|{ZH_CARE}")


def restates(memory: str, text: str, cosine: float | None) -> bool:
    """Whether ``text`` (a turn, another memory) says the fact ``memory`` says.

    Close in meaning (``RESTATES_COSINE``), and a sentence of it names a word of the memory and is about
    whom and what the memory is about (``subjects``): it names no one and nothing the memory does not
    (a sister, a cat, Anna, Friday, order B99881), and of a memory about someone else (a person, one in the
    user's care) it names one of them or does not speak of the user. "Shellfish gives me hives" restates
    "The user is allergic to shellfish"; "We had shellfish pasta in Rome", "I'm allergic to cats" and "My
    sister is allergic to shellfish" do not. Near in meaning is not the same fact: in that model's space
    "The user's sister lives in Lisbon" is 0.84 from "The user lives in Lisbon", the user's dentist on
    Monday 0.75 from a doctor on Friday.
    """
    if cosine is None or cosine < RESTATES_COSINE:
        return False
    terms = set(tokenize(memory))
    low = memory.lower()
    others, _ = subjects(memory)
    for sentence in _SENTENCE.findall(text):
        if not _shares_a_word(terms, tokenize(sentence)):
            continue
        people, names = subjects(sentence)
        if not all(_mentions(low, s) for s in people | names):
            continue
        if not others or people & others or not _FIRST_PERSON.search(sentence):
            return True
    return False


def _shares_a_word(terms: set[str], others: Iterable[str]) -> bool:
    """Whether ``others`` names a word of ``terms``; a Chinese word also when one holds the other, since the
    segmenter cuts a word by its neighbours: 用户对虾过敏 gives 对虾 (a prawn), 吃虾会起疹子 gives 虾."""
    for word in others:
        if word in terms or (HAN.match(word) and any(HAN.match(t) and (word in t or t in word) for t in terms)):
            return True
    return False


def subjects(sentence: str) -> tuple[frozenset[str], frozenset[str]]:
    """Whom and what ``sentence`` names beside the user, lowercased: (people — ``someone_else``: "sister",
    "office" — and those in their care, "cat"; in Chinese 姐姐, 猫), (names — a capital letter past the
    sentence's first word —, identifiers and numbers: "Anna", "B99881", "4pm")."""
    people: set[str] = set()
    names: set[str] = set()
    for i, m in enumerate(_WORD.finditer(sentence)):
        word = m.group()
        low = word.lower().removesuffix("'s").removesuffix("’s")
        if someone_else(low) or _IN_CARE.match(low):
            people.add(low)
        elif any(c.isdigit() for c in word) or (i > 0 and word[0].isupper() and not _FIRST_PERSON.fullmatch(word)):
            names.add(low)
    people.update(m.group() for m in _OTHERS_ZH.finditer(sentence))
    return frozenset(people), frozenset(names)


def _mentions(text: str, subject: str) -> bool:
    """Whether lowercased ``text`` names ``subject``: as a word (or its plural), or, in Chinese, anywhere."""
    if not subject.isascii():
        return subject in text
    return re.search(rf"\b{re.escape(subject)}(?:s|es)?\b", text) is not None


def finds_restatements(embedder_name: str) -> bool:
    """Whether a deletion looks for what restates the memory: in the space ``RESTATES_COSINE`` was set in."""
    return embedder_name == BUNDLED_NAME


@dataclass(frozen=True)
class Added:
    """What adding a memory by hand did: ``added``, ``merged`` into an existing one, or ``superseded``."""

    action: str
    item: ItemRow
    superseded: tuple[int, ...] = ()


@dataclass(frozen=True)
class Found:
    item: ItemRow
    score: float
    vector: float | None
    bm25: float | None


class MemoryAdmin:
    """``forget_scopes`` drop a user's in-memory indexes; ``settle`` lets pending work land first;
    ``scopes`` is the chat path's in-memory index of active items, searched when given;
    ``turns`` searches the user's raw turns (none: ``search_turns`` is refused); ``marks`` reads which facts
    a later turn may have changed (``recall.turn_marks``)."""

    def __init__(
        self,
        store: Store,
        embed: Embed,
        forget_scopes: Sequence[ForgetScope] = (),
        settle: Settle | None = None,
        scopes: ItemIndex | None = None,
        turns: SearchTurns | None = None,
        restatements: bool = False,
        marks: TurnMarks | None = None,
    ) -> None:
        self.store = store
        self.embed = embed
        self.forget_scopes = forget_scopes
        self.settle = settle
        self.scopes = scopes
        self.turns = turns
        self.restatements = restatements  # a deletion also takes what restates the memory (``restates``)
        self.marks = marks

    async def items(self, tenant: str, user: str, *, include_inactive: bool = False) -> list[ItemRow]:
        return await self.store.items.all(tenant, user, include_inactive=include_inactive)

    async def changed_by_turns(self, tenant: str, user: str, facts: Sequence[ItemRow]) -> frozenset[int]:
        """The ids of ``facts`` a later turn of the user's may have changed, as recall marks them (none
        without the chat path's index: ``marks``)."""
        return await self.marks(tenant, user, facts) if self.marks is not None else frozenset()

    async def search(
        self,
        tenant: str,
        user: str,
        query: str,
        *,
        include_inactive: bool = False,
        weights: tuple[float, float] = (0.6, 0.4),
        limit: int = SEARCH_LIMIT,
    ) -> list[Found]:
        """Hybrid search over the user's items: cosine + BM25, plus any item containing ``query``.

        Active items are searched in the chat path's own in-memory scope (when
        ``scopes`` is given): a matrix product and a cached BM25 index, a few
        ms for 10k items. With inactive items, every item gets its cosine from
        the k-NN. Only the ``SEARCH_POOL`` best cosines are fused (a page never
        needs more); a literal substring match always counts.
        """
        if not query.strip():
            return []
        qvec = (await self.embed([query]))[0]
        if self.scopes is not None and not include_inactive:
            scope = await self.scopes.scope(tenant, user)
            rows = {r.id: r for r in scope.rows}
            cosines = scope.matrix @ np.asarray(qvec, dtype=np.float32) if rows else np.zeros(0)
            best = np.argsort(-cosines)[:SEARCH_POOL].tolist()
            vector = {scope.rows[i].id: float(cosines[i]) for i in best}
            keyword = scope.bm25.scores(tokenize(query), limit=SEARCH_POOL)
        else:
            rows = {r.id: r for r in await self.items(tenant, user, include_inactive=include_inactive)}
            k = min(MAX_KNN, await self._item_count(tenant, user))
            vector = {i: s for i, s in await self.store.items.knn(tenant, user, qvec, k) if i in rows}
            keyword = _bm25(rows.values(), query)
        needle = query.strip().casefold()
        literal = {i for i, r in rows.items() if needle in r.content.casefold() or needle in r.key.casefold()}
        found = matches(vector, keyword, literal, query, weights, limit, rows.__contains__)
        return [Found(rows[s.id], s.score, s.vector.raw, s.bm25.raw) for s in found]

    async def _item_count(self, tenant: str, user: str) -> int:
        count, _ = await self.store.items.version(tenant, user)
        return max(count, 1)

    async def add(
        self, tenant: str, user: str, body: Any, *, pii: str, dedup_cosine: float
    ) -> Added:
        """Store a memory written by hand, through the same dedup and conflict rules as extraction."""
        item = new_memory(body, pii)
        done = await remember(self.store.items, self.embed, tenant, user, None, item, dedup_cosine=dedup_cosine)
        row = (await self.store.items.get(tenant, user, [done.item_id]))[done.item_id]
        return Added(done.action, row, done.superseded)

    async def edit(self, tenant: str, user: str, item_id: int, body: Any, *, pii: str, by: str) -> ItemRow | None:
        """Apply a ``PATCH`` (``edit_fields`` validates it); new content is re-embedded. None: no such item."""
        changes = edit_fields(body, pii)
        vector = None
        if "content" in changes:
            changes["terms"] = " ".join(tokenize(changes["content"]))
            vector = (await self.embed([changes["content"]]))[0]
        if not await self.store.edits.edit(tenant, user, item_id, changes, vector, by):
            return None
        return (await self.store.items.get(tenant, user, [item_id]))[item_id]

    async def history(self, tenant: str, user: str, item_id: int) -> list[dict[str, Any]] | None:
        if not await self.store.items.get(tenant, user, [item_id]):
            return None
        return await self.store.edits.history(tenant, user, item_id)

    async def delete(self, tenant: str, user: str, item_id: int, *, purge: bool = False) -> bool:
        """Forget one memory (``forget_memory``); False: no such memory."""
        return await self.forget_memory(tenant, user, item_id, purge=purge) is not None

    async def forget_memory(self, tenant: str, user: str, item_id: int, *, purge: bool = False) -> Forgot | None:
        """Delete a memory; the turns it came from are never injected again, and ``purge`` deletes them.

        A memory that names no turn (a model's that gave none) was said in
        the user's turns of its session most like it (``said_in``). A fact is
        said again in other words ("Shellfish gives me hives" after "I'm
        allergic to shellfish") in turns no extraction tied to the memory:
        the user's turns and memories that restate it (``restates``) go with
        it, where ``restatements`` says (the bundled model's space) and the
        turns can be searched (``turns``).
        """
        row = (await self.store.items.get(tenant, user, [item_id])).get(item_id)
        turns: list[str] = []
        also: list[int] = []
        if row is not None:  # else the store answers None, once what is pending has landed
            looks = self.restatements or (not row.fragment_hashes and row.session is not None)
            active = await self.store.items.active_with_vectors(tenant, user) if looks else []
            vector = next((v for r, v in active if r.id == item_id), None)
            if vector is not None:
                turns = await said_in(self.store.fragments, tenant, user, row, vector)
            if self.restatements:
                turns += await self._restated(tenant, user, row.content)
                also = [r.id for r, v in active if vector is not None and r.id != item_id
                        and restates(row.content, r.content, float(np.dot(vector, v)))]
        return await self._forgetting(
            lambda: self.store.forgetting.memory(tenant, user, item_id, purge=purge, turns=turns, also=also)
        )

    async def _restated(self, tenant: str, user: str, content: str) -> list[str]:
        """The turns that say the memory of ``content`` again (``restates``), where turns can be searched: the
        user's, and the assistant's ("Since Zorblax is allergic to peanuts, ..." in a later chat)."""
        if self.turns is None:
            return []
        found = await self.turns(tenant, user, content, None, (0.6, 0.4), RESTATEMENTS)
        return [t.fragment.hash for t in found if restates(content, t.fragment.text, t.vector)]

    async def forget_turn(self, tenant: str, user: str, fragment_id: int) -> Forgot | None:
        """Delete one raw turn, and the memories drawn only from it; None: no such turn."""
        return await self._forgetting(lambda: self.store.forgetting.fragment(tenant, user, fragment_id))

    async def forget_session(self, tenant: str, session: str) -> dict[str, int] | None:
        """Forget a whole conversation: its turns, summaries, traces, the memories drawn only from it.

        None: nothing of the tenant names the session (never there, another tenant's, or already
        forgotten), as ``forget_turn`` answers for a turn; what stays of a forgotten one (its
        digests, how far it was mined) does not make it known.
        """
        if self.settle is not None:
            await self.settle()
        counts = await self.store.forgetting.session(tenant, session)
        if not any(counts.values()):
            return None
        counts["wal_checkpointed"] = int(await self.store.users.checkpoint())
        return counts

    async def search_turns(
        self, tenant: str, user: str, query: str, *, session: str | None = None,
        weights: tuple[float, float] = (0.6, 0.4), limit: int = SEARCH_LIMIT,
    ) -> list[FoundTurn]:
        """The user's active turns that match ``query``, best first (``turn_search``)."""
        if self.turns is None:
            raise BadRequest("Searching turns needs the embedding model; this caller has none.", param="q")
        return await self.turns(tenant, user, query, session, weights, limit)

    async def _forgetting(self, work: Callable[[], Awaitable[T]]) -> T:
        """Let pending recording land first (none of it is written after), then forget."""
        if self.settle is not None:
            await self.settle()
        done = await work()
        if done is not None:  # the deleted text leaves SQLite's write-ahead log too
            await self.store.users.checkpoint()
        return done

    async def export(self, tenant: str, user: str) -> dict[str, Any]:
        return await self.store.users.export(tenant, user)

    async def forget(self, tenant: str, user: str) -> dict[str, int]:
        if self.settle is not None:
            await self.settle()
        counts = await self.store.users.forget(tenant, user)
        for forget_scope in self.forget_scopes:
            forget_scope(tenant, user)
        return counts

    async def restore(self, tenant: str, user: str, raw: Any, *, pii: str) -> dict[str, int]:
        """Import an export (``portable.read_export`` validates it) with vectors recomputed.

        Text is masked again under the receiving tenant's ``pii`` setting, which
        may be stricter than the one the export was written under.
        """
        data = read_export(raw)
        for item in data["items"]:
            item["content"] = _mask(item["content"], pii)
            item["terms"] = " ".join(tokenize(item["content"]))
            item["expires"] = expiry_epoch(item["expires_at"])
        for fragment in data["fragments"]:
            fragment["text"] = _mask(fragment["text"], pii)
            fragment["terms"] = " ".join(tokenize(fragment["text"]))
        item_vectors = await self._vectors([i["content"] for i in data["items"]])
        fragment_vectors = await self._vectors([f["text"] for f in data["fragments"]])
        return await self.store.users.restore(tenant, user, data, item_vectors, fragment_vectors)

    async def _vectors(self, texts: list[str]) -> np.ndarray:
        return await self.embed(texts) if texts else np.zeros((0, 1), dtype=np.float32)


def new_memory(body: Any, pii: str) -> MemoryItem:
    """Validate the body of ``POST .../memories``; raises ``BadRequest`` naming the field."""
    if not isinstance(body, dict):
        raise BadRequest("The request body must be a JSON object.")
    unknown = sorted(set(body) - NEW_MEMORY_FIELDS)
    if unknown:
        raise BadRequest(f"Unknown field {unknown[0]!r}.", param=unknown[0])
    content = _content(body, pii)
    kind = _type(_text(body, "type") or "entity")
    category = _category(_text(body, "category") or CATEGORY_OF_TYPE[kind])
    return MemoryItem.model_validate({
        "type": kind,
        "category": category,
        "standing": _standing(body.get("standing", STANDS_BY_DEFAULT[category])),
        "about": _text(body, "about") or USER,
        "content": content,
        "key": clean_key(_text(body, "key")) or derive_key(category, content),
        "importance": _importance(body.get("importance", 0.5)),
        "confidence": 1.0,
        "source": "user-stated",
        "expires_at": _expires(body.get("expires_at")),
    })


def edit_fields(body: Any, pii: str) -> dict[str, Any]:
    """Validate the body of ``PATCH .../memories/{id}``: the fields to change, at least one."""
    if not isinstance(body, dict) or not body:
        raise BadRequest("The request body must be a JSON object with fields to change.")
    unknown = sorted(set(body) - EDIT_FIELDS)
    if unknown:
        raise BadRequest(f"Field {unknown[0]!r} cannot be edited.", param=unknown[0])
    changes: dict[str, Any] = {}
    if "content" in body:
        changes["content"] = _content(body, pii)
    if "type" in body:
        changes["type"] = _type(_text(body, "type", required=True))
    if "category" in body:
        changes["category"] = _category(_text(body, "category", required=True))
    if "standing" in body:
        changes["standing"] = int(_standing(body["standing"]))
    if "importance" in body:
        changes["importance"] = _importance(body["importance"])
    if "expires_at" in body:
        changes["expires_at"] = _expires(body["expires_at"])
        changes["expires"] = expiry_epoch(changes["expires_at"])  # the column expiry compares
    return changes


def _content(body: Mapping[str, Any], pii: str) -> str:
    content = _mask(" ".join(_text(body, "content", required=True).split()), pii)
    if not content or len(content) > MAX_CONTENT_CHARS:
        raise BadRequest(f"'content' must hold 1 to {MAX_CONTENT_CHARS} characters.", param="content")
    return content


def _type(kind: str) -> str:
    if kind not in TYPES:
        raise BadRequest(f"'type' must be one of {', '.join(sorted(TYPES))}.", param="type")
    return kind


def _category(value: str) -> str:
    if value not in CATEGORIES:
        raise BadRequest(f"'category' must be one of {', '.join(CATEGORIES)}.", param="category")
    return value


def _standing(value: Any) -> bool:
    if not isinstance(value, bool):
        raise BadRequest("'standing' must be true or false.", param="standing")
    return value


def _text(body: Mapping[str, Any], name: str, *, required: bool = False) -> str:
    value = body.get(name)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value.strip()):
        raise BadRequest(f"'{name}' must be a non-empty string.", param=name)
    return value.strip()


def _importance(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise BadRequest("'importance' must be a number from 0 to 1.", param="importance")
    return float(value)


def _expires(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or expiry_moment(value) is None:
        raise BadRequest("'expires_at' must be an ISO 8601 date or date-time.", param="expires_at")
    return value.strip()


def _mask(text: str, pii: str) -> str:
    return text if pii == "keep" else redact(text, pii)


def _bm25(rows: Iterable[ItemRow], query: str) -> dict[int, float]:
    index: BM25Index[int] = BM25Index()
    for row in rows:
        index.add(row.id, tokenize(row.content))
    return index.scores(tokenize(query))
