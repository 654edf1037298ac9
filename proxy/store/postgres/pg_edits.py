"""Editing a memory item by hand, and its history, on PostgreSQL: the contract of ``sqlite_edits.ItemEdits``.

History rows are written by the ``item_history`` trigger (``pg_item_history``,
migration 008) for whatever writes an item; an edit adds its own row, with who made
it and the fields before and after, in the same transaction as the change.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

import numpy as np
from psycopg.rows import dict_row

from ..sqlite.sqlite_edits import check_editable
from .pg_database import PgConnection, PgDatabase
from .pg_fragments import suppress

_SCOPE = 'tenant = %s AND "user" = %s'


class PgItemEdits:
    def __init__(self, db: PgDatabase) -> None:
        self.db = db

    async def edit(
        self, tenant: str, user: str, item_id: int, changes: Mapping[str, Any],
        vector: np.ndarray | None, by: str,
    ) -> bool:
        """Apply ``changes`` (columns of ``EDITABLE``) and the new vector; False if no such item."""
        check_editable(changes)
        async with self.db.transaction() as conn:
            return await _edit(conn, tenant, user, item_id, changes, vector, by)

    async def credit(self, tenant: str, user: str, item_id: int, by: str) -> None:
        """Name who created an item (the trigger only knows its ``source``)."""
        async with self.db.connection() as conn:
            await conn.execute(
                f'UPDATE item_events SET "by" = %s WHERE item = %s AND {_SCOPE} AND event = %s',
                (by, item_id, tenant, user, "created"),
            )

    async def history(self, tenant: str, user: str, item_id: int) -> list[dict[str, Any]]:
        async with self.db.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(
                f'SELECT id, event, at, "by", detail FROM item_events WHERE item = %s AND {_SCOPE} ORDER BY id',
                (item_id, tenant, user),
            )
            rows = await cur.fetchall()
        return [
            {"id": int(r["id"]), "event": r["event"], "at": r["at"], "by": r["by"],
             "detail": json.loads(r["detail"])}
            for r in rows
        ]


async def _edit(
    conn: PgConnection, tenant: str, user: str, item_id: int, changes: Mapping[str, Any],
    vector: np.ndarray | None, by: str,
) -> bool:
    shown = [k for k in changes if k not in ("terms", "expires")]
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(
            f"SELECT {', '.join(['id', 'fragment_hashes', *shown])} FROM items WHERE {_SCOPE} AND id = %s FOR UPDATE",
            (tenant, user, item_id),
        )
        before = await cur.fetchone()
    if before is None:
        return False
    if "content" in changes and changes["content"] != before["content"]:
        # The turns the item came from say what it said before: never inject them as current.
        await suppress(conn, tenant, user, json.loads(before["fragment_hashes"]))
    now = time.time()
    sets = [f"{k} = %s" for k in changes]
    values: list[Any] = list(changes.values())
    if vector is not None:
        sets.append("embedding = %s")
        values.append(np.asarray(vector, dtype=np.float32))
    await conn.execute(
        f"UPDATE items SET {', '.join(sets)}, updated = %s WHERE {_SCOPE} AND id = %s",
        (*values, now, tenant, user, item_id),
    )
    detail = {k: {"from": before[k], "to": changes[k]} for k in shown if before[k] != changes[k]}
    await conn.execute(
        'INSERT INTO item_events (item, tenant, "user", event, at, "by", detail)'
        " VALUES (%s, %s, %s, %s, %s, %s, %s)",
        (item_id, tenant, user, "edited", now, by, json.dumps(detail, ensure_ascii=False)),
    )
    return True
