"""Editing a memory item by hand, and every item's history (created, merged, superseded, edited).

History rows are written by triggers on ``items`` (``ITEM_TRIGGERS``, made by migration 009) for
whatever writes an item; an edit adds its own row, with who made it and the
fields before and after, in the same transaction as the change. An edit of
the content suppresses the turns the item came from, as a supersede does.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..records import scope_of
from .sqlite_database import Connection, Database
from .sqlite_fragments import suppress

# Triggers, so every writer of items (extraction, the admin API, imports) leaves the
# same history without knowing of it; each is one statement.
ITEM_TRIGGERS = (
    """CREATE TRIGGER item_created AFTER INSERT ON items BEGIN
        INSERT INTO item_events (item, tenant, user, event, at, by, detail)
        VALUES (new.id, new.tenant, new.user, 'created', new.created, new.source,
                json_object('content', new.content, 'type', new.type, 'importance', new.importance));
    END""",
    """CREATE TRIGGER item_merged AFTER UPDATE OF seen_count ON items
    WHEN new.seen_count > old.seen_count BEGIN
        INSERT INTO item_events (item, tenant, user, event, at, by, detail)
        VALUES (new.id, new.tenant, new.user, 'merged', new.updated, NULL,
                json_object('seen_count', new.seen_count));
    END""",
    """CREATE TRIGGER item_status AFTER UPDATE OF status ON items
    WHEN new.status != old.status BEGIN
        INSERT INTO item_events (item, tenant, user, event, at, by, detail)
        VALUES (new.id, new.tenant, new.user, new.status, new.updated, NULL,
                json_object('superseded_by', new.superseded_by));
    END""",
    """CREATE TRIGGER item_deleted AFTER DELETE ON items BEGIN
        DELETE FROM item_events WHERE item = old.id;
    END""",
)


EDITABLE = ("content", "terms", "type", "category", "standing", "importance", "expires_at", "expires")


class ItemEdits:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def edit(
        self, tenant: str, user: str, item_id: int, changes: Mapping[str, Any],
        vector: np.ndarray | None, by: str,
    ) -> bool:
        """Apply ``changes`` (columns of ``EDITABLE``) and the new vector; False if no such item."""
        check_editable(changes)
        return await self.db.write(lambda c: _edit(c, tenant, user, item_id, changes, vector, by))

    async def credit(self, tenant: str, user: str, item_id: int, by: str) -> None:
        """Name who created an item (the trigger only knows its ``source``)."""
        await self.db.write(
            lambda c: c.execute(
                "UPDATE item_events SET by = ? WHERE item = ? AND tenant = ? AND user = ?"
                " AND event = 'created'",
                (by, item_id, tenant, user),
            )
        )

    async def history(self, tenant: str, user: str, item_id: int) -> list[dict[str, Any]]:
        rows = await self.db.read(
            lambda c: c.execute(
                "SELECT id, event, at, by, detail FROM item_events"
                " WHERE item = ? AND tenant = ? AND user = ? ORDER BY id",
                (item_id, tenant, user),
            ).fetchall()
        )
        return [
            {"id": int(r["id"]), "event": r["event"], "at": r["at"], "by": r["by"],
             "detail": json.loads(r["detail"])}
            for r in rows
        ]


def check_editable(changes: Mapping[str, Any]) -> None:
    unknown = set(changes) - set(EDITABLE)
    if unknown:
        raise ValueError(f"not editable: {sorted(unknown)}")


def _edit(
    c: Connection, tenant: str, user: str, item_id: int, changes: Mapping[str, Any],
    vector: np.ndarray | None, by: str,
) -> bool:
    shown = [k for k in changes if k not in ("terms", "expires")]
    before = c.execute(
        f"SELECT {', '.join(['id', 'fragment_hashes', *shown])} FROM items WHERE tenant = ? AND user = ? AND id = ?",
        (tenant, user, item_id),
    ).fetchone()
    if before is None:
        return False
    if "content" in changes and changes["content"] != before["content"]:
        # The turns the item came from say what it said before: never inject them as current.
        suppress(c, tenant, user, json.loads(before["fragment_hashes"]))
    now = time.time()
    sets = ", ".join(f"{k} = ?" for k in changes)
    c.execute(
        f"UPDATE items SET {sets}, updated = ? WHERE tenant = ? AND user = ? AND id = ?",
        (*changes.values(), now, tenant, user, item_id),
    )
    if vector is not None:
        # vec0 rows are replaced, not updated in place.
        c.execute("DELETE FROM vec_items WHERE rowid = ?", (item_id,))
        c.execute(
            "INSERT INTO vec_items (rowid, embedding, scope) VALUES (?, ?, ?)",
            (item_id, np.asarray(vector, dtype=np.float32).tobytes(), scope_of(tenant, user)),
        )
    detail = {k: {"from": before[k], "to": changes[k]} for k in shown if before[k] != changes[k]}
    c.execute(
        "INSERT INTO item_events (item, tenant, user, event, at, by, detail) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (item_id, tenant, user, "edited", now, by, json.dumps(detail, ensure_ascii=False)),
    )
    return True
